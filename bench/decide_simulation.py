"""Does a run that stops when its question is decided keep its promises? Simulated agent evaluations, each run
driven round by round through compare.decision exactly as the runner drives it (compare/decision_rounds.py), against
the truths of the population the tasks are drawn from; and `leafcost plan`'s predictions (compare.planning, from a
small pilot of the same population) against the simulated runs' means. Issue 23's proof.

Run from the repository root:

    .venv/bin/python bench/decide_simulation.py [--runs 400] [--designs NAME ...] [--tasks N] [--pilots 10]
                                                [--plan-simulations 200] [--jobs 2] [--quick] [--json]

The population (independent of the planner, so the plan check is not circular). A task belongs to a difficulty
class shared by every arm (easy, medium, hard, very hard: 35/30/25/10 %), the paired latent: the tasks hard for
one arm are hard for the other. Given its class, each arm's resolve probability p of the task is drawn from that
arm's Beta for the class (so an arm's p is a Beta mixture), and each of the 3 seeds resolves with probability p.
A task also has a size (lognormal, σ 0.5, shared by the arms and seeds: a big repository is big for everyone).
An episode's length is lognormal (σ 0.7) × the task's size, 0.6× when it resolves (a failing agent runs to its
step limit). Its prompt tokens are the class's median × the arm's token scale × the length, 80 % of them served
from the cache; its completion tokens the same with another lognormal factor (σ 0.4). A hosted arm pays per
token at list-like prices ($1.25 / $0.125 cached / $10 per M). An episode's wall time is its uncached prefill
and its decode at the arm's speeds (hosted 10,000 and 80 tokens/s; self-hosted under batching 2,000 and 40) plus
its tool time. A self-hosted arm pays a GPU lease held for the whole run, as leafcost holds it: the run's 16
workers share every arm's episodes, so the lease lasts Σ (every arm's episode wall times) ÷ 16 (perfect packing:
no round's tail is idle), × the lease's $/hour. The lease so far is attributed to the self-hosted arm's tasks so
far by their weighted tokens (uncached + 0.1 × cached + 5 × completion), as the ledger attributes a lease, so a
task's dollars change from look to look while their sum is the lease.

Truths, in closed form from the model above (`arm_truths`): Avg@3 = Σ_class w·E[p | class]; an arm's cost per
resolved attempt = E[$ of a task's attempts] / E[resolved attempts of a task] (lognormal means, and E[0.6-or-1
factor | class] = 1 − 0.4·E[p | class], independent of the lengths given the class); the ratio and difference of
two arms' figures. A design that sets a true ratio scales the lease's $/hour to it exactly (the cost is linear
in it). The pooled estimate over every simulated task is printed beside each truth as a check.

A run: the suite's tasks (fresh draws from the population) in a random order, rounds of
DecideConfig.round_size(16 workers, arms, 3 seeds) tasks, compare.decision.look after each round with the previous
look, stopping when decided, when the look is futile (compare.decision's futility stop), when
compare.decision.budget_stop says the next round would pass a cap (next round's
spend predicted at the mean spend per task so far, as the runner predicts it), or when the tasks run out.

Counting. A verdict is right when it is true of the population: "first" iff the true ratio θa/θb < 1, "second" iff
> 1, "equivalent" iff 1/(1 + margin) < ratio < 1 + margin (strictly: at the margin's edge, declaring equivalence
is the error an equivalence test must control); "reaches" iff the true Avg@3 ≥ the claim, "below" iff < (so at
exact equality "below" is the wrong one). Coverage: the stopped run's interval contains the truth ("at stop"), and
every look's interval of the run did ("every look", what a confidence sequence promises); runs with no interval
are left out of the share and counted beside it.

The fixed design. For each n on the round grid, the fixed-n test at the same alpha on the first n tasks of the same
simulated runs: the Wald interval of the log ratio by the delta method (the same influence values) for the cost
question, the normal interval of the mean task score for the claim, read with the same verdict rules. Its
decision rate at n is the share of runs it decides rightly. "Matched n" for a design is the smallest n whose
fixed-n decision rate reaches the sequential runs' right-decision rate in that design, its wrong rate within alpha:
a fixed design that knew the effect in advance. A buyer does not know it, so "buyer's n" sizes one fixed design for
every design of the same question at once: the largest matched n among them (capped at a design's suite). The
savings are 1 − mean sequential episodes ÷ the fixed design's episodes (a design with a budget cap is left out).

Two counterfactuals on the same runs, for the choice of procedure (neither is leafcost's): a plan-based futility
stop (end undecided at the first look whose plan says more tasks than are left: stricter than compare.decision's
own futility stop), and a group-sequential design (O'Brien–Fleming-shaped repeated Wald intervals at the same
looks, `group_sequential`).

The plan check: for each design, `--pilots` pilots of 25 tasks drawn from the same population go through
compare.planning (its fixed-n width predictions and compare.plan_simulation's Monte Carlo of the sequential run);
the predicted mean dollars and widths are compared with the simulated runs' (the % error of the median pilot's
prediction, and the share of pilots within 15 %); and, since a sequential run's length is a forecast rather than a
figure, the share of the simulated runs whose $ and episodes fall inside each pilot's plan p10–p90 (a calibrated
forecast holds about 80 %). Results are reported, never asserted; the output records the date, the machine's load
average before and after, and the time taken."""

from __future__ import annotations

import argparse
import json
import math
import os
import sys
import time
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass, field, replace
from datetime import datetime, timezone
from pathlib import Path
from statistics import NormalDist

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from compare.plan_simulation import DEFAULT_SIMULATIONS  # noqa: E402  (the repository root is on the path now)

SEEDS = 3
WORKERS = 16
ALPHA = 0.05
SEED = 20261205
CLASS_WEIGHTS = np.array([0.35, 0.30, 0.25, 0.10])  # easy, medium, hard, very hard: the tasks' shared latent
PROMPT_MEDIAN = np.array([300e3, 600e3, 1.0e6, 1.4e6])  # tokens per episode of a token scale 1 model, by class
COMPLETION_MEDIAN = np.array([8e3, 15e3, 25e3, 30e3])
TOOL_SECONDS_MEDIAN = np.array([40.0, 80.0, 150.0, 200.0])  # an episode's time in its tools, by class
TASK_SIGMA, EPISODE_SIGMA, COMPLETION_SIGMA = 0.5, 0.7, 0.4  # lognormal σ: task size, episode length, completion
RESOLVED_LENGTH = 0.6  # a resolved episode's length relative to a failed one's
CACHED_SHARE = 0.8  # of prompt tokens
CACHED_WEIGHT, COMPLETION_WEIGHT = 0.1, 5.0  # a lease's attribution weights per cached / completion token
PILOT_TASKS = 25
PLAN_TOLERANCE = 0.15
PLAN_RANGE = 0.8  # the plan's p10–p90: the share of runs a calibrated forecast holds
SHARES = ("decided_share",)  # plan figures compared in points, not relative %


@dataclass(frozen=True)
class PerToken:
    """A hosted arm's price sheet, $ per million tokens."""

    input: float = 1.25
    cached: float = 0.125
    output: float = 10.0


@dataclass(frozen=True)
class Lease:
    """A self-hosted arm's GPU lease: $/hour, held while the run's workers run every arm's episodes."""

    usd_per_hour: float = 2.49


@dataclass(frozen=True)
class ArmModel:
    """How an arm resolves and spends: a Beta (a, b) of p per difficulty class, a token scale, and how it pays."""

    name: str
    betas: tuple[tuple[float, float], ...]
    token_scale: float = 1.0
    per_token: PerToken | None = None
    lease: Lease | None = None
    prefill_per_sec: float = 10_000.0  # an episode's uncached prompt tokens per second
    decode_per_sec: float = 80.0

    def class_means(self) -> np.ndarray:
        """E[p | class]."""
        return np.array([a / (a + b) for a, b in self.betas])


FRONTIER = ArmModel("hosted", ((19, 1), (4, 1.5), (1.2, 1.5), (0.3, 3)), 1.0, per_token=PerToken())
FROGNANO = ArmModel("frognano", ((12, 1.2), (2.5, 1.8), (0.8, 1.6), (0.2, 3)), 1.3, lease=Lease(),
                    prefill_per_sec=2000.0, decode_per_sec=40.0)  # per episode under batching
SMALL = ArmModel("small", ((2, 3), (0.6, 3), (0.3, 4), (0.1, 5)), 1.6, lease=Lease(usd_per_hour=1.2),
                 prefill_per_sec=2000.0, decode_per_sec=40.0)
ORACLE = ArmModel("oracle", ((200, 1), (100, 1), (40, 1), (15, 1)), 0.0)  # resolves nearly always; costs nothing


@dataclass(frozen=True)
class Design:
    """One simulated evaluation: its arms (the first two are a cost question's a and b), its questions, its suite."""

    name: str
    arms: tuple[ArmModel, ...]
    tasks: int
    margin: float | None = None  # a cheaper question between arms[0] and arms[1] (None: no cost question)
    ratio: float | None = None  # the true θa/θb, set by scaling arms[0]'s lease (None: as priced)
    claim: tuple[str, float | None] | None = None  # a reaches question: (arm, claim; None = the arm's true Avg@3)
    budget_share: float | None = None  # decide.budget.total_usd as a share of the whole suite's expected $
    note: str = ""

    def kind(self) -> str:
        """The question family: cheaper, reaches or both."""
        return "both" if self.margin is not None and self.claim is not None else (
            "cheaper" if self.margin is not None else "reaches")


DESIGNS = (
    Design("cheap-lease", (FROGNANO, FRONTIER), 500, margin=0.1, note="FrogNano at $2.49/GPU-hour vs frontier"),
    Design("half", (FROGNANO, FRONTIER), 500, margin=0.1, ratio=0.5),
    Design("near", (FROGNANO, FRONTIER), 500, margin=0.1, ratio=0.8),
    Design("at-margin", (FROGNANO, FRONTIER), 500, margin=0.1, ratio=1.1, note="ratio = 1 + margin: 'second' right"),
    Design("at-margin-low", (FROGNANO, FRONTIER), 500, margin=0.1, ratio=1 / 1.1,
           note="ratio = 1/(1 + margin): 'first' right"),
    Design("equal", (FROGNANO, FRONTIER), 500, margin=0.1, ratio=1.0, note="only 'equivalent' right"),
    Design("equal-no-margin", (FROGNANO, FRONTIER), 400, margin=0.0, ratio=1.0, note="every verdict wrong"),
    Design("small-model", (SMALL, FRONTIER), 300, margin=0.0, ratio=1.5, note="a 0.2 model self-hosted"),
    Design("claim-at-truth", (FROGNANO,), 500, claim=("frognano", None), note="Avg@3 = claim: 'below' wrong"),
    Design("claim-above", (FROGNANO,), 500, claim=("frognano", 0.52)),
    Design("claim-below", (FROGNANO,), 500, claim=("frognano", 0.65)),
    Design("oracle", (ORACLE,), 300, claim=("oracle", 0.95)),
    Design("small-claim", (SMALL,), 300, claim=("small", 0.3)),
    Design("both", (FROGNANO, FRONTIER), 500, margin=0.1, ratio=0.7, claim=("frognano", 0.52),
           note="a cost question and a claim in one run"),
    Design("budget", (FROGNANO, FRONTIER), 500, margin=0.1, ratio=0.8, budget_share=0.4,
           note="a total cap at 40 % of the suite's expected $ (left out of the savings)"),
)
QUICK_DESIGNS = ("half", "claim-above", "both", "budget")
QUICK_TASKS, QUICK_RUNS = 80, 12


# ------------------------------------------------------------------------------------------------ the truths


def _lognormal_mean(sigma: float) -> float:
    return math.exp(sigma * sigma / 2)


def _episode_means(arm: ArmModel) -> dict[str, np.ndarray]:
    """Per class, an episode's expected prompt and completion tokens and tool seconds."""
    shared = _lognormal_mean(TASK_SIGMA) * _lognormal_mean(EPISODE_SIGMA) * (
        1 - (1 - RESOLVED_LENGTH) * arm.class_means())
    return {"prompt": PROMPT_MEDIAN * arm.token_scale * shared,
            "completion": COMPLETION_MEDIAN * arm.token_scale * shared * _lognormal_mean(COMPLETION_SIGMA),
            "tool": TOOL_SECONDS_MEDIAN * shared}


def _hosted_usd(prompt, completion, price: PerToken):
    return (prompt * ((1 - CACHED_SHARE) * price.input + CACHED_SHARE * price.cached)
            + completion * price.output) / 1e6


def _episode_seconds(prompt, completion, tool, arm: ArmModel):
    """An episode's wall time: its uncached prefill, its decode and its tools."""
    return prompt * (1 - CACHED_SHARE) / arm.prefill_per_sec + completion / arm.decode_per_sec + tool


def _lease_usd(run_seconds, lease: Lease):
    """The lease's $ while the run's workers spend `run_seconds` of episode wall time (all arms)."""
    return run_seconds / WORKERS / 3600 * lease.usd_per_hour


def arm_truths(arms: tuple[ArmModel, ...]) -> dict[str, dict[str, float | None]]:
    """Each arm's population Avg@3, expected $ and resolved attempts per task, and cost per resolved attempt, in a
    run of these arms (a lease is held while every arm's episodes run)."""
    means = {arm.name: _episode_means(arm) for arm in arms}
    run_seconds = sum(SEEDS * float(CLASS_WEIGHTS @ _episode_seconds(m["prompt"], m["completion"], m["tool"], arm))
                      for arm, m in zip(arms, means.values()))
    out = {}
    for arm in arms:
        m = means[arm.name]
        usd = 0.0
        if arm.per_token is not None:
            usd = SEEDS * float(CLASS_WEIGHTS @ _hosted_usd(m["prompt"], m["completion"], arm.per_token))
        elif arm.lease is not None:
            usd = _lease_usd(run_seconds, arm.lease)
        avg = float(CLASS_WEIGHTS @ arm.class_means())
        out[arm.name] = {"avg_at_k": avg, "usd_per_task": usd, "resolved_per_task": avg * SEEDS,
                         "cost_per_resolved": usd / (avg * SEEDS) if usd > 0 else None}
    return out


def priced(design: Design) -> Design:
    """The design with arms[0]'s lease $/hour scaled so that the true ratio θa/θb is design.ratio exactly."""
    if design.ratio is None:
        return design
    first = design.arms[0]
    if first.lease is None:
        raise ValueError(f"design {design.name}: a set ratio scales the first arm's lease, and it has none")
    truths = arm_truths(design.arms)
    now = truths[first.name]["cost_per_resolved"] / truths[design.arms[1].name]["cost_per_resolved"]
    lease = replace(first.lease, usd_per_hour=first.lease.usd_per_hour * design.ratio / now)
    return replace(design, arms=(replace(first, lease=lease), *design.arms[1:]))


def design_truth(design: Design) -> dict:
    """Every truth a design's verdicts and intervals are scored against."""
    arms = arm_truths(design.arms)
    out: dict = {"arms": arms}
    if design.margin is not None:
        a, b = (arms[arm.name]["cost_per_resolved"] for arm in design.arms[:2])
        out["ratio"], out["difference_usd"] = a / b, a - b
    if design.claim is not None:
        name, claimed = design.claim
        out["avg_at_k"] = arms[name]["avg_at_k"]
        out["claim"] = arms[name]["avg_at_k"] if claimed is None else claimed
    return out


def budget_usd(design: Design) -> float | None:
    """The design's total cap in $: its share of the whole suite's expected spend, every arm together."""
    if design.budget_share is None:
        return None
    return design.budget_share * design.tasks * sum(t["usd_per_task"] for t in arm_truths(design.arms).values())


def right_cheaper(verdict: str, ratio: float, margin: float) -> bool | None:
    """Whether a cost verdict is true of the population (None: undecided)."""
    if verdict == "undecided":
        return None
    if verdict == "first":
        return ratio < 1
    if verdict == "second":
        return ratio > 1
    return 1 / (1 + margin) < ratio < 1 + margin


def right_reaches(verdict: str, avg: float, claim: float) -> bool | None:
    if verdict == "undecided":
        return None
    return avg >= claim if verdict == "reaches" else avg < claim


# ---------------------------------------------------------------------------------------------- the draws


@dataclass
class ArmDraws:
    """One arm's tasks for a batch of runs (runs × tasks): resolved attempts, episode wall seconds, and either $ per
    task (per token) or the lease's $ over the task's episodes of every arm with the task's attribution weight (a
    lease); its mean tokens per episode."""

    resolved: np.ndarray
    seconds: np.ndarray
    usd: np.ndarray | None = None
    lease_usd: np.ndarray | None = None
    weight: np.ndarray | None = None
    tokens: dict[str, float] = field(default_factory=dict)

    def cost(self, run: int, n: int) -> tuple[np.ndarray, float]:
        """The first n tasks' $ as the ledger would show them at a look, and the arm's spend so far."""
        if self.usd is not None:
            cost = self.usd[run, :n]
            return cost, float(cost.sum())
        if self.lease_usd is None:
            return np.zeros(n), 0.0
        lease = float(self.lease_usd[run, :n].sum())
        weight = self.weight[run, :n]
        return lease * weight / weight.sum(), lease


def draw(rng: np.random.Generator, design: Design, runs: int, tasks: int) -> dict[str, ArmDraws]:
    """A batch of runs' suites: fresh tasks from the population, in their run order."""
    klass = rng.choice(len(CLASS_WEIGHTS), size=(runs, tasks), p=CLASS_WEIGHTS)
    size = rng.lognormal(0.0, TASK_SIGMA, (runs, tasks))
    draws = {arm.name: _draw_arm(rng, arm, klass, size) for arm in design.arms}
    run_seconds = sum(d.seconds for d in draws.values())  # per task, every arm's episodes
    for arm in design.arms:
        if arm.lease is not None:
            draws[arm.name].lease_usd = _lease_usd(run_seconds, arm.lease)
    return draws


def _draw_arm(rng: np.random.Generator, arm: ArmModel, klass: np.ndarray, size: np.ndarray) -> ArmDraws:
    a = np.array([ab[0] for ab in arm.betas])[klass]
    b = np.array([ab[1] for ab in arm.betas])[klass]
    p = rng.beta(a, b)
    shape = (*klass.shape, SEEDS)
    resolved = rng.random(shape) < p[..., None]
    length = rng.lognormal(0.0, EPISODE_SIGMA, shape) * size[..., None] * np.where(resolved, RESOLVED_LENGTH, 1.0)
    prompt = PROMPT_MEDIAN[klass][..., None] * arm.token_scale * length
    completion = (COMPLETION_MEDIAN[klass][..., None] * arm.token_scale * length
                  * rng.lognormal(0.0, COMPLETION_SIGMA, shape))
    tool = TOOL_SECONDS_MEDIAN[klass][..., None] * length
    out = ArmDraws(resolved=resolved.sum(axis=-1), seconds=_episode_seconds(prompt, completion, tool, arm).sum(axis=-1))
    if arm.per_token is not None:
        out.usd = _hosted_usd(prompt, completion, arm.per_token).sum(axis=-1)
    elif arm.lease is not None:
        cached = prompt * CACHED_SHARE
        out.weight = (prompt - cached + CACHED_WEIGHT * cached + COMPLETION_WEIGHT * completion).sum(axis=-1)
    out.tokens = {"prompt": float(prompt.mean()), "cached": float(prompt.mean() * CACHED_SHARE),
                  "completion": float(completion.mean())}
    return out


# ------------------------------------------------------------------------------------------ the sequential runs


def decide_config(design: Design, truth: dict):
    """The design's decide: block, as a spec would give it."""
    from compare.decide_spec import BudgetCaps, CheaperQuestion, DecideConfig, ReachesQuestion

    cheaper = (CheaperQuestion(arms=[arm.name for arm in design.arms[:2]], margin=design.margin)
               if design.margin is not None else None)
    reaches = ReachesQuestion(arm=design.claim[0], avg_at_k=truth["claim"]) if design.claim is not None else None
    budget = BudgetCaps(total_usd=budget_usd(design)) if design.budget_share is not None else BudgetCaps()
    return DecideConfig(cheaper=cheaper, reaches=reaches, alpha=ALPHA, budget=budget)


@dataclass
class RunOutcome:
    """What one simulated run ended with."""

    action: str
    tasks: int
    usd: float
    verdicts: dict[str, str] = field(default_factory=dict)  # by question
    decided_at: dict[str, int | None] = field(default_factory=dict)
    covered: dict[str, bool | None] = field(default_factory=dict)  # the stopped interval; None: no interval
    every_look: dict[str, bool] = field(default_factory=dict)  # every look's interval covered (no interval: counts)
    widths: dict[str, float | None] = field(default_factory=dict)  # the stopped interval's width
    futile_at: int | None = None  # the first look at which a futility stop would have ended the run (not used)


def sequential_run(design: Design, config, truth: dict, draws: dict[str, ArmDraws], run: int, size: int
                   ) -> RunOutcome:
    """One run, round by round, as compare/decision_rounds.py drives it."""
    from compare.decision import ArmTasks, after_look, look

    total, done, number, previous = design.tasks, 0, 0, None
    every: dict[str, bool] = {}
    futile_at = None
    while done < total:
        done = min(done + size, total)
        data = {}
        for name, arm in draws.items():
            cost, spent = arm.cost(run, done)
            data[name] = ArmTasks(arm=name, resolved=arm.resolved[run, :done], attempts=np.full(done, SEEDS),
                                  cost_usd=cost, spent_usd=spent)
        number += 1
        previous = look(config, data, look_number=number, total_tasks=total, previous=previous)
        for key, hit in _coverage(previous, truth).items():
            if hit is not None and (key == "avg_at_k" or done >= config.min_tasks):  # cost CSs: after burn-in
                every[key] = every.get(key, True) and hit
        if futile_at is None and _futile(previous, config, done, total):
            futile_at = done
        spent = {name: tasks.spent_usd for name, tasks in data.items()}
        action, _ = after_look(config, previous, spent=spent, round_tasks=size)  # the runner's own rule
        if action == "continue":
            continue
        outcome = _outcome(action, done, sum(spent.values()), previous, truth, every)
        outcome.futile_at = futile_at
        return outcome
    raise AssertionError("a run ends at its last round")


def _futile(result, config, done: int, total: int) -> bool:
    """The counterfactual plan-based futility stop (stricter than compare.decision's): after the burn-in, an
    undecided question whose plan says more tasks than the suite has left, or cannot say how many (its estimate
    sits on a boundary)."""
    if result.decided or done >= total or done < config.min_tasks:
        return False
    return any(q.verdict == "undecided" and (q.tasks_to_decide is None or done + q.tasks_to_decide > total)
               for q in result.questions)


def _intervals(result) -> dict[str, tuple[float | None, float | None]]:
    """The look's intervals by figure: ratio, difference, each arm's cost per resolved, Avg@k."""
    out: dict[str, tuple[float | None, float | None]] = {}
    for question in result.questions:
        if question.question == "cheaper":
            out["ratio"] = (question.lower, question.upper)
            difference = question.difference_usd
            out["difference_usd"] = (None, None) if difference is None else (difference.lower, difference.upper)
            for arm, figure in question.cost_per_resolved.items():
                out[f"cost_per_resolved:{arm}"] = (None, None) if figure is None else (figure.lower, figure.upper)
        else:
            out["avg_at_k"] = (question.lower, question.upper)
    return out


def _truth_of(key: str, truth: dict) -> float | None:
    if key.startswith("cost_per_resolved:"):
        return truth["arms"][key.split(":", 1)[1]]["cost_per_resolved"]
    return truth.get(key)


def _coverage(result, truth: dict) -> dict[str, bool | None]:
    out = {}
    for key, (lower, upper) in _intervals(result).items():
        value = _truth_of(key, truth)
        out[key] = None if lower is None or upper is None or value is None else lower <= value <= upper
    return out


def _outcome(action: str, tasks: int, usd: float, result, truth: dict, every: dict[str, bool]) -> RunOutcome:
    outcome = RunOutcome(action, tasks, usd, every_look=every)
    for question in result.questions:
        outcome.verdicts[question.question] = question.verdict
        outcome.decided_at[question.question] = question.decided_at_tasks
    outcome.covered = _coverage(result, truth)
    outcome.widths = {key: (upper - lower if lower is not None and upper is not None else None)
                      for key, (lower, upper) in _intervals(result).items()}
    return outcome


def is_right(design: Design, truth: dict, outcome: RunOutcome) -> dict[str, bool | None]:
    """Each question's verdict scored against the truth."""
    out = {}
    if "cheaper" in outcome.verdicts:
        out["cheaper"] = right_cheaper(outcome.verdicts["cheaper"], truth["ratio"], design.margin)
    if "reaches" in outcome.verdicts:
        out["reaches"] = right_reaches(outcome.verdicts["reaches"], truth["avg_at_k"], truth["claim"])
    return out


# ------------------------------------------------------------------------------------------- the fixed design


def fixed_decisions(design: Design, truth: dict, draws: dict[str, ArmDraws], grid: np.ndarray) -> dict:
    """For each n of the grid, the share of runs the fixed-n test at n decides rightly, wrongly, and both
    questions rightly (runs × grid, vectorised over runs)."""
    z = NormalDist().inv_cdf(1 - ALPHA / 2)
    runs = next(iter(draws.values())).resolved.shape[0]
    right = {}
    wrong = {}
    for n in grid:
        verdicts = {}
        if design.margin is not None:
            verdicts["cheaper"] = _fixed_cheaper(design, truth, draws, int(n), z)
        if design.claim is not None:
            verdicts["reaches"] = _fixed_reaches(truth, draws[design.claim[0]], int(n), z)
        for question, (ok, bad) in verdicts.items():
            right.setdefault(question, []).append(ok)
            wrong.setdefault(question, []).append(bad)
        right.setdefault("all", []).append(np.logical_and.reduce([ok for ok, _ in verdicts.values()]))
    return {"n": grid.tolist(), "runs": runs,
            "right": {q: np.mean(np.array(v), axis=1).tolist() for q, v in right.items()},
            "wrong": {q: np.mean(np.array(v), axis=1).tolist() for q, v in wrong.items()}}


def _fixed_cheaper(design: Design, truth: dict, draws: dict[str, ArmDraws], n: int, z: float):
    """The fixed-n test's right and wrong decisions: the Wald interval of log(θa/θb) on the first n tasks."""
    decided, right = _cheaper_scored(design, truth, *_cheaper_interval(design, draws, n, z))
    return right, decided & ~right


def _cheaper_interval(design: Design, draws: dict[str, ArmDraws], n: int, z: float):
    """Each run's Wald interval for θa/θb on its first n tasks: log ratio ± z·sd(ψ)/√n, ψ the delta method's
    influence values (the same as the sequential interval's)."""
    psi, log_ratio = 0.0, 0.0
    for sign, arm in ((1, design.arms[0]), (-1, design.arms[1])):
        d = draws[arm.name]
        cost = d.usd[:, :n] if d.usd is not None else d.weight[:, :n]  # a lease's attribution: ∝ weight
        spent = cost.sum(axis=1) if d.usd is not None else d.lease_usd[:, :n].sum(axis=1)
        resolved = d.resolved[:, :n].astype(float)
        with np.errstate(divide="ignore", invalid="ignore"):
            psi = psi + sign * (cost / cost.mean(axis=1, keepdims=True)
                                - resolved / resolved.mean(axis=1, keepdims=True))
            log_ratio = log_ratio + sign * np.log(spent / resolved.sum(axis=1))
    radius = z * np.sqrt((psi * psi).sum(axis=1) / (n - 1) / n)
    return np.exp(log_ratio - radius), np.exp(log_ratio + radius)


def _cheaper_scored(design: Design, truth: dict, lower: np.ndarray, upper: np.ndarray):
    """Decided, and decided rightly, by cheaper_verdict's rules."""
    margin, ratio = design.margin, truth["ratio"]
    first, second = upper < 1, lower > 1
    equivalent = ~first & ~second & (margin > 0) & (1 / (1 + margin) <= lower) & (upper <= 1 + margin)
    valid = np.isfinite(lower) & np.isfinite(upper)
    right = valid & ((first & (ratio < 1)) | (second & (ratio > 1))
                     | (equivalent & (1 / (1 + margin) < ratio < 1 + margin)))
    return valid & (first | second | equivalent), right


def _fixed_reaches(truth: dict, arm: ArmDraws, n: int, z: float):
    decided, right = _reaches_scored(truth, *_reaches_interval(arm, n, z))
    return right, decided & ~right


def _reaches_interval(arm: ArmDraws, n: int, z: float):
    x = arm.resolved[:, :n] / SEEDS
    mean = x.mean(axis=1)
    radius = z * x.std(axis=1, ddof=1) / math.sqrt(n)
    return mean - radius, mean + radius


def _reaches_scored(truth: dict, lower: np.ndarray, upper: np.ndarray):
    claim, avg = truth["claim"], truth["avg_at_k"]
    reaches, below = lower >= claim, upper < claim
    return reaches | below, (reaches & (avg >= claim)) | (below & (avg < claim))


# ------------------------------------------------------------------------------- a group-sequential alternative


def group_sequential(design: Design, truth: dict, draws: dict[str, ArmDraws], grid: np.ndarray, min_tasks: int,
                     fixed: dict) -> dict:
    """The counterfactual a group-sequential design gives on the same runs (not leafcost's procedure): the Wald
    intervals above at every look from min_tasks on, widened to c·√(N/n) standard errors — O'Brien–Fleming-shaped
    repeated confidence intervals, c set so that a Brownian motion observed at these looks leaves ±c with
    probability alpha (Jennison & Turnbull's repeated confidence intervals, computed here by Monte Carlo). A
    question is decided at its first deciding look and kept; the run stops when every question is decided."""
    looks = grid[grid >= min_tasks]
    c = _obf_constant(looks / design.tasks)
    runs = next(iter(draws.values())).resolved.shape[0]
    questions: dict[str, tuple] = {}
    if design.margin is not None:
        questions["cheaper"] = (lambda n, z: _cheaper_interval(design, draws, n, z),
                                lambda lo, up: _cheaper_scored(design, truth, lo, up), "ratio")
    if design.claim is not None:
        arm = draws[design.claim[0]]
        questions["reaches"] = (lambda n, z: _reaches_interval(arm, n, z),
                                lambda lo, up: _reaches_scored(truth, lo, up), "avg_at_k")
    at, right, bounds = {}, {}, {}
    for question, (interval, scored, _) in questions.items():
        first = np.full(runs, -1)
        good = np.zeros(runs, dtype=bool)
        lows, ups = [], []
        for k, n in enumerate(looks):
            lower, upper = interval(int(n), c * math.sqrt(design.tasks / n))
            decided, ok = scored(lower, upper)
            new = (first < 0) & decided
            first[new], good[new] = k, ok[new]
            lows.append(lower)
            ups.append(upper)
        at[question], right[question], bounds[question] = first, good, (np.array(lows), np.array(ups))
    last = len(looks) - 1
    stop = np.max([np.where(first < 0, last, first) for first in at.values()], axis=0)
    tasks = looks[stop].astype(float)
    out = {"c": c, "looks": len(looks), "decisions": {}, "coverage": {}}
    rows = np.arange(runs)
    for question, (_, _, figure) in questions.items():
        decided = at[question] >= 0
        out["decisions"][question] = {"right": float(np.mean(right[question])),
                                      "wrong": float(np.mean(decided & ~right[question])),
                                      "undecided": float(np.mean(~decided))}
        held = np.where(decided, at[question], stop)  # a decided question keeps its interval
        lows, ups = bounds[question]
        value = truth[figure]
        covered = (lows[held, rows] <= value) & (value <= ups[held, rows])
        out["coverage"][figure] = float(np.mean(covered))
    all_right = np.logical_and.reduce([right[q] for q in questions])
    episodes = tasks * SEEDS * len(design.arms)
    out.update(all_right=float(np.mean(all_right)), episodes={"mean": float(episodes.mean()),
                                                               **_quantiles(episodes)},
               matched_n=wrong_capped_n(fixed, float(np.mean(all_right))))
    return out


def _obf_constant(times: np.ndarray, paths: int = 200_000) -> float:
    """c with P(max over the looks of |W(t)| ≥ c) = alpha for a standard Brownian motion W seen at `times`."""
    rng = np.random.default_rng(SEED)
    steps = np.diff(np.concatenate(([0.0], times)))
    walk = np.zeros(paths)
    peak = np.zeros(paths)
    for step in steps:
        walk += rng.standard_normal(paths) * math.sqrt(step)
        np.maximum(peak, np.abs(walk), out=peak)
    return float(np.quantile(peak, 1 - ALPHA))


def matched_n(fixed: dict, target: float, key: str = "all") -> int | None:
    """The smallest n whose fixed-n right-decision rate reaches `target` (None: not even the whole suite)."""
    for n, rate in zip(fixed["n"], fixed["right"][key]):
        if rate >= target:
            return int(n)
    return None


def wrong_capped_n(fixed: dict, target: float, key: str = "all") -> int | None:
    """matched_n, also holding the fixed test's wrong-decision rate (every question) within alpha."""
    wrong = np.max(np.array([fixed["wrong"][q] for q in fixed["wrong"]]), axis=0)
    for n, rate, bad in zip(fixed["n"], fixed["right"][key], wrong):
        if rate >= target and bad <= ALPHA:
            return int(n)
    return None


# ------------------------------------------------------------------------------------------------ one design


def run_design(design: Design, runs: int, tasks: int | None, pilots: int, plan_simulations: int, index: int,
               pilot_tasks: int = PILOT_TASKS) -> dict:
    """Simulate `runs` runs of a design; summarise decisions, coverage, episodes, dollars, the fixed design and the
    plan's predictions."""
    design = priced(design if tasks is None else replace(design, tasks=tasks))
    truth = design_truth(design)
    config = decide_config(design, truth)
    size = config.round_size(WORKERS, len(design.arms), SEEDS)
    rng = np.random.default_rng([SEED, index])
    draws = draw(rng, design, runs, design.tasks)
    started = time.perf_counter()
    outcomes = [sequential_run(design, config, truth, draws, run, size) for run in range(runs)]
    seconds = time.perf_counter() - started
    grid = np.unique(np.minimum(np.arange(size, design.tasks + size, size), design.tasks))
    fixed = fixed_decisions(design, truth, draws, grid)
    summary = summarize(design, truth, outcomes, fixed)
    if design.budget_share is None:  # a cap would stop the alternative elsewhere: left out
        summary["group_sequential"] = group_sequential(design, truth, draws, grid, config.min_tasks, fixed)
    summary.update(design=design.name, kind=design.kind(), note=design.note, tasks=design.tasks, runs=runs,
                   round_tasks=size, arms=[arm.name for arm in design.arms], margin=design.margin,
                   budget_usd=budget_usd(design), truth=_rounded(truth), pooled=pooled(design, draws),
                   lease_usd_per_hour={arm.name: arm.lease.usd_per_hour for arm in design.arms
                                       if arm.lease is not None},
                   boundary=on_boundary(design), fixed=fixed, seconds=round(seconds, 2))
    summary["plan"] = (plan_check(design, config, draws, outcomes, rng, pilots, plan_simulations, pilot_tasks)
                       if pilots > 0
                       else None)
    return summary


def summarize(design: Design, truth: dict, outcomes: list[RunOutcome], fixed: dict) -> dict:
    runs = len(outcomes)
    per_episode = SEEDS * len(design.arms)
    episodes = np.array([o.tasks * per_episode for o in outcomes], dtype=float)
    usd = np.array([o.usd for o in outcomes])
    decisions = {}
    for question in outcomes[0].verdicts:
        scored = [is_right(design, truth, o)[question] for o in outcomes]
        decisions[question] = {"right": sum(s is True for s in scored) / runs,
                               "wrong": sum(s is False for s in scored) / runs,
                               "undecided": sum(s is None for s in scored) / runs,
                               "verdicts": _counts(o.verdicts[question] for o in outcomes)}
    all_right = sum(all(v is True for v in is_right(design, truth, o).values()) for o in outcomes) / runs
    return {"decisions": decisions, "all_right": all_right, "stops": _counts(o.action for o in outcomes),
            "futility": _futility(design, truth, outcomes, fixed),
            "coverage": _coverage_summary(outcomes),
            "widths": {key: _mean([o.widths.get(key) for o in outcomes]) for key in outcomes[0].widths},
            "episodes": {"mean": float(episodes.mean()), **_quantiles(episodes), "full": design.tasks * per_episode,
                         "histogram": _histogram(episodes, design.tasks * per_episode)},
            "usd": {"mean": float(usd.mean()), **_quantiles(usd)},
            "matched_n": wrong_capped_n(fixed, all_right)}


def _futility(design: Design, truth: dict, outcomes: list[RunOutcome], fixed: dict) -> dict:
    """The same runs had they also stopped, undecided, at their first futile look: episodes, right decisions (a
    run that decided after that look loses its decision), the matched fixed n."""
    per_task = SEEDS * len(design.arms)
    tasks, right = [], []
    for o in outcomes:
        cut = o.futile_at is not None and o.futile_at < o.tasks
        tasks.append(o.futile_at if cut else o.tasks)
        right.append(not cut and all(v is True for v in is_right(design, truth, o).values()))
    episodes = np.array(tasks, dtype=float) * per_task
    rate = float(np.mean(right))
    return {"episodes": {"mean": float(episodes.mean()), **_quantiles(episodes)}, "all_right": rate,
            "cut_runs": sum(o.futile_at is not None and o.futile_at < o.tasks for o in outcomes) / len(outcomes),
            "matched_n": wrong_capped_n(fixed, rate)}


def _coverage_summary(outcomes: list[RunOutcome]) -> dict:
    out = {}
    for key in outcomes[0].covered:
        given = [o.covered[key] for o in outcomes if o.covered.get(key) is not None]
        every = [o.every_look[key] for o in outcomes if key in o.every_look]
        share = sum(given) / len(given) if given else None
        out[key] = {"at_stop": share, "se": math.sqrt(share * (1 - share) / len(given)) if given else None,
                    "runs_with_interval": len(given), "every_look": sum(every) / len(every) if every else None}
    return out


def pooled(design: Design, draws: dict[str, ArmDraws]) -> dict:
    """The population figures estimated from every simulated task pooled: a check of the closed-form truths."""
    out = {}
    for arm in design.arms:
        d = draws[arm.name]
        resolved = float(d.resolved.sum())
        spent = float(d.usd.sum() if d.usd is not None else d.lease_usd.sum() if d.lease_usd is not None else 0.0)
        out[arm.name] = {"avg_at_k": resolved / d.resolved.size / SEEDS,
                         "cost_per_resolved": spent / resolved if spent > 0 and resolved > 0 else None}
    return out


def _counts(values) -> dict[str, int]:
    out: dict[str, int] = {}
    for value in values:
        out[value] = out.get(value, 0) + 1
    return out


def _mean(values: list[float | None]) -> float | None:
    given = [v for v in values if v is not None]
    return float(np.mean(given)) if given else None


def _quantiles(values: np.ndarray) -> dict[str, float]:
    p10, p50, p90 = np.percentile(values, [10, 50, 90])
    return {"p10": float(p10), "p50": float(p50), "p90": float(p90)}


def _histogram(values: np.ndarray, full: int, bins: int = 10) -> list[int]:
    """Runs per tenth of the full suite's episodes (the last bin holds the full suite)."""
    counts, _ = np.histogram(values, bins=bins, range=(0, full))
    return counts.tolist()


def _rounded(value):
    if isinstance(value, float):
        return float(f"{value:.6g}")
    if isinstance(value, dict):
        return {key: _rounded(v) for key, v in value.items()}
    return value


# ------------------------------------------------------------------------------------------- the plan check


def plan_check(design: Design, config, draws: dict[str, ArmDraws], outcomes: list[RunOutcome],
               rng: np.random.Generator, pilots: int, simulations: int, pilot_tasks: int = PILOT_TASKS) -> dict:
    """compare.planning's predictions from `pilots` pilots of `pilot_tasks` tasks (each its own plan, its decide Monte
    Carlo of `simulations` runs), against the simulated runs: per figure the predictions' median, the simulated
    mean, the median pilot's error, the median |error| and the share of pilots within PLAN_TOLERANCE (errors
    relative, except a share's: in points)."""
    from compare.planning import plan_from_samples

    spec = plan_spec(design, config)
    simulated = simulated_figures(design, draws, outcomes)
    predicted: dict[str, list[float]] = {}
    inside: dict[str, list[float]] = {}
    for _ in range(pilots):
        document = plan_from_samples(spec, pilot_samples(design, rng, pilot_tasks), design.tasks, None, None,
                                     simulations)
        for key, value in plan_figures(document).items():
            if value is not None:
                predicted.setdefault(key, []).append(value)
        for key, share in plan_range_coverage(document, outcomes, len(design.arms)).items():
            inside.setdefault(key, []).append(share)
    out = {}
    for key, truth in simulated.items():
        values = np.array(predicted.get(key, []))
        if values.size == 0 or truth is None or (truth == 0 and key not in SHARES):
            out[key] = {"simulated": truth, "predicted": None}
            continue
        errors = values - truth if key in SHARES else values / truth - 1  # a share's error: in points
        out[key] = {"simulated": truth, "predicted_median": float(np.median(values)),
                    "error_of_median": float(np.median(errors)),
                    "median_abs_error": float(np.median(np.abs(errors))),
                    "within_tolerance": float(np.mean(np.abs(errors) <= PLAN_TOLERANCE)), "pilots": int(values.size)}
    for key, shares in inside.items():
        out[key]["inside_plan_range"] = float(np.median(shares))
    return {"pilot_tasks": pilot_tasks, "pilots": pilots, "simulations": simulations, "figures": out}


def plan_range_coverage(document, outcomes: list[RunOutcome], arms: int) -> dict[str, float]:
    """The share of the simulated runs whose spend and episodes fall inside the plan's p10–p90 of them: the plan's
    range is a forecast of one run, so a calibrated plan holds about PLAN_RANGE of the runs."""
    if document.decide is None:
        return {}
    spent = np.array([o.usd for o in outcomes])
    episodes = np.array([o.tasks for o in outcomes]) * SEEDS * arms
    out = {}
    for key, values, planned in (("sequential_usd", spent, document.decide.usd),
                                 ("sequential_episodes", episodes, document.decide.episodes)):
        out[key] = float(np.mean((values >= planned.p10) & (values <= planned.p90)))
    return out


def plan_spec(design: Design, config):
    """The run spec `leafcost plan` would read for this design: its arms as leafcost arm kinds, its question."""
    from compare.spec import parse_run_spec

    arms = []
    for arm in design.arms:
        if arm.lease is not None:
            arms.append({"name": arm.name, "adapter": "sglang", "model": f"{arm.name}-model",
                         "base_url": "http://127.0.0.1:30000/v1",
                         "gpu": {"type": "H100", "count": 1, "usd_per_hour": arm.lease.usd_per_hour}})
        elif arm.per_token is not None:
            price = arm.per_token
            arms.append({"name": arm.name, "adapter": "router", "model": f"vendor/{arm.name}",
                         "base_url": "http://127.0.0.1:4000/v1",
                         "prices": {"input": price.input, "output": price.output, "cached_input": price.cached}})
        else:
            arms.append({"name": arm.name, "adapter": "oracle"})
    return parse_run_spec({"name": design.name, "suite": "builtin", "seeds": SEEDS, "workers": WORKERS,
                           "arms": arms, "decide": config.model_dump(mode="json")})


def pilot_samples(design: Design, rng: np.random.Generator, tasks: int = PILOT_TASKS) -> dict:
    """A pilot run of `tasks` tasks from the population, as compare.plan_sources reads a recorded pilot: one run
    (paired), each arm's resolved attempts, $ per task (a lease's attribution) and wall seconds per task."""
    from compare.plan_sources import ArmSample

    draws = draw(rng, design, 1, tasks)
    full = np.full(tasks, float(SEEDS))
    samples = {}
    for arm in design.arms:
        d = draws[arm.name]
        usd = d.cost(0, tasks)[0]
        samples[arm.name] = ArmSample(source="pilot", run_id="pilot", tasks=[f"t{i}" for i in range(tasks)],
                                      resolved=d.resolved[0].astype(float), attempts=full, episodes=full,
                                      model_usd=usd, sandbox_usd=None, seconds=d.seconds[0], tokens=d.tokens)
    return samples


def plan_figures(document) -> dict[str, float | None]:
    """The plan's predicted figures, by the names simulated_figures uses."""
    out: dict[str, float | None] = {"usd_full": document.usd}
    for row in document.arms:
        out[f"width_avg_at_k:{row.arm}"] = row.widths.get("avg_at_k")
        out[f"width_cost_per_resolved:{row.arm}"] = row.widths.get("cost_per_resolved_attempt")
    if document.comparison is not None:
        out["width_avg_at_k_difference"] = document.comparison.widths.get("avg_at_k_difference")
        out["width_cost_per_resolved_difference"] = document.comparison.widths.get("cost_per_resolved_difference")
    if document.decide is not None:
        out["sequential_usd"] = document.decide.usd.mean
        out["sequential_episodes"] = document.decide.episodes.mean
        out["decided_share"] = document.decide.decided_probability
    return out


def simulated_figures(design: Design, draws: dict[str, ArmDraws], outcomes: list[RunOutcome]) -> dict:
    """The simulated runs' means of what the plan predicts: the whole suite's $, the 95 % normal-approximation
    widths a whole-suite run reports (Avg@3: 2·z·sd/√n; cost per resolved attempt: the delta method's
    2·z·θ·sd(ψ)/√n; the paired differences likewise), and the sequential runs' $, episodes and share decided."""
    z = NormalDist().inv_cdf(0.975)
    n = design.tasks
    out: dict[str, float | None] = {"usd_full": float(sum(_spent(d, n) for d in draws.values()).mean())}
    parts = {}
    for arm in design.arms:
        d = draws[arm.name]
        scores = d.resolved / SEEDS
        out[f"width_avg_at_k:{arm.name}"] = float((2 * z * scores.std(axis=1, ddof=1) / math.sqrt(n)).mean())
        theta, psi = _theta_psi(d, n)
        parts[arm.name] = (scores, theta, psi)
        out[f"width_cost_per_resolved:{arm.name}"] = (
            None if theta is None else float((2 * z * theta * psi.std(axis=1, ddof=1) / math.sqrt(n)).mean()))
    if len(design.arms) >= 2:
        (sa, ta, pa), (sb, tb, pb) = parts[design.arms[0].name], parts[design.arms[1].name]
        out["width_avg_at_k_difference"] = float((2 * z * (sa - sb).std(axis=1, ddof=1) / math.sqrt(n)).mean())
        if ta is not None and tb is not None:
            influence = ta[:, None] * pa - tb[:, None] * pb
            out["width_cost_per_resolved_difference"] = float(
                (2 * z * influence.std(axis=1, ddof=1) / math.sqrt(n)).mean())
    out["sequential_usd"] = float(np.mean([o.usd for o in outcomes]))
    out["sequential_episodes"] = float(np.mean([o.tasks for o in outcomes])) * SEEDS * len(design.arms)
    out["decided_share"] = float(np.mean([o.action == "decided" for o in outcomes]))
    return out


def _spent(d: ArmDraws, n: int) -> np.ndarray:
    """Each run's spend on its first n tasks."""
    if d.usd is not None:
        return d.usd[:, :n].sum(axis=1)
    if d.lease_usd is not None:
        return d.lease_usd[:, :n].sum(axis=1)
    return np.zeros(d.resolved.shape[0])


def _theta_psi(d: ArmDraws, n: int) -> tuple[np.ndarray | None, np.ndarray | None]:
    """Each run's cost per resolved attempt over its first n tasks and the per-task influence of its log."""
    spent = _spent(d, n)
    if not np.all(spent > 0):
        return None, None
    cost = d.usd[:, :n] if d.usd is not None else d.weight[:, :n]  # a lease's attribution is ∝ its weight
    resolved = d.resolved[:, :n].astype(float)
    theta = spent / resolved.sum(axis=1)
    psi = cost / cost.mean(axis=1, keepdims=True) - resolved / resolved.mean(axis=1, keepdims=True)
    return theta, psi


# ------------------------------------------------------------------------------------------------ all designs


def buyer_savings(results: list[dict]) -> None:
    """Add each design's buyer's fixed n (one n per question family, sized to match the sequential runs' decision
    rate in every design of the family) and the savings of the sequential runs against it, against the matched n
    and against the whole suite. A design with a budget cap is left out: its runs answer a capped question."""
    for target, where in ((lambda r: r, "savings"), (lambda r: r["futility"], "futility_savings"),
                          (lambda r: r["group_sequential"], "group_sequential_savings")):
        largest: dict[str, int] = {}
        for r in results:
            if r["budget_usd"] is None:
                n = target(r)["matched_n"]
                largest[r["kind"]] = max(largest.get(r["kind"], 0), r["tasks"] if n is None else n)
        for r in results:
            if r["budget_usd"] is not None:
                r[where] = None
                continue
            per_task = SEEDS * len(r["arms"])
            buyer = min(largest[r["kind"]], r["tasks"])
            matched = target(r)["matched_n"] if target(r)["matched_n"] is not None else r["tasks"]
            mean = target(r)["episodes"]["mean"]
            r[where] = {"buyer_n": buyer, "vs_buyer": 1 - mean / (buyer * per_task),
                        "vs_matched": 1 - mean / (matched * per_task), "vs_full": 1 - mean / (r["tasks"] * per_task)}
    for r in results:
        r["buyer_n"] = None if r["savings"] is None else r["savings"]["buyer_n"]


def on_boundary(design: Design) -> bool:
    """A design whose truth sits on a decision boundary (there for the error-rate goal): no procedure decides it
    rightly with high probability."""
    margin = design.margin or 0.0
    on_ratio = design.ratio is not None and any(math.isclose(design.ratio, edge, rel_tol=1e-12)
                                                for edge in (1.0, 1 + margin, 1 / (1 + margin)))
    return on_ratio or (design.claim is not None and design.claim[1] is None)


def savings_means(results: list[dict]) -> dict:
    """Mean per-design savings over every design with savings, and over those not on a boundary."""
    out = {}
    for label, keep in (("all", lambda r: True), ("off_boundary", lambda r: not r["boundary"])):
        chosen = [r for r in results if r["savings"] is not None and keep(r)]
        out[label] = {key: float(np.mean([r["savings"][key] for r in chosen])) if chosen else None
                      for key in ("vs_buyer", "vs_matched", "vs_full")}
        for name, where in (("with_futility_stop", "futility_savings"),
                            ("group_sequential", "group_sequential_savings")):
            out[label][name] = {key: float(np.mean([r[where][key] for r in chosen])) if chosen else None
                                for key in ("vs_buyer", "vs_matched", "vs_full")}
        out[label]["designs"] = [r["design"] for r in chosen]
    return out


def goals(results: list[dict]) -> dict:
    """Issue 23's goals read off the designs: the largest wrong-decision rate, the smallest coverages, the mean
    savings off the boundary, and how many plan figures' median pilot lands within PLAN_TOLERANCE."""
    wrong = [(d["decisions"][q]["wrong"], f"{d['design']}:{q}") for d in results for q in d["decisions"]]
    at_stop = [(c["at_stop"], f"{d['design']}:{k}") for d in results for k, c in d["coverage"].items()
               if c["at_stop"] is not None]
    every = [(c["every_look"], f"{d['design']}:{k}") for d in results for k, c in d["coverage"].items()
             if c["every_look"] is not None]
    plan: dict[str, list[int]] = {}
    for d in results:
        for key, figure in ((d.get("plan") or {}).get("figures") or {}).items():
            if figure.get("error_of_median") is not None and key not in SHARES:
                family = key.split(":")[0]
                plan.setdefault(family, [0, 0])
                plan[family][0] += abs(figure["error_of_median"]) <= PLAN_TOLERANCE
                plan[family][1] += 1
    calibrated: dict[str, list[int]] = {}
    for d in results:
        for key, figure in ((d.get("plan") or {}).get("figures") or {}).items():
            if figure.get("inside_plan_range") is not None:
                calibrated.setdefault(key, [0, 0])
                calibrated[key][0] += figure["inside_plan_range"] >= PLAN_RANGE - 0.1
                calibrated[key][1] += 1
    return {"largest_wrong": max(wrong) if wrong else None, "smallest_coverage_at_stop": min(at_stop) if at_stop
            else None, "smallest_coverage_every_look": min(every) if every else None,
            "plan_median_within_tolerance": {key: {"within": v[0], "of": v[1]} for key, v in plan.items()},
            "plan_range_holds_70_percent": {key: {"within": v[0], "of": v[1]} for key, v in calibrated.items()}}


def _load() -> str:
    one, five, _ = os.getloadavg()
    return f"load average {one:.2f} (1 min), {five:.2f} (5 min) on {os.cpu_count()} cores"


def run_all(names: list[str], runs: int, tasks: int | None, pilots: int, plan_simulations: int, jobs: int,
            pilot_tasks: int = PILOT_TASKS) -> dict:
    chosen = [(i, d) for i, d in enumerate(DESIGNS) if d.name in names]
    load_before, started = _load(), time.perf_counter()
    date = datetime.now(timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
    if jobs > 1:
        with ProcessPoolExecutor(jobs) as pool:
            futures = [pool.submit(run_design, d, runs, tasks, pilots, plan_simulations, i, pilot_tasks)
                       for i, d in chosen]
            results = [f.result() for f in futures]
    else:
        results = [run_design(d, runs, tasks, pilots, plan_simulations, i, pilot_tasks) for i, d in chosen]
    buyer_savings(results)
    return {"date": date, "alpha": ALPHA, "seeds": SEEDS, "workers": WORKERS, "runs": runs, "designs": results,
            "mean_savings": savings_means(results), "goals": goals(results),
            "machine": {"wall_seconds": round(time.perf_counter() - started, 1), "load_before": load_before,
                        "load_after": _load(), "jobs": jobs, "python": sys.version.split()[0]}}


# ------------------------------------------------------------------------------------------------- printing


def _pct(value: float | None, digits: int = 1) -> str:
    return "–" if value is None else f"{100 * value:.{digits}f}"


def _effect(r: dict) -> str:
    t = r["truth"]
    parts = []
    if "ratio" in t:
        parts.append(f"ratio {t['ratio']:.3g} (margin {r['margin']:g})")
    if "avg_at_k" in t:
        parts.append(f"Avg@3 {t['avg_at_k']:.3f} vs {t['claim']:.3f}")
    return "; ".join(parts)


def print_tables(document: dict) -> None:
    m = document["machine"]
    print(f"{document['date']}: {document['runs']} runs per design, alpha {document['alpha']}, {document['seeds']} "
          f"seeds, rounds for {document['workers']} workers; {m['wall_seconds']:.0f} s wall, {m['jobs']} jobs; "
          f"before: {m['load_before']}; after: {m['load_after']}")
    print()
    print("| design | true effect | right % | wrong % | undecided % | coverage at stop % (every look) | "
          "episodes mean [p10, p50, p90] | full | matched n → buyer's n (episodes) | saved vs buyer's | $ mean |")
    print("|---|---|---|---|---|---|---|---|---|---|---|")
    for r in document["designs"]:
        d = r["decisions"]
        right = " / ".join(_pct(d[q]["right"]) for q in d)
        wrong = " / ".join(_pct(d[q]["wrong"]) for q in d)
        undecided = " / ".join(_pct(d[q]["undecided"]) for q in d)
        cov = r["coverage"]
        shown = [k for k in ("ratio", "avg_at_k") if k in cov]
        coverage = " / ".join(f"{_pct(cov[k]['at_stop'])} ({_pct(cov[k]['every_look'])})" for k in shown)
        e = r["episodes"]
        per_task = SEEDS * len(r["arms"])
        matched = r["matched_n"] if r["matched_n"] is not None else f">{r['tasks']}"
        fixed = "– (capped)" if r["buyer_n"] is None else (f"{matched} → {r['buyer_n']} "
                                                          f"({r['buyer_n'] * per_task})")
        saved = "–" if r["savings"] is None else f"{_pct(r['savings']['vs_buyer'], 0)} %"
        name = r["design"] + (" (boundary)" if r["boundary"] else "")
        print(f"| {name} | {_effect(r)} | {right} | {wrong} | {undecided} | {coverage} | "
              f"{e['mean']:.0f} [{e['p10']:.0f}, {e['p50']:.0f}, {e['p90']:.0f}] | {e['full']} | {fixed} | {saved} | "
              f"{r['usd']['mean']:.2f} |")
    print()
    for label, means in document["mean_savings"].items():
        futile, grouped = means["with_futility_stop"], means["group_sequential"]
        print(f"mean episodes saved over {len(means['designs'])} designs ({label.replace('_', ' ')}): "
              f"{_pct(means['vs_buyer'], 0)} % against the buyer's fixed design, {_pct(means['vs_matched'], 0)} % "
              f"against the matched (effect-knowing) one, {_pct(means['vs_full'], 0)} % against the whole suite; "
              f"with a plan-based futility stop (counterfactual) {_pct(futile['vs_buyer'], 0)} %, "
              f"{_pct(futile['vs_matched'], 0)} %, {_pct(futile['vs_full'], 0)} %; group-sequential (counterfactual) "
              f"{_pct(grouped['vs_buyer'], 0)} %, {_pct(grouped['vs_matched'], 0)} %, {_pct(grouped['vs_full'], 0)} %")
    print()
    print("counterfactual plan-based futility stop (stop undecided once the look's plan says more tasks than are "
          "left):")
    print("| design | runs cut | right % (all questions) | episodes mean [p10, p50, p90] | saved vs buyer's |")
    print("|---|---|---|---|---|")
    for r in document["designs"]:
        f, e = r["futility"], r["futility"]["episodes"]
        saved = "–" if r["futility_savings"] is None else f"{_pct(r['futility_savings']['vs_buyer'], 0)} %"
        print(f"| {r['design']} | {_pct(f['cut_runs'], 0)} % | {_pct(r['all_right'])} → {_pct(f['all_right'])} | "
              f"{e['mean']:.0f} [{e['p10']:.0f}, {e['p50']:.0f}, {e['p90']:.0f}] | {saved} |")
    print()
    print("counterfactual group-sequential design (O'Brien–Fleming-shaped repeated Wald intervals, c·√(N/n) SE):")
    print("| design | c | right % | wrong % | undecided % | coverage at stop % | episodes mean [p10, p50, p90] | "
          "matched n → buyer's n | saved vs buyer's |")
    print("|---|---|---|---|---|---|---|---|---|")
    for r in document["designs"]:
        gs = r.get("group_sequential")
        if gs is None:
            continue
        d, e, saved = gs["decisions"], gs["episodes"], r["group_sequential_savings"]
        cells = [" / ".join(_pct(d[q][key]) for q in d) for key in ("right", "wrong", "undecided")]
        coverage = " / ".join(_pct(v) for v in gs["coverage"].values())
        matched = gs["matched_n"] if gs["matched_n"] is not None else f">{r['tasks']}"
        print(f"| {r['design']} | {gs['c']:.3f} | {' | '.join(cells)} | {coverage} | {e['mean']:.0f} [{e['p10']:.0f}, "
              f"{e['p50']:.0f}, {e['p90']:.0f}] | {matched} → {saved['buyer_n']} | {_pct(saved['vs_buyer'], 0)} % |")
    print()
    g = document["goals"]
    print(f"largest wrong-decision rate {_pct(g['largest_wrong'][0])} % ({g['largest_wrong'][1]}); smallest coverage "
          f"at stop {_pct(g['smallest_coverage_at_stop'][0])} % ({g['smallest_coverage_at_stop'][1]}), at every look "
          f"{_pct(g['smallest_coverage_every_look'][0])} % ({g['smallest_coverage_every_look'][1]})")
    print()
    _print_histograms(document["designs"])
    _print_plan_table(document["designs"])
    within = document["goals"]["plan_median_within_tolerance"]
    if within:
        print("plan figures whose median pilot is within " f"{100 * PLAN_TOLERANCE:.0f} %: "
              + ", ".join(f"{key} {v['within']}/{v['of']}" for key, v in within.items()))
        held = document["goals"]["plan_range_holds_70_percent"]
        print(f"plan ranges (p10–p90) holding ≥ {100 * (PLAN_RANGE - 0.1):.0f} % of the simulated runs: "
              + ", ".join(f"{key} {v['within']}/{v['of']}" for key, v in held.items()))
        print()
    for r in document["designs"]:
        _print_design(r)


def _print_histograms(results: list[dict]) -> None:
    """Runs by the share of the whole suite's episodes they used, a tenth per column, with a bar of the shape."""
    bars = " ▁▂▃▄▅▆▇█"
    print("episodes used, runs per tenth of the whole suite's episodes (a tenth [a, b); the last includes the "
          "whole suite)")
    print("| design | shape | " + " | ".join(f"<{10 * (i + 1)} %" for i in range(9)) + " | ≤100 % |")
    print("|---|---|" + "---:|" * 10)
    for r in results:
        counts = r["episodes"]["histogram"]
        top = max(counts) or 1
        shape = "".join(bars[math.ceil(8 * c / top)] for c in counts)
        print(f"| {r['design']} | `{shape}` | " + " | ".join(str(c) for c in counts) + " |")
    print()


PLAN_COLUMNS = (("usd_full", "whole suite $"), ("sequential_usd", "sequential $"),
                ("sequential_episodes", "sequential episodes"), ("width_avg_at_k", "Avg@3 width"),
                ("width_cost_per_resolved", "$/resolved width"),
                ("width_cost_per_resolved_difference", "$/resolved difference width"))


def _print_plan_table(results: list[dict]) -> None:
    """The plan's median prediction against the simulated mean: error of the median pilot, share of pilots
    within tolerance (the first arm's widths)."""
    planned = [r for r in results if r.get("plan") and "figures" in r["plan"]]
    if not planned:
        return
    p = planned[0]["plan"]
    print(f"plan (median of {p['pilots']} pilots of {p['pilot_tasks']} tasks, {p['simulations']} Monte Carlo runs "
          f"each) vs simulated mean: error of the median pilot (share of pilots within "
          f"{100 * PLAN_TOLERANCE:.0f} %)")
    print(f"the last column: the share of simulated runs inside the median pilot's plan p10–p90 of the sequential "
          f"run's $ and episodes (a calibrated forecast holds {100 * PLAN_RANGE:.0f} %)")
    print("| design | " + " | ".join(label for _, label in PLAN_COLUMNS)
          + " | decided: plan vs simulated | runs inside plan's p10–p90 ($, episodes) |")
    print("|---|" + "---|" * (len(PLAN_COLUMNS) + 2))
    for r in planned:
        figures, cells = r["plan"]["figures"], []
        for key, _ in PLAN_COLUMNS:
            figure = figures.get(key) or figures.get(f"{key}:{r['arms'][0]}")
            if figure is None or figure.get("predicted_median") is None:
                cells.append("–")
                continue
            cells.append(f"{figure['predicted_median']:.4g} vs {figure['simulated']:.4g} "
                         f"({100 * figure['error_of_median']:+.0f} %, {_pct(figure['within_tolerance'], 0)} %)")
        decided = figures.get("decided_share", {})
        cells.append("–" if decided.get("predicted_median") is None else
                     f"{_pct(decided['predicted_median'], 0)} % vs {_pct(decided['simulated'], 0)} %")
        inside = [(figures.get(key) or {}).get("inside_plan_range")
                  for key in ("sequential_usd", "sequential_episodes")]
        cells.append("–" if None in inside else f"{_pct(inside[0], 0)} %, {_pct(inside[1], 0)} %")
        print(f"| {r['design']} | " + " | ".join(cells) + " |")
    print()


def _print_design(r: dict) -> None:
    print(f"{r['design']} ({r['kind']}; {r['tasks']} tasks, rounds of {r['round_tasks']}; {r['note'] or '—'}): "
          f"stops {r['stops']}; {r['seconds']:.0f} s")
    truth, pooled_ = r["truth"], r["pooled"]
    for arm, figures in truth["arms"].items():
        cpr = figures["cost_per_resolved"]
        pooled_cpr = pooled_[arm]["cost_per_resolved"]
        print(f"  {arm}: Avg@3 {figures['avg_at_k']:.4f} (pooled {pooled_[arm]['avg_at_k']:.4f}), $/resolved "
              + ("–" if cpr is None else f"{cpr:.4f} (pooled {pooled_cpr:.4f})"))
    for question, d in r["decisions"].items():
        print(f"  {question}: verdicts {d['verdicts']}")
    for key, c in r["coverage"].items():
        width = r["widths"].get(key)
        print(f"  coverage {key}: at stop {_pct(c['at_stop'])} % ± {_pct(c['se'])} ({c['runs_with_interval']} runs), "
              f"every look {_pct(c['every_look'])} %; mean width at stop "
              + ("–" if width is None else f"{width:.4g}"))
    e = r["episodes"]
    top = max(e["histogram"]) or 1
    print(f"  episodes used (tenths of {e['full']}):")
    for i, count in enumerate(e["histogram"]):
        low, high = e["full"] * i // 10, e["full"] * (i + 1) // 10
        print(f"    {low:>5}–{high:<5} {'#' * round(30 * count / top):<30} {count}")
    print()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=400, help="simulated runs per design (default 400)")
    parser.add_argument("--designs", nargs="+", choices=[d.name for d in DESIGNS], help="default: all")
    parser.add_argument("--tasks", type=int, help="override every design's suite size")
    parser.add_argument("--pilots", type=int, default=10, help="pilots per design for the plan check (0: skip)")
    parser.add_argument("--pilot-tasks", type=int, default=PILOT_TASKS, help="tasks per pilot (default "
                        f"{PILOT_TASKS}); the plan's spread shrinks as 1/√tasks")
    parser.add_argument("--plan-simulations", type=int, default=DEFAULT_SIMULATIONS,
                        help=f"the plan's decide Monte Carlo runs per pilot (default {DEFAULT_SIMULATIONS}, as "
                        "leafcost plan)")
    parser.add_argument("--jobs", type=int, default=os.cpu_count() or 1, help="designs simulated at once")
    parser.add_argument("--quick", action="store_true",
                        help=f"{len(QUICK_DESIGNS)} designs, {QUICK_TASKS} tasks, {QUICK_RUNS} runs, 2 pilots of 10 "
                        "Monte Carlo runs")
    parser.add_argument("--json", action="store_true", help="print the results as JSON")
    args = parser.parse_args()
    if args.runs < 2 or args.pilots < 0 or args.plan_simulations < 1 or args.jobs < 1 or args.pilot_tasks < 2:
        parser.error("--runs must be ≥ 2, --pilots ≥ 0, --plan-simulations and --jobs ≥ 1, --pilot-tasks ≥ 2")
    if args.tasks is not None and args.tasks < 30:
        parser.error("--tasks must be ≥ 30 (a suite past the 20-task burn-in)")
    names = args.designs or [d.name for d in DESIGNS]
    runs, tasks, pilots, simulations = args.runs, args.tasks, args.pilots, args.plan_simulations
    if args.quick:
        names, runs, tasks, pilots, simulations = list(args.designs or QUICK_DESIGNS), QUICK_RUNS, QUICK_TASKS, 2, 10
    document = run_all(names, runs, tasks, pilots, simulations, args.jobs, args.pilot_tasks)
    if args.json:
        print(json.dumps(document, indent=2))
    else:
        print_tables(document)


if __name__ == "__main__":
    main()
