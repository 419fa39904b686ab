"""What a task, a model or a log wrote reaches the terminal as text only: no escape sequence passes through, and
Rich never reads it as markup (a real SWE-bench test id, `test_blueprint_prefix_slash[/--/]`, crashed `validate`
with MarkupError; `[[steps]]` printed as `[]`). Driven through `leafcost validate` and `leafcost run`."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from support.sglang_fake import ScriptedServer

from compare.display import clean, shown

LEAFCOST = Path(sys.executable).with_name("leafcost")
HOSTILE_LINES = ["FAILED tests/test_app.py::test_blueprint_prefix_slash[/--/] - AssertionError",
                 "\x1b[2J\x1b]0;pwned\x07 cleared [[steps]] [bold red]loud[/bold red]", "done\r\x1b[1A"]


def leafcost(*args: str, cwd: Path) -> subprocess.CompletedProcess:
    environment = {**os.environ, "LEAFCOST_CACHE": str(cwd / "cache"), "COLUMNS": "400"}  # no folded cells
    return subprocess.run([str(LEAFCOST), *args], capture_output=True, text=True, env=environment, timeout=600,
                          cwd=cwd)


def assert_inert(done: subprocess.CompletedProcess) -> str:
    """Neither stream carries a control character but newline, and nothing crashed in Rich; returns stdout."""
    for stream in (done.stdout, done.stderr):
        assert "MarkupError" not in stream and "Traceback" not in stream, stream[-2000:]
        assert not [c for c in stream if ord(c) < 32 and c != "\n" or 0x7f <= ord(c) <= 0x9f], stream[-2000:]
    return done.stdout


def test_validate_shows_hostile_task_names_and_verifier_output_as_text(make_task, tmp_path):
    script = "".join(f"echo '{line}'\n" for line in HOSTILE_LINES)  # the raw control characters, as a log has them
    name = "calc-\x1b[31m[red]x\x1b[0m-[[steps]]"
    task = make_task(name, files={"tests/test.sh": "#!/bin/bash\nmkdir -p /logs/verifier\n"
                                                   "echo 0 > /logs/verifier/reward.txt\n" + script})
    done = leafcost("validate", str(Path(task.path).parent), cwd=tmp_path)
    assert done.returncode == 1, done.stdout + done.stderr
    out = assert_inert(done)
    assert "test_blueprint_prefix_slash[/--/]" in out and "cleared [[steps]] [bold red]loud[/bold red]" in out
    assert "calc-\\x1b[31m[red]x\\x1b[0m-[[steps]]" in out  # the escape shown as its text, the markup as typed
    assert "\\x1b[2J\\x1b]0;pwned\\x07" in out and "valid: 0  invalid: 1" in out


def test_run_shows_an_endpoints_hostile_error_as_text(make_task, tmp_path):
    """An endpoint's refusal quoting escape sequences and markup: the arm stops on the configuration error and
    the summary table and the warnings show its words as text."""
    suite = Path(make_task("calc-a").path).parent
    message = "Invalid model name passed in model=x " + " ".join(HOSTILE_LINES)
    with ScriptedServer({"turns": [{"status": 400, "message": message}]}) as server:
        spec = {"name": "escaping", "suite": str(suite), "seeds": 1, "workers": 1, "max_attempts": 1,
                "task_order_seed": None, "budgets": {"max_steps": 2, "time_budget_sec": 60},
                "arms": [{"name": "model", "adapter": "sglang", "model": "frognano-4b", "base_url": server.base_url,
                          "max_retries": 0, "allow_unlisted_model": True,
                          "gpu": {"type": "H200", "usd_per_hour": 3.5}}]}
        (tmp_path / "spec.yaml").write_text(json.dumps(spec))
        done = leafcost("run", str(tmp_path / "spec.yaml"), "--db", str(tmp_path / "l.duckdb"), cwd=tmp_path)
    out = assert_inert(done)
    assert "stopped after a configuration error" in out
    assert "test_blueprint_prefix_slash[/--/]" in out and "[[steps]] [bold red]loud[/bold red]" in out
    assert "\\x1b[2J" in out


@pytest.mark.parametrize("text, expected", [
    ("a[/--/]b", "a\\[/--/]b"), ("\x1b[31m", "\\x1b[31m"), ("x\r\u202ey\x9b", "x\\r\\u202ey\\x9b"),
    ("keep\ttabs\nand lines", "keep\ttabs\nand lines"), ("[[steps]]", "[\\[steps]]"),
], ids=["closing-tag", "csi", "cr-bidi-c1", "tabs-newlines", "double-brackets"])
def test_shown_neutralizes_controls_and_escapes_markup(text, expected):
    assert shown(text) == expected


def test_clean_keeps_text_and_shows_controls():
    assert clean("ok \x07\x00 [b] \ud800") == "ok \\x07\\x00 [b] \ufffd"
