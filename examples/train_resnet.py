#!/usr/bin/python3
"""An image classifier trained the way PyTorch's DDP tutorial does (a Trainer class), made
preemptible and resumable by slurm_dl.torch.

    sbatch -N2 --dl-gpus=2 --wrap "dlrun /usr/bin/python3 train_resnet.py --epochs 3 --out w.bin"

torchvision's ResNet-18 (random init, dropout before its last layer; or a small CNN with
--model small) on FakeData with random crops and flips, a DistributedSampler that shuffles,
a DataLoader with worker processes, SGD with momentum and a cosine learning rate. The
tutorial's version keeps a snapshot file of the model and the number of epochs run, so a
restarted job repeats the interrupted epoch with other random numbers; here a TrainState
holds the model, optimizer, scheduler and loader, and a run stopped anywhere (by a
preemption, its time limit, a stop signal) continues at the next batch and ends with the
same parameters, bit for bit, as a run that was never stopped (on the same number of ranks;
on another number it resumes at the same point of the epoch and finishes).
"""

import argparse
import os
import sys
import time

import numpy as np
import torch
import torch.distributed as dist
import torchvision
from torch.nn.parallel import DistributedDataParallel
from torch.utils.data import DataLoader, DistributedSampler

from slurm_dl.torch import TrainState


def small_cnn(classes):
    """Conv, BatchNorm, dropout: the layers ResNet-18 has, at a fraction of the cost."""
    return torch.nn.Sequential(
        torch.nn.Conv2d(3, 16, 3, padding=1),
        torch.nn.BatchNorm2d(16),
        torch.nn.ReLU(),
        torch.nn.MaxPool2d(2),
        torch.nn.Conv2d(16, 32, 3, padding=1),
        torch.nn.BatchNorm2d(32),
        torch.nn.ReLU(),
        torch.nn.AdaptiveAvgPool2d(1),
        torch.nn.Flatten(),
        torch.nn.Dropout(0.2),
        torch.nn.Linear(32, classes),
    )


class Trainer:
    def __init__(self, model, loader, optimizer, scheduler, args):
        self.rank = dist.get_rank()
        self.world = dist.get_world_size()
        self.model = DistributedDataParallel(model)
        self.optimizer = optimizer
        self.scheduler = scheduler
        self.args = args
        self.state = TrainState(
            model=model,
            optimizer=optimizer,
            scheduler=scheduler,
            loader=loader,
            hyperparameters=vars(args),
        )

    def _run_batch(self, source, targets):
        self.optimizer.zero_grad()
        loss = torch.nn.functional.cross_entropy(self.model(source), targets)
        loss.backward()
        self.optimizer.step()
        self.scheduler.step()
        with torch.no_grad():
            total = loss.detach().clone() / self.world
            dist.all_reduce(total)
        return total.item()

    def _run_epoch(self, epoch):
        for source, targets in self.state.batches(epoch):
            loss = self._run_batch(source, targets)
            if self.args.step_ms:
                time.sleep(self.args.step_ms / 1000)
            if self.rank == 0:
                print(f"step {self.state.step} loss {loss:.17g}", flush=True)
            if self.state.end_step(loss=loss) and self.rank == 0:
                print(
                    f"checkpoint step {self.state.step - 1} at epoch {epoch}, batch "
                    f"{self.state.batch}",
                    flush=True,
                )

    def train(self, max_epochs):
        start = self.state.resume()
        if self.state.resumed_from and self.rank == 0:
            print(
                f"resumed from {self.state.resumed_from} (step {start.step - 1}, written by "
                f"{self.state.resumed_world_size} ranks) at epoch {start.epoch}, batch "
                f"{start.batch}",
                flush=True,
            )
        for epoch in range(start.epoch, max_epochs):
            self._run_epoch(epoch)
        self.state.close()  # the last checkpoint, if one is being written, is durable


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--epochs", type=int, default=3)
    parser.add_argument("--images", type=int, default=160, help="FakeData images")
    parser.add_argument("--classes", type=int, default=4)
    parser.add_argument("--batch", type=int, default=4, help="batch size per rank")
    parser.add_argument("--workers", type=int, default=2, help="DataLoader workers per rank")
    parser.add_argument("--lr", type=float, default=0.02)
    parser.add_argument("--seed", type=int, default=1234)
    parser.add_argument("--model", choices=("resnet18", "small"), default="resnet18")
    parser.add_argument("--step-ms", type=int, default=0, help="extra time per step")
    parser.add_argument("--out", help="write the final parameters here (rank 0, raw float32)")
    args = parser.parse_args()

    torch.set_num_threads(1)
    torch.use_deterministic_algorithms(True)
    torch.manual_seed(args.seed)
    dist.init_process_group("gloo")

    augment = torchvision.transforms.Compose(
        [
            torchvision.transforms.RandomCrop(32, padding=4),
            torchvision.transforms.RandomHorizontalFlip(),
            torchvision.transforms.ToTensor(),
        ]
    )
    data = torchvision.datasets.FakeData(args.images, (3, 32, 32), args.classes, transform=augment)
    sampler = DistributedSampler(data, shuffle=True, seed=args.seed)
    loader = DataLoader(data, batch_size=args.batch, sampler=sampler, num_workers=args.workers)
    if args.model == "resnet18":
        model = torchvision.models.resnet18(num_classes=args.classes)
        model.fc = torch.nn.Sequential(torch.nn.Dropout(0.2), model.fc)
    else:
        model = small_cnn(args.classes)
    optimizer = torch.optim.SGD(model.parameters(), lr=args.lr, momentum=0.9)
    scheduler = torch.optim.lr_scheduler.CosineAnnealingLR(
        optimizer, T_max=args.epochs * len(loader)
    )

    Trainer(model, loader, optimizer, scheduler, args).train(args.epochs)

    if dist.get_rank() == 0:
        flat = np.concatenate(
            [
                t.detach().numpy().ravel().astype(np.float32)
                for t in model.state_dict().values()
                if t.is_floating_point()
            ]
        )
        print(f"final step {args.epochs * len(loader) - 1}", flush=True)
        if args.out:
            tmp = f"{args.out}.tmp{os.getpid()}"
            with open(tmp, "wb") as f:
                f.write(flat.tobytes())
            os.replace(tmp, args.out)
    dist.destroy_process_group()
    return 0


if __name__ == "__main__":
    sys.exit(main())
