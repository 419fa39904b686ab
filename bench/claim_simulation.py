"""The claim test's error rates (issue 25's proof): how often compare.claim_check calls a vendor's claim "below"
when the model resolves at exactly the claimed rate (the false alarm, promised ≤ alpha), and how often it reaches
each verdict when the truth is 5 and 10 points below or above the claim (its power), with and without stopping
early in rounds as a deciding run does.

Run from the repository root:

    .venv/bin/python bench/claim_simulation.py [--runs 2000] [--tasks 500] [--jobs 2] [--quick] [--json]

The population. A task's resolve probability p is drawn from a Beta whose concentration is calibrated so that, at
the claimed rate, Avg@3 = E[p] = 0.615 and Pass@3 = E[1 − (1 − p)³] = 0.710 (FrogNano-4B's published figures on
SWE-bench Verified); a truth shifted by d points keeps that concentration with E[p] = 0.615 + d. Each of a task's
3 seeds resolves with probability p (errors count as misses: they are misses here), and the task's score is its
resolved share. A run is 500 fresh tasks (SWE-bench Verified's size).

Two procedures on the same runs:
- "once": compare.claim_check.check_claim over every task, one look at the end (the claim document's verdict
  after a full run);
- "early stop": the run in rounds of DecideConfig.round_size(16 workers, 1 arm, 3 seeds) tasks, each round
  followed by compare.decision.look on `decide: {reaches: {arm, avg_at_k, tolerance}}` and stopped by
  compare.decision.after_look (settled verdict, the futility stop, or no task left), exactly as
  compare/decision_rounds.py drives a run; "reaches" (the interval wholly at or above the claim) counts as
  "consistent".

Printed per truth and procedure: P(below), P(consistent), P(undecided), the mean tasks used; then the checks the
issue asks for: the false alarm at the claimed rate ≤ alpha (a binomial 95 % upper bound beside it), and the power
at −10 and +10 points. Results are reported, not asserted (the exit code is 0); the output records the date, the
machine's load average before and after, and the time taken."""

from __future__ import annotations

import argparse
import json
import math
import os
import sys
import time
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

CLAIMED_AVG, CLAIMED_PASS = 0.615, 0.710
SEEDS = 3
TASKS = 500
WORKERS = 16
ALPHA = 0.05
TOLERANCE = 0.05
SHIFTS = (-0.10, -0.05, 0.0, 0.05, 0.10)  # the true Avg@3 minus the claim
SEED = 20261205
RUNS = 2000
QUICK_RUNS, QUICK_TASKS, QUICK_SHIFTS = 6, 60, (-0.10, 0.0, 0.10)
PROCEDURES = ("once", "early stop")


@dataclass(frozen=True)
class Truth:
    """The population of one row: its Beta(a, b) of p, hence its Avg@3 and Pass@3."""

    shift: float
    a: float
    b: float

    @property
    def avg(self) -> float:
        return self.a / (self.a + self.b)

    @property
    def pass_at_3(self) -> float:
        return 1 - _miss_all(self.a, self.b)


def concentration(avg: float = CLAIMED_AVG, pass_at_3: float = CLAIMED_PASS) -> float:
    """The Beta's a + b giving E[p] = avg and E[1 − (1 − p)³] = pass_at_3 (Pass@3 falls as the concentration
    grows: bisection on its logarithm)."""
    if not avg < pass_at_3 < 1 - (1 - avg) ** SEEDS:
        raise ValueError(f"Pass@3 {pass_at_3} is out of a Beta's reach at Avg@3 {avg}")
    low, high = math.log(1e-6), math.log(1e6)
    for _ in range(200):
        middle = (low + high) / 2
        s = math.exp(middle)
        low, high = (middle, high) if 1 - _miss_all(avg * s, (1 - avg) * s) < pass_at_3 else (low, middle)
    return math.exp((low + high) / 2)


def truths(shifts: tuple[float, ...]) -> list[Truth]:
    s = concentration()
    return [Truth(shift, (CLAIMED_AVG + shift) * s, (1 - CLAIMED_AVG - shift) * s) for shift in shifts]


def _miss_all(a: float, b: float) -> float:
    """E[(1 − p)³] for p ~ Beta(a, b)."""
    return math.prod((b + i) / (a + b + i) for i in range(SEEDS))


# --------------------------------------------------------------------------------------------------- the runs


def simulate(truth: Truth, runs: int, tasks: int, seed: int) -> dict:
    """`runs` runs of `tasks` tasks from `truth`'s population under both procedures: each procedure's verdict
    counts and mean tasks used."""
    from compare.claim_check import check_claim
    from compare.decide_spec import DecideConfig

    rng = np.random.default_rng(seed)
    config = DecideConfig(reaches={"arm": "model", "avg_at_k": CLAIMED_AVG, "tolerance": TOLERANCE}, alpha=ALPHA)
    size = config.round_size(WORKERS, 1, SEEDS)
    counts = {name: {"below": 0, "consistent": 0, "undecided": 0, "tasks": 0} for name in PROCEDURES}
    for _ in range(runs):
        resolved = rng.binomial(SEEDS, rng.beta(truth.a, truth.b, tasks))
        once = check_claim(resolved / SEEDS, CLAIMED_AVG, tolerance=TOLERANCE, alpha=ALPHA, total_tasks=tasks)
        _count(counts["once"], once.verdict, tasks)
        verdict, used = early_stop_run(config, resolved, size)
        _count(counts["early stop"], verdict, used)
    return {"shift": truth.shift, "avg_at_3": truth.avg, "pass_at_3": truth.pass_at_3, "runs": runs,
            "round_tasks": size, "procedures": {name: _shares(c, runs) for name, c in counts.items()}}


def early_stop_run(config, resolved: np.ndarray, size: int) -> tuple[str, int]:
    """One run in rounds, as compare/decision_rounds.py drives it: the claim word and the tasks run."""
    from compare.decision import ArmTasks, after_look, look

    total, done, number, previous = resolved.size, 0, 0, None
    while True:
        done = min(done + size, total)
        data = {"model": ArmTasks(arm="model", resolved=resolved[:done], attempts=np.full(done, SEEDS),
                                  cost_usd=np.zeros(done), spent_usd=0.0)}
        number += 1
        previous = look(config, data, look_number=number, total_tasks=total, previous=previous)
        action, _ = after_look(config, previous, spent={"model": 0.0}, round_tasks=size)
        if action != "continue":
            verdict = previous.questions[0].verdict
            return ("consistent" if verdict == "reaches" else verdict), done


def _count(counts: dict, verdict: str, tasks: int) -> None:
    counts[verdict] += 1
    counts["tasks"] += tasks


def _shares(counts: dict, runs: int) -> dict:
    below = counts["below"]
    return {"below": below / runs, "consistent": counts["consistent"] / runs,
            "undecided": counts["undecided"] / runs, "mean_tasks": counts["tasks"] / runs,
            "below_upper95": _upper_bound(below, runs)}


def _upper_bound(hits: int, runs: int) -> float:
    """The one-sided 95 % Clopper–Pearson upper bound on a rate seen `hits` times in `runs`, by bisection on the
    binomial tail P(X ≤ hits | rate) = 0.05."""
    if hits >= runs:
        return 1.0
    low, high = hits / runs, 1.0
    for _ in range(60):
        middle = (low + high) / 2
        low, high = (middle, high) if _binomial_tail(hits, runs, middle) > 0.05 else (low, middle)
    return high


def _binomial_tail(hits: int, runs: int, rate: float) -> float:
    """P(X ≤ hits) for X ~ Binomial(runs, rate), its terms in logarithms (the counts overflow a float)."""
    log_rate, log_miss = math.log(rate), math.log1p(-rate) if rate < 1 else -math.inf
    return math.fsum(math.exp(math.lgamma(runs + 1) - math.lgamma(i + 1) - math.lgamma(runs - i + 1)
                              + i * log_rate + (runs - i) * log_miss) for i in range(hits + 1))


def run_all(shifts: tuple[float, ...], runs: int, tasks: int, jobs: int) -> dict:
    load_before, started = _load(), time.perf_counter()
    date = datetime.now(timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
    rows = truths(shifts)
    seeds = [SEED + i for i in range(len(rows))]
    if jobs > 1:
        with ProcessPoolExecutor(jobs) as pool:
            results = list(pool.map(simulate, rows, [runs] * len(rows), [tasks] * len(rows), seeds))
    else:
        results = [simulate(row, runs, tasks, seed) for row, seed in zip(rows, seeds)]
    return {"date": date, "alpha": ALPHA, "tolerance": TOLERANCE, "claimed": {"avg_at_3": CLAIMED_AVG,
            "pass_at_3": CLAIMED_PASS}, "concentration": concentration(), "seeds": SEEDS, "tasks": tasks,
            "runs": runs, "rows": results, "checks": checks(results),
            "machine": {"wall_seconds": round(time.perf_counter() - started, 1), "load_before": load_before,
                        "load_after": _load(), "jobs": jobs, "python": sys.version.split()[0]}}


def checks(rows: list[dict]) -> dict:
    """What the issue asks of the numbers: each procedure's false alarm at the claimed rate (≤ alpha) and its
    power (the right verdict's share) at −10 and +10 points, where the population has those rows."""
    by_shift = {round(row["shift"], 6): row["procedures"] for row in rows}
    out = {}
    for name in PROCEDURES:
        entry = {}
        if 0.0 in by_shift:
            false_alarm = by_shift[0.0][name]["below"]
            entry["false_alarm"] = false_alarm
            entry["false_alarm_upper95"] = by_shift[0.0][name]["below_upper95"]
            entry["false_alarm_within_alpha"] = false_alarm <= ALPHA
        if -0.1 in by_shift:
            entry["power_below_at_minus_10"] = by_shift[-0.1][name]["below"]
        if 0.1 in by_shift:
            entry["power_consistent_at_plus_10"] = by_shift[0.1][name]["consistent"]
        out[name] = entry
    return out


def _load() -> str:
    one, five, _ = os.getloadavg()
    return f"load average {one:.2f} (1 min), {five:.2f} (5 min) on {os.cpu_count()} cores"


# ------------------------------------------------------------------------------------------------- printing


def _pct(value: float) -> str:
    return f"{100 * value:.1f}"


def print_table(document: dict) -> None:
    m = document["machine"]
    print(f"{document['date']}: {document['runs']} runs per row, {document['tasks']} tasks × {document['seeds']} "
          f"seeds, claim Avg@3 {document['claimed']['avg_at_3']} (Pass@3 {document['claimed']['pass_at_3']}), "
          f"tolerance {document['tolerance']}, alpha {document['alpha']}; Beta concentration "
          f"{document['concentration']:.3f}; {m['wall_seconds']:.0f} s wall, {m['jobs']} jobs; before: "
          f"{m['load_before']}; after: {m['load_after']}")
    print()
    print("| true Avg@3 (vs claim) | Pass@3 | procedure | P(below) % | P(consistent) % | P(undecided) % | "
          "mean tasks |")
    print("|---|---|---|---|---|---|---|")
    for row in document["rows"]:
        for name, figures in row["procedures"].items():
            print(f"| {row['avg_at_3']:.3f} ({100 * row['shift']:+.0f} points) | {row['pass_at_3']:.3f} | {name} | "
                  f"{_pct(figures['below'])} | {_pct(figures['consistent'])} | {_pct(figures['undecided'])} | "
                  f"{figures['mean_tasks']:.0f} |")
    print()
    for name, entry in document["checks"].items():
        parts = []
        if "false_alarm" in entry:
            holds = "holds" if entry["false_alarm_within_alpha"] else "FAILS"
            parts.append(f"false alarm at the claimed rate {_pct(entry['false_alarm'])} % (95 % upper bound "
                         f"{_pct(entry['false_alarm_upper95'])} %) ≤ {_pct(document['alpha'])} %: {holds}")
        if "power_below_at_minus_10" in entry:
            parts.append(f"power at −10 points ('below') {_pct(entry['power_below_at_minus_10'])} %")
        if "power_consistent_at_plus_10" in entry:
            parts.append(f"at +10 points ('consistent') {_pct(entry['power_consistent_at_plus_10'])} %")
        print(f"{name}: " + "; ".join(parts))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=RUNS, help=f"simulated runs per truth (default {RUNS})")
    parser.add_argument("--tasks", type=int, default=TASKS, help=f"tasks per run (default {TASKS})")
    parser.add_argument("--jobs", type=int, default=1, help="truths simulated at once (default 1)")
    parser.add_argument("--quick", action="store_true", help=f"{len(QUICK_SHIFTS)} truths, {QUICK_TASKS} tasks, "
                        f"{QUICK_RUNS} runs: a check that the bench runs, not a measurement")
    parser.add_argument("--json", action="store_true", help="print the results as JSON")
    args = parser.parse_args()
    if args.runs < 1 or args.jobs < 1 or args.tasks < 20:
        parser.error("--runs and --jobs must be ≥ 1, --tasks ≥ 20")
    shifts, runs, tasks = SHIFTS, args.runs, args.tasks
    if args.quick:
        shifts, runs, tasks = QUICK_SHIFTS, QUICK_RUNS, QUICK_TASKS
    document = run_all(shifts, runs, tasks, args.jobs)
    if args.json:
        print(json.dumps(document, indent=2))
    else:
        print_table(document)


if __name__ == "__main__":
    main()
