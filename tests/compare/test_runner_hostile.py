"""One hostile episode never stops a run or moves a grade: the review's attacks through the real runner, a scripted
model over HTTP and real sandboxes (shared/reviews/2026-12-03-security.md #3, #4)."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

from support.sglang_fake import ScriptedServer

from compare.ledger import Ledger
from compare.runner import Runner
from compare.spec import parse_run_spec


def one_arm_spec(suite: Path, base_url: str | None, **changes):
    arm = ({"name": "model", "adapter": "sglang", "model": "frognano-4b", "base_url": base_url, "max_retries": 0,
            "gpu": {"type": "H200", "usd_per_hour": 3.5}} if base_url else {"name": "oracle", "adapter": "oracle"})
    raw = {"name": "hostile", "suite": str(suite), "seeds": 1, "workers": 1, "max_attempts": 1,
           "task_order_seed": None, "budgets": {"max_steps": 4, "time_budget_sec": 120}, "arms": [arm]}
    raw.update(changes)
    return parse_run_spec(raw)


def run(spec, db: Path):
    ledger = Ledger.open(db)
    try:
        summary = asyncio.run(Runner(spec, ledger, db_path=db).run())
        episodes = ledger.query("SELECT task_id, exit_reason, resolved, harness_error, infra_error, patch_bytes, "
                                "error_detail, trajectory_path FROM episodes ORDER BY task_id")
    finally:
        ledger.close()
    return summary, episodes


def bash_turns(*commands: str) -> dict:
    return {"turns": [{"tool_calls": [{"name": "Bash", "arguments": {"command": c}}]} for c in commands]
            + [{"content": "I fixed it."}]}


def test_a_forger_left_running_by_the_model_does_not_resolve_the_task(make_task, tmp_path):
    suite = Path(make_task("calc-a").path).parent
    forger = ("nohup setsid python3 -c 'import time\nwhile True:\n  try: open(\"/logs/verifier/reward.json\", \"w\")"
              ".write(\"{\\\"reward\\\": 1}\")\n  except Exception: pass\n  time.sleep(0.001)' >/dev/null 2>&1 & "
              "echo started")
    with ScriptedServer(bash_turns(forger)) as server:
        summary, episodes = run(one_arm_spec(suite, server.base_url), tmp_path / "l.duckdb")
    assert summary.status == "finished"
    assert [(e["exit_reason"], e["resolved"], e["patch_bytes"]) for e in episodes] == [("agent", False, 0)]


def test_a_huge_patch_from_diff_external_ends_nothing_but_its_own_patch(make_task, tmp_path):
    make_task("calc-a")
    suite = Path(make_task("calc-b").path).parent
    flood = ("printf '#!/bin/sh\\nhead -c 9000000 /dev/zero | tr \"\\\\000\" \"\\\\001\"\\n' > /tmp/d; "
             "chmod +x /tmp/d; "
             "git config diff.external /tmp/d; head -c 9000000 /dev/urandom > big.bin; echo x >> calc.py")
    with ScriptedServer(bash_turns(flood)) as server:
        summary, episodes = run(one_arm_spec(suite, server.base_url), tmp_path / "l.duckdb")
    assert summary.status == "finished"
    assert [e["task_id"] for e in episodes] == ["calc-a", "calc-b"]  # the second task ran
    trajectory = json.loads(Path(episodes[0]["trajectory_path"]).read_text())
    assert trajectory["patch_error"] and "exceeds" in trajectory["patch_error"]
    assert trajectory["grade"] is not None and episodes[0]["resolved"] is False


def test_a_broken_task_is_a_task_error_and_the_run_goes_on(make_task, tmp_path):
    make_task("good")
    broken = make_task("broken")
    broken.dockerfile.write_bytes(b"FROM x\n\xff\xfe\n")
    suite = Path(broken.path).parent
    summary, episodes = run(one_arm_spec(suite, None), tmp_path / "l.duckdb")
    assert summary.status == "finished"
    by_task = {e["task_id"]: e for e in episodes}
    assert by_task["broken"]["exit_reason"] == "task_error"
    assert by_task["broken"]["harness_error"] is True and by_task["broken"]["infra_error"] is False
    assert "not UTF-8" in by_task["broken"]["error_detail"]
    assert by_task["good"]["resolved"] is True


def test_a_configuration_error_stops_the_arm_and_is_never_a_miss(make_task, tmp_path):
    """A router answering "invalid model" (HTTP 400) is a misconfigured arm: one episode says so, the rest don't run."""
    make_task("calc-a")
    suite = Path(make_task("calc-b").path).parent
    refusal = {"turns": [{"status": 400, "message": "Invalid model name passed in model=frognano-4b-typo"}]}
    with ScriptedServer(refusal) as server:
        spec = one_arm_spec(suite, server.base_url)
        spec.arms[0].allow_unlisted_model = True
        summary, episodes = run(spec, tmp_path / "l.duckdb")
    assert [(e["task_id"], e["exit_reason"], e["harness_error"], e["resolved"]) for e in episodes] == [
        ("calc-a", "configuration_error", True, False)]
    arm = summary.arms[0]
    assert (arm.done, arm.errors, arm.status) == (1, 1, "failed")
    assert "configuration error" in arm.status_reason and "Invalid model name" in arm.status_reason
    ledger = Ledger.open(tmp_path / "l.duckdb")
    try:
        status = ledger.query("SELECT status, status_reason FROM arms")[0]
    finally:
        ledger.close()
    assert status["status"] == "failed" and "other episodes were not run" in status["status_reason"]
