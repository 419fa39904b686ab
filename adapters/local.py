"""The `local` arm: a real small model on this machine's CPU (SmolLM2-135M behind llama.cpp's server), started
and stopped by leafcost, priced as self-hosted hardware: the machine's $/hour, as a CPU lease. What the arm
changes in Leaf's requests to give this model a fair chance is its request policy, recorded with the arm."""

from __future__ import annotations

import asyncio
import json
import os
from typing import Any

from adapters.base import AdapterError, ArmStart, Lease, utcnow
from adapters.local_server import LOCAL_REQUEST_POLICY, SERVED_MODEL, LocalModelError, LocalModelServer
from adapters.openai_http import OpenAICompatibleAdapter


# Without a cap a 135M model that never closes its call generates until its 8k context is full (~5 min here).
DEFAULT_MAX_TOKENS = 512


class LocalAdapter(OpenAICompatibleAdapter):
    max_tokens_field = "max_tokens"  # llama.cpp's server name for the per-turn cap

    def __init__(self, *, model: str = SERVED_MODEL, sampling: dict[str, Any], parallel: int,
                 machine_usd_per_hour: float, request_timeout_sec: float = 600.0, max_retries: int = 3):
        super().__init__(base_url="http://127.0.0.1:0/v1", model=model, body_extras=sampling,
                         request_timeout_sec=request_timeout_sec, max_retries=max_retries)
        self.parallel = parallel
        self.policy = LOCAL_REQUEST_POLICY
        self.server: LocalModelServer | None = None
        self.lease = Lease(kind="cpu", hardware=f"cpu:{len(os.sched_getaffinity(0))}-core",
                           usd_per_hour=machine_usd_per_hour)

    async def start(self) -> ArmStart:
        try:
            self.server = LocalModelServer(parallel=self.parallel, served_model=self.model)
            await asyncio.to_thread(self.server.start)
        except LocalModelError as exc:
            raise AdapterError("unreachable", f"local model server: {exc}") from None
        self.base_url = self.server.base_url
        arm = await super().start()
        self.lease = self.lease.model_copy(update={"started_at": utcnow()})
        config = {"server": self.server.record(), "request_policy": self.policy.record(),
                  "body_extras": self.body_extras, "default_max_tokens": DEFAULT_MAX_TOKENS,
                  "history": "assistant content null sent as ''; tool-call arguments that are not JSON objects "
                             "sent JSON-encoded (llama.cpp answers 500 otherwise)"}
        return arm.model_copy(update={"lease": self.lease, "config": config})

    def request_body(self, messages: list[dict[str, Any]], tools: list[dict[str, Any]],
                     max_tokens: int | None) -> dict[str, Any]:
        sent, fields = self.policy.apply([_for_llama_cpp(m) for m in messages])
        return {**super().request_body(sent, tools, max_tokens or DEFAULT_MAX_TOKENS), **fields}

    async def stop(self) -> Lease:
        await super().stop()
        if self.server is not None:
            await asyncio.to_thread(self.server.stop)
        self.lease = self.lease.model_copy(update={"ended_at": utcnow()})
        return self.lease


def _for_llama_cpp(message: dict[str, Any]) -> dict[str, Any]:
    """llama.cpp's server refuses (HTTP 500) a history whose tool-call arguments are not a JSON object, which a
    small model produces; such arguments are sent JSON-encoded, so the template shows the model its own text."""
    if message.get("role") != "assistant":
        return message
    calls = []
    for call in message.get("tool_calls") or []:
        arguments = call["function"]["arguments"]
        if not _is_json_object(arguments):
            call = {**call, "function": {**call["function"], "arguments": json.dumps({"raw": arguments})}}
        calls.append(call)
    fixed = {**message, "content": message.get("content") or ""}
    if calls:
        fixed["tool_calls"] = calls
    return fixed


def _is_json_object(text: str) -> bool:
    try:
        return isinstance(json.loads(text), dict)
    except (TypeError, ValueError):
        return False
