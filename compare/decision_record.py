"""What a run's decision says once recorded, for every surface: `run_decision` reads the run's question and its
looks (decision_looks) into the `decision` document (compare.documents.DecisionDocument) that the summary, the
comparison and `GET /runs/{id}/decision` carry; `headline`, `outcome` and `look_table` put it in words and in a
table for the terminal, the web page and the report. It reads the ledger only: no figure is computed here, so a
stopped run's decision reads the same every time."""

from __future__ import annotations

import json
from typing import Any

from compare.arm_table import counted, fmt_usd
from compare.documents import DecisionDocument, conforming
from compare.ledger import fetch_rows
from compare.ledger.writer import parse_look

LOOK_FIELDS = ("look", "looked_at", "tasks", "total_tasks", "episodes", "spent_usd", "budget", "action", "reason")
ACTIONS = {"continue": "went on", "decided": "stopped: decided", "futile": "stopped: out of reach",
           "budget": "stopped: budget", "exhausted": "stopped: no tasks left"}


def run_decision(conn, run_id: str) -> dict[str, Any] | None:
    """The run's decision for display: None for a run without a decision question (or no such run). `status` is
    decided, undecided (stopped at the budget or with no tasks left) or running (no stop recorded yet)."""
    found = fetch_rows(conn, "SELECT spec_json, status, status_reason FROM runs WHERE run_id = ?", [run_id])
    if not found:
        return None
    spec = found[0]["spec_json"]
    question = (json.loads(spec) if isinstance(spec, str) else spec).get("decide")
    if question is None:
        return None
    looks = [parse_look(row) for row in fetch_rows(
        conn, "SELECT * FROM decision_looks WHERE run_id = ? ORDER BY look", [run_id])]
    last = looks[-1] if looks else {}
    stop = last.get("action")
    status = "running" if stop in (None, "continue") else "decided" if stop == "decided" else "undecided"
    line = last.get("reason")
    if status == "running" and found[0]["status"] != "running":  # it ended between looks, without a stop
        status, line = "ended", _ended_line(conn, run_id, found[0]["status"], found[0]["status_reason"], len(looks))
    return conforming(DecisionDocument, {
        "status": status, "stop": stop, "line": line, "question": question, "final": last.get("result"),
        "unspent_episodes": last.get("unspent_episodes"), "unspent_usd": last.get("unspent_usd"),
        "looks": [{key: look[key] for key in LOOK_FIELDS} for look in looks]})


def _ended_line(conn, run_id: str, run_status: str, reason: str | None, looks: int) -> str:
    """Why a run ended without its question stopping it: an arm a configuration error stopped (no decision can
    pair it any more), or the run interrupted or failed (a resume goes on)."""
    stopped = fetch_rows(conn, "SELECT arm, status_reason FROM arms WHERE run_id = ? AND status = 'failed' "
                               "ORDER BY arm", [run_id])
    after = f"after {counted(looks, 'look')}"
    if stopped:
        return (f"undecided: arm {stopped[0]['arm']} {stopped[0]['status_reason'] or 'failed'} ({after}); fix it "
                "and resume the run")
    why = f": {reason}" if reason else ""
    return f"undecided: the run was {run_status} {after}{why}; resume it to go on"


def headline(decision: dict[str, Any]) -> str:
    """The verdict line: the stop's own line ("decided after 6 of 30 tasks: ..."), or how far a decision that is
    still running has got ("deciding: 2 looks so far, undecided")."""
    if decision["status"] != "running" and decision.get("line"):
        return decision["line"]
    looks = len(decision["looks"])
    if looks == 0:
        return "deciding: no look yet (the first comes after the first round of tasks)"
    return f"deciding: {counted(looks, 'look')} so far, undecided"


def outcome(decision: dict[str, Any]) -> str | None:
    """What the stop left: the evaluation not spent once decided, the plan's further tasks when undecided (None
    while running, or when the plan gives no number)."""
    if decision["status"] == "decided":
        return (f"{fmt_usd(decision.get('unspent_usd'))} of evaluation not spent: "
                f"{counted(decision.get('unspent_episodes') or 0, 'episode')} of the spec not run")
    if decision["status"] == "undecided":
        more = planned_tasks(decision)
        return None if more is None else f"the plan says {counted(more, 'more task')} to decide"
    return None


def planned_tasks(decision: dict[str, Any]) -> int | None:
    """The further tasks the plan says the last look's undecided questions need (the most any one needs); None
    when one of them has no number (no estimate away from its boundary yet) or none is undecided."""
    questions = (decision.get("final") or {}).get("questions") or []
    wanted = [q.get("tasks_to_decide") for q in questions if q.get("verdict") == "undecided"]
    return None if not wanted or None in wanted else max(wanted)


def look_table(decision: dict[str, Any]) -> tuple[list[str], list[list[str]]]:
    """The looks as (headers, rows of text): look, tasks, episodes, each arm's spend so far, and the action."""
    arms: list[str] = []
    for look in decision["looks"]:
        arms += [arm for arm in look["spent_usd"] if arm not in arms]
    headers = ["look", "tasks", "episodes", *[f"spent {arm}" for arm in arms], "action"]
    rows = [[str(look["look"]), f"{look['tasks']:,} of {look['total_tasks']:,}", f"{look['episodes']:,}",
             *[fmt_usd(look["spent_usd"].get(arm)) for arm in arms], ACTIONS.get(look["action"], look["action"])]
            for look in decision["looks"]]
    return headers, rows
