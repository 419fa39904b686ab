"""A run's decision on every surface that is not a page: `leafcost summary` and `compare` (their `--json`
documents' `decision` field and the verdict line under the terminal's title) and the API (the summary and compare
documents, and `GET /runs/{id}/decision`), on a real ledger of runs with a decision question
(tests/support/decision_ledger.py): decided, stopped undecided at the budget, still deciding, and one without
`decide:`, which shows no decision and `decision: null`."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import urllib.error
import urllib.request
from pathlib import Path

import numpy as np
import pytest
from conftest import leafcost_serve
from support.decision_ledger import CHEAPER_SENTENCE, DecisionRuns, make_decision_runs

from compare.decide_spec import DecideConfig
from compare.decision import ArmTasks, look

LEAFCOST = Path(sys.executable).with_name("leafcost")


@pytest.fixture(scope="module")
def runs(tmp_path_factory) -> DecisionRuns:
    return make_decision_runs(tmp_path_factory.mktemp("decisions") / "ledger.duckdb")


def leafcost(*args: str, columns: int = 80) -> str:
    result = subprocess.run([str(LEAFCOST), *args], capture_output=True, text=True, timeout=300,
                            env={**os.environ, "COLUMNS": str(columns)})
    assert result.returncode == 0, result.stderr[-2000:]
    return result.stdout


def document(runs: DecisionRuns, *args: str) -> dict:
    return json.loads(leafcost(*args, "--db", str(runs.db), "--json"))


def flat(text: str) -> str:
    """The terminal's text with its wrapping undone: one space wherever the line broke."""
    return re.sub(r"\s+", " ", text)


def test_summary_and_compare_json_carry_the_runs_decision(runs):
    summary = document(runs, "summary", runs.decided)
    decision = summary["decision"]
    assert (decision["status"], decision["stop"], decision["line"]) == ("decided", "decided", runs.decided_line)
    assert decision["line"].startswith("decided after 20 of 30 tasks: ")
    assert CHEAPER_SENTENCE.format("dear", "cheap") in decision["line"]
    assert (decision["unspent_episodes"], decision["unspent_usd"]) == (20, 1.234)
    assert decision["question"]["cheaper"] == {"arms": ["dear", "cheap"], "margin": 0.1}
    assert [(look["look"], look["tasks"], look["action"]) for look in decision["looks"]] == [
        (1, 10, "continue"), (2, 20, "decided")]
    assert decision["looks"][1]["spent_usd"] == {"dear": 1.0, "cheap": 2.0}
    final = decision["final"]
    assert (final["look"], final["decided"], final["questions"][0]["verdict"]) == (2, True, "second")
    compared = document(runs, "compare", runs.decided, "--arms", "dear,cheap")
    assert compared["decision"] == decision  # the same document, whichever command shows it


def test_a_stopped_undecided_and_a_running_decision_say_so(runs):
    budget = document(runs, "summary", runs.budget)["decision"]
    assert (budget["status"], budget["stop"], budget["line"]) == ("undecided", "budget", runs.budget_line)
    assert budget["line"].startswith("undecided at the budget after 20 of 30 tasks: ")
    assert budget["final"]["questions"][0]["tasks_to_decide"] == 40
    running = document(runs, "summary", runs.running)["decision"]
    assert (running["status"], running["stop"], running["line"]) == ("running", "continue", None)
    assert (running["unspent_episodes"], running["unspent_usd"], len(running["looks"])) == (None, None, 1)


def test_a_run_without_a_question_has_a_null_decision(runs):
    summary = document(runs, "summary", runs.plain)
    assert "decision" in summary and summary["decision"] is None
    assert document(runs, "compare", runs.plain, "--arms", "dear,cheap")["decision"] is None
    table = leafcost("summary", runs.plain, "--db", str(runs.db))
    assert "decided" not in table and "deciding" not in table
    assert table.index("leafcost summary plain-run") < table.index("┏")  # the table's own title, as before


def test_the_terminal_prints_the_verdict_line_under_the_title_before_the_table(runs):
    shown = leafcost("summary", runs.decided, "--db", str(runs.db))
    title, line, table = shown.index("leafcost summary decided-run"), shown.index("decided after"), shown.index("┏")
    assert title < line < table
    assert runs.decided_line in flat(shown[line:table])  # the whole line, only wrapped
    compared = leafcost("compare", runs.budget, "--arms", "dear,cheap", "--db", str(runs.db))
    title, line = compared.index("leafcost compare budget-run: dear vs cheap"), compared.index("undecided at")
    assert title < line < compared.index("┏")
    assert runs.budget_line in flat(compared[line:compared.index("┏")])
    running = leafcost("summary", runs.running, "--db", str(runs.db))
    assert running.index("deciding: 1 look so far, undecided") < running.index("┏")


def test_the_verdict_line_wraps_to_a_narrow_terminal(runs):
    shown = leafcost("summary", runs.decided, "--db", str(runs.db), columns=50)
    lines = shown.splitlines()
    assert max(len(line) for line in lines) <= 50
    start = next(i for i, line in enumerate(lines) if line.startswith("decided after"))
    end = next(i for i, line in enumerate(lines) if line.startswith("┏"))
    assert end - start > 2 and runs.decided_line == flat(" ".join(lines[start:end])).strip()


def test_a_what_if_says_its_decision_was_taken_at_the_recorded_prices(runs, tmp_path):
    sheet = tmp_path / "prices.yaml"
    sheet.write_text("name: half\narms:\n  dear: {prices: {input: 0.5, output: 2.0}}\n")
    leafcost("reprice", runs.decided, "--prices", str(sheet), "--db", str(runs.db))
    stored = document(runs, "summary", runs.decided, "--scenario", "half")
    assert stored["scenario"] == "half" and stored["decision"]["line"] == runs.decided_line
    shown = flat(leafcost("summary", runs.decided, "--scenario", "half", "--db", str(runs.db)))
    assert runs.decided_line + " (at the run's recorded prices)" in shown


def get(url: str) -> tuple[int, object]:
    try:
        with urllib.request.urlopen(url, timeout=60) as answer:
            return answer.status, json.loads(answer.read())
    except urllib.error.HTTPError as error:
        return error.code, json.loads(error.read())


def test_the_api_serves_the_decision_beside_the_figures_and_on_its_own(runs, tmp_path):
    with leafcost_serve(runs.db, tmp_path / "serve.log") as base:
        status, decision = get(f"{base}/runs/{runs.decided}/decision")
        _, summary = get(f"{base}/runs/{runs.decided}/summary")
        _, compared = get(f"{base}/runs/{runs.budget}/compare?arms=dear,cheap")
        _, budget = get(f"{base}/runs/{runs.budget}/decision")
        plain = get(f"{base}/runs/{runs.plain}/decision")
        _, plain_summary = get(f"{base}/runs/{runs.plain}/summary")
        unknown = get(f"{base}/runs/no-such-run/decision")
    assert status == 200 and decision == summary["decision"] and decision["line"] == runs.decided_line
    assert compared["decision"] == budget and budget["status"] == "undecided"
    assert plain == (200, None) and plain_summary["decision"] is None  # no question: the field's null, as served
    assert unknown[0] == 404 and "no run 'no-such-run'" in unknown[1]["detail"]
    assert summary == document(runs, "summary", runs.decided)  # the API's document is the CLI's


@pytest.mark.parametrize("run", ["decided", "budget", "running", "plain"])
def test_every_decision_the_api_serves_is_what_its_schema_says(runs, run):
    """Schemathesis's conformance checks on the decision route and the summary, for each kind of decision (the
    schema forbids any field the models do not list)."""
    import schemathesis
    from schemathesis import GenerationMode
    from test_api_schema import check_every_case

    from compare.api import create_app

    schema = schemathesis.openapi.from_asgi("/openapi.json", create_app(runs.db))
    for path in ("/runs/{run_id}/decision", "/runs/{run_id}/summary"):
        check_every_case(schema[path]["GET"], GenerationMode.POSITIVE, path_parameters={"run_id": getattr(runs, run)})


def test_a_real_looks_result_is_a_document_the_display_accepts():
    """compare.decision.look's own result, not a hand-made one, validates as the documents' LookVerdicts."""
    from compare.documents import DecisionDocument, LookVerdicts, conforming

    config = DecideConfig.model_validate({"cheaper": {"arms": ["dear", "cheap"], "margin": 0.1},
                                          "reaches": {"arm": "cheap", "avg_at_k": 0.5}, "min_tasks": 2})
    rng = np.random.default_rng(7)
    n = 40
    data = {name: ArmTasks(arm=name, resolved=rng.integers(0, 2, n), attempts=np.ones(n, dtype=int),
                           cost_usd=np.full(n, price), spent_usd=price * n)
            for name, price in (("dear", 3.0), ("cheap", 1.0))}
    result = look(config, data, look_number=1, total_tasks=100, previous=None)
    verdicts = result.model_dump(mode="json")
    assert conforming(LookVerdicts, verdicts) is verdicts
    assert {q["question"] for q in verdicts["questions"]} == {"cheaper", "reaches"}
    with pytest.raises(ValueError, match="new_figure"):
        conforming(LookVerdicts, {**verdicts, "new_figure": 1})
    DecisionDocument.model_validate({"status": "running", "stop": "continue", "line": None,
                                     "question": config.model_dump(mode="json"), "final": verdicts,
                                     "unspent_episodes": None, "unspent_usd": None, "looks": []})
