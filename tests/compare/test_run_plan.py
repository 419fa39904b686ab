"""The plan beside the run it planned, through the console script against scripted endpoints whose token counts
and therefore dollars are known: `leafcost run` records the plan of a spec with `plan:` or `decide:` before the run
starts (run_plans), the page, the report and `GET /runs/{id}/plan` show it predicted against actual, a spec with
neither records none, and a resume never replaces the plan the run started with."""

from __future__ import annotations

import json
import re
import urllib.error
import urllib.request
from pathlib import Path

import pytest
import yaml
from support.sglang_fake import ScriptedServer
from test_deciding_run import EPISODE_USD, leafcost, ledger_rows, router_arm

from conftest import SOLVE_SCRIPT, leafcost_serve
from reports.report import write_report

TASKS = 12
TIMES = "def add(a, b):\n    return a * b\n"  # a task the scripted fix cannot fix: a third of them
# The scripted episode's tokens (two calls: 300 + 380 prompt, 300 of them cached, 40 + 6 completion) as priors.
PRIORS = {name: {"resolve_rate": 0.6, "prompt_tokens": 680, "cached_tokens": 300, "completion_tokens": 46,
                 "episode_seconds": 2.0} for name in ("dear", "cheap")}


@pytest.fixture
def suite(make_task) -> Path:
    for i in range(TASKS):
        task = make_task(f"calc-{i:02d}", files={"environment/repo/calc.py": TIMES} if i % 3 == 2 else None)
    return Path(task.path).parent


def write_spec(path: Path, suite: Path, server: ScriptedServer, **sections) -> Path:
    """Two router arms at $1/$4 (cheap) and $3/$12 (dear) per M tokens, no sandbox price: an episode's dollars
    are its scripted tokens × prices exactly."""
    spec = {"name": "planned", "suite": str(suite), "seeds": 1, "workers": 4, "max_attempts": 1,
            "budgets": {"max_steps": 4, "time_budget_sec": 120}, "costs": {"sandbox_usd_per_vcpu_hour": 0.0},
            "arms": [router_arm("dear", server.base_url, 3.0, 12.0), router_arm("cheap", server.base_url, 1.0, 4.0)],
            **sections}
    path.write_text(yaml.safe_dump(spec))
    return path


def api(url: str) -> tuple[int, object]:
    try:
        with urllib.request.urlopen(url, timeout=120) as answer:
            return answer.status, json.loads(answer.read())
    except urllib.error.HTTPError as error:
        return error.code, json.loads(error.read())


def page_text(url: str) -> str:
    with urllib.request.urlopen(url, timeout=120) as answer:
        return answer.read().decode()


def rows_by_figure(document: dict) -> dict[tuple[str, str | None], dict]:
    return {(row["figure"], row["arm"]): row for row in document["rows"]}


def conforms_to_the_schema(db: Path, run_id: str) -> None:
    """Schemathesis's conformance checks on `GET /runs/{run_id}/plan` for this run (the row and document models
    forbid any field they do not list)."""
    import schemathesis
    from schemathesis import GenerationMode
    from test_api_schema import check_every_case

    from compare.api import create_app

    schema = schemathesis.openapi.from_asgi("/openapi.json", create_app(db))
    check_every_case(schema["/runs/{run_id}/plan"]["GET"], GenerationMode.POSITIVE, path_parameters={"run_id": run_id})


def test_a_run_with_priors_records_its_plan_and_every_surface_sets_it_against_the_run(suite, tmp_path):
    db = tmp_path / "ledger.duckdb"
    with ScriptedServer(SOLVE_SCRIPT) as server:
        spec = write_spec(tmp_path / "spec.yaml", suite, server, plan={"priors": PRIORS})
        done = leafcost("run", str(spec), "--db", str(db), "--json")
    assert done.returncode == 0, done.stderr
    run_id = json.loads(done.stdout)["run_id"]
    [(recorded_id, raw)] = ledger_rows(db, "SELECT run_id, document FROM run_plans")
    recorded = json.loads(raw)
    assert recorded_id == run_id and recorded["tasks"] == TASKS and recorded["episodes"] == 2 * TASKS
    per_episode = {arm["arm"]: arm["usd_per_episode"] for arm in recorded["arms"]}
    assert per_episode["cheap"] == pytest.approx(EPISODE_USD, rel=1e-12)  # the priors' tokens × the arm's prices
    assert per_episode["dear"] == pytest.approx(3 * EPISODE_USD, rel=1e-12)
    assert recorded["decide"] is None and {arm["source"] for arm in recorded["arms"]} == {"plan.priors.dear",
                                                                                          "plan.priors.cheap"}

    with leafcost_serve(db, tmp_path / "serve.log") as base:
        status, document = api(f"{base}/runs/{run_id}/plan")
        unknown = api(f"{base}/runs/no-such-run/plan")
        html = page_text(f"{base}/run/{run_id}")
    assert status == 200 and document["plan"] == recorded and document["tasks_run"] == TASKS
    rows = rows_by_figure(document)
    for arm, usd in (("cheap", EPISODE_USD), ("dear", 3 * EPISODE_USD)):  # predicted = actual: the stand-in's
        assert rows[("usd_per_episode", arm)]["planned"] == pytest.approx(usd, rel=1e-12)
        assert rows[("usd_per_episode", arm)]["actual"] == pytest.approx(usd, rel=1e-9)
        assert rows[("usd", arm)]["actual"] == pytest.approx(TASKS * usd, rel=1e-9)
        assert rows[("episodes", arm)]["planned"] == rows[("episodes", arm)]["actual"] == TASKS
        assert rows[("avg_at_k_width", arm)]["planned"] > 0 and rows[("avg_at_k_width", arm)]["actual"] > 0
    assert rows[("usd", None)]["planned"] == pytest.approx(TASKS * 4 * EPISODE_USD, rel=1e-12)
    assert rows[("usd", None)]["actual"] == pytest.approx(TASKS * 4 * EPISODE_USD, rel=1e-9)
    assert rows[("wall_seconds", None)]["actual"] > 0 and ("decided", None) not in rows
    assert unknown[0] == 404 and "no run 'no-such-run'" in unknown[1]["detail"]
    conforms_to_the_schema(db, run_id)

    headings = re.findall(r"<h2>(.*?)</h2>", html)
    assert headings[:2] == ["Plan", "Arms"]  # no decision in this run: the plan opens the page
    cheap_row = "<tr><td>$ per episode</td><td>cheap</td><td class=\"num\">$0.000864</td>" \
                "<td class=\"num\">$0.000864</td></tr>"
    assert cheap_row in html

    write_report(db, run_id, tmp_path / "report")
    markdown = (tmp_path / "report" / "summary.md").read_text()
    assert markdown.index("## Plan") < markdown.index("| arm")
    assert "| $ per episode | dear | $0.00259 | $0.00259 |" in markdown
    assert f"| episodes | all | {2 * TASKS} | {2 * TASKS} |" in markdown
    assert "planned " in markdown and "(dear: plan.priors.dear; cheap: plan.priors.cheap)" in markdown
    report_html = (tmp_path / "report" / "report.html").read_text()
    assert '<section id="plan"><h2>Plan</h2>' in report_html
    assert report_html.index('id="plan"') < report_html.index('id="arms"')


def test_a_deciding_run_shows_the_simulated_stop_against_its_own_and_a_resume_keeps_the_plan(suite, tmp_path):
    db = tmp_path / "ledger.duckdb"
    decide = {"cheaper": {"arms": ["dear", "cheap"], "margin": 0.1}, "round_tasks": 6, "min_tasks": 6}
    with ScriptedServer(SOLVE_SCRIPT) as server:
        spec = write_spec(tmp_path / "spec.yaml", suite, server, decide=decide, plan={"priors": PRIORS})
        done = leafcost("run", str(spec), "--db", str(db), "--json")
        assert done.returncode == 0, done.stderr
        run_id = json.loads(done.stdout)["run_id"]
        assert json.loads(done.stdout)["decision"].startswith("decided after 6 of 12 tasks")
        [(made_at, first)] = ledger_rows(db, "SELECT made_at, document FROM run_plans")
        simulated = json.loads(first)["decide"]
        assert simulated["simulations"] == 100 and simulated["round_tasks"] == 6
        assert any("100 simulated runs" in line for line in json.loads(first)["assumptions"])

        other = {name: {**prior, "resolve_rate": 0.1} for name, prior in PRIORS.items()}  # plan: is not hashed
        changed = write_spec(tmp_path / "changed.yaml", suite, server, decide=decide, plan={"priors": other})
        resumed = leafcost("run", str(changed), "--db", str(db), "--resume", run_id, "--json")
    assert resumed.returncode == 0, resumed.stderr
    assert ledger_rows(db, "SELECT made_at, document FROM run_plans") == [(made_at, first)]  # not replaced

    write_report(db, run_id, tmp_path / "report")
    markdown = (tmp_path / "report" / "summary.md").read_text()
    assert markdown.index("## Decision") < markdown.index("## Plan") < markdown.index("| arm")
    assert "the run used 6 tasks: the plan's figures are taken at 6" in markdown
    assert "| episodes | all | 12 | 12 |" in markdown  # 6 tasks × 2 arms, predicted at the tasks run
    tasks = simulated["tasks"]
    assert f"| decide: tasks, p50 (p10–p90) | all | {tasks['p50']:,.0f} ({tasks['p10']:,.0f}–{tasks['p90']:,.0f}) " \
           "| 6 |" in markdown
    assert re.search(r"\| decide: decided \| all \| \d+% \| yes \|", markdown)


def test_a_run_with_neither_decide_nor_plan_records_no_plan(suite, tmp_path):
    db = tmp_path / "ledger.duckdb"
    with ScriptedServer(SOLVE_SCRIPT) as server:
        spec = write_spec(tmp_path / "spec.yaml", suite, server, limit=3)
        done = leafcost("run", str(spec), "--db", str(db), "--json")
    assert done.returncode == 0, done.stderr
    run_id = json.loads(done.stdout)["run_id"]
    assert ledger_rows(db, "SELECT count(*) FROM run_plans") == [(0,)]
    with leafcost_serve(db, tmp_path / "serve.log") as base:
        answer = api(f"{base}/runs/{run_id}/plan")
        html = page_text(f"{base}/run/{run_id}")
    assert answer == (200, None)
    conforms_to_the_schema(db, run_id)
    assert "<h2>Plan</h2>" not in html and "id=plan" not in html
    write_report(db, run_id, tmp_path / "report")
    assert "## Plan" not in (tmp_path / "report" / "summary.md").read_text()
