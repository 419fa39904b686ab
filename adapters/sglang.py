"""The self-hosted arm: an SGLang server over HTTP. Sampling extras go in the body as SGLang reads them; the
server's own description and Prometheus metrics are captured; the arm pays for a GPU lease while it runs.
SGLang itself never shares leafcost's environment (it pins an older openai): we only speak HTTP to it."""

from __future__ import annotations

import json
import os
import re
import shlex
from typing import Any

from adapters.base import AdapterError, ArmStart, Lease, ServerSample, utcnow
from adapters.openai_http import OpenAICompatibleAdapter

# What FrogNano needs from its server (shared/reference/costs.md); a missing parser looks like a bad model.
EXPECTED_SERVER_ARGS = {"tool_call_parser": "qwen3_coder", "reasoning_parser": "qwen3"}
FROGNANO_MODEL_PATH = "microsoft/FrogNano-4B-2609"
SECRET_KEY = re.compile(r"api_key|token|secret|password|authorization", re.IGNORECASE)


class SGLangAdapter(OpenAICompatibleAdapter):
    def __init__(self, *, base_url: str, model: str, sampling: dict[str, Any], gpu_type: str, gpu_count: int,
                 usd_per_gpu_hour: float, api_key_env: str | None = None, request_timeout_sec: float = 600.0,
                 max_retries: int = 3):
        api_key = os.environ.get(api_key_env) if api_key_env else None
        if api_key_env and not api_key:
            raise AdapterError("auth", f"the arm reads its key from ${api_key_env}, which is not set")
        super().__init__(base_url=base_url, model=model, api_key=api_key, body_extras=sampling,
                         request_timeout_sec=request_timeout_sec, max_retries=max_retries)
        self.server_root = self.base_url.removesuffix("/v1")
        self.lease = Lease(kind="gpu", hardware=gpu_type, count=gpu_count, usd_per_hour=usd_per_gpu_hour)

    async def start(self) -> ArmStart:
        arm = await super().start()
        server_info = await self._get_root("/get_server_info")
        model_info = await self._get_root("/get_model_info")
        warnings = list(arm.warnings) + parser_warnings(server_info)
        if server_info is not None and not server_info.get("enable_metrics", True):
            warnings.append("the server runs without --enable-metrics: no utilization or throughput samples")
        self.lease = self.lease.model_copy(update={"started_at": utcnow()})
        return arm.model_copy(update={"server_info": server_info, "model_info": model_info, "lease": self.lease,
                                      "warnings": warnings})

    async def sample_metrics(self) -> ServerSample | None:
        from prometheus_client.parser import text_string_to_metric_families  # only arms that scrape pay for it

        status, text = await self.get_text(self.server_root + "/metrics", timeout=10.0)
        if status != 200:
            return None
        values: dict[str, float] = {}
        try:
            for family in text_string_to_metric_families(text):
                for sample in family.samples:
                    labels = ",".join(f'{k}="{v}"' for k, v in sorted(sample.labels.items()))
                    values[f"{sample.name}{{{labels}}}" if labels else sample.name] = float(sample.value)
        except ValueError:
            return None  # a garbled scrape is skipped, not fatal
        return ServerSample(values=values)

    async def stop(self) -> Lease:
        await super().stop()
        self.lease = self.lease.model_copy(update={"ended_at": utcnow()})
        return self.lease

    async def _get_root(self, path: str) -> dict[str, Any] | None:
        status, text = await self.get_text(self.server_root + path)
        try:
            return without_secrets(json.loads(text)) if status == 200 else None
        except ValueError:
            return None


def without_secrets(value: Any) -> Any:
    """SGLang's /get_server_info dumps every server argument, its api_key included: never record those."""
    if isinstance(value, dict):
        return {k: "[redacted]" if SECRET_KEY.search(str(k)) and v not in (None, "") else without_secrets(v)
                for k, v in value.items()}
    if isinstance(value, list):
        return [without_secrets(v) for v in value]
    return value


def parser_warnings(server_info: dict[str, Any] | None) -> list[str]:
    """Server flags FrogNano needs, checked against what the server says it was launched with."""
    if not server_info:
        return []
    warnings = []
    for arg, value in EXPECTED_SERVER_ARGS.items():
        if server_info.get(arg) != value:
            flag = "--" + arg.replace("_", "-")
            warnings.append(f"server runs with {arg}={server_info.get(arg)!r}: add `{flag} {value}` to the "
                            "SGLang launch, or tool calls and reasoning arrive as raw text")
    return warnings


def launch_command(model_path: str = FROGNANO_MODEL_PATH, *, port: int = 30000, context_length: int = 131072,
                   tp: int = 1, host: str = "0.0.0.0") -> list[str]:
    """The exact SGLang launch for FrogNano (shared/reference/costs.md), as an argv list."""
    return ["python", "-m", "sglang.launch_server", "--model-path", model_path,
            "--reasoning-parser", "qwen3", "--tool-call-parser", "qwen3_coder",
            "--context-length", str(context_length), "--mem-fraction-static", "0.85",
            "--enable-metrics", "--enable-cache-report", "--tp", str(tp), "--host", host, "--port", str(port)]


def launch_command_text(**kwargs: Any) -> str:
    return shlex.join(launch_command(**kwargs))
