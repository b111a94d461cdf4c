"""The synthetic learning curves of bench/search, a pure function of the hyperparameters
and the step (sim_search.cc has the same function in C++; bench.py checks they agree).

The space: lr (log, 1e-4..1), width (int, 1..8), act (relu, tanh, sigmoid), momentum
(float, 0..0.99). Shapes: the final loss is best near lr=0.01, width 5, momentum 0.8, relu;
a large lr learns fast and then diverges (good early, bad at the end), tanh starts fast
and plateaus higher, a high momentum starts slowly.
"""

import math

BUDGET = 81


def loss(lr, width, act, mom, step, budget=BUDGET):
    x = (step + 1) / budget
    q = (0.03 * (math.log10(lr) + 2) ** 2 + 0.0003 * (width - 5) ** 2 + 0.01 * (mom - 0.8) ** 2
         + {"relu": 0.0, "tanh": 0.01, "sigmoid": 0.03}[act])
    floor = 0.2 + q
    rate = 3.0 * (1.0 + math.sqrt(lr)) * (1.3 - 0.5 * mom)
    if act == "tanh":
        rate *= 1.5
    value = floor + 1.3 * math.exp(-rate * x)
    if lr > 0.1:
        value += 0.3 * x * x * math.log10(lr * 10)
    return value
