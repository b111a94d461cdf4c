"""State_dicts to a dl-ckpt checkpoint and back, for slurm_dl.torch.

Writer turns values into the JSON tree (methods of the object being saved kept by name)
plus this rank's part of every tensor, its rows or its declared shard, named by key path.
Reader rebuilds the values, each tensor whole or as the box the reading rank declares.
"""

import inspect
import os
import weakref

import numpy as np
import torch

from slurm_dl import ckpt
from slurm_dl._errors import StateError


# --- dtypes ----------------------------------------------------------------------------


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


def dtype_name(dtype):
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


def path_text(path):
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


class Writer:
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
                f"{path_text(path)}: sparse tensors are not supported; save t.to_dense()"
            )
        if t.dtype not in _TORCH_DTYPES:
            raise StateError(
                f"{path_text(path)}: tensor dtype {dtype_name(t.dtype)} has no checkpoint type "
                f"(supported: {', '.join(sorted(dtype_name(d) for d in _TORCH_DTYPES))})"
            )
        node = {"tensor": None, "dtype": dtype_name(t.dtype), "shape": list(t.shape)}
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
                    f"{path_text(path)}: a numpy array of dtype {v.dtype} has no checkpoint type"
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
            return {"torch_dtype": dtype_name(v)}
        if isinstance(v, torch.device):
            return {"device": str(v)}
        if isinstance(v, weakref.WeakMethod):
            node = self.method(v(), path)
            node["method"]["weak"] = True
            return node
        if callable(v) and not isinstance(v, type):
            return self.method(v, path)
        raise StateError(
            f"{path_text(path)}: a {type(v).__module__}.{type(v).__qualname__} can't be saved "
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
            f"{path_text(path)}: {_describe_callable(fn)} can't be saved: a checkpoint holds "
            "data, not code (no pickle); of functions it keeps only the methods of the object "
            "being saved, by name"
        )


def _rows(n, rank, world):
    """This rank's rows of a tensor with n rows (numpy.array_split's split)."""
    base, extra = divmod(n, world)
    lo = rank * base + min(rank, extra)
    return lo, lo + base + (1 if rank < extra else 0)


class Reader:
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
                f"{path_text(path)}: unreadable entry {node!r} in the checkpoint's tree"
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
        raise StateError(f"{path_text(path)}: unknown entry {tag!r} in the checkpoint's tree")

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
                f"{path_text(path)}: the checkpoint keeps the method {name!r} of {where}, "
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
                        f"{path_text(path)}: this rank's shard at {list(offset)} of shape "
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
