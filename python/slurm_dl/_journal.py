"""The metrics journal of this process (client/journal.h has the format).

When dlrun gives rank 0's program DL_EXP_JOURNALS and DL_EXP_TRIAL, every report_metrics
call appends one record to a journal file of this process's own (a forked child makes
its own): `<crc32 of the JSON, 8 hex digits> <JSON>\\n`, created with O_EXCL|O_NOFOLLOW.
`dl-exp` merges the journals into the experiment's SQLite database.
"""

import json
import os
import socket
import threading
import time
import zlib

_lock = threading.Lock()
_state = {"pid": None, "fd": -1, "seq": 0, "synced": 0.0}


def _open():
    if _state["fd"] >= 0:
        os.close(_state["fd"])  # the parent's file, inherited by fork
    directory = os.environ["DL_EXP_JOURNALS"]
    trial = os.environ["DL_EXP_TRIAL"]
    name = f"metrics-{trial}.{socket.gethostname()}.{os.getpid()}.{time.time_ns()}.jsonl"
    flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_APPEND | os.O_CLOEXEC
    _state["fd"] = os.open(os.path.join(directory, name), flags, 0o600)
    _state["pid"] = os.getpid()
    _state["seq"] = 0
    _state["synced"] = 0.0


def append(step, values):
    """Appends one metrics record; a no-op outside a tracked run."""
    if not os.environ.get("DL_EXP_JOURNALS") or not os.environ.get("DL_EXP_TRIAL"):
        return
    with _lock:
        if _state["pid"] != os.getpid():
            _open()
        _state["seq"] += 1
        record = {
            "kind": "metrics",
            "seq": _state["seq"],
            "trial": os.environ["DL_EXP_TRIAL"],
            "step": step,
            "time": time.time(),
            "values": values,
        }
        body = json.dumps(record, separators=(",", ":")).encode()
        line = b"%08x " % zlib.crc32(body) + body + b"\n"
        view = memoryview(line)
        while view:
            view = view[os.write(_state["fd"], view) :]
        now = time.monotonic()
        if now - _state["synced"] > 1.0:
            os.fdatasync(_state["fd"])
            _state["synced"] = now
