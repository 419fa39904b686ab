"""`leafcost plan`: before a run, what it will take — per arm and for the comparison, the episodes, the wall time
at the spec's workers, the dollars, and the widths of the 95 % intervals the full run would reach; with `decide:`,
a Monte Carlo of the sequential run (how many tasks, episodes and dollars it uses, how often it decides); with a
target, the tasks × seeds that reach it and their cost.

Each arm's figures come from one source, named in the output: a pilot run (the arm of the same name, else of the
same model), the most recent finished run of the same model in the ledger, or the spec's `plan.priors`. A run's
figures are read as `leafcost summary` reads them (compare.summary), its token arms priced again at this spec's
prices by compare.reprice; priors are priced by compare.pricing. A lease arm's dollars are its GPUs × $/hour over
the predicted wall time (it holds its lease while every arm's episodes run side by side).

The Monte Carlo (`simulate_sequential`) drives compare.decision's look and after_look round by round exactly as
the runner does, over tasks drawn by a `TaskSampler`: here, tasks resampled from the source (paired across arms
when one run measured both), or drawn from the priors; a caller that knows the true distributions (bench/) passes
its own sampler."""

from __future__ import annotations

import math
import zlib
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from statistics import NormalDist
from typing import Any

import numpy as np
from pydantic import BaseModel

from compare.arm_table import counted, fmt_usd
from compare.arms import ArmSpec
from compare.decide_spec import ArmPrior, DecideConfig
from compare.decision import ArmTasks, LookResult, after_look, look
from compare.spec import RunSpec

Z95 = NormalDist().inv_cdf(0.975)
DEFAULT_SIMULATIONS = 200
RUN_SIMULATIONS = 100  # the plan leafcost run records before every run with decide: or plan: (modest: it waits)
SIMULATION_SEED = 20261205  # one seed: the same spec and sources give the same plan
DECIDE_PROBABILITY = 0.9  # --target decide: decided with at least this probability
# Priors state means only; the spread around them is assumed, and stated in the output.
PRIOR_CONCENTRATION = 2.0  # per-task resolve rates ~ Beta(m·κ, (1 − m)·κ): κ = 2 is a wide spread of difficulty
PRIOR_COST_CV = 1.0  # per-episode cost ~ lognormal with the prior's mean and this coefficient of variation
PRIOR_TASKS = 2000  # tasks drawn from the priors to stand in for a measured run
MAX_TARGET_SEEDS = 100

TaskSampler = Callable[[np.random.Generator, int], dict[str, ArmTasks]]
"""Draws `n` tasks for every arm (paired by position: task i of each arm is the same task), each arm's arrays
filled as compare.decision.ArmTasks (resolved, attempts with a verdict and $ per task; spent_usd their $ sum)."""


class PlanError(ValueError):
    """A plan that cannot be made (no such pilot run, a bad --target); one line naming the option."""


@dataclass(frozen=True)
class ArmSample:
    """One arm's measured (or prior-drawn) figures per task: resolved attempts, attempts with a verdict, final
    episodes, $ per task at this spec's prices split into the model's part (tokens, or the lease's attribution)
    and the sandbox's (None: not known), and wall seconds of all its attempts; tokens per episode (means)."""

    source: str
    run_id: str | None
    tasks: list[str]
    resolved: np.ndarray
    attempts: np.ndarray
    episodes: np.ndarray
    model_usd: np.ndarray | None  # None: unpriced
    sandbox_usd: np.ndarray | None
    seconds: np.ndarray
    tokens: dict[str, float] | None = None
    notes: list[str] = field(default_factory=list)


@dataclass(frozen=True)
class SimulatedRun:
    """One simulated sequential run: how it stopped (compare.decision.after_look's action), the tasks and episodes
    it ran, its spend per arm, and its last look (each question's verdict and interval)."""

    action: str
    tasks: int
    episodes: int
    spent_usd: dict[str, float]
    final: LookResult

    @property
    def usd(self) -> float:
        return float(sum(self.spent_usd.values()))

    def verdicts(self) -> dict[str, str]:
        return {question.question: question.verdict for question in self.final.questions}


def simulate_sequential(config: DecideConfig, sample_tasks: TaskSampler, total_tasks: int, seeds: int,
                        rng: np.random.Generator, runs: int = DEFAULT_SIMULATIONS, *, workers: int,
                        arm_count: int | None = None) -> list[SimulatedRun]:
    """`runs` sequential runs of a suite of `total_tasks` tasks: each draws its tasks with `sample_tasks(rng,
    total_tasks)` (in run order), then goes in rounds of config.round_size(workers, arm_count, seeds) tasks
    (arm_count None: the sampler's arms), looking after each round with compare.decision.look and stopping where
    compare.decision.after_look stops the runner (decided, out of reach, at the budget, no task left). An arm's
    spend so far is its drawn spent_usd pro rata to the tasks run."""
    if total_tasks < 1 or runs < 1:
        raise ValueError(f"total_tasks ({total_tasks}) and runs ({runs}) must be at least 1")
    results = []
    for _ in range(runs):
        drawn = sample_tasks(rng, total_tasks)
        size = config.round_size(workers, arm_count or len(drawn), seeds)
        results.append(_one_run(config, drawn, total_tasks, size))
    return results


def _one_run(config: DecideConfig, drawn: dict[str, ArmTasks], total: int, size: int) -> SimulatedRun:
    done, number, previous = 0, 0, None
    while True:
        done = min(done + size, total)
        data = {name: _first(arm, done) for name, arm in drawn.items()}
        number += 1
        previous = look(config, data, look_number=number, total_tasks=total, previous=previous)
        spent = {name: arm.spent_usd for name, arm in data.items()}
        action, _ = after_look(config, previous, spent=spent, round_tasks=size)  # as the runner stops
        if action != "continue":
            episodes = sum(int(arm.attempts.sum()) for arm in data.values())
            return SimulatedRun(action, done, episodes, spent, previous)


def _first(arm: ArmTasks, n: int) -> ArmTasks:
    total = float(arm.cost_usd.sum())
    part = float(arm.cost_usd[:n].sum())
    spent = arm.spent_usd * part / total if total > 0 else 0.0
    return ArmTasks(arm=arm.arm, resolved=arm.resolved[:n], attempts=arm.attempts[:n], cost_usd=arm.cost_usd[:n],
                    spent_usd=spent)


# ------------------------------------------------------------------------------------------------- the document

class Distribution(BaseModel):
    """Mean and percentiles of a simulated quantity."""

    mean: float
    p10: float
    p50: float
    p90: float


class ArmPlan(BaseModel):
    arm: str
    kind: str
    billing: str
    source: str | None  # "pilot run X", "ledger: run X of model M", "plan.priors.ARM"; None: no estimate
    no_estimate: str | None = None  # why there is no estimate, and the fix
    episodes: int
    resolve_rate: float | None = None
    tokens_per_episode: dict[str, float] | None = None
    episode_seconds: float | None = None
    usd_per_episode: float | None = None
    usd: dict[str, float | None] = {}  # total, tokens, gpu, sandbox
    gpu_hours: float | None = None
    widths: dict[str, float | None] = {}  # avg_at_k, cost_per_resolved_attempt: 95 % interval widths
    notes: list[str] = []


class ComparisonPlan(BaseModel):
    arms: list[str]
    paired: bool  # one run measured both arms on the same tasks: the differences' widths use the pairing
    widths: dict[str, float | None]  # avg_at_k_difference, cost_per_resolved_difference (a − b)


class DecidePlan(BaseModel):
    simulations: int
    seed: int
    round_tasks: int
    tasks: Distribution
    episodes: Distribution
    usd: Distribution
    decided_probability: float  # decided before the budget or the tasks run out
    stops: dict[str, float]  # share of runs by how they stopped
    verdicts: dict[str, dict[str, float]]  # question → verdict → share of runs
    sampler: str


class TargetPlan(BaseModel):
    target: str
    arms: dict[str, dict[str, Any]] = {}  # avg-width: per arm tasks, seeds, episodes, usd, reachable, note
    tasks: int | None = None  # decide: the tasks that decide with probability ≥ 0.9
    probability: float | None = None
    episodes: int | None = None
    usd: float | None = None
    note: str | None = None


class PlanDocument(BaseModel):
    spec: str
    suite: str
    tasks: int | None
    tasks_note: str | None
    seeds: int
    workers: int
    episodes: int | None
    wall_seconds: float | None
    usd: float  # every arm with a dollar estimate
    usd_leaves_out: list[str]  # the arms without one (no source, or unpriced)
    arms: list[ArmPlan]
    comparison: ComparisonPlan | None
    decide: DecidePlan | None
    target: TargetPlan | None
    assumptions: list[str]


# ----------------------------------------------------------------------------------------------- making a plan

def make_plan(spec: RunSpec, *, db: Path | None, pilot: str | None, target: str | None,
              simulations: int = DEFAULT_SIMULATIONS) -> PlanDocument:
    """The plan of `spec`: its suite's tasks, each arm's source (pilot, ledger, priors), the predictions, the
    decide Monte Carlo when the spec asks a question, and the target when one is given."""
    parsed_target = parse_target(target, spec)
    tasks, tasks_note = suite_tasks(spec)
    samples = arm_samples(spec, db, pilot)
    return plan_from_samples(spec, samples, tasks, tasks_note, parsed_target, simulations)


def plan_for_run(spec: RunSpec, db: Path | None, *, record: bool) -> PlanDocument | None:
    """What `leafcost run` plans before it opens the ledger (one read of it). With `record` (a new run whose spec
    has decide: or plan:) the whole plan, its Monte Carlo at RUN_SIMULATIONS runs, recorded beside the run; else,
    when decide: has a budget (a resume), only the arms' figures round_cost_problem judges it by. None when no arm
    has a source, or the ledger or the suite cannot be read (the run itself says why, if it matters)."""
    config = spec.decide
    capped = config is not None and (config.budget.total_usd is not None or bool(config.budget.per_arm_usd))
    if not record and not capped:
        return None
    try:
        samples = arm_samples(spec, db, None)
        if not samples:
            return None
        if not record:
            size = config.round_size(spec.workers, len(spec.arms), spec.seeds)
            return plan_from_samples(spec.model_copy(update={"decide": None}), samples, size, None)
        tasks, tasks_note = suite_tasks(spec)
        document = plan_from_samples(spec, samples, tasks, tasks_note, None, RUN_SIMULATIONS)
    except PlanError:
        return None
    if document.decide is not None:
        document.assumptions.append(f"decide: {RUN_SIMULATIONS} simulated runs, as leafcost run plans before it "
                                    "starts (leafcost plan --simulations N for more)")
    return document


def round_cost_problem(spec: RunSpec, plan: PlanDocument | None) -> str | None:
    """Why the spec's decide.budget cannot pay for one round, by `plan`'s dollars per episode (plan_for_run; naming
    the cap and the estimate's source); None when it can, or when no arm has an estimate to judge by."""
    config = spec.decide
    if config is None or (config.budget.total_usd is None and not config.budget.per_arm_usd) or plan is None:
        return None
    size = config.round_size(spec.workers, len(spec.arms), spec.seeds)
    costs = {row.arm: (row.usd_per_episode * size * spec.seeds, row.source) for row in plan.arms
             if row.usd_per_episode is not None}
    where = f"one round of {counted(size, 'task')} × {counted(spec.seeds, 'seed')}"
    for arm, cap in config.budget.per_arm_usd.items():
        if arm in costs and costs[arm][0] > cap:
            return (f"decide.budget.per_arm_usd.{arm}: {fmt_usd(cap)} is below {where} (about "
                    f"{fmt_usd(costs[arm][0])}, from {costs[arm][1]}): raise it or lower decide.round_tasks")
    total = config.budget.total_usd
    if total is not None and sum(cost for cost, _ in costs.values()) > total:
        sources = "; ".join(f"{arm}: {fmt_usd(cost)} from {source}" for arm, (cost, source) in costs.items())
        return (f"decide.budget.total_usd: {fmt_usd(total)} is below {where} (about "
                f"{fmt_usd(sum(cost for cost, _ in costs.values()))}: {sources}): raise it or lower "
                "decide.round_tasks")
    return None


def parse_target(target: str | None, spec: RunSpec) -> tuple[str, float | None] | None:
    """--target as (kind, value): ("avg-width", W) or ("decide", None); PlanError naming the accepted forms."""
    if target is None:
        return None
    forms = "give --target avg-width=W (0 < W < 1, e.g. avg-width=0.05) or --target decide"
    text = target.strip()
    if text == "decide":
        if spec.decide is None:
            raise PlanError("--target decide: the spec has no decide: question (add decide: cheaper: or reaches:)")
        return ("decide", None)
    name, _, value = text.partition("=")
    if name.strip() == "avg-width":
        try:
            width = float(value)
        except ValueError:
            width = math.nan
        if math.isfinite(width) and 0 < width < 1:
            return ("avg-width", width)
    raise PlanError(f"--target {target!r}: {forms}")


def suite_tasks(spec: RunSpec) -> tuple[int | None, str | None]:
    """The run's task count (the suite after tasks/limit, in the runner's order), or None and why not."""
    from compare.runner import RunError, task_order
    from sandbox import SandboxOptions, load_suite

    try:
        suite = load_suite(spec.suite, cache_dir=SandboxOptions().cache_dir, swebench_images=spec.swebench)
        return len(task_order(suite, spec)), None
    except (ValueError, RunError, OSError) as exc:
        fallback = spec.limit or (len(spec.tasks) if spec.tasks else None)
        why = f"suite {spec.suite!r} could not be loaded here ({exc})"
        return fallback, why + (f": planning for {fallback} tasks (limit/tasks)" if fallback else
                                ": set limit: N in the spec to plan for N tasks")


def arm_samples(spec: RunSpec, db: Path | None, pilot: str | None) -> dict[str, ArmSample]:
    """Each arm's source, in order: the pilot run, the ledger's most recent finished run of the same model, the
    spec's plan.priors. An arm with none is left out (its row says how to give one)."""
    from compare.ledger import LedgerError, connect_read_only, default_db_path

    path = Path(db or default_db_path())
    samples: dict[str, ArmSample] = {}
    conn = None  # no ledger yet: priors only
    if path.exists():
        try:
            conn = connect_read_only(path)
        except LedgerError as exc:
            raise PlanError(f"--db: {exc}") from None
    elif pilot is not None:
        raise PlanError(f"--pilot {pilot}: no ledger at {path}: pass --db, the ledger the pilot run wrote")
    try:
        if pilot is not None:
            _check_pilot(conn, pilot)
        for arm in spec.arms:
            found = _source(conn, spec, arm, pilot)
            if found is not None:
                samples[arm.name] = found
    finally:
        if conn is not None:
            conn.close()
    return samples


def _source(conn, spec: RunSpec, arm: ArmSpec, pilot: str | None) -> ArmSample | None:
    """The first of: the pilot run's arm, the ledger's latest finished run of the model, the arm's prior."""
    found = None
    if conn is not None:
        found = (_pilot_sample(conn, spec, arm, pilot) if pilot else None) or _ledger_sample(conn, spec, arm, pilot)
    if found is None and spec.plan is not None and arm.name in spec.plan.priors:
        found = prior_sample(spec, arm, spec.plan.priors[arm.name])
    return found


def _check_pilot(conn, pilot: str) -> None:
    from compare.summary import SummaryError, load_run

    try:
        load_run(conn, pilot)
    except SummaryError as exc:  # names the ledger's recent runs
        raise PlanError(f"--pilot {pilot}: {exc}") from None


def _pilot_sample(conn, spec: RunSpec, arm: ArmSpec, pilot: str) -> ArmSample | None:
    from compare.ledger import fetch_rows

    rows = fetch_rows(conn, "SELECT arm, adapter, model FROM arms WHERE run_id = ? ORDER BY arm", [pilot])
    same_name = [r for r in rows if r["arm"] == arm.name and r["adapter"] == arm.adapter]
    same_model = [r for r in rows if r["model"] == arm.model and r["adapter"] == arm.adapter]
    chosen = (same_name or same_model or [None])[0]
    if chosen is None:
        return None
    label = f"pilot run {pilot}" + ("" if chosen["arm"] == arm.name else f" (its arm {chosen['arm']}, same model)")
    return run_sample(conn, spec, arm, pilot, chosen["arm"], label)


def _ledger_sample(conn, spec: RunSpec, arm: ArmSpec, pilot: str | None) -> ArmSample | None:
    from compare.ledger import fetch_rows

    if arm.billing == "none" or not arm.model:
        return None
    rows = fetch_rows(conn, "SELECT r.run_id, a.arm FROM runs AS r JOIN arms AS a USING (run_id) WHERE "
                            "r.status = 'finished' AND a.model = ? AND a.adapter = ? AND r.run_id <> ? "
                            "ORDER BY r.created_at DESC LIMIT 1", [arm.model, arm.adapter, pilot or ""])
    if not rows:
        return None
    run_id, name = rows[0]["run_id"], rows[0]["arm"]
    return run_sample(conn, spec, arm, run_id, name, f"ledger: run {run_id} of model {arm.model}")


def run_sample(conn, spec: RunSpec, arm: ArmSpec, run_id: str, run_arm: str, source: str) -> ArmSample | None:
    """The arm `run_arm` of a recorded run as this spec's `arm` would pay for it: the summary's per-task tables,
    its token calls priced again at `arm`'s prices, the sandbox at this spec's price; seconds from `episodes`."""
    from compare.ledger import fetch_rows
    from compare.summary import arm_summary_with_tables, load_arms, load_run

    run = load_run(conn, run_id)
    run_spec = run.spec()
    facts = load_arms(conn, run, run_spec, [run_arm])[0]
    overrides, notes = _repricing(conn, run_id, run_spec, arm, run_arm)
    if facts.episodes["final"].astype(bool).sum() == 0:
        return None
    priced = overrides is not False
    overrides = overrides or None
    price = spec.costs.sandbox_usd_per_vcpu_hour
    summary, tables = arm_summary_with_tables(facts, price, resamples=1, seed=0, overrides=overrides)
    _, bare = arm_summary_with_tables(facts, 0.0, resamples=1, seed=0, overrides=overrides)
    index = {task: i for i, task in enumerate(tables.tasks)}
    e = facts.episodes
    finals = e["final"].astype(bool)
    of_task = np.array([index.get(str(t), -1) for t in e["task_id"]])
    episodes = np.bincount(of_task[finals & (of_task >= 0)], minlength=len(index))
    seconds = np.zeros(len(index))
    for row in fetch_rows(conn, "SELECT task_id, sum(coalesce(elapsed_sec, 0)) AS seconds FROM episodes WHERE "
                                "run_id = ? AND arm = ? GROUP BY task_id", [run_id, run_arm]):
        if row["task_id"] in index:
            seconds[index[row["task_id"]]] = float(row["seconds"])
    finished = max(int(finals.sum()), 1)
    tokens = {name: float(e[f"{name}_tokens"].sum()) / finished for name in ("prompt", "cached", "completion")}
    priced = priced and summary["cost_usd"]["total"] is not None
    sandbox = tables.cost - bare.cost if summary["cost_usd"]["sandbox"] is not None else None
    if summary["cost_usd"]["sandbox"] is None:
        notes.append("sandbox CPU was not measured in the source: the sandbox cost is not included")
    return ArmSample(source=source, run_id=run_id, tasks=list(tables.tasks), resolved=tables.c.astype(float),
                     attempts=tables.n.astype(float), episodes=episodes.astype(float),
                     model_usd=bare.cost if priced else None, sandbox_usd=sandbox, seconds=seconds,
                     tokens=tokens if arm.calls_a_model else None, notes=notes)


def _repricing(conn, run_id: str, run_spec: RunSpec, arm: ArmSpec, run_arm: str) -> tuple[Any, list[str]]:
    """The run's arm priced at this spec's arm's prices (token arms): compare.reprice's overrides, or None (no
    repricing: a lease or no cost), or False when this arm has no price to reprice with."""
    from compare.pricing import litellm_prices
    from compare.reprice import ArmPrices, PriceSheet, overrides_for

    if arm.billing != "tokens":
        return None, []
    from compare.summary import SummaryError

    prices = getattr(arm, "prices", None) or litellm_prices(arm.model)
    if prices is None:
        return False, [f"model {arm.model!r} has no price: give the arm prices for a dollar estimate"]
    try:
        return overrides_for(conn, run_id, run_spec, PriceSheet(arms={run_arm: ArmPrices(prices=prices)}), "plan"), []
    except SummaryError as exc:
        return False, [f"the source's calls cannot be priced at this arm's prices: {exc}"]


def prior_sample(spec: RunSpec, arm: ArmSpec, prior: ArmPrior) -> ArmSample:
    """PRIOR_TASKS tasks drawn from the prior (fixed seed): per-task resolve rates Beta(m·κ, (1 − m)·κ), each seed
    resolving with its task's rate; per-episode $ lognormal with the prior's tokens × the arm's prices as its mean
    and coefficient of variation PRIOR_COST_CV (a lease arm's $ come from the wall time instead)."""
    from compare.arm_table import fmt_usd
    from compare.pricing import explicit_cost_arrays, litellm_prices

    rng = np.random.default_rng([SIMULATION_SEED, zlib.crc32(arm.name.encode())])  # each arm its own, every time
    k, m = spec.seeds, prior.resolve_rate
    rates = np.full(PRIOR_TASKS, m) if m in (0.0, 1.0) else rng.beta(m * PRIOR_CONCENTRATION,
                                                                       (1 - m) * PRIOR_CONCENTRATION, PRIOR_TASKS)
    resolved = rng.binomial(k, rates).astype(float)
    notes = [f"priors: per-task resolve rates Beta with mean {m:g} and concentration {PRIOR_CONCENTRATION:g}"]
    model_usd: np.ndarray | None = np.zeros(PRIOR_TASKS)
    if arm.billing == "tokens":
        prices = getattr(arm, "prices", None) or litellm_prices(arm.model)
        if prices is None:
            model_usd = None
            notes.append(f"model {arm.model!r} has no price: give the arm prices for a dollar estimate")
        else:
            # An episode's tokens are the sum of many calls: the long-context tier applies per call, not to a sum.
            base = prices.model_copy(update={"above_200k": None})
            mean = float(explicit_cost_arrays(base, prompt=prior.prompt_tokens, cached=prior.cached_tokens,
                                              cache_write=0, completion=prior.completion_tokens, reasoning=0)[0])
            model_usd = _lognormal(rng, mean, PRIOR_COST_CV, (PRIOR_TASKS, k)).sum(axis=1)
            model_usd *= mean * k / model_usd.mean()  # the draws' mean is the prior's exactly: tokens × prices
            notes.append(f"priors: per-episode cost lognormal with mean {fmt_usd(mean)} and CV {PRIOR_COST_CV:g}")
    seconds = np.full(PRIOR_TASKS, prior.episode_seconds * k)  # only its mean counts: the wall time
    tokens = {"prompt": float(prior.prompt_tokens), "cached": float(prior.cached_tokens),
              "completion": float(prior.completion_tokens)}
    per_task = np.full(PRIOR_TASKS, float(k))
    return ArmSample(source=f"plan.priors.{arm.name}", run_id=None, tasks=[f"prior-{i}" for i in range(PRIOR_TASKS)],
                     resolved=resolved, attempts=per_task, episodes=per_task,
                     model_usd=model_usd, sandbox_usd=None, seconds=seconds, tokens=tokens, notes=notes)


def _lognormal(rng: np.random.Generator, mean: float, cv: float, shape) -> np.ndarray:
    if mean <= 0:
        return np.zeros(shape)
    sigma2 = math.log1p(cv * cv)
    return rng.lognormal(math.log(mean) - sigma2 / 2, math.sqrt(sigma2), shape)


# ------------------------------------------------------------------------------------------------ predictions

@dataclass
class _Arm:
    """An arm's sample at the spec's seeds: per-task scores, expected resolved attempts and $ (the lease's part
    scaled to the predicted lease), and the Avg@k score's variance parts (between tasks + Bernoulli / k)."""

    name: str
    sample: ArmSample
    scores: np.ndarray
    resolved: np.ndarray
    cost: np.ndarray | None
    between: float | None
    bernoulli: float
    seconds_per_episode: float
    exact_rows: bool  # the source ran the spec's seeds: its rows can be resampled as they are

    def variance(self, seeds: int) -> float | None:
        return None if self.between is None else self.between + self.bernoulli / seeds


def plan_from_samples(spec: RunSpec, samples: dict[str, ArmSample], tasks: int | None, tasks_note: str | None,
                      target: tuple[str, float | None] | None = None,
                      simulations: int = DEFAULT_SIMULATIONS) -> PlanDocument:
    """The plan from each arm's sample (arms missing from `samples` have no estimate) for a run of `tasks` tasks."""
    if tasks is None or tasks < 1:
        raise PlanError(f"{tasks_note or 'the suite has no tasks'}")
    k = spec.seeds
    per_episode = {name: _seconds_per_episode(s) for name, s in samples.items()}
    wall = sum(tasks * k * seconds for seconds in per_episode.values()) / spec.workers
    assumptions = [f"wall time: every arm's episodes share the spec's {spec.workers} workers; a lease arm holds "
                   "its lease for the whole wall time",
                   "interval widths: normal approximation from the per-task spread, width = 2·1.96·sd/√tasks "
                   "(delta method for cost per resolved attempt)"]
    missing = [arm.name for arm in spec.arms if arm.name not in samples]
    if missing:
        assumptions.append(f"no estimate for {', '.join(missing)}: the wall time and dollars leave them out")
    arms_plan, prepared = [], {}
    for arm in spec.arms:
        sample = samples.get(arm.name)
        if sample is None:
            arms_plan.append(ArmPlan(arm=arm.name, kind=arm.kind, billing=arm.billing, source=None,
                                     no_estimate=f"no estimate: give --pilot RUN or plan.priors.{arm.name}",
                                     episodes=tasks * k))
            continue
        row, ready = _arm_plan(spec, arm, sample, tasks, wall, per_episode[arm.name])
        arms_plan.append(row)
        prepared[arm.name] = ready
    totals = {row.arm: row.usd.get("total") for row in arms_plan}
    left_out = [name for name, usd in totals.items() if usd is None]
    comparison = _comparison(spec, prepared, tasks)
    decide, target_plan = None, None
    simulated: dict[str, tuple[list[SimulatedRun] | None, str | None]] = {}  # by question and budget: run once
    if spec.decide is not None:
        decide, why = _decide_plan(spec, spec.decide, prepared, tasks, simulations, simulated)
        if why:
            assumptions.append(why)
    if target is not None:
        target_plan = _target(spec, target, prepared, arms_plan, tasks, simulations, simulated)
    return PlanDocument(spec=spec.name, suite=spec.suite, tasks=tasks, tasks_note=tasks_note, seeds=k,
                        workers=spec.workers, episodes=tasks * k * len(spec.arms), wall_seconds=wall,
                        usd=float(sum(usd for usd in totals.values() if usd is not None)),
                        usd_leaves_out=left_out, arms=arms_plan,
                        comparison=comparison, decide=decide, target=target_plan, assumptions=assumptions)


def _seconds_per_episode(sample: ArmSample) -> float:
    return float(sample.seconds.sum() / max(sample.episodes.sum(), 1.0))


def _arm_plan(spec: RunSpec, arm: ArmSpec, sample: ArmSample, tasks: int, wall: float,
              seconds: float) -> tuple[ArmPlan, _Arm]:
    k = spec.seeds
    episodes = tasks * k
    notes = list(sample.notes)
    per_episode_model = _per_episode(sample.model_usd, sample.episodes)
    sandbox = _per_episode(sample.sandbox_usd, sample.episodes)
    gpu_hours, usd = None, {"tokens": None, "gpu": None, "sandbox": None if sandbox is None else sandbox * episodes}
    lease_per_task = None
    if arm.billing == "lease":
        sheet = arm.price_sheet()
        count = sheet["gpus"] or 1
        if sheet["gpus"] is None and getattr(arm, "gpu", None) is not None:
            notes.append("gpu.from_deployment: the GPU count is read from the cluster at run time; 1 assumed")
        gpu_hours = wall / 3600 * count
        usd["gpu"] = gpu_hours * sheet["usd_per_hour"]
        lease_per_task = usd["gpu"] / tasks
    elif arm.billing == "tokens":
        usd["tokens"] = None if per_episode_model is None else per_episode_model * episodes
    else:
        usd["tokens"] = 0.0
    model = usd["gpu"] if arm.billing == "lease" else usd["tokens"]
    usd["total"] = None if model is None else model + (usd["sandbox"] or 0.0)
    if sandbox is None and model is not None:
        notes.append("the total leaves out the sandbox cost (not known from the source)")
    ready = _prepare(arm.name, sample, k, lease_per_task, seconds)
    resolve_rate = float(sample.resolved.sum() / sample.attempts.sum()) if sample.attempts.sum() else None
    widths = {"avg_at_k": _width(ready.variance(k), tasks),
              "cost_per_resolved_attempt": _ratio_width(ready.cost, ready.resolved, tasks)}
    return ArmPlan(arm=arm.name, kind=arm.kind, billing=arm.billing, source=sample.source, episodes=episodes,
                   resolve_rate=resolve_rate, tokens_per_episode=sample.tokens, episode_seconds=seconds,
                   usd_per_episode=None if usd["total"] is None else usd["total"] / episodes, usd=usd,
                   gpu_hours=gpu_hours, widths=widths, notes=notes), ready


def _per_episode(values: np.ndarray | None, episodes: np.ndarray) -> float | None:
    if values is None:
        return None
    return float(values.sum() / max(episodes.sum(), 1.0))


def _prepare(name: str, sample: ArmSample, k: int, lease_per_task: float | None, seconds: float) -> _Arm:
    """The sample at k seeds: per task, the resolved attempts expected (rate × k) and $ (per-episode $ × k; a
    lease's attribution scaled so its mean is the predicted lease $ per task)."""
    graded = sample.attempts > 0
    rates = np.where(graded, sample.resolved / np.maximum(sample.attempts, 1), 0.0)
    scores = rates[graded]
    episodes = np.maximum(sample.episodes, 1.0)
    cost = None
    if lease_per_task is not None:
        weight = sample.model_usd if sample.model_usd is not None and sample.model_usd.sum() > 0 else sample.seconds
        per_episode = weight / episodes
        mean = per_episode.mean() * k
        cost = per_episode * k * (lease_per_task / mean) if mean > 0 else np.full(rates.size, lease_per_task)
    elif sample.model_usd is not None:
        cost = sample.model_usd / episodes * k
    if cost is not None and sample.sandbox_usd is not None:
        cost = cost + sample.sandbox_usd / episodes * k
    between, bernoulli = _score_parts(scores, sample.attempts[graded])
    exact = bool(np.all(sample.attempts == k) and np.all(sample.episodes == k))
    return _Arm(name, sample, scores, rates * k, cost, between, bernoulli, seconds, exact)


def _score_parts(scores: np.ndarray, attempts: np.ndarray) -> tuple[float | None, float]:
    """A task's Avg@k variance as between-task spread + Bernoulli / k: with ≥ 2 attempts per task the within-task
    part is estimated (p̂(1 − p̂)/(n − 1) is unbiased for Var(p̂)); with 1 the whole spread is taken as between
    tasks (wider: it does not shrink with more seeds)."""
    if scores.size < 2:
        return None, 0.0
    total = float(np.var(scores, ddof=1))
    if np.any(attempts < 2):
        return total, 0.0
    within = scores * (1 - scores) / (attempts - 1)
    return max(total - float(within.mean()), 0.0), float((scores * (1 - scores) * attempts / (attempts - 1)).mean())


def _width(variance: float | None, n: int) -> float | None:
    return None if variance is None else 2 * Z95 * math.sqrt(variance / n)


def _influence(cost: np.ndarray, resolved: np.ndarray) -> tuple[float, np.ndarray] | None:
    """θ = Σ cost ÷ Σ resolved and the delta-method influence of log θ per task; None without a ratio."""
    if cost.size < 2 or cost.sum() <= 0 or resolved.sum() <= 0:
        return None
    return float(cost.sum() / resolved.sum()), cost / cost.mean() - resolved / resolved.mean()


def _ratio_width(cost: np.ndarray | None, resolved: np.ndarray, n: int) -> float | None:
    found = None if cost is None else _influence(cost, resolved)
    if found is None:
        return None
    theta, psi = found
    return 2 * Z95 * theta * math.sqrt(float(np.var(psi, ddof=1)) / n)


def _pair(prepared: dict[str, _Arm], names: Sequence[str]) -> tuple[list[_Arm], bool]:
    """The arms aligned on the tasks one run measured for both (paired), else as they are (independent)."""
    arms = [prepared[name] for name in names]
    run_ids = {arm.sample.run_id for arm in arms}
    if len(run_ids) != 1 or None in run_ids:
        return arms, False
    shared = sorted(set.intersection(*(set(arm.sample.tasks) for arm in arms)))
    if len(shared) < 2:
        return arms, False
    return [_restrict(arm, shared) for arm in arms], True


def _restrict(arm: _Arm, tasks: list[str]) -> _Arm:
    index = {task: i for i, task in enumerate(arm.sample.tasks)}
    rows = np.array([index[task] for task in tasks])
    s = arm.sample
    sample = ArmSample(s.source, s.run_id, tasks, s.resolved[rows], s.attempts[rows], s.episodes[rows],
                       None if s.model_usd is None else s.model_usd[rows],
                       None if s.sandbox_usd is None else s.sandbox_usd[rows], s.seconds[rows], s.tokens, s.notes)
    rates = np.where(sample.attempts > 0, sample.resolved / np.maximum(sample.attempts, 1), 0.0)
    return _Arm(arm.name, sample, rates, arm.resolved[rows], None if arm.cost is None else arm.cost[rows],
                arm.between, arm.bernoulli, arm.seconds_per_episode, arm.exact_rows)


def _comparison_arms(spec: RunSpec, prepared: dict[str, _Arm]) -> list[str] | None:
    if spec.decide is not None and spec.decide.cheaper is not None:
        names = list(spec.decide.cheaper.arms)
    else:
        names = [arm.name for arm in spec.arms if arm.name in prepared][:2]
    return names if len(names) == 2 and all(name in prepared for name in names) else None


def _comparison(spec: RunSpec, prepared: dict[str, _Arm], tasks: int) -> ComparisonPlan | None:
    """The widths of the paired differences a − b: Avg@k and cost per resolved attempt."""
    names = _comparison_arms(spec, prepared)
    if names is None:
        return None
    (a, b), paired = _pair(prepared, names)
    k = spec.seeds
    if paired:
        rate_variance = float(np.var(a.scores - b.scores, ddof=1))
    else:
        va, vb = a.variance(k), b.variance(k)
        rate_variance = None if va is None or vb is None else va + vb
    return ComparisonPlan(arms=names, paired=paired,
                          widths={"avg_at_k_difference": _width(rate_variance, tasks),
                                  "cost_per_resolved_difference": _difference_width(a, b, paired, tasks)})


def _difference_width(a: _Arm, b: _Arm, paired: bool, n: int) -> float | None:
    """θa − θb's width: influence θa·ψa − θb·ψb (paired), or the two arms' variances added (independent)."""
    fa = None if a.cost is None else _influence(a.cost, a.resolved)
    fb = None if b.cost is None else _influence(b.cost, b.resolved)
    if fa is None or fb is None:
        return None
    (theta_a, psi_a), (theta_b, psi_b) = fa, fb
    if paired:
        variance = float(np.var(theta_a * psi_a - theta_b * psi_b, ddof=1))
    else:
        variance = theta_a ** 2 * float(np.var(psi_a, ddof=1)) + theta_b ** 2 * float(np.var(psi_b, ddof=1))
    return 2 * Z95 * math.sqrt(variance / n)


# ----------------------------------------------------------------------------------------- the decide Monte Carlo

def _resampling_sampler(arms: Sequence[_Arm], seeds: int) -> TaskSampler:
    """Tasks resampled with replacement from each arm's source; arms one run measured are resampled together on
    their shared tasks (the pairing kept). A source that ran other seeds gives each drawn task k seeds resolving
    at its measured rate. Each simulated run first resamples the source itself (a bootstrap of its tasks), then
    draws its tasks from that: a pilot of 25 tasks is a sample of the suite, not the suite, and a run simulated from
    it as if it were would be too sure of the pilot's effect."""
    groups: dict[str | None, list[_Arm]] = {}
    for arm in arms:
        groups.setdefault(arm.sample.run_id, []).append(arm)
    blocks: list[list[_Arm]] = []
    for run_id, members in groups.items():
        if run_id is not None and len(members) > 1:
            paired, ok = _pair({arm.name: arm for arm in members}, [arm.name for arm in members])
            blocks.extend([paired] if ok else [[arm] for arm in members])
        else:
            blocks.extend([arm] for arm in members)

    def sample(rng: np.random.Generator, n: int) -> dict[str, ArmTasks]:
        drawn = {}
        for block in blocks:
            measured = block[0].resolved.size
            rows = rng.integers(0, measured, measured)[rng.integers(0, measured, n)]  # the source resampled first
            for arm in block:
                if arm.exact_rows:
                    resolved = arm.sample.resolved[rows].astype(int)
                else:
                    resolved = rng.binomial(seeds, np.clip(arm.resolved[rows] / seeds, 0, 1))
                cost = np.zeros(n) if arm.cost is None else arm.cost[rows]
                drawn[arm.name] = ArmTasks(arm=arm.name, resolved=np.asarray(resolved, dtype=int),
                                           attempts=np.full(n, seeds), cost_usd=cost, spent_usd=float(cost.sum()))
        return {arm.name: drawn[arm.name] for arm in arms}

    return sample


def _question_arms(config: DecideConfig) -> tuple[list[str], list[str]]:
    """The arms a question needs a source for, and those whose dollars it needs."""
    costs = list(config.cheaper.arms) if config.cheaper is not None else []
    rates = [config.reaches.arm] if config.reaches is not None else []
    return list(dict.fromkeys(costs + rates)), costs


def _simulate(spec: RunSpec, config: DecideConfig, prepared: dict[str, _Arm], tasks: int, simulations: int,
              simulated: dict[str, tuple[list[SimulatedRun] | None, str | None]]
              ) -> tuple[list[SimulatedRun] | None, str | None]:
    key = config.model_dump_json()
    if key not in simulated:
        simulated[key] = _simulate_once(spec, config, prepared, tasks, simulations)
    return simulated[key]


def _simulate_once(spec: RunSpec, config: DecideConfig, prepared: dict[str, _Arm], tasks: int,
                   simulations: int) -> tuple[list[SimulatedRun] | None, str | None]:
    needed, costed = _question_arms(config)
    missing = [name for name in needed if name not in prepared]
    if missing:
        return None, (f"decide: no estimate for {', '.join(missing)}: the Monte Carlo needs one (give --pilot RUN "
                      f"or plan.priors.{missing[0]})")
    unpriced = [name for name in costed if prepared[name].cost is None]
    if unpriced:
        return None, f"decide: no dollars for {', '.join(unpriced)}: the cost question cannot be simulated"
    sampler = _resampling_sampler([prepared[arm.name] for arm in spec.arms if arm.name in prepared], spec.seeds)
    rng = np.random.default_rng(SIMULATION_SEED)
    runs = simulate_sequential(config, sampler, tasks, spec.seeds, rng, simulations, workers=spec.workers,
                               arm_count=len(spec.arms))
    return runs, None


def _decide_plan(spec: RunSpec, config: DecideConfig, prepared: dict[str, _Arm], tasks: int, simulations: int,
                 simulated: dict) -> tuple[DecidePlan | None, str | None]:
    runs, why = _simulate(spec, config, prepared, tasks, simulations, simulated)
    if runs is None:
        return None, why
    verdicts: dict[str, dict[str, float]] = {}
    for run in runs:
        for question, verdict in run.verdicts().items():
            verdicts.setdefault(question, {})
            verdicts[question][verdict] = verdicts[question].get(verdict, 0) + 1 / len(runs)
    stops = {action: sum(run.action == action for run in runs) / len(runs)
             for action in ("decided", "futile", "budget", "exhausted")}
    left_out = [arm.name for arm in spec.arms if arm.name not in prepared]
    note = ("each simulated run resamples each arm's source (a bootstrap of its tasks), then draws its tasks from "
            "that with replacement (paired across arms one run measured)"
            + (f"; the spend leaves out {', '.join(left_out)} (no estimate)" if left_out else ""))
    return DecidePlan(simulations=len(runs), seed=SIMULATION_SEED,
                      round_tasks=config.round_size(spec.workers, len(spec.arms), spec.seeds),
                      tasks=_distribution([run.tasks for run in runs]),
                      episodes=_distribution([run.episodes for run in runs]),
                      usd=_distribution([run.usd for run in runs]), decided_probability=stops["decided"],
                      stops=stops, verdicts=verdicts, sampler=note), None


def _distribution(values: Sequence[float]) -> Distribution:
    array = np.asarray(values, dtype=float)
    p10, p50, p90 = np.percentile(array, [10, 50, 90])
    return Distribution(mean=float(array.mean()), p10=float(p10), p50=float(p50), p90=float(p90))


# ------------------------------------------------------------------------------------------------- --target

def _target(spec: RunSpec, target: tuple[str, float | None], prepared: dict[str, _Arm], rows: list[ArmPlan],
            tasks: int, simulations: int, simulated: dict) -> TargetPlan:
    kind, width = target
    if kind == "avg-width":
        return TargetPlan(target=f"avg-width={width:g}",
                          arms={row.arm: _avg_width_target(prepared.get(row.arm), row, width, tasks, spec.seeds)
                                for row in rows})
    return _decide_target(spec, prepared, rows, tasks, simulations, simulated)


def _avg_width_target(arm: _Arm | None, row: ArmPlan, width: float, suite: int, seeds: int) -> dict[str, Any]:
    """The fewest tasks at the spec's seeds whose Avg@k interval is at most `width` wide; when the suite is too
    small, the fewest seeds with every task; and what those episodes cost."""
    if arm is None or arm.between is None:
        return {"tasks": None, "seeds": None, "episodes": None, "usd": None, "reachable": None,
                "note": row.no_estimate or "too few tasks in the source to estimate the spread"}
    factor = (2 * Z95 / width) ** 2
    tasks = max(2, math.ceil(factor * arm.variance(seeds)))
    chosen_seeds, note = seeds, None
    if tasks > suite:
        more = [k for k in range(seeds + 1, MAX_TARGET_SEEDS + 1) if factor * arm.variance(k) <= suite]
        if more:
            tasks, chosen_seeds = suite, more[0]
            note = f"the suite has {suite} tasks: more seeds instead"
        else:
            needed = math.ceil(factor * arm.between) if arm.between > 0 else tasks
            return {"tasks": tasks, "seeds": seeds, "episodes": tasks * seeds, "usd": _usd(row, tasks * seeds),
                    "reachable": False, "note": f"the tasks' spread alone needs {needed} tasks; the suite has {suite}"}
    episodes = tasks * chosen_seeds
    return {"tasks": tasks, "seeds": chosen_seeds, "episodes": episodes, "usd": _usd(row, episodes),
            "reachable": True, "note": note}


def _usd(row: ArmPlan, episodes: int) -> float | None:
    return None if row.usd_per_episode is None else row.usd_per_episode * episodes


def _decide_target(spec: RunSpec, prepared: dict[str, _Arm], rows: list[ArmPlan], tasks: int, simulations: int,
                   simulated: dict) -> TargetPlan:
    """The tasks by which the question is decided in DECIDE_PROBABILITY of the simulated runs (no budget cap:
    the target says what deciding costs), with every arm's episodes and dollars for that many tasks."""
    from compare.decide_spec import BudgetCaps

    config = spec.decide.model_copy(update={"budget": BudgetCaps()})
    runs, why = _simulate(spec, config, prepared, tasks, simulations, simulated)
    if runs is None:
        return TargetPlan(target="decide", note=why)
    decided_at = np.sort([run.tasks if run.action == "decided" else math.inf for run in runs])
    needed = decided_at[math.ceil(DECIDE_PROBABILITY * len(runs)) - 1]
    probability = float(np.mean(np.isfinite(decided_at)))
    if not math.isfinite(needed):
        return TargetPlan(target="decide", probability=probability,
                          note=f"decided in {probability:.0%} of simulated runs with all {tasks} tasks: not "
                               f"{DECIDE_PROBABILITY:.0%} within the suite (a larger suite, or a wider margin)")
    n = int(needed)
    episodes = n * spec.seeds * len(spec.arms)
    per_episode = [row.usd_per_episode for row in rows]
    usd = None if None in per_episode else float(sum(per_episode)) * n * spec.seeds
    return TargetPlan(target="decide", tasks=n, probability=float(np.mean(decided_at <= n)), episodes=episodes,
                      usd=usd, note=None if usd is not None else "some arm has no dollar estimate")


# ------------------------------------------------------------------------------------------------- the table

def print_plan(document: PlanDocument) -> None:
    """The plan as `leafcost plan` prints it: one row per arm, then the comparison, the Monte Carlo and the
    target, each as lines (the JSON document has every figure)."""
    from rich.table import Table

    from compare.arm_table import counted, fmt_usd
    from compare.display import shown, terminal

    console = terminal()
    table = Table(title=f"leafcost plan {shown(document.spec)}: {counted(document.tasks or 0, 'task')} × "
                        f"{counted(document.seeds, 'seed')}")
    for column in ("arm", "source", "episodes", "resolve", "$", "Avg@k ±", "$/resolved ±"):
        table.add_column(column, overflow="fold")
    for arm in document.arms:
        table.add_row(shown(arm.arm), shown(arm.source or "no estimate"), f"{arm.episodes:,}",
                      _share(arm.resolve_rate), fmt_usd(arm.usd.get("total")),
                      _half(arm.widths.get("avg_at_k")), _half_usd(arm.widths.get("cost_per_resolved_attempt")))
    console.print(table)
    if document.tasks_note:
        console.print(shown(document.tasks_note))
    hours = (document.wall_seconds or 0) / 3600
    console.print(f"{counted(document.episodes or 0, 'episode')}, {hours:.1f} h at {document.workers} workers, "
                  f"{fmt_usd(document.usd)} in all" + (f" but {', '.join(document.usd_leaves_out)}"
                                                        if document.usd_leaves_out else ""))
    for line in _lines(document):
        console.print(shown(line))


def _lines(document: PlanDocument) -> list[str]:
    from compare.arm_table import fmt_usd, figure_label

    lines = []
    for arm in document.arms:
        lines.extend(f"{arm.arm}: {note}" for note in ([arm.no_estimate] if arm.no_estimate else arm.notes))
    if document.comparison is not None:
        c = document.comparison
        widths = c.widths
        lines.append(f"{c.arms[0]} − {c.arms[1]} ({'paired' if c.paired else 'independent'}): "
                     f"{figure_label('avg_at_k')} ±{_half(widths['avg_at_k_difference'])}, cost per resolved "
                     f"attempt ±{_half_usd(widths['cost_per_resolved_difference'])}")
    if document.decide is not None:
        d = document.decide
        lines.append(f"decide ({d.simulations} simulated runs, rounds of {d.round_tasks} tasks): decided before the "
                     f"budget in {d.decided_probability:.0%}; tasks {d.tasks.p10:.0f}/{d.tasks.p50:.0f}/"
                     f"{d.tasks.p90:.0f} (p10/p50/p90), {fmt_usd(d.usd.p10)}/{fmt_usd(d.usd.p50)}/"
                     f"{fmt_usd(d.usd.p90)}")
        for question, shares in d.verdicts.items():
            lines.append(f"  {question}: " + ", ".join(f"{verdict} {_percent(share)}" for verdict, share in
                                                       sorted(shares.items(), key=lambda item: -item[1])))
    if document.target is not None:
        lines.extend(_target_lines(document.target))
    return lines


def _target_lines(target: TargetPlan) -> list[str]:
    from compare.arm_table import fmt_usd

    if target.target == "decide":
        if target.tasks is None:
            return [f"--target decide: {target.note}"]
        return [f"--target decide: {target.tasks} tasks decide it in {target.probability:.0%} of simulated runs: "
                f"{target.episodes:,} episodes, {fmt_usd(target.usd)}"]
    lines = []
    for arm, row in target.arms.items():
        if row["tasks"] is None:
            lines.append(f"--target {target.target}: {arm}: {row['note']}")
            continue
        verdict = "" if row["reachable"] else " (not reachable)"
        lines.append(f"--target {target.target}: {arm}: {row['tasks']} tasks × {row['seeds']} seeds{verdict}, "
                     f"{fmt_usd(row['usd'])}" + (f": {row['note']}" if row["note"] else ""))
    return lines


def _percent(share: float) -> str:
    return "<1%" if 0 < share < 0.01 else f"{share:.0%}"


def _share(value: float | None) -> str:
    return "n/a" if value is None else f"{value:.2f}"


def _half(width: float | None) -> str:
    return "n/a" if width is None else f"{width / 2:.3f}"


def _half_usd(width: float | None) -> str:
    from compare.arm_table import fmt_usd

    return fmt_usd(None if width is None else width / 2)
