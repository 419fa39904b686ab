"""A new run's first writes as one transaction (Ledger.queue_begin_run): the same rows as create_run,
record_task_dates, record_plan and close_orphan_leases one after the other, committed all together or not at all."""

from __future__ import annotations

import asyncio
from datetime import datetime, timezone

import pytest

from adapters.base import Lease
from compare.ledger import Ledger, LedgerError, SecretInLedger
from compare.spec import parse_run_spec

T0 = datetime(2025, 3, 1, 12, 0, 0, tzinfo=timezone.utc)
SPEC = parse_run_spec({"name": "demo", "suite": "builtin", "seeds": 2,
                       "arms": [{"name": "local", "adapter": "local"}]})
DATES = {"t2": T0, "t1": None}
PLAN = {"arms": ["local"], "episodes": 4}
OPTIONS = {"backend": "local", "cpus": 1}


def run(coro):
    return asyncio.run(coro)


async def _orphan_lease(path) -> None:
    """A ledger closed with a lease still open, as a killed run leaves it."""
    async with Ledger.open(path) as ledger:
        await ledger.create_run("dead", SPEC, task_ids=["t1"])
        await ledger.open_lease("dead", "local", Lease(kind="cpu", hardware="2 vCPU", usd_per_hour=0.1,
                                                       started_at=T0))


def _rows(ledger: Ledger, run_id: str) -> dict:
    runs = ledger.query("SELECT * EXCLUDE (created_at, updated_at) FROM runs WHERE run_id = ?", [run_id])
    tasks = ledger.query("SELECT task_id, created_at FROM run_tasks WHERE run_id = ? ORDER BY task_id", [run_id])
    plans = ledger.query("SELECT document FROM run_plans WHERE run_id = ?", [run_id])
    return {"runs": [{**row, "run_id": "x"} for row in runs], "tasks": tasks, "plans": plans}


def test_begin_run_records_what_the_writes_one_by_one_record_and_closes_the_orphans(tmp_path):
    one_by_one, together = tmp_path / "a.duckdb", tmp_path / "b.duckdb"
    for path in (one_by_one, together):
        run(_orphan_lease(path))

    async def separately():
        async with Ledger.open(one_by_one) as ledger:
            closed = await ledger.close_orphan_leases()
            await ledger.create_run("r", SPEC, task_ids=list(DATES), sandbox_options=OPTIONS, spec_sha256="abc")
            await ledger.record_task_dates("r", DATES)
            await ledger.record_plan("r", PLAN)
            return closed, _rows(ledger, "r"), ledger.query("SELECT ended_at FROM gpu_leases")

    async def at_once():
        async with Ledger.open(together) as ledger:
            begun = ledger.queue_begin_run("r", SPEC, task_dates=DATES, sandbox_options=OPTIONS, spec_sha256="abc",
                                           plan=PLAN)
            closed = await begun
            return closed, _rows(ledger, "r"), ledger.query("SELECT ended_at FROM gpu_leases")

    expected, got = run(separately()), run(at_once())
    assert got == expected
    closed, rows, leases = got
    assert closed == 1 and leases == [{"ended_at": T0}]
    assert rows["runs"][0]["spec_sha256"] == "abc" and rows["runs"][0]["status"] == "running"
    assert [t["task_id"] for t in rows["tasks"]] == ["t1", "t2"] and len(rows["plans"]) == 1


def test_a_begin_run_without_a_plan_writes_no_plan_row(tmp_path):
    async def scenario():
        async with Ledger.open(tmp_path / "l.duckdb") as ledger:
            closed = await ledger.queue_begin_run("r", SPEC, task_dates={"t1": None})
            return closed, _rows(ledger, "r")

    closed, rows = run(scenario())
    assert closed == 0 and rows["plans"] == [] and len(rows["runs"]) == 1 and len(rows["tasks"]) == 1


def test_a_failing_begin_run_records_nothing_not_even_the_orphans_closing(tmp_path):
    path = tmp_path / "l.duckdb"
    run(_orphan_lease(path))

    async def scenario():
        async with Ledger.open(path) as ledger:
            await ledger.create_run("r", SPEC, task_ids=["t0"])
            with pytest.raises(LedgerError):  # the run exists already: the whole transaction is refused
                await ledger.queue_begin_run("r", SPEC, task_dates={"t9": None}, plan=PLAN)
            return (ledger.query("SELECT ended_at FROM gpu_leases"), _rows(ledger, "r"))

    leases, rows = run(scenario())
    assert leases == [{"ended_at": None}]
    assert [t["task_id"] for t in rows["tasks"]] == [] and rows["plans"] == []


@pytest.mark.parametrize("run_id, options, error", [
    ("bad id/with slash", None, LedgerError),
    ("r", {"api_key": "sk-live-0123456789abcdef0123"}, SecretInLedger),
])
def test_a_bad_run_id_or_a_secret_is_refused_before_anything_is_queued(tmp_path, run_id, options, error):
    async def scenario():
        async with Ledger.open(tmp_path / "l.duckdb") as ledger:
            with pytest.raises(error):
                ledger.queue_begin_run(run_id, SPEC, task_dates={"t1": None}, sandbox_options=options)
            await ledger.flush()
            return ledger.query("SELECT count(*) AS n FROM runs")[0]["n"], ledger.query(
                "SELECT count(*) AS n FROM run_tasks")[0]["n"]

    assert run(scenario()) == (0, 0)


async def _crashed_run(path) -> None:
    """A run whose process died: an attempt left running, a lease left open, the run marked interrupted."""
    async with Ledger.open(path) as ledger:
        await ledger.create_run("r", SPEC, task_ids=["t1"])
        await ledger.start_episode("r", "local", "t1", 0, 1, started_at=T0)
        await ledger.open_lease("r", "local", Lease(kind="cpu", hardware="2 vCPU", usd_per_hour=0.1, started_at=T0))
        await ledger.set_run_status("r", "interrupted", "killed")


def _resumed_rows(ledger: Ledger) -> dict:
    return {"episodes": ledger.query("SELECT * EXCLUDE (ended_at, elapsed_sec) FROM episodes"),
            "leases": ledger.query("SELECT ended_at FROM gpu_leases"),
            "runs": ledger.query("SELECT status, status_reason FROM runs"),
            "tasks": ledger.query("SELECT task_id, created_at FROM run_tasks ORDER BY task_id")}


def test_resume_run_records_what_the_writes_one_by_one_record(tmp_path):
    one_by_one, together = tmp_path / "a.duckdb", tmp_path / "b.duckdb"
    for path in (one_by_one, together):
        run(_crashed_run(path))

    async def separately():
        async with Ledger.open(one_by_one) as ledger:
            interrupted = await ledger.interrupt_running("r")
            closed = await ledger.close_orphan_leases()
            await ledger.set_run_status("r", "running")
            await ledger.record_task_dates("r", {"t1": T0})
            return (interrupted, closed), _resumed_rows(ledger)

    async def at_once():
        async with Ledger.open(together) as ledger:
            return await ledger.queue_resume_run("r", task_dates={"t1": T0}), _resumed_rows(ledger)

    expected, got = run(separately()), run(at_once())
    assert got == expected
    counts, rows = got
    assert counts == (1, 1) and rows["runs"] == [{"status": "running", "status_reason": None}]
    assert rows["episodes"][0]["exit_reason"] == "interrupted" and rows["leases"] == [{"ended_at": T0}]
    assert rows["tasks"] == [{"task_id": "t1", "created_at": T0}]


def test_a_resume_of_an_unknown_run_records_nothing(tmp_path):
    path = tmp_path / "l.duckdb"
    run(_crashed_run(path))

    async def scenario():
        async with Ledger.open(path) as ledger:
            with pytest.raises(LedgerError, match="not in the ledger"):
                await ledger.queue_resume_run("other", task_dates={"t1": T0})
            return _resumed_rows(ledger)

    rows = run(scenario())
    assert rows["episodes"][0]["status"] == "running" and rows["leases"] == [{"ended_at": None}]
    assert rows["tasks"] == [] and rows["runs"] == [{"status": "interrupted", "status_reason": "killed"}]
