#!/usr/bin/env python3
"""A training program of the kind the PyTorch DDP tutorial series teaches (pytorch/examples,
distributed/ddp-tutorial-series/multinode.py, the "fault-tolerant" pattern): it reads
torchrun's environment, trains with DDP over gloo on the CPU, and keeps its own snapshot
file, which rank 0 writes every SAVE_EVERY epochs and every run loads when it exists. It
knows nothing of slurm-dl's client API. With --save-on-term it also has the handler such
programs often add: on SIGTERM every rank finishes its epoch, rank 0 writes a snapshot,
and all exit 0.

    ddp_snapshot.py TOTAL_EPOCHS SAVE_EVERY --snapshot FILE [--batch-ms MS] [--save-on-term]
"""
import argparse
import os
import signal
import time

import torch
import torch.distributed as dist
import torch.nn.functional as F
from torch.nn.parallel import DistributedDataParallel as DDP
from torch.utils.data import DataLoader, TensorDataset
from torch.utils.data.distributed import DistributedSampler


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("total_epochs", type=int)
    parser.add_argument("save_every", type=int)
    parser.add_argument("--snapshot", required=True)
    parser.add_argument("--batch-ms", type=int, default=0)
    parser.add_argument("--save-on-term", action="store_true")
    args = parser.parse_args()

    terminated = []
    if args.save_on_term:
        signal.signal(signal.SIGTERM, lambda *_: terminated.append(True))

    dist.init_process_group(backend="gloo")
    rank = dist.get_rank()
    generator = torch.Generator().manual_seed(1)
    data = TensorDataset(torch.rand(256, 20, generator=generator),
                         torch.rand(256, 1, generator=generator))
    torch.manual_seed(0)
    model = torch.nn.Linear(20, 1)
    epochs_run = 0
    if os.path.exists(args.snapshot):
        snapshot = torch.load(args.snapshot)
        model.load_state_dict(snapshot["MODEL_STATE"])
        epochs_run = snapshot["EPOCHS_RUN"]
        print(f"rank {rank}: resuming from the snapshot at epoch {epochs_run}", flush=True)
    ddp = DDP(model)
    optimizer = torch.optim.SGD(ddp.parameters(), lr=1e-3)
    sampler = DistributedSampler(data, shuffle=False)
    loader = DataLoader(data, batch_size=32, sampler=sampler)

    def save(epochs, why):
        if rank == 0:
            tmp = args.snapshot + ".tmp"
            torch.save({"MODEL_STATE": ddp.module.state_dict(), "EPOCHS_RUN": epochs}, tmp)
            os.replace(tmp, args.snapshot)
            print(f"rank 0: snapshot saved at epoch {epochs} ({why})", flush=True)

    def shut_down():
        # torch 1.13 can deadlock here (pytorch/pytorch#56297): the process group dies with
        # the DDP model, its destructor waits with the GIL held for the gloo worker that
        # finishes the last all_reduce, and that worker needs the GIL if it holds the last
        # reference to a tensor Python created. So the model (and with it the group) goes
        # while `stop`, the last collective's tensor, is still alive.
        nonlocal ddp
        dist.destroy_process_group()
        ddp = None

    for epoch in range(epochs_run, args.total_epochs):
        sampler.set_epoch(epoch)
        for source, targets in loader:
            optimizer.zero_grad()
            F.mse_loss(ddp(source), targets).backward()
            optimizer.step()
            time.sleep(args.batch_ms / 1000)
        print(f"rank {rank}: epoch {epoch} done", flush=True)
        # Every rank stops after the same epoch: the handler's flag, reduced.
        stop = torch.tensor([1 if terminated else 0])
        dist.all_reduce(stop)
        if stop.item():
            save(epoch + 1, "SIGTERM")
            dist.barrier()
            shut_down()
            return
        if (epoch + 1) % args.save_every == 0:
            save(epoch + 1, "every %d epochs" % args.save_every)
    print(f"rank {rank}: trained {args.total_epochs} epochs", flush=True)
    shut_down()


if __name__ == "__main__":
    main()
