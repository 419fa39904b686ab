"""The self-hosted arm: an SGLang server over HTTP. Sampling extras go in the body as SGLang reads them; the
server's own description and Prometheus metrics are captured; the arm pays for a GPU lease while it runs.
SGLang itself never shares leafcost's environment (it pins an older openai): we only speak HTTP to it."""

from __future__ import annotations

import asyncio
import json
import os
import shlex
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from adapters.base import AdapterError, ArmStart, Lease, ServerSample, utcnow
from adapters.openai_http import OpenAICompatibleAdapter
from adapters.scrubbing import redact_values, scrub_start

if TYPE_CHECKING:
    from adapters.kube_lease import DeploymentGpus

# What FrogNano needs from its server (shared/reference/costs.md); a missing parser looks like a bad model.
EXPECTED_SERVER_ARGS = {"tool_call_parser": "qwen3_coder", "reasoning_parser": "qwen3"}
FROGNANO_MODEL_PATH = "microsoft/FrogNano-4B-2609"


class SGLangAdapter(OpenAICompatibleAdapter):
    def __init__(self, *, base_url: str, model: str, sampling: dict[str, Any], gpu_type: str, gpu_count: int,
                 usd_per_gpu_hour: float, api_key_env: str | None = None, request_timeout_sec: float = 600.0,
                 max_retries: int = 3, allow_unlisted_model: bool = False,
                 gpus_from: Callable[[], DeploymentGpus] | None = None):
        api_key = os.environ.get(api_key_env, "").strip() if api_key_env else None
        if api_key_env and not api_key:
            raise AdapterError("configuration", f"the arm reads its key from ${api_key_env}, which is not set: set "
                               f"{api_key_env}")
        super().__init__(base_url=base_url, model=model, api_key=api_key, body_extras=sampling,
                         request_timeout_sec=request_timeout_sec, max_retries=max_retries,
                         allow_unlisted_model=allow_unlisted_model)
        self.server_root = self.base_url.removesuffix("/v1")
        self.lease = Lease(kind="gpu", hardware=gpu_type, count=gpu_count, usd_per_hour=usd_per_gpu_hour)
        self.gpus_from = gpus_from  # reads the lease's GPUs from a cluster's Deployment at start

    async def start(self) -> ArmStart:
        arm = await super().start()
        server_info = await self._get_root("/get_server_info")
        model_info = await self._get_root("/get_model_info")
        warnings = list(arm.warnings) + parser_warnings(server_info)
        if server_info is not None and not server_info.get("enable_metrics", True):
            warnings.append("the server runs without --enable-metrics: no utilization or throughput samples")
        config = dict(arm.config)
        if self.gpus_from is not None:
            held = await asyncio.to_thread(self.gpus_from)
            self.lease = self.lease.model_copy(update={"hardware": held.hardware, "count": held.count})
            config["gpu_from_deployment"] = held.model_dump(mode="json")
        self.lease = self.lease.model_copy(update={"started_at": utcnow()})
        arm = arm.model_copy(update={"server_info": server_info, "model_info": model_info, "lease": self.lease,
                                     "warnings": warnings, "config": config})
        return scrub_start(arm, self.arm_secrets())

    async def sample_metrics(self) -> ServerSample | None:
        status, text = await self.get_text(self.server_root + "/metrics", timeout=10.0)
        if status != 200:
            return None
        from prometheus_client.parser import text_string_to_metric_families  # only arms that scrape pay for it

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
            data = json.loads(text) if status == 200 else None
        except ValueError:
            return None
        # SGLang's /get_server_info dumps every server argument, its api_key included: never keep those.
        return redact_values(data, self.arm_secrets()) if isinstance(data, dict) else None


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


# SGLang exports its busy counter (forward_execution_seconds_total, gpu_execution_seconds_total up to 0.5.10), which
# utilization, fitted work weights and break-even read, only with its device timer on; --enable-metrics alone is not
# enough.
LAUNCH_ENV = {"SGLANG_ENABLE_METRICS_DEVICE_TIMER": "1"}


def launch_command(model_path: str = FROGNANO_MODEL_PATH, *, port: int = 30000, context_length: int = 131072,
                   tp: int = 1, host: str = "0.0.0.0") -> list[str]:
    """The exact SGLang launch for FrogNano (shared/reference/costs.md), as an argv list; run it with LAUNCH_ENV
    in its environment."""
    return ["python", "-m", "sglang.launch_server", "--model-path", model_path,
            "--reasoning-parser", "qwen3", "--tool-call-parser", "qwen3_coder",
            "--context-length", str(context_length), "--mem-fraction-static", "0.85",
            "--enable-metrics", "--enable-cache-report", "--tp-size", str(tp), "--host", host, "--port", str(port)]


def launch_command_text(**kwargs: Any) -> str:
    """The launch as one shell line: LAUNCH_ENV as assignments before the command."""
    assignments = [f"{name}={shlex.quote(value)}" for name, value in LAUNCH_ENV.items()]
    return " ".join([*assignments, shlex.join(launch_command(**kwargs))])
