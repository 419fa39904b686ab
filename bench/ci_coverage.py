"""How often the 95 % intervals of `leafcost summary` cover the truth at 30 tasks × 3 seeds: Avg@3 and both cost
per resolved figures, the old percentile interval beside the expanded BCa interval the ratios use now
(compare/stats.py), on the same simulated runs and the same resamples (the numbers review's case 3, designs B).

Run from the repository root:

    .venv/bin/python bench/ci_coverage.py [--runs 10000] [--tasks 30] [--seeds 3] [--json]

Each run draws its tasks afresh: a task's resolve probability p from the design's Beta, its 3 seeds resolved
with probability p, its base cost lognormal(0, σ = 0.8) × (1.5 − p), and each attempt costs the base cost, 0.7×
when it resolves. The truths are the population's ratios in closed form: Avg@3 = E[p]; cost per resolved
attempt = E[cost of a task's attempts] / E[resolved attempts]; per resolved task, the same numerator /
P(a task resolves at least once). Intervals come from `compare.stats` on `Resampler(30, 2000, 20261202)` (what
`summary` uses); a run whose interval is null (unbounded) counts as a miss. Coverage is reported, never asserted;
its Monte Carlo standard error is printed beside it."""

from __future__ import annotations

import argparse
import json
import math
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from compare.stats import (  # noqa: E402
    DEFAULT_RESAMPLES,
    DEFAULT_SEED,
    Estimate,
    Resampler,
    _percentile_ci,
    _ratios,
    _resampled_sums,
    ratio,
    resolve_rates,
)

SIGMA = 0.8
RESOLVED_COST = 0.7
DESIGNS = {"Beta(.7,.7)": (0.7, 0.7), "Beta(1,3)": (1.0, 3.0), "Beta(.3,2)": (0.3, 2.0)}


def truths(alpha: float, beta: float, seeds: int) -> dict[str, float]:
    """The population's Avg@k and cost-per-resolved ratios, from the Beta's moments (base cost independent of
    everything but p)."""
    m1 = alpha / (alpha + beta)
    m2 = m1 * (alpha + 1) / (alpha + beta + 1)
    lognormal_mean = math.exp(SIGMA ** 2 / 2)
    # a task's attempts cost b·(seeds − (1 − 0.7)·c), c ~ Binomial(seeds, p), b = LN × (1.5 − p):
    # E[(1.5 − p)(seeds − 0.3·seeds·p)] = seeds·(1.5 − 1.45 p + 0.3 p²) in expectation over p
    numerator = lognormal_mean * seeds * (1.5 - (1.5 * (1 - RESOLVED_COST) + 1) * m1 + (1 - RESOLVED_COST) * m2)
    never = math.prod((beta + j) / (alpha + beta + j) for j in range(seeds))  # E[(1 − p)^seeds]
    return {"avg_at_k": m1, "per_attempt": numerator / (seeds * m1), "per_task": numerator / (1 - never)}


def simulate(rng: np.random.Generator, alpha: float, beta: float, tasks: int, seeds: int
             ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """One run: per task, seeds (n), resolved seeds (c) and the cost of all its attempts."""
    p = rng.beta(alpha, beta, tasks)
    c = rng.binomial(seeds, p)
    base = rng.lognormal(0.0, SIGMA, tasks) * (1.5 - p)
    cost = base * (seeds - (1 - RESOLVED_COST) * c)
    return np.full(tasks, seeds), c, cost


def percentile_ratio(num: np.ndarray, den: np.ndarray, resampler: Resampler) -> tuple[float, float] | None:
    """The interval the ratios used before BCa: the plain percentiles of the same resampled ratios."""
    sums = _resampled_sums(resampler, np.column_stack([num, den.astype(np.float64)]))
    return _percentile_ci(_ratios(sums[:, 0], sums[:, 1]), "nothing resolves")[0]


def covers(ci: tuple[float, float] | None, truth: float) -> bool:
    return ci is not None and ci[0] <= truth <= ci[1]


def run_design(name: str, runs: int, tasks: int, seeds: int, resamples: int) -> dict:
    alpha, beta = DESIGNS[name]
    truth = truths(alpha, beta, seeds)
    resampler = Resampler(tasks, resamples, DEFAULT_SEED)
    rng = np.random.default_rng(20261203)
    hits = {key: 0 for key in ("avg_at_k", "per_attempt_percentile", "per_attempt_bca", "per_task_percentile",
                               "per_task_bca")}
    null_ci = {"per_attempt": 0, "per_task": 0}
    for _ in range(runs):
        n, c, cost = simulate(rng, alpha, beta, tasks, seeds)
        avg: Estimate = resolve_rates(n, c, resampler)["avg_at_k"]
        hits["avg_at_k"] += covers(avg.ci95, truth["avg_at_k"])
        for key, den in (("per_attempt", c), ("per_task", (c > 0).astype(np.int64))):
            if den.sum() == 0:  # nothing resolved: no number at all, a miss for both methods
                null_ci[key] += 1
                continue
            hits[f"{key}_percentile"] += covers(percentile_ratio(cost, den, resampler), truth[key])
            bca = ratio(cost, den, resampler, nothing="none")
            null_ci[key] += bca.ci95 is None
            hits[f"{key}_bca"] += covers(bca.ci95, truth[key])
    return {"design": name, "runs": runs, "tasks": tasks, "seeds": seeds, "truth": truth,
            "coverage": {key: value / runs for key, value in hits.items()}, "null_bca_ci": null_ci,
            "monte_carlo_se": math.sqrt(0.95 * 0.05 / runs)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=10_000, help="simulated runs per design (default 10,000)")
    parser.add_argument("--tasks", type=int, default=30)
    parser.add_argument("--seeds", type=int, default=3)
    parser.add_argument("--resamples", type=int, default=DEFAULT_RESAMPLES)
    parser.add_argument("--json", action="store_true", help="print the results as JSON")
    args = parser.parse_args()
    started = time.perf_counter()
    results = [run_design(name, args.runs, args.tasks, args.seeds, args.resamples) for name in DESIGNS]
    if args.json:
        print(json.dumps(results, indent=2))
        return
    print(f"{args.tasks} tasks x {args.seeds} seeds, {args.runs:,} runs per design, {args.resamples:,} resamples "
          f"(Monte Carlo SE ±{100 * results[0]['monte_carlo_se']:.2f} %), {time.perf_counter() - started:.0f} s")
    print("| design | Avg@3 (percentile) | cost/resolved attempt: percentile → expanded BCa "
          "| cost/resolved task: percentile → expanded BCa |")
    print("|---|---|---|---|")
    for r in results:
        cov = r["coverage"]
        print(f"| {r['design']} | {100 * cov['avg_at_k']:.2f} % "
              f"| {100 * cov['per_attempt_percentile']:.2f} % → **{100 * cov['per_attempt_bca']:.2f} %** "
              f"| {100 * cov['per_task_percentile']:.2f} % → **{100 * cov['per_task_bca']:.2f} %** |")


if __name__ == "__main__":
    main()
