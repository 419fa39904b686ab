"""FrogNano (or any model) on SGLang: self-hosted, paid by the GPU lease the arm holds while it runs."""

from __future__ import annotations

from typing import Any, ClassVar, Literal

from pydantic import Field, model_validator

from compare.arms.base import MAX_USD_PER_HOUR, ArmSpec, StrictModel


class GpuLeaseSpec(StrictModel):
    type: str | None = Field(None, min_length=1, description="the GPU model; with from_deployment, the cluster's")
    count: int | None = Field(None, gt=0, le=4096, description="GPUs (default 1); with from_deployment, the cluster's")
    usd_per_hour: float = Field(gt=0, le=MAX_USD_PER_HOUR, description="per GPU")
    from_deployment: str | None = Field(
        None, pattern=r"^[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?$", description="an SGLang Deployment of `leafcost sglang "
        "manifest`: the GPUs, their type and the endpoint are read from its pods and nodes")
    namespace: str = Field("default", description="from_deployment: the Deployment's namespace")
    kubeconfig: str | None = Field(None, description="from_deployment: default $KUBECONFIG or ~/.kube/config")
    context: str | None = None
    saturation_tokens_per_sec: float | None = Field(
        None, gt=0, le=1e12, description="the server's throughput at saturation (prompt + output tokens/s, all GPUs); "
        "the marginal cost's denominator. Unset: measured from the server's samples")

    @model_validator(mode="after")
    def _typed_or_from_the_cluster(self) -> GpuLeaseSpec:
        if self.from_deployment is None:
            if self.type is None:
                raise ValueError("give the GPU type (type: H200), or from_deployment: NAME to read it from the cluster")
            self.count = self.count or 1
        elif self.type is not None or self.count is not None:
            raise ValueError("type and count come from the cluster with from_deployment: remove them")
        return self


class SglangArm(ArmSpec):
    kind: ClassVar = "self-hosted"
    billing: ClassVar = "lease"
    start_modules: ClassVar = ("compare.solvers", "adapters.sglang")

    adapter: Literal["sglang"]
    model: str
    base_url: str = Field("", description="the server's /v1 URL; with gpu.from_deployment, its Service by default")
    api_key_env: str | None = None
    gpu: GpuLeaseSpec
    metrics_interval_sec: float = Field(15.0, gt=0, le=3600)
    allow_unlisted_model: bool = Field(
        False, description="start even when the endpoint lists its models and this arm's model is not among them "
        "(for routers that route unlisted names); otherwise such an arm is refused at start")

    @model_validator(mode="after")
    def _endpoint(self) -> SglangArm:
        if not self.base_url:
            if self.gpu.from_deployment is None:
                raise ValueError("base_url: the SGLang server's URL (http://HOST:30000/v1) is needed")
            from adapters.sglang_manifest import service_url

            self.base_url = service_url(self.gpu.from_deployment, self.gpu.namespace)
        return self

    def build_adapter(self):
        from adapters.sglang import SGLangAdapter

        gpu = self.gpu
        reader = None
        if gpu.from_deployment is not None:
            from functools import partial

            from adapters.kube_lease import deployment_gpus

            reader = partial(deployment_gpus, gpu.from_deployment, gpu.namespace, kubeconfig=gpu.kubeconfig,
                             context=gpu.context)
        return SGLangAdapter(base_url=self.base_url, model=self.model, sampling=self.sampling.body(),
                             gpu_type=gpu.type or "", gpu_count=gpu.count or 0, gpus_from=reader,
                             usd_per_gpu_hour=gpu.usd_per_hour,
                             api_key_env=self.api_key_env, request_timeout_sec=self.request_timeout_sec,
                             max_retries=self.max_retries, allow_unlisted_model=self.allow_unlisted_model)

    def metrics_interval(self) -> float | None:
        return self.metrics_interval_sec

    def stated_saturation(self) -> float | None:
        return self.gpu.saturation_tokens_per_sec

    def price_sheet(self) -> dict[str, Any]:
        return {**super().price_sheet(), "source": "lease", "usd_per_hour": self.gpu.usd_per_hour,
                "gpus": self.gpu.count, "gpu_type": self.gpu.type}
