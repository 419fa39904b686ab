"""The episode recorder against a real ledger file: a step's rows are queued, not awaited; settle waits for them
and raises when one was refused; a hosted arm's calls are priced as they are recorded."""

from __future__ import annotations

import asyncio

import pytest

from adapters.base import CallAttempt, ToolCall, Usage
from compare.ledger import Ledger, LedgerError
from compare.recording import LedgerRecorder
from compare.spec import parse_run_spec

SPEC = parse_run_spec({"name": "rec", "suite": "builtin", "arms": [
    {"name": "local", "adapter": "local"},
    {"name": "hosted", "adapter": "router", "model": "openai/gpt-x", "api_key_env": "ROUTER_API_KEY",
     "prices": {"input": 1.0, "output": 2.0}}]})


def attempt(prompt=1000, completion=500) -> CallAttempt:
    return CallAttempt(attempt=1, model="m", status="ok",
                       usage=Usage(prompt_tokens=prompt, completion_tokens=completion,
                                   total_tokens=prompt + completion))


async def recorded(tmp_path, arm_name: str, steps: int, bad_step: int | None = None):
    async with Ledger.open(tmp_path / "l.duckdb") as ledger:
        await ledger.create_run("r", SPEC, task_ids=["t"])
        episode = await ledger.start_episode("r", arm_name, "t", 0, 1)
        arm = next(a for a in SPEC.arms if a.name == arm_name)
        recorder = LedgerRecorder(ledger, arm, episode)
        for step in range(steps):
            await recorder.model_call(2**70 if step == bad_step else step, attempt())
            await recorder.tool_call(step, 0, ToolCall(id=f"c{step}", name="Bash", arguments="{}"), "out",
                                     started_at=attempt().started_at, seconds=0.01)
        error = None
        try:
            await recorder.settle()
        except LedgerError as exc:
            error = exc
        rows = ledger.query("SELECT step, cost_usd, price_source FROM model_calls ORDER BY step")
        tools = ledger.query("SELECT count(*) AS n FROM tool_calls")[0]["n"]
        await recorder.settle()  # nothing left to wait for
        return recorder, error, rows, tools


def test_settle_waits_for_every_row_of_the_episode(tmp_path):
    recorder, error, rows, tools = asyncio.run(recorded(tmp_path, "local", steps=5))
    assert error is None and [r["step"] for r in rows] == [0, 1, 2, 3, 4] and tools == 5
    assert {(r["cost_usd"], r["price_source"]) for r in rows} == {(None, "lease")} and recorder.spend_usd == 0.0


def test_a_hosted_arm_is_priced_as_it_records(tmp_path):
    recorder, error, rows, _ = asyncio.run(recorded(tmp_path, "hosted", steps=2))
    assert error is None and [r["price_source"] for r in rows] == ["explicit", "explicit"]
    assert recorder.spend_usd == pytest.approx(2 * (1000 * 1.0 + 500 * 2.0) / 1e6)


def test_settle_raises_when_a_row_was_refused_and_keeps_the_others(tmp_path):
    _, error, rows, tools = asyncio.run(recorded(tmp_path, "local", steps=3, bad_step=1))
    assert isinstance(error, LedgerError)
    assert [r["step"] for r in rows] == [0, 2] and tools == 3
