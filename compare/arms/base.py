"""What every arm of a run spec is, whatever its kind: its common fields, the price and lease types arms use, and the
questions the runner, the summary, repricing and the API ask an arm instead of branching on its type."""

from __future__ import annotations

import re
from datetime import date
from typing import TYPE_CHECKING, Any, ClassVar, Literal

from pydantic import Field, field_validator

from adapters.scrubbing import url_secrets
from compare.strict import StrictModel

if TYPE_CHECKING:
    from adapters.base import Adapter, Usage
    from compare.episode import EpisodePrompt
    from compare.pricing import CallPrice
    from compare.solvers import Solver
    from compare.budgets import Budgets
    from compare.reprice import ArmPrices as WhatIfPrices

ARM_NAME = r"^[a-z0-9][a-z0-9_.-]{0,62}$"
# Upper bounds far above any real plan: a value past them is a typo, and the ledger's columns are 64-bit.
MAX_USD_PER_MTOK = 10_000.0  # USD per 1M tokens
MAX_USD_PER_HOUR = 10_000.0  # per GPU, or for the local arm's machine
MAX_USD_PER_VCPU_HOUR = 100.0

Kind = Literal["hosted", "self-hosted", "oracle"]
Billing = Literal["tokens", "lease", "none"]


class Sampling(StrictModel):
    """Sent in the request body; SGLang-only extras (top_k, min_p, repetition_penalty, chat_template_kwargs)
    are sent as SGLang reads them."""

    temperature: float | None = Field(None, ge=0)
    top_p: float | None = Field(None, gt=0, le=1)
    top_k: int | None = Field(None, ge=-1, le=2**31 - 1)
    min_p: float | None = Field(None, ge=0, le=1)
    repetition_penalty: float | None = Field(None, gt=0)
    presence_penalty: float | None = None
    frequency_penalty: float | None = None
    chat_template_kwargs: dict[str, Any] | None = None

    def body(self) -> dict[str, Any]:
        return {k: v for k, v in self.model_dump().items() if v is not None}


class PriceTier(StrictModel):
    """The rates of a long-context tier (USD per 1M tokens): a request whose prompt is above the threshold is
    billed entirely at these rates, as providers (and litellm) do."""

    input: float = Field(ge=0, le=MAX_USD_PER_MTOK)
    output: float = Field(ge=0, le=MAX_USD_PER_MTOK)
    cached_input: float | None = Field(None, ge=0, le=MAX_USD_PER_MTOK)
    cache_write: float | None = Field(None, ge=0, le=MAX_USD_PER_MTOK)


class Prices(StrictModel):
    """USD per 1M tokens, as providers list them."""

    input: float = Field(ge=0, le=MAX_USD_PER_MTOK)
    output: float = Field(ge=0, le=MAX_USD_PER_MTOK)
    cached_input: float | None = Field(None, ge=0, le=MAX_USD_PER_MTOK)
    cache_write: float | None = Field(None, ge=0, le=MAX_USD_PER_MTOK)
    reasoning: float | None = Field(None, ge=0, le=MAX_USD_PER_MTOK)
    above_200k: PriceTier | None = Field(None, description="rates for requests whose prompt exceeds 200k tokens")
    markup_pct: float = Field(0.0, ge=0, le=1000,
                              description="the router's markup over these prices (0 for OrcaRouter)")


class ArmSpec(StrictModel):
    """One arm. A kind sets `kind` (how the summary groups it), `billing` (what its cost is: tokens at prices, a
    lease by the hour, or nothing) and overrides the methods below that apply to it."""

    kind: ClassVar[Kind]
    billing: ClassVar[Billing]
    # Why the summary can never read this kind's busy time from its server (None: it can, given the metrics).
    busy_counter_missing: ClassVar[str | None] = None
    calls_a_model: ClassVar[bool] = True  # False: its episodes send no model call (nothing to wait an answer from)
    # The modules starting the arm imports (its solver's, its adapter's): see preload.
    start_modules: ClassVar[tuple[str, ...]] = ("compare.solvers",)

    name: str = Field(pattern=ARM_NAME)
    model: str = ""
    base_url: str | None = None
    sampling: Sampling = Field(default_factory=Sampling)
    request_timeout_sec: float = Field(600.0, gt=0, le=86_400)
    max_retries: int = Field(3, ge=0, le=100)
    leaf_checkout: str | None = Field(
        None, min_length=1, description="a FrogNano clone: send Leaf's own system prompt and tool descriptions, "
        "read from its frognano/harness/leaf/tools.py (never imported or run), instead of leafcost's words")
    released: date | None = Field(
        None, description="the model's release date (YYYY-MM-DD): the summary splits its figures into tasks created "
        "after it, which the model cannot have seen, and the rest")

    @field_validator("base_url")
    @classmethod
    def _no_credentials(cls, url: str | None) -> str | None:
        # The spec is stored in the ledger as written: a key inside the URL would be stored with it.
        if url and url_secrets(url):
            raise ValueError("holds credentials (user:password@ or a key in the query); remove them and name the "
                             "environment variable that holds the key in api_key_env")
        return url

    @field_validator("released", mode="before")
    @classmethod
    def _calendar_date(cls, value: Any) -> Any:
        # pydantic would read a number as a timestamp and a date-time as its day: a release date is written as one
        if value is None or type(value) is date:
            return value
        if isinstance(value, str) and re.fullmatch(r"\d{4}-\d{2}-\d{2}", value.strip()):
            return value.strip()
        raise ValueError(f"{str(value)[:40]!r} is not a date: write the release day as YYYY-MM-DD")

    def preload(self) -> None:
        """Imports the modules starting this arm needs (aiohttp's among them: ~0.1 s of CPU), so that a runner
        can pay for them while it waits on something else, the ledger committing the run's first rows."""
        from importlib import import_module

        for module in self.start_modules:
            import_module(module)

    def build_adapter(self) -> Adapter | None:
        """The adapter to its endpoint (imported lazily: a run's, not `--help`'s); None when no model answers."""
        return None

    def build_solver(self, budgets: Budgets, prompt: EpisodePrompt | None) -> Solver:
        """What fills this arm's sandboxes: its model through the Leaf loop (the oracle overrides this)."""
        from compare.solvers import LeafAgent

        adapter = self.build_adapter()
        if adapter is None or prompt is None:
            raise TypeError(f"the {self.kind} arm {self.name} has no model to drive")
        return LeafAgent(adapter, budgets, prompt)

    def start_problem(self) -> str | None:
        """Why the arm must not start (checked before any episode), or None."""
        return None

    def price_call(self, usage: Usage, router_model: str | None) -> CallPrice | None:
        """A call's cost for an arm billed by tokens; None for the others (their cost is the lease)."""
        return None

    def metrics_interval(self) -> float | None:
        """How often the runner samples the server's metrics while the arm runs, in seconds (None: never)."""
        return None

    def stated_saturation(self) -> float | None:
        """The server's throughput at saturation (tokens/s) as the spec states it (None: measured, or n/a)."""
        return None

    def price_sheet(self) -> dict[str, Any]:
        """What the arm is priced with, in the API's price-sheet fields (every field; None where not priced so)."""
        return {"source": "none", "prices": None, "litellm_model": None, "fallback_prices": {}, "usd_per_hour": None,
                "gpus": None, "gpu_type": None}

    def reprice(self, entry: WhatIfPrices) -> Prices | float:
        """A what-if price sheet's entry for this arm as new token prices (arms billed by tokens) or a new hourly
        rate (by lease); ValueError saying what this kind takes otherwise. Every lease-billed kind takes an hourly
        rate, so that rule is here; kinds billed by tokens override this."""
        if self.billing == "lease":
            if entry.usd_per_hour is None:
                raise ValueError("a self-hosted arm is priced by the hour: give usd_per_hour")
            return entry.usd_per_hour
        raise ValueError(f"the {self.adapter} arm has no prices to change")  # type: ignore[attr-defined]
