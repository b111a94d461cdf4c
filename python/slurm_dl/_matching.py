"""Whether a checkpoint's state_dicts fit the state being restored (keys, tensor shapes
and dtypes), the StateError that lists what does not, and saved tensors moved to the
devices of the current ones.
"""

import numpy as np
import torch

from slurm_dl._errors import StateError
from slurm_dl._tensor_io import dtype_name, path_text


def _describe(v):
    if isinstance(v, torch.Tensor):
        return f"a {dtype_name(v.dtype)} tensor of shape {list(v.shape)}"
    if isinstance(v, np.ndarray):
        return f"a {v.dtype} array of shape {list(v.shape)}"
    return f"a {type(v).__name__}"


def compare(saved, current, path, problems, dtypes=True):
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
                compare(saved[k], current[k], path + (k,), problems, dtypes)
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
                    f"dtype {dtype_name(saved.dtype)} in the checkpoint, {dtype_name(current.dtype)} here",
                )
            )
    elif isinstance(current, torch.Tensor) != isinstance(saved, torch.Tensor) or isinstance(
        current, dict
    ) != isinstance(saved, dict):
        problems.append(
            ("kind", path, f"{_describe(saved)} in the checkpoint, {_describe(current)} here")
        )


def raise_problems(problems, strict, where):
    fatal = [p for p in problems if strict or p[0] not in ("missing", "unexpected")]
    if not fatal:
        return
    lines = []
    for kind, path, detail in fatal[:20]:
        p = path_text(path)
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


def move_like(value, template):
    """Saved tensors go where the current ones live (device), e.g. a scaler's on CUDA."""
    if isinstance(value, torch.Tensor) and isinstance(template, torch.Tensor):
        return value.to(template.device)
    if isinstance(value, dict) and isinstance(template, dict):
        return {k: move_like(v, template.get(k)) for k, v in value.items()}
    return value
