"""The run spec's decision question (`decide:`) and the plan's stated priors (`plan:`): their models, their checks
against the spec's arms, and the size of a round. compare/spec.py imports them; the arms come from compare.arms."""

from __future__ import annotations

import hashlib
import math
from collections.abc import Sequence
from typing import Annotated, Literal

from pydantic import Field, field_validator, model_validator

from compare.arms import ArmSpec, StrictModel

# Upper bounds far above any real plan: a value past them is a typo.
MAX_BUDGET_USD = 1e9
MAX_TASKS = 10_000_000
MIN_ROUND_TASKS = 10  # an automatic round is never smaller: each look costs a pass over the ledger

PositiveUsd = Annotated[float, Field(gt=0, le=MAX_BUDGET_USD)]


class CheaperQuestion(StrictModel):
    """Which of two arms costs less per resolved attempt (DESIGN: Σ cost of every attempt ÷ Σ resolved attempts)."""

    arms: list[str] = Field(min_length=2, max_length=2, description="the two arms to compare, by name")
    margin: float = Field(0.0, ge=0, le=1, description="relative indifference margin: 0.1 = a difference under 10 % "
                          "of the cost per resolved attempt is a tie (the arms are 'equivalent'); 0 = no tie")

    @field_validator("arms")
    @classmethod
    def _two_different_arms(cls, arms: list[str]) -> list[str]:
        if arms[0] == arms[1]:
            raise ValueError(f"name two different arms, not {arms[0]!r} twice")
        return arms


class ReachesQuestion(StrictModel):
    """Whether an arm's resolve rate (Avg@k, k = the spec's seeds) reaches a claimed value."""

    arm: str = Field(description="the arm whose resolve rate is claimed, by name")
    avg_at_k: float = Field(gt=0, lt=1, description="the claimed resolve rate (Avg@k), e.g. 0.615")
    tolerance: float = Field(0.0, ge=0, lt=1, description="a shortfall the claim allows: an interval wholly at or "
                             "above avg_at_k − tolerance settles the question as 'consistent' (0: only 'reaches', "
                             "the interval wholly at or above avg_at_k, settles it that way)")
    tasks: Literal["all", "seen"] = Field("all", description="the tasks the claim is judged on: all, or seen: only "
                                          "those not fresh for the arm (created on or before its released: day, or "
                                          "undated); the horizon is their count")

    @model_validator(mode="after")
    def _tolerance_below_claim(self) -> ReachesQuestion:
        if self.tolerance >= self.avg_at_k:
            raise ValueError(f"tolerance ({self.tolerance}) must be below avg_at_k ({self.avg_at_k}): every rate "
                             "would be within it")
        return self


class BudgetCaps(StrictModel):
    """Dollar caps: the run stops before a round whose predicted spend would pass one. May change on resume."""

    total_usd: float | None = Field(None, gt=0, le=MAX_BUDGET_USD, description="all arms together, $")
    per_arm_usd: dict[str, PositiveUsd] = Field(default_factory=dict, description="a cap per arm, by arm name, $")


class DecideConfig(StrictModel):
    """A decision question: the run goes in rounds of paired tasks and stops when every question is decided."""

    cheaper: CheaperQuestion | None = Field(None, description="which of two arms costs less per resolved attempt")
    reaches: ReachesQuestion | None = Field(None, description="whether an arm's Avg@k reaches a claimed value")
    alpha: float = Field(0.05, gt=0, le=0.2, description="each question's error rate: a verdict is wrong with "
                         "probability at most alpha, however often the run looks")
    budget: BudgetCaps = Field(default_factory=BudgetCaps)
    round_tasks: int | None = Field(None, gt=0, le=MAX_TASKS, description="tasks per round (null: "
                                    f"max({MIN_ROUND_TASKS}, workers ÷ (arms × seeds)), so a round fills the workers)")
    min_tasks: int = Field(20, ge=2, le=MAX_TASKS, description="no cost verdict before this many tasks: the "
                           "burn-in of the asymptotic confidence sequence a cost per resolved attempt uses")
    stop_out_of_reach: bool = Field(True, description="stop undecided once a question is out of reach by the "
                                    "suite's end (false: run on to the budget or the last task, for the figures)")

    @model_validator(mode="after")
    def _a_question(self) -> DecideConfig:
        if self.cheaper is None and self.reaches is None:
            raise ValueError("give a question: cheaper: {arms: [A, B]} and/or reaches: {arm: A, avg_at_k: 0.6}")
        return self

    def question_digest(self) -> str:
        """The hash of the question (everything but the budget): a resumed run must keep it."""
        return hashlib.sha256(self.model_dump_json(exclude={"budget"}).encode()).hexdigest()

    def check_arms(self, arms: Sequence[ArmSpec]) -> None:
        """ValueError naming each field (as its dotted path) that names a missing arm, or puts an arm without a
        priced cost in a cost question."""
        by_name = {arm.name: arm for arm in arms}
        problems = []
        if self.cheaper is not None:
            for i, name in enumerate(self.cheaper.arms):
                problems.append(_missing(f"decide.cheaper.arms.{i}", name, by_name)
                                or _unpriced(f"decide.cheaper.arms.{i}", by_name[name]))
        if self.reaches is not None:
            problems.append(_missing("decide.reaches.arm", self.reaches.arm, by_name))
        for name in self.budget.per_arm_usd:
            problems.append(_missing(f"decide.budget.per_arm_usd.{name}", name, by_name))
        _raise_problems(problems)

    def round_size(self, workers: int, arms: int, seeds: int) -> int:
        """Tasks per round: round_tasks, or enough tasks that a round's episodes (tasks × arms × seeds) fill the
        workers, and at least MIN_ROUND_TASKS."""
        if self.round_tasks is not None:
            return self.round_tasks
        return max(MIN_ROUND_TASKS, math.ceil(workers / (arms * seeds)))


class ArmPrior(StrictModel):
    """What `leafcost plan` assumes for an arm no run has measured, per episode."""

    resolve_rate: float = Field(ge=0, le=1, description="the share of episodes resolved")
    prompt_tokens: int = Field(ge=0, le=2**40, description="all input tokens of an episode, cached included")
    cached_tokens: int = Field(0, ge=0, le=2**40, description="the part of prompt_tokens served from a cache")
    completion_tokens: int = Field(ge=0, le=2**40, description="all output tokens of an episode")
    episode_seconds: float = Field(300.0, gt=0, le=10 * 86_400, description="wall time of an episode")

    @model_validator(mode="after")
    def _cached_within_prompt(self) -> ArmPrior:
        if self.cached_tokens > self.prompt_tokens:
            raise ValueError(f"cached_tokens ({self.cached_tokens}) exceeds prompt_tokens ({self.prompt_tokens}): "
                             "cached tokens are a part of the prompt")
        return self


class PlanConfig(StrictModel):
    """The plan's stated priors, by arm name."""

    priors: dict[str, ArmPrior] = Field(default_factory=dict, description="per arm: used where neither a pilot run "
                                        "nor an earlier run of the same model in the ledger measured it")

    def check_arms(self, arms: Sequence[ArmSpec]) -> None:
        """ValueError naming each prior (plan.priors.NAME) whose arm the spec lacks."""
        by_name = {arm.name: arm for arm in arms}
        _raise_problems([_missing(f"plan.priors.{name}", name, by_name) for name in self.priors])


def _missing(where: str, name: str, by_name: dict[str, ArmSpec]) -> str | None:
    if name in by_name:
        return None
    return f"{where}: no arm named {name!r} (arms: {', '.join(by_name)})"


def _unpriced(where: str, arm: ArmSpec) -> str | None:
    """Why an arm cannot be in a cost question: no cost at all, or calls that may go unpriced (a cost per resolved
    attempt missing some calls' dollars would favour it)."""
    if arm.billing == "none":
        return (f"{where}: the {arm.kind} arm {arm.name!r} has no cost (billed: none): a cost question compares "
                "arms that are billed")
    if getattr(arm, "allow_unpriced", False):
        return (f"{where}: arm {arm.name!r} sets allow_unpriced: true, so some of its calls may have no cost: give "
                "it prices (or remove allow_unpriced) to ask a cost question")
    return None


def _raise_problems(problems: list[str | None]) -> None:
    found = [problem for problem in problems if problem]
    if found:
        raise ValueError("; ".join(found))
