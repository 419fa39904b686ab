"""Usage no server could have counted (negative, not a whole number, a bool, past 2**30 tokens, past the ledger's
BIGINT, a part larger than its whole) is the endpoint's error: the call ends `bad_response` with the reason
"impossible usage: ...", is counted per arm and is never priced. Real HTTP: the scripted server sends the raw
answer; end to end through the runner, the ledger and the summary."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import pytest
from support.sglang_fake import ScriptedServer

from adapters.base import AdapterError
from adapters.openai_http import OpenAICompatibleAdapter
from compare.ledger import Ledger, connect_read_only
from compare.runner import Runner
from compare.spec import parse_run_spec
from compare.summary import summarize


def answer(usage) -> str:
    """A well-formed chat completion (a final answer) whose usage is exactly `usage`."""
    return json.dumps({"id": "chatcmpl-1", "object": "chat.completion", "model": "frognano-4b",
                       "choices": [{"index": 0, "finish_reason": "stop",
                                    "message": {"role": "assistant", "content": "done"}}],
                       "usage": usage})


CEILING = 2**30  # adapters.base.USAGE_CEILING: the most tokens one call can report

IMPOSSIBLE = {
    "negative prompt": ({"prompt_tokens": -1_000_000, "completion_tokens": 10}, "prompt_tokens is -1000000"),
    "negative completion": ({"prompt_tokens": 10, "completion_tokens": -5}, "completion_tokens is -5"),
    "a fraction": ({"prompt_tokens": 10.5, "completion_tokens": 1}, "not a whole number"),
    "a bool": ({"prompt_tokens": True, "completion_tokens": 1}, "not a number"),
    "a string": ({"prompt_tokens": "12", "completion_tokens": 1}, "not a number"),
    "NaN spelled as a string": ({"prompt_tokens": 10, "completion_tokens": "NaN"}, "not a number"),
    "1e30": ({"prompt_tokens": 1e30, "completion_tokens": 1}, "outside 0..1073741824"),
    "past INT64": ({"prompt_tokens": 10, "completion_tokens": 2**70}, "outside 0..1073741824"),
    "just past the ceiling": ({"prompt_tokens": CEILING + 1, "completion_tokens": 1}, "outside 0.."),
    "cached above prompt": ({"prompt_tokens": 10, "completion_tokens": 1,
                             "prompt_tokens_details": {"cached_tokens": 11}}, "cached_tokens (11) exceeds"),
    "cache writes above prompt": ({"prompt_tokens": 10, "completion_tokens": 1,
                                   "cache_creation_input_tokens": 20}, "cache_write_tokens (20) exceeds"),
    "reasoning above completion": ({"prompt_tokens": 10, "completion_tokens": 3,
                                    "completion_tokens_details": {"reasoning_tokens": 4}}, "reasoning_tokens (4)"),
    "negative nested": ({"prompt_tokens": 10, "completion_tokens": 3,
                         "prompt_tokens_details": {"cached_tokens": -1}}, "cached_tokens is -1"),
    "details not an object": ({"prompt_tokens": 10, "completion_tokens": 3,
                               "completion_tokens_details": "lots"}, "not an object"),
    "usage not an object": ([1, 2], "usage is a list"),
}


def chat_once(server: ScriptedServer) -> AdapterError:
    adapter = OpenAICompatibleAdapter(base_url=server.base_url, model="frognano-4b", max_retries=2)

    async def call():
        try:
            await adapter.chat([{"role": "user", "content": "hi"}], [])
        finally:
            await adapter.stop()
    with pytest.raises(AdapterError) as caught:
        asyncio.run(call())
    return caught.value


@pytest.mark.parametrize("case", list(IMPOSSIBLE))
def test_impossible_usage_is_a_bad_response_with_its_reason_never_retried(case):
    usage, reason = IMPOSSIBLE[case]
    with ScriptedServer({"turns": [{"garbage": answer(usage)}]}) as server:
        error = chat_once(server)
        sent = len(server.chat_bodies)
    assert error.kind == "bad_response" and sent == 1  # the endpoint's error: not retried, not infrastructure
    [attempt] = error.attempts
    assert attempt.status == "bad_response"
    assert attempt.error.startswith("impossible usage: ") and reason in attempt.error, attempt.error
    assert attempt.usage.prompt_tokens == 0 and attempt.usage.completion_tokens == 0  # nothing to price


@pytest.mark.parametrize("usage", [{"prompt_tokens": 12.0, "completion_tokens": 3},  # an integral float
                                   {"prompt_tokens": CEILING, "completion_tokens": 0},  # the ceiling itself
                                   {"prompt_tokens": 10, "completion_tokens": 3, "prompt_tokens_details": None,
                                    "completion_tokens_details": {"reasoning_tokens": 3}}])
def test_possible_usage_is_read_as_sent(usage):
    adapter = OpenAICompatibleAdapter(base_url="http://unused", model="frognano-4b")
    with ScriptedServer({"turns": [{"garbage": answer(usage)}]}) as server:
        adapter.base_url = server.base_url

        async def call():
            try:
                return await adapter.chat([{"role": "user", "content": "hi"}], [])
            finally:
                await adapter.stop()
        turn = asyncio.run(call())
    assert turn.usage.prompt_tokens == int(usage["prompt_tokens"])
    assert turn.attempts[0].status == "ok"


def test_negative_and_overflowing_usage_never_move_a_hosted_arms_cost(make_task, tmp_path, monkeypatch):
    """The hosted arm that showed a total of -$250: one endpoint answers -250M prompt tokens, another 1e30. Each is
    one episode's endpoint error (llm_query_error, not a harness error), counted in impossible_usage_calls, and
    the arm's cost stays what its possible calls cost."""
    suite = Path(make_task("calc-a").path).parent
    make_task("calc-b")
    # Both episodes send the same first request: the first gets -250M prompt tokens, the second 1e30.
    turns = [{"attempts": [{"garbage": answer({"prompt_tokens": -250_000_000, "completion_tokens": 10})},
                           {"garbage": answer({"prompt_tokens": 10, "completion_tokens": 1e30})}]}]
    db = tmp_path / "ledger.duckdb"
    with ScriptedServer({"turns": turns, "then": {"content": "done"}}) as server:
        spec = parse_run_spec({
            "name": "t", "suite": str(suite), "seeds": 1, "workers": 1, "max_attempts": 1,
            "budgets": {"max_steps": 3, "time_budget_sec": 120},
            "arms": [{"name": "hosted", "adapter": "router", "model": "frognano-4b", "base_url": server.base_url,
                      "api_key_env": "LEAFCOST_TEST_KEY", "max_retries": 0,
                      "prices": {"input": 1.0, "output": 1.0}}]})
        monkeypatch.setenv("LEAFCOST_TEST_KEY", "sk-impossible-usage-test")
        ledger = Ledger.open(db)
        try:
            result = asyncio.run(Runner(spec, ledger, db_path=db).run())
        finally:
            ledger.close()
    assert result.status == "finished"
    conn = connect_read_only(db)
    try:
        episodes = conn.execute("SELECT exit_reason, harness_error FROM episodes ORDER BY task_id").fetchall()
        calls = conn.execute("SELECT status, error, cost_usd, prompt_tokens FROM model_calls "
                             "WHERE status = 'bad_response'").fetchall()
        [arm] = summarize(conn, spec_run_id(conn))["arms"]
    finally:
        conn.close()
    assert episodes == [("llm_query_error", False), ("llm_query_error", False)]
    assert len(calls) == 2 and all(error.startswith("impossible usage: ") and not cost and prompt == 0
                                   for _, error, cost, prompt in calls)
    assert sorted(error.split(": ")[1].split(" ")[0] for _, error, _, _ in calls) == ["completion_tokens",
                                                                                     "prompt_tokens"]
    assert arm["impossible_usage_calls"] == 2
    assert arm["cost_usd"]["tokens"] == 0.0 and arm["cost_usd"]["total"] >= 0.0


def spec_run_id(conn) -> str:
    return conn.execute("SELECT run_id FROM runs").fetchone()[0]
