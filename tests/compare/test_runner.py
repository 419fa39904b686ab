"""The runner end to end: scripted SGLang stand-in and oracle arms on real tasks in real sandboxes, a real DuckDB
ledger; token counts equal the server's, infrastructure failures retried and kept, kill -9 / Ctrl-C then resume."""

from __future__ import annotations

import asyncio
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import yaml
from support.sglang_fake import ScriptedServer

from compare.ledger import Ledger
from compare.runner import Runner, RunError
from compare.spec import parse_run_spec
from conftest import SOLVE_SCRIPT as SOLVE

LEAFCOST = Path(sys.executable).with_name("leafcost")


def spec_for(suite: Path, base_url: str, **changes):
    raw = {"name": "t", "suite": str(suite), "seeds": 2, "workers": 3, "max_attempts": 2,
           "budgets": {"max_steps": 5, "time_budget_sec": 120},
           "arms": [{"name": "frognano", "adapter": "sglang", "model": "frognano-4b", "base_url": base_url,
                     "max_retries": 0, "gpu": {"type": "H200", "usd_per_hour": 3.5}, "metrics_interval_sec": 0.5},
                    {"name": "oracle", "adapter": "oracle"}]}
    raw.update(changes)
    return parse_run_spec(raw)


@pytest.fixture
def suite(make_task):
    make_task("calc-a")
    make_task("calc-b")
    return Path(make_task("calc-c").path).parent


def run(spec, db: Path, **kwargs):
    ledger = Ledger.open(db)
    try:
        return asyncio.run(Runner(spec, ledger, db_path=db, **kwargs).run())
    finally:
        ledger.close()


def rows(db: Path, sql: str):
    ledger = Ledger.open(db)
    try:
        return ledger.query(sql)
    finally:
        ledger.close()


def test_two_arms_same_episodes_with_tokens_as_reported(suite, tmp_path):
    db = tmp_path / "ledger.duckdb"
    with ScriptedServer(SOLVE) as server:
        summary = run(spec_for(suite, server.base_url), db)
    assert summary.status == "finished"
    assert {a.arm: (a.done, a.resolved, a.errors) for a in summary.arms} == {"frognano": (6, 6, 0),
                                                                             "oracle": (6, 6, 0)}
    episodes = rows(db, "select arm, task_id, seed, attempt, exit_reason, resolved, final, sandbox_spec_hash, "
                        "prompt_tokens, cached_tokens, completion_tokens, reasoning_tokens, trajectory_path "
                        "from episodes order by arm, task_id, seed")
    assert len(episodes) == 12 and all(e["final"] and e["resolved"] and e["attempt"] == 1 for e in episodes)
    model = [e for e in episodes if e["arm"] == "frognano"]
    assert {e["exit_reason"] for e in model} == {"agent"}
    assert {(e["prompt_tokens"], e["cached_tokens"], e["completion_tokens"], e["reasoning_tokens"]) for e in model} \
        == {(680, 300, 46, 12)}
    calls = rows(db, "select step, prompt_tokens, cached_tokens, completion_tokens, reasoning_tokens, arm "
                     "from model_calls order by call_id")
    assert {(c["step"], c["prompt_tokens"], c["cached_tokens"], c["completion_tokens"], c["reasoning_tokens"])
            for c in calls} == {(0, 300, 0, 40, 12), (1, 380, 300, 6, 0)}
    assert {c["arm"] for c in calls} == {"frognano"}
    by_key = {}
    for e in episodes:  # identical sandboxes for every arm, task by task
        by_key.setdefault((e["task_id"], e["seed"]), set()).add(e["sandbox_spec_hash"])
    assert all(len(hashes) == 1 for hashes in by_key.values())
    trajectory = json.loads(Path(model[0]["trajectory_path"]).read_text())
    assert trajectory["trajectory_format"] == "leaf-function-calling" and "+    return a + b" in trajectory[
        "output_patch"]
    assert trajectory["steps"][0]["usage"]["reasoning_tokens"] == 12
    lease = rows(db, "select hardware, usd_per_hour, ended_at from gpu_leases")
    assert lease[0]["hardware"] == "H200" and lease[0]["ended_at"] is not None
    assert rows(db, "select count(*) as n from server_samples")[0]["n"] > 0
    assert rows(db, "select status from runs")[0]["status"] == "finished"


def test_infrastructure_failures_are_retried_and_every_attempt_kept(suite, tmp_path):
    db = tmp_path / "ledger.duckdb"
    with ScriptedServer({"turns": [{"status": 503, "usage": {"prompt_tokens": 5}}]}) as server:
        summary = run(spec_for(suite, server.base_url, seeds=1, arms=[
            {"name": "flaky", "adapter": "sglang", "model": "m", "base_url": server.base_url, "max_retries": 1,
             "allow_unlisted_model": True, "gpu": {"type": "H100", "usd_per_hour": 2.0}}]), db)
    assert summary.arms[0].errors == 3
    episodes = rows(db, "select task_id, attempt, exit_reason, infra_error, final from episodes order by all")
    assert [(e["attempt"], e["exit_reason"], e["infra_error"], e["final"]) for e in episodes[:2]] == [
        (1, "infrastructure_error", True, False), (2, "infrastructure_error", True, True)]
    assert rows(db, "select count(*) as n from model_calls")[0]["n"] == 3 * 2 * 2  # 3 keys, 2 attempts, 2 requests


def test_unreachable_endpoint_stops_before_any_episode(suite, tmp_path):
    db = tmp_path / "ledger.duckdb"
    spec = spec_for(suite, "http://127.0.0.1:9/v1")
    with pytest.raises(RunError, match="arm frognano: .*127.0.0.1:9"):
        run(spec, db)
    assert rows(db, "select count(*) as n from episodes")[0]["n"] == 0


def test_unpriced_hosted_model_is_refused(suite, tmp_path):
    arm = {"name": "hosted", "adapter": "router", "model": "openai/no-such-model-anywhere",
           "base_url": "http://127.0.0.1:9/v1"}
    with pytest.raises(RunError, match="no price in litellm"):
        run(spec_for(suite, "x", arms=[arm]), tmp_path / "l.duckdb")


def cli_run(spec_file: Path, db: Path, *extra: str, **popen):
    return subprocess.Popen([str(LEAFCOST), "run", str(spec_file), "--db", str(db), "--json", *extra],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, **popen)


def wait_for_finished(db: Path, count: int, process: subprocess.Popen, timeout: float = 120) -> None:
    """Polls the trajectory files the runner writes (the ledger is locked by the writer)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline and process.poll() is None:
        if len(list((db.parent / "trajectories").rglob("*.json"))) >= count:
            return
        time.sleep(0.2)
    raise AssertionError(f"fewer than {count} episodes finished: {process.poll()} {process.stderr.read()}")


@pytest.mark.slow
@pytest.mark.parametrize("stop", ["kill -9", "ctrl-c", "sigterm"])
def test_resume_after_a_crash_runs_only_what_is_unfinished(suite, tmp_path, stop):
    slow = {"turns": [{**SOLVE["turns"][0], "delay": 0.3}, SOLVE["turns"][1]]}
    db = tmp_path / "ledger.duckdb"
    with ScriptedServer(slow) as server:
        spec_file = tmp_path / "spec.yaml"
        spec_file.write_text(yaml.safe_dump(json.loads(spec_for(suite, server.base_url, workers=2).model_dump_json(
            exclude_defaults=True))))
        process = cli_run(spec_file, db, start_new_session=True)
        wait_for_finished(db, 3, process)
        if stop == "kill -9":
            os.killpg(process.pid, signal.SIGKILL)
        else:
            process.send_signal(signal.SIGINT if stop == "ctrl-c" else signal.SIGTERM)
        _, stderr = process.communicate(timeout=120)
        run_id = rows(db, "select run_id from runs")[0]["run_id"]
        if stop != "kill -9":  # a stop it could see: the run says so, and leaves no attempt running
            assert process.returncode == (130 if stop == "ctrl-c" else 143) and f"--resume {run_id}" in stderr
            assert rows(db, "select status from runs")[0]["status"] == "interrupted"
            assert rows(db, "select count(*) as n from episodes where status = 'running'")[0]["n"] == 0
        before = rows(db, "select episode_id from episodes where status = 'finished' and final")
        resumed = cli_run(spec_file, db, "--resume", run_id)
        out, err = resumed.communicate(timeout=300)
    assert resumed.returncode == 0, err
    summary = json.loads(out)
    # The printed totals are the ledger's, episodes of the killed process included.
    assert {a["arm"]: (a["done"], a["resolved"]) for a in summary["arms"]} == {"frognano": (6, 6),
                                                                               "oracle": (6, 6)}
    # The killed process's lease was closed (at its last heartbeat): a finished run's cost no longer grows.
    assert rows(db, "select count(*) as n from gpu_leases where ended_at is null")[0]["n"] == 0
    finals = rows(db, "select arm, task_id, seed, count(*) as n from episodes where final group by all")
    assert len(finals) == 12 and all(f["n"] == 1 for f in finals)  # never counted twice
    after = {e["episode_id"] for e in rows(db, "select episode_id from episodes where final")}
    assert {e["episode_id"] for e in before} <= after  # finished episodes were not rerun
    leftover = rows(db, "select count(*) as n from episodes where status = 'running'")
    assert leftover[0]["n"] == 0


def test_misconfigured_parser_is_reported_with_the_flag_to_fix(suite, tmp_path):
    raw_call = "<tool_call>\n<function=Edit>\n<parameter=file_path>\ncalc.py\n</parameter>\n</function>\n</tool_call>"
    with ScriptedServer({"turns": [{"content": raw_call, "finish_reason": "tool_calls"}]}) as server:
        summary = run(spec_for(suite, server.base_url, seeds=1), tmp_path / "l.duckdb")
    model = next(a for a in summary.arms if a.arm == "frognano")
    assert model.errors == 3 and model.resolved == 0
    assert any("3 episode(s) ended parser_misconfigured" in w and "--tool-call-parser qwen3_coder" in w
               for w in summary.warnings)
    harness = rows(tmp_path / "l.duckdb", "select count(*) as n from episodes where harness_error and "
                                          "exit_reason = 'parser_misconfigured'")
    assert harness[0]["n"] == 3


def test_missing_router_key_is_named_before_any_episode(suite, tmp_path, monkeypatch):
    monkeypatch.delenv("LEAFCOST_TEST_ROUTER_KEY", raising=False)
    arm = {"name": "hosted", "adapter": "router", "model": "openai/gpt-5", "base_url": "http://127.0.0.1:9/v1",
           "api_key_env": "LEAFCOST_TEST_ROUTER_KEY", "prices": {"input": 1.25, "output": 10.0}}
    with pytest.raises(RunError, match="LEAFCOST_TEST_ROUTER_KEY"):
        run(spec_for(suite, "x", arms=[arm]), tmp_path / "l.duckdb")
    assert rows(tmp_path / "l.duckdb", "select count(*) as n from episodes")[0]["n"] == 0


def test_router_reported_costs_reconcile_with_ours_through_the_real_proxy(suite, tmp_path, litellm_proxy,
                                                                           monkeypatch):
    with ScriptedServer(SOLVE) as backend:
        proxy = litellm_proxy(backend.base_url, input_cost=1.25e-6, output_cost=10e-6, cache_read_cost=0.125e-6)
        monkeypatch.setenv("LEAFCOST_TEST_PROXY_KEY", proxy.master_key)

        def hosted(prices):
            return {"name": "hosted", "adapter": "router", "model": "hosted-gpt", "base_url": proxy.base_url,
                    "api_key_env": "LEAFCOST_TEST_PROXY_KEY", "max_retries": 0, "prices": prices}

        same = run(spec_for(suite, "x", seeds=1, arms=[hosted({"input": 1.25, "output": 10.0,
                                                               "cached_input": 0.125})]), tmp_path / "same.duckdb")
        other = run(spec_for(suite, "x", seeds=1, arms=[hosted({"input": 2.0, "output": 10.0,
                                                                "cached_input": 0.125})]), tmp_path / "other.duckdb")
    agreed, = same.reconciliation
    assert agreed.calls_compared == 6 and agreed.calls_without_router_cost == 0  # 3 tasks × 2 calls
    assert agreed.max_relative_difference < 1e-9 and not agreed.flagged
    assert same.arms[0].resolved == 3
    differed, = other.reconciliation
    assert differed.flagged and differed.max_relative_difference > 0.01
    assert any("differs from leafcost's computed cost" in w for w in other.warnings)
    calls = rows(tmp_path / "same.duckdb", "select cost_usd, router_cost_usd, router_cost_detail, price_source "
                                           "from model_calls")
    assert all(c["price_source"] == "explicit" and c["router_cost_detail"] for c in calls)


def test_a_fallback_deployment_is_recorded_and_priced_at_its_own_prices_and_the_key_leaks_nowhere(
        suite, tmp_path, litellm_proxy, monkeypatch, capfd):
    # The primary deployment is dead; the proxy falls back to `hosted-gpt-backup`, which costs 3x as much.
    peek = {"turns": [{"tool_calls": [{"name": "Bash", "arguments": {"command": "env; cat /proc/self/environ"}},
                                      *SOLVE["turns"][0]["tool_calls"]], "usage": SOLVE["turns"][0]["usage"]},
                      SOLVE["turns"][1]]}
    with ScriptedServer(peek) as backend:
        proxy = litellm_proxy("http://127.0.0.1:9/v1", input_cost=1e-6, output_cost=10e-6,
                              fallback=(backend.base_url, 3e-6, 30e-6))
        monkeypatch.setenv("LEAFCOST_TEST_PROXY_KEY", proxy.master_key)
        arm = {"name": "hosted", "adapter": "router", "model": "hosted-gpt", "base_url": proxy.base_url,
               "api_key_env": "LEAFCOST_TEST_PROXY_KEY", "max_retries": 0, "prices": {"input": 1.0, "output": 10.0},
               "fallback_prices": {"hosted-gpt-backup": {"input": 3.0, "output": 30.0}}}
        unlisted = {**arm, "name": "unlisted", "fallback_prices": {}}
        summary = run(spec_for(suite, "x", seeds=1, arms=[arm, unlisted]), tmp_path / "fb.duckdb")
    assert [a.resolved for a in summary.arms] == [3, 3]
    calls = rows(tmp_path / "fb.duckdb", "select arm, status, router_fallbacks, router_model, router_deployment, "
                                         "cost_usd, router_cost_usd, price_source, price_revision from model_calls")
    assert len(calls) == 12 and all(c["status"] == "ok" and c["router_fallbacks"] == 1 for c in calls)
    assert {(c["router_model"], c["router_deployment"]) for c in calls} == {("hosted-gpt-backup",
                                                                              "hosted-gpt-backup-1")}
    listed = [c for c in calls if c["arm"] == "hosted"]
    assert all(c["price_revision"] == "arm sheet: fallback_prices.hosted-gpt-backup" for c in listed)
    # each turn's tokens at the backup's $3/$30 per 1M, not the primary's $1/$10 (no cached rate: input rate)
    assert sorted({round(c["cost_usd"], 12) for c in listed}) == [(380 * 3.0 + 6 * 30.0) / 1e6,
                                                                  (300 * 3.0 + 40 * 30.0) / 1e6]
    hosted, unlisted_rec = summary.reconciliation
    assert hosted.calls_compared == 6 and hosted.max_relative_difference < 1e-9 and not hosted.flagged
    # A fallback with no price of ours is unpriced (litellm's map does not know it): no number, not a wrong one.
    assert all(c["cost_usd"] is None and c["price_source"] == "unpriced" for c in calls if c["arm"] == "unlisted")
    assert unlisted_rec.calls_compared == 0
    # The master key was in this process's environment: it reached neither the sandbox (the model ran `env`
    # there), nor the ledger, nor the trajectories, nor anything printed.
    key = proxy.master_key
    ledger = Ledger.open(tmp_path / "fb.duckdb")
    try:
        tables = [t["table_name"] for t in ledger.query("select table_name from duckdb_tables()")]
        for table in tables:
            assert key not in str(ledger.query(f"select * from {table}")), table
    finally:
        ledger.close()
    trajectories = list(Path(summary.trajectories).rglob("*.json"))
    assert len(trajectories) == 6
    texts = [t.read_text() for t in trajectories]
    assert all("LEAFCOST_TEST_PROXY_KEY" not in t and key not in t for t in texts)
    assert any("PATH=" in t for t in texts)  # the model did see the sandbox's environment
    printed = capfd.readouterr()
    assert key not in printed.out + printed.err


def test_dead_backend_behind_the_proxy_is_an_infrastructure_error_with_every_attempt_kept(
        suite, tmp_path, litellm_proxy, monkeypatch):
    proxy = litellm_proxy("http://127.0.0.1:9/v1", input_cost=1e-6, output_cost=1e-5)  # nothing listens there
    monkeypatch.setenv("LEAFCOST_TEST_PROXY_KEY", proxy.master_key)
    arm = {"name": "hosted", "adapter": "router", "model": "hosted-gpt", "base_url": proxy.base_url,
           "api_key_env": "LEAFCOST_TEST_PROXY_KEY", "max_retries": 1, "request_timeout_sec": 60,
           "prices": {"input": 1.0, "output": 10.0}}
    summary = run(spec_for(suite, "x", seeds=1, tasks=["calc-a"], arms=[arm]), tmp_path / "dead.duckdb")
    assert summary.status == "finished" and summary.arms[0].errors == 1 and summary.arms[0].resolved == 0
    episodes = rows(tmp_path / "dead.duckdb", "select attempt, exit_reason, infra_error, final from episodes "
                                              "order by attempt")
    assert [(e["attempt"], e["exit_reason"], e["infra_error"], e["final"]) for e in episodes] == [
        (1, "infrastructure_error", True, False), (2, "infrastructure_error", True, True)]
    calls = rows(tmp_path / "dead.duckdb", "select status, http_status from model_calls")
    assert len(calls) == 4 and all(c["status"] != "ok" and (c["http_status"] or 0) >= 500 for c in calls)


def test_resume_runs_a_key_whose_interrupted_attempts_reached_max_attempts(suite, tmp_path):
    db = tmp_path / "ledger.duckdb"
    spec = spec_for(suite, "x", seeds=1, tasks=["calc-a"], max_attempts=1, arms=[{"name": "oracle",
                                                                                  "adapter": "oracle"}])

    async def crashed_run() -> str:
        ledger = Ledger.open(db)
        try:
            run_id = "x-crashed"
            await ledger.create_run(run_id, spec, task_ids=["calc-a"])
            await ledger.record_arm(run_id, "oracle", adapter="oracle", model="", status="ready")
            await ledger.start_episode(run_id, "oracle", "calc-a", 0, 1)  # left running by a killed process
            return run_id
        finally:
            await ledger.aclose()

    run_id = asyncio.run(crashed_run())
    summary = run(spec, db, run_id=run_id)
    assert summary.status == "finished" and summary.arms[0].resolved == 1
    episodes = rows(db, "select attempt, exit_reason, final from episodes order by attempt")
    assert [(e["attempt"], e["exit_reason"], e["final"]) for e in episodes] == [(1, "interrupted", False),
                                                                                (2, "oracle", True)]


@pytest.mark.slow
def test_run_serves_the_api_and_page_while_it_writes_the_ledger(suite, tmp_path):
    # DuckDB lets no other process open a ledger being written: `run --serve` serves it from the writer itself.
    import urllib.request

    from adapters.litellm_proxy import free_port

    slow = {"turns": [{**SOLVE["turns"][0], "delay": 0.5}, SOLVE["turns"][1]]}
    db = tmp_path / "ledger.duckdb"
    port = free_port()
    with ScriptedServer(slow) as server:
        spec_file = tmp_path / "spec.yaml"
        spec_file.write_text(yaml.safe_dump(json.loads(spec_for(suite, server.base_url, workers=1).model_dump_json(
            exclude_defaults=True))))
        process = cli_run(spec_file, db, "--serve", str(port))
        wait_for_finished(db, 1, process)
        base = f"http://127.0.0.1:{port}"
        with urllib.request.urlopen(base + "/runs", timeout=30) as answer:
            runs = json.loads(answer.read())
        assert len(runs) == 1 and runs[0]["status"] == "running"
        run_id = runs[0]["run_id"]
        with urllib.request.urlopen(f"{base}/runs/{run_id}/episodes?final=true", timeout=30) as answer:
            assert json.loads(answer.read())["total"] >= 1  # committed episodes are visible mid-run
        with urllib.request.urlopen(f"{base}/run/{run_id}", timeout=60) as answer:
            assert b"id=arms" in answer.read()
        out, err = process.communicate(timeout=300)
    assert process.returncode == 0, err
    assert f"serving the API and the web page on {base}" in err
    assert rows(db, "select status from runs")[0]["status"] == "finished"


def test_a_new_run_numbers_its_attempts_without_asking_the_ledger(suite, tmp_path, monkeypatch):
    async def never(*args, **kwargs):
        raise AssertionError("a new run has no earlier attempts to count")

    monkeypatch.setattr(Ledger, "next_attempt", never)
    db = tmp_path / "ledger.duckdb"
    spec = spec_for(suite, "x", seeds=2, tasks=["calc-a", "calc-b"], arms=[{"name": "oracle", "adapter": "oracle"}])
    summary = run(spec, db)
    assert summary.status == "finished" and summary.arms[0].done == 4
    episodes = rows(db, "select attempt, status, final from episodes")
    assert sorted((e["attempt"], e["status"], e["final"]) for e in episodes) == [(1, "finished", True)] * 4


class _CancelAsItStarts:
    """The arm's gates, but the first attempt's task is cancelled the moment it exists, before run_attempt has run
    one line of it: a Ctrl-C (`stop` None: the worker itself is cancelled) or the arm's stop landing right then."""

    def __init__(self, gates, stop: str | None):
        self._gates, self._stop, self._done = gates, stop, False

    def track(self, arm: str, task: asyncio.Task) -> None:
        self._gates.track(arm, task)
        if not self._done:
            self._done = True
            if self._stop is None:
                asyncio.current_task().cancel()  # the worker: its `await` cancels the attempt before it begins
            else:
                self._gates.stop(arm, self._stop)

    def __getattr__(self, name: str):
        return getattr(self._gates, name)


@pytest.mark.parametrize("stop", [None, "stopped by a test"])
def test_an_attempt_cancelled_before_it_began_is_recorded_cancelled_and_not_final(suite, tmp_path, stop):
    # Found by CI: a Ctrl-C landing between an attempt's task being made and its first step left a final
    # "infrastructure_error" that was neither cancelled nor an error, so the resume skipped the key.
    db = tmp_path / "ledger.duckdb"
    spec = spec_for(suite, "x", seeds=1, tasks=["calc-a"], workers=1,
                    arms=[{"name": "oracle", "adapter": "oracle"}])
    ledger = Ledger.open(db)
    try:
        runner = Runner(spec, ledger, db_path=db)
        runner.gates = _CancelAsItStarts(runner.gates, stop)
        if stop is None:
            with pytest.raises(asyncio.CancelledError):
                asyncio.run(runner.run())
        else:
            assert asyncio.run(runner.run()).arms[0].done == 0
    finally:
        ledger.close()
    episodes = rows(db, "select exit_reason, infra_error, final from episodes")
    assert [(e["exit_reason"], e["infra_error"], e["final"]) for e in episodes] == [("cancelled", True, False)]
    if stop is None:  # the resume runs the key the cancel left
        summary = run(spec, db, run_id=runner.run_id)
        assert (summary.arms[0].done, summary.arms[0].resolved) == (1, 1)
