"""The router adapter against a real router: litellm's own proxy server (`litellm --config`), routing a
hosted-style model name to the scripted server, with a master key and explicit prices. The adapter talks to it
exactly as to a remote router: base URL and a bearer key from the environment."""

from __future__ import annotations

import asyncio

import pytest
from support.sglang_fake import ScriptedServer

from adapters.base import AdapterError, Usage
from adapters.router import RouterAdapter
from compare.pricing import explicit_cost
from compare.spec import Prices

pytestmark = pytest.mark.slow  # end to end: make test-fast leaves it out

USAGE = {"prompt_tokens": 1000, "completion_tokens": 500, "cached_tokens": 200, "reasoning_tokens": 40}


@pytest.fixture(scope="module")
def proxy(litellm_proxy):
    script = {"turns": [{"tool_calls": [{"name": "Bash", "arguments": {"command": "ls"}}], "usage": USAGE},
                        {"content": "done", "usage": USAGE}]}
    with ScriptedServer(script) as backend:
        yield litellm_proxy(backend.base_url, input_cost=1.25e-6, output_cost=10e-6, cache_read_cost=0.125e-6)


def test_tokens_and_the_routers_own_cost_come_through_the_real_proxy(proxy, monkeypatch):
    monkeypatch.setenv("LEAFCOST_TEST_ROUTER_KEY", proxy.master_key)

    async def scenario():
        adapter = RouterAdapter(model="hosted-gpt", base_url=proxy.base_url, api_key_env="LEAFCOST_TEST_ROUTER_KEY",
                                sampling={"temperature": 0.6}, request_timeout_sec=60, max_retries=0)
        start = await adapter.start()
        turn = await adapter.chat([{"role": "user", "content": "fix the bug"}], [])
        return start, turn

    start, turn = asyncio.run(scenario())
    assert start.served_model == "hosted-gpt"
    assert turn.tool_calls[0].name == "Bash"
    usage = turn.usage
    assert (usage.prompt_tokens, usage.completion_tokens, usage.cached_tokens) == (1000, 500, 200)
    attempt = turn.attempts[-1]
    assert attempt.router_retries == 0 and attempt.router_fallbacks == 0
    ours = explicit_cost(Usage(prompt_tokens=1000, completion_tokens=500, cached_tokens=200),
                         Prices(input=1.25, output=10.0, cached_input=0.125))
    assert attempt.router_cost_usd == pytest.approx(ours, rel=1e-9)  # same prices, same number
    assert proxy.master_key not in start.model_dump_json() + turn.model_dump_json()


def test_a_wrong_key_is_refused_before_any_episode(proxy, monkeypatch):
    monkeypatch.setenv("LEAFCOST_TEST_ROUTER_KEY", "sk-not-the-master-key")

    async def scenario():
        adapter = RouterAdapter(model="hosted-gpt", base_url=proxy.base_url, api_key_env="LEAFCOST_TEST_ROUTER_KEY",
                                sampling={}, request_timeout_sec=30, max_retries=0)
        await adapter.start()

    with pytest.raises(AdapterError) as caught:
        asyncio.run(scenario())
    assert caught.value.kind == "configuration" and "LEAFCOST_TEST_ROUTER_KEY" in str(caught.value)
    assert "sk-not-the-master-key" not in str(caught.value)


def test_a_model_the_real_proxy_does_not_route_is_a_configuration_error(proxy, monkeypatch):
    """litellm's proxy lists `hosted-gpt` only: another name is refused at start, and an arm that allows unlisted
    names gets the proxy's HTTP 400 "Invalid model name passed in model=..." as a configuration error, once."""
    monkeypatch.setenv("LEAFCOST_TEST_ROUTER_KEY", proxy.master_key)

    def adapter(**options) -> RouterAdapter:
        return RouterAdapter(model="no-such-model", base_url=proxy.base_url, api_key_env="LEAFCOST_TEST_ROUTER_KEY",
                             sampling={}, request_timeout_sec=60, max_retries=3, **options)

    async def scenario():
        with pytest.raises(AdapterError) as at_start:
            await adapter().start()
        allowing = adapter(allow_unlisted_model=True)
        start = await allowing.start()
        with pytest.raises(AdapterError) as at_chat:
            await allowing.chat([{"role": "user", "content": "fix the bug"}], [])
        return at_start.value, start, at_chat.value

    at_start, start, at_chat = asyncio.run(scenario())
    assert at_start.kind == "configuration" and "'no-such-model' is not among the" in str(at_start)
    assert "hosted-gpt" in str(at_start) and "allow_unlisted_model" in str(at_start)
    assert any("no-such-model" in w for w in start.warnings)
    assert at_chat.kind == "configuration" and at_chat.configuration and not at_chat.infrastructure
    assert [a.http_status for a in at_chat.attempts] == [400] and "Invalid model name" in str(at_chat)
    for text in (str(at_start), str(at_chat), repr(at_chat.attempts), start.model_dump_json()):
        assert proxy.master_key not in text
