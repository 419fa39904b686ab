"""The test of a published claim (issue "The vendor's claim, checked in one command"): is an arm's Avg@k consistent
with the figure its vendor claims, below it, or not yet decided, with a stated error rate at any look?

The interval is compare.sequential's betting confidence sequence over the per-task scores (a task's resolved share
of its final attempts, errors counted as misses), with its bets sized for the run's claim tasks
(horizon_tasks(total_tasks)), so a run may look after every round and stop when the verdict is settled:

- "below" iff the interval lies wholly under the claim (upper < claimed): when the true Avg@k is at least the
  claim, this happens at any look with probability at most alpha;
- "consistent" iff the interval lies wholly at or above claimed − tolerance: when the true Avg@k is short of the
  claim by more than the tolerance, this happens with probability at most alpha;
- both (possible only when the interval is narrower than the tolerance): "below", the stronger finding;
- else "undecided", with the plan's count of further tasks that would decide it.

The claim's tasks are the run's tasks that are not fresh for the claim's arm (claim_task_mask: compare.freshness's
rule, undated tasks included)."""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import date, datetime
from typing import Literal

import numpy as np

from compare.sequential import BettingSequence, Interval, horizon_tasks, tasks_to_exclude

ClaimWord = Literal["consistent", "below", "undecided"]
NO_VARIANCE_YET = 0.25  # a [0, 1] score's largest variance: what one task's score says about the spread


@dataclass(frozen=True)
class ClaimCheck:
    """The claim's verdict over `tasks` scores: the mean score and its anytime-valid interval at level
    1 − alpha; `tasks_to_decide`, when undecided, the further tasks the plan says would decide (None: it cannot
    say: no spread yet, or an estimate on a decision boundary)."""

    verdict: ClaimWord
    estimate: float
    lower: float
    upper: float
    tasks: int
    tasks_to_decide: int | None


def check_claim(scores: np.ndarray, claimed: float, *, tolerance: float, alpha: float,
                total_tasks: int) -> ClaimCheck:
    """The verdict on `claimed` (an Avg@k share in (0, 1)) from the per-task `scores` (each in [0, 1], in the run's
    task order), of a run whose claim tasks number `total_tasks` (the horizon the bets are sized for)."""
    values = _scores(scores)
    _check_total(total_tasks, values.size)
    sequence = BettingSequence(alpha, horizon_tasks(total_tasks))
    return judge_claim(sequence.extend(values), values, claimed, tolerance=tolerance, total_tasks=total_tasks)


def judge_claim(interval: Interval, scores: np.ndarray, claimed: float, *, tolerance: float,
                total_tasks: int) -> ClaimCheck:
    """check_claim's verdict from an interval already computed over `scores` (a run's look carries its betting
    sequence from round to round instead of recomputing it): the one place the verdict's rule lives."""
    _check_claimed(claimed, tolerance)
    values = _scores(scores)
    if interval.n != values.size:
        raise ValueError(f"the interval covers {interval.n} tasks but {values.size} scores were given")
    verdict = claim_word(interval.lower, interval.upper, claimed, tolerance)
    needed = None
    if verdict == "undecided":
        needed = claim_tasks_needed(values, claimed, tolerance=tolerance, alpha=interval.alpha,
                                    total_tasks=total_tasks)
    estimate = interval.estimate if interval.estimate is not None else float(values.mean())
    return ClaimCheck(verdict=verdict, estimate=float(estimate), lower=interval.lower, upper=interval.upper,
                      tasks=values.size, tasks_to_decide=needed)


def claim_word(lower: float, upper: float, claimed: float, tolerance: float) -> ClaimWord:
    """The verdict an interval [lower, upper] gives on `claimed` with `tolerance` (see the module's rule)."""
    if upper < claimed:
        return "below"
    if lower >= claimed - tolerance:
        return "consistent"
    return "undecided"


def claim_tasks_needed(scores: np.ndarray, claimed: float, *, tolerance: float, alpha: float,
                       total_tasks: int) -> int | None:
    """The plan's further tasks for an undecided claim: when an interval of the scores' spread would leave the
    claim (for "below") or claimed − tolerance (for "consistent"), whichever the current mean lies farther from
    (the finite-horizon radius standing in for the betting interval's, as compare.decision's plan does).
    At tolerance 0 the gap is |mean − claimed|. None when the mean sits on both boundaries' near side."""
    values = _scores(scores)
    variance = float(np.var(values, ddof=1)) if values.size > 1 else NO_VARIANCE_YET
    mean = float(values.mean())
    gap = max(claimed - mean, mean - (claimed - tolerance))
    needed = tasks_to_exclude(gap, variance, alpha, total_tasks) if gap > 0 else None
    if needed is None:
        return None
    return max(1, needed - values.size)


def claim_within_reach(interval: Interval, scores: np.ndarray, claimed: float, *, tolerance: float, tasks: int,
                       total_tasks: int, luck: float) -> bool:
    """Whether the rest of the claim tasks could still settle the verdict: the truth at the interval's favourable
    end for each verdict, the final radius the fixed-horizon one at N, sqrt(2 log(2/α))·σ̂/√N, less `luck`
    standard errors of the remaining tasks' mean (σ̂·√(N − n)/N). No task left: out of reach."""
    if tasks >= total_tasks:
        return False
    values = _scores(scores)
    share = tasks / total_tasks
    spread = float(np.std(values, ddof=1)) if values.size > 1 else math.sqrt(NO_VARIANCE_YET)
    final_radius = (math.sqrt(2 * math.log(2 / interval.alpha)) * spread / math.sqrt(total_tasks)
                    - luck * spread * math.sqrt(total_tasks - tasks) / total_tasks)
    mean = interval.estimate if interval.estimate is not None else float(values.mean())
    consistent = share * mean + (1 - share) * interval.upper - final_radius >= claimed - tolerance
    below = share * mean + (1 - share) * interval.lower + final_radius < claimed
    return consistent or below


def claim_task_mask(task_ids: Sequence[str], dates: Mapping[str, datetime | date | None],
                    released: date | None) -> np.ndarray:
    """Which of `task_ids` are the claim's tasks for an arm released on `released`: every task not fresh for it
    (created on or before that day, or undated); every task when the arm has no release day."""
    if released is None:
        return np.ones(len(task_ids), dtype=bool)
    return np.array([not _after(dates.get(task), released) for task in task_ids], dtype=bool)


def reaches_task_mask(spec, tasks: Sequence) -> np.ndarray | None:
    """Which of `tasks` (sandbox Tasks, in run order) the spec's `decide.reaches` question reads: with `tasks: seen`
    its arm's claim tasks (claim_task_mask), else None (every task). ValueError when every task is fresh for the arm:
    the claim could never be judged (the runner and the plan both refuse such a run)."""
    question = spec.decide.reaches if spec.decide is not None else None
    if question is None or question.tasks != "seen":
        return None
    released = next(arm.released for arm in spec.arms if arm.name == question.arm)
    mask = claim_task_mask([t.task_id for t in tasks], {t.task_id: t.created_at for t in tasks}, released)
    if not mask.any():
        raise ValueError(f"decide.reaches.tasks: seen, but every task is fresh for arm {question.arm} (created after "
                         f"its released: {released}): set tasks: all or add tasks it may have seen")
    return mask


def _after(created: datetime | date | None, released: date) -> bool:
    if created is None:
        return False
    day = created.date() if isinstance(created, datetime) else created
    return day > released


def _scores(scores: np.ndarray | Sequence[float]) -> np.ndarray:
    values = np.asarray(scores, dtype=float)
    if values.ndim != 1 or values.size == 0:
        raise ValueError("scores must be a flat sequence of at least one task's score (its resolved share)")
    if not np.all(np.isfinite(values)) or np.any((values < 0) | (values > 1)):
        raise ValueError("scores must be numbers in [0, 1] (a task's resolved share of its final attempts)")
    return values


def _check_claimed(claimed: float, tolerance: float) -> None:
    if not (isinstance(claimed, (int, float)) and 0 < claimed < 1):
        raise ValueError(f"claimed must be an Avg@k share in (0, 1), e.g. 0.615, not {claimed!r}")
    if not (isinstance(tolerance, (int, float)) and 0 <= tolerance < 1):
        raise ValueError(f"tolerance must be a share in [0, 1), e.g. 0.05, not {tolerance!r}")


def _check_total(total_tasks: int, scored: int) -> None:
    if isinstance(total_tasks, bool) or not isinstance(total_tasks, (int, np.integer)) or total_tasks < scored:
        raise ValueError(f"total_tasks must be a whole number of claim tasks at least the {scored} scored, "
                         f"not {total_tasks!r}")
