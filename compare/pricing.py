"""What one hosted call costs: tokens × the arm's price sheet (explicit prices, or litellm's pinned price map),
with cached input and reasoning priced as the provider prices them. Every figure says where it came from."""

from __future__ import annotations

import importlib.util
import json
import re
from collections.abc import Callable
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import TYPE_CHECKING

from pydantic import BaseModel

from adapters.base import Usage
from compare.arms.base import Prices, PriceTier

if TYPE_CHECKING:
    import numpy as np

PER_MILLION = 1_000_000
# The one rule for an unpriced call, as the predicate the summary runs over `model_calls`: it used tokens and has no
# cost, or a cost of exactly 0.0 (litellm returns None for an unknown model, and a generic pattern rule in its map
# can price a model at 0.0: costs.md). Calls of lease-billed arms are paid by their lease, never unpriced.
UNPRICED_CALL_SQL = ("(cost_usd IS NULL OR cost_usd = 0) AND prompt_tokens + completion_tokens > 0 "
                     "AND price_source <> 'lease'")


class CallPrice(BaseModel):
    cost_usd: float | None  # None = unpriced: no number rather than a wrong one
    price_source: str  # "explicit", "litellm", "unpriced"
    price_revision: str | None = None


def price_call(usage: Usage, prices: Prices | None, model: str, *,
               revision: str | None = None) -> CallPrice:
    if prices is not None:
        return CallPrice(cost_usd=explicit_cost(usage, prices), price_source="explicit",
                         price_revision=revision or "arm sheet")
    sheet = litellm_prices(model)
    if sheet is None:
        return CallPrice(cost_usd=None, price_source="unpriced", price_revision=litellm_revision())
    threshold = unmodelled_tier_threshold(model)
    if threshold is not None and usage.prompt_tokens > threshold:
        # Prices holds only the 200k tier; a prompt past another tier's threshold has no right number here.
        return CallPrice(cost_usd=None, price_source="unpriced",
                         price_revision=f"{litellm_revision()} (tier above {threshold} tokens not modelled)")
    return CallPrice(cost_usd=explicit_cost(usage, sheet), price_source="litellm", price_revision=litellm_revision())


def explicit_cost(usage: Usage, prices: Prices) -> float:
    """USD for one call, priced as litellm 1.110 prices it: uncached input (prompt − cached − cache writes) at
    the input rate, cached input at the cached rate and cache writes at the cache-write rate (each the input rate
    when the sheet lists none), output (completion − reasoning) at the output rate, reasoning at its own rate when
    listed (else the output rate). A prompt above 200k tokens bills the whole request at the `above_200k` tier,
    when the sheet has one. The router's markup applies last."""
    return float(explicit_cost_arrays(prices, prompt=usage.prompt_tokens, cached=usage.cached_tokens,
                                      cache_write=usage.cache_write_tokens, completion=usage.completion_tokens,
                                      reasoning=usage.reasoning_tokens)[0])


def explicit_cost_arrays(prices: Prices, *, prompt, cached, cache_write, completion, reasoning) -> np.ndarray:
    """`explicit_cost` over columns of token counts at once (what-if repricing of millions of recorded calls):
    the one implementation of the pricing rule, scalars welcome."""
    import numpy as np  # not at the top: a run's start (arms/router.py's price check) needs none of it

    prompt, cached, cache_write, completion, reasoning = (
        np.atleast_1d(np.asarray(x, dtype=np.float64)) for x in (prompt, cached, cache_write, completion, reasoning))
    # Clamp the parts so a server's inconsistent counts never make a negative token count.
    cached = np.minimum(cached, prompt)
    cache_write = np.minimum(cache_write, prompt - cached)
    reasoning = np.minimum(reasoning, completion)
    base = _rates_for(0, prices)
    tiered = _rates_for(ABOVE_200K + 1, prices)
    above = prompt > ABOVE_200K

    def rate(name: str) -> np.ndarray | float:
        low, high = getattr(base, name), getattr(tiered, name)
        return low if low == high else np.where(above, high, low)

    cost = ((prompt - cached - cache_write) * rate("input") + cached * rate("cached_input")
            + cache_write * rate("cache_write") + (completion - reasoning) * rate("output")
            + reasoning * rate("reasoning"))
    return cost / PER_MILLION * (1 + prices.markup_pct / 100)


ABOVE_200K = 200_000  # the tier's threshold; litellm switches when prompt_tokens is strictly above it


@dataclass(frozen=True)
class _Rates:
    """The five rates (USD per 1M tokens) one request is billed at, every fallback resolved."""

    input: float
    cached_input: float
    cache_write: float
    output: float
    reasoning: float


def _rates_for(prompt_tokens: int, prices: Prices) -> _Rates:
    tier = prices.above_200k
    if tier is not None and prompt_tokens > ABOVE_200K:
        # The whole request moves to the tier; reasoning has no tier rate of its own, so it follows tier output.
        return _Rates(input=tier.input, cached_input=_or(tier.cached_input, tier.input),
                      cache_write=_or(tier.cache_write, tier.input), output=tier.output, reasoning=tier.output)
    return _Rates(input=prices.input, cached_input=_or(prices.cached_input, prices.input),
                  cache_write=_or(prices.cache_write, prices.input), output=prices.output,
                  reasoning=_or(prices.reasoning, prices.output))


def _or(rate: float | None, fallback: float) -> float:
    return fallback if rate is None else rate


@lru_cache(maxsize=256)
def litellm_prices(model: str) -> Prices | None:
    """The model's list prices from litellm's local, pinned map; None when the map does not price it.
    A rate of exactly 0 is treated as unknown (a generic pattern rule can price a model at 0.0)."""
    entry = _litellm_entry(model)
    if not entry or not entry.get("input_cost_per_token") or not entry.get("output_cost_per_token"):
        return None

    def per_million(key: str) -> float | None:
        value = entry.get(key)
        return None if value is None else float(value) * PER_MILLION

    cached_input = per_million("cache_read_input_token_cost")
    cache_write = per_million("cache_creation_input_token_cost")
    return Prices(input=per_million("input_cost_per_token"), output=per_million("output_cost_per_token"),
                  cached_input=cached_input, cache_write=cache_write,
                  reasoning=per_million("output_cost_per_reasoning_token"),
                  above_200k=_litellm_tier(per_million, cached_input, cache_write))


def unmodelled_tier_threshold(model: str) -> int | None:
    """The lowest long-context threshold in litellm's map for this model other than 200k (the map also has 32k,
    100k, 128k, 256k, 272k and 512k tiers, e.g. 272k for gpt-5.4), which `Prices` cannot hold; None when none."""
    entry = _litellm_entry(model) or {}
    thresholds = [_tokens(match.group(1)) for key in entry
                  if (match := _TIER_INPUT_KEY.fullmatch(key)) and match.group(1) != "200k"]
    return min(thresholds, default=None)


_TIER_INPUT_KEY = re.compile(r"input_cost_per_token_above_(\d+k?)_tokens")  # the standard tier, no service suffix


def _tokens(threshold: str) -> int:
    return int(threshold.removesuffix("k")) * (1000 if threshold.endswith("k") else 1)


def _litellm_tier(per_million: Callable[[str], float | None], cached_input: float | None,
                  cache_write: float | None) -> PriceTier | None:
    """The map's above-200k tier, when it lists both an input and an output rate. A cache rate the tier lacks
    keeps the flat one, as litellm 1.110 does (`get_cost_per_unit(tier_key, default=flat rate)`)."""
    tier_input = per_million("input_cost_per_token_above_200k_tokens")
    tier_output = per_million("output_cost_per_token_above_200k_tokens")
    if tier_input is None or tier_output is None:
        return None
    tier_cached = per_million("cache_read_input_token_cost_above_200k_tokens")
    tier_write = per_million("cache_creation_input_token_cost_above_200k_tokens")
    return PriceTier(input=tier_input, output=tier_output,
                     cached_input=cached_input if tier_cached is None else tier_cached,
                     cache_write=cache_write if tier_write is None else tier_write)


def _litellm_entry(model: str) -> dict | None:
    return _litellm_model_cost().get(model) or _litellm_model_cost().get(model.split("/", 1)[-1])


@lru_cache(maxsize=1)
def litellm_revision() -> str:
    """The price table's revision: the pinned litellm release whose bundled map is used (no import needed)."""
    return f"litellm {_litellm_version()} local map"


def _litellm_version() -> str:
    from importlib.metadata import version

    return version("litellm")


@lru_cache(maxsize=1)
def _litellm_model_cost() -> dict:
    """`litellm.model_cost` as litellm builds it from its bundled map (LITELLM_LOCAL_MODEL_COST_MAP=True), read from
    the package's own JSON without executing litellm's __init__ (seconds of CPU): the file found by the import
    system, the `fallback_generalizations` block dropped, aliases served as their owner's entry."""
    model_cost = json.loads(litellm_map_path().read_bytes())
    model_cost.pop("fallback_generalizations", None)
    return _expand_aliases(model_cost)


def litellm_map_path() -> Path:
    """The price map litellm ships in its package (`model_prices_and_context_window_backup.json`)."""
    spec = importlib.util.find_spec("litellm")  # a top-level package: found, not imported
    if spec is None or not spec.submodule_search_locations:
        raise RuntimeError("litellm is not installed: its price map prices arms without explicit prices")
    return Path(next(iter(spec.submodule_search_locations)), "model_prices_and_context_window_backup.json")


def _expand_aliases(model_cost: dict) -> dict:
    """litellm 1.110's alias rules (`_expand_model_aliases`): a row whose `alias_of` names a model entry, and each
    name in an entry's `aliases` list that is not already a model entry or claimed, is served as that entry; a
    pointer row that names nothing (or another pointer) is dropped, and the `aliases` key never survives."""
    pointers = {name: target for name, info in model_cost.items() if isinstance(target := info.get("alias_of"), str)}
    owners: dict[str, str] = {}
    for name, info in model_cost.items():
        aliases = info.get("aliases")
        if aliases is None or name in pointers:
            continue
        info.pop("aliases")
        for alias in aliases if isinstance(aliases, list) else ():
            if (alias not in model_cost or alias in pointers) and alias not in owners:
                owners[alias] = name
    for alias, target in pointers.items():
        if target in model_cost and target not in pointers and alias not in owners:
            owners[alias] = target
    for alias in pointers.keys() - owners.keys():
        del model_cost[alias]
    for alias, owner in owners.items():
        model_cost[alias] = model_cost[owner]
    return model_cost
