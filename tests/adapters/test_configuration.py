"""A misconfiguration is never a model's miss: refused keys, unknown models and wrong URLs are `configuration`
errors (never retried, not infrastructure) for the router and the SGLang adapter over real HTTP, and an arm whose
model the endpoint does not list is refused at start unless it allows unlisted names."""

from __future__ import annotations

import asyncio

import pytest
from support.sglang_fake import ScriptedServer

from adapters.base import AdapterError
from adapters.router import RouterAdapter
from adapters.sglang import SGLangAdapter

KEY_ENV = "LEAFCOST_TEST_CONFIG_KEY"
KEY = "sk-leafcost-config-test-0001"
CONVERSATION = [{"role": "user", "content": "fix calc.add"}]
# What routers answer for a model name they do not serve (litellm's proxy, OpenRouter, OpenAI/vLLM).
UNKNOWN_MODEL_ANSWERS = [
    (400, "/chat/completions: Invalid model name passed in model=gpt-x. Call `/v1/models` to view available "
          "models for your key."),
    (400, "gpt-x is not a valid model ID"),
    (404, "The model `gpt-x` does not exist or you do not have access to it."),
    (401, "key not allowed to access model. This key can only access models=['hosted-gpt']."),
    (403, "this key may not use this model"),
]


@pytest.fixture(autouse=True)
def key(monkeypatch):
    monkeypatch.setenv(KEY_ENV, KEY)


def router(server, **options) -> RouterAdapter:
    return RouterAdapter(**{"model": "frognano-4b", "base_url": _url(server), "api_key_env": KEY_ENV,
                            "request_timeout_sec": 30, "max_retries": 3, **options})


def sglang(server, **options) -> SGLangAdapter:
    return SGLangAdapter(**{"base_url": _url(server), "model": "frognano-4b", "sampling": {}, "gpu_type": "H200",
                            "gpu_count": 1, "usd_per_gpu_hour": 3.5, "api_key_env": KEY_ENV, "max_retries": 3,
                            **options})


def _url(server) -> str:
    return server.base_url if server is not None else "http://127.0.0.1:9/v1"


async def _chat_error(adapter) -> AdapterError:
    try:
        with pytest.raises(AdapterError) as caught:
            await adapter.chat(list(CONVERSATION), [])
        return caught.value
    finally:
        await adapter.stop()


async def _start_error(adapter) -> AdapterError:
    try:
        with pytest.raises(AdapterError) as caught:
            await adapter.start()
        return caught.value
    finally:
        await adapter.stop()


@pytest.mark.parametrize("make", [router, sglang], ids=["router", "sglang"])
@pytest.mark.parametrize("status, message", UNKNOWN_MODEL_ANSWERS)
def test_an_unknown_model_or_refused_key_at_a_call_is_a_configuration_error_never_retried(make, status, message):
    with ScriptedServer({"auth": f"Bearer {KEY}", "turns": [{"status": status, "message": message}]}) as server:
        error = asyncio.run(_chat_error(make(server)))
        sent = len(server.chat_bodies)
    assert error.kind == "configuration" and error.configuration and not error.infrastructure
    assert sent == 1 and [a.http_status for a in error.attempts] == [status]


@pytest.mark.parametrize("make", [router, sglang], ids=["router", "sglang"])
def test_other_bad_requests_stay_bad_requests(make):
    message = "This model's maximum context length is 8192 tokens. However, you requested 9100 tokens."
    with ScriptedServer({"auth": f"Bearer {KEY}", "turns": [{"status": 400, "message": message}]}) as server:
        error = asyncio.run(_chat_error(make(server)))
    assert error.kind == "bad_request" and not error.configuration


@pytest.mark.parametrize("make", [router, sglang], ids=["router", "sglang"])
def test_start_refuses_a_model_the_endpoint_does_not_list(make):
    with ScriptedServer({"model": "served-a", "auth": f"Bearer {KEY}", "turns": []}) as server:
        error = asyncio.run(_start_error(make(server, model="gpt-typo")))
    assert error.kind == "configuration" and error.configuration
    assert "model 'gpt-typo' is not among the 1 models the endpoint lists (first few: served-a)" in str(error)
    assert "set allow_unlisted_model: true for routers that route unlisted names" in str(error)


@pytest.mark.parametrize("make", [router, sglang], ids=["router", "sglang"])
def test_allow_unlisted_model_starts_with_a_warning(make):
    async def scenario(server):
        adapter = make(server, model="gpt-unlisted", allow_unlisted_model=True)
        try:
            return await adapter.start()
        finally:
            await adapter.stop()

    with ScriptedServer({"model": "served-a", "auth": f"Bearer {KEY}", "turns": []}) as server:
        start = asyncio.run(scenario(server))
    assert any("'gpt-unlisted' is not among the 1 models" in w and "allow_unlisted_model" in w
               for w in start.warnings)
    assert start.config["allow_unlisted_model"] is True


@pytest.mark.parametrize("make", [router, sglang], ids=["router", "sglang"])
def test_a_refused_key_at_start_is_a_configuration_error(make, monkeypatch):
    monkeypatch.setenv(KEY_ENV, "sk-not-the-right-one")
    with ScriptedServer({"auth": f"Bearer {KEY}", "turns": []}) as server:
        error = asyncio.run(_start_error(make(server)))
    assert error.kind == "configuration" and "api_key_env" in str(error)
    assert "sk-not-the-right-one" not in str(error)


def test_a_missing_key_variable_is_a_configuration_error(monkeypatch):
    monkeypatch.delenv(KEY_ENV)
    for build in (lambda: router(None), lambda: sglang(None)):
        with pytest.raises(AdapterError) as caught:
            build()
        assert caught.value.kind == "configuration" and f"set {KEY_ENV}" in str(caught.value)


def test_an_endpoint_that_does_not_list_models_is_let_through_by_the_sglang_adapter():
    async def scenario(server):
        adapter = sglang(server, base_url=server.root_url + "/other/v1", api_key_env=None)
        try:
            return await adapter.start()
        finally:
            await adapter.stop()

    with ScriptedServer({"turns": []}) as server:
        start = asyncio.run(scenario(server))
    assert any("does not list models" in w for w in start.warnings)
