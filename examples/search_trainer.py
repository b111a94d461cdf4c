#!/usr/bin/python3
"""A trainer for dl-search: a synthetic learning curve that is a pure function of the
hyperparameters and the step, saved and resumed like a real model.

    dl-search submit examples/search_asha.yaml

dl-search runs it once per rung of each trial it keeps: DL_MAX_STEPS (slurm_dl.max_steps())
is the rung's budget, DL_HPARAMS (slurm_dl.hparams()) the trial's hyperparameters. It
resumes from slurm_dl.resume_path() (dlrun finds it: a promoted trial's job gets
--dl-resume-from=<its own newest checkpoint>), reports "loss" every step, checkpoints
when dlrun asks (preemption) and at the end of its budget, then asks dl-search whether
it continues to the next rung in this job (slurm_dl.next_max_steps(): asha promoted it
at once) and trains on from memory if so; otherwise it exits, giving its GPUs back. The curve: lr near 0.1 and width 4 learn best; "tanh" starts fast and plateaus
higher (a configuration that looks good early and ends badly, which ASHA must cope with).

Options: --steps N (without dl-search), --crash (exit 1 at once when hparams say
"crash": true, for the tests), --step-ms MS (time per step).
"""

import argparse
import math
import os
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "python"))

import numpy as np  # noqa: E402

import slurm_dl  # noqa: E402
from slurm_dl import ckpt  # noqa: E402


def loss_at(hp, step):
    """The loss after `step` + 1 steps with hyperparameters `hp`."""
    lr = float(hp.get("lr", 0.1))
    width = int(hp.get("width", 2))
    act = hp.get("act", "relu")
    quality = abs(math.log10(lr) + 1.0) + 0.15 * abs(width - 4)  # 0 is best
    floor = 0.05 + 0.3 * quality
    rate = 0.08 * (1.0 + lr * 5)
    if act == "tanh":  # fast at first, then a higher plateau
        rate *= 3.0
        floor += 0.25
    return floor + (1.0 - floor) * math.exp(-rate * (step + 1))


def train(loss_of, budget, step_ms=0, after_report=None):
    """Trains steps up to `budget` from the trial's checkpoint (if any): step k's loss is
    loss_of(k), reported with the step; after_report(step, loss), if given, runs after each
    report. Checkpoints when dlrun asks and at the end; returns the running total of the
    losses, the "model" that must survive every resume to be right at the end."""
    hp = slurm_dl.hparams()
    first, total = 0, np.zeros(1)
    path = slurm_dl.resume_path()
    if path:
        with ckpt.Checkpoint(path) as c:
            first = c.step + 1
            total = c.read("total")
    print(f"start at step {first} budget {budget} hparams {hp}"
          + (f" resumed from {path}" if path else " fresh"), flush=True)

    saver = ckpt.Saver()
    saved = -1
    step = first
    while True:
        for step in range(step, budget):
            if step_ms:
                time.sleep(step_ms / 1000)
            loss = loss_of(step)
            total += loss
            slurm_dl.report_step(step)
            slurm_dl.report_metrics(step, {"loss": loss})
            if after_report:
                after_report(step, loss)
            if slurm_dl.should_checkpoint():
                saver.save(step, {"total": total})
                slurm_dl.checkpoint_done(step)
                saved = step
        if budget - 1 > saved and budget > first:
            saver.save(budget - 1, {"total": total})
            slurm_dl.checkpoint_done(budget - 1)
            saved = budget - 1
        # In-job continuation: dl-search may promote this trial to its next rung at once;
        # then it trains on from memory, in the same job, without a resume.
        nxt = slurm_dl.next_max_steps()
        if nxt is None:
            break
        print(f"continue in job from step {budget} to budget {nxt}", flush=True)
        step, budget = budget, nxt
    saver.close()
    return total


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--steps", type=int, default=32)
    parser.add_argument("--step-ms", type=int, default=0)
    args = parser.parse_args()
    hp = slurm_dl.hparams()
    budget = slurm_dl.max_steps() or args.steps
    if hp.get("crash"):
        print("crash: true in the hyperparameters; failing", flush=True)
        sys.exit(1)
    total = train(lambda step: loss_at(hp, step), budget, args.step_ms)
    budget = slurm_dl.max_steps() or budget  # the last rung this job ran
    print(f"done at step {budget - 1} loss {loss_at(hp, budget - 1):.6f} total {total[0]:.6f}",
          flush=True)


if __name__ == "__main__":
    main()
