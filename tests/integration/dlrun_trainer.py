#!/usr/bin/python3
"""Integration-test helper: dlrun_trainer.cc in Python, with the slurm_dl client.

Prints "start rank=R ...", "checkpoint rank=R step=S" and "done rank=R step=S"; does not
write checkpoints. Options: --steps N, --step-ms MS.
"""

import argparse
import os
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "python"))

import slurm_dl  # noqa: E402


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--steps", type=int, default=100)
    parser.add_argument("--step-ms", type=int, default=100)
    args = parser.parse_args()
    rank = int(os.environ["RANK"])
    print(f"start rank={rank} world={os.environ['WORLD_SIZE']} resume={slurm_dl.resume_path()}",
          flush=True)
    step = 0
    for step in range(args.steps):
        time.sleep(args.step_ms / 1000)
        slurm_dl.report_step(step)
        slurm_dl.report_metrics(step, {"loss": 1.0 / (step + 1)})
        if slurm_dl.should_checkpoint():
            slurm_dl.checkpoint_done(step)
            print(f"checkpoint rank={rank} step={step}", flush=True)
    print(f"done rank={rank} step={step}", flush=True)


if __name__ == "__main__":
    main()
