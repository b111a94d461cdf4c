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
import math
import os
import sys
import weakref

import torch

import slurm_dl
from slurm_dl import _data_order, _matching, _optim_state, _rng, _tensor_io, ckpt
from slurm_dl._errors import StateError

__all__ = ["TrainState", "Start", "StateError"]

FORMAT = "slurm_dl.torch"
FORMAT_VERSION = 1

Start = collections.namedtuple("Start", "epoch batch step")
Start.__doc__ = """Where a resumed loop continues: epoch, batches already done in it, steps done."""


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
            derived = self._derived[key] = _data_order.Loader(loader, key)
        derived.set_epoch(epoch)
        gens = self._generators()
        resume = self._resume_at
        self.__dict__["_resume_at"] = None
        if resume is not None and resume["epoch"] == epoch and resume["loader"] in (None, key):
            # Draw the order and seed from the epoch's start, then continue the RNGs from
            # where the checkpoint left them.
            now = _rng.capture(gens)
            _rng.restore(resume["epoch_rngs"], gens)
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
            _rng.restore(now, gens)
            self.__dict__["batch"] = min(start, n)
        else:
            self.__dict__["_epoch_rngs"] = _rng.capture(gens)
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
        writer = _tensor_io.Writer(rank, world, self._shard_of)
        tree = self._tree(writer)
        rng = {name: data for name, data in _rng.capture(self._generators()).items()}
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
            return writer.value(_optim_state.by_name(thing, self._names(thing)), (key,))
        if key in self._stateful:
            return writer.stateful(thing, (key,))
        if key in self._samplers:
            return writer.value({"epoch": getattr(thing, "epoch", 0)}, (key,))
        return writer.value(thing, (key,))

    def _check_savable(self):
        """Refuses, now rather than at the first checkpoint, what no checkpoint can hold."""
        writer = _tensor_io.Writer(0, 1, dry=True)
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
            reader = _tensor_io.Reader(c, self._box_of)
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
            _matching.raise_problems(problems, self._strict, where)
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
                    _matching.compare(decoded[key], _unwrap(module).state_dict(), (key,), problems)
                    _matching.raise_problems(problems, self._strict, where)
            for key, obj in self._stateful.items():
                if key in decoded:
                    problems = []
                    _matching.compare(decoded[key], obj.state_dict(), (key,), problems)
                    # Its load_state_dict() gets the whole saved state and judges it: a
                    # scheduler gains entries as it steps (ReduceLROnPlateau's _last_lr)
                    # that one made afresh to resume into lacks.
                    problems = [p for p in problems if p[0] != "unexpected"]
                    _matching.raise_problems(problems, self._strict, where)
            optimizer_states = {
                key: _optim_state.by_number(opt, self._names(opt), decoded[key], key, self._strict)
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
                    obj.load_state_dict(_matching.move_like(decoded[key], obj.state_dict()))
            for key, sampler in self._samplers.items():
                if key in decoded and hasattr(sampler, "set_epoch"):
                    sampler.set_epoch(decoded[key]["epoch"])
            for key in self._values:
                if key in decoded:
                    self._values[key] = _matching.move_like(decoded[key], self._values[key])
            progress = tree["progress"]
            rank, _ = _rank_world()
            src = rank % c.world_size
            gens = self._generators()
            names = _rng.state_names(gens)
            now = _rng.read(c, src, names)
            epoch_rngs = _rng.read(c, src, [f"epoch.{n}" for n in names])
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
            _rng.restore(now, gens)

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
                f"{_tensor_io.path_text(path)}: shape {list(t.shape)} at offset {list(offset)} "
                f"does not fit in the global shape {list(global_shape)} given in shards="
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
        return _optim_state.param_names(
            {k: _unwrap(m) for k, m in self._modules.items()}, optimizer
        )

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
