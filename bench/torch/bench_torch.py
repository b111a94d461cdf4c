#!/usr/bin/python3
"""The stall a training step sees when slurm_dl.torch checkpoints, against torch.save.

    DL_CKPT_LIB=build/ckpt/.libs/libdlckpt.so.0 PYTHONPATH=python \\
        /usr/bin/python3 bench/torch/bench_torch.py [--mb 100] [--repeat 3] [--dir DIR]

A model of --mb MB of float32 parameters, saved --repeat times in turn by
TrainState.save() (asynchronous: the step waits only for the copy of the tensors) and by
torch.save() of the same state_dict to the same file system, followed by an fsync (the
durability the dl-ckpt checkpoint has). Prints the medians, the ratio of the stalls and
of the bytes written; asserts nothing.
"""

import argparse
import os
import shutil
import statistics
import sys
import tempfile
import time

import torch

from slurm_dl.torch import TrainState


def du(path):
    if os.path.isfile(path):
        return os.path.getsize(path)
    return sum(os.path.getsize(os.path.join(d, f)) for d, _, files in os.walk(path) for f in files)


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--mb", type=int, default=100, help="model size in MB (float32)")
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument(
        "--dir", help="where to write (default: a temporary directory under /var/tmp)"
    )
    args = parser.parse_args()

    for name in ("RANK", "WORLD_SIZE", "DL_CKPT_DIR", "DL_CLIENT_FILE"):
        os.environ.pop(name, None)
    root = tempfile.mkdtemp(prefix="bench-torch-", dir=args.dir or "/var/tmp")
    try:
        width = 1024
        rows = args.mb * 1024 * 1024 // 4 // width
        layers = max(1, rows // width)
        model = torch.nn.Sequential(
            *[torch.nn.Linear(width, rows // layers, bias=False) for _ in range(layers)]
        )
        nbytes = sum(p.numel() * 4 for p in model.parameters())
        state = TrainState(model=model, ckpt_dir=os.path.join(root, "ckpt"))
        results = {
            "slurm_dl.torch stall": [],
            "slurm_dl.torch durable": [],
            "torch.save + fsync": [],
        }
        sizes = {}
        for i in range(args.repeat):
            state.end_step()
            t0 = time.perf_counter()
            state.save()  # returns once the tensors are copied
            t1 = time.perf_counter()
            state.close()  # durable
            t2 = time.perf_counter()
            results["slurm_dl.torch stall"].append(t1 - t0)
            results["slurm_dl.torch durable"].append(t2 - t0)
            step_dirs = sorted(
                d for d in os.listdir(os.path.join(root, "ckpt")) if d.startswith("step-")
            )
            sizes["dl-ckpt"] = du(os.path.join(root, "ckpt", step_dirs[-1]))

            path = os.path.join(root, f"torch-{i}.pt")
            t0 = time.perf_counter()
            torch.save(model.state_dict(), path)
            with open(path, "rb") as f:
                os.fsync(f.fileno())
            t1 = time.perf_counter()
            results["torch.save + fsync"].append(t1 - t0)
            sizes["torch.save"] = os.path.getsize(path)
            os.unlink(path)

        print(
            f"model: {nbytes / 2**20:.0f} MiB of float32 parameters; {args.repeat} saves each, in {root}"
        )
        for name, times in results.items():
            print(
                f"  {name:24s} median {statistics.median(times) * 1000:9.1f} ms  "
                f"(min {min(times) * 1000:.1f}, max {max(times) * 1000:.1f})"
            )
        stall = statistics.median(results["slurm_dl.torch stall"])
        base = statistics.median(results["torch.save + fsync"])
        print(
            f"stall ratio (slurm_dl.torch stall / torch.save + fsync): {stall / base:.3f}  (target <= 0.2)"
        )
        print(
            f"bytes written: dl-ckpt {sizes['dl-ckpt']}, torch.save {sizes['torch.save']}: "
            f"ratio {sizes['dl-ckpt'] / sizes['torch.save']:.3f}  (target <= 1.05)"
        )
    finally:
        shutil.rmtree(root, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
