#!/usr/bin/python3
"""bench/search's Optuna worker for the real mode (real_compare --optuna): what people run
to search with Optuna on Slurm. Each of N one-GPU jobs runs this worker, which runs
`study.optimize` on one study shared through a journal file (Optuna 3.1's
JournalFileStorage) with a pruner, trial after trial in the same process, until the
study's stop file exists. A trial trains curves.py's curve one step at a time (sleeping
--step-ms per step, as curve_trainer.py does), reports the loss at the rungs' steps
(--rungs, as bench.py's simulated Optuna does) and is pruned when the pruner says so.

When a trial's last step (81) has a loss within 1% of the best achievable (--target), it
writes a file named after its trial into --reached-dir holding the time of that step, as
curve_trainer.py does. Nothing is checkpointed: a pruned trial is dropped, and a trial
that is not pruned trains on in the same process, so no trial ever resumes.
"""

import argparse
import os
import sys
import time
import warnings

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)

import bench  # noqa: E402
import curves  # noqa: E402
import optuna  # noqa: E402


def pruner_of(name, rungs, divisor):
    if name == "sha":
        return optuna.pruners.SuccessiveHalvingPruner(min_resource=rungs[0],
                                                      reduction_factor=divisor)
    return optuna.pruners.HyperbandPruner(min_resource=rungs[0], max_resource=curves.BUDGET,
                                          reduction_factor=divisor)


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--storage", required=True, help="the study's journal file")
    p.add_argument("--study", required=True)
    p.add_argument("--pruner", choices=("sha", "hyperband"), required=True)
    p.add_argument("--rungs", required=True, help="the steps at which trials report: 10,20,41")
    p.add_argument("--divisor", type=int, default=2)  # Optuna's reduction_factor: an int
    p.add_argument("--seed", type=int, required=True, help="this worker's sampler seed")
    p.add_argument("--shape", default="diverge", choices=curves.SHAPES)
    p.add_argument("--step-ms", type=int, default=100)
    p.add_argument("--target", type=float, required=True)
    p.add_argument("--reached-dir", required=True)
    p.add_argument("--stop-file", required=True)
    args = p.parse_args()
    optuna.logging.set_verbosity(optuna.logging.WARNING)
    warnings.filterwarnings("ignore", category=optuna.exceptions.ExperimentalWarning)
    rungs = [int(x) for x in args.rungs.split(",")]
    storage = optuna.storages.JournalStorage(optuna.storages.JournalFileStorage(args.storage))
    study = optuna.load_study(study_name=args.study, storage=storage,
                              sampler=optuna.samplers.RandomSampler(seed=args.seed),
                              pruner=pruner_of(args.pruner, rungs, args.divisor))

    def stopped():
        return os.path.exists(args.stop_file)

    def objective(trial):
        hp = bench.optuna_point(trial)
        loss = None
        for step in range(curves.BUDGET):
            if stopped():
                raise optuna.TrialPruned()
            time.sleep(args.step_ms / 1000)
            loss = float(curves.loss(*hp, step, args.shape))
            done = step + 1
            if done in rungs and done < curves.BUDGET:
                trial.report(loss, done)
                if trial.should_prune():
                    raise optuna.TrialPruned()
        if loss <= args.target:
            now = time.time()
            name = f"o{trial.number}"
            tmp = os.path.join(args.reached_dir, f".{name}.{os.getpid()}")
            with open(tmp, "w") as f:
                f.write(f"{now:.6f} {loss:.9f}\n")
            os.rename(tmp, os.path.join(args.reached_dir, name))
        return loss

    def stop_when_asked(study, _trial):
        if stopped():
            study.stop()

    while not stopped():
        study.optimize(objective, n_trials=1, callbacks=[stop_when_asked])


if __name__ == "__main__":
    main()
