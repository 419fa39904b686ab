"""The "Decision" section of the web page and of the report (HTML and Markdown), on a real ledger of runs with a
decision question (tests/support/decision_ledger.py): the verdict line at the top, a row per look, what the stop
left (the evaluation not spent, or the plan's further tasks); none for a run without `decide:`. And at 1280 pixels
in Chromium the section, with long arm names, keeps the page's rules (nothing runs past the window, no figure
breaks over two lines)."""

from __future__ import annotations

import html
import re
import urllib.request
from html.parser import HTMLParser

import pytest
from conftest import leafcost_serve
from support.decision_ledger import DecisionRuns, make_decision_runs
from test_web_page import MEASURE, devtools_page

from reports.report import write_report

LONG_ARMS = ["gpt-5-mini-through-the-litellm-router-eu-west", "frognano-4b-on-sglang-h200-tp1-spot-instance",
             "claude-sonnet-through-openrouter-with-caching", "qwen3-coder-on-a-rented-b200-with-speculation"]


@pytest.fixture(scope="module")
def runs(tmp_path_factory) -> DecisionRuns:
    return make_decision_runs(tmp_path_factory.mktemp("decision-page") / "ledger.duckdb")


@pytest.fixture(scope="module")
def served(runs, tmp_path_factory):
    with leafcost_serve(runs.db, tmp_path_factory.mktemp("serve") / "serve.log") as base:
        yield base


class Section(HTMLParser):
    """The text of the decision section's verdict and outcome paragraphs, its looks table's rows, and the order
    of the page's h2 headings."""

    def __init__(self) -> None:
        super().__init__()
        self.verdict = self.outcome = ""
        self.rows: list[list[str]] = []
        self.headings: list[str] = []
        self.section: str | None = None
        self._into: str | None = None

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        attributes = dict(attrs)
        if tag == "section" and attributes.get("id") == "decision":
            self.section = attributes.get("data-status")
        elif tag == "p" and attributes.get("class") in ("verdict", "outcome"):
            self._into = attributes["class"]
        elif tag == "tr" and self.section not in (None, "done"):
            self.rows.append([])
        elif tag in ("td", "th") and self.section not in (None, "done"):
            self.rows[-1].append("")
            self._into = "cell"
        elif tag == "h2":
            self.headings.append("")
            self._into = "h2"

    def handle_endtag(self, tag: str) -> None:
        if tag in ("p", "td", "th", "h2"):
            self._into = None
        if tag == "table" and self.section is not None:
            self.section = "done"

    def handle_data(self, data: str) -> None:
        if self._into == "cell":
            self.rows[-1][-1] += data
        elif self._into == "h2":
            self.headings[-1] += data
        elif self._into in ("verdict", "outcome"):
            setattr(self, self._into, getattr(self, self._into) + data)


def page(base: str, run_id: str) -> Section:
    with urllib.request.urlopen(f"{base}/run/{run_id}", timeout=60) as answer:
        parsed = Section()
        parsed.feed(answer.read().decode())
    return parsed


def test_the_page_opens_with_the_decision_and_its_looks(runs, served):
    decided = page(served, runs.decided)
    assert decided.headings[0] == "Decision" and decided.headings[1] == "Arms"  # at the top, before the figures
    assert decided.verdict == runs.decided_line
    assert decided.outcome == "$1.23 of evaluation not spent: 20 episodes of the spec not run"
    assert decided.rows == [["look", "tasks", "episodes", "spent dear", "spent cheap", "action"],
                            ["1", "10 of 30", "20", "$0.500", "$1.00", "went on"],
                            ["2", "20 of 30", "40", "$1.00", "$2.00", "stopped: decided"]]
    budget = page(served, runs.budget)
    assert budget.verdict == runs.budget_line and budget.outcome == "the plan says 40 more tasks to decide"
    assert budget.rows[-1][-1] == "stopped: budget"
    running = page(served, runs.running)
    assert running.verdict == "deciding: 1 look so far, undecided" and running.outcome == ""
    plain = page(served, runs.plain)
    assert "Decision" not in plain.headings and plain.verdict == "" and plain.rows == []


def test_the_report_opens_with_the_decision_in_html_and_markdown(runs, tmp_path):
    write_report(runs.db, runs.decided, tmp_path / "decided")
    markdown = (tmp_path / "decided" / "summary.md").read_text()
    assert markdown.index("## Decision") < markdown.index("| arm")
    assert f"**{runs.decided_line}**" in markdown.replace("\\|", "|")
    assert "$1.23 of evaluation not spent: 20 episodes of the spec not run" in markdown
    assert "| look | tasks | episodes | spent dear | spent cheap | action |" in markdown
    assert "| 2 | 20 of 30 | 40 | $1.00 | $2.00 | stopped: decided |" in markdown
    notes = markdown.split("## Notes", 1)[1]
    assert "decided after" not in notes  # the looks' lines are the section's, not notes
    report = Section()
    report.feed((tmp_path / "decided" / "report.html").read_text())
    assert report.headings[:2] == ["Decision", "Arms"] and report.verdict == runs.decided_line
    assert report.rows[-1] == ["2", "20 of 30", "40", "$1.00", "$2.00", "stopped: decided"]
    write_report(runs.db, runs.budget, tmp_path / "budget")
    budget = (tmp_path / "budget" / "summary.md").read_text()
    assert "the plan says 40 more tasks to decide" in budget and "| 2 | 20 of 30 | 40 |" in budget
    write_report(runs.db, runs.plain, tmp_path / "plain")
    for name in ("summary.md", "report.html"):
        text = (tmp_path / "plain" / name).read_text()
        assert "Decision" not in text and "decided" not in text, name


def test_a_decision_escapes_what_it_quotes():
    """The verdict line and the looks quote arm names: markup in them is text on the page."""
    from reports.web import _decision_section  # the section alone: no valid arm name holds markup

    decision = {"status": "decided", "line": "decided after 1 of 2 tasks: <script>x</script> | is cheaper",
                "unspent_usd": 0.5, "unspent_episodes": 2, "final": None,
                "looks": [{"look": 1, "tasks": 1, "total_tasks": 2, "episodes": 2, "spent_usd": {"<b>": 0.1},
                           "action": "decided"}]}
    shown = _decision_section({"decision": decision})
    assert "<script>" not in shown and html.escape("<script>x</script>") in shown and "spent &lt;b&gt;" in shown


@pytest.mark.slow  # a real Chromium end to end: `make test` runs it, `make test-fast` does not
def test_at_1280_pixels_the_decision_section_keeps_the_pages_rules(tmp_path):
    runs = make_decision_runs(tmp_path / "ledger.duckdb", arms=LONG_ARMS)
    with leafcost_serve(runs.db, tmp_path / "serve.log") as base, devtools_page(1280, 1800) as load:
        measured = load(f"{base}/run/{runs.decided}", MEASURE)
        numbers = load(f"{base}/run/{runs.decided}",
                       "[...document.querySelectorAll('#looks td.num')].map(td => td.getClientRects().length)")
    assert measured["innerWidth"] == 1280
    assert measured["scrollWidth"] <= measured["innerWidth"] and measured["past"] == []
    assert measured["wrapped"] == []  # no figure of the looks table breaks over two lines
    assert len(numbers) == 2 * (3 + len(LONG_ARMS)) and all(count == 1 for count in numbers)
    assert re.match(r"status finished, 30 tasks × 1 seed;", measured["header"])  # the header stays the first note
