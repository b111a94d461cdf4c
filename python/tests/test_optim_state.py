#!/usr/bin/python3
"""slurm_dl._optim_state: parameters named from the modules, an optimizer's state keyed by
those names and mapped back to another optimizer's numbers, and what does not fit."""

import os
import sys
import unittest

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))

try:
    import torch  # noqa: E402
except ImportError:  # pragma: no cover - the module needs torch; the suite reports a skip
    torch = None

if torch is not None:
    from slurm_dl import _optim_state  # noqa: E402
    from slurm_dl.torch import StateError  # noqa: E402


def mlp(hidden=4):
    torch.manual_seed(0)
    return torch.nn.Sequential(
        torch.nn.Linear(3, hidden), torch.nn.Tanh(), torch.nn.Linear(hidden, 2)
    )


def step(model, opt):
    opt.zero_grad()
    model(torch.arange(6.0).reshape(2, 3)).pow(2).mean().backward()
    opt.step()


def by_name(model, opt):
    return _optim_state.by_name(opt, _optim_state.param_names({"model": model}, opt))


@unittest.skipIf(torch is None, "torch is not installed")
class OptimStateTest(unittest.TestCase):
    def test_parameters_are_named_as_their_modules_name_them(self):
        model = mlp()
        extra = torch.nn.Parameter(torch.zeros(2))
        opt = torch.optim.SGD(
            [{"params": model[2].parameters()}, {"params": [model[0].weight, extra]}], lr=0.1
        )
        self.assertEqual(
            _optim_state.param_names({"model": model}, opt),
            [["2.weight", "2.bias"], ["0.weight", "unnamed.1.1"]],
        )
        head = torch.nn.Linear(2, 2)
        opt = torch.optim.SGD(list(head.parameters()) + list(model[0].parameters()), lr=0.1)
        self.assertEqual(
            _optim_state.param_names({"model": model, "head": head}, opt),
            [["head.weight", "head.bias", "model.0.weight", "model.0.bias"]],
        )

    def test_state_saved_by_name_loads_into_groups_in_another_order(self):
        model = mlp()
        opt = torch.optim.Adam(
            [
                {"params": model[0].parameters(), "lr": 0.01},
                {"params": model[2].parameters(), "lr": 0.02},
            ]
        )
        step(model, opt)
        saved = by_name(model, opt)
        self.assertEqual(sorted(saved["state"]), ["0.bias", "0.weight", "2.bias", "2.weight"])
        self.assertEqual(saved["param_groups"][1]["params"], ["2.weight", "2.bias"])
        self.assertEqual(saved["param_groups"][1]["lr"], 0.02)

        other = mlp()
        opt2 = torch.optim.Adam(
            [{"params": other[2].parameters()}, {"params": other[0].parameters()}]
        )
        names = _optim_state.param_names({"model": other}, opt2)
        opt2.load_state_dict(_optim_state.by_number(opt2, names, saved, "optimizer", True))
        self.assertEqual([g["lr"] for g in opt2.param_groups], [0.02, 0.01])
        for p, q in zip(model.parameters(), other.parameters()):
            for k in ("exp_avg", "exp_avg_sq"):
                self.assertTrue(torch.equal(opt.state[p][k], opt2.state[q][k]), k)

    def test_what_does_not_fit_is_refused_by_key_path(self):
        model = mlp()
        opt = torch.optim.Adam(model.parameters())
        names = _optim_state.param_names({"model": model}, opt)
        with self.assertRaises(StateError) as e:
            _optim_state.by_number(opt, names, {"lr": 0.1}, "opt", True)
        self.assertIn("opt: the checkpoint's entry is not an optimizer state", str(e.exception))

        # Saved for the first layer only: the second has no state, which strict=False allows.
        first = torch.optim.Adam(model[0].parameters())
        step(model, first)
        saved = by_name(model, first)
        with self.assertRaises(StateError) as e:
            _optim_state.by_number(opt, names, saved, "opt", True)
        self.assertIn("opt/param_groups/2.weight: missing from the checkpoint", str(e.exception))
        sd = _optim_state.by_number(opt, names, saved, "opt", False)
        self.assertEqual(sorted(sd["state"]), [0, 1])

        # Saved from a wider layer: the same names, other shapes.
        wide = mlp(hidden=5)
        wide_opt = torch.optim.Adam(wide.parameters())
        step(wide, wide_opt)
        for strict in (True, False):
            with self.assertRaises(StateError) as e:
                _optim_state.by_number(opt, names, by_name(wide, wide_opt), "opt", strict)
            self.assertIn(
                "opt/state/0.weight/exp_avg: shape [5, 3] in the checkpoint, parameter [4, 3] here",
                str(e.exception),
            )


if __name__ == "__main__":
    unittest.main()
