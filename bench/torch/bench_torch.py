#!/usr/bin/python3
"""The stall a training step sees when slurm_dl.torch checkpoints, against torch.save and DCP.

    DL_CKPT_LIB=build/ckpt/.libs/libdlckpt.so.0 PYTHONPATH=python \\
        /usr/bin/python3 bench/torch/bench_torch.py [--mb 100] [--repeat 3] [--ranks 1] [--dir DIR]

A model of --mb MB of float32 parameters, replicated on --ranks processes (forked; DCP
gets a gloo process group when there are 2 or more), saved --repeat times in turn by:
  - TrainState.save() (asynchronous: the step waits only for the copy of the tensors);
  - torch.save() of the state_dict by rank 0, followed by an fsync (the durability the
    dl-ckpt checkpoint has);
  - torch.distributed.checkpoint (DCP, torch >= 2.2): dcp.save(), dcp.async_save() as it
    is, and dcp.async_save() of a copy of the state_dict. On CPU tensors async_save's
    staging keeps no copy (the staged tensors are the model's), so the checkpoint holds
    whatever the step changed before the write ended; the copy gives a snapshot, as
    TrainState.save() does. DCP's writer fsyncs its files.
Each is then restored into another model of the same shape (from the page cache: the files
were just written). A stall or a restore is the slowest rank's. Prints the medians and the
ratios against torch.save and DCP; asserts nothing.
"""

import argparse
import multiprocessing
import os
import shutil
import statistics
import sys
import tempfile
import time
import warnings

import torch

from slurm_dl.torch import TrainState

try:
    import torch.distributed as dist
    import torch.distributed.checkpoint as dcp

    DCP_MISSING = None if hasattr(dcp, "async_save") else "dcp.async_save"
except ImportError:
    DCP_MISSING = "torch.distributed.checkpoint"

WIDTH = 1024


def du(path):
    if os.path.isfile(path):
        return os.path.getsize(path)
    return sum(os.path.getsize(os.path.join(d, f)) for d, _, files in os.walk(path) for f in files)


def make_model(mb, seed):
    torch.manual_seed(seed)
    rows = mb * 1024 * 1024 // 4 // WIDTH
    layers = max(1, rows // WIDTH)
    return torch.nn.Sequential(
        *[torch.nn.Linear(WIDTH, rows // layers, bias=False) for _ in range(layers)]
    )


class Timings:
    """One rank's seconds and bytes, by variant."""

    def __init__(self):
        self.times = {}
        self.sizes = {}

    def add(self, name, seconds):
        self.times.setdefault(name, []).append(seconds)


def check_equal(model, restored, what):
    for (name, a), b in zip(model.state_dict().items(), restored.state_dict().values()):
        if not torch.equal(a, b):
            raise RuntimeError(f"{what}: {name} restored differs from the saved model")
    with torch.no_grad():  # the next restore must write every value again
        for p in restored.parameters():
            p.zero_()


def timed(fn):
    t0 = time.perf_counter()
    result = fn()
    return time.perf_counter() - t0, result


def run_rank(rank, world, args, root, barrier, queue):
    """Puts (rank, times, sizes), or (rank, None, the error) after breaking the barrier so
    that the other ranks stop too."""
    try:
        t = measure(rank, world, args, root, barrier)
        queue.put((rank, t.times, t.sizes))
    except BaseException as e:
        barrier.abort()
        queue.put((rank, None, f"{type(e).__name__}: {e}"))


def measure(rank, world, args, root, barrier):
    """Saves and restores with every variant, --repeat times."""
    os.environ.update(RANK=str(rank), WORLD_SIZE=str(world), DL_CKPT_RUN_ID="bench-torch")
    if world > 1 and DCP_MISSING is None:
        os.environ.setdefault("GLOO_SOCKET_IFNAME", "lo")  # the ranks share this machine
        dist.init_process_group(
            "gloo",
            init_method="file://" + os.path.join(root, "pg-store"),
            rank=rank,
            world_size=world,
        )
    warnings.filterwarnings("ignore", module="torch.distributed")
    model = make_model(args.mb, seed=1)
    restored = make_model(args.mb, seed=2)
    ckpt_dir = os.path.join(root, "ckpt")
    state = TrainState(model=model, ckpt_dir=ckpt_dir)
    t = Timings()

    for i in range(args.repeat):
        barrier.wait()
        state.end_step()
        stall, _ = timed(state.save)  # returns once the tensors are copied
        durable, _ = timed(state.close)
        t.add("slurm_dl.torch stall", stall)
        t.add("slurm_dl.torch durable", stall + durable)
        barrier.wait()
        step = os.path.join(
            ckpt_dir, sorted(d for d in os.listdir(ckpt_dir) if d.startswith("step-"))[-1]
        )
        t.sizes["slurm_dl.torch"] = du(step)
        t.add("slurm_dl.torch restore", timed(lambda: TrainState(model=restored).load(step))[0])
        check_equal(model, restored, "slurm_dl.torch")

        path = os.path.join(root, f"torch-{i}.pt")
        barrier.wait()
        if rank == 0:

            def save():
                torch.save(model.state_dict(), path)
                with open(path, "rb") as f:
                    os.fsync(f.fileno())

            t.add("torch.save + fsync", timed(save)[0])
            t.sizes["torch.save"] = os.path.getsize(path)
        barrier.wait()
        t.add(
            "torch.load restore",
            timed(lambda: restored.load_state_dict(torch.load(path)))[0],
        )
        check_equal(model, restored, "torch.load")
        barrier.wait()
        if rank == 0:
            os.unlink(path)

        if DCP_MISSING:
            continue
        for name, save in (
            ("DCP save", lambda d: dcp.save(model.state_dict(), checkpoint_id=d)),
            ("DCP async_save", lambda d: dcp.async_save(model.state_dict(), checkpoint_id=d)),
            (
                "DCP async_save of a copy",
                lambda d: dcp.async_save(
                    {k: v.detach().clone() for k, v in model.state_dict().items()},
                    checkpoint_id=d,
                ),
            ),
        ):
            d = os.path.join(root, f"dcp-{i}")
            barrier.wait()
            stall, result = timed(lambda: save(d))
            t.add(f"{name} stall", stall)
            if "async" in name:
                t.add(f"{name} durable", stall + timed(result.result)[0])
            barrier.wait()
            t.sizes["DCP"] = du(d)
            t.add(
                "DCP load restore",
                timed(lambda: dcp.load(restored.state_dict(), checkpoint_id=d))[0],
            )
            check_equal(model, restored, name)
            barrier.wait()
            if rank == 0:
                shutil.rmtree(d)
    state.close()
    return t


def merge(per_rank):
    """The slowest rank's time per repetition, by variant; the bytes of all ranks."""
    times = {}
    for name in per_rank[0][0]:
        runs = [r[0][name] for r in per_rank if name in r[0]]
        n = len(runs[0])
        times[name] = [max(run[j] for run in runs) for j in range(n)]
    sizes = {}
    for _, s in per_rank:
        sizes.update(s)  # every rank sees the whole step directory
    return times, sizes


def median(times, name):
    return statistics.median(times[name]) if name in times else None


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--mb", type=int, default=100, help="model size in MB (float32)")
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--ranks", type=int, default=1, help="processes, each with the model")
    parser.add_argument(
        "--dir", help="where to write (default: a temporary directory under /var/tmp)"
    )
    args = parser.parse_args()

    for name in ("RANK", "WORLD_SIZE", "DL_CKPT_DIR", "DL_CLIENT_FILE", "DL_RESUME_FROM"):
        os.environ.pop(name, None)
    root = tempfile.mkdtemp(prefix="bench-torch-", dir=args.dir or "/var/tmp")
    try:
        ctx = multiprocessing.get_context("fork")
        barrier, queue = ctx.Barrier(args.ranks), ctx.Queue()
        procs = [
            ctx.Process(target=run_rank, args=(r, args.ranks, args, root, barrier, queue))
            for r in range(args.ranks)
        ]
        for p in procs:
            p.start()
        per_rank, failed = {}, False
        for _ in procs:
            rank, times, sizes = queue.get()
            per_rank[rank] = (times, sizes)
            if times is None:
                print(f"rank {rank}: {sizes}", file=sys.stderr)
                failed = True
        for p in procs:
            p.join()
        if failed:
            return 1
        times, sizes = merge([per_rank[r] for r in sorted(per_rank)])
        report(args, root, times, sizes)
    finally:
        shutil.rmtree(root, ignore_errors=True)
    return 0


def report(args, root, times, sizes):
    nbytes = sum(p.numel() * 4 for p in make_model(args.mb, seed=0).parameters())
    print(
        f"torch {torch.__version__}; model: {nbytes / 2**20:.0f} MiB of float32 parameters on "
        f"{args.ranks} rank(s); {args.repeat} saves each, in {root}"
    )
    for name, runs in times.items():
        print(
            f"  {name:34s} median {statistics.median(runs) * 1000:9.1f} ms  "
            f"(min {min(runs) * 1000:.1f}, max {max(runs) * 1000:.1f})"
        )
    if DCP_MISSING:
        print(f"  DCP: not available on torch {torch.__version__} (no {DCP_MISSING})")

    def ratio(what, ours, base, target):
        if ours is None or base is None:
            print(f"{what}: not available on torch {torch.__version__}")
        else:
            print(f"{what}: {ours / base:.3f}  ({target})")

    stall = median(times, "slurm_dl.torch stall")
    ratio(
        "stall ratio (slurm_dl.torch / torch.save + fsync)",
        stall,
        median(times, "torch.save + fsync"),
        "target <= 0.2",
    )
    ratio(
        "stall ratio (slurm_dl.torch / DCP async_save)",
        stall,
        median(times, "DCP async_save stall"),
        "target <= 1.0; DCP keeps no copy of CPU tensors",
    )
    ratio(
        "stall ratio (slurm_dl.torch / DCP async_save of a copy)",
        stall,
        median(times, "DCP async_save of a copy stall"),
        "target <= 1.0",
    )
    print(
        f"bytes written: slurm_dl.torch {sizes['slurm_dl.torch']}, torch.save {sizes['torch.save']}"
        + (f", DCP {sizes['DCP']}" if "DCP" in sizes else "")
    )
    ratio(
        "bytes ratio (slurm_dl.torch / torch.save)",
        sizes["slurm_dl.torch"],
        sizes["torch.save"],
        "target <= 1.05",
    )
    ratio(
        "bytes ratio (slurm_dl.torch / DCP)",
        sizes["slurm_dl.torch"],
        sizes.get("DCP"),
        "target <= 1.05",
    )
    restore = median(times, "slurm_dl.torch restore")
    ratio(
        "restore ratio (slurm_dl.torch / torch.load)",
        restore,
        median(times, "torch.load restore"),
        "for reference",
    )
    ratio(
        "restore ratio (slurm_dl.torch / DCP load)",
        restore,
        median(times, "DCP load restore"),
        "target <= 1.0",
    )


if __name__ == "__main__":
    sys.exit(main())
