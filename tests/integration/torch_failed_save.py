#!/usr/bin/python3
"""Integration-test helper: a TrainState with AdamW and a OneCycleLR stepped per batch,
whose checkpoint fails in the job's first run (an object's state_dict() raises once the
loop runs) and works in the later ones.

Prints "start restart=N step=S" once and "step S" after each step (rank 0).
Options: --steps N, --step-ms MS.
"""

import argparse
import os
import sys
import time

import torch

from slurm_dl.torch import TrainState


class Probe:
    """State that the first run cannot save once armed."""

    def __init__(self, fail):
        self.fail, self.armed = fail, False

    def state_dict(self):
        if self.fail and self.armed:
            raise RuntimeError("the probe's state can't be saved in the first run")
        return {"ok": True}

    def load_state_dict(self, sd):
        pass


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--steps", type=int, default=200)
    parser.add_argument("--step-ms", type=int, default=100)
    args = parser.parse_args()
    rank = int(os.environ["RANK"])
    restart = int(os.environ.get("DL_RESTART_COUNT", "0"))
    torch.manual_seed(0)
    model = torch.nn.Linear(4, 2)
    opt = torch.optim.AdamW(model.parameters(), lr=0.01)
    sched = torch.optim.lr_scheduler.OneCycleLR(opt, max_lr=0.1, total_steps=args.steps + 1)
    probe = Probe(fail=restart == 0)
    state = TrainState(model=model, optimizer=opt, scheduler=sched, probe=probe)
    start = state.resume()
    probe.armed = True
    if rank == 0:
        print(f"start restart={restart} step={start.step}", flush=True)
    x = torch.ones(8, 4)
    for step in range(start.step, args.steps):
        time.sleep(args.step_ms / 1000)
        loss = model(x).pow(2).mean()
        opt.zero_grad()
        loss.backward()
        opt.step()
        sched.step()
        state.end_step(loss=loss.item())
        if rank == 0:
            print(f"step {step}", flush=True)
    state.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
