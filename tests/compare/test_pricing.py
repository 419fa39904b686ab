"""Pricing a hosted call: the arm's sheet, a fallback's sheet, litellm's pinned map, or unpriced."""

from __future__ import annotations

import pytest

from adapters.base import Usage
from compare.pricing import litellm_prices, price_arm_call
from compare.spec import RouterArm, SpecError, parse_run_spec

USAGE = Usage(prompt_tokens=1_000_000, completion_tokens=100_000, cached_tokens=400_000, reasoning_tokens=0)


def arm(**changes) -> RouterArm:
    return RouterArm.model_validate({"name": "hosted", "adapter": "router", "model": "hosted-gpt",
                                     "base_url": "http://127.0.0.1:9/v1", "prices": {"input": 1.0, "output": 10.0},
                                     "fallback_prices": {"backup": {"input": 2.0, "output": 20.0,
                                                                    "cached_input": 0.5}}, **changes})


def test_the_arms_own_model_is_priced_at_the_arms_sheet():
    for router_model in (None, "hosted-gpt"):
        price = price_arm_call(USAGE, arm(), router_model)
        # 1M input (cached at the input rate: the sheet lists no cached rate) + 0.1M output at $10
        assert (price.cost_usd, price.price_source, price.price_revision) == (2.0, "explicit", "arm sheet")


def test_a_fallback_is_priced_at_its_own_sheet():
    price = price_arm_call(USAGE, arm(), "backup")
    # 0.6M uncached at $2, 0.4M cached at $0.5, 0.1M output at $20
    assert price.cost_usd == pytest.approx(1.2 + 0.2 + 2.0, rel=1e-12)
    assert price.price_revision == "arm sheet: fallback_prices.backup"


def test_an_unlisted_fallback_comes_from_litellms_map_or_is_unpriced():
    known = price_arm_call(USAGE, arm(), "gpt-5-mini")
    sheet = litellm_prices("gpt-5-mini")
    assert known.price_source == "litellm" and known.price_revision.startswith("litellm 1.110.2")
    assert known.cost_usd == pytest.approx((0.6 * sheet.input + 0.4 * sheet.cached_input + 0.1 * sheet.output),
                                           rel=1e-12)
    unknown = price_arm_call(USAGE, arm(), "nobody-prices-this-model")
    assert (unknown.cost_usd, unknown.price_source) == (None, "unpriced")


def test_a_bad_fallback_price_is_named_with_its_path():
    raw = {"name": "r", "suite": "builtin", "arms": [{"name": "h", "adapter": "router", "model": "m",
                                                       "base_url": "http://x/v1",
                                                       "fallback_prices": {"backup": {"input": -1, "output": 1}}}]}
    with pytest.raises(SpecError, match=r"arms\.0\.fallback_prices\.backup\.input"):
        parse_run_spec(raw)
