"""slurm_dl.torch: a PyTorch training loop that survives preemption, in three lines.

    from slurm_dl.torch import TrainState

    state = TrainState(model=ddp, optimizer=opt, scheduler=sched, loader=loader, best=0.0)
    start = state.resume()                       # 1: where to start (epoch, batch, step)
    for epoch in range(start.epoch, epochs):
        for x, y in state.batches(epoch):        # 2: the epoch's batches, minus those done
            loss = train_step(x, y)
            state.end_step(loss=loss.item())     # 3: report; save and acknowledge when asked

Why a state object: an exact resume needs every piece of state the loop touches (model,
optimizer keyed by parameter name, scheduler, GradScaler, sampler epoch, the position in
the epoch, every RNG, user counters such as `state.best`); forgetting one still resumes,
but into a run that silently differs from the uninterrupted one.

What it writes is an ordinary dl-ckpt checkpoint (slurm_dl.ckpt, no pickle): every tensor
of every state_dict becomes a dl-ckpt tensor named by its key path (`model/fc.weight`,
`optimizer/state/fc.weight/momentum_buffer`), everything else (numbers, strings, lists,
dicts, None) goes into the JSON tree `user_metadata["slurm_dl.torch"]`, which also says
which tensor sits where. h5py and `dl-ckpt show` read it; `load()` rebuilds the state_dicts.
Code is not saved: a method of the object itself in its state_dict (OneCycleLR's anneal
function, on torch 1.x) is kept by name and bound again on load; any other function is
refused when the TrainState is made, not at the first checkpoint.

Under DDP every rank holds the same parameters and optimizer state: each rank writes its
rows of every tensor (I/O in parallel) and any number of ranks reads them back whole.
Module buffers (BatchNorm statistics) are not kept equal by DDP between forwards, so rank 0
alone writes them, as DDP would broadcast them. RNG states are saved per rank.

Mid-epoch resume is exact because `batches()` makes a sample's random augmentation a pure
function of (epoch seed, batch, position), seeding torch, numpy and `random` before each
sample in whichever worker loads it; the epoch seed and the sampler's order come from the
RNG state at the start of the epoch, which the checkpoint keeps, so a resumed run draws the
same order, skips the consumed batches without loading them, and gives the workers the
seeds they would have had.
"""

import atexit
import collections
import hashlib
import inspect
import math
import os
import random
import signal
import struct
import sys
import weakref

import numpy as np
import torch

import slurm_dl
from slurm_dl import ckpt

__all__ = ["TrainState", "Start", "StateError"]

FORMAT = "slurm_dl.torch"
FORMAT_VERSION = 1

Start = collections.namedtuple("Start", "epoch batch step")
Start.__doc__ = """Where a resumed loop continues: epoch, batches already done in it, steps done."""


class StateError(ValueError):
    """The checkpoint does not fit the state being restored; the message names key paths."""


# --- tensors ---------------------------------------------------------------------------


# torch dtype -> (dl-ckpt dtype, to numpy, from numpy). Types dl-ckpt lacks are stored as
# the bits of one it has (bool and int8 as u8, complex as pairs of floats); the JSON tree
# keeps the torch dtype.
def _plain():
    return lambda t: t.numpy(), torch.from_numpy


_TORCH_DTYPES = {
    torch.float32: ("f32",) + _plain(),
    torch.float64: ("f64",) + _plain(),
    torch.float16: ("f16",) + _plain(),
    torch.int64: ("i64",) + _plain(),
    torch.int32: ("i32",) + _plain(),
    torch.uint8: ("u8",) + _plain(),
    torch.bfloat16: (
        "bf16",
        lambda t: t.view(torch.int16).numpy().view(np.uint16),
        lambda a: torch.from_numpy(a.view(np.int16)).view(torch.bfloat16),
    ),
    torch.bool: ("u8", lambda t: t.view(torch.uint8).numpy(), lambda a: torch.from_numpy(a).bool()),
    torch.int8: (
        "u8",
        lambda t: t.view(torch.uint8).numpy(),
        lambda a: torch.from_numpy(a).view(torch.int8),
    ),
    torch.int16: (
        "i32",
        lambda t: t.to(torch.int32).numpy(),
        lambda a: torch.from_numpy(a).to(torch.int16),
    ),
    torch.complex64: (
        "f32",
        lambda t: torch.view_as_real(t).numpy(),
        lambda a: torch.view_as_complex(torch.from_numpy(a)),
    ),
    torch.complex128: (
        "f64",
        lambda t: torch.view_as_real(t).numpy(),
        lambda a: torch.view_as_complex(torch.from_numpy(a)),
    ),
}


def _dtype_name(dtype):
    return str(dtype).replace("torch.", "")


def _torch_dtype(name, path):
    dtype = getattr(torch, name, None)
    if not isinstance(dtype, torch.dtype) or dtype not in _TORCH_DTYPES:
        raise StateError(f"{path}: the checkpoint has a tensor of dtype {name!r}, unknown here")
    return dtype


# --- names -----------------------------------------------------------------------------

_NAME_CHARS = set("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789_.:-")


def _component(key):
    """A key as one dl-ckpt name component: characters outside [A-Za-z0-9_.:-] (and a
    leading '.' of '.'/'..') become +XX, the hex of their UTF-8 bytes."""
    text = str(key)
    out = []
    for ch in text:
        if ch in _NAME_CHARS:
            out.append(ch)
        else:
            out.extend(f"+{b:02X}" for b in ch.encode("utf-8"))
    s = "".join(out)
    if s in ("", ".", ".."):
        s = "+" + "".join(f"{ord(c):02X}" for c in s) if s else "+"
    return s


def _path_text(path):
    return "/".join(str(p) for p in path)


# --- the JSON tree ---------------------------------------------------------------------

_INT64 = (-(2**63), 2**63 - 1)


def _stateful(x):
    return hasattr(x, "state_dict") and hasattr(x, "load_state_dict")


def _owners(obj):
    """`obj` and the stateful objects inside it (a SequentialLR's schedulers; not its
    optimizer), each with the attribute path from `obj` to it: a str is an attribute,
    an int an index into a list or tuple. Their methods in obj.state_dict() are kept by name."""
    out, seen = [], set()

    def walk(x, where):
        if id(x) in seen:
            return
        seen.add(id(x))
        out.append((where, x))
        for name, v in list(getattr(x, "__dict__", {}).items()):
            items = enumerate(v) if isinstance(v, (list, tuple)) else [(None, v)]
            for i, item in items:
                if _stateful(item) and not isinstance(
                    item, (torch.optim.Optimizer, torch.nn.Module, type)
                ):
                    walk(item, where + ((name,) if i is None else (name, i)))

    walk(obj, ())
    return out


def _describe_callable(fn):
    if fn is None:
        return "a weak reference to a method that no longer exists"
    code = getattr(fn, "__code__", None)
    where = f" ({os.path.basename(code.co_filename)}:{code.co_firstlineno})" if code else ""
    if inspect.ismethod(fn):
        return f"the method {fn.__qualname__}{where} of another object"
    if inspect.isfunction(fn) or inspect.isbuiltin(fn):
        return f"the function {fn.__name__}{where}"
    return f"the callable {type(fn).__module__}.{type(fn).__qualname__} object"


class _Writer:
    """Turns state_dicts into the JSON tree plus this rank's tensor parts. A dry writer
    only checks that everything can be saved, copying nothing."""

    def __init__(self, rank, world, shard_of=None, dry=False):
        self.rank, self.world = rank, world
        self.shard_of = shard_of or (lambda path, t: None)
        self.dry = dry
        self.parts = {}  # dl-ckpt name -> ckpt.Part
        self.names = set()
        self.owners = ()  # (where, object): whose methods the state_dict being written may hold

    def stateful(self, obj, path):
        """obj.state_dict(), whose methods of obj (or of the schedulers inside it) are kept
        by name."""
        self.owners = _owners(obj)
        try:
            return self.value(obj.state_dict(), path)
        finally:
            self.owners = ()

    def _name(self, path):
        name = "/".join(_component(p) for p in path)
        base, n = name, 1
        while name in self.names:  # keys 1 and "1" in one dict
            n += 1
            name = f"{base}+dup{n}"
        self.names.add(name)
        return name

    def tensor(self, t, path, rank0_only):
        if t.is_sparse or t.layout != torch.strided:
            raise StateError(
                f"{_path_text(path)}: sparse tensors are not supported; save t.to_dense()"
            )
        if t.dtype not in _TORCH_DTYPES:
            raise StateError(
                f"{_path_text(path)}: tensor dtype {_dtype_name(t.dtype)} has no checkpoint type "
                f"(supported: {', '.join(sorted(_dtype_name(d) for d in _TORCH_DTYPES))})"
            )
        node = {"tensor": None, "dtype": _dtype_name(t.dtype), "shape": list(t.shape)}
        if t.device.type != "cpu":
            node["device"] = str(t.device)
        if t.numel() == 0 or self.dry:
            return node  # nothing to write: the shape says it all
        name = node["tensor"] = self._name(path)
        stored, to_numpy, _ = _TORCH_DTYPES[t.dtype]
        t = t.detach()
        shard = self.shard_of(path, t)
        if shard is not None:
            # This rank's own box of a tensor split across ranks: written whole, once.
            global_shape, offset = shard
            node["shape"] = list(global_shape)
            node["sharded"] = True
            a = to_numpy(t.cpu().contiguous())
            extra = a.shape[t.dim() :]
            self._add(
                name, a, stored, tuple(global_shape) + extra, tuple(offset) + (0,) * len(extra)
            )
            return node
        if rank0_only or t.dim() == 0:
            if self.rank == 0:
                self._add(name, to_numpy(t.cpu().contiguous()), stored, t.shape)
            return node
        lo, hi = _rows(t.shape[0], self.rank, self.world)
        if hi > lo:
            # Slice before the copy: a CUDA tensor sends only this rank's rows to the host.
            a = to_numpy(t[lo:hi].cpu().contiguous())
            full = tuple(t.shape) + a.shape[t.dim() :]  # complex: a trailing 2
            self._add(name, a, stored, full, (lo,) + (0,) * (a.ndim - 1))
        return node

    def _add(self, name, array, stored, global_shape, offset=None):
        if stored == "bf16":
            part = ckpt.Part(array, global_shape, offset, dtype="bf16")
        else:
            part = ckpt.Part(array, global_shape, offset)
        if array.ndim == 0:  # dl-ckpt tensors have at least one dimension
            part = ckpt.Part(array.reshape(1), (1,), None, dtype=part.dtype)
        elif part.global_shape is not None and len(part.global_shape) < array.ndim:
            part.global_shape = tuple(part.global_shape) + array.shape[len(part.global_shape) :]
        self.parts[name] = part

    def value(self, v, path, rank0_only=False):
        if v is None or isinstance(v, (bool, str)):
            return v
        if isinstance(v, int):
            return v if _INT64[0] <= v <= _INT64[1] else {"int": str(v)}
        if isinstance(v, float):
            if v != v:
                return {"float": "nan"}
            if v in (float("inf"), float("-inf")):
                return {"float": "inf" if v > 0 else "-inf"}
            return v
        if isinstance(v, torch.Tensor):
            return self.tensor(v, path, rank0_only)
        if isinstance(v, np.ndarray):
            try:
                t = torch.from_numpy(np.ascontiguousarray(v))
                if t.dtype not in _TORCH_DTYPES:  # torch 2.3+ has uint16/32/64 tensors
                    raise TypeError
            except TypeError:
                raise StateError(
                    f"{_path_text(path)}: a numpy array of dtype {v.dtype} has no checkpoint type"
                ) from None
            node = self.tensor(t, path, rank0_only)
            node["numpy"] = True
            return node
        if isinstance(v, np.generic):
            return {"numpy_scalar": v.dtype.name, "value": self.value(v.item(), path)}
        if isinstance(v, (list, tuple)):
            items = [self.value(x, path + (i,), rank0_only) for i, x in enumerate(v)]
            if type(v) in (list,):
                return items
            if isinstance(v, torch.Size):
                return {"size": items}
            return {"tuple": items}
        if isinstance(v, dict):
            if all(isinstance(k, str) for k in v):
                node = {"dict": {k: self.value(x, path + (k,), rank0_only) for k, x in v.items()}}
                if list(v) != sorted(v):  # JSON objects come back sorted
                    node["order"] = list(v)
                return node
            return {
                "items": [
                    [self.value(k, path + ("key",)), self.value(x, path + (k,), rank0_only)]
                    for k, x in v.items()
                ]
            }
        if isinstance(v, bytes):
            return {"bytes": v.hex()}
        if isinstance(v, torch.dtype):
            return {"torch_dtype": _dtype_name(v)}
        if isinstance(v, torch.device):
            return {"device": str(v)}
        if isinstance(v, weakref.WeakMethod):
            node = self.method(v(), path)
            node["method"]["weak"] = True
            return node
        if callable(v) and not isinstance(v, type):
            return self.method(v, path)
        raise StateError(
            f"{_path_text(path)}: a {type(v).__module__}.{type(v).__qualname__} can't be saved "
            "without pickle; state_dicts may hold tensors, numpy arrays, numbers, strings, "
            "bytes, None, lists, tuples and dicts"
        )

    def method(self, fn, path):
        """A method of the object being saved, by name: {"method": {"name", "of", "static"}}
        ("of": the attribute path from the object to the method's owner)."""
        name = getattr(fn, "__name__", None)
        for where, owner in self.owners if name else ():
            if inspect.ismethod(fn) and fn.__self__ is owner and getattr(owner, name, None) == fn:
                return {"method": {"name": name, "of": list(where), "static": False}}
            if isinstance(inspect.getattr_static(type(owner), name, None), staticmethod) and (
                getattr(type(owner), name) is fn
            ):
                return {"method": {"name": name, "of": list(where), "static": True}}
        raise StateError(
            f"{_path_text(path)}: {_describe_callable(fn)} can't be saved: a checkpoint holds "
            "data, not code (no pickle); of functions it keeps only the methods of the object "
            "being saved, by name"
        )


def _rows(n, rank, world):
    """This rank's rows of a tensor with n rows (numpy.array_split's split)."""
    base, extra = divmod(n, world)
    lo = rank * base + min(rank, extra)
    return lo, lo + base + (1 if rank < extra else 0)


class _Reader:
    """Rebuilds values from the JSON tree, reading tensors from the checkpoint."""

    def __init__(self, checkpoint, box_of=None):
        self.c = checkpoint
        self.box_of = box_of or (lambda path: None)
        self.root = None  # the object whose state_dict is being read: methods rebind to it

    def value(self, node, path):
        if node is None or isinstance(node, (bool, int, float, str)):
            return node
        if isinstance(node, list):
            return [self.value(x, path + (i,)) for i, x in enumerate(node)]
        if not isinstance(node, dict) or not node:
            raise StateError(
                f"{_path_text(path)}: unreadable entry {node!r} in the checkpoint's tree"
            )
        if "dtype" in node and "shape" in node:
            return self.tensor(node, path)
        if "dict" in node:
            body = node["dict"]
            return {k: self.value(body[k], path + (k,)) for k in node.get("order", sorted(body))}
        (tag, body), *_ = node.items()
        if tag == "items":
            out = {}
            for k, x in body:
                key = self.value(k, path + ("key",))
                out[key] = self.value(x, path + (key,))
            return out
        if tag == "tuple":
            return tuple(self.value(x, path + (i,)) for i, x in enumerate(body))
        if tag == "size":
            return torch.Size(self.value(x, path + (i,)) for i, x in enumerate(body))
        if tag == "int":
            return int(body)
        if tag == "float":
            return float(body)
        if tag == "numpy_scalar":
            return np.dtype(body).type(self.value(node["value"], path))
        if tag == "bytes":
            return bytes.fromhex(body)
        if tag == "torch_dtype":
            return _torch_dtype(body, path)
        if tag == "device":
            return torch.device(body)
        if tag == "method":
            return self.method(body, path)
        raise StateError(f"{_path_text(path)}: unknown entry {tag!r} in the checkpoint's tree")

    def method(self, body, path):
        """The method the checkpoint names, of the object being restored (or of the
        scheduler inside it that had it)."""
        owner, name = self.root, body["name"]
        try:
            for step in body["of"]:
                owner = owner[step] if isinstance(step, int) else getattr(owner, step)
            fn = getattr(type(owner), name) if body["static"] else getattr(owner, name)
        except (AttributeError, IndexError, KeyError, TypeError):
            fn = None
        if owner is None or not callable(fn):
            where = ".".join(str(p) for p in body["of"]) or "the object"
            here = "value" if self.root is None else type(self.root).__name__
            raise StateError(
                f"{_path_text(path)}: the checkpoint keeps the method {name!r} of {where}, "
                f"which the {here} here does not have"
            )
        return weakref.WeakMethod(fn) if body.get("weak") else fn

    def tensor(self, node, path):
        dtype = _torch_dtype(node["dtype"], path)
        shape = tuple(node["shape"])
        box = self.box_of(path) if shape else None
        if box is not None:
            offset, shape = tuple(box[0]), tuple(box[1])
        if node.get("tensor") is None:
            t = torch.empty(shape, dtype=dtype)
        else:
            complex_ = dtype in (torch.complex64, torch.complex128)
            if box is not None:
                extra = (2,) if complex_ else ()
                if len(offset) != len(node["shape"]) or any(
                    o + n > g for o, n, g in zip(offset, shape, node["shape"])
                ):
                    raise StateError(
                        f"{_path_text(path)}: this rank's shard at {list(offset)} of shape "
                        f"{list(shape)} is outside the checkpoint's tensor of shape {node['shape']}"
                    )
                a = self.c.read(node["tensor"], offset + (0,) * len(extra), shape + extra)
            else:
                a = self.c.read(node["tensor"])
            _, _, from_numpy = _TORCH_DTYPES[dtype]
            a = a.reshape(shape + (2,) if complex_ else shape)
            t = from_numpy(a)
        if node.get("numpy"):
            return t.numpy() if dtype != torch.bool else t.numpy().astype(bool)
        return t


# --- structure checks ------------------------------------------------------------------


def _describe(v):
    if isinstance(v, torch.Tensor):
        return f"a {_dtype_name(v.dtype)} tensor of shape {list(v.shape)}"
    if isinstance(v, np.ndarray):
        return f"a {v.dtype} array of shape {list(v.shape)}"
    return f"a {type(v).__name__}"


def _compare(saved, current, path, problems, dtypes=True):
    """Dict keys (missing, unexpected) and tensor shapes and dtypes, recursively; a list
    or a number may legitimately differ, so only containers and tensors are compared."""
    if isinstance(current, dict) and isinstance(saved, dict):
        for k in current:
            if k not in saved:
                problems.append(("missing", path + (k,), _describe(current[k])))
        for k in saved:
            if k not in current:
                problems.append(("unexpected", path + (k,), _describe(saved[k])))
            else:
                _compare(saved[k], current[k], path + (k,), problems, dtypes)
    elif isinstance(current, torch.Tensor) and isinstance(saved, torch.Tensor):
        if tuple(saved.shape) != tuple(current.shape):
            problems.append(
                (
                    "shape",
                    path,
                    f"shape {list(saved.shape)} in the checkpoint, {list(current.shape)} here",
                )
            )
        elif dtypes and saved.dtype != current.dtype:
            problems.append(
                (
                    "dtype",
                    path,
                    f"dtype {_dtype_name(saved.dtype)} in the checkpoint, {_dtype_name(current.dtype)} here",
                )
            )
    elif isinstance(current, torch.Tensor) != isinstance(saved, torch.Tensor) or isinstance(
        current, dict
    ) != isinstance(saved, dict):
        problems.append(
            ("kind", path, f"{_describe(saved)} in the checkpoint, {_describe(current)} here")
        )


def _raise_problems(problems, strict, where):
    fatal = [p for p in problems if strict or p[0] not in ("missing", "unexpected")]
    if not fatal:
        return
    lines = []
    for kind, path, detail in fatal[:20]:
        p = _path_text(path)
        if kind == "missing":
            lines.append(
                f"  {p}: missing from the checkpoint (here: {detail}); strict=False keeps its current value"
            )
        elif kind == "unexpected":
            lines.append(
                f"  {p}: in the checkpoint ({detail}) but not in the state; strict=False ignores it"
            )
        else:
            lines.append(f"  {p}: {detail}")
    if len(fatal) > 20:
        lines.append(f"  ... and {len(fatal) - 20} more")
    raise StateError(f"{where} does not match the state being restored:\n" + "\n".join(lines))


def _move_like(value, template):
    """Saved tensors go where the current ones live (device), e.g. a scaler's on CUDA."""
    if isinstance(value, torch.Tensor) and isinstance(template, torch.Tensor):
        return value.to(template.device)
    if isinstance(value, dict) and isinstance(template, dict):
        return {k: _move_like(v, template.get(k)) for k, v in value.items()}
    return value


# --- optimizers ------------------------------------------------------------------------


def _param_names(modules, optimizer):
    """The name of each of the optimizer's parameters, per group, from the modules."""
    by_id = {}
    single = len(modules) == 1
    for key, module in modules.items():
        for name, p in module.named_parameters():
            by_id.setdefault(id(p), name if single else f"{key}.{name}")
    names = []
    for g, group in enumerate(optimizer.param_groups):
        names.append([by_id.get(id(p), f"unnamed.{g}.{i}") for i, p in enumerate(group["params"])])
    return names


def _optimizer_by_name(optimizer, names):
    """optimizer.state_dict() with parameters named instead of numbered."""
    sd = optimizer.state_dict()
    number_to_name = {}
    groups = []
    for g, group in enumerate(sd["param_groups"]):
        for i, number in enumerate(group["params"]):
            number_to_name[number] = names[g][i]
        groups.append({k: v for k, v in group.items() if k not in ("params", "param_names")})
        groups[-1]["params"] = list(names[g])
    state = {number_to_name[k]: v for k, v in sd["state"].items()}
    return {"state": state, "param_groups": groups}


def _optimizer_state(optimizer, names, saved, key, strict):
    """The state_dict to load into `optimizer`, its numbers matched to the saved names."""
    if not isinstance(saved, dict) or "state" not in saved or "param_groups" not in saved:
        raise StateError(f"{key}: the checkpoint's entry is not an optimizer state")
    current = optimizer.state_dict()
    params = {
        n: p
        for g, group in enumerate(optimizer.param_groups)
        for n, p in zip(names[g], group["params"])
    }
    saved_group_of = {}
    for sg, group in enumerate(saved["param_groups"]):
        for n in group["params"]:
            saved_group_of[n] = sg
    problems = []
    for n in params:
        if n not in saved_group_of:
            problems.append(
                (
                    "missing",
                    (key, "param_groups", n),
                    f"parameter {n} of shape {list(params[n].shape)}",
                )
            )
    for n in saved_group_of:
        if n not in params:
            problems.append(
                ("unexpected", (key, "param_groups", n), "a parameter the optimizer does not have")
            )
    for n, st in saved["state"].items():
        if n not in params:
            continue
        for k, v in st.items():
            if (
                isinstance(v, torch.Tensor)
                and v.dim() > 0
                and tuple(v.shape) != tuple(params[n].shape)
            ):
                problems.append(
                    (
                        "shape",
                        (key, "state", n, k),
                        f"shape {list(v.shape)} in the checkpoint, parameter {list(params[n].shape)} here",
                    )
                )
    new_groups = []
    for g, group in enumerate(current["param_groups"]):
        sources = sorted({saved_group_of[n] for n in names[g] if n in saved_group_of})
        if len(sources) > 1:
            problems.append(
                (
                    "groups",
                    (key, "param_groups", g),
                    f"holds parameters saved in groups {sources}; "
                    "groups may be reordered but not merged",
                )
            )
            continue
        src = saved["param_groups"][sources[0]] if sources else group
        new = {k: v for k, v in src.items() if k not in ("params", "param_names")}
        for k in ("params", "param_names"):
            if k in group:
                new[k] = group[k]
        new_groups.append(new)
    _raise_problems(problems, strict, "the checkpoint's optimizer " + repr(key))
    state = {}
    for g, group in enumerate(current["param_groups"]):
        for n, number in zip(names[g], group["params"]):
            if n in saved["state"]:
                state[number] = saved["state"][n]
    return {"state": state, "param_groups": new_groups}


# --- RNGs ------------------------------------------------------------------------------


def _numpy_rng_bytes():
    kind, keys, pos, has_gauss, gauss = np.random.get_state()
    return np.asarray(keys, dtype="<u4").tobytes() + struct.pack("<qqd", pos, has_gauss, gauss)


def _set_numpy_rng(data):
    keys = np.frombuffer(data[: 624 * 4], dtype="<u4").astype(np.uint32)
    pos, has_gauss, gauss = struct.unpack("<qqd", data[624 * 4 :])
    np.random.set_state(("MT19937", keys, pos, has_gauss, gauss))


def _random_rng_bytes():
    version, internal, gauss = random.getstate()
    return (
        struct.pack("<q", version)
        + np.asarray(internal, dtype="<u4").tobytes()
        + struct.pack("<qd", gauss is not None, gauss or 0.0)
    )


def _set_random_rng(data):
    (version,) = struct.unpack("<q", data[:8])
    n = (len(data) - 8 - 16) // 4
    internal = tuple(int(x) for x in np.frombuffer(data[8 : 8 + 4 * n], dtype="<u4"))
    has, gauss = struct.unpack("<qd", data[8 + 4 * n :])
    random.setstate((version, internal, gauss if has else None))


def _rng_states(generators):
    """Every RNG the process draws from, as bytes: torch CPU, each CUDA device (once CUDA is
    in use), numpy's global one, `random`, and the loaders' own generators."""
    out = {
        "torch": torch.get_rng_state().numpy().tobytes(),
        "numpy": _numpy_rng_bytes(),
        "random": _random_rng_bytes(),
    }
    if torch.cuda.is_available() and torch.cuda.is_initialized():
        for i in range(torch.cuda.device_count()):
            out[f"cuda{i}"] = torch.cuda.get_rng_state(i).numpy().tobytes()
    for key, gen in generators.items():
        out[f"gen.{key}"] = gen.get_state().numpy().tobytes()
    return out


def _set_rng_states(states, generators):
    def tensor(b):
        return torch.from_numpy(np.frombuffer(b, dtype=np.uint8).copy())

    torch.set_rng_state(tensor(states["torch"]))
    _set_numpy_rng(states["numpy"])
    _set_random_rng(states["random"])
    if torch.cuda.is_available():
        for i in range(torch.cuda.device_count()):
            if f"cuda{i}" in states:
                torch.cuda.set_rng_state(tensor(states[f"cuda{i}"]), i)
    for key, gen in generators.items():
        if f"gen.{key}" in states:
            gen.set_state(tensor(states[f"gen.{key}"]))


# --- data loading ----------------------------------------------------------------------


def _sample_seed(epoch_seed, batch, position):
    digest = hashlib.blake2b(
        struct.pack("<qqq", epoch_seed, batch, position), digest_size=8
    ).digest()
    return int.from_bytes(digest, "little") & (2**63 - 1)


class _SeededDataset(torch.utils.data.Dataset):
    """The loader's dataset, each sample loaded with the RNGs seeded from its place in the
    epoch, so that augmentation does not depend on which worker loads it or on what that
    worker loaded before (a resumed epoch skips batches)."""

    def __init__(self, dataset):
        self.dataset = dataset

    def __len__(self):
        return len(self.dataset)

    def __getitem__(self, key):
        epoch_seed, batch, position, index = key
        seed = _sample_seed(epoch_seed, batch, position)
        if torch.utils.data.get_worker_info() is None:
            # Loading in the training process: its own RNG stream must not move.
            saved = (torch.get_rng_state(), np.random.get_state(), random.getstate())
            try:
                _seed_all(seed)
                return self.dataset[index]
            finally:
                torch.set_rng_state(saved[0])
                np.random.set_state(saved[1])
                random.setstate(saved[2])
        _seed_all(seed)
        return self.dataset[index]


def _seed_all(seed):
    torch.default_generator.manual_seed(seed)
    random.seed(seed)
    np.random.seed(seed & 0xFFFFFFFF)


class _EpochBatches(torch.utils.data.Sampler):
    """The epoch's batches of indices from `start` on, tagged with their place."""

    def __init__(self):
        self.seed, self.batches, self.start = 0, [], 0

    def __iter__(self):
        seed, batches = self.seed, self.batches
        for b in range(self.start, len(batches)):
            yield [(seed, b, j, index) for j, index in enumerate(batches[b])]

    def __len__(self):
        return len(self.batches) - self.start


class _WorkerInit:
    """Keeps SIGTERM ignored in DataLoader workers when the training process ignores it.

    dlrun starts the program with SIGTERM ignored (a stop signal means: checkpoint, then
    stop), but PyTorch's workers install their own SIGTERM handler and die of it, and the
    training process then fails on the dead worker before it can save."""

    def __init__(self, ignore_term, user_fn):
        self.ignore_term, self.user_fn = ignore_term, user_fn

    def __call__(self, worker_id):
        if self.ignore_term:
            signal.signal(signal.SIGTERM, signal.SIG_IGN)
        if self.user_fn is not None:
            self.user_fn(worker_id)


class _Loader:
    """A DataLoader like the user's, over _SeededDataset and _EpochBatches."""

    def __init__(self, loader, key):
        if isinstance(loader.dataset, torch.utils.data.IterableDataset):
            raise StateError(
                f"{key}: a DataLoader over an IterableDataset has no order to reproduce; "
                "use a map-style dataset (or resume by step without batches())"
            )
        if loader.batch_sampler is None:
            raise StateError(
                f"{key}: batches() needs a DataLoader with a batch size (batch_size=None)"
            )
        self.loader = loader
        self.sampler = _EpochBatches()
        kwargs = dict(
            batch_sampler=self.sampler,
            num_workers=loader.num_workers,
            collate_fn=loader.collate_fn,
            pin_memory=loader.pin_memory,
            timeout=loader.timeout,
            worker_init_fn=_WorkerInit(
                signal.getsignal(signal.SIGTERM) == signal.SIG_IGN, loader.worker_init_fn
            ),
            multiprocessing_context=loader.multiprocessing_context,
            generator=loader.generator,
            persistent_workers=loader.persistent_workers,
        )
        if loader.num_workers > 0 and getattr(loader, "prefetch_factor", None) is not None:
            kwargs["prefetch_factor"] = loader.prefetch_factor
        # Arguments newer versions added (pin_memory_device 1.12, in_order 2.6).
        if getattr(loader, "pin_memory_device", ""):
            kwargs["pin_memory_device"] = loader.pin_memory_device
        if getattr(loader, "in_order", True) is not True:
            kwargs["in_order"] = loader.in_order
        self.derived = torch.utils.data.DataLoader(_SeededDataset(loader.dataset), **kwargs)

    def set_epoch(self, epoch):
        for s in (self.loader.sampler, self.loader.batch_sampler):
            if hasattr(s, "set_epoch"):
                s.set_epoch(epoch)

    def start_epoch(self, start):
        """Draws the epoch seed and the order, exactly as at the start of the epoch."""
        gen = self.loader.generator
        seed = int(torch.empty((), dtype=torch.int64).random_(generator=gen).item())
        batches = [list(b) for b in self.loader.batch_sampler]
        self.sampler.seed, self.sampler.batches = seed, batches
        self.sampler.start = min(start, len(batches))
        return seed, len(batches)


# --- the state -------------------------------------------------------------------------


def _rank_world():
    if torch.distributed.is_available() and torch.distributed.is_initialized():
        return torch.distributed.get_rank(), torch.distributed.get_world_size()
    return int(os.environ.get("RANK", "0")), int(os.environ.get("WORLD_SIZE", "1"))


def _unwrap(module):
    while isinstance(module, (torch.nn.parallel.DistributedDataParallel, torch.nn.DataParallel)):
        module = module.module
    return module


_LIVE = weakref.WeakSet()


@atexit.register
def _finish_all():
    for state in list(_LIVE):
        try:
            state.close()
        except Exception as e:  # at exit: report, don't mask the program's own status
            print(f"slurm_dl.torch: the last checkpoint failed: {e}", file=sys.stderr)


class TrainState:
    """Everything a training loop must keep to resume exactly.

    Keyword arguments name the things to keep; the names become the checkpoint's top-level
    keys. Modules (DDP-wrapped or not), optimizers (saved by parameter name), anything with
    state_dict()/load_state_dict() (schedulers, GradScaler, your own objects), DataLoaders
    (position in the epoch, used by batches()), samplers (their epoch), and plain values
    (numbers, strings, lists, dicts, tensors), which are then attributes: `state.best = acc`.

    What no checkpoint can hold (a lambda in a scheduler's state_dict, say) is refused here,
    with a StateError that names the entry.

    strict=False lets a checkpoint lack keys the state has (a layer added: it keeps its
    initial value) and have keys it lacks (ignored). ckpt_dir overrides DL_CKPT_DIR.
    hyperparameters (a dict) go into the checkpoint's manifest for people to read, and are
    not restored. shards={"fc.weight": (global_shape, offset)} says that a parameter (named
    as in named_parameters(), "key.name" with several modules) is this rank's box of a larger
    tensor: it and its optimizer state are saved as parts of the global tensor, and read back
    as whatever box the reading rank declares (or whole, without shards). After resume(),
    resumed_from and resumed_world_size say what was loaded.
    async_save: the save returns once the tensors are copied and the step is acknowledged to
    dlrun when it is durable, at the next end_step() or close(); training continues meanwhile.
    """

    def __init__(
        self,
        *,
        strict=True,
        ckpt_dir=None,
        async_save=True,
        hyperparameters=None,
        shards=None,
        **things,
    ):
        d = self.__dict__
        d["_shards"] = {}
        for name, spec in (shards or {}).items():
            try:
                global_shape, offset = (tuple(int(x) for x in v) for v in spec)
            except (TypeError, ValueError):
                raise ValueError(
                    f"TrainState(shards={{{name!r}: {spec!r}}}): expected (global_shape, offset)"
                ) from None
            if len(global_shape) != len(offset):
                raise ValueError(
                    f"TrainState(shards={{{name!r}: ...}}): global shape {list(global_shape)} and "
                    f"offset {list(offset)} differ in length"
                )
            d["_shards"][name] = (global_shape, offset)
        d["_hyperparameters"] = dict(hyperparameters or {})
        d["resumed_from"], d["resumed_world_size"] = None, None
        d["_strict"] = strict
        d["_ckpt_dir"] = ckpt_dir
        d["_async"] = async_save
        for kind in ("_modules", "_optimizers", "_stateful", "_loaders", "_samplers", "_values"):
            d[kind] = {}
        for key, thing in things.items():
            if key.startswith("_") or "/" in key:
                raise ValueError(f"TrainState({key}=...): names may not start with _ or contain /")
            if isinstance(thing, torch.nn.Module):
                self._modules[key] = thing
            elif isinstance(thing, torch.optim.Optimizer):
                self._optimizers[key] = thing
            elif isinstance(thing, torch.utils.data.DataLoader):
                self._loaders[key] = thing
            elif hasattr(thing, "state_dict") and hasattr(thing, "load_state_dict"):
                self._stateful[key] = thing
            elif isinstance(thing, torch.utils.data.Sampler) and hasattr(thing, "set_epoch"):
                self._samplers[key] = thing
            else:
                self._values[key] = thing
        self._check_savable()
        d["epoch"], d["batch"], d["step"] = 0, 0, 0
        d["_epoch_seed"], d["_epoch_rngs"], d["_resume_at"] = None, None, None
        d["_derived"], d["_saver"], d["_pending"], d["_metrics"] = {}, None, None, {}
        _LIVE.add(self)

    # Plain values read and written as attributes.
    def __getattr__(self, name):
        values = self.__dict__.get("_values", {})
        if name in values:
            return values[name]
        raise AttributeError(f"TrainState has no value {name!r} (values: {sorted(values)})")

    def __setattr__(self, name, value):
        if name in self._values:
            self._values[name] = value
        elif name in ("epoch", "batch", "step"):
            raise AttributeError(f"TrainState.{name} is kept by batches() and end_step()")
        else:
            raise AttributeError(
                f"TrainState has no value {name!r}; declare it: TrainState(..., {name}=initial)"
            )

    # --- the loop ---

    def resume(self, path=None):
        """Loads the checkpoint dlrun resumes from (or `path`) and says where to continue;
        Start(0, 0, 0) for a fresh run."""
        path = path or slurm_dl.resume_path()
        if not path:
            return Start(0, 0, 0)
        self.load(path)
        return Start(self.epoch, self.batch, self.step)

    def batches(self, epoch=None, loader=None):
        """Iterates over the epoch's batches of `loader` (the state's DataLoader), after the
        ones a resumed checkpoint had already done. Sets the sampler's epoch."""
        key, loader = self._the_loader(loader)
        epoch = self.epoch if epoch is None else int(epoch)
        derived = self._derived.get(key)
        if derived is None:
            derived = self._derived[key] = _Loader(loader, key)
        derived.set_epoch(epoch)
        gens = self._generators()
        resume = self._resume_at
        self.__dict__["_resume_at"] = None
        if resume is not None and resume["epoch"] == epoch and resume["loader"] in (None, key):
            # Draw the order and seed from the epoch's start, then continue the RNGs from
            # where the checkpoint left them.
            now = _rng_states(gens)
            _set_rng_states(resume["epoch_rngs"], gens)
            start = resume["batch"]
            if resume["world_size"] != _rank_world()[1]:
                # Another number of ranks: keep the fraction of the epoch that was done.
                start = start * resume["world_size"] // _rank_world()[1]
            seed, n = derived.start_epoch(start)
            if seed != resume["epoch_seed"]:
                raise StateError(
                    f"{key}: the epoch's seed drawn again is {seed}, the checkpoint's {resume['epoch_seed']}: "
                    "the RNG was used differently before batches() (is the program the same?)"
                )
            it = iter(derived.derived)
            _set_rng_states(now, gens)
            self.__dict__["batch"] = min(start, n)
        else:
            self.__dict__["_epoch_rngs"] = _rng_states(gens)
            seed, n = derived.start_epoch(0)
            it = iter(derived.derived)
            self.__dict__["batch"] = 0
        self.__dict__["epoch"] = epoch
        self.__dict__["_epoch_seed"] = seed
        self.__dict__["_epoch_loader"] = key
        for item in it:
            self.__dict__["batch"] += 1
            yield item

    def end_step(self, **metrics):
        """Ends a training step: reports it (and `metrics`) to dlrun and, when dlrun asks for
        a checkpoint, saves and acknowledges it. True when a checkpoint was started."""
        self._complete_pending()
        step = self.step
        self.__dict__["step"] = step + 1
        slurm_dl.report_step(step)
        if metrics:
            # A NaN loss is the program's business: reporting it or saving it must not fail.
            values = {k: float(v) for k, v in metrics.items()}
            self.__dict__["_metrics"] = {k: v for k, v in values.items() if math.isfinite(v)}
            if self._metrics:
                slurm_dl.report_metrics(step, self._metrics)
        if slurm_dl.should_checkpoint():
            self.save()
            return True
        return False

    def save(self):
        """Checkpoints the state now, as the last finished step (end_step() does it when
        dlrun asks; call this for checkpoints on your own schedule)."""
        if self.step < 1:
            raise StateError("save(): no step is finished yet (end_step() counts them)")
        self._complete_pending()
        if self._saver is None:
            self.__dict__["_saver"] = ckpt.Saver(self._ckpt_dir)
        rank, world = _rank_world()
        writer = _Writer(rank, world, self._shard_of)
        tree = self._tree(writer)
        rng = {name: data for name, data in _rng_states(self._generators()).items()}
        if self._epoch_rngs is not None:
            rng.update({f"epoch.{k}": v for k, v in self._epoch_rngs.items()})
        meta = {
            "epoch": self.epoch,
            "data_loader_position": self.batch,
            "user_metadata": {FORMAT: tree},
        }
        if self._metrics:
            meta["metrics"] = self._metrics
        if self._hyperparameters:
            meta["hyperparameters"] = self._hyperparameters
        step = self.step - 1
        self._saver.save(step, writer.parts, rng=rng, meta=meta, async_=self._async)
        self.__dict__["_pending"] = step
        if not self._async:
            self._complete_pending()

    def close(self):
        """Waits for a checkpoint still being written and acknowledges it."""
        self._complete_pending()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    # --- saving and loading ---

    def _objects(self):
        for kind in (self._modules, self._optimizers, self._stateful, self._samplers, self._values):
            yield from kind.items()

    def _object_tree(self, writer, key, thing):
        if key in self._modules:
            module = _unwrap(thing)
            buffers = {name for name, _ in module.named_buffers()}
            sd = module.state_dict()
            return {
                "dict": {
                    k: writer.value(v, (key, k), rank0_only=k in buffers) for k, v in sd.items()
                }
            }
        if key in self._optimizers:
            return writer.value(_optimizer_by_name(thing, self._names(thing)), (key,))
        if key in self._stateful:
            return writer.stateful(thing, (key,))
        if key in self._samplers:
            return writer.value({"epoch": getattr(thing, "epoch", 0)}, (key,))
        return writer.value(thing, (key,))

    def _check_savable(self):
        """Refuses, now rather than at the first checkpoint, what no checkpoint can hold."""
        writer = _Writer(0, 1, dry=True)
        for key, thing in self._objects():
            try:
                self._object_tree(writer, key, thing)
            except StateError as e:
                what = type(_unwrap(thing)).__name__
                raise StateError(f"TrainState({key}={what}) can't be checkpointed: {e}") from None

    def _tree(self, writer):
        objects = {key: self._object_tree(writer, key, thing) for key, thing in self._objects()}
        rank, world = _rank_world()
        return {
            "format_version": FORMAT_VERSION,
            "objects": objects,
            "progress": {
                "epoch": self.epoch,
                "batch": self.batch,
                "step": self.step,
                "epoch_seed": self._epoch_seed,
                "loader": self.__dict__.get("_epoch_loader"),
                "world_size": world,
            },
        }

    def load(self, path):
        """Restores everything from the checkpoint at `path` (a step directory)."""
        with ckpt.Checkpoint(path) as c:
            tree = (c.meta.get("user_metadata") or {}).get(FORMAT)
            if tree is None:
                raise StateError(
                    f"{path}: not written by slurm_dl.torch (no user_metadata[{FORMAT!r}])"
                )
            if tree.get("format_version") != FORMAT_VERSION:
                raise StateError(
                    f"{path}: slurm_dl.torch format version {tree.get('format_version')}, "
                    f"this version reads {FORMAT_VERSION}"
                )
            reader = _Reader(c, self._box_of)
            objects = tree["objects"]
            where = f"checkpoint {path}"
            problems = []
            mine = (
                set(self._modules)
                | set(self._optimizers)
                | set(self._stateful)
                | set(self._samplers)
                | set(self._values)
            )
            for key in mine - set(objects):
                problems.append(("missing", (key,), "an object of the state"))
            for key in set(objects) - mine:
                problems.append(("unexpected", (key,), "an object the state does not have"))
            _raise_problems(problems, self._strict, where)
            decoded = {}
            for key, node in objects.items():
                if key in mine:
                    reader.root = self._stateful.get(key)
                    decoded[key] = reader.value(node, (key,))
            reader.root = None
            # Check everything before changing anything: a failed resume leaves the state as it was.
            for key, module in self._modules.items():
                if key in decoded:
                    problems = []
                    _compare(decoded[key], _unwrap(module).state_dict(), (key,), problems)
                    _raise_problems(problems, self._strict, where)
            for key, obj in self._stateful.items():
                if key in decoded:
                    problems = []
                    _compare(decoded[key], obj.state_dict(), (key,), problems)
                    # Its load_state_dict() gets the whole saved state and judges it: a
                    # scheduler gains entries as it steps (ReduceLROnPlateau's _last_lr)
                    # that one made afresh to resume into lacks.
                    problems = [p for p in problems if p[0] != "unexpected"]
                    _raise_problems(problems, self._strict, where)
            optimizer_states = {
                key: _optimizer_state(opt, self._names(opt), decoded[key], key, self._strict)
                for key, opt in self._optimizers.items()
                if key in decoded
            }
            for key, module in self._modules.items():
                if key in decoded:
                    _unwrap(module).load_state_dict(decoded[key], strict=False)
            for key, sd in optimizer_states.items():
                self._optimizers[key].load_state_dict(sd)
            for key, obj in self._stateful.items():
                if key in decoded:
                    obj.load_state_dict(_move_like(decoded[key], obj.state_dict()))
            for key, sampler in self._samplers.items():
                if key in decoded and hasattr(sampler, "set_epoch"):
                    sampler.set_epoch(decoded[key]["epoch"])
            for key in self._values:
                if key in decoded:
                    self._values[key] = _move_like(decoded[key], self._values[key])
            progress = tree["progress"]
            rank, _ = _rank_world()
            src = rank % c.world_size
            gens = self._generators()
            names = [f"{n}" for n in ("torch", "numpy", "random")]
            names += (
                [f"cuda{i}" for i in range(torch.cuda.device_count())]
                if torch.cuda.is_available()
                else []
            )
            names += [f"gen.{k}" for k in gens]
            now = self._read_rngs(c, src, names)
            epoch_rngs = self._read_rngs(c, src, [f"epoch.{n}" for n in names])
            epoch_rngs = {k[len("epoch.") :]: v for k, v in epoch_rngs.items()}
            d = self.__dict__
            d["epoch"], d["batch"], d["step"] = (
                progress["epoch"],
                progress["batch"],
                progress["step"],
            )
            d["resumed_from"], d["resumed_world_size"] = path, c.world_size
            d["_epoch_seed"] = progress["epoch_seed"]
            d["_resume_at"] = None
            if progress["epoch_seed"] is not None and epoch_rngs:
                d["_resume_at"] = {
                    "epoch": progress["epoch"],
                    "batch": progress["batch"],
                    "epoch_seed": progress["epoch_seed"],
                    "epoch_rngs": epoch_rngs,
                    "loader": progress.get("loader"),
                    "world_size": progress["world_size"],
                }
                d["_epoch_rngs"] = epoch_rngs
            _set_rng_states(now, gens)

    @staticmethod
    def _read_rngs(c, rank, names):
        out = {}
        for name in names:
            try:
                out[name] = c.rng(name, rank)
            except ckpt.CheckpointError:
                pass  # e.g. saved without CUDA
        return out

    def _shard_name(self, path):
        """The parameter name of a model tensor or of a per-parameter optimizer tensor."""
        key = path[0]
        if key in self._modules and len(path) == 2:
            return path[1] if len(self._modules) == 1 else f"{key}.{path[1]}"
        if key in self._optimizers and len(path) == 4 and path[1] == "state":
            return path[2]
        return None

    def _shard_of(self, path, t):
        if not self._shards:
            return None
        spec = self._shards.get(self._shard_name(path))
        if spec is None or t.dim() != len(spec[0]):  # e.g. Adam's scalar step
            return None
        global_shape, offset = spec
        if any(o + n > g for o, n, g in zip(offset, t.shape, global_shape)):
            raise StateError(
                f"{_path_text(path)}: shape {list(t.shape)} at offset {list(offset)} does not fit "
                f"in the global shape {list(global_shape)} given in shards="
            )
        return spec

    def _box_of(self, path):
        name = self._shard_name(path)
        spec = self._shards.get(name) if name is not None else None
        if spec is None:
            return None
        shape = self._local_shape(name)
        return (spec[1], shape) if shape is not None and len(shape) == len(spec[0]) else None

    def _local_shape(self, name):
        for key, module in self._modules.items():
            prefix = "" if len(self._modules) == 1 else f"{key}."
            for n, p in _unwrap(module).named_parameters():
                if prefix + n == name:
                    return tuple(p.shape)
        return None

    def _names(self, optimizer):
        return _param_names({k: _unwrap(m) for k, m in self._modules.items()}, optimizer)

    def _generators(self):
        return {k: l.generator for k, l in self._loaders.items() if l.generator is not None}

    def _the_loader(self, loader):
        if loader is None:
            if len(self._loaders) != 1:
                raise ValueError(
                    "batches(): pass loader=... (the state has "
                    f"{len(self._loaders)} DataLoaders: {sorted(self._loaders)})"
                )
            return next(iter(self._loaders.items()))
        for key, l in self._loaders.items():
            if l is loader:
                return key, l
        raise ValueError("batches(loader=...): pass a DataLoader given to TrainState(...)")

    def _complete_pending(self):
        step = self._pending
        if step is None:
            return
        self.__dict__["_pending"] = None
        self._saver.wait()
        slurm_dl.checkpoint_done(step)
