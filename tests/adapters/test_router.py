"""The router adapter against the scripted stand-in over real HTTP: what it sends, what it records from
each attempt (tokens as the server reported them, the router's cost, retries and fallbacks), how failures map to
error kinds, and that the key never shows up anywhere but the Authorization header."""

from __future__ import annotations

import asyncio
import json
import time

import pytest
from support.sglang_fake import ScriptedServer

from adapters.base import AdapterError
from adapters.openai_http import OpenAICompatibleAdapter
from adapters.router import API_KEY_ENV_ORDER, RouterAdapter
from sandbox import LEAF_TOOLS

KEY = "sk-leafcost-test-5f2b9c0e7a1d"
KEY_ENV = "LEAFCOST_TEST_ROUTER_KEY"
MODEL = "openai/gpt-5"  # an OpenRouter-style name: sent as is, prefix and top_p kept (no per-model rewriting)
TOOLS = [{"type": "function", "function": {"name": "Bash", "description": "Run a command.", "parameters": {
    "type": "object", "properties": {"command": {"type": "string"}}, "required": ["command"]}}}]
SAMPLING = {"temperature": 0.2, "top_p": 0.9, "top_k": 20, "min_p": 0.05, "repetition_penalty": 1.05,
            "chat_template_kwargs": {"enable_thinking": True}}
CONVERSATION = [{"role": "system", "content": "You fix bugs."}, {"role": "user", "content": "calc.add subtracts"}]


@pytest.fixture(autouse=True)
def router_key(monkeypatch):
    monkeypatch.setenv(KEY_ENV, KEY)


def script(turns=None, **fields):
    return {"model": MODEL, "auth": f"Bearer {KEY}", "turns": turns or [], **fields}


def adapter_for(server, **overrides) -> RouterAdapter:
    options = dict(model=MODEL, base_url=server.base_url if server else "http://127.0.0.1:9/v1",
                   api_key_env=KEY_ENV, sampling=SAMPLING, request_timeout_sec=30.0, max_retries=0)
    return RouterAdapter(**{**options, **overrides})


def chat_error(adapter, messages=CONVERSATION, **options) -> AdapterError:
    with pytest.raises(AdapterError) as caught:
        asyncio.run(adapter.chat(list(messages), TOOLS, **options))
    return caught.value


def assert_no_key(*things):
    for thing in things:
        text = thing if isinstance(thing, str) else repr(thing)
        assert KEY not in text


def test_tool_call_turn_then_final_turn():
    turns = [{"reasoning": "list the files first",
              "tool_calls": [{"name": "Bash", "arguments": '{"command":  "ls"} ', "id": "call_a"},
                             {"name": "Bash", "arguments": "{not json"}],
              "usage": {"prompt_tokens": 120, "completion_tokens": 30, "cached_tokens": 64, "reasoning_tokens": 12}},
             {"content": "Fixed calc.add.", "reasoning": "tests pass",
              "usage": {"prompt_tokens": 180, "completion_tokens": 9, "cached_tokens": 120, "reasoning_tokens": 4}}]

    async def scenario(server):
        adapter = adapter_for(server)
        start = await adapter.start()
        messages = [dict(m) for m in CONVERSATION]
        first = await adapter.chat(messages, TOOLS, max_tokens=256)
        history = messages + [
            {"role": "assistant", "content": first.content, "reasoning_content": first.reasoning,
             "tool_calls": [{"id": c.id, "type": "function", "function": {"name": c.name, "arguments": c.arguments}}
                            for c in first.tool_calls]},
            *({"role": "tool", "tool_call_id": c.id, "content": "calc.py"} for c in first.tool_calls)]
        frozen = json.dumps(history)
        second = await adapter.chat(history, TOOLS, max_tokens=256)
        assert json.dumps(history) == frozen, "the caller's history must not be edited"
        return adapter, start, first, second

    with ScriptedServer(script(turns)) as server:
        adapter, start, first, second = asyncio.run(scenario(server))
        requests = [r for r in server.requests if r.path == "/v1/chat/completions"]

    assert start.served_model == MODEL and start.warnings == []
    assert start.config["protocol"] == "openai-chat-completions" and start.config["tool_choice"] == "auto"
    assert start.config["parallel_tool_calls"] is True and start.config["sampling"]["temperature"] == 0.2
    assert [(c.id, c.name) for c in first.tool_calls][0] == ("call_a", "Bash")
    assert [c.arguments for c in first.tool_calls] == ['{"command":  "ls"} ', "{not json"]  # raw, as produced
    assert first.reasoning == "list the files first" and first.finish_reason == "tool_calls"
    usage = first.usage
    assert (usage.prompt_tokens, usage.cached_tokens, usage.completion_tokens, usage.reasoning_tokens,
            usage.total_tokens) == (120, 64, 30, 12, 150)
    assert len(first.attempts) == 1 and first.attempts[0].usage == usage and first.attempts[0].status == "ok"
    assert first.attempts[0].model == MODEL and first.model == MODEL
    assert second.content == "Fixed calc.add." and second.reasoning == "tests pass" and not second.tool_calls
    assert (second.usage.prompt_tokens, second.usage.cached_tokens, second.usage.reasoning_tokens) == (180, 120, 4)

    body = requests[0].body
    assert requests[0].headers["authorization"] == f"Bearer {KEY}"
    assert body["model"] == MODEL
    assert (body["tool_choice"], body["parallel_tool_calls"], body["max_completion_tokens"]) == ("auto", True, 256)
    assert (body["temperature"], body["top_p"], body["top_k"], body["min_p"], body["repetition_penalty"]) == (
        0.2, 0.9, 20, 0.05, 1.05)
    assert body["chat_template_kwargs"] == {"enable_thinking": True} and body["usage"] == {"include": True}
    assert body["tools"] == TOOLS and body["messages"] == CONVERSATION
    sent_back = requests[1].body["messages"][2]
    assert sent_back["role"] == "assistant" and sent_back["reasoning_content"] == "list the files first"
    assert [c["function"]["arguments"] for c in sent_back["tool_calls"]] == ['{"command":  "ls"} ', "{not json"]
    assert first.request_extras["top_k"] == 20 and first.request_extras["max_completion_tokens"] == 256
    assert_no_key(start, first, second, adapter)


def test_router_cost_retries_fallbacks_and_the_answering_model():
    proxy_headers = {"x-litellm-response-cost": "0.0123", "x-litellm-response-cost-input": "0.01",
                     "x-litellm-response-cost-output": "0.0023", "x-litellm-response-cost-margin-amount": "0.0",
                     "x-litellm-attempted-retries": "2", "x-litellm-attempted-fallbacks": "1",
                     "x-request-id": "req-42"}
    # A fallback answered: the body names another model than the one asked for.
    fallback = {"id": "gen-1", "object": "chat.completion", "created": 1, "model": "anthropic/claude-sonnet-4.5",
                "choices": [{"index": 0, "finish_reason": "tool_calls", "message": {
                    "role": "assistant", "content": None, "tool_calls": [{"id": "call_1", "type": "function",
                    "function": {"name": "Bash", "arguments": "{\"command\": \"ls\"}"}}]}}],
                "usage": {"prompt_tokens": 50, "completion_tokens": 7, "total_tokens": 57, "cost": 0.0125}}
    turns = [{"garbage": json.dumps(fallback), "headers": proxy_headers},
             {"content": "done", "cost": 0.004, "usage": {"prompt_tokens": 60, "completion_tokens": 2}}]

    async def scenario(server):
        adapter = adapter_for(server)
        first = await adapter.chat(list(CONVERSATION), TOOLS)
        history = CONVERSATION + [{"role": "assistant", "content": None, "tool_calls": [
            {"id": "call_1", "type": "function", "function": {"name": "Bash", "arguments": "{}"}}]},
            {"role": "tool", "tool_call_id": "call_1", "content": "ok"}]
        return first, await adapter.chat(history, TOOLS)

    with ScriptedServer(script(turns)) as server:
        first, second = asyncio.run(scenario(server))

    attempt = first.attempts[0]
    assert attempt.model == first.model == "anthropic/claude-sonnet-4.5"
    assert attempt.router_cost_usd == pytest.approx(0.0123)
    assert attempt.router_cost_detail == {"input": 0.01, "output": 0.0023, "margin_amount": 0.0,
                                          "usage_cost": 0.0125, "source": "x-litellm-response-cost"}
    assert (attempt.router_retries, attempt.router_fallbacks, attempt.request_id) == (2, 1, "req-42")
    assert first.usage.prompt_tokens == 50 and first.usage.completion_tokens == 7
    paid = second.attempts[0]
    assert paid.router_cost_usd == pytest.approx(0.004) and paid.router_cost_detail == {"source": "usage.cost"}
    assert paid.router_retries is None and paid.router_fallbacks is None


def test_rate_limited_then_answered_keeps_both_attempts_and_honours_retry_after():
    turns = [{"attempts": [{"status": 429, "retry_after": 1, "message": "slow down"},
                           {"content": "ok", "usage": {"prompt_tokens": 11, "completion_tokens": 3}}]}]
    with ScriptedServer(script(turns)) as server:
        turn = asyncio.run(adapter_for(server, max_retries=2).chat(list(CONVERSATION), TOOLS))
        sent = len(server.chat_bodies)

    limited, answered = turn.attempts
    assert (limited.attempt, limited.status, limited.http_status) == (1, "http_error", 429)
    assert "slow down" in limited.error and limited.usage.total_tokens == 0
    assert (answered.attempt, answered.status, answered.usage.prompt_tokens) == (2, "ok", 11)
    assert (answered.started_at - limited.started_at).total_seconds() >= 1.0  # waited as the router asked
    assert turn.usage == answered.usage and sent == 2  # no client library retried on its own


def test_server_errors_until_retries_run_out():
    with ScriptedServer(script(then={"status": 500, "message": "upstream exploded"})) as server:
        error = chat_error(adapter_for(server, max_retries=2))
        sent = len(server.chat_bodies)

    assert error.kind == "server_error" and error.infrastructure
    assert [(a.attempt, a.status, a.http_status) for a in error.attempts] == [(1, "http_error", 500),
                                                                             (2, "http_error", 500),
                                                                             (3, "http_error", 500)]
    assert str(error).endswith("HTTP 500: upstream exploded") and sent == 3  # the server's words


def test_wrong_key_fails_at_start_and_chat_does_not_retry(monkeypatch):
    wrong = "sk-wrong-key-0000"
    monkeypatch.setenv(KEY_ENV, wrong)
    with ScriptedServer(script([{"content": "never"}])) as server:
        adapter = adapter_for(server, max_retries=3)
        with pytest.raises(AdapterError) as at_start:
            asyncio.run(adapter.start())
        at_chat = chat_error(adapter)
        sent = len(server.chat_bodies)

    assert at_start.value.kind == "configuration" and KEY_ENV in str(at_start.value)
    assert at_chat.kind == "configuration" and len(at_chat.attempts) == 1 and at_chat.attempts[0].http_status == 401
    assert sent == 1
    for error in (at_start.value, at_chat):
        assert wrong not in str(error) and wrong not in repr(error.attempts)


def test_forbidden_is_a_configuration_error_too():
    with ScriptedServer(script([{"status": 403, "message": "this key may not use this model"}])) as server:
        error = chat_error(adapter_for(server, max_retries=3))
    assert error.kind == "configuration" and len(error.attempts) == 1 and "may not use" in str(error)


def test_missing_key_names_the_variable(monkeypatch):
    for name in (*API_KEY_ENV_ORDER, KEY_ENV):
        monkeypatch.delenv(name, raising=False)
    with pytest.raises(AdapterError) as named:
        adapter_for(None)
    assert named.value.kind == "configuration" and f"set {KEY_ENV}" in str(named.value)
    with pytest.raises(AdapterError) as default:
        adapter_for(None, api_key_env=None)
    assert default.value.kind == "configuration" and "set ROUTER_API_KEY" in str(default.value)

    monkeypatch.setenv("OPENAI_API_KEY", "sk-openai")
    monkeypatch.setenv("OPENROUTER_API_KEY", "sk-openrouter")
    assert adapter_for(None, api_key_env=None).api_key_env == "OPENROUTER_API_KEY"  # the documented order
    monkeypatch.setenv("ROUTER_API_KEY", "sk-router")
    assert adapter_for(None, api_key_env=None).api_key_env == "ROUTER_API_KEY"


def test_the_key_never_leaves_the_authorization_header(capfd, caplog):
    echoed = f"Invalid key {KEY} for this route"  # a careless router echoing the key back
    with ScriptedServer(script([{"status": 400, "message": echoed}])) as server:
        adapter = adapter_for(server)
        start = asyncio.run(adapter.start())
        error = chat_error(adapter)
    assert error.kind == "bad_request" and "[redacted]" in str(error)
    assert_no_key(str(error), error.attempts, [a.model_dump_json() for a in error.attempts], start.model_dump_json(),
                  adapter, adapter.recorded_config(), vars(adapter))
    printed = capfd.readouterr()
    assert_no_key(printed.out, printed.err, caplog.text)


@pytest.mark.parametrize("status", [401, 403, 404, 408, 409, 422, 429, 500, 502, 503, 504])
def test_http_errors_map_to_the_same_kinds_as_the_plain_http_adapter(status):
    async def kinds(server):
        plain = OpenAICompatibleAdapter(base_url=server.base_url, model=MODEL, api_key=KEY, max_retries=0)
        errors = []
        for adapter in (plain, adapter_for(server)):
            try:
                await adapter.chat(list(CONVERSATION), TOOLS)
            except AdapterError as error:
                errors.append(error)
        await plain.stop()
        return errors

    with ScriptedServer(script(then={"status": status})) as server:
        plain, router = asyncio.run(kinds(server))
    assert router.kind == plain.kind
    assert [(a.status, a.http_status) for a in router.attempts] == [(a.status, a.http_status) for a in plain.attempts]


def test_leaf_tools_reach_the_router_unchanged_and_no_tools_means_no_tool_choice():
    async def scenario(adapter):
        await adapter.chat(list(CONVERSATION), LEAF_TOOLS)
        await adapter.chat(list(CONVERSATION), [])

    with ScriptedServer(script([{"content": "ok"}])) as server:
        asyncio.run(scenario(adapter_for(server)))
        with_tools, without = server.chat_bodies
    assert with_tools["tools"] == LEAF_TOOLS
    assert not {"tools", "tool_choice", "parallel_tool_calls"} & set(without)


def test_context_window_error_keeps_the_server_message():
    message = "This model's maximum context length is 8192 tokens. However, you requested 9100 tokens."
    with ScriptedServer(script([{"status": 400, "message": message}])) as server:
        error = chat_error(adapter_for(server, max_retries=3))
    assert error.kind == "bad_request" and not error.infrastructure and len(error.attempts) == 1
    assert str(error).endswith(f"HTTP 400: {message}")


def test_deadline_shorter_than_a_delayed_answer():
    with ScriptedServer(script([{"content": "too late", "delay": 10}])) as server:
        adapter = adapter_for(server, max_retries=3)
        asyncio.run(adapter.start())
        error = chat_error(adapter, deadline=time.monotonic() + 2.0)
    assert error.kind == "deadline"
    assert [(a.status, a.usage.total_tokens) for a in error.attempts] == [("cancelled", 0)]


def test_request_timeout_is_retried_then_reported():
    # The first call answers, so connection set-up stays out of the short timeouts that follow.
    async def scenario(server):
        await adapter_for(server).chat(list(CONVERSATION), TOOLS)
        with pytest.raises(AdapterError) as caught:
            await adapter_for(server, request_timeout_sec=0.5, max_retries=1).chat(list(CONVERSATION), TOOLS)
        return caught.value

    with ScriptedServer(script([{"attempts": [{"content": "warm"}, {"hang": True}]}])) as server:
        error = asyncio.run(scenario(server))
    assert error.kind == "timeout" and error.infrastructure
    assert [a.status for a in error.attempts] == ["timeout", "timeout"]


@pytest.mark.parametrize("body", ["<html>502 Bad Gateway</html>",
                                  json.dumps({"id": "x", "object": "chat.completion", "model": MODEL, "choices": []}),
                                  json.dumps({"id": "x", "object": "chat.completion", "model": MODEL,
                                              "choices": [{"index": 0, "finish_reason": "stop"}]})])
def test_unusable_answer_is_bad_response_and_not_retried(body):
    with ScriptedServer(script([{"garbage": body}])) as server:
        error = chat_error(adapter_for(server, max_retries=3))
        sent = len(server.chat_bodies)
    assert error.kind == "bad_response" and [a.status for a in error.attempts] == ["bad_response"] and sent == 1
    assert "unusable answer" in str(error)


def test_unreachable_router_fails_at_start_and_at_chat():
    adapter = adapter_for(None)
    with pytest.raises(AdapterError) as at_start:
        asyncio.run(adapter.start())
    error = chat_error(adapter)
    assert at_start.value.kind == "unreachable" and error.kind == "unreachable"
    assert [a.status for a in error.attempts] == ["connection_error"] and "(connection refused)" in str(error)


def test_wrong_base_url_is_a_configuration_error_at_the_first_call():
    # An endpoint whose /models answers 404 does not list models: it starts (with a warning), and its 404 on
    # the first call is a configuration error, never retried and never a model's miss.
    with ScriptedServer(script([{"content": "never"}])) as server:
        adapter = adapter_for(server, base_url=server.root_url + "/api/v1", max_retries=3)
        start = asyncio.run(adapter.start())
        error = chat_error(adapter)
    assert any("/api/v1/models does not list models" in w for w in start.warnings)
    assert error.kind == "configuration" and error.configuration and not error.infrastructure
    assert [a.http_status for a in error.attempts] == [404] and "check the arm's model" in str(error)


def test_hosted_arm_has_no_metrics_and_no_lease():
    adapter = adapter_for(None)
    assert asyncio.run(adapter.sample_metrics()) is None and asyncio.run(adapter.stop()) is None
