#!/usr/bin/env python3
"""The quickstart's trainer: PyTorch DistributedDataParallel, preemptible and resumable.

    #SBATCH --nodes=2 --dl-gpus=4 --dl-preemptible ...
    dlrun python3 train.py --epochs 10

dlrun starts one rank per GPU and sets what torch.distributed reads (RANK, WORLD_SIZE,
LOCAL_RANK, MASTER_ADDR, MASTER_PORT). The four TrainState lines are all slurm-dl asks
of a training loop: a preempted, timed-out or failed run continues at the next batch.
"""

import argparse
import os

import torch
import torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel
from torch.utils.data import DataLoader, DistributedSampler, TensorDataset

from slurm_dl.torch import TrainState


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--epochs", type=int, default=10)
    parser.add_argument("--samples", type=int, default=8192)
    parser.add_argument("--lr", type=float, default=0.01)
    args = parser.parse_args()

    cuda = torch.cuda.is_available()
    dist.init_process_group("nccl" if cuda else "gloo")
    if cuda:
        device = torch.device("cuda", int(os.environ["LOCAL_RANK"]))
        torch.cuda.set_device(device)
    else:
        device = torch.device("cpu")

    torch.manual_seed(0)
    data = TensorDataset(torch.randn(args.samples, 32), torch.randn(args.samples, 1))
    loader = DataLoader(data, batch_size=32, sampler=DistributedSampler(data))
    net = torch.nn.Sequential(torch.nn.Linear(32, 64), torch.nn.ReLU(), torch.nn.Linear(64, 1))
    model = DistributedDataParallel(net.to(device), device_ids=[device.index] if cuda else None)
    optimizer = torch.optim.SGD(model.parameters(), lr=args.lr, momentum=0.9)

    state = TrainState(model=model, optimizer=optimizer, loader=loader)  # what a checkpoint holds
    start = state.resume()  # the newest checkpoint of this job, if it has one
    for epoch in range(start.epoch, args.epochs):
        loss = None  # resumed from the epoch's last batch, the epoch has no batch left
        for x, y in state.batches(epoch):  # the epoch's batches not done yet
            optimizer.zero_grad()
            loss = torch.nn.functional.mse_loss(model(x.to(device)), y.to(device))
            loss.backward()
            optimizer.step()
            state.end_step(loss=loss.item())  # saves when dlrun asks (preemption, deadline...)
        if loss is not None and dist.get_rank() == 0:
            print(f"epoch {epoch} loss {loss.item():.4f}", flush=True)
    state.close()  # the last checkpoint, if one is being written, is durable
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
