"""slurm_dl.ckpt: dl-ckpt checkpoints from Python, through libdlckpt's C interface.

The files are exactly those the C++ library (<dl/ckpt.h>) and `dl-ckpt` write and read:
atomic, checksummed, reshardable. Arrays are numpy arrays; PyTorch users pass
`tensor.numpy()` (CPU) and get numpy arrays back (`torch.from_numpy`).

    from slurm_dl import ckpt

    saver = ckpt.Saver()                  # DL_CKPT_DIR, RANK, WORLD_SIZE from dlrun
    saver.save(step, {"model/w": w}, rng={"torch": rng_bytes}, meta={"epoch": 3})

    path = ckpt.latest_valid(os.environ["DL_CKPT_DIR"])   # or slurm_dl.resume_path()
    with ckpt.Checkpoint(path) as c:
        w = c.read("model/w")

A tensor split across ranks is saved as `ckpt.Part(array, global_shape, offset)`; any
world size can then read any box of it with `Checkpoint.read(name, offset, shape)`.
bfloat16 has no numpy type: pass its raw bits as a uint16 array in `Part(..., dtype="bf16")`
and read them back as uint16.

The library is found through DL_CKPT_LIB (a path), else the dynamic linker
(libdlckpt.so.0, installed by `make install`).
"""

import ctypes
import ctypes.util
import json
import os

import numpy as np

__all__ = ["CheckpointError", "Part", "Saver", "Checkpoint", "latest_valid"]

_NUMPY_TO_DTYPE = {
    np.dtype(np.float16): "f16",
    np.dtype(np.float32): "f32",
    np.dtype(np.float64): "f64",
    np.dtype(np.int32): "i32",
    np.dtype(np.int64): "i64",
    np.dtype(np.uint8): "u8",
}
_DTYPE_TO_NUMPY = {v: k for k, v in _NUMPY_TO_DTYPE.items()}
_DTYPE_TO_NUMPY["bf16"] = np.dtype(np.uint16)
_ERR_LEN = 4096


class CheckpointError(RuntimeError):
    """A checkpoint could not be written or read; the message names the path and reason."""


class Part:
    """This rank's box of a tensor: `array` at `offset` in a tensor of `global_shape`."""

    def __init__(self, array, global_shape=None, offset=None, dtype=None):
        self.array = np.ascontiguousarray(array)
        self.global_shape = tuple(global_shape) if global_shape is not None else None
        self.offset = tuple(offset) if offset is not None else None
        self.dtype = dtype


_lib_handle = None


def _lib():
    global _lib_handle
    if _lib_handle is None:
        name = os.environ.get("DL_CKPT_LIB") or ctypes.util.find_library("dlckpt") or "libdlckpt.so.0"
        try:
            lib = ctypes.CDLL(name)
        except OSError as e:
            raise CheckpointError(
                f"couldn't load libdlckpt ({name}): {e}; set DL_CKPT_LIB to its path"
            ) from None
        p, u64p, sz = ctypes.c_void_p, ctypes.POINTER(ctypes.c_uint64), ctypes.c_size_t
        cs, err = ctypes.c_char_p, ctypes.c_char_p
        lib.dl_ckpt_saver_new.argtypes = [cs, ctypes.POINTER(p), err, sz]
        lib.dl_ckpt_saver_free.argtypes = [p]
        lib.dl_ckpt_saver_free.restype = None
        lib.dl_ckpt_saver_add_tensor.argtypes = [p, cs, cs, ctypes.c_uint, u64p, u64p, u64p, p, err, sz]
        lib.dl_ckpt_saver_add_rng.argtypes = [p, cs, p, sz, err, sz]
        lib.dl_ckpt_saver_save.argtypes = [p, ctypes.c_uint64, cs, ctypes.c_int, err, sz]
        lib.dl_ckpt_saver_wait.argtypes = [p, err, sz]
        lib.dl_ckpt_latest_valid.argtypes = [cs, ctypes.c_char_p, sz, err, sz]
        lib.dl_ckpt_reader_open.argtypes = [cs, ctypes.POINTER(p), err, sz]
        lib.dl_ckpt_reader_close.argtypes = [p]
        lib.dl_ckpt_reader_close.restype = None
        lib.dl_ckpt_reader_info_json.argtypes = [p]
        lib.dl_ckpt_reader_info_json.restype = ctypes.c_char_p
        lib.dl_ckpt_reader_read.argtypes = [p, cs, cs, ctypes.c_uint, u64p, u64p, p, err, sz]
        lib.dl_ckpt_reader_rng.argtypes = [p, ctypes.c_uint, cs, p, ctypes.POINTER(sz), err, sz]
        _lib_handle = lib
    return _lib_handle


def _call(fn, *args):
    err = ctypes.create_string_buffer(_ERR_LEN)
    if fn(*args, err, _ERR_LEN) != 0:
        raise CheckpointError(err.value.decode("utf-8", "replace"))


def _dims(values):
    if values is None:
        return None
    return (ctypes.c_uint64 * len(values))(*[int(v) for v in values])


class _Closing:
    """A handle closed by close(), at the end of a with block, or when collected."""

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def __del__(self):
        self.close()


class Saver(_Closing):
    """Saves this rank's checkpoints (dl::ckpt::Checkpointer). `dir` overrides DL_CKPT_DIR."""

    def __init__(self, dir=None):
        self._handle = ctypes.c_void_p()
        # Kept for close(): collected at the interpreter's exit, the module's globals may be gone.
        self._free = _lib().dl_ckpt_saver_free
        _call(_lib().dl_ckpt_saver_new, dir.encode() if dir else None, ctypes.byref(self._handle))
        self._keep = []

    def save(self, step, tensors, rng=None, meta=None, async_=False):
        """Saves `tensors` ({name: array or Part}) and `rng` ({name: bytes}) as step `step`.
        `meta` may hold epoch, data_loader_position, hyperparameters, user_metadata and
        metrics. With async_, returns once the arrays are copied."""
        lib = _lib()
        self._keep = []  # arrays must outlive the call that reads them
        for name, value in tensors.items():
            part = value if isinstance(value, Part) else Part(value)
            array = part.array
            dtype = part.dtype or _NUMPY_TO_DTYPE.get(array.dtype)
            if dtype is None:
                raise CheckpointError(
                    f"{name}: numpy dtype {array.dtype} has no checkpoint type "
                    "(use f16, f32, f64, i32, i64, u8, or Part(..., dtype='bf16') for uint16 bits)"
                )
            self._keep.append(array)
            _call(
                lib.dl_ckpt_saver_add_tensor,
                self._handle,
                name.encode(),
                dtype.encode(),
                array.ndim,
                _dims(array.shape),
                _dims(part.global_shape),
                _dims(part.offset),
                array.ctypes.data_as(ctypes.c_void_p),
            )
        for name, data in (rng or {}).items():
            data = bytes(data)
            _call(lib.dl_ckpt_saver_add_rng, self._handle, name.encode(), data, len(data))
        meta_json = json.dumps(meta).encode() if meta else None
        _call(lib.dl_ckpt_saver_save, self._handle, int(step), meta_json, 1 if async_ else 0)
        if not async_:
            self._keep = []

    def wait(self):
        """Waits for an asynchronous save and raises its error."""
        _call(_lib().dl_ckpt_saver_wait, self._handle)
        self._keep = []

    def close(self):
        if self._handle:
            self._free(self._handle)
            self._handle = None
            self._keep = []


def latest_valid(dir):
    """The newest checkpoint in `dir` that verifies (quick check), or None."""
    path = ctypes.create_string_buffer(4096)
    _call(_lib().dl_ckpt_latest_valid, dir.encode(), path, len(path))
    return path.value.decode() or None


class Checkpoint(_Closing):
    """One checkpoint (a step directory) opened for reading; reads verify checksums."""

    def __init__(self, path):
        self.path = path
        self._handle = ctypes.c_void_p()
        self._free = _lib().dl_ckpt_reader_close  # see Saver
        _call(_lib().dl_ckpt_reader_open, path.encode(), ctypes.byref(self._handle))
        info = json.loads(_lib().dl_ckpt_reader_info_json(self._handle).decode())
        self.step = info["step"]
        self.world_size = info["world_size"]
        self.meta = {k: v for k, v in info.items() if k not in ("tensors",)}
        self.tensors = {t["name"]: (t["dtype"], tuple(t["shape"])) for t in info["tensors"]}

    def read(self, name, offset=None, shape=None):
        """The tensor `name`, or its box at `offset` of size `shape`, as a new array
        (bf16 as uint16 bits)."""
        if name not in self.tensors:
            raise CheckpointError(f"{self.path}: no tensor {name!r}")
        dtype, full = self.tensors[name]
        box = tuple(shape) if shape is not None else full
        out = np.empty(box, dtype=_DTYPE_TO_NUMPY[dtype])
        _call(
            _lib().dl_ckpt_reader_read,
            self._handle,
            name.encode(),
            dtype.encode(),
            len(box),
            _dims(offset if offset is not None else [0] * len(box)) if shape is not None else None,
            _dims(box) if shape is not None else None,
            out.ctypes.data_as(ctypes.c_void_p),
        )
        return out

    def rng(self, name, rank=0):
        """Rank `rank`'s RNG state `name`, as bytes."""
        size = ctypes.c_size_t(0)
        _call(_lib().dl_ckpt_reader_rng, self._handle, rank, name.encode(), None, ctypes.byref(size))
        buf = ctypes.create_string_buffer(size.value)
        _call(_lib().dl_ckpt_reader_rng, self._handle, rank, name.encode(), buf, ctypes.byref(size))
        return buf.raw[: size.value]

    def close(self):
        if self._handle:
            self._free(self._handle)
            self._handle = None
