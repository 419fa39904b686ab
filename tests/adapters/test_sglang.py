"""The SGLang adapter against the scripted stand-in over real HTTP: sampling extras in the body, server facts
captured, misconfigured launches flagged, Prometheus metrics parsed, the GPU lease opened and closed."""

from __future__ import annotations

import asyncio

import pytest
from support.sglang_fake import ScriptedServer

from adapters.base import AdapterError
from adapters.sglang import SGLangAdapter, launch_command, parser_warnings


def adapter_for(server, **overrides):
    options = dict(base_url=server.base_url, model="frognano-4b", sampling={"temperature": 0.6, "top_k": 20,
                   "min_p": 0.0, "chat_template_kwargs": {"enable_thinking": True}}, gpu_type="H200", gpu_count=2,
                   usd_per_gpu_hour=3.5, max_retries=0)
    return SGLangAdapter(**{**options, **overrides})


def test_start_chat_metrics_and_lease():
    script = {"turns": [{"content": "hi", "usage": {"prompt_tokens": 40, "completion_tokens": 8,
                                                    "cached_tokens": 32, "reasoning_tokens": 3}}]}

    async def scenario(server):
        adapter = adapter_for(server)
        start = await adapter.start()
        turn = await adapter.chat([{"role": "user", "content": "x"}], [], max_tokens=512)
        sample = await adapter.sample_metrics()
        lease = await adapter.stop()
        return start, turn, sample, lease

    with ScriptedServer(script) as server:
        start, turn, sample, lease = asyncio.run(scenario(server))
        body = server.chat_bodies[0]
    assert start.server_info["tool_call_parser"] == "qwen3_coder" and start.model_info is not None
    assert start.warnings == [] and start.lease.hardware == "H200" and start.lease.count == 2
    assert (body["top_k"], body["min_p"], body["max_completion_tokens"]) == (20, 0.0, 512)
    assert body["chat_template_kwargs"] == {"enable_thinking": True}
    usage = turn.usage
    assert (usage.prompt_tokens, usage.cached_tokens, usage.completion_tokens, usage.reasoning_tokens) == (40, 32, 8,
                                                                                                          3)
    prompt_totals = [v for k, v in sample.values.items() if k.startswith("sglang:prompt_tokens_total{")]
    assert prompt_totals and prompt_totals[0] >= 40
    assert any(name.startswith("sglang:realtime_tokens_total") for name in sample.values)
    assert lease.ended_at is not None and lease.ended_at >= lease.started_at


def test_misconfigured_launch_is_flagged_with_the_flag_to_add():
    script = {"server_args": {"tool_call_parser": None, "reasoning_parser": "qwen3"}, "turns": [{"content": "x"}]}

    async def scenario(server):
        adapter = adapter_for(server)
        try:
            return await adapter.start()
        finally:
            await adapter.stop()

    with ScriptedServer(script) as server:
        start = asyncio.run(scenario(server))
    assert any("--tool-call-parser qwen3_coder" in w for w in start.warnings)
    assert parser_warnings({"tool_call_parser": "qwen3_coder", "reasoning_parser": "qwen3"}) == []


def test_unreachable_endpoint_and_missing_key_fail_before_any_episode(monkeypatch):
    async def start(adapter):
        try:
            return await adapter.start()
        finally:
            await adapter.stop()

    dead = SGLangAdapter(base_url="http://127.0.0.1:9/v1", model="m", sampling={}, gpu_type="H100", gpu_count=1,
                         usd_per_gpu_hour=2.95)
    with pytest.raises(AdapterError) as caught:
        asyncio.run(start(dead))
    assert caught.value.kind == "unreachable"
    monkeypatch.delenv("SGLANG_KEY", raising=False)
    with pytest.raises(AdapterError, match=r"\$SGLANG_KEY"):
        SGLangAdapter(base_url="http://127.0.0.1:9/v1", model="m", sampling={}, gpu_type="H100", gpu_count=1,
                      usd_per_gpu_hour=2.95, api_key_env="SGLANG_KEY")


def test_launch_command_has_the_parsers_and_reports():
    argv = launch_command(tp=2)
    text = " ".join(argv)
    for flag in ("--reasoning-parser qwen3", "--tool-call-parser qwen3_coder", "--enable-metrics",
                 "--enable-cache-report", "--context-length 131072", "--tp-size 2"):
        assert flag in text


def test_server_info_never_carries_the_servers_key():
    script = {"server_args": {"api_key": "sk-server-secret"}, "auth": "Bearer sk-server-secret",
              "turns": [{"content": "x"}]}

    async def scenario(server, monkeypatch_env):
        adapter = adapter_for(server, api_key_env=monkeypatch_env)
        try:
            return await adapter.start()
        finally:
            await adapter.stop()

    import os
    os.environ["LEAFCOST_TEST_SGLANG_KEY"] = "sk-server-secret"
    try:
        with ScriptedServer(script) as server:
            start = asyncio.run(scenario(server, "LEAFCOST_TEST_SGLANG_KEY"))
    finally:
        del os.environ["LEAFCOST_TEST_SGLANG_KEY"]
    assert start.server_info["api_key"] == "[redacted]"
    assert "sk-server-secret" not in start.model_dump_json()
