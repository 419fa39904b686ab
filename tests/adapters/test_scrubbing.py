"""The one scrubbing rule: configured secrets of any length and URL credentials never leave an adapter, checked
on the rule itself and on real HTTP errors that echo the key (a careless router, a SGLang server) for both the
router and the SGLang adapter; server self-descriptions lose credentials and keep their token-named sizes."""

from __future__ import annotations

import asyncio

import pytest
from support.sglang_fake import ScriptedServer

from adapters import arm_secrets, redact_url, redact_values, scrub, secret_values
from adapters.base import AdapterError
from adapters.router import RouterAdapter
from adapters.scrubbing import url_secrets
from adapters.sglang import SGLangAdapter

KEY_ENV = "LEAFCOST_TEST_ECHO_KEY"
SHORT_KEY = "k7Short"  # 7 characters: the router skipped keys under 8, the SGLang adapter scrubbed none
LONG_KEY = "sekrit-40-chars-router-key-XYZ-0123456789"
CONVERSATION = [{"role": "user", "content": "fix calc.add"}]


def test_scrub_replaces_every_configured_value_whatever_its_length_and_spelling():
    text = ('rejected key k7Short (Authorization: Bearer k7Short); {"key": "p\\"q"} url-encoded: a%2Fb%3Dc')
    cleaned = scrub(text, ["k7Short", 'p"q', "a/b=c"])
    assert "k7Short" not in cleaned and 'p\\"q' not in cleaned and "a%2Fb%3Dc" not in cleaned
    assert cleaned.startswith("rejected key [redacted] (Authorization: Bearer [redacted])")
    assert scrub("a 1-char key x", ["x"]) == "a 1-char key [redacted]"  # any length means any length
    assert scrub("nothing configured", []) == "nothing configured"


def test_scrub_removes_url_credentials_and_bearer_values_it_was_not_told_about():
    text = "GET http://user:hunter2pass@127.0.0.1:1/v1/models?api_key=abc123&model=m failed; Bearer sk-other-key"
    cleaned = scrub(text, [])
    assert "hunter2pass" not in cleaned and "abc123" not in cleaned and "sk-other-key" not in cleaned
    assert "http://[redacted]@127.0.0.1:1/v1/models?api_key=[redacted]&model=m" in cleaned


@pytest.mark.parametrize("url, expected", [
    ("http://user:hunter2pass@127.0.0.1:1/v1?api_key=abc123secretvalue",
     "http://[redacted]@127.0.0.1:1/v1?api_key=[redacted]"),
    ("https://ghp_tokenonly@router.example/v1", "https://[redacted]@router.example/v1"),
    ("https://r.example/v1?key=a&token=b&access_token=c&sig=d&X-Amz-Signature=e&model=m&max_tokens=9",
     "https://r.example/v1?key=[redacted]&token=[redacted]&access_token=[redacted]&sig=[redacted]"
     "&X-Amz-Signature=[redacted]&model=m&max_tokens=9"),
    ("https://openrouter.ai/api/v1", "https://openrouter.ai/api/v1"),
])
def test_redact_url_keeps_the_parameter_names_and_drops_the_values(url, expected):
    assert redact_url(url) == expected


def test_url_secrets_and_arm_secrets_name_what_scrub_must_remove(monkeypatch):
    assert url_secrets("http://user:p%40ss@h/v1?api_key=abc&model=m") == ["p%40ss", "p@ss", "abc"]
    assert url_secrets("https://tok3n@h/v1") == ["tok3n"]  # a user part without a password is the token
    assert url_secrets(None) == [] and url_secrets("http://h/v1?model=m") == []
    monkeypatch.setenv(KEY_ENV, "k7Short")
    monkeypatch.setenv("ROUTER_API_KEY", "sk-default-order")

    class Arm:  # the shape of a run-spec arm
        adapter = "sglang"
        api_key_env = KEY_ENV
        base_url = "http://u:pw12@h/v1"

    assert arm_secrets(Arm()) == ["k7Short", "pw12"]
    Arm.adapter, Arm.api_key_env = "router", None  # a router arm without a variable reads the default order
    assert "sk-default-order" in arm_secrets(Arm())
    assert secret_values(api_key_env="LEAFCOST_TEST_UNSET_VARIABLE") == []


def test_server_info_loses_credentials_and_keeps_token_named_sizes():
    info = {"api_key": "sk-server-secret", "admin_api_key": "short", "hf_token": "hf_abc",
            "max_total_tokens": 1048576, "max_prefill_tokens": 16384, "max_total_num_tokens": 9000,
            "tokenizer_path": "microsoft/FrogNano", "tokenizer_mode": "auto", "skip_tokenizer_init": False,
            "internal_states": [{"memory_usage": {"token_capacity": 4096}}], "eos_token": "<|im_end|>",
            "api_key_env": "SGLANG_KEY", "download_dir": "https://u:pw@mirror.example/models",
            "note": "launched with Bearer sk-leaked-value-1234", "echo": "configured k7Short here"}
    redacted = redact_values(info, ["k7Short"])
    for kept in ("max_total_tokens", "max_prefill_tokens", "max_total_num_tokens", "tokenizer_path",
                 "tokenizer_mode", "skip_tokenizer_init", "eos_token", "api_key_env"):
        assert redacted[kept] == info[kept], kept
    assert redacted["internal_states"][0]["memory_usage"]["token_capacity"] == 4096
    assert redacted["api_key"] == redacted["admin_api_key"] == redacted["hf_token"] == "[redacted]"
    assert redacted["download_dir"] == "https://[redacted]@mirror.example/models"
    assert redacted["note"] == "[redacted]" and redacted["echo"] == "configured [redacted] here"
    assert redact_values({"api_key": None}) == {"api_key": None}  # nothing to hide stays as it was


def _echo_script(key: str, model: str) -> dict:
    echoed = f"bad request from key {key} (Authorization: Bearer {key})"
    return {"model": model, "auth": f"Bearer {key}", "turns": [{"status": 400, "message": echoed}]}


def _assert_absent(key: str, error: AdapterError) -> None:
    assert error.kind == "bad_request" and error.attempts and error.attempts[-1].http_status == 400
    assert "bad request from key [redacted]" in str(error)
    for text in (str(error), repr(error.attempts), *(a.model_dump_json() for a in error.attempts)):
        assert key not in text


@pytest.mark.parametrize("key", [SHORT_KEY, LONG_KEY])
def test_the_router_adapter_never_returns_an_echoed_key(key, monkeypatch):
    monkeypatch.setenv(KEY_ENV, key)

    async def scenario(server):
        adapter = RouterAdapter(model="hosted-gpt", base_url=server.base_url, api_key_env=KEY_ENV,
                                request_timeout_sec=30, max_retries=0)
        start = await adapter.start()
        with pytest.raises(AdapterError) as caught:
            await adapter.chat(list(CONVERSATION), [])
        return start, caught.value

    with ScriptedServer(_echo_script(key, "hosted-gpt")) as server:
        start, error = asyncio.run(scenario(server))
    _assert_absent(key, error)
    assert key not in start.model_dump_json()


@pytest.mark.parametrize("key", [SHORT_KEY, LONG_KEY])
def test_the_sglang_adapter_never_returns_an_echoed_key(key, monkeypatch):
    monkeypatch.setenv(KEY_ENV, key)

    async def scenario(server):
        adapter = SGLangAdapter(base_url=server.base_url, model="frognano-4b", sampling={}, gpu_type="H200",
                                gpu_count=1, usd_per_gpu_hour=3.5, api_key_env=KEY_ENV, max_retries=0)
        try:
            start = await adapter.start()
            with pytest.raises(AdapterError) as caught:
                await adapter.chat(list(CONVERSATION), [])
            return start, caught.value
        finally:
            await adapter.stop()

    with ScriptedServer(_echo_script(key, "frognano-4b")) as server:
        start, error = asyncio.run(scenario(server))
    _assert_absent(key, error)
    assert key not in start.model_dump_json()  # SGLang's server info lists its own --api-key
    assert start.server_info["api_key"] == "[redacted]"
    assert start.server_info["max_prefill_tokens"] == 16384 and start.server_info["tokenizer_path"] == "frognano-4b"


def test_credentials_in_base_url_never_reach_the_arm_start_or_errors(monkeypatch):
    monkeypatch.setenv(KEY_ENV, LONG_KEY)

    def adapters(url: str) -> list:
        return [RouterAdapter(model="frognano-4b", base_url=url, api_key_env=KEY_ENV, max_retries=0),
                SGLangAdapter(base_url=url, model="frognano-4b", sampling={}, gpu_type="H200", gpu_count=1,
                              usd_per_gpu_hour=3.5, max_retries=0)]

    async def outcomes(url: str) -> list:
        results = []
        for adapter in adapters(url):
            try:
                results.append(await adapter.start())
            except AdapterError as error:
                results.append(error)
            finally:
                await adapter.stop()
        return results

    with ScriptedServer({"turns": []}) as server:
        reachable = asyncio.run(outcomes(server.base_url.replace("http://", "http://user:hunter2pass@")))
    # The review's repro: an unreachable URL whose error text quotes the URL.
    unreachable = asyncio.run(outcomes("http://user:hunter2pass@127.0.0.1:1/v1?api_key=abc123secretvalue"))
    assert not any(isinstance(r, AdapterError) for r in reachable)
    assert all(isinstance(r, AdapterError) and r.kind == "unreachable" for r in unreachable)
    for result in reachable + unreachable:
        if isinstance(result, AdapterError):
            text = f"{result} {result.attempts!r}"
        else:
            text = result.model_dump_json()
            assert result.endpoint.startswith("http://[redacted]@127.0.0.1:")
        assert "hunter2pass" not in text and "abc123secretvalue" not in text and LONG_KEY not in text
