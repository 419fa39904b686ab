"""The JSON SGLang sends, field for field: chat completions, stream chunks, usage, tool calls, error bodies and the
server args of /get_server_info; and the pre-rendered answers of `instant` mode."""

from __future__ import annotations

import json
import time
import uuid
from http import HTTPStatus
from typing import Any, Literal

from support.sglang_fake.script import InstantSpec, Script, ToolCallSpec

__all__ = ["EOS_TOKEN_ID", "InstantTemplates", "chat_completion", "error_body", "reason", "server_args",
           "sse_stream", "tool_call", "usage_info"]

EOS_TOKEN_ID = 151645  # Qwen's <|im_end|>: what SGLang reports as `matched_stop` for a natural stop

_OPENAI_ERROR_KINDS = {
    400: ("invalid_request_error", "invalid_request"),
    401: ("authentication_error", "invalid_api_key"),
    403: ("permission_error", "forbidden"),
    404: ("invalid_request_error", "not_found"),
    408: ("timeout_error", "timeout"),
    429: ("rate_limit_error", "rate_limit_exceeded"),
    500: ("server_error", "internal_server_error"),
    502: ("server_error", "bad_gateway"),
    503: ("server_error", "service_unavailable"),
    504: ("server_error", "gateway_timeout"),
}


def chat_completion(completion_id: str, model: str, message: dict[str, Any], finish_reason: str,
                    usage: dict[str, Any] | str) -> dict[str, Any]:
    """SGLang's ChatCompletionResponse with one choice."""
    return {"id": completion_id, "object": "chat.completion", "created": int(time.time()), "model": model,
            "choices": [{"index": 0, "message": message, "logprobs": None, "finish_reason": finish_reason,
                         "matched_stop": EOS_TOKEN_ID if finish_reason == "stop" else None}],
            "usage": usage, "metadata": {"weight_version": "default"}}


def sse_stream(completion_id: str, model: str, content: str | None, reasoning: str | None,
               tool_calls: list[dict[str, Any]], finish_reason: str, usage: dict[str, Any], *,
               include_usage: bool) -> bytes:
    """The whole event stream of one answer: role, reasoning, content, each tool call, finish, usage, [DONE]."""
    created = int(time.time())

    def chunk(delta: dict[str, Any] | None, finish: str | None = None, usage_info: Any = None) -> bytes:
        choices = [] if delta is None else [{
            "index": 0, "delta": {"role": None, "content": None, "reasoning_content": None, "tool_calls": None,
                                  **delta},
            "logprobs": None, "finish_reason": finish,
            "matched_stop": EOS_TOKEN_ID if finish == "stop" else None}]
        event = {"id": completion_id, "object": "chat.completion.chunk", "created": created, "model": model,
                 "choices": choices, "usage": usage_info}
        return b"data: " + json.dumps(event, ensure_ascii=False).encode() + b"\n\n"

    parts = [chunk({"role": "assistant", "content": ""})]
    if reasoning:
        parts.append(chunk({"reasoning_content": reasoning}))
    if content:
        parts.append(chunk({"content": content}))
    for call in tool_calls:
        parts.append(chunk({"tool_calls": [call]}))
    parts.append(chunk({}, finish=finish_reason))
    if include_usage:
        parts.append(chunk(None, usage_info=usage))
    parts.append(b"data: [DONE]\n\n")
    return b"".join(parts)


def usage_info(prompt_tokens: int, completion_tokens: int, cached_tokens: int, reasoning_tokens: int, *,
               cache_report: bool) -> dict[str, Any]:
    """SGLang's UsageInfo (field order included), plus OpenAI's completion_tokens_details for reasoning."""
    return {
        "prompt_tokens": prompt_tokens,
        "total_tokens": prompt_tokens + completion_tokens,
        "completion_tokens": completion_tokens,
        "prompt_tokens_details": {"cached_tokens": cached_tokens} if cache_report and cached_tokens > 0 else None,
        "reasoning_tokens": reasoning_tokens,
        "completion_tokens_details": {"reasoning_tokens": reasoning_tokens},
    }


def tool_call(spec: ToolCallSpec, index: int) -> dict[str, Any]:
    arguments = spec.arguments if isinstance(spec.arguments, str) else json.dumps(spec.arguments, ensure_ascii=False)
    return {"id": spec.id or f"call_{uuid.uuid4().hex[:24]}", "index": index, "type": "function",
            "function": {"name": spec.name, "arguments": arguments}}


def error_body(status: int, message: str, style: Literal["openai", "sglang"]) -> dict[str, Any]:
    """OpenAI's nested {"error": {...}}, or SGLang's own flat ErrorResponse."""
    if style == "sglang":
        return {"object": "error", "message": message, "type": reason(status), "param": None, "code": status}
    kind, code = _OPENAI_ERROR_KINDS.get(status, ("server_error" if status >= 500 else "invalid_request_error",
                                                  str(status)))
    return {"error": {"message": message, "type": kind, "param": None, "code": code}}


def reason(status: int) -> str:
    try:
        return HTTPStatus(status).phrase
    except ValueError:
        return "Unknown"


def server_args(script: Script) -> dict[str, Any]:
    """SGLang's ServerArgs as /get_server_info shows them, for the FrogNano launch in costs.md, then the script's."""
    args: dict[str, Any] = {
        "model_path": script.model, "tokenizer_path": script.model, "tokenizer_mode": "auto",
        "skip_tokenizer_init": False, "load_format": "auto", "trust_remote_code": False, "dtype": "auto",
        "kv_cache_dtype": "auto", "quantization": None, "context_length": 131072, "device": "cuda",
        "served_model_name": script.served_name, "chat_template": None, "is_embedding": False,
        "revision": None, "host": "127.0.0.1", "port": 30000, "mem_fraction_static": 0.85,
        "max_running_requests": None, "max_total_tokens": None, "chunked_prefill_size": 8192,
        "max_prefill_tokens": 16384, "schedule_policy": "fcfs", "schedule_conservativeness": 1.0,
        "tp_size": 1, "dp_size": 1, "pp_size": 1, "ep_size": 1, "stream_interval": 1, "random_seed": 0,
        "log_level": "info", "api_key": None, "enable_metrics": script.metrics, "enable_cache_report": True,
        "reasoning_parser": "qwen3", "tool_call_parser": "qwen3_coder", "disable_radix_cache": False,
        "attention_backend": None, "preferred_sampling_params": None, "weight_version": "default",
    }
    if script.auth is not None and script.auth.startswith("Bearer "):
        args["api_key"] = script.auth[len("Bearer "):]  # SGLang echoes its --api-key here; clients must redact it
    args.update(script.server_args)
    return args


class InstantTemplates:
    """Answers rendered once: a request then costs one string format, not a JSON encoding."""

    def __init__(self, instant: InstantSpec) -> None:
        self.steps = instant.steps
        usage = usage_info(instant.prompt_tokens, instant.completion_tokens, 0, 0, cache_report=True)
        arguments = (instant.arguments if isinstance(instant.arguments, str)
                     else json.dumps(instant.arguments, ensure_ascii=False))
        call = {"id": "\x00CALL\x00", "index": 0, "type": "function",
                "function": {"name": instant.tool, "arguments": arguments}}
        self.tool_template = _template({"role": "assistant", "content": "", "reasoning_content": None,
                                        "tool_calls": [call]}, "tool_calls", usage)
        self.final_template = _template({"role": "assistant", "content": instant.final, "reasoning_content": None,
                                         "tool_calls": None}, "stop", usage)

    def render(self, step: int, model: str) -> bytes:
        token = uuid.uuid4().hex
        if step < self.steps:
            return (self.tool_template % (token, int(time.time()), model, token[:24])).encode()
        return (self.final_template % (token, int(time.time()), model)).encode()


def _template(message: dict[str, Any], finish_reason: str, usage: dict[str, Any]) -> str:
    """A %-format of the completion, with placeholders for id, created, model and the tool call's id."""
    payload = chat_completion("\x00ID\x00", "\x00MODEL\x00", message, finish_reason, usage)
    payload["created"] = "\x00CREATED\x00"
    text = json.dumps(payload, ensure_ascii=False).replace("%", "%%")
    return (text.replace('"\\u0000ID\\u0000"', '"chatcmpl-%s"')
            .replace('"\\u0000CREATED\\u0000"', "%d")
            .replace('"\\u0000MODEL\\u0000"', '"%s"')
            .replace('"\\u0000CALL\\u0000"', '"call_%s"'))
