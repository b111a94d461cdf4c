#!/usr/bin/python3
"""Integration-test helper: dlrun_trainer.cc in Python, with the slurm_dl client.

Prints "start rank=R ...", "checkpoint rank=R step=S" and "done rank=R step=S"; does not
write checkpoints. Options: --steps N, --step-ms MS, --hang-rank R --hang-at-step S (on the
first run only, rank R stops in hang_here() at step S without reporting it, and every other
rank reports S and then blocks in wait_in_collective()).
"""

import argparse
import os
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "python"))

import slurm_dl  # noqa: E402


def hang_here():
    while True:
        time.sleep(1)


def wait_in_collective():
    while True:
        time.sleep(1)


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--steps", type=int, default=100)
    parser.add_argument("--step-ms", type=int, default=100)
    parser.add_argument("--hang-rank", type=int, default=-1)
    parser.add_argument("--hang-at-step", type=int, default=-1)
    args = parser.parse_args()
    rank = int(os.environ["RANK"])
    restart = int(os.environ.get("DL_RESTART_COUNT", "0"))
    print(f"start rank={rank} world={os.environ['WORLD_SIZE']} restart={restart} "
          f"resume={slurm_dl.resume_path()}", flush=True)
    step = 0
    for step in range(args.steps):
        time.sleep(args.step_ms / 1000)
        if restart == 0 and args.hang_at_step >= 0:
            if rank == args.hang_rank and step == args.hang_at_step:
                hang_here()
            if rank != args.hang_rank and step == args.hang_at_step + 1:
                wait_in_collective()
        slurm_dl.report_step(step)
        slurm_dl.report_metrics(step, {"loss": 1.0 / (step + 1)})
        if slurm_dl.should_checkpoint():
            slurm_dl.checkpoint_done(step)
            print(f"checkpoint rank={rank} step={step}", flush=True)
    print(f"done rank={rank} step={step}", flush=True)


if __name__ == "__main__":
    main()
