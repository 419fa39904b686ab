"""The router adapter against a real router: litellm's own proxy server (`litellm --config`), routing a
hosted-style model name to the scripted server, with a master key and explicit prices. The adapter talks to it
exactly as to a remote router: base URL and a bearer key from the environment."""

from __future__ import annotations

import asyncio
import os
import shutil
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest
import yaml

from adapters.base import AdapterError, Usage
from adapters.router import RouterAdapter
from adapters.scripted_server import ScriptedServer
from compare.pricing import explicit_cost
from compare.spec import Prices

MASTER_KEY = "sk-leafcost-proxy-master"
INPUT_PER_TOKEN, OUTPUT_PER_TOKEN, CACHE_READ_PER_TOKEN = 1.25e-6, 10e-6, 0.125e-6
USAGE = {"prompt_tokens": 1000, "completion_tokens": 500, "cached_tokens": 200, "reasoning_tokens": 40}


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


@pytest.fixture(scope="module")
def backend():
    script = {"turns": [{"tool_calls": [{"name": "Bash", "arguments": {"command": "ls"}}], "usage": USAGE},
                        {"content": "done", "usage": USAGE}]}
    with ScriptedServer(script) as server:
        yield server


@pytest.fixture(scope="module")
def proxy(backend, tmp_path_factory):
    """litellm's proxy on a free port; its log is kept beside the config for a failing test to show."""
    folder = tmp_path_factory.mktemp("litellm-proxy")
    config = {"model_list": [{"model_name": "hosted-gpt",
                              "litellm_params": {"model": "openai/frognano-4b", "api_base": backend.base_url,
                                                 "api_key": "unused-by-the-backend"},
                              "model_info": {"id": "hosted-gpt-primary", "input_cost_per_token": INPUT_PER_TOKEN,
                                             "output_cost_per_token": OUTPUT_PER_TOKEN,
                                             "cache_read_input_token_cost": CACHE_READ_PER_TOKEN}}],
              "general_settings": {"master_key": MASTER_KEY}}
    (folder / "config.yaml").write_text(yaml.safe_dump(config))
    port = free_port()
    log = open(folder / "proxy.log", "wb")
    litellm = shutil.which("litellm", path=str(Path(sys.executable).parent))
    process = subprocess.Popen([litellm, "--config", str(folder / "config.yaml"), "--host", "127.0.0.1", "--port",
                                str(port)], stdout=log, stderr=subprocess.STDOUT, start_new_session=True,
                               env={**os.environ, "LITELLM_LOCAL_MODEL_COST_MAP": "True"})
    try:
        deadline = time.monotonic() + 120
        while True:
            assert process.poll() is None, (folder / "proxy.log").read_text()[-3000:]
            assert time.monotonic() < deadline, "the proxy did not start within 120 s"
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{port}/health/liveliness", timeout=2) as answer:
                    if answer.status == 200:
                        break
            except OSError:
                time.sleep(0.3)
        yield f"http://127.0.0.1:{port}/v1"
    finally:
        os.killpg(process.pid, 9)
        process.wait()
        log.close()


def test_tokens_and_the_routers_own_cost_come_through_the_real_proxy(proxy, monkeypatch):
    monkeypatch.setenv("LEAFCOST_TEST_ROUTER_KEY", MASTER_KEY)

    async def scenario():
        adapter = RouterAdapter(model="hosted-gpt", base_url=proxy, api_key_env="LEAFCOST_TEST_ROUTER_KEY",
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
    assert MASTER_KEY not in start.model_dump_json() + turn.model_dump_json()


def test_a_wrong_key_is_refused_before_any_episode(proxy, monkeypatch):
    monkeypatch.setenv("LEAFCOST_TEST_ROUTER_KEY", "sk-not-the-master-key")

    async def scenario():
        adapter = RouterAdapter(model="hosted-gpt", base_url=proxy, api_key_env="LEAFCOST_TEST_ROUTER_KEY",
                                sampling={}, request_timeout_sec=30, max_retries=0)
        await adapter.start()

    with pytest.raises(AdapterError) as caught:
        asyncio.run(scenario())
    assert caught.value.kind == "auth" and "LEAFCOST_TEST_ROUTER_KEY" in str(caught.value)
    assert "sk-not-the-master-key" not in str(caught.value)
