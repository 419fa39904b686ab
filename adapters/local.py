"""The `local` arm: a real small model on this machine's CPU (SmolLM2-135M behind llama.cpp's server), started
and stopped by leafcost, priced as self-hosted hardware: the machine's $/hour, as a CPU lease. What the arm
changes in Leaf's requests to give this model a fair chance is its request policy, recorded with the arm."""

from __future__ import annotations

import asyncio
import os
from typing import Any

from adapters.base import AdapterError, ArmStart, Lease, utcnow
from adapters.local_server import LOCAL_REQUEST_POLICY, SERVED_MODEL, LocalModelError, LocalModelServer
from adapters.openai_http import OpenAICompatibleAdapter


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
                  "body_extras": self.body_extras}
        return arm.model_copy(update={"lease": self.lease, "config": config})

    def request_body(self, messages: list[dict[str, Any]], tools: list[dict[str, Any]],
                     max_tokens: int | None) -> dict[str, Any]:
        # llama.cpp's templates render a null content as "None"; an empty string renders as nothing.
        sent = [{**m, "content": ""} if m.get("role") == "assistant" and m.get("content") is None else m
                for m in messages]
        sent, fields = self.policy.apply(sent)
        return {**super().request_body(sent, tools, max_tokens), **fields}

    async def stop(self) -> Lease:
        await super().stop()
        if self.server is not None:
            await asyncio.to_thread(self.server.stop)
        self.lease = self.lease.model_copy(update={"ended_at": utcnow()})
        return self.lease
