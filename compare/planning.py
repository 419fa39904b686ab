"""`leafcost plan`: before a run, what it will take — per arm and for the comparison, the episodes, the wall time
at the spec's workers, the dollars, and the widths of the 95 % intervals the full run would reach; with `decide:`,
a Monte Carlo of the sequential run (how many tasks, episodes and dollars it uses, how often it decides); with a
target, the tasks × seeds that reach it and their cost.

Each arm's figures come from one source, named in the output (compare.plan_sources); the Monte Carlo is
compare.plan_simulation's, over tasks resampled from the sources. A lease arm's dollars are its GPUs × $/hour over
the predicted wall time (it holds its lease while every arm's episodes run side by side)."""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import replace
from pathlib import Path
from statistics import NormalDist
from typing import Any

import numpy as np
from pydantic import BaseModel

from compare.arm_table import counted, fmt_usd
from compare.arms import ArmSpec
from compare.decide_spec import DecideConfig
from compare.plan_simulation import DEFAULT_SIMULATIONS, SimulatedRun, resampling_sampler, simulate_sequential
from compare.plan_sources import SIMULATION_SEED, ArmSample, PlanError, PreparedArm, arm_samples, pair_arms
from compare.spec import RunSpec

Z95 = NormalDist().inv_cdf(0.975)
RUN_SIMULATIONS = 100  # the plan leafcost run records before every run with decide: or plan: (modest: it waits)
DECIDE_PROBABILITY = 0.9  # --target decide: decided with at least this probability
MAX_TARGET_SEEDS = 100


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
    usd_relative_se: float | None = None  # the dollars' standard error from the source's task-to-task spread
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
    tasks, tasks_note, seen = suite_tasks_and_seen(spec)
    samples = arm_samples(spec, db, pilot)
    return plan_from_samples(spec, samples, tasks, tasks_note, parsed_target, simulations, reaches_tasks=seen)


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
        tasks, tasks_note, seen = suite_tasks_and_seen(spec)
        document = plan_from_samples(spec, samples, tasks, tasks_note, None, RUN_SIMULATIONS, reaches_tasks=seen)
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
    tasks, note, _ = suite_tasks_and_seen(spec)
    return tasks, note


def suite_tasks_and_seen(spec: RunSpec) -> tuple[int | None, str | None, np.ndarray | None]:
    """suite_tasks, and for a `decide.reaches` with `tasks: seen` which of those tasks (in the runner's order) the
    question reads, as the runner marks them (None: every task, or the suite could not be read)."""
    from compare.runner import RunError, task_order
    from sandbox import SandboxOptions, load_suite

    try:
        suite = load_suite(spec.suite, cache_dir=SandboxOptions().cache_dir, swebench_images=spec.swebench)
        ordered = task_order(suite, spec)
    except (ValueError, RunError, OSError) as exc:
        fallback = spec.limit or (len(spec.tasks) if spec.tasks else None)
        why = f"suite {spec.suite!r} could not be loaded here ({exc})"
        return fallback, why + (f": planning for {fallback} tasks (limit/tasks)" if fallback else
                                ": set limit: N in the spec to plan for N tasks"), None
    return len(ordered), None, _seen_mask(spec, ordered)


def _seen_mask(spec: RunSpec, tasks: list) -> np.ndarray | None:
    from compare.claim_check import reaches_task_mask

    try:
        return reaches_task_mask(spec, tasks)
    except ValueError as exc:  # every task fresh: the runner refuses this run for the same reason
        raise PlanError(str(exc)) from None


# ------------------------------------------------------------------------------------------------ predictions

def plan_from_samples(spec: RunSpec, samples: dict[str, ArmSample], tasks: int | None, tasks_note: str | None,
                      target: tuple[str, float | None] | None = None,
                      simulations: int = DEFAULT_SIMULATIONS, *, reaches_tasks: np.ndarray | None = None
                      ) -> PlanDocument:
    """The plan from each arm's sample (arms missing from `samples` have no estimate) for a run of `tasks` tasks.
    `reaches_tasks`: which of them (in run order) a `reaches` question with `tasks: seen` reads (None: all)."""
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
        decide, why = _decide_plan(spec, spec.decide, prepared, tasks, simulations, simulated, reaches_tasks)
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
              seconds: float) -> tuple[ArmPlan, PreparedArm]:
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
    spread = None
    if usd["total"] is not None and sample.run_id is not None:  # a measured source (priors are stated, not sampled)
        spread = _relative_se(sample.seconds if arm.billing == "lease" else sample.model_usd, sample.episodes)
    return ArmPlan(arm=arm.name, kind=arm.kind, billing=arm.billing, source=sample.source, episodes=episodes,
                   resolve_rate=resolve_rate, tokens_per_episode=sample.tokens, episode_seconds=seconds,
                   usd_per_episode=None if usd["total"] is None else usd["total"] / episodes, usd=usd,
                   usd_relative_se=spread, gpu_hours=gpu_hours, widths=widths, notes=notes), ready


def _relative_se(per_task: np.ndarray | None, episodes: np.ndarray) -> float | None:
    """The relative standard error of a source's mean per episode (dollars, or a lease's seconds) from its
    task-to-task spread, by the delta method on Σ per_task ÷ Σ episodes: how far a plan from that source may be off
    (a 25-task pilot of agent episodes: about ±20 %)."""
    if per_task is None or per_task.size < 2 or per_task.sum() <= 0 or episodes.sum() <= 0:
        return None
    influence = per_task / per_task.mean() - episodes / episodes.mean()
    return float(np.std(influence, ddof=1) / math.sqrt(per_task.size))


def _per_episode(values: np.ndarray | None, episodes: np.ndarray) -> float | None:
    if values is None:
        return None
    return float(values.sum() / max(episodes.sum(), 1.0))


def _prepare(name: str, sample: ArmSample, k: int, lease_per_task: float | None, seconds: float) -> PreparedArm:
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
    return PreparedArm(name, sample, scores, rates * k, cost, between, bernoulli, seconds, exact)


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


def _comparison_arms(spec: RunSpec, prepared: dict[str, PreparedArm]) -> list[str] | None:
    if spec.decide is not None and spec.decide.cheaper is not None:
        names = list(spec.decide.cheaper.arms)
    else:
        names = [arm.name for arm in spec.arms if arm.name in prepared][:2]
    return names if len(names) == 2 and all(name in prepared for name in names) else None


def _comparison(spec: RunSpec, prepared: dict[str, PreparedArm], tasks: int) -> ComparisonPlan | None:
    """The widths of the paired differences a − b: Avg@k and cost per resolved attempt."""
    names = _comparison_arms(spec, prepared)
    if names is None:
        return None
    (a, b), paired = pair_arms(prepared, names)
    k = spec.seeds
    if paired:
        rate_variance = float(np.var(a.scores - b.scores, ddof=1))
    else:
        va, vb = a.variance(k), b.variance(k)
        rate_variance = None if va is None or vb is None else va + vb
    return ComparisonPlan(arms=names, paired=paired,
                          widths={"avg_at_k_difference": _width(rate_variance, tasks),
                                  "cost_per_resolved_difference": _difference_width(a, b, paired, tasks)})


def _difference_width(a: PreparedArm, b: PreparedArm, paired: bool, n: int) -> float | None:
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

def _question_arms(config: DecideConfig) -> tuple[list[str], list[str]]:
    """The arms a question needs a source for, and those whose dollars it needs."""
    costs = list(config.cheaper.arms) if config.cheaper is not None else []
    rates = [config.reaches.arm] if config.reaches is not None else []
    return list(dict.fromkeys(costs + rates)), costs


def _simulate(spec: RunSpec, config: DecideConfig, prepared: dict[str, PreparedArm], tasks: int, simulations: int,
              simulated: dict[str, tuple[list[SimulatedRun] | None, str | None]],
              reaches_tasks: np.ndarray | None = None) -> tuple[list[SimulatedRun] | None, str | None]:
    key = config.model_dump_json()
    if key not in simulated:
        simulated[key] = _simulate_once(spec, config, prepared, tasks, simulations, reaches_tasks)
    return simulated[key]


def _simulate_once(spec: RunSpec, config: DecideConfig, prepared: dict[str, PreparedArm], tasks: int,
                   simulations: int, reaches_tasks: np.ndarray | None = None
                   ) -> tuple[list[SimulatedRun] | None, str | None]:
    needed, costed = _question_arms(config)
    missing = [name for name in needed if name not in prepared]
    if missing:
        return None, (f"decide: no estimate for {', '.join(missing)}: the Monte Carlo needs one (give --pilot RUN "
                      f"or plan.priors.{missing[0]})")
    unpriced = [name for name in costed if prepared[name].cost is None]
    if unpriced:
        return None, f"decide: no dollars for {', '.join(unpriced)}: the cost question cannot be simulated"
    if config.cheaper is not None:
        prepared = _shrunk_cost_effect(prepared, *config.cheaper.arms)
    sampler = resampling_sampler([prepared[arm.name] for arm in spec.arms if arm.name in prepared], spec.seeds)
    rng = np.random.default_rng(SIMULATION_SEED)
    runs = simulate_sequential(config, sampler, tasks, spec.seeds, rng, simulations, workers=spec.workers,
                               arm_count=len(spec.arms), reaches_tasks=reaches_tasks)
    return runs, None


def _shrunk_cost_effect(prepared: dict[str, PreparedArm], a: str, b: str) -> dict[str, PreparedArm]:
    """The sources with the first arm's dollars scaled so that the cost ratio's log is the source's, shrunk toward 0
    by the James–Stein factor max(0, 1 − SE²/L̂²): a source's |L̂| overstates the true effect on average (most where
    the truth is near a tie), and the simulated runs' lengths hang on it."""
    first, second = prepared[a], prepared[b]
    if first.cost is None or second.cost is None or min(first.resolved.sum(), second.resolved.sum()) <= 0:
        return prepared
    if min(first.cost.sum(), second.cost.sum()) <= 0:
        return prepared

    def influence(arm: PreparedArm) -> np.ndarray:
        return arm.cost / arm.cost.mean() - arm.resolved / arm.resolved.mean()

    log_ratio = math.log((first.cost.sum() / first.resolved.sum()) / (second.cost.sum() / second.resolved.sum()))
    if first.sample.run_id is not None and first.sample.run_id == second.sample.run_id \
            and first.resolved.size == second.resolved.size:  # one run measured both: paired
        variance = float(np.var(influence(first) - influence(second), ddof=1)) / first.resolved.size
    else:
        variance = sum(float(np.var(influence(arm), ddof=1)) / arm.resolved.size for arm in (first, second))
    if log_ratio == 0:
        return prepared
    keep = max(0.0, 1 - variance / log_ratio ** 2)
    scaled = replace(first, cost=first.cost * math.exp((keep - 1) * log_ratio))
    return {**prepared, a: scaled}


def _decide_plan(spec: RunSpec, config: DecideConfig, prepared: dict[str, PreparedArm], tasks: int, simulations: int,
                 simulated: dict, reaches_tasks: np.ndarray | None = None) -> tuple[DecidePlan | None, str | None]:
    runs, why = _simulate(spec, config, prepared, tasks, simulations, simulated, reaches_tasks)
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

def _target(spec: RunSpec, target: tuple[str, float | None], prepared: dict[str, PreparedArm], rows: list[ArmPlan],
            tasks: int, simulations: int, simulated: dict) -> TargetPlan:
    kind, width = target
    if kind == "avg-width":
        return TargetPlan(target=f"avg-width={width:g}",
                          arms={row.arm: _avg_width_target(prepared.get(row.arm), row, width, tasks, spec.seeds)
                                for row in rows})
    return _decide_target(spec, prepared, rows, tasks, simulations, simulated)


def _avg_width_target(arm: PreparedArm | None, row: ArmPlan, width: float, suite: int, seeds: int) -> dict[str, Any]:
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


def _decide_target(spec: RunSpec, prepared: dict[str, PreparedArm], rows: list[ArmPlan], tasks: int, simulations: int,
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
