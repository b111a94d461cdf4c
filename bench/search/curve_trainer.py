#!/usr/bin/python3
"""bench/search's trainer for the real mode (real_compare): the synthetic learning curves
of curves.py (the simulated mode's), trained one step at a time in a Slurm job, saved and
resumed like a real model.

dl-search runs it once per run of each trial: DL_HPARAMS (slurm_dl.hparams()) holds lr,
width, act and momentum, DL_MAX_STEPS (slurm_dl.max_steps()) the run's budget. It
resumes from slurm_dl.resume_path() (a promoted trial's job gets --dl-resume-from=<its
own newest checkpoint>), sleeps --step-ms per step, reports "loss" (curves.loss of the
step, for --shape, with the curves' full budget of 81 steps) every step, checkpoints when
dlrun asks and at the end of its budget, and exits, giving its GPU back.

When it reports the full budget's last step with a loss within 1% of the best achievable
(--target), it writes a file named after its trial into --reached-dir holding the time
(time.time()) of that report: the moment a trial within 1% of the best exists, which
real_compare waits for.
"""

import argparse
import os
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(HERE, "..", "..", "python"))
sys.path.insert(0, os.path.join(HERE, "..", "..", "examples"))

import curves  # noqa: E402
import search_trainer  # noqa: E402
import slurm_dl  # noqa: E402


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--shape", default="diverge", choices=curves.SHAPES)
    p.add_argument("--step-ms", type=int, default=100)
    p.add_argument("--target", type=float, required=True)
    p.add_argument("--reached-dir", required=True)
    args = p.parse_args()
    hp = slurm_dl.hparams()
    budget = slurm_dl.max_steps() or curves.BUDGET
    point = (float(hp["lr"]), int(hp["width"]), hp["act"], float(hp["momentum"]))

    def note_target(step, loss):
        if step == curves.BUDGET - 1 and loss <= args.target:
            now = time.time()
            trial = os.environ.get("DL_EXP_TRIAL", "trial")
            tmp = os.path.join(args.reached_dir, f".{trial}.{os.getpid()}")
            with open(tmp, "w") as f:
                f.write(f"{now:.6f} {loss:.9f}\n")
            os.rename(tmp, os.path.join(args.reached_dir, trial))

    total = search_trainer.train(lambda step: float(curves.loss(*point, step, args.shape)),
                                 budget, args.step_ms, note_target)
    budget = slurm_dl.max_steps() or budget  # the last rung this job ran
    print(f"done at step {budget - 1} total {total[0]:.6f}", flush=True)


if __name__ == "__main__":
    main()
