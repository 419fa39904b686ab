"""A lease whose runner was killed (`kill -9`) and never resumed is billed up to its last heartbeat; its utilization
is measured over the same window, so busy seconds its dying process sampled after that heartbeat are not set
against a bill that does not cover them. The ledger is written as such a runner leaves it, through the ledger's own
writer (no clock involved: every timestamp is chosen), and read back by the real `leafcost summary` CLI. A real
`kill -9` of `leafcost run`, and its lease closed at the last heartbeat on resume, are tests/compare/test_runner.py's
(test_resume_after_a_crash_runs_only_what_is_unfinished)."""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
from datetime import datetime, timedelta, timezone
from pathlib import Path

import pytest

from adapters.base import CallAttempt, Lease, ServerSample, Usage
from compare.costs import GPU_SECONDS
from compare.ledger import Ledger
from compare.spec import parse_run_spec

LEAFCOST = Path(sys.executable).with_name("leafcost")
RUN_ID = "killed-20260105-080000-0000"
T0 = datetime(2026, 1, 5, 8, 0, tzinfo=timezone.utc)  # the lease starts
HEARTBEATS = (15, 30)  # seconds after T0: the runner's last heartbeat is at 30 s, then it is killed
SCRAPE_EVERY, LAST_SCRAPE = 5, 45  # the server was scraped every 5 s up to 45 s: 15 s past the last heartbeat
USD_PER_HOUR = 3.5
# GPU-seconds per 5 s scrape interval, by category (binary fractions, so every sum below is exact); idle is not busy
GROWTH = {"forward_extend": 1.0, "forward_decode": 1.5, "forward_idle": 2.0}


def busy_at(category: str, second: int) -> float:
    return GROWTH[category] * second / SCRAPE_EVERY


def killed_ledger(db: Path) -> None:
    """One run, one lease-billed SGLang arm with one finished episode, its lease opened at T0 and heartbeated at
    HEARTBEATS then never closed (the process died), and the busy counter scraped every 5 s until 45 s."""
    spec = parse_run_spec({
        "name": "killed", "suite": "builtin", "seeds": 1, "workers": 1, "max_attempts": 1,
        "budgets": {"max_steps": 10},
        "arms": [{"name": "frognano", "adapter": "sglang", "model": "frognano-4b", "base_url": "http://127.0.0.1:1/v1",
                  "gpu": {"type": "H200", "usd_per_hour": USD_PER_HOUR}}]})

    async def write() -> None:
        async with Ledger.open(db) as ledger:
            await ledger.create_run(RUN_ID, spec, task_ids=["calc-a"], created_at=T0)
            await ledger.record_arm(RUN_ID, "frognano", adapter="sglang", model="frognano-4b", started_at=T0)
            lease_id = await ledger.open_lease(RUN_ID, "frognano", Lease(
                kind="gpu", hardware="H200", usd_per_hour=USD_PER_HOUR, started_at=T0))
            for second in HEARTBEATS:
                assert await ledger.heartbeat_leases([lease_id], T0 + timedelta(seconds=second)) == 1
            episode = await ledger.start_episode(RUN_ID, "frognano", "calc-a", 0, 1, started_at=T0)
            await ledger.record_call(episode, 1, CallAttempt(
                attempt=1, model="frognano-4b", status="ok", started_at=T0 + timedelta(seconds=1),
                usage=Usage(prompt_tokens=1000, completion_tokens=100, total_tokens=1100)),
                cost_usd=None, price_source="lease", price_revision=None)
            await ledger.finish_episode(episode, exit_reason="agent", resolved=True, reward=1.0, final=True,
                                        n_steps=1, ended_at=T0 + timedelta(seconds=20), sandbox_cpu_seconds=0.0)
            for second in range(0, LAST_SCRAPE + 1, SCRAPE_EVERY):
                await ledger.record_sample(RUN_ID, "frognano", ServerSample(
                    taken_at=T0 + timedelta(seconds=second),
                    values={f'{GPU_SECONDS}{{category="{category}",model_name="frognano-4b"}}':
                            busy_at(category, second) for category in GROWTH}))
    asyncio.run(write())


def test_a_killed_lease_bills_and_measures_utilization_over_one_window(tmp_path):
    db = tmp_path / "l.duckdb"
    killed_ledger(db)
    shown = subprocess.run([str(LEAFCOST), "summary", RUN_ID, "--db", str(db), "--json"], capture_output=True,
                           text=True, timeout=120)
    assert shown.returncode == 0, shown.stderr
    arm = json.loads(shown.stdout)["arms"][0]
    lease = arm["lease"]

    billed = float(HEARTBEATS[-1])  # the bill stops at the last heartbeat: 30 s, not the 45 s sampled
    assert lease["open"] and lease["seconds"] == billed
    assert arm["cost_usd"]["gpu"] == pytest.approx(USD_PER_HOUR * billed / 3600, rel=1e-12)
    # one window: busy = extend + decode (idle left out) grown from 0 s to the heartbeat at 30 s, 6 + 9 = 15 GPU-s;
    # the 7.5 GPU-s the dying process went on sampling until 45 s are outside the bill, hence outside the busy time
    in_window = busy_at("forward_extend", 30) + busy_at("forward_decode", 30)
    sampled = busy_at("forward_extend", LAST_SCRAPE) + busy_at("forward_decode", LAST_SCRAPE)
    assert (in_window, sampled) == (15.0, 22.5)
    assert lease["busy_counter"] == GPU_SECONDS and lease["busy_seconds"] == in_window
    assert arm["utilization"] == in_window / billed == 0.5  # not 22.5 / 30 = 0.75
