"""Every RNG a training process draws from (torch CPU and CUDA, numpy, `random`, the
DataLoaders' generators), captured as bytes for a checkpoint and restored from them.
"""

import random
import struct

import numpy as np
import torch

from slurm_dl import ckpt


def _numpy_bytes():
    kind, keys, pos, has_gauss, gauss = np.random.get_state()
    return np.asarray(keys, dtype="<u4").tobytes() + struct.pack("<qqd", pos, has_gauss, gauss)


def _set_numpy(data):
    keys = np.frombuffer(data[: 624 * 4], dtype="<u4").astype(np.uint32)
    pos, has_gauss, gauss = struct.unpack("<qqd", data[624 * 4 :])
    np.random.set_state(("MT19937", keys, pos, has_gauss, gauss))


def _random_bytes():
    version, internal, gauss = random.getstate()
    return (
        struct.pack("<q", version)
        + np.asarray(internal, dtype="<u4").tobytes()
        + struct.pack("<qd", gauss is not None, gauss or 0.0)
    )


def _set_random(data):
    (version,) = struct.unpack("<q", data[:8])
    n = (len(data) - 8 - 16) // 4
    internal = tuple(int(x) for x in np.frombuffer(data[8 : 8 + 4 * n], dtype="<u4"))
    has, gauss = struct.unpack("<qd", data[8 + 4 * n :])
    random.setstate((version, internal, gauss if has else None))


def capture(generators):
    """Every RNG the process draws from, as bytes: torch CPU, each CUDA device (once CUDA is
    in use), numpy's global one, `random`, and the loaders' own generators."""
    out = {
        "torch": torch.get_rng_state().numpy().tobytes(),
        "numpy": _numpy_bytes(),
        "random": _random_bytes(),
    }
    if torch.cuda.is_available() and torch.cuda.is_initialized():
        for i in range(torch.cuda.device_count()):
            out[f"cuda{i}"] = torch.cuda.get_rng_state(i).numpy().tobytes()
    for key, gen in generators.items():
        out[f"gen.{key}"] = gen.get_state().numpy().tobytes()
    return out


def restore(states, generators):
    """Sets the RNGs to capture()'s bytes; a CUDA device or generator they lack keeps its own."""

    def tensor(b):
        return torch.from_numpy(np.frombuffer(b, dtype=np.uint8).copy())

    torch.set_rng_state(tensor(states["torch"]))
    _set_numpy(states["numpy"])
    _set_random(states["random"])
    if torch.cuda.is_available():
        for i in range(torch.cuda.device_count()):
            if f"cuda{i}" in states:
                torch.cuda.set_rng_state(tensor(states[f"cuda{i}"]), i)
    for key, gen in generators.items():
        if f"gen.{key}" in states:
            gen.set_state(tensor(states[f"gen.{key}"]))


def state_names(generators):
    """The names capture() may give, CUDA devices included whenever CUDA is available."""
    names = ["torch", "numpy", "random"]
    if torch.cuda.is_available():
        names += [f"cuda{i}" for i in range(torch.cuda.device_count())]
    return names + [f"gen.{k}" for k in generators]


def read(checkpoint, rank, names):
    """Those of the RNG states `names` that `rank` saved in the checkpoint."""
    out = {}
    for name in names:
        try:
            out[name] = checkpoint.rng(name, rank)
        except ckpt.CheckpointError:
            pass  # e.g. saved without CUDA
    return out
