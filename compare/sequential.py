"""Anytime-valid intervals for a bounded mean: the statistical core of deciding a run early (issue "Plan the spend,
stop when it is decided"). A run that looks at its figures after every round of tasks and stops when they
settle must not use a fixed-n interval: looking repeatedly inflates its error. A confidence sequence holds at every
look at once: with probability at least 1 − α the true mean lies in every interval it ever gives, so a run may
stop whenever the interval excludes the claim.

The construction is the hedged betting confidence sequence of Waudby-Smith & Ramdas ("Estimating means of bounded
random variables by betting", JRSS B 2023): for each candidate mean m, two gamblers bet that the next value
lies above and below m; their wealth is a nonnegative martingale when m is the true mean, so by Ville's
inequality it passes 2/α with probability at most α/2 each. The candidates where neither gambler got rich form
the interval. Bets are sized from the values seen before (predictable), with the plug-in rate of the paper
(its eq. 26), truncated so that no bet can lose more than it holds. Values are per-task scores in [0, 1]
(a task's resolved fraction of its seeds); a paired difference in [−1, 1] is mapped onto [0, 1] by the caller."""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Literal

import numpy as np

GRID = 2001  # candidate means on [0, 1]: the interval's ends are exact to 1/2000
MAX_BET = 0.5  # the paper's truncation c: at most half the wealth is staked on one value


@dataclass(frozen=True)
class Interval:
    """The confidence sequence after `n` values: [lower, upper] holds the mean, at this look and every other,
    with probability at least 1 − alpha."""

    lower: float
    upper: float
    n: int
    alpha: float


def confidence_sequence(values: np.ndarray | list[float], alpha: float = 0.05) -> list[Interval]:
    """The interval after each of `values` (each in [0, 1]), in order: what a run that looks after every task
    would see. The intervals are nested (each the intersection of all before it)."""
    x = np.asarray(values, dtype=float)
    if not 0 < alpha < 1:
        raise ValueError(f"alpha must be in (0, 1), not {alpha!r}")
    if x.ndim != 1 or not np.all(np.isfinite(x)) or np.any((x < 0) | (x > 1)):
        raise ValueError("values must be a sequence of numbers in [0, 1] (a task's resolved fraction)")
    m = np.linspace(0.0, 1.0, GRID)
    up, down = np.zeros(GRID), np.zeros(GRID)  # log wealth of the gamblers betting above / below m
    alive = np.ones(GRID, dtype=bool)  # candidates never rejected: the running intersection
    reject = math.log(1 / alpha)  # Ville: the hedged wealth passes 1/α with probability at most α under the truth
    cap_up = MAX_BET / np.maximum(m, 1e-12)  # no bet above m loses more than MAX_BET of the wealth, even at 0
    cap_down = MAX_BET / np.maximum(1 - m, 1e-12)
    total, squares, intervals = 0.5, 0.25, []  # the plug-in's prior mean and variance count as one value
    for t, value in enumerate(x, start=1):
        mean, variance = total / t, squares / t
        rate = math.sqrt(2 * math.log(2 / alpha) / (variance * t * math.log(t + 1)))
        bet_up, bet_down = np.minimum(rate, cap_up), np.minimum(rate, cap_down)
        up += np.log1p(bet_up * (value - m))
        down += np.log1p(-bet_down * (value - m))
        alive &= np.logaddexp(up, down) - math.log(2) < reject  # the hedged wealth, half on each gambler
        total += value
        squares += (value - mean) ** 2
        kept = m[alive]
        lower, upper = (float(kept[0]), float(kept[-1])) if kept.size else (float(mean), float(mean))
        intervals.append(Interval(lower, upper, t, alpha))
    return intervals


Verdict = Literal["reaches", "below", "undecided"]


def claim_verdict(interval: Interval, claimed: float) -> Verdict:
    """Whether the mean reaches `claimed` (the interval lies at or above it), falls below it (the interval lies
    below it), or is not yet decided. Valid at any look: a wrong verdict has probability at most alpha."""
    if interval.lower >= claimed:
        return "reaches"
    if interval.upper < claimed:
        return "below"
    return "undecided"
