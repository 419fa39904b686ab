"""One look at a deciding run (the spec's `decide:`): each question's verdict from the anytime-valid intervals of
compare.sequential over the finished rounds' tasks, how many more tasks an undecided question needs, whether the
budget lets the next round start, and the verdict's one line for every surface.

A question's verdict is wrong with probability at most `decide.alpha` however many looks the run takes: the
resolve rate's interval is the exact betting confidence sequence with its bets sized for the suite (valid from the
first task), the cost's the finite-horizon boundary (valid to central-limit order after its burn-in,
`decide.min_tasks`, before which it gives no verdict). A verdict, once reached, is kept with the figures it was
reached on: a later look never flips it. A question the rest of the suite cannot decide even at the most
favourable value its interval allows is futile: the run may stop undecided (never a wrong verdict; see
_cheaper_futile and compare.claim_check.claim_within_reach)."""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Literal

import numpy as np
from pydantic import BaseModel, PrivateAttr

from compare.arm_table import fmt_usd
from compare.claim_check import claim_within_reach, judge_claim
from compare.decide_spec import CheaperQuestion, DecideConfig, ReachesQuestion
from compare.sequential import (BOUNDARY_SHAPE, BettingSequence, Interval, boundary_radius, cheaper_verdict,
                                cost_difference_interval, cost_per_resolved_interval, cost_ratio_interval,
                                horizon_tasks, tasks_to_exclude)

UNDECIDED = "undecided"
FUTILITY_LUCK = 2.0  # the claim's futility allows the rest of the suite this many standard errors of luck


@dataclass(frozen=True)
class ArmTasks:
    """One arm's figures per task, in the run's task order over the finished rounds (the same tasks for every
    arm): resolved attempts, attempts with a verdict, and $ of all its attempts; `spent_usd` is the arm's whole
    spend so far (it may exceed cost_usd.sum(): a lease's idle time)."""

    arm: str
    resolved: np.ndarray
    attempts: np.ndarray
    cost_usd: np.ndarray
    spent_usd: float


class Figure(BaseModel):
    """A point estimate and its interval."""

    estimate: float
    lower: float
    upper: float


class QuestionResult(BaseModel):
    """One question at one look. `estimate`/`lower`/`upper` are the ratio θa / θb of the arms' costs per resolved
    attempt (cheaper) or the arm's Avg@k (reaches); verdicts are first/second/equivalent/undecided (cheaper: first =
    arms[0] is cheaper) or reaches/consistent/below/undecided (consistent: within decide.reaches.tolerance)."""

    question: Literal["cheaper", "reaches"]
    arms: list[str]
    verdict: str
    decided_at_tasks: int | None = None
    estimate: float | None = None
    lower: float | None = None
    upper: float | None = None
    difference_usd: Figure | None = None  # cheaper: θa − θb, $ per resolved attempt
    cost_per_resolved: dict[str, Figure | None] = {}  # cheaper: each arm's θ (None: nothing resolved or spent yet)
    tasks_to_decide: int | None = None  # undecided: the plan's number of further tasks (None: it cannot say)
    sentence: str
    _futile: bool = PrivateAttr(default=False)  # set by the look; not stored (the documents' schema is unchanged)

    @property
    def futile(self) -> bool:
        """Undecided, and the rest of the suite cannot decide it even at the most favourable value its interval
        allows (see _cheaper_futile, compare.claim_check.claim_within_reach); False for a result read back from the
        ledger."""
        return self._futile


class ReachesState:
    """The reaches question's betting sequence and the scores it has consumed, carried from one look to the next
    so that a look extends the sequence by the new rounds' tasks instead of recomputing it over every task. A
    cache, not a figure: it never makes two LookResults unequal (pydantic compares private attributes), and the
    ledger does not store it (a run resumed from there rebuilds it, to the same intervals)."""

    def __init__(self, sequence: BettingSequence, scores: np.ndarray) -> None:
        self.sequence, self.scores = sequence, scores

    @classmethod
    def over(cls, scores: np.ndarray, alpha: float, horizon: int, previous: ReachesState | None) -> ReachesState:
        """The state after `scores` (bets sized for `horizon` tasks): a copy of `previous`'s sequence extended by
        the scores after its own when `scores` begin with them (rounds append tasks), else a new sequence."""
        consumed = previous.scores.size if previous is not None else 0
        if (previous is not None and previous.sequence.alpha == alpha and previous.sequence.horizon == horizon
                and consumed <= scores.size and np.array_equal(previous.scores, scores[:consumed])):
            sequence = previous.sequence.copy()
            sequence.extend(scores[consumed:])
        else:
            sequence = BettingSequence(alpha, horizon)
            sequence.extend(scores)
        return cls(sequence, scores)

    def __eq__(self, other: object) -> bool:
        return other is None or isinstance(other, ReachesState)

    __hash__ = None  # type: ignore[assignment]


class LookResult(BaseModel):
    """Every question at one look, after `tasks` of the run's `total_tasks` tasks."""

    look: int
    tasks: int
    total_tasks: int
    questions: list[QuestionResult]
    decided: bool
    _reaches_state: ReachesState | None = PrivateAttr(default=None)  # for the next look; never stored

    @property
    def futile(self) -> bool:
        """Not decided, and some undecided question is futile: the run may stop undecided (the futility stop)."""
        return not self.decided and any(q.futile for q in self.questions)


def look(config: DecideConfig, data: dict[str, ArmTasks], *, look_number: int, total_tasks: int,
         previous: LookResult | None, reaches_tasks: np.ndarray | None = None) -> LookResult:
    """The verdict on each question over `data`'s tasks. A question decided at an earlier look (`previous`) keeps
    that look's result. Every interval's mixture is tuned for the run's whole length (t_star = total_tasks).
    `reaches_tasks`: which of the run's total_tasks tasks (a mask, in the run's order) the reaches question reads,
    its horizon their count (decide.reaches.tasks: seen, compare.claim_check.claim_task_mask); None: every task."""
    tasks = _task_count(data)
    if total_tasks < max(tasks, 1):
        raise ValueError(f"total_tasks ({total_tasks}) must be at least the tasks looked at ({tasks}) and ≥ 1")
    if reaches_tasks is not None and np.shape(reaches_tasks) != (total_tasks,):
        raise ValueError(f"reaches_tasks must mark each of the run's {total_tasks} tasks, not "
                         f"{np.shape(reaches_tasks)}")
    kept = _decided_before(previous)
    questions, reaches_state = [], None
    if config.cheaper is not None:
        key = ("cheaper", tuple(config.cheaper.arms))
        questions.append(kept.get(key) or _cheaper(config, config.cheaper, data, tasks, total_tasks))
    if config.reaches is not None:
        key = ("reaches", (config.reaches.arm,))
        if key in kept:
            questions.append(kept[key])
        else:
            earlier = previous._reaches_state if previous is not None else None
            reached, reaches_state = _reaches(config, config.reaches, data, tasks, total_tasks, earlier,
                                              reaches_tasks)
            questions.append(reached)
    decided = all(q.verdict != UNDECIDED for q in questions)
    result = LookResult(look=look_number, tasks=tasks, total_tasks=total_tasks, questions=questions,
                        decided=decided)
    result._reaches_state = reaches_state
    return result


Action = Literal["continue", "decided", "futile", "exhausted", "budget"]


def after_look(config: DecideConfig, result: LookResult, *, spent: dict[str, float], round_tasks: int
               ) -> tuple[Action, str | None]:
    """What a run does after a look, and the budget's reason when it stops there: decided (every question),
    exhausted (no task left), futile (a question out of reach in this suite), budget (the next round, at each arm's
    mean $ per task so far, would pass a cap), or continue. The runner, `leafcost plan`'s Monte Carlo and the bench
    all stop by this one rule."""
    if result.decided:
        return "decided", None
    left = result.total_tasks - result.tasks
    if left <= 0:
        return "exhausted", None
    if result.futile and config.stop_out_of_reach:
        return "futile", None
    reason = budget_stop(config, spent, next_round_spend(spent, result.tasks, result.total_tasks, round_tasks))
    return ("budget", reason) if reason is not None else ("continue", None)


def next_round_spend(spent: dict[str, float], done: int, total: int, round_tasks: int) -> dict[str, float]:
    """What the next round should cost each arm: its mean $ per task so far × the round's tasks."""
    tasks = min(round_tasks, total - done)
    return {arm: usd / max(done, 1) * tasks for arm, usd in spent.items()}


def budget_stop(config: DecideConfig, spent: dict[str, float], next_round: dict[str, float]) -> str | None:
    """Why the next round must not start: a cap of `decide.budget` already reached, or one the round's predicted
    spend (`next_round`, $ per arm) would pass; the message names the cap's field. None: go on."""
    budget = config.budget
    if budget.total_usd is not None:
        reason = _cap_reached("decide.budget.total_usd", budget.total_usd, sum(spent.values()),
                              sum(next_round.values()))
        if reason:
            return reason
    for arm, cap in budget.per_arm_usd.items():
        reason = _cap_reached(f"decide.budget.per_arm_usd.{arm}", cap, spent.get(arm, 0.0), next_round.get(arm, 0.0))
        if reason:
            return reason
    return None


def verdict_line(result: LookResult, status: str, unspent_episodes: int, unspent_usd: float,
                 stop: str = "budget") -> str:
    """The run's verdict in one line: "decided after N of M tasks: <sentences>; $Y of evaluation not spent (E
    episodes)", or, undecided, "undecided at the budget after N of M tasks: <sentences>; the plan says K more
    tasks" (`stop` "exhausted": "undecided with every task run"; "futile": "undecided, out of reach in this
    suite", the rest of the suite unable to decide it, with the evaluation not spent)."""
    sentences = "; ".join(q.sentence for q in result.questions)
    if status == "decided":
        return (f"decided after {result.tasks} of {result.total_tasks} tasks: {sentences}; {fmt_usd(unspent_usd)} "
                f"of evaluation not spent ({unspent_episodes} episodes)")
    if stop == "futile":
        return (f"undecided, out of reach in this suite, after {result.tasks} of {result.total_tasks} tasks: even "
                f"at the most favourable value of its interval the remaining tasks could not decide it; "
                f"{sentences}; {fmt_usd(unspent_usd)} of evaluation not spent ({unspent_episodes} episodes)")
    where = "with every task run" if stop == "exhausted" else "at the budget"
    return f"undecided {where} after {result.tasks} of {result.total_tasks} tasks: {sentences}; {_plan_says(result)}"


def _task_count(data: dict[str, ArmTasks]) -> int:
    """The tasks every arm's arrays cover, refused unless they all cover the same number."""
    counts = {}
    for name, arm in data.items():
        lengths = {arm.resolved.size, arm.attempts.size, arm.cost_usd.size}
        if len(lengths) != 1:
            raise ValueError(f"arm {name}: resolved, attempts and cost_usd must have one value per task, not "
                             f"{arm.resolved.size}, {arm.attempts.size} and {arm.cost_usd.size}")
        counts[name] = lengths.pop()
    if len(set(counts.values())) > 1:
        raise ValueError(f"every arm must cover the same tasks (paired): {counts}")
    return next(iter(counts.values()), 0)


def _decided_before(previous: LookResult | None) -> dict[tuple[str, tuple[str, ...]], QuestionResult]:
    if previous is None:
        return {}
    return {(q.question, tuple(q.arms)): q for q in previous.questions if q.verdict != UNDECIDED}


def _arm(data: dict[str, ArmTasks], name: str) -> ArmTasks:
    if name not in data:
        raise ValueError(f"no tasks for arm {name!r} (have: {', '.join(data)})")
    return data[name]


def _cheaper(config: DecideConfig, question: CheaperQuestion, data: dict[str, ArmTasks], tasks: int,
             total: int) -> QuestionResult:
    """The cost question: the paired interval for θa / θb decides it (after the burn-in); the $ difference and
    each arm's θ are reported beside it."""
    a, b = (_arm(data, name) for name in question.arms)
    alpha = config.alpha
    start = config.min_tasks
    ratio = cost_ratio_interval(a.cost_usd, a.resolved, b.cost_usd, b.resolved, alpha, total, start)
    difference = cost_difference_interval(a.cost_usd, a.resolved, b.cost_usd, b.resolved, alpha, total)
    per_arm = {arm.arm: _figure(cost_per_resolved_interval(arm.cost_usd, arm.resolved, alpha, total))
               for arm in (a, b)}
    verdict = UNDECIDED if ratio is None or tasks < config.min_tasks else cheaper_verdict(ratio, question.margin)
    result = QuestionResult(
        question="cheaper", arms=list(question.arms), verdict=verdict,
        decided_at_tasks=None if verdict == UNDECIDED else tasks, difference_usd=_figure(difference),
        cost_per_resolved=per_arm, sentence="")
    if ratio is not None:
        result.estimate, result.lower, result.upper = ratio.estimate, ratio.lower, ratio.upper
    if verdict == UNDECIDED:
        result.tasks_to_decide = _cheaper_tasks_needed(ratio, question.margin, config, tasks, total)
        result._futile = ratio is not None and config.min_tasks <= tasks < total and _cheaper_futile(
            ratio, question.margin, tasks, total)
    result.sentence = _cheaper_sentence(result, question, config, a, b, tasks)
    return result


def _reaches(config: DecideConfig, question: ReachesQuestion, data: dict[str, ArmTasks], tasks: int,
             total: int, earlier: ReachesState | None,
             chosen: np.ndarray | None) -> tuple[QuestionResult, ReachesState | None]:
    """The claim question: the betting confidence sequence of the per-task resolved fractions (tasks with no
    attempt that has a verdict are left out; with `chosen`, only the tasks it marks, the horizon their count)
    against the claimed Avg@k, judged by compare.claim_check (so the run stops when the claim's verdict is
    settled), continued from the `earlier` look's state when it covers the first of these scores; with the state
    for the next look."""
    arm = _arm(data, question.arm)
    picked = np.ones(tasks, dtype=bool) if chosen is None else np.asarray(chosen[:tasks], dtype=bool)
    claim_total = total if chosen is None else int(np.count_nonzero(chosen))
    scored = picked & (arm.attempts > 0)
    scores = arm.resolved[scored] / arm.attempts[scored]
    k = int(arm.attempts.max()) if arm.attempts.size else 0
    label = f"{arm.arm}'s Avg@{k}" + (" on the tasks it may have seen" if question.tasks == "seen" else "")
    result = QuestionResult(question="reaches", arms=[arm.arm], verdict=UNDECIDED, sentence="")
    if scores.size == 0:
        why = "no attempt has a verdict yet" if claim_total else "every task is fresh for it (none to judge)"
        result.sentence = f"{label} reaching {question.avg_at_k:g} is undecided: {why}"
        result._futile = claim_total == 0 and tasks < total
        return result, None
    state = ReachesState.over(scores, config.alpha, horizon_tasks(claim_total), earlier)
    interval = state.sequence.interval
    check = judge_claim(interval, scores, question.avg_at_k, tolerance=question.tolerance, total_tasks=claim_total)
    verdict = check.verdict
    if verdict == "consistent" and interval.lower >= question.avg_at_k:
        verdict = "reaches"
    result.verdict, result.estimate, result.lower, result.upper = verdict, check.estimate, check.lower, check.upper
    figures = f"{check.estimate:.2f} [{check.lower:.2f}, {check.upper:.2f}]"
    if verdict == UNDECIDED:
        result.tasks_to_decide = check.tasks_to_decide
        done = int(np.count_nonzero(picked))
        result._futile = config.min_tasks <= done and tasks < total and not claim_within_reach(
            interval, scores, question.avg_at_k, tolerance=question.tolerance, tasks=done, total_tasks=claim_total,
            luck=FUTILITY_LUCK)
        result.sentence = f"{label} reaching {question.avg_at_k:g} is undecided: {figures}"
    else:
        result.decided_at_tasks = tasks
        result.sentence = f"{label} {_reaches_words(verdict, question)}: {figures}"
    return result, state


def _reaches_words(verdict: str, question: ReachesQuestion) -> str:
    if verdict == "reaches":
        return f"reaches {question.avg_at_k:g}"
    if verdict == "consistent":
        return (f"is consistent with {question.avg_at_k:g} (at least {question.avg_at_k - question.tolerance:g}, "
                f"within the tolerance of {question.tolerance:g})")
    return f"is below {question.avg_at_k:g}"


def _figure(interval: Interval | None) -> Figure | None:
    if interval is None:
        return None
    return Figure(estimate=interval.estimate, lower=interval.lower, upper=interval.upper)


def _cheaper_tasks_needed(ratio: Interval | None, margin: float, config: DecideConfig, tasks: int,
                          total: int) -> int | None:
    """The plan's further tasks for the cost question at the current estimate and spread. The interval is built
    on log θa − log θb, so the gaps are there: to 0 for a side (first/second), to ±log(1 + margin) for a tie; the
    question is decided by whichever the interval can reach first, so the larger gap counts. The spread is read
    back from the interval (its radius is the variance's square root times the radius at variance 1)."""
    if ratio is None:
        return None
    log_ratio = math.log(ratio.estimate)
    radius = math.log(ratio.upper / ratio.estimate)
    unit = boundary_radius(tasks, 1.0, config.alpha, total, config.min_tasks)
    gap = abs(log_ratio)
    if margin > 0:
        gap = max(gap, math.log1p(margin) - abs(log_ratio))
    needed = tasks_to_exclude(gap, (radius / unit) ** 2, config.alpha, total, config.min_tasks) if gap > 0 else None
    if needed is None:
        return None
    return max(1, max(needed, config.min_tasks) - tasks)


def _cheaper_futile(ratio: Interval, margin: float, tasks: int, total: int) -> bool:
    """Whether no verdict is within reach by the suite's end, even at the most favourable truth the interval
    allows. On the log scale (estimate x, interval [L, U] after n of N tasks, s = n/N): if the remaining tasks
    average the truth μ, the estimate at N is s·x + (1 − s)·μ and the radius r_N (this radius carried to N with the
    same spread); "first" needs μ = L to bring it below −r_N, "second" μ = U above r_N, "equivalent" the μ in the
    interval nearest 0 to bring it within log(1 + margin) − r_N of 0. The radius is smallest at N, so a verdict out
    of reach there is out of reach at every look before it."""
    low, high, estimate = math.log(ratio.lower), math.log(ratio.upper), math.log(ratio.estimate)
    share = tasks / total
    final_radius = (high - estimate) * (total / tasks) ** (BOUNDARY_SHAPE / 2 - 1)
    first = share * estimate + (1 - share) * low + final_radius < 0
    second = share * estimate + (1 - share) * high - final_radius > 0
    nearest = min(max(0.0, low), high)
    equivalent = margin > 0 and abs(share * estimate + (1 - share) * nearest) + final_radius <= math.log1p(margin)
    return not (first or second or equivalent)


def _cheaper_sentence(result: QuestionResult, question: CheaperQuestion, config: DecideConfig, a: ArmTasks,
                      b: ArmTasks, tasks: int) -> str:
    if result.verdict in ("first", "second"):
        return _cheaper_arm_sentence(result)
    if result.estimate is None:
        return f"which of {a.arm} and {b.arm} costs less per resolved attempt is undecided: {_no_ratio(a, b, tasks)}"
    ratio = (f"{a.arm} costs {result.estimate:.2f}× {b.arm} per resolved attempt "
             f"[{result.lower:.2f}, {result.upper:.2f}]")
    if result.verdict == "equivalent":
        return (f"{a.arm} and {b.arm} cost the same per resolved attempt within {question.margin * 100:g} %: "
                f"{ratio}")
    if tasks < config.min_tasks:
        return (f"which of {a.arm} and {b.arm} costs less per resolved attempt is undecided before "
                f"{config.min_tasks} tasks (decide.min_tasks): {ratio}")
    return f"which of {a.arm} and {b.arm} costs less per resolved attempt is undecided: {ratio}"


def _cheaper_arm_sentence(result: QuestionResult) -> str:
    """"b is cheaper per resolved attempt than a by $X [lo, hi] (P % [lo, hi]): $θb against $θa", the saving
    as a share of the dearer arm's cost (1 − the cheaper arm's θ ÷ the dearer's) with the ratio's interval, and in
    dollars: that share of the dearer arm's θ. The dollar range is the share's interval at the dearer arm's
    estimate, so it agrees with the verdict; the difference's own interval (difference_usd) is in the document."""
    first, second = result.arms
    if result.verdict == "first":  # θa / θb < 1: the saving as a share of θb is 1 − θa / θb
        cheap, dear = first, second
        saving = (1 - result.estimate, 1 - result.upper, 1 - result.lower)
    else:  # θa / θb > 1: the saving as a share of θa is 1 − θb / θa
        cheap, dear = second, first
        saving = (1 - 1 / result.estimate, 1 - 1 / result.lower, 1 - 1 / result.upper)
    share = f"{saving[0] * 100:.0f} % [{saving[1] * 100:.0f}, {saving[2] * 100:.0f}]"
    costs = result.cost_per_resolved
    if costs.get(cheap) is None or costs.get(dear) is None:
        return f"{cheap} is cheaper per resolved attempt than {dear} by {share}"
    dollars = [costs[dear].estimate * part for part in saving]
    return (f"{cheap} is cheaper per resolved attempt than {dear} by {fmt_usd(dollars[0])} [{fmt_usd(dollars[1])}, "
            f"{fmt_usd(dollars[2])}] ({share}): {fmt_usd(costs[cheap].estimate)} against "
            f"{fmt_usd(costs[dear].estimate)}")


def _no_ratio(a: ArmTasks, b: ArmTasks, tasks: int) -> str:
    """Why there is no cost interval yet."""
    if tasks < 2:
        return f"{tasks} task so far (an interval needs 2)"
    for arm in (a, b):
        if arm.resolved.sum() <= 0:
            return f"{arm.arm} has no resolved attempt yet"
    return f"{a.arm if a.cost_usd.sum() <= 0 else b.arm} has no cost yet"


def _cap_reached(field: str, cap: float, spent: float, next_round: float) -> str | None:
    if spent + next_round <= cap and spent < cap:
        return None
    return (f"{field} {fmt_usd(cap)} reached ({fmt_usd(spent)} spent; the next round would cost about "
            f"{fmt_usd(next_round)})")


def _plan_says(result: LookResult) -> str:
    """The further tasks every undecided question needs: the most any one needs."""
    needs = [q.tasks_to_decide for q in result.questions if q.verdict == UNDECIDED]
    if not needs or any(n is None for n in needs):
        return "the plan cannot say how many more tasks (no estimate yet, or one on a decision boundary)"
    more = max(needs)
    return f"the plan says {more} more task{'s' if more != 1 else ''}"
