"""The freshness split: for each arm whose spec gives the model's release date (`released:`), its Avg@k and cost per
resolved attempt on the tasks created after that day ("fresh": the model cannot have seen them) and on those created
on or before it ("seen"); tasks without a date are counted, in neither part. The figures are the summary's own
(its per-task tables and compare.stats' estimators), taken on each part's tasks."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import date, datetime
from typing import TYPE_CHECKING, Any

import numpy as np

from compare.stats import Resampler, ratio, resolve_rates

if TYPE_CHECKING:
    from compare.summary import ArmTables

# The one rule, said wherever the split is shown.
RULE = ("fresh: tasks created after the arm's release day (UTC), which its model cannot have seen; seen: tasks "
        "created on or before it")
NO_TASKS_IN_PART = "no task of this arm is in this part"


@dataclass(frozen=True)
class ArmFigures:
    """What the split needs of one arm, as the summary computed it (compare.summary.freshness_figures)."""

    arm: str
    released: date | None  # the spec's `released:`; None: the arm is not split
    tables: ArmTables  # per task: seeds with a verdict, resolved, dollars
    stopped: str | None  # why the arm has no resolve rate (a configuration error stopped it)
    no_cost: str | None  # why it has no cost number (unpriced calls, or stopped)


def task_dates(conn, run_id: str) -> dict[str, datetime]:
    """Each dated task of the run (ledger table run_tasks) with its creation time; a run recorded before the table
    existed has none."""
    rows = conn.execute("SELECT task_id, created_at FROM run_tasks WHERE run_id = ? AND created_at IS NOT NULL",
                        [run_id]).fetchall()
    return {str(task_id): created for task_id, created in rows}


def freshness_split(conn, run_id: str, arms: list[ArmFigures], *, resamples: int, seed: int
                    ) -> list[dict[str, Any]] | None:
    """The split of every arm with a release date; None when no arm has one or no task of the run has a date
    (nothing to split)."""
    released = [arm for arm in arms if arm.released is not None]
    if not released:
        return None
    dates = task_dates(conn, run_id)
    if not dates:
        return None
    return [arm_freshness(arm, dates, resamples=resamples, seed=seed) for arm in released]


def arm_freshness(arm: ArmFigures, dates: dict[str, datetime], *, resamples: int, seed: int) -> dict[str, Any]:
    """One arm's entry: its release day, both parts' figures, and how many of its tasks have no date."""
    released = arm.released
    assert released is not None
    days = [dates[task].date() if task in dates else None for task in arm.tables.tasks]
    fresh = np.array([day is not None and day > released for day in days], dtype=bool)
    seen = np.array([day is not None and day <= released for day in days], dtype=bool)
    return {"arm": arm.arm, "released": released.isoformat(),
            "fresh": _part(arm, fresh, resamples, seed), "seen": _part(arm, seen, resamples, seed),
            "undated_tasks": int((~fresh & ~seen).sum())}


def _part(arm: ArmFigures, mask: np.ndarray, resamples: int, seed: int) -> dict[str, Any]:
    """The figures on the tasks `mask` picks, as the summary computes them on all of an arm's tasks: Avg@k over
    the tasks with a verdict, cost per resolved attempt over every task (each task's attempts stay together), each
    with the bootstrap the summary draws for that many tasks."""
    n, c, cost = arm.tables.n[mask], arm.tables.c[mask], arm.tables.cost[mask]
    graded = n > 0
    part: dict[str, Any] = {"tasks": int(mask.sum()), "attempts": int(n.sum()), "resolved_attempts": int(c.sum())}
    if arm.stopped:
        part["avg_at_k"] = _none(arm.stopped)
    elif not graded.any():
        part["avg_at_k"] = _none(NO_TASKS_IN_PART if not mask.any() else "no attempt here has a verdict")
    else:
        rates = resolve_rates(n[graded], c[graded], Resampler(int(graded.sum()), resamples, seed))
        part["avg_at_k"] = rates["avg_at_k"].as_json()
    if arm.no_cost:
        part["cost_per_resolved_attempt"] = _none(arm.no_cost)
    elif not mask.any():
        part["cost_per_resolved_attempt"] = _none(NO_TASKS_IN_PART)
    else:
        part["cost_per_resolved_attempt"] = ratio(cost, c.astype(float), Resampler(len(cost), resamples, seed),
                                                  nothing="no resolved attempts").as_json()
    return part


def _none(reason: str) -> dict[str, Any]:
    return {"value": None, "ci95": None, "reason": reason}


# --- printing -----------------------------------------------------------------------------------------------------

def print_freshness(freshness: list[dict[str, Any]] | None) -> None:
    """The split as a small table below a summary (nothing when there is none), with the rule and the reasons of
    missing figures as notes."""
    if not freshness:
        return
    from rich.table import Table

    from compare.arm_table import counted, fmt_pct, fmt_usd, interval_text
    from compare.display import shown, terminal

    table = Table(title="fresh vs seen tasks", title_justify="left")
    for header in ("arm", "released", "part", "tasks", "Avg@k", "cost per resolved attempt"):
        table.add_column(header, overflow="fold")
    notes = [RULE]
    for arm in freshness:
        for name in ("fresh", "seen"):
            part = arm[name]
            rate, cost = part["avg_at_k"], part["cost_per_resolved_attempt"]
            table.add_row(shown(arm["arm"]), arm["released"], name, str(part["tasks"]),
                          _figure(rate, fmt_pct, interval_text), _figure(cost, fmt_usd, interval_text))
            notes += [f"{arm['arm']}, {name} tasks, {label}: {entry['reason']}"
                      for label, entry in (("Avg@k", rate), ("cost per resolved attempt", cost)) if entry.get("reason")]
        if arm["undated_tasks"]:
            notes.append(f"{arm['arm']}: {counted(arm['undated_tasks'], 'task')} without a date, in neither part")
    console = terminal()
    console.print(table)
    for note in dict.fromkeys(notes):  # the same reason once
        console.print(f"[dim]{shown(note)}[/dim]")


def _figure(entry: dict[str, Any], fmt, interval_text) -> str:
    """A figure with its interval on the line below, as the arm table shows them."""
    if entry["value"] is None:
        return "n/a"
    return f"{fmt(entry['value'])}\n{interval_text(entry['ci95'], fmt)}"
