"""A small real ledger of runs with a decision question, for the tests of what every surface shows of a decision:
runs made with Ledger.create_run from specs with `decide:` and looks written with Ledger.record_look, as the
runner writes them (a LookResult of compare.decision, its line from compare.decision.verdict_line), and no
episodes: what is shown of a decision comes from its looks alone."""

from __future__ import annotations

import asyncio
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from compare.decision import LookResult, QuestionResult, verdict_line
from compare.ledger import Ledger
from compare.spec import parse_run_spec

TASKS = [f"task-{i:02d}" for i in range(30)]
# {0} and {1}: the question's two arms
CHEAPER_SENTENCE = "{1} is cheaper per resolved attempt than {0} by $0.41 [0.12, 0.70] (38 % [12, 55])"
UNDECIDED_SENTENCE = "no cost difference shown yet between {0} and {1}: ratio 1.02 [0.81, 1.29]"


@dataclass(frozen=True)
class DecisionRuns:
    """The ledger and its runs: decided, stopped undecided at the budget, still deciding, and one without decide:."""

    db: Path
    decided: str
    budget: str
    running: str
    plain: str
    decided_line: str
    budget_line: str


def arm(name: str) -> dict[str, Any]:
    return {"name": name, "adapter": "router", "model": f"model-{name}", "base_url": "http://127.0.0.1:4000/v1",
            "api_key_env": "ROUTER_API_KEY", "prices": {"input": 1.0, "output": 4.0, "cached_input": 0.1}}


def spec(name: str, arms: list[str], decide: dict[str, Any] | None):
    raw = {"name": name, "suite": "builtin", "seeds": 1, "workers": 4, "arms": [arm(a) for a in arms]}
    return parse_run_spec({**raw, "decide": decide} if decide is not None else raw)


def question(first: str, second: str, verdict: str, *, tasks: int, sentence: str,
             tasks_to_decide: int | None = None) -> QuestionResult:
    decided = verdict != "undecided"
    return QuestionResult(question="cheaper", arms=[first, second], verdict=verdict,
                          decided_at_tasks=tasks if decided else None, estimate=1.6, lower=1.2, upper=2.1,
                          difference_usd={"estimate": 0.41, "lower": 0.12, "upper": 0.70},
                          cost_per_resolved={first: {"estimate": 1.09, "lower": 0.8, "upper": 1.4}, second: None},
                          tasks_to_decide=tasks_to_decide, sentence=sentence)


async def _record(ledger: Ledger, run_id: str, arms: list[str], looks: list[tuple[LookResult, str]],
                  unspent: tuple[int, float] | None) -> str | None:
    """Writes the looks; the last one stops the run when `unspent` is given. Returns the stop's line."""
    line = None
    for i, (result, action) in enumerate(looks):
        last = i == len(looks) - 1 and unspent is not None
        if last:
            status = "decided" if action == "decided" else "undecided"
            line = verdict_line(result, status, unspent[0], unspent[1], stop=action)
        spent = {name: round(0.05 * result.tasks * (k + 1), 4) for k, name in enumerate(arms)}
        await ledger.record_look(run_id, result.look, tasks=result.tasks, total_tasks=result.total_tasks,
                                 episodes=result.tasks * len(arms), spent_usd=spent, budget={"total_usd": 5.0},
                                 result=result.model_dump(mode="json"), action=action, reason=line,
                                 unspent_episodes=unspent[0] if last else None,
                                 unspent_usd=unspent[1] if last else None)
    return line


def look(arms: list[str], number: int, tasks: int, verdict: str, sentence: str,
         tasks_to_decide: int | None = None) -> LookResult:
    q = question(arms[0], arms[1], verdict, tasks=tasks, sentence=sentence.format(*arms),
                 tasks_to_decide=tasks_to_decide)
    return LookResult(look=number, tasks=tasks, total_tasks=len(TASKS), questions=[q], decided=verdict != "undecided")


async def _build(db: Path, arms: list[str]) -> DecisionRuns:
    decide = {"cheaper": {"arms": arms[:2], "margin": 0.1}, "min_tasks": 2, "round_tasks": 10}
    ledger = Ledger.open(db)
    try:
        for run_id, decide_section in (("decided-run", decide), ("budget-run", decide), ("running-run", decide),
                                       ("plain-run", None)):
            await ledger.create_run(run_id, spec(run_id, arms, decide_section), task_ids=TASKS)
        decided_line = await _record(ledger, "decided-run", arms, [
            (look(arms, 1, 10, "undecided", UNDECIDED_SENTENCE, tasks_to_decide=14), "continue"),
            (look(arms, 2, 20, "second", CHEAPER_SENTENCE), "decided")], unspent=(10 * len(arms), 1.234))
        budget_line = await _record(ledger, "budget-run", arms, [
            (look(arms, 1, 10, "undecided", UNDECIDED_SENTENCE, tasks_to_decide=60), "continue"),
            (look(arms, 2, 20, "undecided", UNDECIDED_SENTENCE, tasks_to_decide=40), "budget")],
            unspent=(10 * len(arms), 0.9))
        await _record(ledger, "running-run", arms, [
            (look(arms, 1, 10, "undecided", UNDECIDED_SENTENCE, tasks_to_decide=14), "continue")], unspent=None)
        for run_id in ("decided-run", "budget-run", "plain-run"):
            await ledger.set_run_status(run_id, "finished")
        await ledger.flush()
    finally:
        ledger.close()
    assert decided_line is not None and budget_line is not None
    return DecisionRuns(db, "decided-run", "budget-run", "running-run", "plain-run", decided_line, budget_line)


def make_decision_runs(db: Path, arms: list[str] | None = None) -> DecisionRuns:
    """The four runs in a new ledger at `db`; `arms` (at least two; the question is about the first two) name the
    runs' arms, dear and cheap by default."""
    return asyncio.run(_build(db, arms or ["dear", "cheap"]))
