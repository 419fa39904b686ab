"""Where an arm's per-task figures come from, for `leafcost plan`: a pilot run (the arm of the same name, else of the
same model), the most recent finished run of the same model in the ledger, or the spec's `plan.priors`, the
source named in the plan. A run's figures are read as `leafcost summary` reads them (compare.summary), its token
arms priced again at this spec's prices by compare.reprice; priors are priced by compare.pricing. And those
figures at the spec's seeds (`PreparedArm`), aligned on the tasks one run measured for two arms (`pair_arms`)."""

from __future__ import annotations

import math
import zlib
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from compare.arms import ArmSpec
from compare.decide_spec import ArmPrior
from compare.spec import RunSpec

SIMULATION_SEED = 20261205  # one seed: the same spec and sources give the same plan
# Priors state means only; the spread around them is assumed, and stated in the output.
PRIOR_CONCENTRATION = 2.0  # per-task resolve rates ~ Beta(m·κ, (1 − m)·κ): κ = 2 is a wide spread of difficulty
PRIOR_COST_CV = 1.0  # per-episode cost ~ lognormal with the prior's mean and this coefficient of variation
PRIOR_TASKS = 2000  # tasks drawn from the priors to stand in for a measured run


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


@dataclass
class PreparedArm:
    """An arm's sample at the spec's seeds (compare.planning prepares it): per-task scores, expected resolved
    attempts and $ (the lease's part scaled to the predicted lease), and the Avg@k score's variance parts (between
    tasks + Bernoulli / k)."""

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


def pair_arms(prepared: dict[str, PreparedArm], names: Sequence[str]) -> tuple[list[PreparedArm], bool]:
    """The arms aligned on the tasks one run measured for both (paired), else as they are (independent)."""
    arms = [prepared[name] for name in names]
    run_ids = {arm.sample.run_id for arm in arms}
    if len(run_ids) != 1 or None in run_ids:
        return arms, False
    shared = sorted(set.intersection(*(set(arm.sample.tasks) for arm in arms)))
    if len(shared) < 2:
        return arms, False
    return [_restrict(arm, shared) for arm in arms], True


def _restrict(arm: PreparedArm, tasks: list[str]) -> PreparedArm:
    index = {task: i for i, task in enumerate(arm.sample.tasks)}
    rows = np.array([index[task] for task in tasks])
    s = arm.sample
    sample = ArmSample(s.source, s.run_id, tasks, s.resolved[rows], s.attempts[rows], s.episodes[rows],
                       None if s.model_usd is None else s.model_usd[rows],
                       None if s.sandbox_usd is None else s.sandbox_usd[rows], s.seconds[rows], s.tokens, s.notes)
    rates = np.where(sample.attempts > 0, sample.resolved / np.maximum(sample.attempts, 1), 0.0)
    return PreparedArm(arm.name, sample, rates, arm.resolved[rows], None if arm.cost is None else arm.cost[rows],
                       arm.between, arm.bernoulli, arm.seconds_per_episode, arm.exact_rows)

