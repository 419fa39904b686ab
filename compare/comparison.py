"""Arm against arm on their shared tasks: the fairness guard (what differs between the arms), paired bootstrap
differences of resolve rate and cost per resolved on the same resamples, and McNemar's test with one seed."""

from __future__ import annotations

from datetime import datetime
from typing import Any

import numpy as np

from compare.breakeven import breakeven_if_applicable
from compare.decision_record import run_decision
from compare.documents import CompareDocument, conforming
from compare.freshness import freshness_split
from compare.spec import RunSpec
from compare.stats import DEFAULT_RESAMPLES, DEFAULT_SEED, mcnemar, paired_rate_difference, paired_ratio_difference
from compare.summary import (
    ArmFacts,
    PriceOverrides,
    SummaryError,
    arm_summary_with_tables,
    freshness_figures,
    load_arms,
    load_run,
    sandbox_usd_per_vcpu_hour,
    shared_resampler,
)


class UnfairComparison(SummaryError):
    """The arms differ in what makes a comparison fair; `differences` lists how."""

    def __init__(self, differences: list[str]):
        super().__init__("the arms are not comparable: " + "; ".join(differences)
                         + " (pass --allow-mismatch to compare anyway; every output then lists these differences)")
        self.differences = differences


def differences(a: ArmFacts, b: ArmFacts, spec: RunSpec) -> list[str]:
    """What DESIGN.md calls comparable: same task set, seeds, budgets, tools, sandbox spec hash, temperature.
    Budgets and tools are per run, so two arms of one run share them; the rest is checked from the facts."""
    found = []
    tasks_a, tasks_b = _final_tasks(a), _final_tasks(b)
    if tasks_a != tasks_b:
        found.append(f"task sets differ: {len(tasks_a - tasks_b)} only in {a.arm}, {len(tasks_b - tasks_a)} only "
                     f"in {b.arm}")
    seeds_a, seeds_b = _seeds(a), _seeds(b)
    if seeds_a != seeds_b:
        found.append(f"seeds per task differ: {a.arm} {_fmt(seeds_a)}, {b.arm} {_fmt(seeds_b)}")
    temperature_a, temperature_b = _temperature(a), _temperature(b)
    if temperature_a != temperature_b:
        found.append(f"temperature differs: {a.arm} {temperature_a}, {b.arm} {temperature_b}")
    hashes_a, hashes_b = _hashes(a), _hashes(b)
    if hashes_a != hashes_b:
        found.append(f"sandbox spec hashes differ: {a.arm} {_fmt(hashes_a)}, {b.arm} {_fmt(hashes_b)}")
    prompt_a, prompt_b = a.prompt.get("prompt_source"), b.prompt.get("prompt_source")
    if None not in (prompt_a, prompt_b) and a.prompt != b.prompt:  # the oracle sends no prompt at all
        found.append(f"system prompt and tool descriptions differ: {a.arm} {_describe(a.prompt)}, "
                     f"{b.arm} {_describe(b.prompt)}")
    return found


def _describe(prompt: dict) -> str:
    commit = prompt.get("leaf_commit")
    return prompt["prompt_source"] + (f" at {commit[:12]}" if commit else "")


def compare_arms(conn, run_id: str, arm_a: str, arm_b: str, *, allow_mismatch: bool = False,
                 resamples: int = DEFAULT_RESAMPLES, seed: int = DEFAULT_SEED,
                 overrides: PriceOverrides | None = None, now: datetime | None = None) -> dict[str, Any]:
    """The `leafcost compare --json` document (compare.documents.CompareDocument): both arms' summaries, the
    fairness verdict, the paired differences (A minus B) on the tasks both finished, and the break-even when one arm
    is self-hosted and the other hosted."""
    if arm_a == arm_b:
        raise SummaryError(f"compare two different arms (got {arm_a!r} twice)")
    run = load_run(conn, run_id)
    spec = run.spec()
    a, b = load_arms(conn, run, spec, [arm_a, arm_b])
    found = differences(a, b, spec)
    if found and not allow_mismatch:
        raise UnfairComparison(found)
    price = sandbox_usd_per_vcpu_hour(spec, overrides)
    summary_a, table_a = arm_summary_with_tables(a, price, resamples=resamples, seed=seed, overrides=overrides,
                                                 now=now)
    summary_b, table_b = arm_summary_with_tables(b, price, resamples=resamples, seed=seed, overrides=overrides,
                                                 now=now)
    shared = sorted(set(table_a.tasks) & set(table_b.tasks))
    ia = np.array([table_a.tasks.index(t) for t in shared], dtype=np.int64)
    ib = np.array([table_b.tasks.index(t) for t in shared], dtype=np.int64)
    indices = shared_resampler(len(shared), resamples, seed)
    document: dict[str, Any] = {
        "run_id": run.run_id, "arms": [arm_a, arm_b], "scenario": overrides.name if overrides else None,
        "comparable": not found, "differences": found, "shared_tasks": len(shared),
        "bootstrap": {"resamples": resamples, "seed": seed, "unit": "task", "paired": True},
        "difference": "first arm minus second arm",
    }
    if not shared:
        empty = {"value": None, "ci95": None, "reason": "the arms share no finished task"}
        document.update(resolve_rate_difference=empty, cost_per_resolved_attempt_difference=empty,
                        cost_per_resolved_task_difference=empty, mcnemar=None)
    else:
        na, ca, cost_a = table_a.n[ia], table_a.c[ia], table_a.cost[ia]
        nb, cb, cost_b = table_b.n[ib], table_b.c[ib], table_b.cost[ib]
        unpriced = summary_a["unpriced_calls"] or summary_b["unpriced_calls"]
        document["resolve_rate_difference"] = _rate_difference(na, ca, nb, cb, resamples, seed)
        for key, den_a, den_b, nothing in (
                ("cost_per_resolved_attempt_difference", ca, cb, "no resolved attempts"),
                ("cost_per_resolved_task_difference", (ca > 0), (cb > 0), "no task resolved")):
            document[key] = ({"value": None, "ci95": None, "reason": "an arm has unpriced calls"} if unpriced else
                             paired_ratio_difference(cost_a, den_a.astype(float), cost_b, den_b.astype(float),
                                                     indices, nothing=nothing).as_json())
        one_seed = int(na.max()) == 1 and int(nb.max()) == 1
        document["mcnemar"] = mcnemar(ca > 0, cb > 0) if one_seed else None
    document["summaries"] = [summary_a, summary_b]
    document["breakeven"] = breakeven_if_applicable(document["summaries"])
    document["decision"] = run_decision(conn, run_id)
    document["freshness"] = freshness_split(conn, run.run_id, [freshness_figures(a, summary_a, table_a),
                                                               freshness_figures(b, summary_b, table_b)],
                                            resamples=resamples, seed=seed)
    return conforming(CompareDocument, document)


def _rate_difference(na: np.ndarray, ca: np.ndarray, nb: np.ndarray, cb: np.ndarray, resamples: int,
                     seed: int) -> dict[str, Any]:
    """Avg@k(A) − Avg@k(B) over the shared tasks both arms have a verdict on (a grading error is no miss)."""
    graded = (na > 0) & (nb > 0)
    if not graded.any():
        return {"value": None, "ci95": None, "reason": "the arms share no task with a verdict"}
    indices = shared_resampler(int(graded.sum()), resamples, seed)
    return paired_rate_difference(ca[graded], na[graded], cb[graded], nb[graded], indices).as_json()


def _final_tasks(arm: ArmFacts) -> set[str]:
    e = arm.episodes
    return {str(t) for t in e["task_id"][e["final"].astype(bool)]}


def _seeds(arm: ArmFacts) -> set[int]:
    e = arm.episodes
    finals = e["final"].astype(bool)
    tasks, counts = np.unique(e["task_id"][finals].astype(str), return_counts=True)
    return set(int(c) for c in counts) if len(tasks) else set()


def _temperature(arm: ArmFacts) -> float | None:
    return arm.spec.sampling.temperature


def _hashes(arm: ArmFacts) -> set[str]:
    return {str(h) for h in arm.episodes["sandbox_spec_hash"] if h is not None}


def _fmt(values: set[Any]) -> str:
    shown = sorted(str(v)[:12] for v in values)
    return "{" + ", ".join(shown) + "}" if shown else "{}"
