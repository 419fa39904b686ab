"""How often the 95 % intervals of `leafcost summary` and `leafcost compare` cover the truth at 30 tasks × 3 seeds:
Avg@3, both cost per resolved figures, and the paired differences of two arms (resolve rate, both cost per
resolved figures), each interval as compare/stats.py computes it now beside the plain percentile interval
(2.5 %/97.5 %), on the same simulated runs and the same resamples (the numbers review's case 3, designs B). The
output records the run time (wall and CPU) and the machine's load average before and after.

Run from the repository root:

    .venv/bin/python bench/ci_coverage.py [--runs 10000] [--tasks 30] [--seeds 3] [--quick] [--json]

Each run draws its tasks afresh: a task's difficulty p from the design's Beta, arm A's seeds resolved with
probability p, arm B's with 0.8·p (the same tasks are hard for both: the pairing matters); a task's base cost is
lognormal(0, σ = 0.8) × (1.5 − p), an A attempt costs the base cost, 0.7× when it resolves, a B attempt 0.6× the
base cost × its own lognormal(0, 0.5) noise, 0.7× when it resolves. The truths are the population's figures in
closed form (`truths`): Avg@3 = E[p]; cost per resolved attempt = E[cost of a task's attempts] / E[resolved
attempts]; per resolved task, the same numerator / P(a task resolves at least once); a difference is A's truth
minus B's.

Vectorised: a batch of runs is simulated at once, and every run's resampled sums of every column come from one
matrix product (`Resampler(30, 2000, 20261202)`'s counts, what `summary` uses, times the batch's per-task
columns); each run's intervals are then read from its sums by the very functions the public estimators end in
(`compare.stats.mean_from_sums`, `ratio_from_sums`, `ratio_difference_from_sums`; the paired
difference of resolve rates is `rate_difference`'s t interval, which draws no resamples). The first runs of every
design are checked against the public estimators (`resolve_rates`, `ratio`, `paired_*`), to 1e-9 (float sums
added in another order).

Counting: an interval covers when truth ≥ its lower bound and ≤ its upper bound, an unbounded side covering
everything on that side (a one-sided interval [low, ∞) covers when low ≤ truth). A run with no interval at all
(no number, or both bounds unbounded) counts as a miss. Coverage is reported, never asserted, with its Monte
Carlo standard error √(c(1 − c)/runs) beside it. --quick simulates 50 runs per design with 200 resamples: a check
that the bench runs (the first runs still checked against the public estimators), not a measurement."""

from __future__ import annotations

import argparse
import json
import math
import os
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from compare.stats import (  # noqa: E402
    DEFAULT_RESAMPLES,
    DEFAULT_SEED,
    Bounds,
    Resampler,
    _percentile_ci,
    _ratios,
    mean_from_sums,
    paired_rate_difference,
    paired_ratio_difference,
    ratio,
    ratio_difference_from_sums,
    rate_difference,
    ratio_from_sums,
    resolve_rates,
)

SIGMA = 0.8
RESOLVED_COST = 0.7
B_RESOLVES = 0.8  # arm B resolves with probability 0.8·p
B_COST, B_SIGMA = 0.6, 0.5  # arm B's attempts: 0.6× the base cost × lognormal(0, 0.5)
DESIGNS = {"Beta(.7,.7)": (0.7, 0.7), "Beta(1,3)": (1.0, 3.0), "Beta(.3,2)": (0.3, 2.0)}
CHECKED_RUNS = 5  # per design, compared with the public estimators
BATCH = 250  # runs per matrix product: 2,000 × 250 × 8 float64 sums = 32 MB
QUICK_RUNS, QUICK_RESAMPLES = 50, 200

# the figures, in the order of the table: (key, label)
FIGURES = (("avg_at_k", "Avg@3"), ("per_attempt", "cost/resolved attempt"), ("per_task", "cost/resolved task"),
           ("rate_difference", "Avg@3 A − B"), ("per_attempt_difference", "cost/resolved attempt A − B"),
           ("per_task_difference", "cost/resolved task A − B"))


def _beta_moments(alpha: float, beta: float, up_to: int) -> list[float]:
    """E[p^j] for j = 0..up_to under Beta(alpha, beta)."""
    return [math.prod((alpha + i) / (alpha + beta + i) for i in range(j)) for j in range(up_to + 1)]


def _arm_truths(m: list[float], seeds: int, resolves: float, cost_mean: float) -> dict[str, float]:
    """An arm resolving with probability s·p whose attempts cost k·(1.5 − p)·(1, or 0.7 when resolved), k of mean
    `cost_mean` independent of p: a task's attempts cost k·(1.5 − p)·(seeds − 0.3·c), c ~ Binomial(seeds, s·p),
    so E = E[k]·seeds·E[(1.5 − p)(1 − 0.3·s·p)] = E[k]·seeds·(1.5 − (1 + 0.45 s)·m1 + 0.3 s·m2)."""
    s, lost = resolves, 1 - RESOLVED_COST
    numerator = cost_mean * seeds * (1.5 - (1 + 1.5 * lost * s) * m[1] + lost * s * m[2])
    never = sum(math.comb(seeds, j) * (-s) ** j * m[j] for j in range(seeds + 1))  # E[(1 − s·p)^seeds]
    return {"avg_at_k": s * m[1], "per_attempt": numerator / (seeds * s * m[1]), "per_task": numerator / (1 - never)}


def truths(alpha: float, beta: float, seeds: int) -> dict[str, float]:
    """The population's figures of arm A, and the differences A − B."""
    m = _beta_moments(alpha, beta, seeds)
    a = _arm_truths(m, seeds, 1.0, math.exp(SIGMA ** 2 / 2))
    b = _arm_truths(m, seeds, B_RESOLVES, B_COST * math.exp(SIGMA ** 2 / 2) * math.exp(B_SIGMA ** 2 / 2))
    return {**a, **{f"{key}_difference" if key != "avg_at_k" else "rate_difference": a[key] - b[key] for key in a}}


def simulate(rng: np.random.Generator, alpha: float, beta: float, runs: int, tasks: int, seeds: int
             ) -> dict[str, np.ndarray]:
    """A batch of runs (runs × tasks): both arms' resolved seeds and the cost of all their attempts."""
    p = rng.beta(alpha, beta, (runs, tasks))
    c_a = rng.binomial(seeds, p)
    c_b = rng.binomial(seeds, B_RESOLVES * p)
    base = rng.lognormal(0.0, SIGMA, (runs, tasks)) * (1.5 - p)
    cost_a = base * (seeds - (1 - RESOLVED_COST) * c_a)
    cost_b = B_COST * base * rng.lognormal(0.0, B_SIGMA, (runs, tasks)) * (seeds - (1 - RESOLVED_COST) * c_b)
    return {"c_a": c_a, "c_b": c_b, "cost_a": cost_a, "cost_b": cost_b}


# the per-task columns whose resampled sums every interval reads
COLUMNS = ("rate_a", "cost_a", "attempts_a", "tasks_a", "cost_b", "attempts_b", "tasks_b", "rate_difference")


def columns(batch: dict[str, np.ndarray], seeds: int) -> np.ndarray:
    """runs × tasks × COLUMNS."""
    rate_a, rate_b = batch["c_a"] / seeds, batch["c_b"] / seeds
    return np.stack([rate_a, batch["cost_a"], batch["c_a"].astype(np.float64), (batch["c_a"] > 0).astype(np.float64),
                     batch["cost_b"], batch["c_b"].astype(np.float64), (batch["c_b"] > 0).astype(np.float64),
                     rate_a - rate_b], axis=-1)


def intervals(cols: np.ndarray, sums: np.ndarray) -> dict[str, tuple[Bounds | None, Bounds | None]]:
    """One run's figures: (the plain percentile interval, the interval compare.stats gives now), from its per-task
    columns (tasks × COLUMNS) and resampled sums (resamples × COLUMNS)."""
    at = {name: i for i, name in enumerate(COLUMNS)}
    n = cols.shape[0]
    out: dict[str, tuple[Bounds | None, Bounds | None]] = {}
    rate, difference = at["rate_a"], at["rate_difference"]
    out["avg_at_k"] = (_percentile_ci(sums[:, rate] / n, "")[0], mean_from_sums(cols[:, rate], sums[:, rate]).ci95)
    out["rate_difference"] = (_percentile_ci(sums[:, difference] / n, "")[0], rate_difference(cols[:, difference]).ci95)
    for key, den in (("per_attempt", "attempts"), ("per_task", "tasks")):
        a = [at["cost_a"], at[f"{den}_a"]]
        b = [at["cost_b"], at[f"{den}_b"]]
        resolved_a, resolved_b = cols[:, a[1]].sum() > 0, cols[:, b[1]].sum() > 0
        out[key] = ((_percentile_ci(_ratios(sums[:, a[0]], sums[:, a[1]]), "")[0],
                     ratio_from_sums(cols[:, a[0]], cols[:, a[1]], sums[:, a]).ci95) if resolved_a else (None, None))
        if resolved_a and resolved_b:
            with np.errstate(invalid="ignore"):
                diff = _ratios(sums[:, a[0]], sums[:, a[1]]) - _ratios(sums[:, b[0]], sums[:, b[1]])
            now = ratio_difference_from_sums(cols[:, a[0]], cols[:, a[1]], cols[:, b[0]], cols[:, b[1]],
                                             sums[:, a + b]).ci95
            out[f"{key}_difference"] = (_percentile_ci(diff, "")[0], now)
        else:  # an arm resolves nothing: no number at all
            out[f"{key}_difference"] = (None, None)
    return out


def public_intervals(cols: np.ndarray, seeds: int, resampler: Resampler) -> dict[str, Bounds | None]:
    """The same run through the public estimators `summary` and `compare` call."""
    at = {name: i for i, name in enumerate(COLUMNS)}
    n = np.full(cols.shape[0], seeds)
    c_a, c_b = (np.rint(cols[:, at["attempts_a"]]).astype(int), np.rint(cols[:, at["attempts_b"]]).astype(int))
    out: dict[str, Bounds | None] = {
        "avg_at_k": resolve_rates(n, c_a, resampler)["avg_at_k"].ci95,
        "rate_difference": paired_rate_difference(c_a, n, c_b, n, resampler).ci95}
    for key, den_a, den_b in (("per_attempt", c_a, c_b), ("per_task", c_a > 0, c_b > 0)):
        cost_a, cost_b = cols[:, at["cost_a"]], cols[:, at["cost_b"]]
        out[key] = ratio(cost_a, den_a.astype(float), resampler, nothing="x").ci95
        out[f"{key}_difference"] = paired_ratio_difference(cost_a, den_a.astype(float), cost_b, den_b.astype(float),
                                                           resampler, nothing="x").ci95
    return out


def _same(a: Bounds | None, b: Bounds | None) -> bool:
    """The same interval, up to the last bits of float sums added in another order."""
    if a is None or b is None:
        return a is b
    return all((x is None and y is None) or (x is not None and y is not None and math.isclose(x, y, rel_tol=1e-9,
                                                                                             abs_tol=1e-12))
               for x, y in zip(a, b))


def covers(ci: Bounds | None, truth: float) -> bool:
    """Within the interval; an unbounded side (None) covers everything on its side; no interval is a miss."""
    if ci is None:
        return False
    lo, hi = ci
    return (lo is None or lo <= truth) and (hi is None or truth <= hi)


def run_design(name: str, runs: int, tasks: int, seeds: int, resamples: int) -> dict:
    alpha, beta = DESIGNS[name]
    truth = truths(alpha, beta, seeds)
    resampler = Resampler(tasks, resamples, DEFAULT_SEED)
    counts = np.concatenate(resampler.counts).astype(np.float64)  # resamples × tasks
    rng = np.random.default_rng(20261203)
    keys = [key for key, _ in FIGURES]
    tally = {key: {"before": 0, "now": 0, "no_interval": 0, "one_sided": 0, "given_covered": 0, "below": 0,
                   "above": 0} for key in keys}
    started, done = time.perf_counter(), 0
    while done < runs:
        size = min(BATCH, runs - done)
        cols = columns(simulate(rng, alpha, beta, size, tasks, seeds), seeds)  # size × tasks × K
        k = cols.shape[2]
        sums = (counts @ cols.transpose(1, 0, 2).reshape(tasks, size * k)).reshape(resamples, size, k)
        for i in range(size):
            found = intervals(cols[i], sums[:, i, :])
            if done + i < CHECKED_RUNS:
                public = public_intervals(cols[i], seeds, resampler)
                wrong = {key: (found[key][1], public[key]) for key in keys if not _same(found[key][1], public[key])}
                if wrong:
                    raise SystemExit(f"the batched intervals differ from the public estimators' in run {done + i}: "
                                     f"{wrong}")
            for key in keys:
                before, now = found[key]
                t, row = truth[key], tally[key]
                row["before"] += covers(before, t)
                row["now"] += covers(now, t)
                row["no_interval"] += now is None
                if now is not None:
                    row["one_sided"] += None in now
                    row["given_covered"] += covers(now, t)
                    row["below"] += now[0] is not None and t < now[0]  # the truth below the interval
                    row["above"] += now[1] is not None and t > now[1]
        done += size
    seconds = time.perf_counter() - started
    coverage = {}
    for key in keys:
        row = tally[key]
        given = runs - row["no_interval"]
        coverage[key] = {
            "before": row["before"] / runs, "now": row["now"] / runs,
            "now_se": math.sqrt(max(row["now"] / runs * (1 - row["now"] / runs), 0.0) / runs),
            "before_se": math.sqrt(max(row["before"] / runs * (1 - row["before"] / runs), 0.0) / runs),
            "no_interval": row["no_interval"] / runs, "one_sided": row["one_sided"] / runs,
            "where_given": row["given_covered"] / given if given else None,
            "miss_below": row["below"] / runs, "miss_above": row["above"] / runs}
    return {"design": name, "runs": runs, "tasks": tasks, "seeds": seeds, "resamples": resamples, "truth": truth,
            "coverage": coverage, "seconds": seconds}


def _load() -> str:
    one, five, _ = os.getloadavg()
    return f"load average {one:.2f} (1 min), {five:.2f} (5 min) on {os.cpu_count()} cores"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=10_000, help="simulated runs per design (default 10,000)")
    parser.add_argument("--tasks", type=int, default=30)
    parser.add_argument("--seeds", type=int, default=3)
    parser.add_argument("--resamples", type=int, default=DEFAULT_RESAMPLES)
    parser.add_argument("--quick", action="store_true",
                        help=f"{QUICK_RUNS} runs per design, {QUICK_RESAMPLES} resamples: a check that the bench runs, "
                             "not a measurement")
    parser.add_argument("--json", action="store_true", help="print the results as JSON")
    args = parser.parse_args()
    if args.quick:
        args.runs, args.resamples = QUICK_RUNS, QUICK_RESAMPLES
    load_before = _load()
    started, cpu = time.perf_counter(), time.process_time()
    results = [run_design(name, args.runs, args.tasks, args.seeds, args.resamples) for name in DESIGNS]
    wall, cpu = time.perf_counter() - started, time.process_time() - cpu
    machine = {"wall_seconds": wall, "cpu_seconds": cpu, "load_before": load_before, "load_after": _load()}
    if args.json:
        print(json.dumps({"results": results, "machine": machine, "quick": args.quick}, indent=2))
        return
    print(f"{args.tasks} tasks x {args.seeds} seeds, {args.runs:,} runs per design, {args.resamples:,} resamples: "
          f"{wall:.0f} s wall, {cpu:.0f} s CPU; before: {load_before}; after: {machine['load_after']}"
          + ("; --quick: a check that the bench runs, not a measurement" if args.quick else ""))
    print("coverage, percentile → now ± Monte Carlo SE (no interval: share of runs; one-sided: share of runs)")
    print("| figure | " + " | ".join(results_design["design"] for results_design in results) + " |")
    print("|---|" + "---|" * len(results))
    for key, label in FIGURES:
        cells = []
        for r in results:
            c = r["coverage"][key]
            cell = (f"{100 * c['before']:.2f} % → **{100 * c['now']:.2f} %** ± {100 * c['now_se']:.2f}")
            extra = []
            if c["one_sided"]:
                extra.append(f"one-sided {100 * c['one_sided']:.1f} %")
            if c["no_interval"]:
                extra.append(f"none {100 * c['no_interval']:.1f} %")
            cells.append(cell + (f" ({', '.join(extra)})" if extra else ""))
        print(f"| {label} | " + " | ".join(cells) + " |")


if __name__ == "__main__":
    main()
