"""The page dlrun shares with the program: see client/channel.h for the layout.

Fields are 64-bit, naturally aligned, each with one writer, read and written through
ctypes so that every access is one load or store of the whole value.
"""

import ctypes
import fcntl
import mmap
import os
import struct
import threading

MAGIC = 0x31434C44  # "DLC1" in file order
VERSION = 1
SIZE = 4096
METRICS_BYTES = 1024

# Offsets, as static_assert'ed in client/channel.h.
ATTACHED = 12  # 32 bits
REQUEST_SEQ = 16
TARGET_SEQ = 24
TARGET_STEP = 32
STOPPING = 40
STEP = 48
FROZEN_SEQ = 56
DONE_STEP = 64
DONE_SEQ = 72
METRICS_SEQ = 80
METRICS_STEP = 88
METRICS = 96


def mark_attached(path):
    """Tells dlrun that this program uses the client API (importing slurm_dl does this):
    on a preemption dlrun then waits for its checkpoint. Errors are left to the first
    verb, which reports them."""
    try:
        fd = os.open(path, os.O_RDWR | os.O_CLOEXEC | os.O_NOFOLLOW | os.O_NONBLOCK)
    except OSError:
        return
    try:
        with mmap.mmap(fd, SIZE, mmap.MAP_SHARED, mmap.PROT_READ | mmap.PROT_WRITE) as page:
            if struct.unpack_from("=II", page, 0) == (MAGIC, VERSION):
                struct.pack_into("=I", page, ATTACHED, 1)
    except (OSError, ValueError):
        pass
    finally:
        os.close(fd)


class Channel:
    """The mapping of DL_CLIENT_FILE in this process."""

    def __init__(self, path):
        self.path = path
        self._lock = threading.Lock()
        self._open()
        header = ctypes.c_uint32.from_buffer(self._map, 0).value, ctypes.c_uint32.from_buffer(
            self._map, 4
        ).value
        if header != (MAGIC, VERSION):
            raise RuntimeError(
                f"dl: DL_CLIENT_FILE={path} is not a dlrun channel of version {VERSION}"
            )
        self._fields = {
            offset: ctypes.c_int64.from_buffer(self._map, offset)
            for offset in (
                REQUEST_SEQ, TARGET_SEQ, TARGET_STEP, STOPPING, STEP, FROZEN_SEQ,
                DONE_STEP, DONE_SEQ, METRICS_SEQ, METRICS_STEP,
            )
        }

    def _open(self):
        try:
            self._fd = os.open(self.path, os.O_RDWR | os.O_CLOEXEC)
            self._map = mmap.mmap(self._fd, SIZE, mmap.MAP_SHARED, mmap.PROT_READ | mmap.PROT_WRITE)
        except OSError as e:
            raise RuntimeError(f"dl: couldn't map DL_CLIENT_FILE={self.path}: {e.strerror}") from e
        self._pid = os.getpid()

    def get(self, offset):
        return self._fields[offset].value

    def set(self, offset, value):
        self._fields[offset].value = value

    def write_metrics(self, step, text):
        data = text.encode()[: METRICS_BYTES - 1] + b"\0"
        with self._lock:
            if self._pid != os.getpid():
                # A forked child shares the parent's open file, and with it the flock:
                # its own descriptor makes the lock exclude the parent too.
                self._fd = os.open(self.path, os.O_RDWR | os.O_CLOEXEC)
                self._pid = os.getpid()
            fcntl.flock(self._fd, fcntl.LOCK_EX)
            try:
                seq = self.get(METRICS_SEQ)
                self.set(METRICS_SEQ, seq + 1)  # odd: dlrun does not read
                self._map[METRICS : METRICS + len(data)] = data
                self.set(METRICS_STEP, step)
                self.set(METRICS_SEQ, seq + 2)
            finally:
                fcntl.flock(self._fd, fcntl.LOCK_UN)


def checkpoint_due(step, target_seq, target_step, done_seq):
    """A checkpoint was agreed, this rank reached its step and has not reported it done."""
    return target_seq > 0 and done_seq < target_seq and step >= target_step


def must_wait_for_target(request_seq, target_seq):
    """A round has started whose step is not known yet."""
    return request_seq > target_seq
