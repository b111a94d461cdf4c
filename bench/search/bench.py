#!/usr/bin/python3
"""bench/search: time until a trial trained to the full budget is within 1% of the best
achievable loss, on synthetic learning curves (curves.py), in a simulated cluster of W
workers where one training step is one time unit of one GPU, with the same GPU budget:

  asha    dl-search's ASHA (exp/searcher.h through sim_search; promoted trials resume
          from their checkpoints, so a promotion costs only the new steps)
  random  dl-search's random search (every trial the whole budget)
  optuna-sha, optuna-hyperband
          Optuna's SuccessiveHalvingPruner and HyperbandPruner (Debian's python3-optuna)
          with its RandomSampler, W trials in flight (ask/tell), reporting at every rung
          where a pruner can decide

All sample hyperparameters at random and see the same curves.

The searcher's parameters (asha_mode, divisor, max_rungs) are chosen with --tune on the
TUNING shapes and seeds only; the report (the default) measures on the HELD_OUT shapes
and seeds, which the choice never saw. Optuna's pruners run both with the rungs chosen for
asha and with the rungs 3, 9, 27, 81 (reduction factor 3); "best Optuna" is the faster of
all four per shape. Prints medians over the seeds and the ratios.

    /usr/bin/python3 bench/search/bench.py --sim build/bench/search/sim_search [--seeds 20]
    /usr/bin/python3 bench/search/bench.py --sim build/bench/search/sim_search --tune
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

# The split: parameters are chosen on these shapes and seeds (--tune) ...
TUNING_SHAPES = ("faithful", "slowbest", "noisy")
TUNING_FIRST_SEED = 1000
# ... and reported on these, never used for a choice.
HELD_OUT_SHAPES = ("diverge", "plateau")
HELD_OUT_FIRST_SEED = 0

# What --tune tries: (asha_mode, divisor, max_rungs); rungs = budget * divisor^-(R-1-k).
CANDIDATES = [(m, d, r) for m in ("promotion", "stopping")
              for d, r in ((4, 5), (4, 4), (4, 3), (4, 2), (3, 5), (3, 4), (3, 3), (3, 2),
                           (2, 6), (2, 5), (2, 4), (2, 3), (9, 2))]
# The choice of `--tune` (the largest geometric mean over the tuning shapes of random /
# asha; see the README): promotion, divisor 2, 4 rungs (10, 20, 41, 81 steps), which are
# also dl-search's defaults now.
CHOSEN = ("promotion", 2, 4)
# The parameters of the benchmark before the split (rungs 3, 9, 27, 81), for reference.
ORIGINAL = ("promotion", 3, 4)


def best_achievable(shape):
    """The minimum of the full-budget loss over a dense grid of the space."""
    import numpy as np

    lr = np.logspace(-4, 0, 2001)
    mom = np.linspace(0, 0.99, 496)
    L, M = np.meshgrid(lr, mom)
    best = math.inf
    for width in range(1, 9):
        for act in ACTS:
            best = min(best, float(np.min(curves.loss(L, width, act, M, curves.BUDGET - 1, shape))))
    return best


def rungs_of(divisor, max_rungs, budget=curves.BUDGET):
    """exp/searcher.cc's rung_budgets."""
    fit = int(math.floor(math.log(budget) / math.log(divisor) + 1e-9)) + 1
    n = max(1, min(max_rungs, fit))
    out = []
    for k in range(n):
        steps = max(1, int(math.floor(budget / divisor ** (n - 1 - k) + 0.5)))
        if not out or steps > out[-1]:
            out.append(steps)
    out[-1] = budget
    return out


def ceiling(divisor, max_rungs, budget=curves.BUDGET):
    """The most random / asha can be with these rungs in steps: every trial ranked at each
    rung as it ranks at the end, asha trains the 1/divisor^k of its trials that reach rung k
    to it (rung 0's steps for every trial, the next rung's new steps for half of them, ...),
    where random trains each trial to the budget; both have to sample as many trials to find
    a near-best one."""
    rungs = rungs_of(divisor, max_rungs, budget)
    steps = sum((r - (rungs[k - 1] if k else 0)) / divisor ** k for k, r in enumerate(rungs))
    return budget / steps


def optuna_point(trial):
    """A trial's point of the benchmark's space, drawn by its study's sampler:
    (lr, width, act, momentum)."""
    return (trial.suggest_float("lr", 1e-4, 1.0, log=True), trial.suggest_int("width", 1, 8),
            trial.suggest_categorical("act", ACTS), trial.suggest_float("momentum", 0.0, 0.99))


def optuna_params(trial):
    """optuna_point's draw as the parameters enqueue_trial takes."""
    lr, width, act, momentum = optuna_point(trial)
    return {"lr": lr, "width": width, "act": act, "momentum": momentum}


def optuna_run(optuna, pruner_name, seed, workers, gpu_budget, best, shape, divisor, max_rungs):
    B = curves.BUDGET
    rungs = rungs_of(divisor, max_rungs)
    if pruner_name == "sha":
        pruner = optuna.pruners.SuccessiveHalvingPruner(min_resource=rungs[0],
                                                        reduction_factor=divisor)
    else:
        pruner = optuna.pruners.HyperbandPruner(min_resource=rungs[0], max_resource=B,
                                                reduction_factor=divisor)
    # A fixed study name: Hyperband puts trials in brackets by a hash of it.
    study = optuna.create_study(study_name=f"bench-{seed}", direction="minimize",
                                sampler=optuna.samplers.RandomSampler(seed=seed), pruner=pruner)
    heap, gpu, n = [], 0, 0

    def start(t, w):
        nonlocal n, gpu
        trial = study.ask()
        hp = optuna_point(trial)
        n += 1
        gpu += rungs[0]
        heapq.heappush(heap, (t + rungs[0], w, n, trial, hp, rungs[0]))

    for w in range(workers):
        start(0, w)
    # Pruners decide only when the steps done reach a rung: a trial runs from one such
    # point to the next in one event, reporting there (the same decisions as reporting
    # every step, at a fraction of Optuna's per-call cost). Optuna's rungs are
    # min_resource * factor^k: with divisor 2 and 5 rungs 5, 10, 20, 40 where dl-search
    # has 5, 10, 20, 41; Optuna decides the fourth at the report of step 41.
    checks = rungs
    while heap and gpu < gpu_budget:
        t, w, k, trial, hp, done = heapq.heappop(heap)
        v = float(curves.loss(*hp, done - 1, shape))
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


def sim(args, shape, best, searcher, first_seed, seeds, mode="promotion", divisor=3, rungs=4):
    out = subprocess.check_output([args.sim, "--searcher", searcher, "--workers",
                                   str(args.workers), "--gpu-budget", str(args.gpu_budget),
                                   "--best", repr(best), "--seeds", str(seeds), "--first-seed",
                                   str(first_seed), "--shape", shape, "--asha-mode", mode,
                                   "--divisor", str(divisor), "--max-rungs", str(rungs)])
    return summary(json.loads(out))


def name_of(c):
    return f"asha {c[0]} /{c[1]} rungs {','.join(map(str, rungs_of(c[1], c[2])))}"


def tune(args):
    seeds = args.seeds
    print(f"tuning on shapes {', '.join(TUNING_SHAPES)}, seeds {TUNING_FIRST_SEED}.."
          f"{TUNING_FIRST_SEED + seeds - 1}: random / asha (median time)", flush=True)
    ratios = {c: [] for c in CANDIDATES}
    for shape in TUNING_SHAPES:
        best = best_achievable(shape)
        rnd = sim(args, shape, best, "random", TUNING_FIRST_SEED, seeds)["median_time"]
        for c in CANDIDATES:
            a = sim(args, shape, best, "asha", TUNING_FIRST_SEED, seeds, *c)["median_time"]
            ratios[c].append(rnd / a)
    def geomean(rs):
        return math.prod(rs) ** (1 / len(rs))

    print(f"{'':<44}" + "".join(f"{s:>10}" for s in TUNING_SHAPES) + f"{'geomean':>10}"
          + f"{'ceiling':>10}")
    for c in CANDIDATES:
        print(f"{name_of(c):<44}" + "".join(f"{r:>10.2f}" for r in ratios[c])
              + f"{geomean(ratios[c]):>10.2f}{ceiling(c[1], c[2]):>10.2f}")
    print("ceiling: random / asha with every trial ranked at each rung as at the end")
    # The geometric mean: a setting that never reaches the target on one shape (ratio 0)
    # is not chosen, however well it does on the others.
    chosen = max(CANDIDATES, key=lambda c: geomean(ratios[c]))
    print(f"chosen (largest geometric mean): {name_of(chosen)}")


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--sim", required=True)
    p.add_argument("--seeds", type=int, default=20)
    p.add_argument("--workers", type=int, default=8)
    p.add_argument("--gpu-budget", type=int, default=16000)
    p.add_argument("--tune", action="store_true",
                   help="choose asha's parameters on the tuning shapes and seeds")
    p.add_argument("--no-optuna", action="store_true")
    args = p.parse_args()

    # The C++ and Python curves agree.
    for shape in curves.SHAPES:
        for hp in [(0.01, 5, "relu", 0.8, 80), (0.5, 2, "tanh", 0.1, 3),
                   (1e-4, 8, "sigmoid", 0.99, 0)]:
            c = float(subprocess.check_output([args.sim, "--shape", shape, "--curve",
                                               *map(str, hp)]).decode())
            assert abs(c - float(curves.loss(*hp, shape))) < 1e-9, (shape, hp, c)
    if args.tune:
        tune(args)
        return
    try:
        import optuna

        optuna.logging.set_verbosity(optuna.logging.WARNING)
    except ImportError:
        optuna = None
        print("python3-optuna is not installed: Optuna's pruners skipped", flush=True)
    if args.no_optuna:
        optuna = None

    print(f"held out: shapes {', '.join(HELD_OUT_SHAPES)}, seeds {HELD_OUT_FIRST_SEED}.."
          f"{HELD_OUT_FIRST_SEED + args.seeds - 1} (asha's parameters were chosen on shapes "
          f"{', '.join(TUNING_SHAPES)}, seeds {TUNING_FIRST_SEED}+); {args.workers} workers, "
          f"GPU budget {args.gpu_budget} steps", flush=True)
    report = {}
    for shape in HELD_OUT_SHAPES:
        best = best_achievable(shape)
        print(f"\nshape {shape}: best achievable loss {best:.6f}; target <= {best * 1.01:.6f}",
              flush=True)
        results = {}
        results["asha"] = sim(args, shape, best, "asha", HELD_OUT_FIRST_SEED, args.seeds, *CHOSEN)
        results["asha (before: /3, 3 9 27 81)"] = sim(args, shape, best, "asha",
                                                     HELD_OUT_FIRST_SEED, args.seeds, *ORIGINAL)
        results["asha stopping"] = sim(args, shape, best, "asha", HELD_OUT_FIRST_SEED, args.seeds,
                                       "stopping", CHOSEN[1], CHOSEN[2])
        results["random"] = sim(args, shape, best, "random", HELD_OUT_FIRST_SEED, args.seeds)
        if optuna is not None:
            for label, (_, d, r) in (("", CHOSEN), (" 3 9 27 81", ORIGINAL)):
                for name in ("sha", "hyperband"):
                    t0 = time.monotonic()
                    runs = [optuna_run(optuna, name, s, args.workers, args.gpu_budget, best, shape,
                                       d, r)
                            for s in range(HELD_OUT_FIRST_SEED, HELD_OUT_FIRST_SEED + args.seeds)]
                    results[f"optuna-{name}{label}"] = summary(runs)
                    results[f"optuna-{name}{label}"]["wall_s"] = round(time.monotonic() - t0, 1)
        print(f"{'searcher':<32}{'median time':>12}{'median GPU':>12}{'reached':>9}{'trials':>8}")
        for name, r in results.items():
            print(f"{name:<32}{r['median_time']:>12}{r['median_gpu']:>12}{r['reached']:>9}"
                  f"{r['median_trials']:>8}")
        a = results["asha"]["median_time"]
        line = {"random_over_asha": results["random"]["median_time"] / a}
        line["ceiling"] = ceiling(CHOSEN[1], CHOSEN[2])
        print(f"random / asha: {line['random_over_asha']:.2f}x (target >= 3; at most "
              f"{line['ceiling']:.2f}x with asha's rungs, every trial ranked at each rung as "
              f"at the end)")
        optuna_best = min((r["median_time"] for n, r in results.items()
                           if n.startswith("optuna")), default=None)
        if optuna_best is not None:
            line["best_optuna_over_asha"] = optuna_best / a
            print(f"best Optuna pruner / asha: {optuna_best / a:.2f}x (target >= 1)")
        report[shape] = {"ratios": line, "results": results}
    print(json.dumps(report))


if __name__ == "__main__":
    main()
