"""A hosted model behind an OpenAI-compatible router (OrcaRouter, OpenRouter, a LiteLLM proxy), through litellm:
billed by tokens at the arm's prices, or litellm's pinned price map."""

from __future__ import annotations

from typing import Any, ClassVar, Literal

from pydantic import Field

from compare.arms.base import ArmSpec, Prices


class RouterArm(ArmSpec):
    kind: ClassVar = "hosted"
    billing: ClassVar = "tokens"
    start_modules: ClassVar = ("compare.solvers", "adapters.router")

    adapter: Literal["router"]
    model: str
    api_key_env: str | None = Field(None, description="name of the environment variable holding the key")
    prices: Prices | None = Field(None, description="explicit prices; otherwise litellm's pinned price map")
    fallback_prices: dict[str, Prices] = Field(
        default_factory=dict, description="prices of the models the router may fall back to, by the model name "
        "it reports (x-litellm-model-group); a fallback not listed is priced from litellm's map, else unpriced")
    allow_unpriced: bool = False
    allow_unlisted_model: bool = Field(
        False, description="start even when the endpoint lists its models and this arm's model is not among them "
        "(for routers that route unlisted names); otherwise such an arm is refused at start")

    def build_adapter(self):
        from adapters.router import RouterAdapter

        return RouterAdapter(model=self.model, base_url=self.base_url, api_key_env=self.api_key_env,
                             sampling=self.sampling.body(), request_timeout_sec=self.request_timeout_sec,
                             max_retries=self.max_retries, allow_unlisted_model=self.allow_unlisted_model)

    def start_problem(self) -> str | None:
        if self.prices is not None or self.allow_unpriced:
            return None
        from compare.pricing import litellm_prices, litellm_revision  # the map read from litellm's JSON, no import

        if litellm_prices(self.model) is None:
            return (f"model {self.model!r} has no price in {litellm_revision()}; give the arm explicit prices "
                    "(prices: {input: ..., output: ...}, USD per 1M tokens) or set allow_unpriced: true to run it "
                    "without a cost")
        return None

    def price_call(self, usage, router_model):
        """At the prices of the model that answered: the arm's own, or, when the router says a fallback answered,
        that model's (the arm's fallback_prices, else litellm's map, else unpriced)."""
        from compare.pricing import price_call

        if not router_model or router_model == self.model:
            return price_call(usage, self.prices, self.model)
        sheet = self.fallback_prices.get(router_model)
        revision = f"arm sheet: fallback_prices.{router_model}" if sheet is not None else None
        return price_call(usage, sheet, router_model, revision=revision)

    def price_sheet(self) -> dict[str, Any]:
        return {**super().price_sheet(), "source": "explicit" if self.prices is not None else "litellm",
                "prices": self.prices,
                "litellm_model": None if self.prices is not None else self.model,
                "fallback_prices": self.fallback_prices}

    def reprice(self, entry) -> Prices | float:
        from compare.pricing import litellm_prices, litellm_revision

        if entry.usd_per_hour is not None:
            raise ValueError("a hosted arm is priced per token: give prices or litellm_model, not usd_per_hour")
        prices = entry.prices or litellm_prices(entry.litellm_model)
        if prices is None:
            raise ValueError(f"litellm_model {entry.litellm_model!r} has no price in {litellm_revision()}")
        return prices
