"""The "Plan" section of the web page, on a real ledger of runs with a decision question
(tests/support/decision_ledger.py) to one of which a plan is recorded as `leafcost run` records it
(Ledger.record_plan with compare.planning's document from the spec's priors): after the decision, before the arms;
none for a run without a plan. And at 1280 pixels in Chromium, with long arm names, the section keeps the page's
rules (nothing runs past the window, no figure breaks over two lines)."""

from __future__ import annotations

import asyncio
import re
from pathlib import Path

import pytest
from conftest import leafcost_serve
from support.decision_ledger import TASKS, DecisionRuns, arm, make_decision_runs
from test_web_page import MEASURE, devtools_page

from compare.ledger import Ledger
from compare.plan_sources import prior_sample
from compare.planning import plan_from_samples
from compare.spec import parse_run_spec

LONG_ARMS = ["gpt-5-mini-through-the-litellm-router-eu-west", "frognano-4b-on-sglang-h200-tp1-spot-instance",
             "claude-sonnet-through-openrouter-with-caching", "qwen3-coder-on-a-rented-b200-with-speculation"]
PRIOR = {"resolve_rate": 0.55, "prompt_tokens": 250_000, "cached_tokens": 150_000, "completion_tokens": 9_000,
         "episode_seconds": 420.0}


def with_a_plan(db: Path, arms: list[str]) -> DecisionRuns:
    """The decision ledger's runs, the decided one with the plan its spec's priors give (20 simulated runs)."""
    runs = make_decision_runs(db, arms)
    spec = parse_run_spec({"name": runs.decided, "suite": "builtin", "seeds": 1, "workers": 4,
                           "arms": [arm(name) for name in arms],
                           "decide": {"cheaper": {"arms": arms[:2], "margin": 0.1}, "min_tasks": 2, "round_tasks": 10},
                           "plan": {"priors": {name: PRIOR for name in arms}}})
    samples = {a.name: prior_sample(spec, a, spec.plan.priors[a.name]) for a in spec.arms}
    document = plan_from_samples(spec, samples, len(TASKS), None, None, 20).model_dump(mode="json")

    async def record() -> None:
        with Ledger.open(db) as ledger:
            await ledger.record_plan(runs.decided, document)
            await ledger.flush()
    asyncio.run(record())
    return runs


@pytest.fixture(scope="module")
def runs(tmp_path_factory) -> DecisionRuns:
    return with_a_plan(tmp_path_factory.mktemp("plan-page") / "ledger.duckdb", ["dear", "cheap"])


def test_the_plan_follows_the_decision_and_a_run_without_one_has_none(runs, tmp_path):
    import urllib.request

    with leafcost_serve(runs.db, tmp_path / "serve.log") as base:
        pages = {}
        for run_id in (runs.decided, runs.budget):
            with urllib.request.urlopen(f"{base}/run/{run_id}", timeout=60) as answer:
                pages[run_id] = answer.read().decode()
    planned = pages[runs.decided]
    assert re.findall(r"<h2>(.*?)</h2>", planned)[:3] == ["Decision", "Plan", "Arms"]
    assert "before the run: 30 tasks × 1 seed (dear: plan.priors.dear; cheap: plan.priors.cheap); the run used 0 " \
           "tasks" in planned
    # the run stopped decided after 20 tasks (its last look), against the 20 simulated runs' tasks
    assert re.search(r"<tr><td>decide: tasks, p50 \(p10–p90\)</td><td>all</td><td class=\"num\">\d+ \(\d+–\d+\)</td>"
                     r"<td class=\"num\">20</td></tr>", planned)
    assert re.search(r"<tr><td>decide: decided</td><td>all</td><td class=\"num\">\d+%</td>"
                     r"<td class=\"num\">yes</td></tr>", planned)
    assert "<h2>Plan</h2>" not in pages[runs.budget] and "id=plan" not in pages[runs.budget]


@pytest.mark.slow  # a real Chromium end to end: `make test` runs it, `make test-fast` does not
def test_at_1280_pixels_the_plan_section_keeps_the_pages_rules(tmp_path):
    runs = with_a_plan(tmp_path / "ledger.duckdb", LONG_ARMS)
    with leafcost_serve(runs.db, tmp_path / "serve.log") as base, devtools_page(1280, 1800) as load:
        measured = load(f"{base}/run/{runs.decided}", MEASURE)
        numbers = load(f"{base}/run/{runs.decided}",
                       "[...document.querySelectorAll('#plan-table td.num')].map(td => td.getClientRects().length)")
    assert measured["innerWidth"] == 1280
    assert measured["scrollWidth"] <= measured["innerWidth"] and measured["past"] == []
    assert measured["wrapped"] == []  # no figure of the plan's table breaks over two lines
    rows = 4 + 5 * len(LONG_ARMS) + 4  # the run's, each arm's, decide:'s
    assert len(numbers) == 2 * rows and all(count == 1 for count in numbers)
    assert re.match(r"status finished, 30 tasks × 1 seed;", measured["header"])  # the header stays the first note

