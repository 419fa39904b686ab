"""The ledger as the runner and users see it: real DuckDB files, every write read back with SQL, migrations,
resume helpers, the secret guard, readers in this and other processes, and a writer killed with SIGKILL."""

from __future__ import annotations

import asyncio
import json
import os
import signal
import socket
import subprocess
import sys
import textwrap
from datetime import datetime, timedelta, timezone
from pathlib import Path
from zoneinfo import ZoneInfo

import duckdb
import pytest

from adapters.base import CallAttempt, Lease, ServerSample, ToolCall, Usage
from compare.ledger import (MIGRATIONS, SCHEMA_VERSION, Ledger, LedgerBusy, LedgerError, SecretInLedger,
                            check_no_secrets, connect_read_only, default_db_path, migrate, redact_secrets)
from compare.spec import parse_run_spec

REPO = Path(__file__).resolve().parents[2]
T0 = datetime(2025, 3, 1, 12, 0, 0, tzinfo=timezone.utc)

SPEC = parse_run_spec({
    "name": "demo", "suite": "builtin", "seeds": 2,
    "arms": [{"name": "local", "adapter": "local"},
             {"name": "hosted", "adapter": "router", "model": "openai/gpt-x", "api_key_env": "ROUTER_API_KEY"}],
})

TABLE_COLUMNS = {
    "meta": ["key", "value"],
    "runs": ["run_id", "name", "created_at", "updated_at", "status", "spec_json", "spec_sha256", "suite",
             "task_ids", "seeds", "leafcost_version", "sandbox_options", "status_reason", "strict_grading"],
    "arms": ["run_id", "arm", "adapter", "model", "endpoint", "served_model", "config", "server_info",
             "model_info", "warnings", "status", "status_reason", "started_at", "ended_at"],
    "episodes": ["episode_id", "run_id", "arm", "task_id", "seed", "attempt", "status", "exit_reason", "resolved",
                 "reward", "grade_error", "error_detail", "infra_error", "harness_error", "final", "n_steps",
                 "prompt_tokens", "cached_tokens", "completion_tokens", "reasoning_tokens", "model_calls",
                 "started_at", "ended_at", "elapsed_sec", "sandbox_spec_hash", "isolation", "sandbox_cpu_seconds",
                 "sandbox_start_sec", "patch_bytes", "trajectory_path", "hack_paths", "flagged"],
    "model_calls": ["call_id", "run_id", "arm", "episode_id", "step", "attempt", "model", "status", "http_status",
                    "error", "finish_reason", "prompt_tokens", "cached_tokens", "completion_tokens",
                    "reasoning_tokens", "total_tokens", "started_at", "latency_sec", "ttft_sec", "router_cost_usd",
                    "router_cost_detail", "router_retries", "router_fallbacks", "cost_usd", "price_source",
                    "price_revision", "request_id", "router_model", "router_deployment",
                    "cache_write_tokens", "call_key", "answer_truncated_chars"],
    "tool_calls": ["run_id", "arm", "episode_id", "step", "idx", "tool_call_id", "tool_name", "arguments_chars",
                   "output_chars", "started_at", "seconds"],
    "gpu_leases": ["lease_id", "run_id", "arm", "kind", "hardware", "count", "usd_per_hour", "started_at",
                   "ended_at", "heartbeat_at", "owner_pid", "owner_host"],
    "server_samples": ["run_id", "arm", "taken_at", "metric", "value"],
    "scenarios": ["run_id", "name", "created_at", "sheet", "summary"],
    "decision_looks": ["run_id", "look", "looked_at", "tasks", "total_tasks", "episodes", "spent_usd", "budget",
                       "result", "action", "reason", "unspent_episodes", "unspent_usd"],
    "run_plans": ["run_id", "made_at", "document"],
    "run_tasks": ["run_id", "task_id", "created_at"],
    "call_intents": ["call_key", "run_id", "arm", "episode_id", "attempt", "model", "sent_at", "request_bytes",
                     "max_tokens", "bound_usd", "price_source", "router_spend_usd", "router_prompt_tokens",
                     "router_completion_tokens", "reconciled_at", "reconcile_note"],
}


def run(coro):
    return asyncio.run(coro)


def call(attempt=1, prompt=100, cached=40, completion=30, reasoning=10, **extra) -> CallAttempt:
    usage = Usage(prompt_tokens=prompt, cached_tokens=cached, completion_tokens=completion,
                  reasoning_tokens=reasoning, total_tokens=prompt + completion)
    return CallAttempt(attempt=attempt, model="openai/gpt-x", status="ok", usage=usage, started_at=T0,
                       latency_sec=1.5, **extra)


async def new_run(ledger: Ledger, run_id: str = "demo-1", tasks=("t1", "t2")) -> str:
    await ledger.create_run(run_id, SPEC, task_ids=list(tasks), sandbox_options={"backend": "local", "cpus": 1})
    return run_id


def python(script: str, *args: str, timeout: float = 60) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-c", textwrap.dedent(script), *args], capture_output=True, text=True,
                          timeout=timeout, cwd=REPO, env={**os.environ, "PYTHONPATH": str(REPO)})


# schema and migrations ------------------------------------------------------------------------------------

def test_a_new_file_has_every_table_column_and_type_of_the_contract(tmp_path):
    Ledger.open(tmp_path / "l.duckdb").close()
    conn = connect_read_only(tmp_path / "l.duckdb")
    columns = {}
    for table, column, data_type in conn.execute(
            "SELECT table_name, column_name, data_type FROM duckdb_columns() WHERE NOT internal "
            "ORDER BY table_name, column_index"
    ).fetchall():
        columns.setdefault(table, {})[column] = data_type
    assert {t: list(c) for t, c in columns.items()} == TABLE_COLUMNS
    assert columns["runs"]["task_ids"] == "JSON" and columns["arms"]["config"] == "JSON"
    assert columns["episodes"]["started_at"] == "TIMESTAMP WITH TIME ZONE"
    assert columns["episodes"]["resolved"] == "BOOLEAN" and columns["episodes"]["reward"] == "DOUBLE"
    assert columns["model_calls"]["call_id"] == "BIGINT" and columns["model_calls"]["cost_usd"] == "DOUBLE"
    assert conn.execute("SELECT value FROM meta WHERE key = 'schema_version'").fetchone() == (str(SCHEMA_VERSION),)
    comment = conn.execute("SELECT comment FROM duckdb_columns() WHERE table_name = 'model_calls' "
                           "AND column_name = 'prompt_tokens'").fetchone()[0]
    assert "cached included" in comment


def test_a_v1_file_is_upgraded_in_place_and_keeps_its_rows(tmp_path):
    path = tmp_path / "v1.duckdb"
    conn = duckdb.connect(str(path))
    conn.execute(MIGRATIONS[0])  # a released step is frozen: this is exactly what leafcost wrote at version 1
    conn.execute("INSERT INTO meta VALUES ('schema_version', '1')")
    conn.execute("INSERT INTO runs VALUES ('old-run', 'old', TIMESTAMPTZ '2025-01-01 00:00:00+00', "
                 "TIMESTAMPTZ '2025-01-01 00:00:00+00', 'finished', '{}', 'abc', 'builtin', '[\"t1\"]', 1, "
                 "'0.0.1', NULL)")
    conn.close()
    ledger = Ledger.open(path)
    try:
        assert run(ledger.get_run("old-run")).task_ids == ["t1"]
        assert ledger.query("SELECT value FROM meta WHERE key = 'schema_version'") == [{"value": str(SCHEMA_VERSION)}]
        assert ledger.query("SELECT comment FROM duckdb_tables() WHERE table_name = 'episodes'")[0]["comment"]
    finally:
        ledger.close()


def test_an_empty_duckdb_file_becomes_a_ledger(tmp_path):
    path = tmp_path / "empty.duckdb"
    duckdb.connect(str(path)).close()
    with Ledger.open(path) as ledger:
        assert ledger.query("SELECT count(*) AS n FROM episodes") == [{"n": 0}]


def test_missing_steps_apply_in_one_transaction_and_a_failing_step_changes_nothing(tmp_path):
    conn = duckdb.connect(str(tmp_path / "m.duckdb"))
    assert migrate(conn, "m.duckdb", MIGRATIONS[:1]) == 1
    with pytest.raises(LedgerError, match="from schema version 1 failed"):
        migrate(conn, "m.duckdb", [MIGRATIONS[0], "ALTER TABLE runs ADD COLUMN note VARCHAR", "CREATE TABLE ("])
    names = {c for (c,) in conn.execute("SELECT column_name FROM duckdb_columns() WHERE table_name = 'runs'")
             .fetchall()}
    assert "note" not in names
    assert conn.execute("SELECT value FROM meta WHERE key = 'schema_version'").fetchone() == ("1",)
    assert migrate(conn, "m.duckdb", [MIGRATIONS[0], "ALTER TABLE runs ADD COLUMN note VARCHAR"]) == 2
    assert conn.execute("SELECT value FROM meta WHERE key = 'schema_version'").fetchone() == ("2",)
    conn.close()


def test_a_file_from_a_newer_leafcost_is_refused_and_left_untouched(tmp_path):
    path = tmp_path / "new.duckdb"
    Ledger.open(path).close()
    conn = duckdb.connect(str(path))
    conn.execute("UPDATE meta SET value = ? WHERE key = 'schema_version'", [str(SCHEMA_VERSION + 5)])
    conn.close()
    with pytest.raises(LedgerError, match=rf"newer leafcost \(ledger schema version {SCHEMA_VERSION + 5}"):
        Ledger.open(path)
    with pytest.raises(LedgerError, match="Upgrade leafcost"):
        connect_read_only(path)
    conn = duckdb.connect(str(path), read_only=True)
    assert conn.execute("SELECT value FROM meta").fetchone() == (str(SCHEMA_VERSION + 5),)
    conn.close()
    with Ledger.open(tmp_path / "other.duckdb"):  # the refusal released the file and this process's guard
        pass
    duckdb.connect(str(path)).close()


def test_an_older_file_is_refused_read_only_with_the_way_to_upgrade_it(tmp_path):
    path = tmp_path / "v1.duckdb"
    conn = duckdb.connect(str(path))
    migrate(conn, path, MIGRATIONS[:1])
    conn.close()
    if SCHEMA_VERSION > 1:
        with pytest.raises(LedgerError, match="open it once for writing"):
            connect_read_only(path)
    Ledger.open(path).close()
    connect_read_only(path).close()


def test_a_duckdb_file_of_something_else_is_refused(tmp_path):
    path = tmp_path / "other.duckdb"
    conn = duckdb.connect(str(path))
    conn.execute("CREATE TABLE sales (x INT)")
    conn.close()
    with pytest.raises(LedgerError, match="not a leafcost ledger"):
        Ledger.open(path)
    (tmp_path / "garbage.duckdb").write_bytes(b"not a database at all" * 1000)
    with pytest.raises(LedgerError, match=r"not a leafcost ledger \(not a DuckDB file\): pass --db"):
        Ledger.open(tmp_path / "garbage.duckdb")
    with pytest.raises(LedgerError, match="no ledger here"):
        connect_read_only(tmp_path / "missing.duckdb")
    assert not (tmp_path / "missing.duckdb").exists()


def test_default_db_path_follows_leafcost_db(monkeypatch, tmp_path):
    monkeypatch.delenv("LEAFCOST_DB", raising=False)
    assert default_db_path() == Path("leafcost.duckdb")
    monkeypatch.setenv("LEAFCOST_DB", str(tmp_path / "x.duckdb"))
    assert default_db_path() == tmp_path / "x.duckdb"


# every write, read back -----------------------------------------------------------------------------------

def test_runs_and_arms_round_trip_with_json_and_time_zones(tmp_path):
    async def scenario():
        async with Ledger.open(tmp_path / "l.duckdb") as ledger:
            paris = datetime(2025, 3, 1, 13, 0, 0, tzinfo=ZoneInfo("Europe/Paris"))
            await ledger.create_run("demo-1", SPEC, task_ids=["t2", "t1"], sandbox_options={"cpus": 1},
                                    leafcost_version="9.9.9", created_at=paris)
            await ledger.record_arm("demo-1", "local", adapter="sglang", model="frognano-4b",
                                    endpoint="http://127.0.0.1:30000/v1", served_model="frognano-4b",
                                    server_info={"tp_size": 1, "api_key": "s3cr3t-value", "nested": {"x": [1, 2]}},
                                    model_info={"max_model_len": 131072}, config={"tool_call_parser": "qwen3_coder"},
                                    warnings=["no reasoning parser"])
            await ledger.record_arm("demo-1", "hosted", adapter="router", model="openai/gpt-x",
                                    endpoint="https://router.example/v1", status="skipped",
                                    status_reason="auth: 401")
            await ledger.update_arm("demo-1", "local", status="finished", ended_at=T0 + timedelta(hours=1))
            await ledger.update_arm("demo-1", "hosted", status="interrupted")
            with pytest.raises(LedgerError, match="CHECK constraint"):
                await ledger.update_arm("demo-1", "hosted", status="exploded")
            await ledger.set_run_status("demo-1", "finished")
            return await ledger.get_run("demo-1"), ledger.query("SELECT * FROM arms ORDER BY arm")

    record, arms = run(scenario())
    assert record.created_at == datetime(2025, 3, 1, 12, 0, tzinfo=timezone.utc)
    assert record.created_at.utcoffset() == timedelta(0) and record.updated_at > record.created_at
    assert record.status == "finished" and record.task_ids == ["t2", "t1"] and record.seeds == 2
    assert record.spec_sha256 == SPEC.digest() and record.spec() == SPEC
    assert record.sandbox_options == {"cpus": 1} and record.leafcost_version == "9.9.9"
    hosted, local = arms
    assert hosted["status"] == "interrupted" and hosted["status_reason"] == "auth: 401"
    assert hosted["endpoint"] == "https://router.example/v1" and hosted["server_info"] is None
    assert local["status"] == "finished" and local["ended_at"] == T0 + timedelta(hours=1)
    assert json.loads(local["config"]) == {"tool_call_parser": "qwen3_coder"}
    assert json.loads(local["server_info"]) == {"tp_size": 1, "api_key": "[redacted]", "nested": {"x": [1, 2]}}
    assert json.loads(local["warnings"]) == ["no reasoning parser"] and local["served_model"] == "frognano-4b"


def test_recording_an_arm_again_on_resume_replaces_it_but_keeps_when_it_started(tmp_path):
    async def scenario():
        async with Ledger.open(tmp_path / "l.duckdb") as ledger:
            await new_run(ledger)
            await ledger.record_arm("demo-1", "local", adapter="local", model="m", endpoint="a", started_at=T0)
            await ledger.record_arm("demo-1", "local", adapter="local", model="m", endpoint="b",
                                    started_at=T0 + timedelta(days=1))
            return ledger.query("SELECT endpoint, started_at FROM arms")

    assert run(scenario()) == [{"endpoint": "b", "started_at": T0}]


def test_an_episode_its_calls_and_tool_calls_round_trip_and_sum_into_the_episode(tmp_path):
    async def scenario():
        async with Ledger.open(tmp_path / "l.duckdb") as ledger:
            await new_run(ledger)
            episode = await ledger.start_episode("demo-1", "hosted", "t1", 0, 1, started_at=T0,
                                                 sandbox_spec_hash="abc123", isolation="bwrap")
            failed = CallAttempt(attempt=1, model="openai/gpt-x", status="http_error", http_status=503,
                                 error="upstream overloaded", started_at=T0, latency_sec=0.2,
                                 usage=Usage(prompt_tokens=5))
            first = await ledger.record_call(episode, 1, failed, cost_usd=None, price_source=None,
                                             price_revision=None)
            detail = {"input": 0.001, "output": 0.002, "margin": {"pct": 5}}
            second = await ledger.record_call(
                episode, 1, call(attempt=2, ttft_sec=0.3, finish_reason="tool_calls", request_id="req-1",
                                 router_cost_usd=0.0031, router_cost_detail=detail, router_retries=1,
                                 router_fallbacks=0),
                cost_usd=0.003, price_source="litellm", price_revision="1.110.2")
            third = await ledger.record_call(episode, 2, call(prompt=200, cached=150), cost_usd=0.004,
                                             price_source="litellm", price_revision="1.110.2")
            await ledger.record_tool_call(episode, 1, 0, ToolCall(id="call_a", name="Bash", arguments='{"c": 1}'),
                                          output_chars=1234, started_at=T0, seconds=0.75)
            await ledger.finish_episode(episode, exit_reason="submitted", resolved=True, reward=1.0, final=True,
                                        n_steps=2, ended_at=T0 + timedelta(seconds=90), sandbox_cpu_seconds=3.5,
                                        sandbox_start_sec=0.4, patch_bytes=512, trajectory_path="traj/a1.json")
            return (episode, [first, second, third], ledger.query("SELECT * FROM episodes"),
                    ledger.query("SELECT * FROM model_calls ORDER BY call_id"),
                    ledger.query("SELECT * FROM tool_calls"))

    episode, ids, [row], calls, [tool] = run(scenario())
    assert episode == "demo-1/hosted/t1/s0/a1" and ids == sorted(ids) and len(set(ids)) == 3
    assert [c["call_id"] for c in calls] == ids
    assert row["status"] == "finished" and row["resolved"] is True and row["reward"] == 1.0 and row["final"]
    assert (row["prompt_tokens"], row["cached_tokens"], row["completion_tokens"], row["reasoning_tokens"],
            row["model_calls"]) == (5 + 100 + 200, 40 + 150, 60, 20, 3)
    assert row["elapsed_sec"] == pytest.approx(90.0) and row["ended_at"] == T0 + timedelta(seconds=90)
    assert row["sandbox_spec_hash"] == "abc123" and row["isolation"] == "bwrap" and row["patch_bytes"] == 512
    assert row["trajectory_path"] == "traj/a1.json" and row["infra_error"] is False and row["n_steps"] == 2
    failed, answered, _ = calls
    assert failed["status"] == "http_error" and failed["http_status"] == 503 and failed["cost_usd"] is None
    assert failed["run_id"] == "demo-1" and failed["arm"] == "hosted" and failed["prompt_tokens"] == 5
    assert answered["started_at"] == T0 and answered["latency_sec"] == 1.5 and answered["ttft_sec"] == 0.3
    assert json.loads(answered["router_cost_detail"]) == {"input": 0.001, "output": 0.002, "margin": {"pct": 5}}
    assert (answered["router_cost_usd"], answered["router_retries"], answered["router_fallbacks"]) == (0.0031, 1, 0)
    assert (answered["cost_usd"], answered["price_source"], answered["price_revision"]) == (0.003, "litellm",
                                                                                           "1.110.2")
    assert answered["request_id"] == "req-1" and answered["finish_reason"] == "tool_calls"
    assert answered["total_tokens"] == 130 and answered["attempt"] == 2 and answered["step"] == 1
    assert tool == {"run_id": "demo-1", "arm": "hosted", "episode_id": episode, "step": 1, "idx": 0,
                    "tool_call_id": "call_a", "tool_name": "Bash", "arguments_chars": 8, "output_chars": 1234,
                    "started_at": T0, "seconds": 0.75}


def test_a_queued_start_gives_its_episode_at_once_and_commits_before_the_rows_queued_after_it(tmp_path):
    async def scenario():
        async with Ledger.open(tmp_path / "l.duckdb") as ledger:
            await new_run(ledger)
            episode, started = ledger.queue_start_episode("demo-1", "local", "t1", 0, 1)
            queued = ledger.queue_call(episode, 1, call(), cost_usd=0.1, price_source="x", price_revision="y")
            await ledger.finish_episode(episode, exit_reason="submitted", resolved=False, reward=0.0, final=True,
                                        n_steps=1)
            assert started.done() and queued.done()  # committed with the finish or before it
            _, again = ledger.queue_start_episode("demo-1", "local", "t1", 0, 1)
            with pytest.raises(LedgerError, match="Duplicate key"):
                await again
            return episode, ledger.query("SELECT status, model_calls FROM episodes")

    episode, rows = run(scenario())
    assert episode == "demo-1/local/t1/s0/a1" and rows == [{"status": "finished", "model_calls": 1}]


def test_finishing_an_episode_twice_or_an_unknown_one_fails_only_that_operation(tmp_path):
    async def scenario():
        async with Ledger.open(tmp_path / "l.duckdb") as ledger:
            await new_run(ledger)
            episode = await ledger.start_episode("demo-1", "local", "t1", 0, 1)
            outcome = dict(exit_reason="submitted", resolved=False, reward=0.0, final=True, n_steps=1)
            results = await asyncio.gather(
                ledger.finish_episode(episode, **outcome), ledger.finish_episode(episode, **outcome),
                ledger.record_call(episode, 1, call(), cost_usd=0.1, price_source="x", price_revision="y"),
                ledger.finish_episode("demo-1/local/nope/s0/a1", **outcome), return_exceptions=True)
            with pytest.raises(LedgerError, match="unknown: start_episode first"):
                await ledger.record_call("demo-1/local/nope/s0/a1", 1, call(), cost_usd=None, price_source=None,
                                         price_revision=None)
            with pytest.raises(LedgerError, match="lease 999 is not open"):
                await ledger.close_lease(999, T0)
            with pytest.raises(LedgerError, match="not in the ledger"):
                await ledger.set_run_status("no-such-run", "finished")
            with pytest.raises(LedgerError, match="Duplicate key"):
                await ledger.start_episode("demo-1", "local", "t1", 0, 1)
            return results, ledger.query("SELECT count(*) AS n FROM model_calls")[0]["n"]

    (first, second, call_id, unknown), calls = run(scenario())
    assert first is None and isinstance(call_id, int) and calls == 1
    assert isinstance(second, LedgerError) and "not running" in str(second)
    assert isinstance(unknown, LedgerError) and "nope" in str(unknown)


def test_leases_and_server_samples_round_trip(tmp_path):
    async def scenario():
        async with Ledger.open(tmp_path / "l.duckdb") as ledger:
            await new_run(ledger)
            gpu = await ledger.open_lease("demo-1", "local", Lease(kind="gpu", hardware="H100-80GB", count=2,
                                                                  usd_per_hour=2.49, started_at=T0))
            cpu = await ledger.open_lease("demo-1", "cpu-arm", Lease(kind="cpu", hardware="2 vCPU",
                                                                    usd_per_hour=0.1, started_at=T0,
                                                                    ended_at=T0 + timedelta(minutes=5)))
            await ledger.close_lease(gpu, T0 + timedelta(hours=2))
            with pytest.raises(LedgerError, match="already closed"):
                await ledger.close_lease(gpu, T0 + timedelta(hours=3))
            sample = ServerSample(taken_at=T0 + timedelta(seconds=15), values={
                'sglang:realtime_tokens_total{mode="decode"}': 1234.0, "sglang:num_running_reqs": 7})
            n = await ledger.record_sample("demo-1", "local", sample)
            return (gpu, cpu, n, ledger.query("SELECT * FROM gpu_leases ORDER BY lease_id"),
                    ledger.query("SELECT * FROM server_samples ORDER BY metric"))

    gpu, cpu, n, leases, samples = run(scenario())
    assert cpu == gpu + 1 and n == 2
    assert leases[0] == {"lease_id": gpu, "run_id": "demo-1", "arm": "local", "kind": "gpu",
                         "hardware": "H100-80GB", "count": 2, "usd_per_hour": 2.49, "started_at": T0,
                         "ended_at": T0 + timedelta(hours=2), "heartbeat_at": T0, "owner_pid": os.getpid(),
                         "owner_host": socket.gethostname()}
    assert leases[1]["ended_at"] == T0 + timedelta(minutes=5) and leases[1]["kind"] == "cpu"
    assert samples == [
        {"run_id": "demo-1", "arm": "local", "taken_at": T0 + timedelta(seconds=15),
         "metric": "sglang:num_running_reqs", "value": 7.0},
        {"run_id": "demo-1", "arm": "local", "taken_at": T0 + timedelta(seconds=15),
         "metric": 'sglang:realtime_tokens_total{mode="decode"}', "value": 1234.0}]


# resume ---------------------------------------------------------------------------------------------------

def test_resume_helpers_skip_final_keys_number_attempts_and_interrupt_what_a_crash_left_running(tmp_path):
    path = tmp_path / "l.duckdb"

    async def before_crash():
        ledger = Ledger.open(path)
        await new_run(ledger)
        done = await ledger.start_episode("demo-1", "local", "t1", 0, 1, started_at=T0)
        await ledger.finish_episode(done, exit_reason="submitted", resolved=True, reward=1.0, final=True, n_steps=3)
        flaky = await ledger.start_episode("demo-1", "local", "t2", 0, 1, started_at=T0)
        await ledger.finish_episode(flaky, exit_reason="error", resolved=False, reward=None, final=False,
                                    infra_error=True, error_detail="endpoint unreachable", n_steps=1)
        last_try = await ledger.start_episode("demo-1", "local", "t2", 1, 1, started_at=T0)
        await ledger.finish_episode(last_try, exit_reason="error", resolved=False, reward=None, final=True,
                                    infra_error=True, n_steps=1)
        cut = await ledger.start_episode("demo-1", "hosted", "t1", 0, 1, started_at=T0)
        await ledger.record_call(cut, 1, call(prompt=1000, cached=0, completion=50, reasoning=0), cost_usd=0.01,
                                 price_source="litellm", price_revision="r")
        await ledger.record_tool_call(cut, 1, 0, ToolCall(id="c", name="Read", arguments="{}"), output_chars=10,
                                      started_at=T0 + timedelta(seconds=30), seconds=2.0)
        await ledger.start_episode("demo-1", "hosted", "t2", 0, 1, started_at=T0)
        ledger.close()  # as a crash would leave them: two attempts still 'running'

    async def resume():
        async with Ledger.open(path) as ledger:
            keys_before = await ledger.finished_keys("demo-1")
            interrupted = await ledger.interrupt_running("demo-1")
            again = await ledger.interrupt_running("demo-1")
            attempts = {key: await ledger.next_attempt("demo-1", *key) for key in
                        [("local", "t1", 0), ("local", "t2", 0), ("hosted", "t1", 0), ("hosted", "t2", 1)]}
            rows = ledger.query("SELECT * FROM episodes WHERE arm = 'hosted' ORDER BY task_id")
            return keys_before, await ledger.finished_keys("demo-1"), interrupted, again, attempts, rows

    run(before_crash())
    keys_before, keys_after, interrupted, again, attempts, (cut, idle) = run(resume())
    assert keys_before == keys_after == {("local", "t1", 0), ("local", "t2", 1)}
    assert interrupted == 2 and again == 0
    assert attempts == {("local", "t1", 0): 2, ("local", "t2", 0): 2, ("hosted", "t1", 0): 2, ("hosted", "t2", 1): 1}
    assert cut["status"] == "finished" and cut["exit_reason"] == "interrupted" and cut["infra_error"] is True
    assert cut["final"] is False and cut["resolved"] is False
    assert (cut["prompt_tokens"], cut["completion_tokens"], cut["model_calls"]) == (1000, 50, 1)
    assert cut["ended_at"] == T0 + timedelta(seconds=32) and cut["elapsed_sec"] == pytest.approx(32.0)
    assert idle["ended_at"] == T0 and idle["model_calls"] == 0 and idle["prompt_tokens"] == 0


# secrets --------------------------------------------------------------------------------------------------

@pytest.mark.parametrize("config", [
    {"api_key": "x"},
    {"extra_headers": {"Authorization": "Bearer abcdefghijkl"}},
    {"clients": [{"name": "a", "auth": {"password": "hunter2"}}]},
    {"hf_token": "hf_aaaaaaaaaaaaaaaaaaaaaaaaaaaa"},
    {"x-api-key": None},
    {"litellm_params": {"apiKey": "k"}},
    {"header": "Bearer abcdefghijklmnop"},
    {"fallback": ["sk-or-v1-0123456789abcdef0123"]},
    {"client_secret": "z"},
])
def test_an_arm_config_holding_a_secret_is_refused_and_nothing_is_written(tmp_path, config):
    async def scenario():
        async with Ledger.open(tmp_path / "l.duckdb") as ledger:
            await new_run(ledger)
            with pytest.raises(SecretInLedger, match="never stores secrets"):
                await ledger.record_arm("demo-1", "hosted", adapter="router", model="m", endpoint="https://r/v1",
                                        config=config)
            return ledger.query("SELECT count(*) AS n FROM arms")[0]["n"]

    assert run(scenario()) == 0


def test_ordinary_config_keys_and_variable_names_are_not_mistaken_for_secrets():
    check_no_secrets({"max_tokens": 8192, "eos_token": "</s>", "token_budget": 5, "tool_call_parser": "qwen3",
                      "api_key_env": "ROUTER_API_KEY", "extra_body": {"top_k": 20, "cache_key": "abc"},
                      "tokenizer": "x"}, "config")
    with pytest.raises(SecretInLedger, match=r"config\.api_key_env"):
        check_no_secrets({"api_key_env": "sk-live-abcdefghijklmnopqrstuv"}, "config")
    assert redact_secrets({"api_key": None, "admin": {"password": "p"}, "n": [{"token": "t"}], "eos_token": "x"}) \
        == {"api_key": None, "admin": {"password": "[redacted]"}, "n": [{"token": "[redacted]"}], "eos_token": "x"}


def test_a_spec_or_sandbox_options_holding_a_secret_is_refused(tmp_path):
    async def scenario():
        async with Ledger.open(tmp_path / "l.duckdb") as ledger:
            with pytest.raises(SecretInLedger, match=r"sandbox_options\.env\.GITHUB_TOKEN"):
                await ledger.create_run("r1", SPEC, task_ids=[], sandbox_options={"env": {"GITHUB_TOKEN": "x"}})
            return ledger.query("SELECT count(*) AS n FROM runs")[0]["n"]

    assert run(scenario()) == 0


# readers, concurrency and durability ----------------------------------------------------------------------

def test_other_processes_cannot_open_the_file_while_the_writer_holds_it_and_can_after(tmp_path):
    path = tmp_path / "l.duckdb"
    reader = """
        import sys
        from compare.ledger import LedgerBusy, connect_read_only
        try:
            conn = connect_read_only(sys.argv[1])
        except LedgerBusy as exc:
            print("busy", exc.pid)
        else:
            print("read", conn.execute("SELECT count(*) FROM episodes WHERE status = 'finished'").fetchone()[0])
    """

    async def write():
        ledger = Ledger.open(path)
        await new_run(ledger)
        episode = await ledger.start_episode("demo-1", "local", "t1", 0, 1)
        await ledger.finish_episode(episode, exit_reason="submitted", resolved=True, reward=1.0, final=True,
                                    n_steps=1)
        return ledger

    ledger = run(write())
    try:
        while_open = python(reader, str(path))
        with pytest.raises(LedgerBusy, match="this process already has the ledger open"):
            connect_read_only(path)
        with pytest.raises(LedgerBusy, match="one writer per file"):
            Ledger.open(path)
        cursor = ledger.reader()
        assert cursor.execute("SELECT count(*) FROM episodes").fetchone() == (1,)
    finally:
        ledger.close()
    assert while_open.stdout.split() == ["busy", str(os.getpid())], while_open.stderr
    after = python(reader, str(path))
    assert after.stdout.split() == ["read", "1"], after.stderr
    with pytest.raises(LedgerError, match="closed"):
        ledger.query("SELECT 1")
    with pytest.raises(LedgerError, match="closed"):
        run(ledger.set_run_status("demo-1", "finished"))


def test_a_reader_thread_in_the_writing_process_sees_each_commit_as_it_lands(tmp_path):
    async def scenario():
        async with Ledger.open(tmp_path / "l.duckdb") as ledger:
            await new_run(ledger)
            episode = await ledger.start_episode("demo-1", "local", "t1", 0, 1)
            cursor = ledger.reader()
            seen = []
            for step in range(5):
                await ledger.record_call(episode, step, call(), cost_usd=None, price_source="lease",
                                         price_revision=None)
                count = await asyncio.to_thread(
                    lambda: cursor.execute("SELECT count(*) FROM model_calls").fetchone()[0])
                seen.append(count)
            return seen

    assert run(scenario()) == [1, 2, 3, 4, 5]


def test_many_tasks_awaiting_writes_at_once_all_commit_with_distinct_ids(tmp_path):
    async def episode(ledger: Ledger, task: int) -> list[int]:
        episode_id = await ledger.start_episode("demo-1", "local", f"t{task}", 0, 1)
        ids = []
        for step in range(20):
            ids.append(await ledger.record_call(episode_id, step, call(prompt=step), cost_usd=None,
                                                price_source=None, price_revision=None))
            await ledger.record_tool_call(episode_id, step, 0, ToolCall(id="", name="Bash", arguments="x"),
                                          output_chars=2, started_at=T0, seconds=0.1)
        await ledger.finish_episode(episode_id, exit_reason="max_steps", resolved=False, reward=0.0, final=True,
                                    n_steps=20)
        return ids

    async def scenario():
        async with Ledger.open(tmp_path / "l.duckdb") as ledger:
            await new_run(ledger)
            ids = await asyncio.gather(*(episode(ledger, task) for task in range(100)))
            return ids, ledger.query("SELECT count(*) AS calls, (SELECT count(*) FROM tool_calls) AS tools, "
                                     "(SELECT count(*) FROM episodes WHERE prompt_tokens = 190 "
                                     "AND model_calls = 20) AS summed FROM model_calls")[0]

    ids, counts = run(scenario())
    flat = [i for episode_ids in ids for i in episode_ids]
    assert len(set(flat)) == 2000 and all(episode_ids == sorted(episode_ids) for episode_ids in ids)
    assert counts == {"calls": 2000, "tools": 2000, "summed": 100}


def test_a_cancelled_await_is_still_recorded(tmp_path):
    async def scenario():
        async with Ledger.open(tmp_path / "l.duckdb") as ledger:
            await new_run(ledger)
            episode = await ledger.start_episode("demo-1", "local", "t1", 0, 1)
            task = asyncio.create_task(ledger.record_call(episode, 1, call(), cost_usd=None, price_source=None,
                                                          price_revision=None))
            await asyncio.sleep(0)
            task.cancel()
            with pytest.raises(asyncio.CancelledError):
                await task
            await ledger.flush()
            return ledger.query("SELECT count(*) AS n FROM model_calls")[0]["n"]

    assert run(scenario()) == 1


CHILD = """
    import asyncio, sys
    from datetime import datetime, timezone
    from adapters.base import CallAttempt, ToolCall, Usage
    from compare.ledger import Ledger
    from compare.spec import parse_run_spec

    async def worker(ledger, w):
        attempt = 1
        while True:
            episode = await ledger.start_episode("r", "a", f"t{w}", 0, attempt)
            print("episode", episode, flush=True)
            for step in range(4):
                usage = Usage(prompt_tokens=100, completion_tokens=10, total_tokens=110)
                call_id = await ledger.record_call(episode, step, CallAttempt(attempt=1, model="m", status="ok",
                                                   usage=usage), cost_usd=0.01, price_source="x", price_revision="y")
                print("call", call_id, flush=True)
                await ledger.record_tool_call(episode, step, 0, ToolCall(id="c", name="Bash", arguments="{}"),
                                              output_chars=1, started_at=datetime.now(timezone.utc), seconds=0.0)
            await ledger.finish_episode(episode, exit_reason="submitted", resolved=True, reward=1.0, final=True,
                                        n_steps=4)
            print("finished", episode, flush=True)
            attempt += 1

    async def main():
        ledger = Ledger.open(sys.argv[1])
        spec = parse_run_spec({"name": "k", "suite": "builtin", "arms": [{"name": "a", "adapter": "oracle"}]})
        await ledger.create_run("r", spec, task_ids=[f"t{w}" for w in range(30)])
        print("ready", flush=True)
        await asyncio.gather(*(worker(ledger, w) for w in range(30)))

    asyncio.run(main())
"""


@pytest.mark.parametrize("kill_after_calls", [1, 400, 2500])
def test_kill_9_loses_nothing_whose_await_returned(tmp_path, kill_after_calls):
    path = tmp_path / "crash.duckdb"
    lines = _killed_when(CHILD, path, lambda lines: _count("call ", lines) >= kill_after_calls)
    acked = [line.split() for line in lines if line.endswith("\n")]
    call_ids = {int(fields[1]) for fields in acked if fields[0] == "call"}
    started = {fields[1] for fields in acked if fields[0] == "episode"}
    finished = {fields[1] for fields in acked if fields[0] == "finished"}
    assert len(call_ids) >= kill_after_calls

    async def reopen():
        async with Ledger.open(path) as ledger:
            rows = ledger.query("SELECT call_id FROM model_calls")
            episodes = {r["episode_id"]: r for r in ledger.query("SELECT * FROM episodes")}
            running = sum(r["status"] == "running" for r in episodes.values())
            interrupted = await ledger.interrupt_running("r")
            for table in ("runs", "episodes", "model_calls", "tool_calls"):
                ledger.query(f"SELECT * FROM {table}")  # every page of every table reads back
            after = await ledger.start_episode("r", "a", "t0", 1, 1)
            new_id = await ledger.record_call(after, 1, call(), cost_usd=None, price_source=None,
                                              price_revision=None)
            return {r["call_id"] for r in rows}, episodes, running, interrupted, new_id

    stored_calls, episodes, running, interrupted, new_id = run(reopen())
    assert new_id > max(stored_calls)  # the sequence survived the crash: no id is handed out twice
    assert call_ids <= stored_calls
    assert started <= set(episodes)
    assert all(episodes[e]["status"] == "finished" and episodes[e]["model_calls"] == 4 for e in finished)
    assert interrupted == running


QUEUED_CHILD = CHILD.replace("""                call_id = await ledger.record_call(episode, step, CallAttempt(attempt=1, model="m", status="ok",
                                                   usage=usage), cost_usd=0.01, price_source="x", price_revision="y")
                print("call", call_id, flush=True)
                await ledger.record_tool_call(episode, step, 0, ToolCall(id="c", name="Bash", arguments="{}"),
                                              output_chars=1, started_at=datetime.now(timezone.utc), seconds=0.0)""",
                            """                ledger.queue_call(episode, step, CallAttempt(attempt=1, model="m", status="ok", usage=usage),
                                  cost_usd=0.01, price_source="x", price_revision="y")
                print("call", 0, flush=True)
                ledger.queue_tool_call(episode, step, 0, ToolCall(id="c", name="Bash", arguments="{}"),
                                       output_chars=1, started_at=datetime.now(timezone.utc), seconds=0.0)
                await asyncio.sleep(0.001)""")


@pytest.mark.parametrize("kill_after_calls", [1, 400])
def test_kill_9_never_leaves_a_finished_episode_without_its_queued_rows(tmp_path, kill_after_calls):
    """Queued call rows are not awaited, so a kill may lose a running episode's last ones (it is re-run on
    resume), but never those of an episode whose finish returned: the finish commits after them."""
    assert "queue_call" in QUEUED_CHILD
    path = tmp_path / "crash.duckdb"
    lines = _killed_when(QUEUED_CHILD, path,
                         lambda lines: _count("call ", lines) >= kill_after_calls and _count("finished", lines))
    finished = {line.split()[1] for line in lines if line.endswith("\n") and line.startswith("finished")}
    assert finished

    async def reopen():
        async with Ledger.open(path) as ledger:
            calls = ledger.query("SELECT episode_id, count(*) AS n FROM model_calls GROUP BY ALL")
            tools = ledger.query("SELECT episode_id, count(*) AS n FROM tool_calls GROUP BY ALL")
            episodes = {r["episode_id"]: r for r in ledger.query("SELECT * FROM episodes")}
            return {r["episode_id"]: r["n"] for r in calls}, {r["episode_id"]: r["n"] for r in tools}, episodes

    calls_of, tools_of, episodes = run(reopen())
    for episode in finished:
        assert episodes[episode]["status"] == "finished" and episodes[episode]["model_calls"] == 4
        assert calls_of[episode] == 4 and tools_of[episode] == 4


def test_queued_rows_commit_before_a_later_awaited_write_and_a_bad_one_fails_alone(tmp_path):
    async def scenario():
        async with Ledger.open(tmp_path / "l.duckdb") as ledger:
            await new_run(ledger)
            episode = await ledger.start_episode("demo-1", "local", "t1", 0, 1)
            good = [ledger.queue_call(episode, step, call(), cost_usd=None, price_source="lease",
                                      price_revision=None) for step in range(3)]
            bad = ledger.queue_call(episode, 2**70, call(), cost_usd=None, price_source="lease", price_revision=None)
            tool = ledger.queue_tool_call(episode, 0, 0, ToolCall(id="c", name="Bash", arguments="{}"),
                                          output_chars=3, started_at=T0, seconds=0.1)
            pending = [f.done() for f in (*good, bad, tool)]
            await ledger.finish_episode(episode, exit_reason="agent", resolved=False, reward=0.0, final=True,
                                        n_steps=3)
            settled = [f.done() for f in (*good, bad, tool)]
            row = ledger.query("SELECT * FROM episodes")[0]
            return pending, settled, [f.result() for f in good], bad.exception(), tool.result(), row

    pending, settled, ids, error, tool, row = run(scenario())
    assert not any(pending) and all(settled)  # queued: nothing waited; the awaited finish came after them
    assert len(set(ids)) == 3 and tool is None
    assert isinstance(error, LedgerError)
    assert row["model_calls"] == 3 and row["status"] == "finished"  # the finish counted the rows queued before it


def _killed_when(script: str, path: Path, enough) -> list[str]:
    """Runs `script` on the ledger at `path`, SIGKILLs it once `enough(lines printed so far)`; every line."""
    child = subprocess.Popen([sys.executable, "-c", textwrap.dedent(script), str(path)], stdout=subprocess.PIPE,
                             stderr=subprocess.PIPE, text=True, cwd=REPO, env={**os.environ, "PYTHONPATH": str(REPO)})
    lines: list[str] = []
    try:
        for line in child.stdout:
            lines.append(line)
            if enough(lines):
                break
        assert enough(lines), child.stderr.read()
    finally:
        child.kill()
    # The rest through the same buffered reader (communicate() would read the pipe beneath it and lose the part of
    # a line the reader already holds, leaving its tail as a line of its own).
    rest = child.stdout.read()
    child.wait(timeout=30)
    child.stdout.close()
    child.stderr.close()
    assert child.returncode == -signal.SIGKILL
    return lines + rest.splitlines(keepends=True)


def _count(prefix: str, lines: list[str]) -> int:
    return sum(line.startswith(prefix) for line in lines)


# leases of a dead process, resume totals, failed runs -------------------------------------------------------

LEASE_CHILD = """
    import asyncio, os, signal, sys
    from datetime import datetime, timedelta, timezone
    from adapters.base import Lease
    from compare.ledger import Ledger
    from compare.spec import parse_run_spec

    T0 = datetime(2025, 3, 1, 12, 0, 0, tzinfo=timezone.utc)

    async def main():
        ledger = Ledger.open(sys.argv[1])
        spec = parse_run_spec({"name": "k", "suite": "builtin", "arms": [{"name": "a", "adapter": "local"}]})
        await ledger.create_run("r", spec, task_ids=["t0"])
        lease = await ledger.open_lease("r", "a", Lease(kind="gpu", hardware="H200", count=8, usd_per_hour=3.5,
                                                        started_at=T0))
        await ledger.heartbeat_leases([lease], T0 + timedelta(minutes=30))
        await ledger.heartbeat_leases([lease], T0 + timedelta(minutes=10))  # late and out of order: ignored
        print("beating", lease, flush=True)
        os.kill(os.getpid(), signal.SIGKILL)  # as `kill -9` of `leafcost run` mid-way

    asyncio.run(main())
"""


def _lease(row) -> Lease:
    return Lease(**{k: row[k] for k in ("kind", "hardware", "count", "usd_per_hour", "started_at", "ended_at")})


def test_a_killed_process_lease_is_closed_at_its_last_heartbeat_and_its_cost_stops_growing(tmp_path):
    from compare.costs import lease_cost_usd

    path = tmp_path / "killed.duckdb"
    child = python(LEASE_CHILD, str(path))
    assert child.returncode == -signal.SIGKILL, child.stderr
    orphan = int(child.stdout.split()[-1])

    async def resume():
        async with Ledger.open(path) as ledger:
            left_open = ledger.query("SELECT * FROM gpu_leases")
            mine = await ledger.open_lease("r", "a", Lease(kind="gpu", hardware="H200", count=8, usd_per_hour=3.5,
                                                          started_at=T0 + timedelta(hours=1)))
            closed = await ledger.close_orphan_leases("r")
            again = await ledger.close_orphan_leases("r")
            beats = await ledger.heartbeat_leases([orphan, mine, 999], T0 + timedelta(hours=2))
            await ledger.close_lease(mine, T0 + timedelta(hours=3))
            return left_open, closed, again, beats, ledger.query("SELECT * FROM gpu_leases ORDER BY lease_id")

    left_open, closed, again, beats, (dead, live) = run(resume())
    assert left_open[0]["ended_at"] is None and left_open[0]["owner_pid"] not in (None, os.getpid())
    assert left_open[0]["heartbeat_at"] == T0 + timedelta(minutes=30)
    assert (closed, again, beats) == (1, 0, 1)  # this process's own open lease is never taken for an orphan
    assert dead["lease_id"] == orphan and dead["ended_at"] == T0 + timedelta(minutes=30)
    assert live["ended_at"] == T0 + timedelta(hours=3) and live["heartbeat_at"] == T0 + timedelta(hours=2)
    today, tomorrow = datetime.now(timezone.utc), datetime.now(timezone.utc) + timedelta(days=1)
    assert lease_cost_usd(_lease(dead), today) == lease_cost_usd(_lease(dead), tomorrow) == pytest.approx(14.0)


def test_an_orphan_without_heartbeat_closes_at_its_start_and_other_runs_are_left_alone(tmp_path):
    path = tmp_path / "l.duckdb"

    async def dead_writer():
        async with Ledger.open(path) as ledger:  # closed without closing its leases, as a crash leaves them
            for run_id in ("r1", "r2"):
                await new_run(ledger, run_id)
                await ledger.open_lease(run_id, "local", Lease(kind="cpu", hardware="2 vCPU", usd_per_hour=0.1,
                                                              started_at=T0))

    async def next_writer():
        async with Ledger.open(path) as ledger:
            closed = await ledger.close_orphan_leases("r1")
            return closed, ledger.query("SELECT run_id, ended_at FROM gpu_leases ORDER BY run_id")

    run(dead_writer())
    conn = duckdb.connect(str(path))
    conn.execute("UPDATE gpu_leases SET heartbeat_at = NULL")  # a row written by hand, without a heartbeat
    conn.close()
    closed, rows = run(next_writer())
    assert closed == 1 and rows == [{"run_id": "r1", "ended_at": T0}, {"run_id": "r2", "ended_at": None}]

    async def any_run_start():  # a start of any run closes every orphan, whatever run it belongs to
        async with Ledger.open(path) as ledger:
            return await ledger.close_orphan_leases(), ledger.query("SELECT ended_at FROM gpu_leases")

    closed, rows = run(any_run_start())
    assert closed == 1 and rows == [{"ended_at": T0}, {"ended_at": T0}]


def test_leases_left_open_before_heartbeats_existed_get_their_arms_last_activity_on_upgrade(tmp_path):
    path = tmp_path / "v5.duckdb"
    conn = duckdb.connect(str(path))
    migrate(conn, path, MIGRATIONS[:5])  # the schema before heartbeats, as a killed run left it
    at = lambda minutes: T0 + timedelta(minutes=minutes)  # noqa: E731
    conn.execute("INSERT INTO runs VALUES ('r', 'r', ?, ?, 'running', '{}', 'x', 'builtin', '[]', 1, '0', NULL)",
                 [T0, T0])
    conn.executemany("INSERT INTO gpu_leases (lease_id, run_id, arm, kind, hardware, count, usd_per_hour, "
                     "started_at, ended_at) VALUES (?, 'r', ?, 'gpu', 'H200', 1, 3.5, ?, ?)",
                     [[1, "sg", at(0), None], [2, "sg", at(60), at(120)], [3, "other", at(0), None]])
    conn.executemany("INSERT INTO model_calls (call_id, run_id, arm, episode_id, step, attempt, model, status, "
                     "prompt_tokens, cached_tokens, completion_tokens, reasoning_tokens, total_tokens, started_at, "
                     "latency_sec) VALUES (?, 'r', 'sg', 'e', 1, 1, 'm', 'ok', 1, 0, 1, 0, 2, ?, 30.0)",
                     [[1, at(20)], [2, at(90)]])  # the second belongs to the next process's lease
    conn.execute("INSERT INTO server_samples VALUES ('r', 'sg', ?, 'm', 1.0)", [at(25)])
    conn.close()

    async def upgrade():
        async with Ledger.open(path) as ledger:
            before = ledger.query("SELECT lease_id, heartbeat_at, ended_at FROM gpu_leases ORDER BY lease_id")
            closed = await ledger.close_orphan_leases("r")
            return before, closed, ledger.query("SELECT lease_id, ended_at FROM gpu_leases ORDER BY lease_id")

    before, closed, after = run(upgrade())
    assert [r["heartbeat_at"] for r in before] == [at(25), None, at(0)]
    assert closed == 2
    assert [r["ended_at"] for r in after] == [at(25), at(120), at(0)]


def test_arm_totals_count_the_final_attempt_of_every_key_whichever_process_recorded_it(tmp_path):
    path = tmp_path / "l.duckdb"

    async def first_process():
        async with Ledger.open(path) as ledger:
            await new_run(ledger, tasks=("t1", "t2", "t3"))
            solved = await ledger.start_episode("demo-1", "local", "t1", 0, 1)
            await ledger.finish_episode(solved, exit_reason="submitted", resolved=True, reward=1.0, final=True,
                                        n_steps=3)
            flaky = await ledger.start_episode("demo-1", "local", "t2", 0, 1)
            await ledger.finish_episode(flaky, exit_reason="error", resolved=False, reward=None, final=False,
                                        infra_error=True, n_steps=1)
            hosted = await ledger.start_episode("demo-1", "hosted", "t1", 0, 1)
            await ledger.record_call(hosted, 1, call(), cost_usd=0.25, price_source="explicit", price_revision=None)
            await ledger.finish_episode(hosted, exit_reason="submitted", resolved=True, reward=1.0, final=True,
                                        n_steps=1)
            await ledger.start_episode("demo-1", "local", "t3", 0, 1)  # killed while running

    async def resumed_process():
        async with Ledger.open(path) as ledger:
            await ledger.interrupt_running("demo-1")
            retried = await ledger.start_episode("demo-1", "local", "t2", 0, 2)
            await ledger.finish_episode(retried, exit_reason="submitted", resolved=True, reward=1.0, final=True,
                                        n_steps=2)
            broken = await ledger.start_episode("demo-1", "local", "t3", 0, 2)
            await ledger.finish_episode(broken, exit_reason="harness_error", resolved=False, reward=None,
                                        final=True, harness_error=True, n_steps=0)
            lost = await ledger.start_episode("demo-1", "hosted", "t2", 0, 1)
            await ledger.record_call(lost, 1, call(), cost_usd=0.5, price_source="explicit", price_revision=None)
            await ledger.finish_episode(lost, exit_reason="error", resolved=False, reward=None, final=True,
                                        infra_error=True, n_steps=1)
            return await ledger.arm_totals("demo-1"), await ledger.arm_totals("no-such-run")

    run(first_process())
    totals, none = run(resumed_process())
    assert none == {}
    assert totals["local"].model_dump() == {"done": 3, "resolved": 2, "errors": 1, "calls_cost_usd": 0.0}
    assert totals["hosted"].model_dump() == {"done": 2, "resolved": 1, "errors": 1, "calls_cost_usd": 0.75}


def test_a_run_refused_at_start_is_recorded_failed_with_its_reason_and_can_run_again(tmp_path):
    async def scenario():
        async with Ledger.open(tmp_path / "l.duckdb") as ledger:
            await new_run(ledger)
            await ledger.set_run_status("demo-1", "failed", "arm hosted: model 'x' has no price; give prices")
            failed = await ledger.get_run("demo-1")
            await ledger.set_run_status("demo-1", "running")
            resumed = await ledger.get_run("demo-1")
            with pytest.raises(LedgerError, match="CHECK constraint"):
                await ledger.set_run_status("demo-1", "bogus")  # type: ignore[arg-type]
            await ledger.set_run_status("demo-1", "interrupted", "Bearer abcdefghijklmnop")
            return failed, resumed, await ledger.get_run("demo-1")

    failed, resumed, interrupted = run(scenario())
    assert (failed.status, failed.status_reason) == ("failed", "arm hosted: model 'x' has no price; give prices")
    assert (resumed.status, resumed.status_reason) == ("running", None)
    assert (interrupted.status, interrupted.status_reason) == ("interrupted", "[redacted]")


def test_an_upgraded_file_keeps_its_runs_their_comments_and_accepts_failed(tmp_path):
    path = tmp_path / "v5.duckdb"
    conn = duckdb.connect(str(path))
    migrate(conn, path, MIGRATIONS[:5])
    conn.execute("INSERT INTO runs VALUES ('old', 'old', ?, ?, 'interrupted', '{}', 'abc', 'builtin', '[\"t1\"]', 2, "
                 "'0.0.1', NULL)", [T0, T0])
    with pytest.raises(duckdb.ConstraintException):
        conn.execute("UPDATE runs SET status = 'failed'")
    conn.close()

    async def upgrade():
        async with Ledger.open(path) as ledger:
            await ledger.set_run_status("old", "failed", "refused")
            comments = {r["column_name"]: r["comment"] for r in ledger.query(
                "SELECT column_name, comment FROM duckdb_columns() WHERE table_name = 'runs'")}
            table = ledger.query("SELECT comment FROM duckdb_tables() WHERE table_name = 'runs'")[0]["comment"]
            return await ledger.get_run("old"), comments, table

    old, comments, table = run(upgrade())
    assert (old.status, old.status_reason, old.seeds, old.task_ids, old.created_at) == (
        "failed", "refused", 2, ["t1"], T0)
    assert "resume must match" in comments["spec_sha256"] and "failed" in comments["status"]
    assert table.startswith("One row per run")
