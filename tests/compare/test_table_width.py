"""Every table fits the terminal it is printed in: `leafcost summary`, `compare`, `run` and `validate` driven as a
user drives them (the real console script) with COLUMNS=80 print no line wider than 80, the columns a reader needs
first by default and the rest with --wide; narrower still, cells wrap and nothing runs past the edge."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
from rich.cells import cell_len
from support.sglang_fake import ScriptedServer

LEAFCOST = Path(sys.executable).with_name("leafcost")
DEFAULT_HEADERS = ["arm", "resolved", "Avg@k [95% CI]", "per resolved attempt", "cost total"]
WIDE_HEADERS = ["kind", "tasks×seeds", "tokens / lease / sandbox", "per resolved task", "util.", "prices"]


def leafcost(*args: str, columns: int, cwd: Path | None = None, expect: int = 0) -> str:
    environment = {**os.environ, "COLUMNS": str(columns)}
    if cwd is not None:
        environment["LEAFCOST_CACHE"] = str(cwd / "cache")
    done = subprocess.run([str(LEAFCOST), *args], capture_output=True, text=True, env=environment, timeout=600,
                          cwd=cwd)
    assert done.returncode == expect, done.stdout[-2000:] + done.stderr[-2000:]
    return done.stdout


def assert_fits(out: str, columns: int) -> None:
    wide = [line for line in out.splitlines() if cell_len(line.rstrip()) > columns]
    assert not wide, "\n".join(wide)


def header_row(out: str) -> str:
    """The table's header line (the one between ┃ borders)."""
    return next(line for line in out.splitlines() if line.startswith("┃"))


def test_summary_fits_80_columns_with_the_key_figures_and_more_with_wide(four_arm_run):
    db, run_id = four_arm_run
    out = leafcost("summary", run_id, "--db", str(db), columns=80)
    assert_fits(out, 80)
    assert [cell.strip() for cell in header_row(out).strip("┃").split("┃")] == DEFAULT_HEADERS
    assert "leafcost summary " + run_id in out
    for arm in ("frognano", "hosted", "unpriced", "oracle"):
        assert f"│ {arm} " in out
    assert "4/6" in out and "66.7%" in out and "[$0.000" in out and ", ∞)" in out  # a figure and its interval
    assert not any(header in out for header in WIDE_HEADERS)
    # one line per reason, naming every arm it applies to (not the same sentence four times). The reason carries
    # the arm's own resample count, so arms whose resolved patterns differ (an episode timing out under load) have
    # a line each: a line is never repeated word for word.
    flat = " ".join(out.split())
    # Two arms resolving the same tasks share the count (one bootstrap seed) and differ in which tail is open.
    reasons = re.findall(r"cost per resolved attempt: (nothing resolves in \d+ of \d+ resamples of the tasks, more "
                         r"than (?:either tail|the [\d.]+ % \w+ tail))", flat)
    assert reasons and len(reasons) == len(set(reasons))
    assert "12 hosted calls are unpriced" in flat

    wide = leafcost("summary", run_id, "--db", str(db), "--wide", columns=220)
    assert all(header in header_row(wide) for header in DEFAULT_HEADERS + WIDE_HEADERS)
    assert "self-hosted" in wide and "lease" in wide and "explicit" in wide
    assert_fits(leafcost("summary", run_id, "--db", str(db), "--wide", columns=80), 80)  # wrapped, not cut


def test_a_terminal_narrower_than_the_default_columns_wraps_cells_and_never_overflows(four_arm_run):
    db, run_id = four_arm_run
    for columns in (60, 45):
        out = leafcost("summary", run_id, "--db", str(db), columns=columns)
        assert_fits(out, columns)
        assert "frognano" in out and "66.7%" in out


def test_compare_has_its_own_title_and_fits(four_arm_run):
    db, run_id = four_arm_run
    out = leafcost("compare", run_id, "--arms", "hosted,frognano", "--db", str(db), columns=80)
    assert_fits(out, 80)
    assert f"leafcost compare {run_id}: hosted vs frognano" in out and "leafcost summary" not in out
    assert [cell.strip() for cell in header_row(out).strip("┃").split("┃")] == DEFAULT_HEADERS
    assert "hosted vs frognano on 3 shared tasks: comparable" in out
    # the break-even grid is a table too, its dollars the shared rule's ($2.00 per GPU-hour)
    assert "break-even utilization" in " ".join(out.split()) and "│ H100 low " in out and "$2.00" in out
    wide = leafcost("compare", run_id, "--arms", "hosted,frognano", "--db", str(db), "--wide", columns=220)
    assert all(header in header_row(wide) for header in DEFAULT_HEADERS + WIDE_HEADERS)
    document = json.loads(leafcost("compare", run_id, "--arms", "hosted,frognano", "--db", str(db), "--json",
                                   "--wide", columns=80))
    assert document["arms"] == ["hosted", "frognano"]  # --json: the document, whatever --wide says


def test_the_demos_closing_summary_fits_and_widens(four_arm_run, capsys, monkeypatch):
    """What `leafcost demo` ends with (its run's summary table), at 80 columns and with --wide."""
    from compare.cli_results import print_run_figures

    db, run_id = four_arm_run
    monkeypatch.setenv("COLUMNS", "80")
    print_run_figures(db, run_id)
    out = capsys.readouterr().out
    assert_fits(out, 80)
    assert [cell.strip() for cell in header_row(out).strip("┃").split("┃")] == DEFAULT_HEADERS
    monkeypatch.setenv("COLUMNS", "220")
    print_run_figures(db, run_id, wide=True)
    wide = header_row(capsys.readouterr().out)
    assert all(header in wide for header in DEFAULT_HEADERS + WIDE_HEADERS)


def test_the_run_table_fits_and_puts_an_arms_reason_below_it(make_task, tmp_path):
    """An oracle arm and an arm its endpoint refuses: the refusal is a sentence, printed under the table by
    default (once) and in the table's note column with --wide."""
    suite = Path(make_task("calc-a").path).parent
    message = "Invalid model name passed in model=frognano-4b: the endpoint serves another model, pick it"
    with ScriptedServer({"turns": [{"status": 400, "message": message}] * 4}) as server:
        spec = {"name": "width", "suite": str(suite), "seeds": 1, "workers": 1, "max_attempts": 1,
                "budgets": {"max_steps": 2, "time_budget_sec": 60},
                "arms": [{"name": "oracle", "adapter": "oracle"},
                         {"name": "refused", "adapter": "sglang", "model": "frognano-4b",
                          "base_url": server.base_url, "max_retries": 0, "allow_unlisted_model": True,
                          "gpu": {"type": "H200", "usd_per_hour": 3.5}}]}
        (tmp_path / "spec.yaml").write_text(json.dumps(spec))
        out = leafcost("run", str(tmp_path / "spec.yaml"), "--db", str(tmp_path / "narrow.duckdb"), columns=80,
                       cwd=tmp_path)
        wide = leafcost("run", str(tmp_path / "spec.yaml"), "--db", str(tmp_path / "wide.duckdb"), "--wide",
                        columns=220, cwd=tmp_path)
    assert_fits(out, 80)
    assert [cell.strip() for cell in header_row(out).strip("┃").split("┃")] == [
        "arm", "episodes", "resolved", "errors", "spend"]
    assert "│ oracle " in out and "│ refused " in out and "1/1" in out
    below = " ".join(out[out.index("└"):].split())
    assert "refused: stopped after a configuration error" in below and "Invalid model name passed" in below
    assert below.count("Invalid model name passed") == 1  # said once: the run's warning, no note repeating it
    assert [cell.strip() for cell in header_row(wide).strip("┃").split("┃")] == [
        "arm", "episodes", "resolved", "errors", "spend", "note"]
    row = next(line for line in wide.splitlines() if line.startswith("│ refused "))
    assert "stopped after a configuration error" in row


def test_validate_fits_shows_bracketed_ids_as_written_and_errors_below(make_task, tmp_path):
    """A task id with Rich's markup brackets (as SWE-bench test ids have: `[/--/]`, `[[steps]]`) is printed as
    written; the verifier's last lines follow the table by default and are its error column with --wide."""
    name = "calc-[bold]x-[[steps]]"  # a directory name: no "/"; the verifier prints the closing tag
    task = make_task(name, files={"tests/test.sh": "#!/bin/bash\nmkdir -p /logs/verifier\n"
                                                   "echo 'FAILED test_blueprint_prefix_slash[/--/]'\n"
                                                   "echo 0 > /logs/verifier/reward.txt\n"})
    suite = str(Path(task.path).parent)
    out = leafcost("validate", suite, columns=80, cwd=tmp_path, expect=1)
    assert_fits(out, 80)
    assert [cell.strip() for cell in header_row(out).strip("┃").split("┃")] == [
        "task", "oracle", "empty run", "valid"]
    assert f"│ {name} " in out  # the id exactly, in its row
    below = " ".join(out[out.index("└"):].split())
    assert f"{name}: " in below and "test_blueprint_prefix_slash[/--/]" in below
    wide = leafcost("validate", suite, "--wide", columns=220, cwd=tmp_path, expect=1)
    assert [cell.strip() for cell in header_row(wide).strip("┃").split("┃")] == [
        "task", "oracle", "empty run", "valid", "seconds", "error"]
    assert "test_blueprint_prefix_slash[/--/]" in wide[:wide.index("└")]  # inside the table
    assert_fits(leafcost("validate", suite, "--wide", columns=80, cwd=tmp_path, expect=1), 80)


@pytest.mark.parametrize("command", ["summary", "compare", "reprice", "run", "demo", "validate"])
def test_every_table_command_takes_wide(command):
    done = subprocess.run([str(LEAFCOST), command, "--help"], capture_output=True, text=True, timeout=60,
                          env={**os.environ, "COLUMNS": "200"})
    assert done.returncode == 0 and "--wide" in done.stdout
