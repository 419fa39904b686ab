"""Builds the adapter an arm of the run spec asks for. Imports are lazy: litellm costs seconds at import and
only router arms need it."""

from __future__ import annotations

from adapters.base import Adapter
from compare.spec import LocalArm, RouterArm, SglangArm


def build_adapter(arm: SglangArm | RouterArm | LocalArm) -> Adapter:
    if isinstance(arm, SglangArm):
        from adapters.sglang import SGLangAdapter

        return SGLangAdapter(base_url=arm.base_url, model=arm.model, sampling=arm.sampling.body(),
                             gpu_type=arm.gpu.type, gpu_count=arm.gpu.count, usd_per_gpu_hour=arm.gpu.usd_per_hour,
                             api_key_env=arm.api_key_env, request_timeout_sec=arm.request_timeout_sec,
                             max_retries=arm.max_retries, allow_unlisted_model=arm.allow_unlisted_model)
    if isinstance(arm, RouterArm):
        from adapters.router import RouterAdapter

        return RouterAdapter(model=arm.model, base_url=arm.base_url, api_key_env=arm.api_key_env,
                             sampling=arm.sampling.body(), request_timeout_sec=arm.request_timeout_sec,
                             max_retries=arm.max_retries, allow_unlisted_model=arm.allow_unlisted_model)
    if isinstance(arm, LocalArm):
        from adapters.local import LocalAdapter

        return LocalAdapter(model=arm.model, sampling=arm.sampling.body(), parallel=arm.parallel,
                            machine_usd_per_hour=arm.machine_usd_per_hour,
                            request_timeout_sec=arm.request_timeout_sec, max_retries=arm.max_retries)
    raise TypeError(f"no adapter for {type(arm).__name__}")
