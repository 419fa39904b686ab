"""The verdict on a run's claim (`claim:` in its spec, compare.claim_spec): the claim arm's Avg@k and Pass@k with
their 95 % intervals beside the published figures, the claim test's word (compare.claim_check), the harness's health
(above its threshold of harness errors there is no verdict, because a misconfigured parser looks like a bad model)
and the contamination gap between the tasks the model may have seen and those created after its release.

`claim_document` reads the ledger; `claim_from_tasks` and `contamination_gap` are pure, so a checker recomputes the
verdict from an evidence pack's files alone. Every final attempt counts: an error is a miss (DESIGN.md), and the
errors of the harness are counted beside the figures, not left out of them."""

from __future__ import annotations

import math
from collections import Counter
from datetime import date
from typing import Literal

import numpy as np
from pydantic import BaseModel, Field, model_validator

from compare.claim_check import ClaimWord, check_claim, claim_task_mask
from compare.claim_spec import ClaimConfig
from compare.decision import Figure
from compare.freshness import task_dates
from compare.stats import DEFAULT_RESAMPLES, DEFAULT_SEED, HIGH, LOW, Estimate, Resampler, resolve_rates
from compare.summary import load_run

# An attempt that ends with one of these, or with the ledger's infra_error / harness_error flag, failed in the
# harness (the sandbox, the parser, the endpoint's set-up, the task, leafcost itself), not in the model.
HARNESS_EXIT_REASONS = frozenset({"infrastructure_error", "parser_misconfigured", "configuration_error",
                                  "task_error", "harness_error"})
TOP_REASONS = 3  # the harness-unhealthy sentence names this many exit reasons

Verdict = Literal["consistent", "below", "undecided", "harness_unhealthy"]


class ClaimTask(BaseModel):
    """One task of the claim arm, over its final attempts: how many, how many resolved, how many ended in a harness
    error (counted as misses) and those errors by exit reason."""

    task_id: str
    attempts: int = Field(ge=1)
    resolved: int = Field(ge=0)
    errors: int = Field(0, ge=0)
    error_reasons: dict[str, int] = Field(default_factory=dict)

    @model_validator(mode="after")
    def _counts_fit(self) -> ClaimTask:
        if self.resolved > self.attempts or self.errors > self.attempts:
            raise ValueError(f"task {self.task_id}: resolved ({self.resolved}) and errors ({self.errors}) must not "
                             f"exceed attempts ({self.attempts})")
        if sum(self.error_reasons.values()) != self.errors:
            raise ValueError(f"task {self.task_id}: error_reasons must add up to errors ({self.errors})")
        return self

    @property
    def score(self) -> float:
        """The task's resolved share of its final attempts (its term of Avg@k)."""
        return self.resolved / self.attempts


class HarnessHealth(BaseModel):
    """The claim arm's final attempts on the claim's tasks that ended in a harness error, against the claim's
    `max_harness_error_rate`."""

    attempts: int
    errors: int
    rate: float
    threshold: float
    healthy: bool
    by_exit_reason: dict[str, int]


class ClaimTestResult(BaseModel):
    """The claim test (compare.claim_check) on the per-task scores: its word and its anytime-valid interval at
    level 1 − alpha. `estimate` is None when no claim task has a finished attempt."""

    alpha: float
    tolerance: float
    verdict: ClaimWord
    estimate: float | None
    lower: float
    upper: float
    tasks: int
    tasks_to_decide: int | None = None  # undecided: further instances the plan says would decide


class Claimed(BaseModel):
    """The published figures."""

    avg_at_k: float
    pass_at_k: float | None
    k: int


class VersusArm(BaseModel):
    """Another model arm on the same split: its own gap (seen − fresh) and the claim arm's gap minus it, paired by
    task (a fresh set that is merely harder moves both gaps alike)."""

    arm: str
    seen_tasks: int
    fresh_tasks: int
    gap: Figure | None
    difference: Figure | None
    reason: str | None = None


class ContaminationGap(BaseModel):
    """Avg@k on the claim's tasks (seen: created on or before the claim arm's release day, or undated) against the
    tasks created after it (fresh), and their difference seen − fresh with a 95 % bootstrap over the tasks within
    each part; `reason` says why a figure is missing."""

    released: date
    seen_tasks: int
    fresh_tasks: int
    seen: Figure | None
    fresh: Figure | None
    gap: Figure | None
    reason: str | None = None
    versus: list[VersusArm] = Field(default_factory=list)


class ClaimFigures(BaseModel):
    """What the per-task counts say of the claim (claim_from_tasks): the figures, the test, the harness and the
    verdict with its sentence."""

    tasks: int  # claim tasks with a final attempt
    total_tasks: int  # claim tasks in the run's task list (the test's horizon)
    avg_at_k: Figure | None
    pass_at_k: Figure | None
    pass_at_k_reason: str | None = None
    test: ClaimTestResult
    harness: HarnessHealth
    verdict: Verdict
    sentence: str


class Bootstrap(BaseModel):
    resamples: int
    seed: int
    unit: Literal["task"] = "task"


class ClaimDocument(BaseModel):
    """`leafcost claim --json`: the claim, the run's figures beside it (ClaimFigures' fields), the verdict, and the
    per-task counts a checker recomputes everything from (claim_from_tasks)."""

    run_id: str
    preset: str | None
    title: str
    source: str
    benchmark: str
    arm: str
    model: str
    claimed: Claimed
    instances: int | None
    unconfirmed: list[str]
    strict_grading: bool
    tasks: int
    total_tasks: int
    avg_at_k: Figure | None  # 95 % bootstrap over tasks (bootstrap: its resamples and seed)
    pass_at_k: Figure | None
    pass_at_k_reason: str | None = None
    test: ClaimTestResult
    harness: HarnessHealth
    contamination: ContaminationGap | None
    verdict: Verdict
    sentence: str
    bootstrap: Bootstrap
    per_task: list[ClaimTask]  # the claim tasks with a final attempt, in the run's task order


def claim_document(conn, run_id: str, *, strict: bool | None = None, resamples: int = DEFAULT_RESAMPLES,
                   seed: int = DEFAULT_SEED) -> ClaimDocument | None:
    """The run's claim document; None when its spec has no `claim:`. `strict` counts flagged attempts (a patch
    touching the test harness) as not resolved; None grades as the run was started. An unknown run raises
    compare.summary.SummaryError."""
    run = load_run(conn, run_id)
    spec = run.spec()
    claim = spec.claim
    if claim is None:
        return None
    strict = run.strict_grading if strict is None else strict
    arms = {arm.name: arm for arm in spec.arms}
    released = arms[claim.arm].released
    is_claim_task = claim_task_mask(run.task_ids, task_dates(conn, run_id), released)
    claim_ids = [task for task, mine in zip(run.task_ids, is_claim_task) if mine]
    fresh_ids = [task for task, mine in zip(run.task_ids, is_claim_task) if not mine]
    counts = _final_attempts(conn, run_id, strict)
    finished = counts.get(claim.arm, {})
    per_task = [finished[task] for task in claim_ids if task in finished]
    figures = claim_from_tasks(claim, per_task, total_tasks=len(claim_ids), resamples=resamples, seed=seed)
    contamination = None
    if released is not None:
        others = {name: list(counts.get(name, {}).values()) for name, arm in arms.items()
                  if name != claim.arm and arm.kind != "oracle"}
        fresh = [finished[task] for task in fresh_ids if task in finished]
        contamination = contamination_gap(released, per_task, fresh, others=others, resamples=resamples, seed=seed)
    return ClaimDocument(
        **figures.model_dump(), run_id=run.run_id, preset=claim.preset, title=claim.title, source=claim.source,
        benchmark=claim.benchmark, arm=claim.arm, model=arms[claim.arm].model,
        claimed=Claimed(avg_at_k=claim.avg_at_k, pass_at_k=claim.pass_at_k, k=claim.k), instances=claim.instances,
        unconfirmed=list(claim.unconfirmed), strict_grading=strict,
        bootstrap=Bootstrap(resamples=resamples, seed=seed), contamination=contamination, per_task=per_task)


def harness_error_reason(exit_reason: str | None, infra_error: bool, harness_error: bool) -> str | None:
    """Why a final attempt counts as a harness error (its exit reason, or the flag's name when the exit reason is
    the model's own), or None when it does not."""
    if exit_reason in HARNESS_EXIT_REASONS:
        return exit_reason
    if infra_error:
        return "infrastructure_error"
    if harness_error:
        return "harness_error"
    return None


def claim_from_tasks(claim: ClaimConfig, per_task: list[ClaimTask], *, total_tasks: int,
                     resamples: int = DEFAULT_RESAMPLES, seed: int = DEFAULT_SEED) -> ClaimFigures:
    """The claim's figures, test, harness health and verdict from the claim tasks' counts (`total_tasks`: the claim
    tasks of the run, finished or not, the test's horizon). Pure: the same counts give the same document."""
    if total_tasks < len(per_task):
        raise ValueError(f"total_tasks ({total_tasks}) must be at least the tasks counted ({len(per_task)})")
    n = np.array([task.attempts for task in per_task], dtype=np.int64)
    c = np.array([task.resolved for task in per_task], dtype=np.int64)
    avg, pass_k, pass_reason = _rates(n, c, claim.k, resamples, seed)
    harness = harness_health(per_task, claim.max_harness_error_rate)
    test = _test(claim, c / n if n.size else np.zeros(0), max(total_tasks, 1), withheld=not harness.healthy)
    verdict: Verdict = "harness_unhealthy" if not harness.healthy else test.verdict
    return ClaimFigures(tasks=len(per_task), total_tasks=total_tasks, avg_at_k=avg, pass_at_k=pass_k,
                        pass_at_k_reason=pass_reason, test=test, harness=harness, verdict=verdict,
                        sentence=claim_sentence(verdict, test, harness, claim, total_tasks=total_tasks))


def harness_health(per_task: list[ClaimTask], threshold: float) -> HarnessHealth:
    """The share of final attempts that ended in a harness error; healthy while it is at most `threshold`."""
    attempts = sum(task.attempts for task in per_task)
    errors = sum(task.errors for task in per_task)
    reasons: Counter[str] = Counter()
    for task in per_task:
        reasons.update(task.error_reasons)
    rate = errors / attempts if attempts else 0.0
    return HarnessHealth(attempts=attempts, errors=errors, rate=rate, threshold=threshold, healthy=rate <= threshold,
                         by_exit_reason=dict(sorted(reasons.items(), key=lambda item: (-item[1], item[0]))))


def claim_sentence(verdict: Verdict, test: ClaimTestResult, harness: HarnessHealth, claim: ClaimConfig, *,
                   total_tasks: int) -> str:
    """The verdict in one line: the word first, then the figures it rests on; an undecided one says when the
    instances it needs are more than the run has left."""
    from compare.arm_table import counted, fmt_pct

    if verdict == "harness_unhealthy":
        top = ", ".join(f"{reason} {count}" for reason, count in list(harness.by_exit_reason.items())[:TOP_REASONS])
        return (f"harness unhealthy: {harness.errors} of {counted(harness.attempts, 'attempt')} "
                f"({fmt_pct(harness.rate)}) ended in a harness error ({top}), above the {fmt_pct(harness.threshold)} "
                "threshold: no verdict on the claim; fix the harness and run again")
    if test.estimate is None:
        return "undecided: no claim task has a finished attempt yet"
    figures = (f"Avg@{claim.k} {fmt_pct(test.estimate)} [{fmt_pct(test.lower)}, {fmt_pct(test.upper)}] "
               f"({(1 - test.alpha) * 100:g}% anytime-valid interval) against the claimed {fmt_pct(claim.avg_at_k)}")
    if verdict == "consistent":
        return f"consistent with the claim: {figures}, within {_points(test.tolerance)} of it"
    if verdict == "below":
        return f"below the claim: {figures}"
    if test.tasks_to_decide is None:
        return f"undecided: {figures}; the plan cannot say how many more instances would decide"
    left = total_tasks - test.tasks
    beyond = ""
    if left == 0:  # every instance ran: the benchmark itself is too small to settle it at this tolerance
        beyond = " (every claim task has run: the benchmark cannot settle it at this tolerance and error rate)"
    elif test.tasks_to_decide > left:
        beyond = f" (this run has {counted(left, 'claim task')} left)"
    return f"undecided: {counted(test.tasks_to_decide, 'more instance')} would decide{beyond}; {figures}"


def contamination_gap(released: date, seen: list[ClaimTask], fresh: list[ClaimTask], *,
                      others: dict[str, list[ClaimTask]] | None = None, resamples: int = DEFAULT_RESAMPLES,
                      seed: int = DEFAULT_SEED) -> ContaminationGap:
    """The claim arm's Avg@k on its `seen` tasks and its `fresh` ones, the gap seen − fresh, and for each arm of
    `others` (its tasks of both parts, any order) its gap and the claim arm's gap minus it, paired by task."""
    gap = ContaminationGap(released=released, seen_tasks=len(seen), fresh_tasks=len(fresh),
                           seen=_avg_figure(seen, resamples, seed), fresh=_avg_figure(fresh, resamples, seed + 1),
                           gap=None, reason=_missing_part(seen, fresh))
    if gap.reason is None:
        gap.gap = difference_of_parts(_scores(seen), _scores(fresh), resamples, seed)
    gap.versus = [_versus(name, tasks, seen, fresh, resamples, seed) for name, tasks in (others or {}).items()]
    return gap


def difference_of_parts(seen: np.ndarray, fresh: np.ndarray, resamples: int, seed: int) -> Figure:
    """mean(seen) − mean(fresh) with the 2.5 and 97.5 % percentiles of the difference of each part's resampled
    means, the parts drawn independently (their own tasks; seeds `seed` and `seed + 1`)."""
    difference = _resampled_means(seen, resamples, seed) - _resampled_means(fresh, resamples, seed + 1)
    lower, upper = np.quantile(difference, [LOW, HIGH])
    return Figure(estimate=float(seen.mean() - fresh.mean()), lower=float(lower), upper=float(upper))


# --- helpers ------------------------------------------------------------------------------------------------------

def _final_attempts(conn, run_id: str, strict: bool) -> dict[str, dict[str, ClaimTask]]:
    """Every arm's per-task counts over its final attempts; `strict`: a flagged attempt is not resolved."""
    rows = conn.execute(
        "SELECT arm, task_id, coalesce(resolved, false) AND NOT (? AND coalesce(flagged, false)), exit_reason, "
        "coalesce(infra_error, false), coalesce(harness_error, false) FROM episodes WHERE run_id = ? AND final "
        "ORDER BY arm, task_id, seed", [strict, run_id]).fetchall()
    tallies: dict[str, dict[str, dict]] = {}
    for arm, task, resolved, exit_reason, infra, harness in rows:
        tally = tallies.setdefault(arm, {}).setdefault(task, {"attempts": 0, "resolved": 0, "reasons": Counter()})
        tally["attempts"] += 1
        tally["resolved"] += int(bool(resolved))
        reason = harness_error_reason(exit_reason, bool(infra), bool(harness))
        if reason is not None:
            tally["reasons"][reason] += 1
    return {arm: {task: ClaimTask(task_id=task, attempts=t["attempts"], resolved=t["resolved"],
                                  errors=sum(t["reasons"].values()), error_reasons=dict(t["reasons"]))
                  for task, t in tasks.items()} for arm, tasks in tallies.items()}


def _rates(n: np.ndarray, c: np.ndarray, k: int, resamples: int, seed: int
           ) -> tuple[Figure | None, Figure | None, str | None]:
    """Avg@k and Pass@k with the summary's bootstrap over tasks (compare.stats), and why Pass@k is missing."""
    if n.size == 0:
        return None, None, "no claim task has a finished attempt"
    rates = resolve_rates(n, c, Resampler(n.size, resamples, seed))
    pass_k = rates["pass_at_k"].get(k)
    if pass_k is None:
        return _figure(rates["avg_at_k"]), None, (f"a task has {int(n.min())} final attempts, fewer than k = {k}: "
                                                   "Pass@k needs k attempts of every task")
    return _figure(rates["avg_at_k"]), _figure(pass_k), None


def _figure(estimate: Estimate) -> Figure | None:
    if estimate.value is None or estimate.ci95 is None or None in estimate.ci95:
        return None
    low, high = estimate.ci95
    return Figure(estimate=estimate.value, lower=low, upper=high)


def _test(claim: ClaimConfig, scores: np.ndarray, horizon: int, *, withheld: bool) -> ClaimTestResult:
    """check_claim on the scores; with an unhealthy harness its word is withheld (undecided, nothing more to run:
    the harness must be fixed first)."""
    base = {"alpha": claim.alpha, "tolerance": claim.tolerance, "tasks": int(scores.size)}
    if scores.size == 0:
        return ClaimTestResult(**base, verdict="undecided", estimate=None, lower=0.0, upper=1.0)
    check = check_claim(scores, claim.avg_at_k, tolerance=claim.tolerance, alpha=claim.alpha, total_tasks=horizon)
    return ClaimTestResult(**base, verdict="undecided" if withheld else check.verdict, estimate=check.estimate,
                           lower=check.lower, upper=check.upper,
                           tasks_to_decide=None if withheld or check.verdict != "undecided" else check.tasks_to_decide)


def _points(share: float) -> str:
    points = share * 100
    return f"{points:g} point{'s' if points != 1 else ''}"


def _scores(tasks: list[ClaimTask]) -> np.ndarray:
    return np.array([task.score for task in tasks], dtype=np.float64)


def _avg_figure(tasks: list[ClaimTask], resamples: int, seed: int) -> Figure | None:
    if not tasks:
        return None
    n = np.array([task.attempts for task in tasks], dtype=np.int64)
    c = np.array([task.resolved for task in tasks], dtype=np.int64)
    return _figure(resolve_rates(n, c, Resampler(n.size, resamples, seed))["avg_at_k"])


def _missing_part(seen: list, fresh: list) -> str | None:
    if not fresh:
        return "no task created after the release day has a finished attempt: no gap"
    if not seen:
        return "no claim task has a finished attempt: no gap"
    return None


def _resampled_means(scores: np.ndarray, resamples: int, seed: int) -> np.ndarray:
    """The part's bootstrap means over its tasks (compare.stats' draws), spread by √(n/(n − 1)) about its mean:
    the bootstrap's plug-in spread is short by that factor, which matters for a small fresh set."""
    n = scores.size
    resampler = Resampler(n, resamples, seed)
    means = np.concatenate([chunk.astype(np.float64) @ scores for chunk in resampler.counts]) / n
    mean = float(scores.mean())
    return mean + (means - mean) * math.sqrt(n / (n - 1)) if n > 1 else means


def _versus(arm: str, tasks: list[ClaimTask], seen: list[ClaimTask], fresh: list[ClaimTask], resamples: int,
            seed: int) -> VersusArm:
    """Another arm on the tasks both arms finished in each part: its gap, and the claim arm's gap minus it."""
    theirs = {task.task_id: task for task in tasks}
    seen_pairs = [(mine, theirs[mine.task_id]) for mine in seen if mine.task_id in theirs]
    fresh_pairs = [(mine, theirs[mine.task_id]) for mine in fresh if mine.task_id in theirs]
    entry = VersusArm(arm=arm, seen_tasks=len(seen_pairs), fresh_tasks=len(fresh_pairs), gap=None, difference=None)
    if not seen_pairs or not fresh_pairs:
        entry.reason = f"{arm} has no finished attempt on the {'seen' if not seen_pairs else 'fresh'} tasks"
        return entry
    their_seen = np.array([other.score for _, other in seen_pairs])
    their_fresh = np.array([other.score for _, other in fresh_pairs])
    entry.gap = difference_of_parts(their_seen, their_fresh, resamples, seed)
    entry.difference = difference_of_parts(np.array([mine.score for mine, _ in seen_pairs]) - their_seen,
                                           np.array([mine.score for mine, _ in fresh_pairs]) - their_fresh,
                                           resamples, seed)
    return entry


# --- printing -----------------------------------------------------------------------------------------------------

def print_claim(document: ClaimDocument) -> None:
    """The terminal page: the claim, Avg@k and Pass@k with their intervals beside the claimed values, the verdict
    line, the harness's health and the contamination gap."""
    from compare.display import shown, terminal

    console = terminal()
    for line, style in _page_lines(document):
        console.print(f"[{style}]{shown(line)}[/{style}]" if style else shown(line))


def _page_lines(document: ClaimDocument) -> list[tuple[str, str | None]]:
    from compare.arm_table import counted, fmt_pct

    claimed, k = document.claimed, document.claimed.k
    lines: list[tuple[str, str | None]] = [
        (document.title, "bold"),
        (f"{document.benchmark}: arm {document.arm} ({document.model}) in run {document.run_id}; source: "
         f"{document.source}", "dim"),
        (f"  Avg@{k}   {_figure_text(document.avg_at_k)}   claimed {fmt_pct(claimed.avg_at_k)}", None),
        (f"  Pass@{k}  {_figure_text(document.pass_at_k, document.pass_at_k_reason)}   claimed "
         f"{fmt_pct(claimed.pass_at_k) if claimed.pass_at_k is not None else 'not published'}", None),
        (f"  on {counted(document.tasks, 'claim task')} with a finished attempt, of {document.total_tasks} in the run"
         + (f" (the claim: {document.instances} instances)" if document.instances else "")
         + ("; strict grading" if document.strict_grading else "") + "; 95 % intervals: a bootstrap over tasks",
         "dim"),
        (document.sentence, "bold"),
        (_harness_line(document.harness), None if document.harness.healthy else "bold")]
    if document.contamination is not None:
        lines += _gap_lines(document.contamination)
    lines += [(f"unconfirmed: {setting}", "dim") for setting in document.unconfirmed]
    return lines


def _figure_text(figure: Figure | None, reason: str | None = None) -> str:
    from compare.arm_table import fmt_pct

    if figure is None:
        return "n/a" + (f" ({reason})" if reason else "")
    return f"{fmt_pct(figure.estimate)} [{fmt_pct(figure.lower)}, {fmt_pct(figure.upper)}]"


def _harness_line(harness: HarnessHealth) -> str:
    from compare.arm_table import counted, fmt_pct

    state = "healthy" if harness.healthy else "UNHEALTHY"
    reasons = ", ".join(f"{reason} {count}" for reason, count in harness.by_exit_reason.items())
    return (f"harness: {harness.errors} of {counted(harness.attempts, 'attempt')} ({fmt_pct(harness.rate)}) ended in "
            f"a harness error{f' ({reasons})' if reasons else ''}; threshold {fmt_pct(harness.threshold)}: {state}")


def _gap_lines(gap: ContaminationGap) -> list[tuple[str, str | None]]:
    from compare.arm_table import counted

    lines: list[tuple[str, str | None]] = [
        (f"contamination gap (seen − fresh, released {gap.released.isoformat()}): {_signed(gap.gap, gap.reason)}; "
         f"seen {_figure_text(gap.seen)} on {counted(gap.seen_tasks, 'task')}, fresh {_figure_text(gap.fresh)} on "
         f"{counted(gap.fresh_tasks, 'task')}", None)]
    for other in gap.versus:
        lines.append((f"  versus {other.arm}: its gap {_signed(other.gap, other.reason)}, the difference "
                      f"{_signed(other.difference, other.reason)} (paired by task)", None))
    return lines


def _signed(figure: Figure | None, reason: str | None) -> str:
    if figure is None:
        return f"n/a ({reason})" if reason else "n/a"
    return (f"{figure.estimate * 100:+.1f} points [{figure.lower * 100:+.1f}, {figure.upper * 100:+.1f}]")
