"""The fake SGLang server (tests/support/sglang_fake), driven over real HTTP: each kind of turn, conversation
counting, auth, errors, usage, SGLang's extra endpoints and metrics, streaming, the subprocess and command-line
modes."""

from __future__ import annotations

import json
import os
import re
import socket
import subprocess
import sys
import time
from pathlib import Path

import httpx
import pytest
from prometheus_client.parser import text_string_to_metric_families
from pydantic import ValidationError

from support.sglang_fake import Script, ScriptedServer

TESTS = Path(__file__).resolve().parents[1]
# The command line finds the `support` package the way pytest does: `tests/` on the path.
CLI_ENV = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [str(TESTS), os.environ.get("PYTHONPATH")]))}
USER = [{"role": "system", "content": "You are Leaf."}, {"role": "user", "content": "Fix calc.add."}]
BASH_LS = {"name": "Bash", "arguments": {"command": "ls"}}


def chat(server: ScriptedServer, messages: list[dict], **extra) -> httpx.Response:
    body = {"model": "frognano-4b", "messages": messages, **extra}
    return httpx.post(f"{server.base_url}/chat/completions", json=body, timeout=10)


def message_of(response: httpx.Response) -> dict:
    assert response.status_code == 200, response.text
    return response.json()["choices"][0]["message"]


def follow_up(messages: list[dict], response: httpx.Response, observation: str = "ok") -> list[dict]:
    """The next request of a conversation: the answer sent back, plus a tool result per tool call."""
    message = message_of(response)
    out = [*messages, message]
    for call in message.get("tool_calls") or []:
        out.append({"role": "tool", "tool_call_id": call["id"], "content": observation})
    return out


def metrics(server: ScriptedServer) -> dict[str, float]:
    text = httpx.get(f"{server.root_url}/metrics", timeout=10).text
    values: dict[str, float] = {}
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            extra = [f"{k}={v}" for k, v in sorted(sample.labels.items()) if k in ("mode", "category", "le")]
            values[sample.name + ("{" + ",".join(extra) + "}" if extra else "")] = sample.value
    return values


def wait_until(condition, what: str, timeout: float = 10.0) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError(f"never happened: {what}")
        time.sleep(0.02)


# --- turns ---------------------------------------------------------------------------------------------------

def test_tool_call_turn_speaks_sglang_shape():
    with ScriptedServer({"turns": [{"tool_calls": [BASH_LS], "reasoning": "list first"}]}) as server:
        response = chat(server, USER)
    payload = response.json()
    assert payload["object"] == "chat.completion" and payload["id"].startswith("chatcmpl-")
    assert payload["model"] == "frognano-4b"  # SGLang echoes the request's model
    choice = payload["choices"][0]
    assert choice["finish_reason"] == "tool_calls" and choice["matched_stop"] is None
    message = choice["message"]
    assert message["role"] == "assistant" and message["content"] == ""
    assert message["reasoning_content"] == "list first"
    [call] = message["tool_calls"]
    assert re.fullmatch(r"call_[0-9a-f]{24}", call["id"])
    assert call["type"] == "function" and call["index"] == 0
    assert call["function"]["name"] == "Bash"
    assert json.loads(call["function"]["arguments"]) == {"command": "ls"}


def test_malformed_arguments_are_sent_verbatim():
    turn = {"tool_calls": [{"name": "Bash", "arguments": '{"command": '}]}
    with ScriptedServer({"turns": [turn]}) as server:
        [call] = message_of(chat(server, USER))["tool_calls"]
    assert call["function"]["arguments"] == '{"command": '


def test_content_turns_and_finish_reasons():
    script = {"turns": [{"content": "partial", "finish_reason": "length"}, {"content": "final answer"}]}
    with ScriptedServer(script) as server:
        first = chat(server, USER)
        second = chat(server, follow_up(USER, first))
    assert first.json()["choices"][0]["finish_reason"] == "length"
    assert first.json()["choices"][0]["matched_stop"] is None
    assert second.json()["choices"][0]["finish_reason"] == "stop"
    assert second.json()["choices"][0]["message"] == {"role": "assistant", "content": "final answer",
                                                       "reasoning_content": None, "tool_calls": None}


def test_two_interleaved_conversations_follow_the_script_by_their_own_step():
    script = {"turns": [{"tool_calls": [BASH_LS]}, {"tool_calls": [{"name": "Read", "arguments": {"path": "a"}}]},
                        {"content": "done"}]}
    with ScriptedServer(script) as server:
        a0 = chat(server, USER)
        b0 = chat(server, [{"role": "user", "content": "another task"}])
        a1 = chat(server, follow_up(USER, a0))
        a2 = chat(server, follow_up(follow_up(USER, a0), a1))
        b1 = chat(server, follow_up([{"role": "user", "content": "another task"}], b0))
    assert [message_of(r)["tool_calls"][0]["function"]["name"] for r in (a0, b0, a1, b1)] == \
        ["Bash", "Bash", "Read", "Read"]
    assert message_of(a2)["content"] == "done"


def test_after_the_last_turn_then_applies():
    with ScriptedServer({"turns": [{"tool_calls": [BASH_LS]}]}) as server:  # default: repeat the last turn
        again = chat(server, follow_up(USER, chat(server, USER)))
        assert message_of(again)["tool_calls"][0]["function"]["name"] == "Bash"
    with ScriptedServer({"turns": [{"tool_calls": [BASH_LS]}], "then": {"content": "done"}}) as server:
        assert message_of(chat(server, follow_up(USER, chat(server, USER))))["content"] == "done"
    with ScriptedServer({"turns": [{"tool_calls": [BASH_LS]}], "then": {"status": 500}}) as server:
        assert chat(server, follow_up(USER, chat(server, USER))).status_code == 500


def test_attempts_answer_a_retried_request_differently():
    script = {"turns": [{"attempts": [{"status": 429, "retry_after": 1}, {"content": "after retry"}]}]}
    with ScriptedServer(script) as server:
        first, retry = chat(server, USER), chat(server, USER)
        other = chat(server, [{"role": "user", "content": "a different conversation"}])
    assert first.status_code == 429
    assert message_of(retry)["content"] == "after retry"
    assert other.status_code == 429  # its own first attempt


def test_garbage_and_flood():
    with ScriptedServer({"turns": [{"garbage": "not json at all"}]}) as server:
        response = chat(server, USER)
    assert response.status_code == 200 and response.text == "not json at all"
    with pytest.raises(json.JSONDecodeError):
        response.json()
    with ScriptedServer({"turns": [{"flood_chars": 5_000_000}]}) as server:
        flood = chat(server, USER)
    assert len(message_of(flood)["content"]) == 5_000_000
    assert flood.json()["choices"][0]["finish_reason"] == "length"
    assert flood.json()["usage"]["completion_tokens"] >= 1_250_000


def test_misconfigured_parser_signatures_are_sent_literally():
    raw_call = "<tool_call>\n<function=Bash>\n<parameter=command>\nls\n</parameter>\n</function>\n</tool_call>"
    script = {"turns": [{"content": raw_call, "finish_reason": "tool_calls"}, {"content": None, "reasoning": raw_call},
                        {"content": "thinking...</think>answer"}]}
    with ScriptedServer(script) as server:
        first = chat(server, USER)
        second = chat(server, follow_up(USER, first))
        third = chat(server, follow_up(follow_up(USER, first), second))
    assert first.json()["choices"][0]["finish_reason"] == "tool_calls"
    assert message_of(first)["content"] == raw_call and message_of(first)["tool_calls"] is None
    assert message_of(second)["content"] is None and message_of(second)["reasoning_content"] == raw_call
    assert message_of(third)["content"] == "thinking...</think>answer"


def test_script_kinds_are_validated():
    with pytest.raises(ValidationError, match="status, garbage or hang"):
        Script.model_validate({"turns": [{"status": 500, "garbage": "x"}]})
    with pytest.raises(ValidationError, match="takes no other fields"):
        Script.model_validate({"turns": [{"attempts": [{"content": "a"}], "content": "b"}]})
    with pytest.raises(ValidationError):
        Script.model_validate({"turns": [{"contnet": "typo"}]})


# --- errors, auth, timeouts ----------------------------------------------------------------------------------

def test_rate_limit_with_retry_after_and_openai_error_body():
    with ScriptedServer({"turns": [{"status": 429, "retry_after": 1, "message": "slow down"}]}) as server:
        response = chat(server, USER)
    assert response.status_code == 429
    assert response.headers["retry-after"] == "1"
    assert response.json() == {"error": {"message": "slow down", "type": "rate_limit_error", "param": None,
                                         "code": "rate_limit_exceeded"}}


@pytest.mark.parametrize("status", [500, 503])
def test_server_errors_have_error_bodies(status):
    with ScriptedServer({"turns": [{"status": status}]}) as server:
        response = chat(server, USER)
    assert response.status_code == status
    assert set(response.json()["error"]) == {"message", "type", "param", "code"}


def test_sglang_error_style_is_flat():
    with ScriptedServer({"turns": [{"status": 503}], "error_style": "sglang"}) as server:
        body = chat(server, USER).json()
    assert body == {"object": "error", "message": "scripted 503 Service Unavailable", "type": "Service Unavailable",
                    "param": None, "code": 503}


def test_auth_rejects_other_keys_but_not_health_or_metrics():
    with ScriptedServer({"turns": [{"content": "hi"}], "auth": "Bearer secret"}) as server:
        wrong = httpx.post(f"{server.base_url}/chat/completions", json={"messages": USER},
                           headers={"Authorization": "Bearer nope"})
        missing = httpx.get(f"{server.base_url}/models")
        right = httpx.post(f"{server.base_url}/chat/completions", json={"messages": USER},
                           headers={"Authorization": "Bearer secret"})
        health = httpx.get(f"{server.root_url}/health")
        scrape = httpx.get(f"{server.root_url}/metrics")
        sent = [r.headers.get("authorization") for r in server.requests]
    assert wrong.status_code == 401 and wrong.json()["error"]["type"] == "authentication_error"
    assert missing.status_code == 401
    assert right.status_code == 200
    assert health.status_code == 200 and scrape.status_code == 200
    assert sent[:3] == ["Bearer nope", None, "Bearer secret"]


def test_delay_then_answer_and_client_timeout():
    with ScriptedServer({"turns": [{"delay": 0.2, "content": "late"}]}) as server:
        assert message_of(chat(server, USER))["content"] == "late"
    with ScriptedServer({"turns": [{"delay": 30.0, "content": "too late"}]}) as server:
        with pytest.raises(httpx.ReadTimeout):
            httpx.post(f"{server.base_url}/chat/completions", json={"messages": USER}, timeout=0.3)


def test_hang_holds_the_request_until_the_client_leaves():
    with ScriptedServer({"turns": [{"hang": True}]}) as server:
        with pytest.raises(httpx.ReadTimeout):
            httpx.post(f"{server.base_url}/chat/completions", json={"messages": USER}, timeout=0.3)
        wait_until(lambda: server.stats()["in_flight"] == 0, "the hung request ends with its connection")

        body = json.dumps({"messages": USER}).encode()
        client = socket.create_connection(("127.0.0.1", server.port))
        client.sendall(b"POST /v1/chat/completions HTTP/1.1\r\nhost: x\r\ncontent-type: application/json\r\n"
                       b"content-length: %d\r\n\r\n%s" % (len(body), body))
        wait_until(lambda: metrics(server)["sglang:num_running_reqs"] == 1, "the hanging request is running")
        client.close()
        wait_until(lambda: metrics(server)["sglang:num_running_reqs"] == 0, "the request ends on disconnect")


# --- usage and headers ---------------------------------------------------------------------------------------

def test_default_usage_is_computed_and_consistent():
    with ScriptedServer({"turns": [{"content": "an answer of some length", "reasoning": "thinking " * 10}]}) as server:
        usage = chat(server, USER).json()["usage"]
    assert usage["prompt_tokens"] > 0 and usage["completion_tokens"] > 0
    assert usage["total_tokens"] == usage["prompt_tokens"] + usage["completion_tokens"]
    assert usage["prompt_tokens_details"] is None  # nothing cached in a fresh server
    assert 0 < usage["reasoning_tokens"] <= usage["completion_tokens"]
    assert usage["completion_tokens_details"] == {"reasoning_tokens": usage["reasoning_tokens"]}


def test_usage_override_is_emitted_in_both_styles_with_cost_and_headers():
    turn = {"content": "x", "usage": {"prompt_tokens": 100, "completion_tokens": 20, "cached_tokens": 60,
                                      "reasoning_tokens": 12},
            "cost": 0.0012, "headers": {"x-litellm-response-cost": "0.0012"}}
    with ScriptedServer({"turns": [turn]}) as server:
        response = chat(server, USER)
    assert response.headers["x-litellm-response-cost"] == "0.0012"
    assert response.json()["usage"] == {
        "prompt_tokens": 100, "total_tokens": 120, "completion_tokens": 20,
        "prompt_tokens_details": {"cached_tokens": 60}, "reasoning_tokens": 12,
        "completion_tokens_details": {"reasoning_tokens": 12}, "cost": 0.0012}


def test_prefix_cache_reports_cached_tokens_for_a_growing_conversation():
    script = {"turns": [{"tool_calls": [BASH_LS]}, {"content": "done"}]}
    with ScriptedServer(script) as server:
        first = chat(server, USER)
        second = chat(server, follow_up(USER, first, observation="calc.py\n" * 50))
    cached = second.json()["usage"]["prompt_tokens_details"]["cached_tokens"]
    assert 0 < cached < second.json()["usage"]["prompt_tokens"]
    with ScriptedServer({**script, "server_args": {"enable_cache_report": False}}) as server:
        second = chat(server, follow_up(USER, chat(server, USER)))
    assert second.json()["usage"]["prompt_tokens_details"] is None


def test_requests_record_what_the_client_sent():
    script = {"turns": [{"tool_calls": [BASH_LS], "reasoning": "plan"}, {"content": "done"}]}
    with ScriptedServer(script) as server:
        first = chat(server, USER, top_k=20, chat_template_kwargs={"enable_thinking": True})
        chat(server, follow_up(USER, first))
        bodies = server.chat_bodies
    assert bodies[0]["top_k"] == 20 and bodies[0]["chat_template_kwargs"] == {"enable_thinking": True}
    sent_back = [m for m in bodies[1]["messages"] if m["role"] == "assistant"]
    assert sent_back[0]["reasoning_content"] == "plan"


def test_openai_client_parses_the_answers():
    openai = pytest.importorskip("openai")
    turn = {"tool_calls": [BASH_LS], "usage": {"prompt_tokens": 50, "completion_tokens": 10, "cached_tokens": 30,
                                               "reasoning_tokens": 4}}
    with ScriptedServer({"turns": [turn], "auth": "Bearer secret"}) as server:
        client = openai.OpenAI(base_url=server.base_url, api_key="secret", max_retries=0)
        completion = client.chat.completions.create(model="frognano-4b", messages=USER)
    call = completion.choices[0].message.tool_calls[0]
    assert call.function.name == "Bash" and json.loads(call.function.arguments) == {"command": "ls"}
    assert completion.usage.prompt_tokens_details.cached_tokens == 30
    assert completion.usage.completion_tokens_details.reasoning_tokens == 4


# --- streaming -----------------------------------------------------------------------------------------------

def sse_events(text: str) -> list:
    data = [line[len("data: "):] for line in text.split("\n\n") if line.startswith("data: ")]
    assert data[-1] == "[DONE]"
    return [json.loads(item) for item in data[:-1]]


def test_streaming_sends_chunks_then_usage_then_done():
    with ScriptedServer({"turns": [{"tool_calls": [BASH_LS], "reasoning": "hmm", "content": "let me look"}]}) as s:
        response = chat(s, USER, stream=True, stream_options={"include_usage": True})
        plain = chat(s, [{"role": "user", "content": "again"}], stream=True)
    assert response.headers["content-type"].startswith("text/event-stream")
    events = sse_events(response.text)
    deltas = [event["choices"][0]["delta"] for event in events if event["choices"]]
    assert deltas[0]["role"] == "assistant"
    assert "".join(d["content"] or "" for d in deltas) == "let me look"
    assert "".join(d["reasoning_content"] or "" for d in deltas) == "hmm"
    [call] = [c for d in deltas for c in d["tool_calls"] or []]
    assert call["function"]["name"] == "Bash"
    assert [e["choices"][0]["finish_reason"] for e in events if e["choices"]][-1] == "tool_calls"
    assert events[-1]["choices"] == [] and events[-1]["usage"]["completion_tokens"] > 0
    assert all(event["usage"] is None for event in sse_events(plain.text))


# --- SGLang's other endpoints --------------------------------------------------------------------------------

def test_models_health_and_model_info():
    script = {"model": "microsoft/FrogNano-4B-2609", "served_model_name": "frognano-4b",
              "server_args": {"context_length": 65536}}
    with ScriptedServer(script) as server:
        models = httpx.get(f"{server.base_url}/models").json()
        unknown = httpx.get(f"{server.base_url}/models/gpt-5")
        health = httpx.get(f"{server.root_url}/health")
        health_generate = httpx.get(f"{server.root_url}/health_generate")
        info = httpx.get(f"{server.root_url}/get_model_info").json()
    assert models["object"] == "list"
    assert models["data"][0]["id"] == "frognano-4b" and models["data"][0]["max_model_len"] == 65536
    assert unknown.status_code == 404 and unknown.json()["error"]["code"] == "model_not_found"
    assert health.status_code == 200 and health.content == b""
    assert health_generate.status_code == 200
    assert info["model_path"] == "microsoft/FrogNano-4B-2609" and info["is_generation"] is True
    with ScriptedServer({"health_status": 503}) as server:
        assert httpx.get(f"{server.root_url}/health").status_code == 503


def test_server_info_reflects_the_script():
    with ScriptedServer({"server_args": {"tool_call_parser": None, "tp_size": 2}, "version": "0.5.5"}) as server:
        info = httpx.get(f"{server.root_url}/get_server_info").json()
    assert info["tool_call_parser"] is None  # a launch that forgot --tool-call-parser
    assert info["reasoning_parser"] == "qwen3" and info["context_length"] == 131072
    assert info["tp_size"] == 2 and info["version"] == "0.5.5"
    assert info["port"] == server.port and isinstance(info["internal_states"], list)


def test_metrics_parse_and_grow_with_requests():
    turn = {"content": "x", "usage": {"prompt_tokens": 100, "completion_tokens": 20, "cached_tokens": 60}}
    with ScriptedServer({"turns": [turn], "served_model_name": "frognano-4b"}) as server:
        before = metrics(server)
        chat(server, USER)
        chat(server, [{"role": "user", "content": "another"}])
        after = metrics(server)
        text = httpx.get(f"{server.root_url}/metrics").text
    assert 'model_name="frognano-4b"' in text
    assert before["sglang:num_requests_total"] == 0
    assert after["sglang:num_requests_total"] == 2
    assert after["sglang:prompt_tokens_total"] == 200
    assert after["sglang:generation_tokens_total"] == 40
    assert after["sglang:cached_tokens_total"] == 120
    assert after["sglang:realtime_tokens_total{mode=prefill_compute}"] == 80
    assert after["sglang:realtime_tokens_total{mode=prefill_cache}"] == 120
    assert after["sglang:realtime_tokens_total{mode=decode}"] == 40
    assert after["sglang:gpu_execution_seconds_total{category=forward_extend}"] == pytest.approx(80 * 1e-5)
    assert after["sglang:gpu_execution_seconds_total{category=forward_decode}"] == pytest.approx(40 * 1e-3)
    assert after["sglang:e2e_request_latency_seconds_count"] == 2
    assert after["sglang:time_to_first_token_seconds_count"] == 2
    assert after["sglang:cache_hit_rate"] == pytest.approx(0.6)
    for gauge in ("num_running_reqs", "num_queue_reqs", "token_usage", "gen_throughput", "utilization"):
        assert f"sglang:{gauge}" in after


def test_metrics_can_be_off():
    with ScriptedServer({"metrics": False}) as server:
        assert httpx.get(f"{server.root_url}/metrics").status_code == 404


def test_non_json_body_gets_400():
    with ScriptedServer({"turns": [{"content": "ok"}]}) as server:
        response = httpx.post(f"{server.base_url}/chat/completions", content=b"{nope",
                              headers={"content-type": "application/json"})
    assert response.status_code == 400 and "error" in response.json()


def test_a_request_body_over_a_megabyte_is_answered():
    # A long conversation outgrows aiohttp's default 1 MiB request limit; SGLang takes it.
    long = [*USER, {"role": "user", "content": "x" * 3_000_000}]
    with ScriptedServer({"turns": [{"content": "read it all"}]}) as server:
        response = chat(server, long)
        [body] = server.chat_bodies
    assert message_of(response)["content"] == "read it all"
    assert len(body["messages"][-1]["content"]) == 3_000_000


# --- instant mode, subprocess, command line ------------------------------------------------------------------

def test_instant_mode_runs_steps_then_finishes_without_recording():
    with ScriptedServer({"instant": {"steps": 3, "tool": "Bash", "arguments": {"command": "true"}}}) as server:
        messages, names = list(USER), []
        for _ in range(4):
            response = chat(server, messages)
            message = message_of(response)
            names.append((message["tool_calls"] or [{"function": {"name": message["content"]}}])[0]["function"]["name"])
            messages = follow_up(messages, response)
        assert names == ["Bash", "Bash", "Bash", "done"]
        assert response.json()["usage"]["prompt_tokens"] == 100
        assert server.requests == []
        assert server.stats()["answers"] == 4
        assert metrics(server)["sglang:num_requests_total"] == 4


def test_subprocess_mode_serves_and_reports_requests():
    with ScriptedServer({"turns": [{"tool_calls": [BASH_LS]}]}, subprocess=True) as server:
        assert message_of(chat(server, USER, top_k=5))["tool_calls"][0]["function"]["name"] == "Bash"
        assert server.chat_bodies[0]["top_k"] == 5
        process = server._process
    assert process is not None and process.poll() is not None  # stopped with the context


def test_command_line_writes_the_port_file(tmp_path):
    script = tmp_path / "script.json"
    script.write_text(json.dumps({"turns": [{"content": "from the cli"}]}))
    port_file = tmp_path / "port"
    process = subprocess.Popen([sys.executable, "-m", "support.sglang_fake", "--port", "0", "--script",
                                str(script), "--port-file", str(port_file)], cwd=tmp_path, env=CLI_ENV,
                               stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    try:
        printed = process.stdout.readline().decode().strip()
        wait_until(port_file.exists, "the port file is written")
        port = int(port_file.read_text())
        assert printed == str(port)
        response = httpx.post(f"http://127.0.0.1:{port}/v1/chat/completions", json={"messages": USER})
        assert message_of(response)["content"] == "from the cli"
    finally:
        process.terminate()
        assert process.wait(timeout=10) == 0


def test_command_line_refuses_a_bad_script(tmp_path):
    script = tmp_path / "script.json"
    script.write_text(json.dumps({"turns": [{"status": 200}]}))
    result = subprocess.run([sys.executable, "-m", "support.sglang_fake", "--script", str(script)], cwd=tmp_path,
                            env=CLI_ENV, capture_output=True, timeout=60)
    assert result.returncode == 2 and b"cannot load --script" in result.stderr
