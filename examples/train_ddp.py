#!/usr/bin/python3
"""The PyTorch example of slurm-dl: a DistributedDataParallel trainer (gloo, CPU).

    sbatch examples/train_ddp.sbatch    (dlrun /usr/bin/python3 train_ddp.py in the batch script)

dlrun gives every rank the torchrun variables (RANK, WORLD_SIZE, MASTER_ADDR,
MASTER_PORT, ...), so `init_process_group("gloo")` needs no arguments. A small MLP learns
a fixed random function of synthetic inputs. Every sample is a pure function of
(seed, sample index) and the global batch of step k is samples [k*B, (k+1)*B), so a run
resumed from a checkpoint continues exactly where the checkpoint left it: on two ranks it
ends with the same parameters, bit for bit, as an uninterrupted run (gloo adds two
gradients in either order to the same bits; with more ranks, the order of a ring
all-reduce depends on DDP's buckets, which are rebuilt after the first step of every run,
so results agree to about 1e-12).

Checkpoints are written when dlrun asks (slurm_dl.should_checkpoint(): preemption,
deadline, --dl-ckpt-every) by slurm_dl.torch's TrainState, in the dl-ckpt format: every
rank saves its rows of each parameter and momentum buffer, and a resumed run reads them
whole, from any number of ranks.
"""

import argparse
import os
import sys
import time

import numpy as np
import torch
import torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel

from slurm_dl.torch import TrainState

IN, HIDDEN = 16, 32


def samples(seed, first, count):
    """Inputs and targets of samples first..first+count-1 (float64)."""
    xs = np.empty((count, IN))
    for k in range(count):
        xs[k] = np.random.default_rng([seed, first + k]).uniform(-1, 1, IN)
    ys = np.sin(xs @ np.linspace(-1, 1, IN))[:, None] + 0.5 * xs[:, :1] ** 2
    return torch.from_numpy(xs), torch.from_numpy(ys)


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=300)
    parser.add_argument("--batch", type=int, default=64, help="global batch size")
    parser.add_argument("--lr", type=float, default=0.05)
    parser.add_argument("--seed", type=int, default=1234)
    parser.add_argument("--step-ms", type=int, default=0, help="extra time per step")
    parser.add_argument("--out", help="write the final parameters here (rank 0)")
    args = parser.parse_args()
    for name in ("steps", "batch"):
        if getattr(args, name) < 1:
            parser.error(f"--{name}={getattr(args, name)}: must be at least 1")

    torch.set_num_threads(1)
    torch.use_deterministic_algorithms(True)
    torch.manual_seed(args.seed)
    dist.init_process_group("gloo")
    rank, world = dist.get_rank(), dist.get_world_size()

    model = torch.nn.Sequential(
        torch.nn.Linear(IN, HIDDEN), torch.nn.Tanh(), torch.nn.Linear(HIDDEN, 1)
    ).double()
    ddp = DistributedDataParallel(model)
    opt = torch.optim.SGD(model.parameters(), lr=args.lr, momentum=0.9)
    # async_save=False: end_step() returns once the checkpoint is durable (the line below).
    state = TrainState(model=model, optimizer=opt, last_loss=None, async_save=False,
                       hyperparameters=vars(args))
    first = state.resume().step
    if state.resumed_from and rank == 0:
        print(f"resumed from {state.resumed_from} (step {first - 1}, written by "
              f"{state.resumed_world_size} ranks)", flush=True)

    for step in range(first, args.steps):
        xs, ys = samples(args.seed, step * args.batch, args.batch)
        mine = slice(rank, args.batch, world)
        # DDP averages gradients over ranks: scale so that the result is the mean over
        # the global batch.
        loss = ((ddp(xs[mine]) - ys[mine]) ** 2).sum() * world / args.batch
        opt.zero_grad()
        loss.backward()
        opt.step()
        with torch.no_grad():
            total = loss.detach().clone() / world
            dist.all_reduce(total)
        if args.step_ms:
            time.sleep(args.step_ms / 1000)
        state.last_loss = total.item()
        if rank == 0:
            print(f"step {step} loss {state.last_loss:.17g}", flush=True)
        started = time.monotonic()
        if state.end_step(loss=state.last_loss) and rank == 0:
            print(f"checkpoint step {step} written in {time.monotonic() - started:.3f} s", flush=True)

    if rank == 0:
        flat = np.concatenate([p.detach().numpy().ravel() for _, p in model.named_parameters()])
        print(f"final step {args.steps - 1} loss {state.last_loss:.17g}", flush=True)
        if args.out:
            tmp = f"{args.out}.tmp{os.getpid()}"
            with open(tmp, "wb") as f:
                f.write(flat.tobytes())
                f.flush()
                os.fsync(f.fileno())
            os.replace(tmp, args.out)
    dist.destroy_process_group()
    return 0


if __name__ == "__main__":
    sys.exit(main())
