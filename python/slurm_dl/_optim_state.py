"""Optimizer state keyed by parameter name, not by number: saved so, it loads into an
optimizer whose groups hold the same parameters in another order.
"""

import torch

from slurm_dl import _matching
from slurm_dl._errors import StateError


def param_names(modules, optimizer):
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


def by_name(optimizer, names):
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


def by_number(optimizer, names, saved, key, strict):
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
    _matching.raise_problems(problems, strict, "the checkpoint's optimizer " + repr(key))
    state = {}
    for g, group in enumerate(current["param_groups"]):
        for n, number in zip(names[g], group["params"]):
            if n in saved["state"]:
                state[number] = saved["state"][n]
    return {"state": state, "param_groups": new_groups}
