#!/usr/bin/python3
"""The PyTorch example of slurm-dl: a DistributedDataParallel trainer (gloo, CPU).

    sbatch examples/train_ddp.sbatch    (srun --mpi=pmix dlrun /usr/bin/python3 train_ddp.py)

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
deadline, --dl-ckpt-every), in the dl-ckpt format (slurm_dl.ckpt): every rank saves its
rows of each parameter and momentum buffer (rank 0 alone a tensor with fewer rows than
ranks), and a resumed run reads them whole, from any number of ranks.
"""

import argparse
import os
import sys
import time

import numpy as np
import torch
import torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel

import slurm_dl
from slurm_dl import ckpt

IN, HIDDEN = 16, 32


def samples(seed, first, count):
    """Inputs and targets of samples first..first+count-1 (float64)."""
    xs = np.empty((count, IN))
    for k in range(count):
        xs[k] = np.random.default_rng([seed, first + k]).uniform(-1, 1, IN)
    ys = np.sin(xs @ np.linspace(-1, 1, IN))[:, None] + 0.5 * xs[:, :1] ** 2
    return torch.from_numpy(xs), torch.from_numpy(ys)


def rows(n, rank, world):
    """This rank's rows of a tensor with n rows (numpy.array_split's split)."""
    base, extra = divmod(n, world)
    lo = rank * base + min(rank, extra)
    return lo, lo + base + (1 if rank < extra else 0)


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
    first, last_loss = 0, None
    resume = slurm_dl.resume_path()
    if resume:
        with ckpt.Checkpoint(resume) as c:
            with torch.no_grad():
                for name, p in model.named_parameters():
                    p.copy_(torch.from_numpy(c.read("model/" + name)))
            # A momentum buffer exists once the optimizer has taken a step.
            for name, p in model.named_parameters():
                opt.state[p]["momentum_buffer"] = torch.from_numpy(c.read("optim/" + name))
            torch.set_rng_state(torch.from_numpy(np.frombuffer(c.rng("torch", 0), dtype=np.uint8).copy()))
            first = c.step + 1
            last_loss = c.meta.get("metrics", {}).get("loss")
        if rank == 0:
            print(f"resumed from {resume} (step {first - 1}, written by {c.world_size} ranks)", flush=True)

    saver = ckpt.Saver() if os.environ.get("DL_CKPT_DIR") else None
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
        last_loss = total.item()
        if rank == 0:
            print(f"step {step} loss {last_loss:.17g}", flush=True)
        slurm_dl.report_step(step)
        if step % 10 == 0:
            slurm_dl.report_metrics(step, {"loss": last_loss})
        if saver and slurm_dl.should_checkpoint():
            started = time.monotonic()
            parts = {}
            for name, p in model.named_parameters():
                for prefix, t in (("model/", p.detach()), ("optim/", opt.state[p]["momentum_buffer"])):
                    a = t.numpy()
                    lo, hi = rows(a.shape[0], rank, world)
                    if hi == lo:
                        continue  # fewer rows than ranks: the ranks before this one have them
                    offset = (lo,) + (0,) * (a.ndim - 1)
                    parts[prefix + name] = ckpt.Part(a[lo:hi], a.shape, offset)
            saver.save(
                step,
                parts,
                rng={"torch": torch.get_rng_state().numpy().tobytes()},
                meta={"metrics": {"loss": last_loss}, "hyperparameters": vars(args)},
            )
            slurm_dl.checkpoint_done(step)
            if rank == 0:
                print(f"checkpoint step {step} written in {time.monotonic() - started:.3f} s", flush=True)

    if rank == 0:
        flat = np.concatenate([p.detach().numpy().ravel() for _, p in model.named_parameters()])
        print(f"final step {args.steps - 1} loss {last_loss:.17g}", flush=True)
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
