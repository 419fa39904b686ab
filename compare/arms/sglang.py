"""FrogNano (or any model) on SGLang: self-hosted, paid by the GPU lease the arm holds while it runs."""

from __future__ import annotations

from typing import Any, ClassVar, Literal

from pydantic import Field

from compare.arms.base import MAX_USD_PER_HOUR, ArmSpec, Prices, StrictModel


class GpuLeaseSpec(StrictModel):
    type: str
    count: int = Field(1, gt=0, le=4096)
    usd_per_hour: float = Field(gt=0, le=MAX_USD_PER_HOUR, description="per GPU")
    saturation_tokens_per_sec: float | None = Field(
        None, gt=0, le=1e12, description="the server's throughput at saturation (prompt + output tokens/s, all GPUs); "
        "the marginal cost's denominator. Unset: measured from the server's samples")


class SglangArm(ArmSpec):
    kind: ClassVar = "self-hosted"
    billing: ClassVar = "lease"

    adapter: Literal["sglang"]
    model: str
    base_url: str
    api_key_env: str | None = None
    gpu: GpuLeaseSpec
    metrics_interval_sec: float = Field(15.0, gt=0, le=3600)
    allow_unlisted_model: bool = Field(
        False, description="start even when the endpoint lists its models and this arm's model is not among them "
        "(for routers that route unlisted names); otherwise such an arm is refused at start")

    def build_adapter(self):
        from adapters.sglang import SGLangAdapter

        return SGLangAdapter(base_url=self.base_url, model=self.model, sampling=self.sampling.body(),
                             gpu_type=self.gpu.type, gpu_count=self.gpu.count, usd_per_gpu_hour=self.gpu.usd_per_hour,
                             api_key_env=self.api_key_env, request_timeout_sec=self.request_timeout_sec,
                             max_retries=self.max_retries, allow_unlisted_model=self.allow_unlisted_model)

    def metrics_interval(self) -> float | None:
        return self.metrics_interval_sec

    def stated_saturation(self) -> float | None:
        return self.gpu.saturation_tokens_per_sec

    def price_sheet(self) -> dict[str, Any]:
        return {**super().price_sheet(), "source": "lease", "usd_per_hour": self.gpu.usd_per_hour,
                "gpus": self.gpu.count, "gpu_type": self.gpu.type}

    def reprice(self, entry) -> Prices | float:
        return _hourly(entry.usd_per_hour)


def _hourly(usd_per_hour: float | None) -> float:
    if usd_per_hour is None:
        raise ValueError("a self-hosted arm is priced by the hour: give usd_per_hour")
    return usd_per_hour
