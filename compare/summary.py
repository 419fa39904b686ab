"""A run's figures per arm: resolve rates with CIs, the full cost (tokens, GPU or CPU lease, sandbox) with where
each dollar came from, and cost per resolved under both definitions with CIs. Read from the ledger with a few
aggregate queries (DuckDB does the per-call work), then numpy per task; `leafcost summary`, `compare`, the
API and the reports all print what `summarize` returns, so the numbers are the same everywhere."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from datetime import datetime, timezone
from functools import lru_cache
from typing import Any

import numpy as np

from compare.costs import (
    BUSY_COUNTERS,
    DEFAULT_WEIGHTS,
    REALTIME_TOKENS,
    Counters,
    LedgerLease,
    Work,
    attribute_lease,
    fit_weights,
    lease_cost_usd,
    lease_seconds,
    lease_window,
    marginal_cost,
    measured_saturation_tokens_per_sec,
    read_busy,
    sandbox_cost_usd,
    utilization,
)
from compare.arm_table import counted
from compare.decision_record import run_decision
from compare.documents import SummaryDocument, conforming
from compare.freshness import ArmFigures, freshness_split
from compare.ledger import RunRecord, fetch_rows
from adapters.base import IMPOSSIBLE_USAGE
from compare.pricing import UNPRICED_CALL_SQL
from compare.reconcile import UNRECORDED_SQL, unrecorded_spend
from compare.spec import RunSpec
from compare.stats import DEFAULT_RESAMPLES, DEFAULT_SEED, Resampler, ratio, resolve_rates


class SummaryError(ValueError):
    """A summary that cannot be made (unknown run or arm); the message says which."""


@dataclass
class PriceOverrides:
    """A what-if: other prices for a finished run's recorded facts (see compare.reprice)."""

    name: str
    hosted_cost_by_episode: dict[str, dict[str, float]] = field(default_factory=dict)  # arm → episode → USD
    lease_usd_per_hour: dict[str, float] = field(default_factory=dict)  # arm → per GPU / per machine
    sandbox_usd_per_vcpu_hour: float | None = None


@dataclass
class ArmFacts:
    """One arm's episodes as numpy columns, and what it was priced with."""

    arm: str
    spec: Any
    status: str
    status_reason: str | None
    prompt: dict[str, Any]  # which system prompt and tool descriptions its requests carried
    episodes: dict[str, np.ndarray]  # columns of every attempt of the arm
    price_sources: list[str]
    leases: list[LedgerLease]
    samples: Counters
    strict_grading: bool = False  # flagged attempts count as not resolved
    calls_lost: dict[str, Any] = field(default_factory=dict)  # impossible usage and unrecorded spend (_calls_lost)

    @property
    def kind(self) -> str:
        return self.spec.kind


def load_run(conn, run_id: str) -> RunRecord:
    found = fetch_rows(conn, "SELECT * FROM runs WHERE run_id = ?", [run_id])
    if not found:
        known = [r["run_id"] for r in fetch_rows(conn, "SELECT run_id FROM runs ORDER BY created_at DESC LIMIT 5")]
        hint = f" (recent runs: {', '.join(known)})" if known else " (this ledger has no runs)"
        raise SummaryError(f"no run {run_id!r} in this ledger{hint}")
    return RunRecord.from_row(found[0])


def load_arms(conn, run: RunRecord, spec: RunSpec, names: list[str] | None = None, *,
              strict: bool | None = None) -> list[ArmFacts]:
    """`strict`: count flagged attempts as not resolved (None: as the run was started, --strict-grading or not)."""
    arm_rows = {r["arm"]: r for r in fetch_rows(
        conn, "SELECT arm, status, status_reason, config->>'prompt_source' AS prompt_source, "
        "config->>'leaf_commit' AS leaf_commit FROM arms WHERE run_id = ?", [run.run_id])}
    specs = {arm.name: arm for arm in spec.arms}
    wanted = names or [arm.name for arm in spec.arms]
    unknown = [n for n in wanted if n not in specs]
    if unknown:
        raise SummaryError(f"run {run.run_id} has no arm {', '.join(map(repr, unknown))} (its arms: "
                           f"{', '.join(specs)})")
    episodes = conn.execute(_EPISODES_SQL, [run.run_id, run.run_id]).fetchnumpy()
    facts = []
    for name in wanted:
        mask = episodes["arm"] == name
        row = arm_rows.get(name, {"status": "not started", "status_reason": None})
        facts.append(ArmFacts(
            arm=name, spec=specs[name], status=row["status"], status_reason=row["status_reason"],
            prompt=_prompt(specs[name], row),
            episodes={k: np.asarray(v)[mask] for k, v in episodes.items()},
            price_sources=_price_sources(conn, run.run_id, name),
            leases=_leases(conn, run.run_id, name),
            samples=_samples(conn, run.run_id, name),
            calls_lost=_calls_lost(conn, run.run_id, name),
            strict_grading=run.strict_grading if strict is None else strict))
    return facts


# Every attempt of the run with its calls' recorded cost, the router's own figure and its unpriced calls
# (compare.pricing.UNPRICED_CALL_SQL), one row per episode: DuckDB does the per-call work.
_EPISODES_SQL = f"""
WITH calls AS (
    SELECT episode_id, sum(cost_usd) AS cost, sum(router_cost_usd) AS router_cost,
           count(router_cost_usd) AS router_calls,
           count(*) FILTER (WHERE {UNPRICED_CALL_SQL}) AS unpriced
    FROM model_calls WHERE run_id = ? GROUP BY episode_id)
SELECT e.arm, e.episode_id, e.task_id, e.seed, e.attempt, e.final, coalesce(e.resolved, false) AS resolved,
       e.infra_error, e.harness_error, coalesce(e.exit_reason, 'running') AS exit_reason,
       coalesce(e.flagged, false) AS flagged, coalesce(e.hack_paths::VARCHAR, '') AS hack_paths,
       coalesce(e.prompt_tokens, 0) AS prompt_tokens, coalesce(e.cached_tokens, 0) AS cached_tokens,
       coalesce(e.completion_tokens, 0) AS completion_tokens, coalesce(e.sandbox_cpu_seconds, 0) AS cpu_seconds,
       coalesce(e.sandbox_spec_hash, '') AS sandbox_spec_hash, coalesce(c.cost, 0) AS call_cost,
       coalesce(c.router_cost, 0) AS router_cost, coalesce(c.router_calls, 0) AS router_calls,
       coalesce(c.unpriced, 0) AS unpriced, e.sandbox_cpu_seconds IS NULL AS cpu_unmeasured,
       e.grade_error IS NOT NULL AS grading_error
FROM episodes AS e LEFT JOIN calls AS c USING (episode_id)
WHERE e.run_id = ? ORDER BY e.arm, e.task_id, e.seed, e.attempt
"""


def _leases(conn, run_id: str, arm: str) -> list[LedgerLease]:
    """The arm's leases with their heartbeat; `SELECT *` so a ledger from before the heartbeat column still reads
    (its open leases then end at `now`)."""
    rows = fetch_rows(conn, "SELECT * FROM gpu_leases WHERE run_id = ? AND arm = ? ORDER BY lease_id", [run_id, arm])
    fields = ("kind", "hardware", "count", "usd_per_hour", "started_at", "ended_at", "heartbeat_at")
    return [LedgerLease(**{k: r[k] for k in fields if k in r}) for r in rows]


def _calls_lost(conn, run_id: str, arm: str) -> dict[str, Any]:
    """Calls whose cost is not in the totals: answers with impossible usage (an endpoint error, never priced) and
    calls sent but never recorded (compare.reconcile), with their upper bound."""
    impossible = conn.execute("SELECT count(*) FROM model_calls WHERE run_id = ? AND arm = ? AND status = "
                              "'bad_response' AND starts_with(error, ?)", [run_id, arm, IMPOSSIBLE_USAGE]).fetchone()
    unrecorded = fetch_rows(conn, UNRECORDED_SQL + " AND i.arm = ?", [run_id, arm])
    return {"impossible_usage_calls": int(impossible[0]), "unrecorded_spend": unrecorded_spend(unrecorded)}


def _price_sources(conn, run_id: str, arm: str) -> list[str]:
    rows = conn.execute("SELECT DISTINCT price_source FROM model_calls WHERE run_id = ? AND arm = ? AND "
                        "price_source IS NOT NULL ORDER BY 1", [run_id, arm]).fetchall()
    return [r[0] for r in rows]


def _samples(conn, run_id: str, arm: str) -> Counters:
    """The server counters the cost model reads (compare.costs), not the histograms and gauges beside them,
    grouped by sample name and ordered by time in the query."""
    rows = conn.execute(
        "SELECT metric, list(epoch(taken_at) ORDER BY taken_at), list(value ORDER BY taken_at) FROM server_samples "
        "WHERE run_id = ? AND arm = ? AND "
        f"({' OR '.join(f'starts_with(metric, {name!r})' for name in (*BUSY_COUNTERS, REALTIME_TOKENS))}) "
        "GROUP BY metric", [run_id, arm]).fetchall()
    return Counters({metric: (np.array(seconds, dtype=np.float64), np.array(values, dtype=np.float64))
                     for metric, seconds, values in rows})


def sandbox_usd_per_vcpu_hour(spec: RunSpec, overrides: PriceOverrides | None) -> float:
    """The run's sandbox price, or the what-if's when it sets one."""
    if overrides is not None and overrides.sandbox_usd_per_vcpu_hour is not None:
        return overrides.sandbox_usd_per_vcpu_hour
    return spec.costs.sandbox_usd_per_vcpu_hour


def summarize(conn, run_id: str, *, arms: list[str] | None = None, resamples: int = DEFAULT_RESAMPLES,
              seed: int = DEFAULT_SEED, overrides: PriceOverrides | None = None,
              now: datetime | None = None, strict: bool | None = None) -> dict[str, Any]:
    """The `leafcost summary --json` document (compare.documents.SummaryDocument defines every field). `strict`
    counts flagged attempts as not resolved; None grades as the run was started (`leafcost run --strict-grading`)."""
    run = load_run(conn, run_id)
    spec = run.spec()
    strict = run.strict_grading if strict is None else strict
    facts = load_arms(conn, run, spec, arms, strict=strict)
    sandbox_price = sandbox_usd_per_vcpu_hour(spec, overrides)
    now = now or datetime.now(timezone.utc)
    computed = [(f, *arm_summary_with_tables(f, sandbox_price, resamples=resamples, seed=seed, overrides=overrides,
                                             now=now)) for f in facts]
    document = {"run_id": run.run_id, "run_status": run.status, "task_order": run.task_ids, "seeds": run.seeds,
                "sandbox_usd_per_vcpu_hour": sandbox_price,
                "bootstrap": {"resamples": resamples, "seed": seed, "unit": "task"},
                "scenario": overrides.name if overrides is not None else None, "strict_grading": strict,
                "arms": [summary for _, summary, _ in computed],
                "decision": run_decision(conn, run_id),
                "freshness": freshness_split(conn, run.run_id, [freshness_figures(*arm) for arm in computed],
                                             resamples=resamples, seed=seed)}
    return conforming(SummaryDocument, document)


@dataclass
class ArmTables:
    """Per task (in the arm's task order): seeds finished, resolved, total cost, and the cost parts."""

    tasks: list[str]
    n: np.ndarray
    c: np.ndarray
    cost: np.ndarray


def arm_summary(facts: ArmFacts, sandbox_price: float, *, resamples: int, seed: int,
                overrides: PriceOverrides | None = None, now: datetime | None = None) -> dict[str, Any]:
    summary, _ = arm_summary_with_tables(facts, sandbox_price, resamples=resamples, seed=seed, overrides=overrides,
                                         now=now)
    return summary


def arm_summary_with_tables(facts: ArmFacts, sandbox_price: float, *, resamples: int, seed: int,
                            overrides: PriceOverrides | None = None, now: datetime | None = None
                            ) -> tuple[dict[str, Any], ArmTables]:
    e = facts.episodes
    episode_ids = [str(x) for x in e["episode_id"]]
    finals = e["final"].astype(bool)
    tasks = sorted({str(t) for t in e["task_id"][finals]})
    index = {t: i for i, t in enumerate(tasks)}
    in_tasks = np.array([str(t) in index for t in e["task_id"]], dtype=bool)
    task_of = np.array([index.get(str(t), -1) for t in e["task_id"]], dtype=np.int64)
    verdicts = finals & with_verdict(e, facts.strict_grading)
    no_verdict = int((finals & ~verdicts).sum())
    n = np.bincount(task_of[verdicts], minlength=len(tasks))  # seeds with a verdict: the rates' denominators
    c = np.bincount(task_of[verdicts & counted_resolved(facts)], minlength=len(tasks))
    seeds = np.bincount(task_of[finals], minlength=len(tasks))
    stopped = configuration_stop(facts)

    token_cost, router_cost, unpriced = _token_costs(facts, episode_ids, overrides)
    billed = ~unbilled_sandbox(e)
    sandbox = np.array([sandbox_cost_usd(float(s), sandbox_price) if bill else 0.0
                        for s, bill in zip(e["cpu_seconds"], billed)])
    lease_part = _lease_parts(facts, episode_ids, e, overrides, now)
    per_episode = token_cost + lease_part["attributed"] + sandbox
    cost_by_task = np.bincount(task_of[in_tasks], weights=per_episode[in_tasks], minlength=len(tasks))

    attempts = int(finals.sum())
    indices = shared_resampler(len(tasks), resamples, seed)
    rates, no_rate = _rates(n, c, resamples, seed, stopped, grading_errors=no_verdict)
    priced = unpriced == 0
    no_cost = stopped or (None if priced else
                          f"{counted(unpriced, 'hosted call')} {'is' if unpriced == 1 else 'are'} unpriced "
                          "(no price for their model): no cost number")
    total = float(per_episode.sum()) if priced else None
    sandbox_measured, sandbox_reason = _sandbox_measured(e["cpu_unmeasured"].astype(bool)[billed])
    summary: dict[str, Any] = {
        "arm": facts.arm, "kind": facts.kind, "adapter": facts.spec.adapter, "model": facts.spec.model,
        "status": facts.status, "status_reason": facts.status_reason,
        "tasks": len(tasks), "seeds": int(seeds.max()) if len(seeds) else 0, "attempts": attempts,
        "attempts_including_retries": int(len(episode_ids)),
        "resolved_attempts": int(c.sum()), "resolved_tasks": int((c > 0).sum()),
        **_flags(facts, finals),
        "avg_at_k": rates["avg_at_k"].as_json() if rates else _none(no_rate),
        "pass_at_k": {str(k): v.as_json() for k, v in rates["pass_at_k"].items()} if rates else {},
        "pass_hat_k": {str(k): v.as_json() for k, v in rates["pass_hat_k"].items()} if rates else {},
        **_error_rates(e, finals),
        **facts.prompt,
        "cost_usd": {"total": total, "tokens": float(token_cost.sum()) if priced else None,
                     "gpu": float(lease_part["attributed"].sum()),
                     "sandbox": float(sandbox.sum()) if sandbox_measured else None},
        "cost_per_resolved_attempt": _cost_per_resolved(cost_by_task, c, indices, no_cost, "no resolved attempts"),
        "cost_per_resolved_task": _cost_per_resolved(cost_by_task, (c > 0).astype(float), indices, no_cost,
                                                     "no task resolved"),
        "utilization": lease_part["utilization"],
        "price_source": _price_source(facts, overrides),
        "unpriced_calls": int(unpriced),
        **facts.calls_lost,
        "router_reported_cost_usd": router_cost,
        "lease": lease_part["detail"],
        "sandbox_cpu_seconds": float(e["cpu_seconds"].sum()),
        "sandbox_cost_reason": sandbox_reason,
    }
    return summary, ArmTables(tasks=tasks, n=n, c=c, cost=cost_by_task)


def freshness_figures(facts: ArmFacts, summary: dict[str, Any], tables: ArmTables) -> ArmFigures:
    """What compare.freshness splits of an arm: its per-task tables and why a figure is missing for all of them."""
    stopped = configuration_stop(facts)
    unpriced = summary["cost_per_resolved_attempt"].get("reason") if summary["cost_usd"]["total"] is None else None
    return ArmFigures(arm=facts.arm, released=facts.spec.released, tables=tables, stopped=stopped,
                      no_cost=stopped or unpriced)


CONFIGURATION_STOP = "configuration_error"


def with_verdict(e: dict[str, np.ndarray], strict: bool = False) -> np.ndarray:
    """Attempts the verifier gave a verdict on. Not those it could not grade (no reward, an invalid one, a timeout:
    a grading error) nor those a configuration error ended (never graded): neither is the model's miss, so neither
    is in a resolve rate's denominator. Every other attempt has a verdict; a failed one, resolved or not, counts.
    Strict figures count grading errors as misses: code under test that kills its verifier would otherwise turn a
    miss into an attempt left out of the rates."""
    stopped = e["exit_reason"] == CONFIGURATION_STOP
    return ~stopped if strict else ~(e["grading_error"].astype(bool) | stopped)


def configuration_stop(facts: ArmFacts) -> str | None:
    """Why the arm has no resolve rate when a configuration error (401, 404, an unknown model) stopped it: the
    episodes that ran say nothing of the model, and the others never ran. None for every other arm, and for one
    resumed since with the error fixed (no longer `failed`): its configuration error is then one seed without a
    verdict."""
    e = facts.episodes
    if facts.status != "failed" or not bool(((e["exit_reason"] == CONFIGURATION_STOP) & e["final"].astype(bool)).any()):
        return None
    return (f"the arm {facts.status_reason or 'stopped after a configuration error'}; it has no resolve rate and no "
            "cost per resolved")


def unbilled_sandbox(e: dict[str, np.ndarray]) -> np.ndarray:
    """Attempts whose sandbox is not billed: those a configuration error ended and, in an arm it stopped, those it
    cancelled. Their model calls (answered or refused) are billed as every call is."""
    ended = e["exit_reason"] == CONFIGURATION_STOP
    stopped = bool((ended & e["final"].astype(bool)).any())
    return ended | (stopped & (e["exit_reason"] == "cancelled"))


def _rates(n: np.ndarray, c: np.ndarray, resamples: int, seed: int, stopped: str | None, *,
           grading_errors: int) -> tuple[dict | None, str]:
    """The resolve rates over the tasks with a verdict (their own resampler when some task has none), or None and
    why there are none."""
    if stopped:
        return None, stopped
    graded = n > 0
    if not graded.any():
        if grading_errors:
            return None, f"no attempt has a verdict: {grading_errors} grading error(s) (see grading_errors)"
        return None, "no finished episodes"
    return resolve_rates(n[graded], c[graded], shared_resampler(int(graded.sum()), resamples, seed)), ""


def counted_resolved(facts: ArmFacts) -> np.ndarray:
    """Per attempt, whether it counts as resolved: the verifier's verdict, less the flagged attempts (a patch
    touching the test harness, sandbox.reward_hacking) when the figures are strict."""
    resolved = facts.episodes["resolved"].astype(bool)
    return resolved & ~facts.episodes["flagged"].astype(bool) if facts.strict_grading else resolved


def _flags(facts: ArmFacts, finals: np.ndarray) -> dict[str, Any]:
    """The final attempts the verifier resolved whose patch touches the test harness (or could not be checked),
    each with its paths (null: no patch was captured to check)."""
    e = facts.episodes
    flagged = finals & e["resolved"].astype(bool) & e["flagged"].astype(bool)
    entries = [{"task_id": str(e["task_id"][i]), "seed": int(e["seed"][i]), "episode_id": str(e["episode_id"][i]),
                "paths": json.loads(str(e["hack_paths"][i])) if str(e["hack_paths"][i]) else None}
               for i in np.flatnonzero(flagged)]
    return {"strict_grading": facts.strict_grading, "flagged_attempts": len(entries), "flagged": entries}


def _sandbox_measured(unmeasured: np.ndarray) -> tuple[bool, str | None]:
    """Whether any attempt's sandbox CPU was measured, and why the sandbox cost is missing or partial: never $0 for
    what nothing measured."""
    missing = int(unmeasured.sum())
    if not missing:
        return True, None
    reason = (f"not measured for {missing} of {counted(len(unmeasured), 'attempt')}: no cgroup measured their CPU "
              "(the prlimit fallback without root, or a container engine on another machine)")
    if missing == len(unmeasured):
        return False, reason
    return True, reason + "; the sandbox cost counts the measured attempts only"


@lru_cache(maxsize=8)
def shared_resampler(n_tasks: int, resamples: int, seed: int) -> Resampler:
    """One resampler per task count: arms over the same tasks reuse its draws (the costly part of a summary)."""
    return Resampler(n_tasks, resamples, seed)


def _token_costs(facts: ArmFacts, episode_ids: list[str], overrides: PriceOverrides | None
                 ) -> tuple[np.ndarray, float | None, int]:
    """Per episode: the hosted calls' cost (recorded, or repriced), the router's own total, unpriced calls."""
    e = facts.episodes
    repriced = overrides.hosted_cost_by_episode.get(facts.arm) if overrides is not None else None
    if repriced is not None:
        costs, unpriced = np.array([repriced.get(eid, 0.0) for eid in episode_ids]), 0
    else:
        costs, unpriced = e["call_cost"].astype(np.float64), int(e["unpriced"].sum())
    router = float(e["router_cost"].sum()) if int(e["router_calls"].sum()) else None
    return costs, router, unpriced


def _lease_parts(facts: ArmFacts, episode_ids: list[str], e: dict[str, np.ndarray],
                 overrides: PriceOverrides | None, now: datetime | None) -> dict[str, Any]:
    """A self-hosted arm's leases attributed to its episodes by weighted work (fully loaded), with the marginal
    cost at saturation and the utilization beside it."""
    attributed = np.zeros(len(episode_ids))
    if not facts.leases:
        return {"attributed": attributed, "utilization": None, "detail": None}
    price = overrides.lease_usd_per_hour.get(facts.arm) if overrides is not None else None
    leases = [lease.model_copy(update={"usd_per_hour": price}) if price is not None else lease
              for lease in facts.leases]
    works = {eid: Work(uncached_prefill=int(p - ca), cached_prefill=int(ca), decode=int(co))
             for eid, p, ca, co in zip(episode_ids, e["prompt_tokens"], e["cached_tokens"], e["completion_tokens"])}
    weights = fit_weights(facts.samples) or DEFAULT_WEIGHTS
    total = sum(lease_cost_usd(lease, now) for lease in leases)
    shares = attribute_lease(total, works, weights)
    attributed = np.array([shares.get(eid, 0.0) for eid in episode_ids])
    busy = read_busy(facts.samples.within(*lease_window(leases, now)))  # the bill's window, not the samples'
    if facts.spec.busy_counter_missing and busy.seconds is None:
        busy = busy._replace(reason=facts.spec.busy_counter_missing)
    util = utilization(busy.seconds, leases[0], now) if len(leases) == 1 else None
    seconds = sum(lease_seconds(lease, now) for lease in leases)
    # the marginal cost's $/s: every lease's GPUs (leases of one arm follow one another, e.g. after a resume)
    usd_per_second = total / seconds if seconds else 0.0
    saturation = facts.spec.stated_saturation()
    saturation_source = "spec" if saturation else None
    if saturation is None:
        saturation = measured_saturation_tokens_per_sec(facts.samples)
        saturation_source = "measured from server samples" if saturation else None
    marginal = None
    if saturation:
        marginal = float(sum(marginal_cost(works, weights, usd_per_second=usd_per_second,
                                           saturation_tokens_per_sec=saturation).values()))
    detail = {"kind": leases[0].kind, "hardware": leases[0].hardware, "count": leases[0].count,
              "usd_per_hour": leases[0].usd_per_hour, "seconds": seconds, "cost_usd": total,
              "fully_loaded_usd": total, "marginal_usd": marginal,
              "saturation_tokens_per_sec": saturation, "saturation_source": saturation_source,
              "busy_seconds": busy.seconds, "busy_counter": busy.counter, "weights": weights.model_dump(),
              "open": any(lease.ended_at is None for lease in leases)}
    if busy.counter is None:
        detail["busy_counter_reason"] = busy.reason
    if util is None:
        detail["utilization_reason"] = busy.reason if busy.seconds is None else "several leases: see busy_seconds"
    if marginal is None:
        detail["marginal_reason"] = ("no saturation throughput: set gpu.saturation_tokens_per_sec or enable the "
                                     "server's metrics")
    return {"attributed": attributed, "utilization": util, "detail": detail}


# Harness errors with a rate of their own: each says what to fix (the parser flag, the arm, the task).
HARNESS_ERROR_KINDS = ("parser_misconfigured", "configuration_error", "task_error")


def _error_rates(e: dict[str, np.ndarray], finals: np.ndarray) -> dict[str, float | int | None]:
    count = int(finals.sum())
    grading = e["grading_error"][finals].astype(bool)
    names = ["harness_error_rate", "infra_error_rate", "grading_error_rate",
             *(f"{kind}_rate" for kind in HARNESS_ERROR_KINDS)]
    if not count:
        return {"grading_errors": 0, **dict.fromkeys(names)}
    reasons = e["exit_reason"][finals]
    return {"harness_error_rate": float(e["harness_error"][finals].astype(bool).mean()),
            "infra_error_rate": float(e["infra_error"][finals].astype(bool).mean()),
            "grading_errors": int(grading.sum()), "grading_error_rate": float(grading.mean()),
            **{f"{kind}_rate": float((reasons == kind).mean()) for kind in HARNESS_ERROR_KINDS}}


def _prompt(spec: Any, row: dict[str, Any]) -> dict[str, Any]:
    """Runs recorded before the prompt source was stored sent leafcost's words; the oracle sends nothing."""
    if spec.kind == "oracle":
        return {"prompt_source": None}
    return {"prompt_source": row.get("prompt_source") or "leafcost", "leaf_commit": row.get("leaf_commit")}


def _cost_per_resolved(cost_by_task: np.ndarray, denominator: np.ndarray, indices, no_cost: str | None,
                       nothing: str) -> dict[str, Any]:
    if no_cost:
        return _none(no_cost)
    if len(cost_by_task) == 0:
        return _none("no finished episodes")
    return ratio(cost_by_task, denominator.astype(float), indices, nothing=nothing).as_json()


def _price_source(facts: ArmFacts, overrides: PriceOverrides | None) -> str:
    if overrides is not None and (facts.arm in overrides.hosted_cost_by_episode
                                  or facts.arm in overrides.lease_usd_per_hour):
        return f"scenario {overrides.name}"
    if facts.kind == "self-hosted":
        return "lease"
    if facts.kind == "oracle":
        return "none (sandbox only)"
    sources = [s for s in facts.price_sources if s != "lease"]
    return "+".join(sources) if sources else facts.spec.price_sheet()["source"]


def _none(reason: str) -> dict[str, Any]:
    return {"value": None, "ci95": None, "reason": reason}


def dumps(document: dict[str, Any]) -> str:
    """The one JSON rendering of every summary document (CLI and API print exactly this)."""
    return json.dumps(document, indent=2, ensure_ascii=False, default=_default) + "\n"


def _default(value: Any) -> Any:
    if isinstance(value, datetime):
        return value.isoformat()
    if isinstance(value, np.generic):
        return value.item()
    raise TypeError(f"cannot render {type(value).__name__} as JSON")

