#!/usr/bin/python3
"""slurm_dl.torch: state_dicts to dl-ckpt and back, key-path errors, optimizers by name,
ranks writing parts, every learning-rate scheduler torch ships resumed exactly, and an
exact mid-epoch resume with DataLoader workers."""

import inspect
import json
import os
import pickle
import random
import shutil
import signal
import sys
import tempfile
import time
import unittest
import warnings

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))

import numpy as np  # noqa: E402

try:
    import torch  # noqa: E402
except ImportError:  # pragma: no cover - the module needs torch; the suite reports a skip
    torch = None

import slurm_dl  # noqa: E402

if torch is not None:
    from slurm_dl import ckpt  # noqa: E402
    from slurm_dl.torch import StateError, TrainState  # noqa: E402


class Holder:
    """Any object with state_dict()/load_state_dict(): keeps what it is given."""

    def __init__(self, sd=None):
        self.sd = sd if sd is not None else {}

    def state_dict(self):
        return self.sd

    def load_state_dict(self, sd):
        self.sd = sd


def same(a, b, path="value"):
    """Equal values of equal types, tensors bit for bit (NaN equal to NaN)."""
    assert type(a) is type(b), f"{path}: {type(a)} != {type(b)}"
    if isinstance(a, torch.Tensor):
        assert (
            a.dtype == b.dtype and a.shape == b.shape
        ), f"{path}: {a.dtype}{a.shape} != {b.dtype}{b.shape}"
        if a.numel():
            x, y = (torch.view_as_real(a), torch.view_as_real(b)) if a.is_complex() else (a, b)
            if x.dtype == torch.bfloat16:
                x, y = x.view(torch.int16), y.view(torch.int16)
            assert torch.equal(x, y) or torch.equal(x.isnan(), y.isnan()), f"{path}: {a} != {b}"
    elif isinstance(a, np.ndarray):
        assert a.dtype == b.dtype and a.shape == b.shape and a.tobytes() == b.tobytes(), path
    elif isinstance(a, dict):
        assert list(a) == list(b), f"{path}: keys {list(a)} != {list(b)}"
        for k in a:
            same(a[k], b[k], f"{path}/{k}")
    elif isinstance(a, (list, tuple)):
        assert len(a) == len(b), path
        for i, (x, y) in enumerate(zip(a, b)):
            same(x, y, f"{path}/{i}")
    elif isinstance(a, float) and a != a:
        assert b != b, path
    elif isinstance(a, float):
        assert a.hex() == b.hex(), f"{path}: {a!r} != {b!r}"
    else:
        assert a == b, f"{path}: {a!r} != {b!r}"


def sgd_step(model, opt, x):
    loss = model(x).pow(2).mean()
    opt.zero_grad()
    loss.backward()
    opt.step()
    return loss.item()


@unittest.skipIf(torch is None, "torch is not installed")
class TorchStateTest(unittest.TestCase):
    def setUp(self):
        self.tmp = tempfile.TemporaryDirectory()
        self.dir = os.path.join(self.tmp.name, "ckpt")
        for name in (
            "RANK",
            "WORLD_SIZE",
            "DL_CKPT_DIR",
            "DL_CKPT_RUN_ID",
            "DL_RESUME_FROM",
            "DL_CLIENT_FILE",
        ):
            os.environ.pop(name, None)
        torch.manual_seed(0)

    def tearDown(self):
        self.tmp.cleanup()

    def save(self, state, steps=1):
        for _ in range(steps):
            state.end_step()
        state.save()
        state.close()
        path = ckpt.latest_valid(self.dir)
        self.assertIsNotNone(path)
        return path

    def test_the_public_names_are_the_facades(self):
        import slurm_dl.torch as facade

        self.assertEqual(sorted(facade.__all__), ["Start", "StateError", "TrainState"])
        self.assertEqual((facade.FORMAT, facade.FORMAT_VERSION), ("slurm_dl.torch", 1))
        for name in facade.__all__:
            self.assertEqual(getattr(facade, name).__module__, "slurm_dl.torch", name)
        error = pickle.loads(pickle.dumps(StateError("model/w: missing")))
        self.assertIs(type(error), StateError)
        self.assertEqual(str(error), "model/w: missing")

    def test_every_kind_of_value_round_trips_bit_for_bit(self):
        values = {
            "f32": torch.randn(3, 4),
            "f64": torch.tensor([0.1 + 0.2, -0.0, float("inf"), float("nan")], dtype=torch.float64),
            "f16": torch.randn(5).half(),
            "bf16": torch.randn(2, 3).bfloat16(),
            "i64": torch.tensor([-(2**62), 7]),
            "i32": torch.arange(6, dtype=torch.int32).reshape(2, 3),
            "i16": torch.tensor([-300, 300], dtype=torch.int16),
            "i8": torch.tensor([-128, 127], dtype=torch.int8),
            "u8": torch.tensor([0, 255], dtype=torch.uint8),
            "bool": torch.tensor([[True, False], [False, True]]),
            "c64": torch.randn(3, dtype=torch.complex64),
            "scalar": torch.tensor(3.5),
            "empty": torch.empty(0, 3),
            "strided": torch.arange(12.0).reshape(3, 4).t(),
            "numpy": np.arange(4, dtype=np.float32),
            "np_scalar": np.float32(1.25),
            "none": None,
            "yes": True,
            "int": 2**40,
            "huge": 2**70,
            "float": 0.1 + 0.2,
            "floats": [float("nan"), float("inf"), float("-inf"), -0.0, 5e-324],
            "text": 'naïve / ../ "quoted"',
            "bytes": b"\x00\xff",
            "tuple": (1, "a", (2.5,)),
            "size": torch.Size([2, 3]),
            "int keys": {0: "zero", 1: torch.ones(2), "1": torch.zeros(2)},
            "nested": {"a": [{"b": torch.full((2,), 7.0)}, []], "": {}, ".": 1, "..": [None]},
            "dtype": torch.float16,
        }
        expected = {k: (v.clone() if isinstance(v, torch.Tensor) else v) for k, v in values.items()}
        expected["strided"] = expected["strided"].contiguous()
        path = self.save(TrainState(things=Holder(values), ckpt_dir=self.dir))
        back = Holder({"placeholder": 1})
        TrainState(things=back, strict=False).resume(path)
        same(expected, back.sd)

    def test_tensors_are_named_by_key_path_and_readable_without_pickle(self):
        model = torch.nn.Sequential(torch.nn.Linear(4, 3), torch.nn.BatchNorm1d(3))
        opt = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
        sgd_step(model, opt, torch.randn(8, 4))
        path = self.save(TrainState(model=model, optimizer=opt, ckpt_dir=self.dir, epochs_seen=4))
        with ckpt.Checkpoint(path) as c:
            self.assertIn("model/0.weight", c.tensors)
            self.assertIn("model/1.running_mean", c.tensors)
            self.assertIn("optimizer/state/0.weight/momentum_buffer", c.tensors)
            tree = c.meta["user_metadata"]["slurm_dl.torch"]
            np.testing.assert_array_equal(
                c.read("model/0.weight"), model[0].weight.detach().numpy()
            )
        self.assertEqual(tree["objects"]["epochs_seen"], 4)
        self.assertEqual(
            tree["objects"]["optimizer"]["dict"]["param_groups"][0]["dict"]["params"],
            ["0.weight", "0.bias", "1.weight", "1.bias"],
        )
        import h5py

        shard = os.path.join(path, "shard-00000-of-00001.h5")
        with h5py.File(shard, "r") as f:
            np.testing.assert_array_equal(
                f["tensors/model/0.weight"][()], model[0].weight.detach().numpy()
            )
            json.loads(f.attrs["user_metadata"])

    def test_missing_unexpected_shape_and_dtype_errors_name_the_key_path(self):
        model = torch.nn.Sequential(torch.nn.Linear(4, 3))
        path = self.save(TrainState(model=model, ckpt_dir=self.dir))

        bigger = torch.nn.Sequential(torch.nn.Linear(4, 3), torch.nn.Linear(3, 2))
        with self.assertRaises(StateError) as e:
            TrainState(model=bigger).resume(path)
        self.assertIn("model/1.weight: missing from the checkpoint", str(e.exception))
        self.assertIn("strict=False", str(e.exception))
        before = bigger[1].weight.detach().clone()
        TrainState(model=bigger, strict=False).resume(path)  # the added layer keeps its init
        self.assertTrue(torch.equal(bigger[0].weight, model[0].weight))
        self.assertTrue(torch.equal(bigger[1].weight, before))

        smaller = torch.nn.Sequential()
        with self.assertRaises(StateError) as e:
            TrainState(model=smaller).resume(path)
        self.assertIn(
            "model/0.weight: in the checkpoint (a float32 tensor of shape [3, 4])", str(e.exception)
        )
        TrainState(model=smaller, strict=False).resume(path)

        wider = torch.nn.Sequential(torch.nn.Linear(4, 5))
        for strict in (True, False):
            with self.assertRaises(StateError) as e:
                TrainState(model=wider, strict=strict).resume(path)
            self.assertIn(
                "model/0.weight: shape [3, 4] in the checkpoint, [5, 4] here", str(e.exception)
            )

        double = torch.nn.Sequential(torch.nn.Linear(4, 3)).double()
        with self.assertRaises(StateError) as e:
            TrainState(model=double).resume(path)
        self.assertIn(
            "model/0.bias: dtype float32 in the checkpoint, float64 here", str(e.exception)
        )

        with self.assertRaises(StateError) as e:
            TrainState(model=model, extra=Holder()).resume(path)
        self.assertIn("extra: missing from the checkpoint", str(e.exception))

    def test_unsavable_values_are_refused_with_their_path(self):
        with self.assertRaises(StateError) as e:
            TrainState(ckpt_dir=self.dir, sched=Holder({"lr_lambdas": [lambda e: 1.0]}))
        line = sys._getframe().f_lineno - 1
        self.assertEqual(
            str(e.exception),
            "TrainState(sched=Holder) can't be checkpointed: sched/lr_lambdas/0: the function "
            f"<lambda> (test_torch.py:{line}) can't be saved: a checkpoint holds data, not code "
            "(no pickle); of functions it keeps only the methods of the object being saved, "
            "by name",
        )
        # What becomes unsavable after the start is still refused by the save.
        holder = Holder({"lr": 0.1})
        state = TrainState(ckpt_dir=self.dir, sched=holder)
        holder.sd["fn"] = print
        state.end_step()
        with self.assertRaises(StateError) as e:
            state.save()
        self.assertIn("sched/fn: the function print can't be saved", str(e.exception))
        with self.assertRaises(StateError):
            TrainState(counter=object())
        with self.assertRaises(StateError) as e:
            TrainState(table={"ids": np.arange(3, dtype=np.uint32)})
        self.assertIn(
            "table/ids: a numpy array of dtype uint32 has no checkpoint type", str(e.exception)
        )

    def test_end_step_saves_when_dlrun_asks_and_acknowledges_once_durable(self):
        from test_client import field, make_page
        from slurm_dl import _channel as ch

        page_path = os.path.join(self.tmp.name, "page")
        page = make_page(page_path)
        os.environ["DL_CLIENT_FILE"] = page_path
        slurm_dl._state.update(pid=None, channel=None)
        try:
            # dlrun asked (request 1) and the ranks agreed on step 3.
            field(page, ch.REQUEST_SEQ).value = 1
            field(page, ch.TARGET_STEP).value = 3
            field(page, ch.TARGET_SEQ).value = 1
            model = torch.nn.Linear(3, 2)
            opt = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
            state = TrainState(model=model, optimizer=opt, ckpt_dir=self.dir)
            saved = []
            for step in range(6):
                sgd_step(model, opt, torch.randn(4, 3))
                if state.end_step(loss=0.5):
                    saved.append(step)
                    weight = model.weight.detach().clone()
                    # Asynchronous: acknowledged at the next end_step(), once durable.
                    self.assertEqual(field(page, ch.DONE_SEQ).value, 0)
            self.assertEqual(saved, [3])
            self.assertEqual(
                (field(page, ch.DONE_SEQ).value, field(page, ch.DONE_STEP).value), (1, 3)
            )
            self.assertEqual(field(page, ch.STEP).value, 5)
            os.environ["DL_RESUME_FROM"] = ckpt.latest_valid(self.dir)
            model2 = torch.nn.Linear(3, 2)
            state2 = TrainState(
                model=model2, optimizer=torch.optim.SGD(model2.parameters(), lr=0.1)
            )
            self.assertEqual(state2.resume().step, 4)
            same(model2.weight.detach(), weight)
        finally:
            os.environ.pop("DL_CLIENT_FILE", None)
            slurm_dl._state.update(pid=None, channel=None)

    def test_a_nan_loss_neither_fails_the_step_nor_the_save(self):
        state = TrainState(model=torch.nn.Linear(2, 2), ckpt_dir=self.dir)
        state.end_step(loss=float("nan"), acc=torch.tensor(0.5))
        state.save()
        state.close()
        with ckpt.Checkpoint(ckpt.latest_valid(self.dir)) as c:
            self.assertEqual(c.meta["metrics"], {"acc": 0.5})

    def test_optimizer_state_follows_parameter_names_when_groups_are_reordered(self):
        def build(order):
            torch.manual_seed(1)
            model = torch.nn.Sequential(
                torch.nn.Linear(4, 6), torch.nn.Tanh(), torch.nn.Linear(6, 2)
            )
            groups = {
                "first": {"params": list(model[0].parameters()), "lr": 0.01},
                "last": {"params": list(model[2].parameters()), "lr": 0.003},
            }
            opt = torch.optim.Adam([groups[g] for g in order], lr=0.1)
            return model, opt

        x = torch.randn(16, 4)
        model, opt = build(["first", "last"])
        for _ in range(3):
            sgd_step(model, opt, x)
        path = self.save(TrainState(model=model, optimizer=opt, ckpt_dir=self.dir))
        sgd_step(model, opt, x)

        model2, opt2 = build(["last", "first"])
        TrainState(model=model2, optimizer=opt2).resume(path)
        self.assertEqual([g["lr"] for g in opt2.param_groups], [0.003, 0.01])
        same(opt.state[model[0].weight]["step"] - 1, opt2.state[model2[0].weight]["step"])
        sgd_step(model2, opt2, x)
        for a, b in zip(model.parameters(), model2.parameters()):
            same(a.detach(), b.detach())

        # A new layer: its parameters have no optimizer state to resume.
        torch.manual_seed(1)
        model3 = torch.nn.Sequential(
            torch.nn.Linear(4, 6), torch.nn.Tanh(), torch.nn.Linear(6, 2), torch.nn.Linear(2, 2)
        )
        opt3 = torch.optim.Adam(
            [
                {"params": model3[0].parameters()},
                {"params": list(model3[2].parameters()) + list(model3[3].parameters())},
            ]
        )
        with self.assertRaises(StateError) as e:
            TrainState(model=model3, optimizer=opt3).resume(path)
        self.assertIn("model/3.weight: missing from the checkpoint", str(e.exception))
        TrainState(model=model3, optimizer=opt3, strict=False).resume(path)
        self.assertEqual(len(opt3.state), 4)
        self.assertNotIn(model3[3].weight, opt3.state)
        same(opt3.state[model3[2].weight]["exp_avg"], opt.state[model[2].weight]["exp_avg"])

        # An optimizer over fewer parameters than were saved.
        model4, _ = build(["first", "last"])
        opt4 = torch.optim.Adam(model4[0].parameters(), lr=0.1)
        with self.assertRaises(StateError) as e:
            TrainState(model=model4, optimizer=opt4).resume(path)
        self.assertIn("optimizer/param_groups/2.weight: in the checkpoint", str(e.exception))

        # Groups may come in another order, not merged.
        model5, _ = build(["first", "last"])
        opt5 = torch.optim.Adam(model5.parameters(), lr=0.1)
        with self.assertRaises(StateError) as e:
            TrainState(model=model5, optimizer=opt5).resume(path)
        self.assertIn(
            "optimizer/param_groups/0: holds parameters saved in groups [0, 1]", str(e.exception)
        )

    def save_as_two_ranks(self, run_id, state_of):
        """Ranks 0 and 1 of a run, each a forked process: state_of(rank) builds the rank's
        TrainState, which ends a step and saves once."""
        pids = []
        for rank in range(2):
            pid = os.fork()
            if pid == 0:
                code = 1
                try:
                    os.environ.update(RANK=str(rank), WORLD_SIZE="2", DL_CKPT_RUN_ID=run_id)
                    state = state_of(rank)
                    state.end_step()
                    state.save()
                    state.close()
                    code = 0
                except Exception as e:
                    print(f"rank {rank}: {e}", file=sys.stderr)
                finally:
                    os._exit(code)
            pids.append(pid)
        for pid in pids:
            self.assertEqual(os.waitpid(pid, 0)[1], 0)

    def test_ranks_write_parts_and_any_world_size_reads_them(self):
        torch.manual_seed(3)
        model = torch.nn.Sequential(torch.nn.Linear(5, 7), torch.nn.BatchNorm1d(7))
        opt = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
        sgd_step(model, opt, torch.randn(8, 5))
        self.save_as_two_ranks(
            "torch-test", lambda rank: TrainState(model=model, optimizer=opt, ckpt_dir=self.dir)
        )
        path = ckpt.latest_valid(self.dir)
        with open(os.path.join(path, "manifest.json")) as f:
            pieces = {t["name"]: [p["rank"] for p in t["pieces"]] for t in json.load(f)["tensors"]}
        self.assertEqual(pieces["model/0.weight"], [0, 1])  # 7 rows: 4 on rank 0, 3 on rank 1
        self.assertEqual(pieces["optimizer/state/0.weight/momentum_buffer"], [0, 1])
        self.assertEqual(pieces["model/1.running_mean"], [0])  # buffers: rank 0's copy
        model2 = torch.nn.Sequential(torch.nn.Linear(5, 7), torch.nn.BatchNorm1d(7))
        opt2 = torch.optim.SGD(model2.parameters(), lr=0.1, momentum=0.9)
        TrainState(model=model2, optimizer=opt2).resume(path)
        same(model.state_dict(), model2.state_dict())
        same(
            opt.state[model[0].weight]["momentum_buffer"],
            opt2.state[model2[0].weight]["momentum_buffer"],
        )

    def test_sharded_parameters_are_parts_of_their_global_tensor_read_back_as_any_box(self):
        # A row-parallel layer: rank r holds rows 4r..4r+3 of an 8x5 weight and its bias.
        def shard(rank):
            torch.manual_seed(7)
            full = torch.nn.Linear(5, 8)
            lo = 4 * rank
            local = torch.nn.Linear(5, 4)
            with torch.no_grad():
                local.weight.copy_(full.weight[lo : lo + 4])
                local.bias.copy_(full.bias[lo : lo + 4])
            opt = torch.optim.SGD(local.parameters(), lr=0.1, momentum=0.9)
            sgd_step(local, opt, torch.arange(10.0).reshape(2, 5) / 10)
            specs = {"weight": ((8, 5), (lo, 0)), "bias": ((8,), (lo,))}
            return local, opt, specs

        # Trained before the fork: torch 2.x's autograd does not run in a process forked
        # after it ran.
        parts = [shard(r) for r in range(2)]

        def state_of(rank):
            local, opt, specs = parts[rank]
            return TrainState(model=local, optimizer=opt, shards=specs, ckpt_dir=self.dir)

        self.save_as_two_ranks("shard-test", state_of)
        path = ckpt.latest_valid(self.dir)
        with open(os.path.join(path, "manifest.json")) as f:
            tensors = {t["name"]: t for t in json.load(f)["tensors"]}
        self.assertEqual(tensors["model/weight"]["shape"], [8, 5])
        self.assertEqual(
            [(p["rank"], p["offset"]) for p in tensors["model/weight"]["pieces"]],
            [(0, [0, 0]), (1, [4, 0])],
        )
        self.assertEqual(tensors["optimizer/state/weight/momentum_buffer"]["shape"], [8, 5])

        # One rank, no shards: the whole layer.
        whole = torch.nn.Linear(5, 8)
        whole_opt = torch.optim.SGD(whole.parameters(), lr=0.1, momentum=0.9)
        TrainState(model=whole, optimizer=whole_opt).resume(path)
        same(whole.weight.detach(), torch.cat([p[0].weight.detach() for p in parts]))
        same(
            whole_opt.state[whole.bias]["momentum_buffer"],
            torch.cat([p[1].state[p[0].bias]["momentum_buffer"] for p in parts]),
        )

        # Another split: rows 2..4, across both saved parts.
        local = torch.nn.Linear(5, 3)
        local_opt = torch.optim.SGD(local.parameters(), lr=0.1, momentum=0.9)
        TrainState(
            model=local,
            optimizer=local_opt,
            shards={"weight": ((8, 5), (2, 0)), "bias": ((8,), (2,))},
        ).resume(path)
        same(local.weight.detach(), whole.weight.detach()[2:5])
        same(
            local_opt.state[local.weight]["momentum_buffer"],
            whole_opt.state[whole.weight]["momentum_buffer"][2:5],
        )

        with self.assertRaises(StateError) as e:
            TrainState(model=local, shards={"weight": ((8, 5), (6, 0))}, strict=False).resume(path)
        self.assertIn(
            "model/weight: this rank's shard at [6, 0] of shape [3, 5] is outside", str(e.exception)
        )


# Base classes, not schedulers to use.
NOT_SCHEDULERS = {"LRScheduler"}


def scheduler_classes():
    """Every class of torch.optim.lr_scheduler and torch.optim.swa_utils with a state, as
    the installed torch has them: a class added by a new version is found here."""
    found = {}
    for module in (torch.optim.lr_scheduler, torch.optim.swa_utils):
        for name, cls in vars(module).items():
            if (
                inspect.isclass(cls)
                and cls.__module__ == module.__name__
                and not name.startswith("_")
                and name not in NOT_SCHEDULERS
                and hasattr(cls, "state_dict")
                and hasattr(cls, "load_state_dict")
            ):
                found[name] = cls
    return found


class Warmup:
    """A callable object whose attributes a LambdaLR saves; one is a lambda."""

    def __init__(self):
        self.curve = lambda epoch: min(1.0, (epoch + 1) / 4)

    def __call__(self, epoch):
        return self.curve(epoch)


class Decay:
    """A callable object whose attributes are numbers: a LambdaLR saves and restores them."""

    def __init__(self, rate):
        self.rate = rate

    def __call__(self, epoch):
        return self.rate**epoch


def schedulers():
    """(label, optimizer, make(optimizer, model)): each class with its usual arguments,
    and the variants that keep other state (another anneal strategy, mode or optimizer)."""
    L, S = torch.optim.lr_scheduler, torch.optim.swa_utils
    return [
        (
            "ChainedScheduler",
            "sgd",
            lambda o, m: L.ChainedScheduler(
                [L.ConstantLR(o, factor=0.5, total_iters=3), L.ExponentialLR(o, gamma=0.9)]
            ),
        ),
        ("ConstantLR", "sgd", lambda o, m: L.ConstantLR(o, factor=0.5, total_iters=4)),
        ("CosineAnnealingLR", "sgd", lambda o, m: L.CosineAnnealingLR(o, T_max=10, eta_min=1e-4)),
        (
            "CosineAnnealingWarmRestarts",
            "sgd",
            lambda o, m: L.CosineAnnealingWarmRestarts(o, T_0=3, T_mult=2, eta_min=1e-4),
        ),
        ("CyclicLR", "sgd", lambda o, m: L.CyclicLR(o, base_lr=0.01, max_lr=0.1, step_size_up=3)),
        (
            "CyclicLR triangular2",
            "sgd",
            lambda o, m: L.CyclicLR(
                o, base_lr=0.01, max_lr=0.1, step_size_up=2, step_size_down=3, mode="triangular2"
            ),
        ),
        (
            "CyclicLR exp_range",
            "sgd",
            lambda o, m: L.CyclicLR(
                o, base_lr=0.01, max_lr=0.1, step_size_up=3, mode="exp_range", gamma=0.9
            ),
        ),
        ("ExponentialLR", "sgd", lambda o, m: L.ExponentialLR(o, gamma=0.9)),
        ("LambdaLR", "sgd", lambda o, m: L.LambdaLR(o, lambda epoch: 0.95**epoch)),
        ("LambdaLR callable object", "sgd", lambda o, m: L.LambdaLR(o, Decay(0.9))),
        ("LinearLR", "sgd", lambda o, m: L.LinearLR(o, start_factor=0.1, total_iters=5)),
        ("MultiStepLR", "sgd", lambda o, m: L.MultiStepLR(o, milestones=[2, 5], gamma=0.5)),
        ("MultiplicativeLR", "sgd", lambda o, m: L.MultiplicativeLR(o, lambda epoch: 0.95)),
        ("OneCycleLR", "adamw", lambda o, m: L.OneCycleLR(o, max_lr=0.1, total_steps=20)),
        (
            "OneCycleLR linear three_phase",
            "sgd",
            lambda o, m: L.OneCycleLR(
                o, max_lr=0.1, total_steps=20, anneal_strategy="linear", three_phase=True
            ),
        ),
        ("PolynomialLR", "sgd", lambda o, m: L.PolynomialLR(o, total_iters=8, power=2.0)),
        ("ReduceLROnPlateau", "sgd", lambda o, m: L.ReduceLROnPlateau(o, factor=0.5, patience=1)),
        (
            "SequentialLR",
            "sgd",
            lambda o, m: L.SequentialLR(
                o,
                [
                    L.LinearLR(o, start_factor=0.1, total_iters=3),
                    L.OneCycleLR(o, 0.1, total_steps=20),
                ],
                milestones=[3],
            ),
        ),
        ("StepLR", "sgd", lambda o, m: L.StepLR(o, step_size=3, gamma=0.5)),
        ("SWALR", "sgd", lambda o, m: S.SWALR(o, swa_lr=0.05, anneal_epochs=5)),
        (
            "SWALR linear",
            "adamw",
            lambda o, m: S.SWALR(o, swa_lr=0.05, anneal_epochs=5, anneal_strategy="linear"),
        ),
        ("AveragedModel", "sgd", lambda o, m: S.AveragedModel(m)),
    ]


# ReduceLROnPlateau's metric: it plateaus twice.
PLATEAU = [1.0, 0.9, 0.9, 0.9, 0.8, 0.8, 0.8, 0.8, 0.7, 0.7, 0.7, 0.7]


@unittest.skipIf(torch is None, "torch is not installed")
class SchedulerTest(unittest.TestCase):
    STEPS, SAVE_AT = 12, 5

    def setUp(self):
        self.tmp = tempfile.TemporaryDirectory()
        self.dir = os.path.join(self.tmp.name, "ckpt")
        for name in ("RANK", "WORLD_SIZE", "DL_CKPT_DIR", "DL_RESUME_FROM", "DL_CLIENT_FILE"):
            os.environ.pop(name, None)

    def tearDown(self):
        self.tmp.cleanup()

    def train(self, make, kind, resume=None, stop_at=None):
        """Trains STEPS steps (or from the checkpoint `resume`, or until it saves at
        `stop_at`); the learning rates, momenta and averaged parameters after each step."""
        torch.manual_seed(0 if resume is None else 1)  # a resumed run starts from other values
        model = torch.nn.Linear(4, 3)
        if kind == "adamw":
            opt = torch.optim.AdamW(model.parameters(), lr=0.1, weight_decay=0.01)
        else:
            opt = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
        thing = make(opt, model)
        key = "averaged" if isinstance(thing, torch.nn.Module) else "scheduler"
        state = TrainState(ckpt_dir=self.dir, model=model, optimizer=opt, **{key: thing})
        start = state.resume(resume).step if resume else 0
        x = torch.arange(8.0).reshape(2, 4) / 8
        seen = []
        for step in range(start, self.STEPS):
            sgd_step(model, opt, x)
            with warnings.catch_warnings():
                # torch 1.x's SequentialLR steps the next scheduler with an epoch, and says so.
                warnings.filterwarnings("ignore", "The epoch parameter in")
                if isinstance(thing, torch.optim.swa_utils.AveragedModel):
                    thing.update_parameters(model)
                elif isinstance(thing, torch.optim.lr_scheduler.ReduceLROnPlateau):
                    thing.step(PLATEAU[step])
                else:
                    thing.step()
            now = []
            for g in opt.param_groups:
                now += [g["lr"], g.get("momentum"), g.get("betas")]
            if key == "averaged":
                now += [p.detach().numpy().tobytes() for p in thing.parameters()]
            seen.append(repr([v.hex() if isinstance(v, float) else v for v in now]))
            state.end_step()
            if step + 1 == stop_at:
                state.save()
                state.close()
                return seen, ckpt.latest_valid(self.dir)
        state.close()
        return seen

    def test_every_scheduler_class_has_usual_arguments_here(self):
        tested = {label.split()[0] for label, _, _ in schedulers()}
        missing = sorted(set(scheduler_classes()) - tested)
        self.assertEqual(missing, [], "scheduler classes of this torch without a test: add them")

    def test_every_scheduler_resumes_with_bit_identical_learning_rates(self):
        for label, kind, make in schedulers():
            with self.subTest(label):
                shutil.rmtree(self.dir, ignore_errors=True)
                whole = self.train(make, kind)
                first, path = self.train(make, kind, stop_at=self.SAVE_AT)
                self.assertEqual(first, whole[: self.SAVE_AT])
                rest = self.train(make, kind, resume=path)
                self.assertEqual(len(rest), self.STEPS - self.SAVE_AT)
                self.assertEqual(rest, whole[self.SAVE_AT :])

    def test_one_cycle_methods_are_kept_by_name_and_rebound(self):
        # OneCycleLR (torch 1.x) keeps its anneal function as a bound method.
        model = torch.nn.Linear(4, 3)
        opt = torch.optim.AdamW(model.parameters(), lr=0.1)
        sched = torch.optim.lr_scheduler.OneCycleLR(opt, max_lr=0.1, total_steps=20)
        state = TrainState(ckpt_dir=self.dir, model=model, optimizer=opt, scheduler=sched)
        state.end_step()
        state.save()
        state.close()
        other = torch.optim.lr_scheduler.OneCycleLR(
            torch.optim.AdamW(model.parameters(), lr=0.1), max_lr=0.1, total_steps=20
        )
        TrainState(scheduler=other, strict=False).resume(ckpt.latest_valid(self.dir))
        for name, v in other.state_dict().items():
            if inspect.ismethod(v):
                self.assertIs(v.__self__, other, name)

    def test_a_lambda_inside_a_scheduler_is_refused_when_the_state_is_made(self):
        model = torch.nn.Linear(4, 3)
        opt = torch.optim.SGD(model.parameters(), lr=0.1)
        sched = torch.optim.lr_scheduler.LambdaLR(opt, Warmup())
        line = inspect.getsourcelines(Warmup.__init__)[1] + 1
        with self.assertRaises(StateError) as e:
            TrainState(model=model, optimizer=opt, scheduler=sched)
        self.assertEqual(
            str(e.exception),
            "TrainState(scheduler=LambdaLR) can't be checkpointed: scheduler/lr_lambdas/0/curve: "
            f"the function <lambda> (test_torch.py:{line}) can't be saved: a checkpoint holds "
            "data, not code (no pickle); of functions it keeps only the methods of the object "
            "being saved, by name",
        )

    def test_a_custom_cyclic_scale_fn_is_refused_only_where_it_is_state(self):
        # torch 1.x keeps CyclicLR's scale_fn in its state_dict; 2.x keeps None (the
        # program passes the function again) and resumes exactly.
        def make(o, m):
            return torch.optim.lr_scheduler.CyclicLR(
                o, base_lr=0.01, max_lr=0.1, step_size_up=2, scale_fn=lambda x: 0.9**x
            )

        model = torch.nn.Linear(4, 3)
        opt = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
        sched = make(opt, model)
        if inspect.isfunction(sched.state_dict().get("_scale_fn_custom")):
            with self.assertRaises(StateError) as e:
                TrainState(model=model, optimizer=opt, scheduler=sched)
            self.assertIn("scheduler/_scale_fn_custom: the function <lambda>", str(e.exception))
        else:
            whole = self.train(make, "sgd")
            _, path = self.train(make, "sgd", stop_at=self.SAVE_AT)
            self.assertEqual(self.train(make, "sgd", resume=path), whole[self.SAVE_AT :])


class AugmentedData(torch.utils.data.Dataset if torch is not None else object):
    """Random augmentation from every RNG a transform may use; loads logged in `loaded`."""

    def __init__(self, n=40):
        self.n = n
        self.loaded = []

    def __len__(self):
        return self.n

    def __getitem__(self, i):
        self.loaded.append(i)
        x = torch.full((6,), float(i)) / self.n
        x = (
            x
            + 0.1 * torch.randn(6)
            + float(np.random.uniform(-0.1, 0.1))
            + random.uniform(-0.1, 0.1)
        )
        return x, torch.tensor(i % 3)


@unittest.skipIf(torch is None, "torch is not installed")
class MidEpochResumeTest(unittest.TestCase):
    """Two epochs of 10 batches; a checkpoint in the middle of the second; a new set of
    objects (another process would do the same) resumes and ends bit for bit equal."""

    def setUp(self):
        self.tmp = tempfile.TemporaryDirectory()
        self.dir = os.path.join(self.tmp.name, "ckpt")
        for name in (
            "RANK",
            "WORLD_SIZE",
            "DL_CKPT_DIR",
            "DL_CKPT_RUN_ID",
            "DL_RESUME_FROM",
            "DL_CLIENT_FILE",
        ):
            os.environ.pop(name, None)

    def tearDown(self):
        self.tmp.cleanup()

    def objects(self, workers):
        torch.manual_seed(5)
        np.random.seed(5)
        random.seed(5)
        model = torch.nn.Sequential(
            torch.nn.Linear(6, 8), torch.nn.Dropout(0.3), torch.nn.Linear(8, 3)
        )
        opt = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9)
        sched = torch.optim.lr_scheduler.CosineAnnealingLR(opt, T_max=20)
        data = AugmentedData()
        loader = torch.utils.data.DataLoader(data, batch_size=4, shuffle=True, num_workers=workers)
        state = TrainState(
            model=model, optimizer=opt, scheduler=sched, loader=loader, ckpt_dir=self.dir, seen=0
        )
        return state, model, opt, sched, data

    def train(self, workers, stop_at=None, resume=None):
        state, model, opt, sched, data = self.objects(workers)
        if resume:
            # Whatever the RNGs are now, the checkpoint's are used.
            torch.manual_seed(99)
            np.random.seed(99)
            random.seed(99)
        start = state.resume(resume)
        for epoch in range(start.epoch, 2):
            for x, y in state.batches(epoch):
                loss = torch.nn.functional.cross_entropy(model(x), y)
                opt.zero_grad()
                loss.backward()
                opt.step()
                sched.step()
                state.seen += len(y)
                state.end_step(loss=loss.item())
                if (epoch, state.batch) == stop_at:
                    state.save()
                    state.close()
                    return ckpt.latest_valid(self.dir), data
        return model, data, state

    def check(self, workers):
        reference, _, ref_state = self.train(workers)
        path, _ = self.train(workers, stop_at=(1, 4))
        model, data, state = self.train(workers, resume=path)
        for (name, a), b in zip(reference.state_dict().items(), model.state_dict().values()):
            self.assertTrue(torch.equal(a, b), name)
        self.assertEqual(state.seen, 80)
        self.assertEqual(state.step, ref_state.step)
        return data

    def test_resumed_in_the_middle_of_an_epoch_with_two_workers_it_ends_equal(self):
        self.check(2)

    def test_the_batches_done_are_not_loaded_again(self):
        data = self.check(0)
        self.assertEqual(len(data.loaded), 6 * 4)  # the second epoch's last 6 batches

    def test_a_checkpoint_at_the_end_of_an_epoch_resumes_at_the_next(self):
        path, _ = self.train(0, stop_at=(0, 10))
        state = self.objects(0)[0]
        self.assertEqual(tuple(state.resume(path)), (0, 10, 10))
        self.assertEqual(list(state.batches(0)), [])
        self.assertEqual(len(list(state.batches(1))), 10)

    def test_workers_survive_the_stop_signal_dlrun_turns_into_a_checkpoint(self):
        # Under dlrun the program ignores SIGTERM and Slurm sends it to every process of
        # the step: the DataLoader workers must not die of it before the save.
        pid = os.fork()
        if pid == 0:
            code = 1
            try:
                os.setpgid(0, 0)
                signal.signal(signal.SIGTERM, signal.SIG_IGN)
                state = self.objects(2)[0]
                seen = 0
                for _ in state.batches(0):
                    if seen == 1:
                        os.killpg(0, signal.SIGTERM)
                        time.sleep(0.5)
                    seen += 1
                code = 0 if seen == 10 else 2
            except Exception as e:
                print(f"child: {e}", file=sys.stderr)
            finally:
                os._exit(code)
        self.assertEqual(os.waitpid(pid, 0)[1], 0)


if __name__ == "__main__":
    unittest.main()
