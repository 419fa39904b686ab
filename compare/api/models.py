"""The API's response models other than the figure documents (those are compare.documents): health, runs, arms,
episodes, model calls, price sheets and error bodies, for the OpenAPI schema."""

from __future__ import annotations

from datetime import datetime
from typing import Any, Literal

from pydantic import BaseModel, Field

from compare.spec import Prices


class ErrorDetail(BaseModel):
    detail: str


class UnfairDetail(BaseModel):
    detail: str
    differences: list[str]


class Health(BaseModel):
    status: Literal["ok"]
    ledger: str
    schema_version: int
    leafcost_version: str


class _RunFields(BaseModel):
    run_id: str
    name: str
    status: str
    created_at: datetime
    updated_at: datetime
    suite: str
    seeds: int


class RunItem(_RunFields):
    arms: list[str] = Field(description="arm names in the spec's order")
    tasks: int


class ArmRow(BaseModel):
    arm: str
    adapter: str
    model: str
    status: str = Field(description="ready, skipped, failed, finished, interrupted, or 'not started'")
    status_reason: str | None
    endpoint: str | None
    served_model: str | None
    config: dict[str, Any] | None
    warnings: list[str]
    started_at: datetime | None
    ended_at: datetime | None


class RunDetail(_RunFields):
    task_ids: list[str]
    spec: dict[str, Any]
    spec_sha256: str
    leafcost_version: str
    sandbox_options: dict[str, Any] | None
    arms: list[ArmRow]


class Tokens(BaseModel):
    prompt: int | None = Field(description="all input tokens, cached included (null while the attempt runs)")
    cached: int | None
    completion: int | None = Field(description="all output tokens, reasoning included")
    reasoning: int | None


class EpisodeRow(BaseModel):
    episode_id: str
    arm: str
    task_id: str
    seed: int
    attempt: int
    status: str
    final: bool
    resolved: bool | None
    reward: float | None
    exit_reason: str | None
    n_steps: int | None
    tokens: Tokens
    model_calls: int | None = Field(description="HTTP attempts to the model, failed ones included")
    elapsed_sec: float | None
    cost_usd: float | None = Field(description="Σ model_calls.cost_usd (token cost; null when no call is priced "
                                               "per token, e.g. a self-hosted arm, whose lease is the cost)")


class EpisodePage(BaseModel):
    total: int
    limit: int
    offset: int
    episodes: list[EpisodeRow]


class EpisodeFull(EpisodeRow):
    grade_error: str | None
    error_detail: str | None
    infra_error: bool
    harness_error: bool
    started_at: datetime
    ended_at: datetime | None
    sandbox_spec_hash: str | None
    isolation: str | None
    sandbox_cpu_seconds: float | None
    sandbox_start_sec: float | None
    patch_bytes: int | None
    trajectory_path: str | None


class ModelCall(BaseModel):
    call_id: int
    step: int
    attempt: int
    model: str
    status: str
    http_status: int | None
    error: str | None
    finish_reason: str | None
    prompt_tokens: int
    cached_tokens: int
    cache_write_tokens: int
    completion_tokens: int
    reasoning_tokens: int
    total_tokens: int
    started_at: datetime
    latency_sec: float
    ttft_sec: float | None
    cost_usd: float | None
    price_source: str | None
    router_cost_usd: float | None
    router_model: str | None


class EpisodeDetail(BaseModel):
    episode: EpisodeFull
    model_calls: list[ModelCall]
    trajectory: dict[str, Any] | None = Field(description="the attempt's trajectory file (Leaf's fields)")
    trajectory_reason: str | None = Field(description="why trajectory is null")


class ArmPriceSheet(BaseModel):
    arm: str
    adapter: str
    model: str
    source: Literal["explicit", "litellm", "lease", "none"]
    prices: Prices | None = Field(description="USD per 1M tokens, when the spec lists them")
    litellm_model: str | None = Field(description="the model looked up in litellm's pinned map")
    fallback_prices: dict[str, Prices]
    usd_per_hour: float | None = Field(description="per GPU (SGLang) or for the machine (local arm)")
    gpus: int | None
    gpu_type: str | None


class PricesDocument(BaseModel):
    litellm: str = Field(description="the pinned price map's revision")
    run_id: str | None
    sandbox_usd_per_vcpu_hour: float | None
    arms: list[ArmPriceSheet]
