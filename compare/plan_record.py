"""A run's plan beside what the run did. `run_plan` reads the plan `leafcost run` recorded just before the run
started (run_plans: compare.planning's PlanDocument) and sets its predictions against the run's figures
(compare.summary's document): episodes, dollars per episode, per arm and in all, wall time, the 95 % interval
widths of Avg@k and cost per resolved attempt, and with decide: the tasks, episodes and dollars the simulated runs
used and how often they decided. `plan_headline` and `plan_table` put it in words and in a table for the web page
and the report, which compute nothing themselves.

A plan predicts the whole run (every task of the spec); a run that stopped early, or is still running, used fewer
tasks, so each figure that grows with the tasks is predicted at the tasks the run used: counts and dollars pro rata,
interval widths × √(planned ÷ used) (a width shrinks as 1/√tasks)."""

from __future__ import annotations

import json
import math
from datetime import datetime
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from compare.arm_table import counted, figure_label, fmt_usd
from compare.ledger import fetch_rows
from compare.planning import ArmPlan, PlanDocument

Figure = Literal["tasks", "episodes", "usd_per_episode", "usd", "wall_seconds", "avg_at_k_width",
                 "cost_per_resolved_attempt_width", "decide_tasks", "decide_episodes", "decide_usd", "decided"]
LABELS: dict[str, str] = {
    "tasks": "tasks", "episodes": "episodes", "usd_per_episode": "$ per episode", "usd": "$",
    "wall_seconds": "wall time", "avg_at_k_width": f"{figure_label('avg_at_k')} 95 % width",
    "cost_per_resolved_attempt_width": "$ per resolved attempt 95 % width",
    "decide_tasks": "decide: tasks, p50 (p10–p90)", "decide_episodes": "decide: episodes, p50 (p10–p90)",
    "decide_usd": "decide: $, p50 (p10–p90)", "decided": "decide: decided"}


class PlanRow(BaseModel):
    """One figure of the plan against the run: planned (at the tasks the run used, for a figure that grows with
    them) and actual; a decide: row also has the simulated runs' 10th and 90th percentiles."""

    model_config = ConfigDict(extra="forbid")

    figure: Figure = Field(description="which figure (docs/decisions.md): decide_* rows are the Monte Carlo's")
    arm: str | None = Field(description="the arm; null for the whole run")
    planned: float | None = Field(description="the plan's prediction (the p50 for a decide_* row; the probability "
                                              "of deciding for `decided`); null when the plan has none")
    planned_p10: float | None = Field(None, description="decide_* rows: the simulated runs' 10th percentile")
    planned_p90: float | None = Field(None, description="decide_* rows: the simulated runs' 90th percentile")
    actual: float | None = Field(description="what the run did (decided: 1 or 0; null while it runs); null when "
                                             "the run has no such figure")


class RunPlanDocument(BaseModel):
    """`GET /runs/{run_id}/plan`: the plan recorded when the run started, and each prediction against the run."""

    model_config = ConfigDict(extra="forbid")

    run_id: str = Field(description="the run's id")
    made_at: datetime = Field(description="when the plan was made and recorded, as the run started")
    planned_tasks: int | None = Field(description="the tasks the plan was made for (the spec's)")
    tasks_run: int = Field(description="the tasks the run used: the most any arm has a final attempt on")
    rows: list[PlanRow] = Field(description="each figure planned against actual, the run's rows first, then per "
                                            "arm, then decide:")
    plan: PlanDocument = Field(description="the plan as `leafcost plan --json` prints it")


def run_plan(conn, run_id: str, summary: dict[str, Any] | None = None) -> dict[str, Any] | None:
    """The run's plan against what it did (a RunPlanDocument as JSON), or None for a run without a recorded plan
    (or no such run). `summary` is the run's summary document (computed here when not given)."""
    found = fetch_rows(conn, "SELECT made_at, document FROM run_plans WHERE run_id = ?", [run_id])
    if not found:
        return None
    raw = found[0]["document"]
    plan = PlanDocument.model_validate(json.loads(raw) if isinstance(raw, str) else raw)
    if summary is None:
        from compare.summary import summarize

        summary = summarize(conn, run_id)
    arms = {arm["arm"]: arm for arm in summary["arms"]}
    tasks_run = max((int(arm["tasks"]) for arm in arms.values()), default=0)
    rows = _run_rows(plan, arms, tasks_run, _wall_seconds(conn, run_id))
    for arm in plan.arms:
        if arm.arm in arms:
            rows += _arm_rows(plan, arm, arms[arm.arm], tasks_run)
    rows += _decide_rows(plan, summary.get("decision"), arms)
    document = RunPlanDocument(run_id=run_id, made_at=found[0]["made_at"], planned_tasks=plan.tasks,
                               tasks_run=tasks_run, rows=rows, plan=plan)
    return document.model_dump(mode="json")


def plan_headline(document: dict[str, Any]) -> str:
    """What was planned, from which sources, and at how many tasks the table's predictions are taken."""
    plan = document["plan"]
    planned, used = document["planned_tasks"] or 0, document["tasks_run"]
    sources = "; ".join(f"{arm['arm']}: {arm['source'] or 'no estimate'}" for arm in plan["arms"])
    line = (f"planned {document['made_at'][:16].replace('T', ' ')} UTC, before the run: "
            f"{counted(planned, 'task')} × {counted(plan['seeds'], 'seed')} ({sources})")
    if used != planned:
        line += f"; the run used {counted(used, 'task')}: the plan's figures are taken at {used:,}"
    return line


def plan_table(document: dict[str, Any]) -> tuple[list[str], list[list[str]]]:
    """The rows as (headers, rows of text): figure, arm ("all" for the run), planned, actual."""
    rows = [[LABELS[row["figure"]], row["arm"] or "all", _planned_text(row), _shown(row["figure"], row["actual"])]
            for row in document["rows"]]
    return ["figure", "arm", "planned", "actual"], rows


# ------------------------------------------------------------------------------------------------- the rows

def _scale(plan: PlanDocument, used: int) -> float | None:
    """Planned figures that grow with the tasks are taken at the tasks used: this share of the whole plan."""
    return used / plan.tasks if plan.tasks and used else None


def _times(value: float | None, factor: float | None) -> float | None:
    return None if value is None or factor is None else value * factor


def _run_rows(plan: PlanDocument, arms: dict[str, dict[str, Any]], used: int, wall: float | None) -> list[PlanRow]:
    share = _scale(plan, used)
    priced = [arm.arm for arm in plan.arms if arm.arm not in plan.usd_leaves_out and arm.arm in arms]
    costs = [arms[name]["cost_usd"]["total"] for name in priced]
    return [PlanRow(figure="tasks", arm=None, planned=plan.tasks, actual=used),
            PlanRow(figure="episodes", arm=None, planned=_times(plan.episodes, share),
                    actual=sum(int(arm["attempts"]) for arm in arms.values())),
            PlanRow(figure="usd", arm=None, planned=_times(plan.usd, share),
                    actual=None if None in costs else float(sum(costs))),
            PlanRow(figure="wall_seconds", arm=None, planned=_times(plan.wall_seconds, share), actual=wall)]


def _arm_rows(plan: PlanDocument, arm: ArmPlan, actual: dict[str, Any], used: int) -> list[PlanRow]:
    share = _scale(plan, used)
    widen = None if share is None else 1 / math.sqrt(share)
    cost, attempts = actual["cost_usd"]["total"], int(actual["attempts"])
    return [PlanRow(figure="episodes", arm=arm.arm, planned=_times(arm.episodes, share), actual=attempts),
            PlanRow(figure="usd_per_episode", arm=arm.arm, planned=arm.usd_per_episode,
                    actual=cost / attempts if cost is not None and attempts else None),
            PlanRow(figure="usd", arm=arm.arm, planned=_times(arm.usd.get("total"), share), actual=cost),
            PlanRow(figure="avg_at_k_width", arm=arm.arm, planned=_times(arm.widths.get("avg_at_k"), widen),
                    actual=_width(actual["avg_at_k"])),
            PlanRow(figure="cost_per_resolved_attempt_width", arm=arm.arm,
                    planned=_times(arm.widths.get("cost_per_resolved_attempt"), widen),
                    actual=_width(actual["cost_per_resolved_attempt"]))]


def _width(estimate: dict[str, Any] | None) -> float | None:
    """The summary's 95 % interval width; None without both bounds."""
    bounds = (estimate or {}).get("ci95") or [None, None]
    return None if None in bounds else float(bounds[1] - bounds[0])


def _decide_rows(plan: PlanDocument, decision: dict[str, Any] | None,
                 arms: dict[str, dict[str, Any]]) -> list[PlanRow]:
    """The Monte Carlo's tasks, episodes and dollars (p10, p50, p90) and decided share against the run's stop."""
    simulated = plan.decide
    if simulated is None:
        return []
    final = (decision or {}).get("final") or {}
    looks = (decision or {}).get("looks") or []
    status = (decision or {}).get("status")
    spent = looks[-1]["spent_usd"] if looks else {}
    rows = []
    for figure, distribution, actual in (
            ("decide_tasks", simulated.tasks, final.get("tasks")),
            ("decide_episodes", simulated.episodes, looks[-1]["episodes"] if looks else None),
            ("decide_usd", simulated.usd, float(sum(spent.values())) if spent else None)):
        rows.append(PlanRow(figure=figure, arm=None, planned=distribution.p50, planned_p10=distribution.p10,
                            planned_p90=distribution.p90, actual=actual))
    decided = None if status in (None, "running") else float(status == "decided")
    rows.append(PlanRow(figure="decided", arm=None, planned=simulated.decided_probability, actual=decided))
    return rows


def _wall_seconds(conn, run_id: str) -> float | None:
    """The run's wall time: its first episode's start to its last one's end (a resume's pause included)."""
    rows = fetch_rows(conn, "SELECT date_diff('millisecond', min(started_at), max(ended_at)) AS ms FROM episodes "
                            "WHERE run_id = ? AND status = 'finished'", [run_id])
    ms = rows[0]["ms"] if rows else None
    return None if ms is None else ms / 1000


# ------------------------------------------------------------------------------------------------- the text

def _planned_text(row: dict[str, Any]) -> str:
    figure = row["figure"]
    if figure == "decided":  # planned: the share of simulated runs that decided
        return "n/a" if row["planned"] is None else f"{row['planned']:.0%}"
    shown = _shown(figure, row["planned"])
    if row.get("planned_p10") is None or row.get("planned_p90") is None:
        return shown
    return f"{shown} ({_shown(figure, row['planned_p10'])}–{_shown(figure, row['planned_p90'])})"


def _shown(figure: str, value: float | None) -> str:
    if figure == "decided":  # actual: whether the run stopped decided
        return "running" if value is None else "yes" if value == 1 else "no"
    if value is None:
        return "n/a"
    if figure in ("usd", "usd_per_episode", "cost_per_resolved_attempt_width", "decide_usd"):
        return fmt_usd(value)
    if figure == "wall_seconds":
        return _duration(value)
    if figure == "avg_at_k_width":
        return f"{value:.3f}"
    return f"{value:,.0f}"


def _duration(seconds: float) -> str:
    if seconds < 120:
        return f"{seconds:.0f} s"
    if seconds < 7200:
        return f"{seconds / 60:.0f} min"
    return f"{seconds / 3600:.1f} h"
