"""`reports`: the report of a real run (the runner against scripted SGLang and OpenAI servers, a priced and an
unpriced hosted arm, the oracle; three tasks, two seeds), checked against the summary document, the ledger's own
rows (SQL) and the trajectories; the charts on hand-made documents."""

from __future__ import annotations

import csv
import json
import subprocess
import sys
import xml.etree.ElementTree as ET
from html.parser import HTMLParser
from importlib import metadata
from pathlib import Path

import duckdb
import pytest
from typer import Typer
from typer.testing import CliRunner

from compare.breakeven import breakeven
from compare.ledger import MIGRATIONS, SCHEMA_VERSION, LedgerOutdated, connect_read_only, migrate
from compare.pricing import litellm_revision
from compare.summary import dumps, summarize
from reports import cost_breakdown_svg, cost_vs_resolve_svg, write_report
from reports.charts import SVG_NS
from reports.cli import report as report_command

LEAFCOST = Path(sys.executable).with_name("leafcost")
MODEL_ARMS = ("frognano", "hosted", "unpriced")


@pytest.fixture(scope="module")
def ledger_run(four_arm_run):
    return four_arm_run


def sql(db: Path, query: str, params=()):
    with duckdb.connect(str(db), read_only=True) as conn:
        return conn.execute(query, list(params)).fetchall()


@pytest.fixture(scope="module")
def written(ledger_run, tmp_path_factory):
    """The report, written once; one trajectory file of the unpriced arm is lost beforehand."""
    db, run_id = ledger_run
    lost = sql(db, "select trajectory_path from episodes where run_id = ? and arm = 'unpriced' and final "
                   "order by task_id, seed limit 1", [run_id])[0][0]
    Path(lost).unlink()
    out = tmp_path_factory.mktemp("report") / "out"
    files = write_report(db, run_id, out)
    with connect_read_only(db) as conn:
        document = summarize(conn, run_id)
    return {"db": db, "run_id": run_id, "out": out, "files": files, "document": document, "lost": lost}


class Page(HTMLParser):
    """Every start tag with its attributes, and the text."""

    def __init__(self, html: str):
        super().__init__(convert_charrefs=True)
        self.tags: list[tuple[str, dict[str, str | None]]] = []
        self.chunks: list[str] = []
        self.feed(html)
        self.close()

    def handle_starttag(self, tag, attrs):
        self.tags.append((tag, dict(attrs)))

    def handle_startendtag(self, tag, attrs):
        self.tags.append((tag, dict(attrs)))

    def handle_data(self, data):
        self.chunks.append(data)

    @property
    def text(self) -> str:
        return " ".join(" ".join(self.chunks).split())

    def with_class(self, name: str) -> list[dict[str, str | None]]:
        return [attrs for _, attrs in self.tags if name in (attrs.get("class") or "").split()]


def _section(html: str, start: str, end: str) -> str:
    return html[html.index(start):html.index(end, html.index(start))]


def test_every_file_is_written(written):
    seeds = {f"predictions/{arm}.seed{s}.jsonl" for arm in MODEL_ARMS for s in (0, 1)}
    expected = {"report.html", "summary.md", "summary.json", "episodes.csv", "episodes.parquet", "calls.csv",
                "calls.parquet"} | {f"predictions/{arm}.jsonl" for arm in MODEL_ARMS} | seeds
    assert set(written["files"]) == expected
    for name, path in written["files"].items():
        assert path == written["out"].resolve() / name and path.is_file(), name
    assert not (written["out"] / "predictions" / "oracle.jsonl").exists()


def test_no_two_report_files_are_the_same(written):
    contents = {path.read_bytes(): name for name, path in written["files"].items()}
    assert len(contents) == len(written["files"])


@pytest.fixture(scope="module")
def one_seed_run(tmp_path_factory):
    """A finished one-seed run with an arm skipped before any attempt (as the demo skips `hosted` without a key):
    `hosted` (a router arm against a scripted OpenAI server), `absent` (skipped) and `oracle`, on one task.
    Returns (db, run_id, report files)."""
    import asyncio

    from conftest import SOLVE_SCRIPT, _write_calc_task
    from support.sglang_fake import ScriptedServer

    from compare.ledger import Ledger
    from compare.runner import Runner
    from compare.spec import parse_run_spec

    root = tmp_path_factory.mktemp("one-seed-run")
    _write_calc_task(root / "tasks" / "calc-a", "a - b")
    db = root / "ledger.duckdb"
    with pytest.MonkeyPatch.context() as env, ScriptedServer(SOLVE_SCRIPT) as openai:
        env.setenv("LEAFCOST_TEST_REPORT_KEY", "sk-test-report-key-0001")
        router = {"adapter": "router", "model": "hosted-gpt", "base_url": openai.base_url, "max_retries": 0,
                  "allow_unlisted_model": True, "prices": {"input": 1.25, "output": 10.0}}
        spec = parse_run_spec({
            "name": "one-seed", "suite": str(root / "tasks"), "seeds": 1, "workers": 2, "max_attempts": 1,
            "budgets": {"max_steps": 4, "time_budget_sec": 120},
            "arms": [{"name": "hosted", "api_key_env": "LEAFCOST_TEST_REPORT_KEY", **router},
                     {"name": "absent", "api_key_env": "LEAFCOST_TEST_REPORT_UNSET_KEY", **router},
                     {"name": "oracle", "adapter": "oracle"}]})
        ledger = Ledger.open(db)
        try:
            skipped = {"absent": "no key: set LEAFCOST_TEST_REPORT_UNSET_KEY"}
            runner = Runner(spec, ledger, db_path=db, skip_arms=skipped)
            summary = asyncio.run(runner.run())
        finally:
            ledger.close()
    assert summary.status == "finished"
    return db, summary.run_id, write_report(db, summary.run_id, root / "report")


def test_one_seed_writes_one_predictions_file_and_a_skipped_arm_none(one_seed_run):
    """With one seed `<arm>.jsonl` is already what SWE-bench's harness takes: no identical per-seed copy. A
    skipped arm predicted nothing: no empty file stands in for it, and the notes say why."""
    db, run_id, files = one_seed_run
    assert sorted(name for name in files if name.startswith("predictions/")) == ["predictions/hosted.jsonl"]
    out = files["report.html"].parent
    assert sorted(p.name for p in (out / "predictions").iterdir()) == ["hosted.jsonl"]
    lines = [json.loads(line) for line in files["predictions/hosted.jsonl"].read_text().splitlines()]
    assert [(line["instance_id"], line["seed"]) for line in lines] == [("calc-a", 0)]
    assert "a + b" in lines[0]["model_patch"]
    contents = {path.read_bytes() for path in files.values()}
    assert len(contents) == len(files)  # no two report files are the same
    note = "absent: no predictions file: the arm was skipped and ran no attempt"
    assert f"- {note}" in files["summary.md"].read_text().splitlines()
    assert note in Page(files["report.html"].read_text()).text


def test_a_skipped_arm_is_explained_once_in_the_terminal(one_seed_run, capsys, monkeypatch):
    """`leafcost summary` gives a skipped arm's one reason, not its figures' ("no finished episodes"); the demo's
    closing summary leaves even that to the run table printed just above it."""
    from compare.cli_results import _print_summary, print_run_figures
    from compare.summary import summarize

    db, run_id, _ = one_seed_run
    monkeypatch.setenv("COLUMNS", "200")
    with duckdb.connect(str(db), read_only=True) as conn:
        _print_summary(summarize(conn, run_id))
    alone = capsys.readouterr().out
    assert "absent: skipped: no key: set LEAFCOST_TEST_REPORT_UNSET_KEY" in alone
    assert not [line for line in alone.splitlines() if line.startswith("absent") and "skipped" not in line]
    assert print_run_figures(db, run_id) == ["hosted", "oracle"]
    assert "absent: skipped" not in capsys.readouterr().out


def test_html_is_self_contained(written):
    html = (written["out"] / "report.html").read_text()
    page = Page(html)
    for tag, attrs in page.tags:
        for name in ("src", "href", "xlink:href", "action"):
            assert not (attrs.get(name) or "").startswith(("http://", "https://", "//")), (tag, attrs)
    assert not any(tag in {"script", "link", "img", "iframe"} for tag, _ in page.tags)
    assert "http://" not in html and "https://" not in html and "url(" not in html  # no namespace URL either
    assert sum(tag == "svg" for tag, _ in page.tags) == 2
    assert written["run_id"] in page.text and "finished" in page.text


def test_one_point_per_arm_with_resolve_data(written):
    page = Page((written["out"] / "report.html").read_text())
    with_data = [a["arm"] for a in written["document"]["arms"] if a["avg_at_k"]["value"] is not None]
    assert sorted(with_data) == sorted(MODEL_ARMS + ("oracle",))
    assert sorted(p["data-arm"] for p in page.with_class("arm-point")) == sorted(with_data)
    # the unpriced arm has no cost per resolved attempt: it sits on the strip, not on the plot
    unpriced = [p for p in page.with_class("arm-point") if p["data-arm"] == "unpriced"]
    assert unpriced[0].get("data-cost") == "null"
    assert sorted(b["data-arm"] for b in page.with_class("arm-bar")) == sorted(with_data)
    # same resolve rate: the arm cheaper per resolved attempt alone is the frontier (which one depends on how long
    # the lease ran; the oracle is a reference, not an option)
    arms = {a["arm"]: a for a in written["document"]["arms"]}
    assert arms["hosted"]["avg_at_k"]["value"] == arms["frognano"]["avg_at_k"]["value"]
    cheaper = min(("hosted", "frognano"), key=lambda a: arms[a]["cost_per_resolved_attempt"]["value"])
    assert [p["data-arms"] for p in page.with_class("pareto-frontier")] == [cheaper]


def _document_values(arm: dict) -> dict:
    cost = arm["cost_usd"]
    return {"arm": arm["arm"], "kind": arm["kind"], "model": arm["model"], "status": arm["status"],
            "tasks_seeds": arm["tasks"], "resolved_attempts": arm["resolved_attempts"],
            "resolved_tasks": arm["resolved_tasks"], "avg_at_k": arm["avg_at_k"]["value"],
            "cost_per_resolved_attempt": arm["cost_per_resolved_attempt"]["value"],
            "cost_per_resolved_task": arm["cost_per_resolved_task"]["value"], "cost_total": cost["total"],
            "cost_tokens": cost["tokens"], "cost_gpu": cost["gpu"], "cost_sandbox": cost["sandbox"],
            "utilization": arm["utilization"], "harness_error_rate": arm["harness_error_rate"],
            "infra_error_rate": arm["infra_error_rate"], "grading_error_rate": arm["grading_error_rate"],
            "price_source": arm["price_source"],
            "flagged_attempts": arm["flagged_attempts"],
            "unpriced_calls": arm["unpriced_calls"], "impossible_usage_calls": arm["impossible_usage_calls"],
            "unrecorded_calls": arm["unrecorded_spend"]["calls"],
            "unrecorded_bound": arm["unrecorded_spend"]["bound_usd"]}


def test_arm_table_numbers_are_the_documents(written):
    html = (written["out"] / "report.html").read_text()
    table = Page(_section(html, '<table class="arms"', "</table>"))
    arms = {a["arm"]: a for a in written["document"]["arms"]}
    rows: dict[str, dict[str, str]] = {}
    current = None
    for tag, attrs in table.tags:
        if tag == "tr" and "data-arm" in attrs:
            current = attrs["data-arm"]
            rows[current] = {}
        elif tag == "td" and current:
            rows[current][attrs["data-key"]] = attrs
    assert list(rows) == list(arms)
    for name, cells in rows.items():
        expected = _document_values(arms[name])
        assert set(cells) == set(expected)
        for key, value in expected.items():
            assert json.loads(cells[key]["data-value"]) == value, (name, key)
        for key in ("avg_at_k", "cost_per_resolved_attempt", "cost_per_resolved_task"):
            ci = arms[name][key]["ci95"]
            assert (json.loads(cells[key]["data-ci95"]) if "data-ci95" in cells[key] else None) == ci, (name, key)
    hosted = arms["hosted"]
    assert hosted["cost_per_resolved_attempt"]["value"] > 0 and hosted["resolved_attempts"] == 4
    # the figures shown are readable: percentages and dollars, with the CI
    assert "66.7% [" in table.text and "n/a" in table.text


def test_notes_carry_every_reason_and_the_lost_trajectory(written):
    html_text = Page((written["out"] / "report.html").read_text()).text
    markdown = (written["out"] / "summary.md").read_text()
    reasons = []

    def walk(value):
        if isinstance(value, dict):
            for key, item in value.items():
                if (key == "reason" or key.endswith("_reason")) and isinstance(item, str) and item:
                    reasons.append(item)
                else:
                    walk(item)
        elif isinstance(value, list):
            for item in value:
                walk(item)
    walk(written["document"])
    assert any("unpriced" in r for r in reasons) and any("unbounded" in r for r in reasons)
    for reason in reasons:
        assert " ".join(reason.split()) in html_text, reason
        assert reason.replace("|", "\\|") in markdown, reason
    assert "unpriced: 1 final attempt has no readable trajectory file" in html_text
    assert "unpriced: 1 final attempt has no readable trajectory file" in markdown


def test_provenance_footer(written):
    db, run_id = written["db"], written["run_id"]
    html = (written["out"] / "report.html").read_text()
    footer = Page(_section(html, '<footer id="provenance"', "</footer>")).text
    markdown = (written["out"] / "summary.md").read_text()
    hashes = [h for (h,) in sql(db, "select distinct sandbox_spec_hash from episodes where run_id = ? and "
                                    "sandbox_spec_hash is not null", [run_id])]
    assert hashes
    for text in (footer, markdown):
        assert litellm_revision() in text
        assert f"leafcost version: {metadata.version('leafcost')}" in text
        for h in hashes:
            assert h in text
        for arm in written["document"]["arms"]:
            assert f"{arm['arm']}: {arm['price_source']}" in text


def test_markdown_table_has_a_row_per_arm(written):
    markdown = (written["out"] / "summary.md").read_text()
    rows = [line for line in markdown.splitlines() if line.startswith("| ")]
    assert len(rows) == 1 + len(written["document"]["arms"])  # header and one row per arm
    widths = {line.count(" | ") for line in rows}
    assert len(widths) == 1


def test_breakeven_panels_are_computed_by_compare(written):
    document = written["document"]
    arms = {a["arm"]: a for a in document["arms"]}
    page = Page((written["out"] / "report.html").read_text())
    panels = page.with_class("breakeven")
    assert [(p["data-self-hosted"], p["data-hosted"]) for p in panels] == [("frognano", "hosted"),
                                                                           ("frognano", "unpriced")]
    expected = breakeven(arms["frognano"], arms["hosted"])
    html = (written["out"] / "report.html").read_text()
    panel = Page(_section(html, 'data-hosted="hosted"', "</div>"))
    shown = {attrs["data-key"]: json.loads(attrs["data-value"]) for tag, attrs in panel.tags if tag == "dd"}
    assert shown and all(expected[key] == value for key, value in shown.items())
    assert "hosted_cost_per_resolved_attempt" in shown
    unpriced = Page(_section(html, 'data-hosted="unpriced"', "</div>")).text
    assert breakeven(arms["frognano"], arms["unpriced"])["reason"] in unpriced


def test_csv_and_parquet_hold_every_row_of_the_run(written):
    db, run_id, out = written["db"], written["run_id"], written["out"]
    for name, table in (("episodes", "episodes"), ("calls", "model_calls")):
        count = sql(db, f"select count(*) from {table} where run_id = ?", [run_id])[0][0]
        assert count > 0
        with open(out / f"{name}.csv", newline="") as f:
            rows = list(csv.reader(f))
        columns = [c for (c,) in sql(db, "select column_name from duckdb_columns() where table_name = ? "
                                         "order by column_index", [table])]
        assert rows[0] == columns and len(rows) - 1 == count
        with duckdb.connect() as conn:
            assert conn.execute(f"select count(*) from '{out / (name + '.parquet')}'").fetchone()[0] == count
            assert conn.execute(f"select count(distinct run_id), min(run_id) from '{out / (name + '.parquet')}'"
                                ).fetchone() == (1, run_id)


def test_predictions_are_the_trajectories_patches(written):
    db, run_id, out = written["db"], written["run_id"], written["out"]
    for arm in MODEL_ARMS:
        finals = sql(db, "select task_id, seed, trajectory_path from episodes where run_id = ? and arm = ? and final "
                         "order by task_id, seed", [run_id, arm])
        lines = [json.loads(line) for line in (out / "predictions" / f"{arm}.jsonl").read_text().splitlines()]
        assert len(lines) == len(finals) == 6
        model = next(a["model"] for a in written["document"]["arms"] if a["arm"] == arm)
        for line, (task_id, seed, path) in zip(lines, finals):
            assert set(line) == {"instance_id", "model_name_or_path", "model_patch", "seed"}
            assert (line["instance_id"], line["seed"], line["model_name_or_path"]) == (task_id, seed, f"{arm}:{model}")
            patch = "" if path == written["lost"] else json.loads(Path(path).read_text())["output_patch"]
            assert line["model_patch"] == patch
        for seed in (0, 1):
            per_seed = [json.loads(line) for line in
                        (out / "predictions" / f"{arm}.seed{seed}.jsonl").read_text().splitlines()]
            assert per_seed == [line for line in lines if line["seed"] == seed]
            assert len({line["instance_id"] for line in per_seed}) == len(per_seed) == 3  # one per instance
    hosted = [json.loads(line) for line in (out / "predictions" / "hosted.jsonl").read_text().splitlines()]
    assert sum("a + b" in line["model_patch"] for line in hosted) == 4  # the scripted edit applies to calc-a and -b


def test_summary_json_is_the_cli_summary(written):
    result = subprocess.run([str(LEAFCOST), "summary", written["run_id"], "--db", str(written["db"]), "--json"],
                            capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stderr[-2000:]
    assert (written["out"] / "summary.json").read_text() == result.stdout == dumps(written["document"])


def _cli() -> Typer:
    app = Typer(add_completion=False)
    app.command()(report_command)
    return app


def test_report_command(written, tmp_path):
    runner = CliRunner()
    result = runner.invoke(_cli(), [written["run_id"], "--db", str(written["db"]), "--out", str(tmp_path / "r"),
                                    "--json"])
    assert result.exit_code == 0, result.output
    files = json.loads(result.stdout)
    assert set(files) == set(written["files"]) and all(Path(p).is_file() for p in files.values())
    plain = runner.invoke(_cli(), [written["run_id"], "--db", str(written["db"]), "-o", str(tmp_path / "p")])
    assert plain.exit_code == 0 and str(tmp_path / "p" / "report.html") in plain.stdout
    unknown = runner.invoke(_cli(), ["no-such-run", "--db", str(written["db"]), "--out", str(tmp_path / "u")])
    assert unknown.exit_code == 2 and "no run 'no-such-run'" in unknown.output
    assert len(unknown.output.strip().splitlines()) == 1
    missing = runner.invoke(_cli(), [written["run_id"], "--db", str(tmp_path / "none.duckdb"), "--out",
                                     str(tmp_path / "m")])
    assert missing.exit_code == 2 and "no ledger here" in missing.output
    assert not (tmp_path / "u").exists() and not (tmp_path / "m").exists()


def test_the_report_command_upgrades_a_ledger_from_an_older_leafcost(tmp_path):
    old = tmp_path / "old.duckdb"
    with duckdb.connect(str(old)) as conn:
        migrate(conn, old, MIGRATIONS[:-1])  # the ledger of the leafcost before the last migration
    with pytest.raises(LedgerOutdated):  # read as it is, the library refuses it ...
        write_report(old, "some-run", tmp_path / "r")
    result = CliRunner().invoke(_cli(), ["some-run", "--db", str(old), "--out", str(tmp_path / "r")])
    assert result.exit_code == 2 and "no run 'some-run'" in result.output  # ... the command upgrades it first
    with duckdb.connect(str(old), read_only=True) as conn:
        assert int(conn.execute("SELECT value FROM meta WHERE key = 'schema_version'").fetchone()[0]) == SCHEMA_VERSION


# ---------------------------------------------------------------------------------------------------------
# Charts on hand-made documents


def _arm(name: str, rate: float | None, cost: float | None, *, reason: str | None = None,
         parts: tuple[float | None, float, float] = (0.0, 0.0, 0.0), kind: str = "hosted") -> dict:
    total = None if parts[0] is None else sum(parts)
    return {"arm": name, "kind": kind, "unpriced_calls": 3 if parts[0] is None else 0,
            "avg_at_k": {"value": rate, "ci95": None if rate is None else [max(0, rate - 0.1), min(1, rate + 0.1)]},
            "cost_per_resolved_attempt": ({"value": cost, "ci95": [cost * 0.8, cost * 1.3]} if cost is not None
                                          else {"value": None, "ci95": None, "reason": reason}),
            "cost_usd": {"total": total, "tokens": parts[0], "gpu": parts[1], "sandbox": parts[2]}}


def _svg(markup: str) -> ET.Element:
    return ET.fromstring(markup)


def _q(tag: str) -> str:
    return f"{{{SVG_NS}}}{tag}"


def _points(root: ET.Element) -> dict[str, ET.Element]:
    return {g.get("data-arm"): g for g in root.iter(_q("g")) if g.get("class") == "arm-point"}


def test_pareto_frontier_leaves_out_a_dominated_arm():
    document = {"run_id": "hand", "arms": [
        _arm("cheap-good", 0.8, 1.0), _arm("dominated", 0.5, 2.0), _arm("best-dear", 0.9, 3.0),
        _arm("no-cost", 0.2, None, reason="no resolved attempts"), _arm("not-run", None, None, reason="skipped"),
        _arm("oracle", 1.0, 0.0001, kind="oracle")]}
    root = _svg(cost_vs_resolve_svg(document))
    points = _points(root)
    assert set(points) == {"cheap-good", "dominated", "best-dear", "no-cost", "oracle"}  # not-run: no resolve data
    # the oracle beats every model but is no option: drawn as a reference, off the frontier
    assert points["oracle"].get("data-reference") == "true" and points["oracle"].get("data-frontier") == "false"
    centre = {name: f"{c.get('cx')},{c.get('cy')}" for name, g in points.items() for c in g.iter(_q("circle"))}
    (frontier,) = [p for p in root.iter(_q("polyline")) if p.get("class") == "pareto-frontier"]
    assert frontier.get("points").split() == [centre["cheap-good"], centre["best-dear"]]
    assert frontier.get("data-arms") == "cheap-good best-dear"
    assert points["dominated"].get("data-frontier") == "false"
    # higher resolve rate is further right; a lower cost is lower on the page (a larger pixel y)
    cx = {n: float(c.split(",")[0]) for n, c in centre.items()}
    cy = {n: float(c.split(",")[1]) for n, c in centre.items()}
    assert cx["best-dear"] > cx["cheap-good"] > cx["dominated"] and cy["cheap-good"] > cy["best-dear"]


def test_null_cost_arm_is_on_the_strip_with_its_reason():
    document = {"run_id": "hand", "arms": [_arm("priced", 0.5, 0.02),
                                           _arm("free", 0.25, None, reason="no resolved attempts")]}
    root = _svg(cost_vs_resolve_svg(document))
    strip = _points(root)["free"]
    assert strip.get("data-cost") == "null" and not list(strip.iter(_q("circle")))
    assert "no resolved attempts" in "".join(strip.itertext())
    frontier = [p for p in root.iter(_q("polyline")) if p.get("class") == "pareto-frontier"]
    assert frontier[0].get("data-arms") == "priced"


def test_text_is_escaped():
    nasty = 'a<b>&"c\''
    document = {"run_id": "r<&>", "arms": [_arm("x<&>", 0.5, 0.02),
                                           _arm("y", 0.3, None, reason=f"reason {nasty}", parts=(None, 0.0, 0.01))]}
    for markup in (cost_vs_resolve_svg(document), cost_breakdown_svg(document)):
        root = _svg(markup)  # parses as XML
        assert root.get("role") == "img" and "r<&>" in root.get("aria-label")
        assert root.find(_q("title")) is not None and root.get("viewBox").startswith("0 0 ")
        assert "x<&>" in "".join(root.itertext())
    assert nasty in "".join(_svg(cost_vs_resolve_svg(document)).itertext())
    inline = ET.fromstring(cost_vs_resolve_svg(document, standalone=False))
    assert inline.tag == "svg" and "http" not in cost_vs_resolve_svg(document, standalone=False)


def test_costs_over_two_decades_get_a_log_axis():
    wide = {"run_id": "w", "arms": [_arm("a", 0.5, 0.001), _arm("b", 0.7, 1.0)]}
    narrow = {"run_id": "n", "arms": [_arm("a", 0.5, 0.2), _arm("b", 0.7, 1.0)]}
    ticks = lambda root: [t.text for t in root.iter(_q("text")) if "y-tick" in (t.get("class") or "")]  # noqa: E731
    wide_root, narrow_root = _svg(cost_vs_resolve_svg(wide)), _svg(cost_vs_resolve_svg(narrow))
    assert "log scale" in "".join(wide_root.itertext()) and "log scale" not in "".join(narrow_root.itertext())
    assert ticks(wide_root) == ["$0.0001", "$0.001", "$0.01", "$0.1", "$1", "$10"]
    assert ticks(narrow_root)[0] == "$0"


def test_breakdown_stacks_the_parts_and_leaves_a_gap_for_no_total():
    document = {"run_id": "b", "arms": [
        _arm("self", 0.5, 1.0, parts=(0.0, 2.0, 0.5), kind="self-hosted"),
        _arm("api", 0.6, 1.0, parts=(1.0, 0.0, 0.5)),
        _arm("unknown", 0.4, None, reason="unpriced", parts=(None, 0.0, 0.25))]}
    root = _svg(cost_breakdown_svg(document))
    bars = {g.get("data-arm"): g for g in root.iter(_q("g")) if g.get("class") == "arm-bar"}
    assert set(bars) == {"self", "api", "unknown"}
    for name in ("self", "api"):
        segments = [r for r in bars[name].iter(_q("rect")) if r.get("class") == "segment"]
        assert [r.get("data-part") for r in segments] == ["tokens", "gpu", "sandbox"]
        assert sum(float(r.get("data-usd")) for r in segments) == pytest.approx(float(bars[name].get("data-total")))
    widths = {n: sum(float(r.get("width")) for r in bars[n].iter(_q("rect"))) for n in ("self", "api")}
    assert widths["self"] > widths["api"]  # $2.50 against $1.50 on one scale
    gap = bars["unknown"]
    assert gap.get("data-total") == "null" and [r.get("class") for r in gap.iter(_q("rect"))] == ["gap"]
    assert "no total: 3 hosted calls are unpriced" in "".join(gap.itertext())
    legend = [r.get("data-part") for r in root.iter(_q("rect")) if r.get("class") == "swatch"]
    assert legend == ["tokens", "gpu", "sandbox"]


def test_notes_name_the_figures_as_the_tables_do():
    """A reason's note names its figure as the table's header does (Avg@k, pass@k), not as its JSON field."""
    from reports.report import notes_of

    arm = {"arm": "hosted", "avg_at_k": {"value": None, "reason": "no finished episodes"},
           "pass_at_k": {"1": {"value": None, "reason": "no finished episodes"}},
           "cost_per_resolved_attempt": {"value": None, "reason": "no resolved attempts"}}
    assert notes_of({"run_status": "finished", "arms": [arm]}) == [
        "hosted: Avg@k, pass@k 1: no finished episodes", "hosted: cost per resolved attempt: no resolved attempts"]
