#!/usr/bin/python3
"""bench/search: time until a trial trained to the full budget is within 1% of the best
achievable loss, on synthetic learning curves (curves.py), in a simulated cluster of W
workers where one training step is one time unit of one GPU, with the same GPU budget:

  asha    dl-search's ASHA (exp/searcher.h through sim_search; promoted trials resume
          from their checkpoints, so a promotion costs only the new steps)
  random  dl-search's random search (every trial the whole budget)
  optuna-sha, optuna-hyperband
          Optuna's SuccessiveHalvingPruner and HyperbandPruner (Debian's python3-optuna)
          with its RandomSampler, W trials in flight (ask/tell), reporting at every step
          where a pruner can decide

All four sample hyperparameters at random and see the same curves; rungs at 3, 9, 27
and 81 steps for all (divisor/reduction factor 3). Prints the median over seeds of the
time to the target and of the GPU time spent by then, and the ratios.

    /usr/bin/python3 bench/search/bench.py --sim build/bench/search/sim_search [--seeds 10]
"""

import argparse
import heapq
import json
import math
import os
import statistics
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import curves  # noqa: E402

ACTS = ["relu", "tanh", "sigmoid"]


def best_achievable():
    """The minimum of the full-budget loss over a dense grid of the space."""
    import numpy as np

    lr = np.logspace(-4, 0, 2001)
    mom = np.linspace(0, 0.99, 496)
    best = math.inf
    for width in range(1, 9):
        for act in ACTS:
            L, M = np.meshgrid(lr, mom)
            x = 1.0
            q = (0.03 * (np.log10(L) + 2) ** 2 + 0.0003 * (width - 5) ** 2 + 0.01 * (M - 0.8) ** 2
                 + {"relu": 0.0, "tanh": 0.01, "sigmoid": 0.03}[act])
            rate = 3.0 * (1.0 + np.sqrt(L)) * (1.3 - 0.5 * M) * (1.5 if act == "tanh" else 1.0)
            v = 0.2 + q + 1.3 * np.exp(-rate * x)
            v = np.where(L > 0.1, v + 0.3 * x * x * np.log10(L * 10), v)
            best = min(best, float(v.min()))
    return best


def optuna_run(optuna, pruner_name, seed, workers, gpu_budget, best):
    B = curves.BUDGET
    if pruner_name == "sha":
        pruner = optuna.pruners.SuccessiveHalvingPruner(min_resource=3, reduction_factor=3)
    else:
        pruner = optuna.pruners.HyperbandPruner(min_resource=3, max_resource=B, reduction_factor=3)
    study = optuna.create_study(direction="minimize",
                                sampler=optuna.samplers.RandomSampler(seed=seed), pruner=pruner)
    heap, gpu, n = [], 0, 0

    def start(t, w):
        nonlocal n, gpu
        trial = study.ask()
        hp = (trial.suggest_float("lr", 1e-4, 1.0, log=True), trial.suggest_int("width", 1, 8),
              trial.suggest_categorical("act", ACTS), trial.suggest_float("momentum", 0.0, 0.99))
        n += 1
        gpu += 3
        heapq.heappush(heap, (t + 3, w, n, trial, hp, 3))

    for w in range(workers):
        start(0, w)
    # Pruners decide only when the steps done reach a rung (3, 9, 27): a trial runs from
    # one such point to the next in one event, reporting there (the same decisions as
    # reporting every step, at a fraction of Optuna's per-call cost).
    checks = [3, 9, 27, B]
    while heap and gpu < gpu_budget:
        t, w, k, trial, hp, done = heapq.heappop(heap)
        v = curves.loss(*hp, done - 1)
        if done == B:
            study.tell(trial, v)
            if v <= best * 1.01:
                return {"time": t, "gpu": gpu, "trials": n}
            start(t, w)
            continue
        trial.report(v, done)
        if trial.should_prune():
            study.tell(trial, state=optuna.trial.TrialState.PRUNED)
            start(t, w)
        else:
            nxt = next(c for c in checks if c > done)
            gpu += nxt - done
            heapq.heappush(heap, (t + nxt - done, w, k, trial, hp, nxt))
    return {"time": -1, "gpu": gpu, "trials": n}


def summary(runs):
    reached = [r for r in runs if r["time"] >= 0]
    times = [r["time"] if r["time"] >= 0 else math.inf for r in runs]
    return {"median_time": statistics.median(times),
            "median_gpu": statistics.median([r["gpu"] if r["time"] >= 0 else math.inf for r in runs]),
            "reached": f"{len(reached)}/{len(runs)}",
            "median_trials": statistics.median([r["trials"] for r in runs])}


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--sim", required=True)
    p.add_argument("--seeds", type=int, default=10)
    p.add_argument("--workers", type=int, default=8)
    p.add_argument("--gpu-budget", type=int, default=16000)
    args = p.parse_args()

    # The C++ and Python curves agree.
    for hp in [(0.01, 5, "relu", 0.8, 80), (0.5, 2, "tanh", 0.1, 3), (1e-4, 8, "sigmoid", 0.99, 0)]:
        c = float(subprocess.check_output([args.sim, "--curve", *map(str, hp)]).decode())
        assert abs(c - curves.loss(*hp)) < 1e-9, (hp, c, curves.loss(*hp))
    best = best_achievable()
    print(f"best achievable loss {best:.6f}; target <= {best * 1.01:.6f}; {args.workers} workers, "
          f"GPU budget {args.gpu_budget} steps, {args.seeds} seeds", flush=True)

    results = {}
    for name in ("asha", "random"):
        t0 = time.monotonic()
        out = subprocess.check_output([args.sim, "--searcher", name, "--workers", str(args.workers),
                                       "--gpu-budget", str(args.gpu_budget), "--best", repr(best),
                                       "--seeds", str(args.seeds), "--max-rungs", "4"])
        results[name] = summary(json.loads(out))
        results[name]["wall_s"] = round(time.monotonic() - t0, 1)
    try:
        import optuna

        optuna.logging.set_verbosity(optuna.logging.WARNING)
        for name in ("sha", "hyperband"):
            t0 = time.monotonic()
            runs = [optuna_run(optuna, name, s, args.workers, args.gpu_budget, best)
                    for s in range(args.seeds)]
            results["optuna-" + name] = summary(runs)
            results["optuna-" + name]["wall_s"] = round(time.monotonic() - t0, 1)
    except ImportError:
        print("python3-optuna is not installed: Optuna's pruners skipped", flush=True)

    print(f"{'searcher':<18}{'median time':>12}{'median GPU':>12}{'reached':>9}{'trials':>8}")
    for name, r in results.items():
        print(f"{name:<18}{r['median_time']:>12}{r['median_gpu']:>12}{r['reached']:>9}"
              f"{r['median_trials']:>8}")
    a = results["asha"]["median_time"]
    print(f"random / asha: {results['random']['median_time'] / a:.2f}x (target >= 3)")
    optuna_best = min((r["median_time"] for n, r in results.items() if n.startswith("optuna")),
                      default=None)
    if optuna_best is not None:
        print(f"best Optuna pruner / asha: {optuna_best / a:.2f}x (target >= 1)")
    print(json.dumps(results))


if __name__ == "__main__":
    main()
