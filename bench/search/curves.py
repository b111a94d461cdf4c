"""The synthetic learning curves of bench/search, pure functions of the hyperparameters
and the step (sim_search.cc has the same functions in C++; bench.py checks they agree).
Written with numpy's functions so that bench.py can evaluate a dense grid at once; they
work on plain numbers too.

The space: lr (log, 1e-4..1), width (int, 1..8), act (relu, tanh, sigmoid), momentum
(float, 0..0.99); a run has BUDGET steps, x = (step + 1) / BUDGET. Five shapes, so that
the searcher's parameters can be chosen on some and measured on others (bench.py):

  diverge   the original benchmark: the final loss is best near lr=0.01, width 5,
            momentum 0.8, relu; a large lr learns fast and then diverges (good early,
            bad at the end), tanh starts fast and plateaus higher, a high momentum starts
            slowly
  faithful  every configuration learns at about the same speed: early steps rank them
            as the end does (the case early stopping is made for)
  slowbest  the best configurations (small lr, high momentum) learn slowest; a large lr
            or a low momentum leads early and ends worse
  plateau   tanh drops fast to a high plateau, relu has a fast and a slow phase down to
            the lowest floor, sigmoid is slow throughout
  noisy     diverge with a deterministic evaluation noise that fades towards the end
            (0.01 at the start, 0 at the last step)
"""

import numpy as np

BUDGET = 81
SHAPES = ("diverge", "faithful", "slowbest", "plateau", "noisy")
ACT_INDEX = {"relu": 0, "tanh": 1, "sigmoid": 2}


def _act(act, relu, tanh, sigmoid):
    return {"relu": relu, "tanh": tanh, "sigmoid": sigmoid}[act]


def loss(lr, width, act, mom, step, shape="diverge", budget=BUDGET):
    x = (step + 1) / budget
    l10 = np.log10(lr)
    if shape in ("diverge", "noisy"):
        q = (0.03 * (l10 + 2) ** 2 + 0.0003 * (width - 5) ** 2 + 0.01 * (mom - 0.8) ** 2
             + _act(act, 0.0, 0.01, 0.03))
        rate = 3.0 * (1.0 + np.sqrt(lr)) * (1.3 - 0.5 * mom) * _act(act, 1.0, 1.5, 1.0)
        value = 0.2 + q + 1.3 * np.exp(-rate * x)
        value = value + np.where(lr > 0.1, 0.3 * x * x * np.log10(np.maximum(lr, 0.1) * 10), 0.0)
        if shape == "noisy":
            phase = (12.9898 * l10 + 78.233 * step + 37.719 * mom + 4.1 * width
                     + 2.3 * ACT_INDEX[act])
            value = value + 0.01 * (1.0 - x) * np.sin(phase * 43.7585)
        return value
    if shape == "faithful":
        q = (0.04 * (l10 + 2.5) ** 2 + 0.0005 * (width - 4) ** 2 + 0.02 * (mom - 0.5) ** 2
             + _act(act, 0.01, 0.0, 0.02))
        rate = 4.0 * (1.0 + 0.1 * np.sqrt(lr))
        return 0.3 + q + 1.0 * np.exp(-rate * x)
    if shape == "slowbest":
        q = (0.02 * (l10 + 3) ** 2 + 0.0004 * (width - 6) ** 2 + 0.05 * (mom - 0.9) ** 2
             + _act(act, 0.0, 0.015, 0.02))
        rate = 2.0 * (1.0 + 3.0 * np.sqrt(lr)) * (1.4 - 0.9 * mom) * _act(act, 1.0, 1.4, 0.9)
        return 0.25 + q + 1.2 * np.exp(-rate * x)
    if shape == "plateau":
        q = 0.03 * (l10 + 2) ** 2 + 0.0003 * (width - 3) ** 2 + 0.01 * (mom - 0.6) ** 2
        fast = 2.0 * (1.0 + np.sqrt(lr)) * (1.5 - 0.5 * mom)
        if act == "tanh":
            return 0.25 + 0.06 + q + 1.0 * np.exp(-3.0 * fast * x)
        if act == "relu":
            return 0.25 + q + 0.6 * np.exp(-2.0 * fast * x) + 0.4 * np.exp(-0.5 * fast * x)
        return 0.25 + 0.02 + q + 1.0 * np.exp(-0.7 * fast * x)
    raise ValueError(f"unknown shape {shape}")
