"""An arm a configuration error stops (401, 404, an unknown model) has no resolve rate: null with the reason in the
JSON and the tables; nothing of it is graded; nothing is billed but the calls it made (no sandbox); and once the
first attempt meets the error no other starts, however many workers there are. Through `leafcost run` and
`summary`, a scripted endpoint over HTTP and real bubblewrap sandboxes."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import duckdb
import pytest
import yaml
from support.sglang_fake import ScriptedServer

LEAFCOST = Path(sys.executable).with_name("leafcost")
REFUSED = {"status": 401, "message": "Invalid API key: the key was revoked"}


@pytest.fixture
def suite(make_task) -> Path:
    make_task("calc-a")
    return Path(make_task("calc-b").path).parent


def run_refused(suite: Path, tmp_path: Path, script: dict) -> tuple[ScriptedServer, Path, str]:
    """Two tasks × two seeds with four workers, every key of one self-hosted arm; (server, ledger, run id)."""
    db = tmp_path / "l.duckdb"
    with ScriptedServer(script) as server:
        spec = tmp_path / "spec.yaml"
        spec.write_text(yaml.safe_dump({
            "name": "refused", "suite": str(suite), "seeds": 2, "workers": 4, "max_attempts": 2,
            "budgets": {"max_steps": 4, "time_budget_sec": 120},
            "arms": [{"name": "model", "adapter": "sglang", "model": "frognano-4b", "base_url": server.base_url,
                      "max_retries": 0, "gpu": {"type": "H200", "usd_per_hour": 3.5}}]}))
        ran = subprocess.run([str(LEAFCOST), "run", str(spec), "--db", str(db), "--json"], capture_output=True,
                             text=True, timeout=600)
        chats = len(server.chat_bodies)
    assert ran.returncode == 0, ran.stderr
    document = json.loads(ran.stdout)
    assert document["arms"][0]["status"] == "failed"
    return chats, db, document["run_id"]


def episodes(db: Path) -> list[dict]:
    with duckdb.connect(str(db), read_only=True) as conn:
        cursor = conn.execute("SELECT exit_reason, final, resolved, reward, grade_error, trajectory_path, "
                              "sandbox_cpu_seconds FROM episodes ORDER BY started_at")
        names = [column[0] for column in cursor.description]
        return [dict(zip(names, row)) for row in cursor.fetchall()]


def summary_of(db: Path, run_id: str) -> dict:
    shown = subprocess.run([str(LEAFCOST), "summary", run_id, "--db", str(db), "--json"], capture_output=True,
                           text=True, timeout=120)
    assert shown.returncode == 0, shown.stderr
    return json.loads(shown.stdout)["arms"][0]


def assert_no_rate_and_no_sandbox_bill(arm: dict) -> None:
    assert arm["avg_at_k"]["value"] is None and arm["avg_at_k"]["ci95"] is None
    assert "configuration error" in arm["avg_at_k"]["reason"] and "Invalid API key" in arm["avg_at_k"]["reason"]
    assert arm["pass_at_k"] == {} and arm["pass_hat_k"] == {}
    for figure in ("cost_per_resolved_attempt", "cost_per_resolved_task"):
        assert arm[figure]["value"] is None and "configuration error" in arm[figure]["reason"]
    assert arm["cost_usd"]["sandbox"] == 0.0  # the sandbox a configuration error ended is not billed
    assert (arm["attempts"], arm["resolved_attempts"], arm["configuration_error_rate"]) == (1, 0, 1.0)


def test_a_refused_key_with_four_workers_starts_one_episode_grades_nothing_and_has_no_rate(suite, tmp_path):
    chats, db, run_id = run_refused(suite, tmp_path, {"turns": [REFUSED]})
    assert chats == 1  # one request met the 401; no other episode asked
    rows = episodes(db)
    assert len(rows) == 1
    only = rows[0]
    assert (only["exit_reason"], only["final"], only["resolved"], only["reward"], only["grade_error"]) == (
        "configuration_error", True, False, None, None)
    assert json.loads(Path(only["trajectory_path"]).read_text())["grade"] is None  # never graded
    assert only["sandbox_cpu_seconds"] is not None  # measured, as every sandbox is, and not billed
    arm = summary_of(db, run_id)
    assert_no_rate_and_no_sandbox_bill(arm)
    table = subprocess.run([str(LEAFCOST), "summary", run_id, "--db", str(db)], capture_output=True, text=True,
                           timeout=120)
    assert table.returncode == 0, table.stderr


def test_a_key_revoked_mid_run_cancels_the_arms_attempts_in_flight_before_they_are_graded(suite, tmp_path):
    """The endpoint answers the first step of every episode, then refuses: by then several attempts are in flight.
    The first refusal stops the arm; every other attempt is cancelled (recorded, not final, never graded)."""
    answered = {"tool_calls": [{"name": "Bash", "arguments": {"command": "true"}}], "delay": 0.5}
    # the refusal comes 2 s after the first answer let the other workers start: they are in flight when it comes
    chats, db, run_id = run_refused(suite, tmp_path, {"turns": [answered, {**REFUSED, "delay": 2.0}]})
    rows = episodes(db)
    finals = [row for row in rows if row["final"]]
    assert [row["exit_reason"] for row in finals] == ["configuration_error"]
    others = [row for row in rows if not row["final"]]
    assert others and all(row["exit_reason"] == "cancelled" for row in others), rows
    assert all(row["reward"] is None and row["grade_error"] is None and not row["resolved"] for row in rows)
    assert all(json.loads(Path(row["trajectory_path"]).read_text())["grade"] is None for row in rows)
    assert_no_rate_and_no_sandbox_bill(summary_of(db, run_id))
