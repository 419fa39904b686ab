"""What one hosted call costs: tokens × the arm's price sheet (explicit prices, or litellm's pinned price map),
with cached input and reasoning priced as the provider prices them. Every figure says where it came from."""

from __future__ import annotations

import os
from functools import lru_cache

from pydantic import BaseModel

from adapters.base import Usage
from compare.spec import Prices, RouterArm

PER_MILLION = 1_000_000


class CallPrice(BaseModel):
    cost_usd: float | None  # None = unpriced: no number rather than a wrong one
    price_source: str  # "explicit", "litellm", "unpriced"
    price_revision: str | None = None


def price_arm_call(usage: Usage, arm: RouterArm, router_model: str | None) -> CallPrice:
    """A hosted arm's call at the prices of the model that answered: the arm's own, or, when the router says a
    fallback answered, that model's (the arm's fallback_prices, else litellm's map, else unpriced)."""
    if not router_model or router_model == arm.model:
        return price_call(usage, arm.prices, arm.model)
    sheet = arm.fallback_prices.get(router_model)
    revision = f"arm sheet: fallback_prices.{router_model}" if sheet is not None else None
    return price_call(usage, sheet, router_model, revision=revision)


def price_call(usage: Usage, prices: Prices | None, model: str, *,
               revision: str | None = None) -> CallPrice:
    if prices is not None:
        return CallPrice(cost_usd=explicit_cost(usage, prices), price_source="explicit",
                         price_revision=revision or "arm sheet")
    sheet = litellm_prices(model)
    if sheet is None:
        return CallPrice(cost_usd=None, price_source="unpriced", price_revision=litellm_revision())
    return CallPrice(cost_usd=explicit_cost(usage, sheet), price_source="litellm", price_revision=litellm_revision())


def explicit_cost(usage: Usage, prices: Prices) -> float:
    """Uncached input at the input rate, cached input at the cached rate (the input rate when none is listed,
    as litellm 1.110 charges), output at the output rate with reasoning at its own rate when one is listed."""
    cached = min(usage.cached_tokens, usage.prompt_tokens)
    cached_rate = prices.cached_input if prices.cached_input is not None else prices.input
    reasoning = min(usage.reasoning_tokens, usage.completion_tokens) if prices.reasoning is not None else 0
    cost = ((usage.prompt_tokens - cached) * prices.input + cached * cached_rate
            + (usage.completion_tokens - reasoning) * prices.output + reasoning * (prices.reasoning or 0.0))
    return cost / PER_MILLION * (1 + prices.markup_pct / 100)


@lru_cache(maxsize=256)
def litellm_prices(model: str) -> Prices | None:
    """The model's list prices from litellm's local, pinned map; None when the map does not price it.
    A rate of exactly 0 is treated as unknown (a generic pattern rule can price a model at 0.0)."""
    entry = _litellm_model_cost().get(model) or _litellm_model_cost().get(model.split("/", 1)[-1])
    if not entry or not entry.get("input_cost_per_token") or not entry.get("output_cost_per_token"):
        return None

    def per_million(key: str) -> float | None:
        value = entry.get(key)
        return None if value is None else float(value) * PER_MILLION

    return Prices(input=per_million("input_cost_per_token"), output=per_million("output_cost_per_token"),
                  cached_input=per_million("cache_read_input_token_cost"),
                  cache_write=per_million("cache_creation_input_token_cost"),
                  reasoning=per_million("output_cost_per_reasoning_token"))


@lru_cache(maxsize=1)
def litellm_revision() -> str:
    import litellm

    return f"litellm {litellm.__version__ if hasattr(litellm, '__version__') else _litellm_version()} local map"


def _litellm_version() -> str:
    from importlib.metadata import version

    return version("litellm")


@lru_cache(maxsize=1)
def _litellm_model_cost() -> dict:
    os.environ["LITELLM_LOCAL_MODEL_COST_MAP"] = "True"  # never download a price map at import
    import litellm

    return litellm.model_cost
