"""Pricing a hosted call: the arm's sheet, a fallback's sheet, litellm's pinned map, or unpriced."""

from __future__ import annotations

import os
from importlib.metadata import version

import duckdb
import pytest

from adapters.base import Usage
from compare.demo import LOCAL_ROUTER_PRICED_AS
from compare.pricing import (UNPRICED_CALL_SQL, _expand_aliases, _litellm_model_cost, explicit_cost, litellm_prices,
                             litellm_revision, price_call, unmodelled_tier_threshold)
from compare.spec import Prices, PriceTier, RouterArm, SpecError, parse_run_spec

USAGE = Usage(prompt_tokens=1_000_000, completion_tokens=100_000, cached_tokens=400_000, reasoning_tokens=0)


def arm(**changes) -> RouterArm:
    return RouterArm.model_validate({"name": "hosted", "adapter": "router", "model": "hosted-gpt",
                                     "base_url": "http://127.0.0.1:9/v1", "prices": {"input": 1.0, "output": 10.0},
                                     "fallback_prices": {"backup": {"input": 2.0, "output": 20.0,
                                                                    "cached_input": 0.5}}, **changes})


def test_the_arms_own_model_is_priced_at_the_arms_sheet():
    for router_model in (None, "hosted-gpt"):
        price = arm().price_call(USAGE, router_model)
        # 1M input (cached at the input rate: the sheet lists no cached rate) + 0.1M output at $10
        assert (price.cost_usd, price.price_source, price.price_revision) == (2.0, "explicit", "arm sheet")


def test_a_fallback_is_priced_at_its_own_sheet():
    price = arm().price_call(USAGE, "backup")
    # 0.6M uncached at $2, 0.4M cached at $0.5, 0.1M output at $20
    assert price.cost_usd == pytest.approx(1.2 + 0.2 + 2.0, rel=1e-12)
    assert price.price_revision == "arm sheet: fallback_prices.backup"


def test_an_unlisted_fallback_comes_from_litellms_map_or_is_unpriced():
    known = arm().price_call(USAGE, "gpt-5-mini")
    sheet = litellm_prices("gpt-5-mini")
    assert known.price_source == "litellm" and known.price_revision.startswith("litellm 1.110.2")
    assert known.cost_usd == pytest.approx((0.6 * sheet.input + 0.4 * sheet.cached_input + 0.1 * sheet.output),
                                           rel=1e-12)
    unknown = arm().price_call(USAGE, "nobody-prices-this-model")
    assert (unknown.cost_usd, unknown.price_source) == (None, "unpriced")


def test_a_bad_fallback_price_is_named_with_its_path():
    raw = {"name": "r", "suite": "builtin", "arms": [{"name": "h", "adapter": "router", "model": "m",
                                                       "base_url": "http://x/v1",
                                                       "fallback_prices": {"backup": {"input": -1, "output": 1}}}]}
    with pytest.raises(SpecError, match=r"arms\.0\.fallback_prices\.backup\.input"):
        parse_run_spec(raw)


# --- explicit_cost: every token kind at its own rate (USD per 1M tokens; sums written out) ---------------------------

SONNET = Prices(input=3.0, output=15.0, cached_input=0.30, cache_write=3.75)  # claude-sonnet-4-5 list (costs.md)


def test_cached_input_is_billed_at_the_cached_rate():
    usage = Usage(prompt_tokens=100_000, cached_tokens=80_000, completion_tokens=2_000)
    # 20,000 uncached × $3 = 0.06; 80,000 cached × $0.30 = 0.024; 2,000 output × $15 = 0.03 → $0.114
    assert explicit_cost(usage, SONNET) == pytest.approx(0.114, rel=1e-12)
    # no cached rate listed: litellm 1.110 bills cached tokens at the input rate → 100,000 × $3 + 0.03 = $0.33
    assert explicit_cost(usage, Prices(input=3.0, output=15.0)) == pytest.approx(0.33, rel=1e-12)


def test_cache_writes_are_billed_at_the_cache_write_rate_or_the_input_rate():
    usage = Usage(prompt_tokens=50_000, cached_tokens=10_000, cache_write_tokens=30_000, completion_tokens=1_000)
    # 10,000 uncached × $3 = 0.03; 10,000 cached × $0.30 = 0.003; 30,000 written × $3.75 = 0.1125;
    # 1,000 output × $15 = 0.015 → $0.1605
    assert explicit_cost(usage, SONNET) == pytest.approx(0.1605, rel=1e-12)
    # no write rate: the 30,000 written tokens at the input rate, 30,000 × $3 = 0.09 → $0.138
    no_write_rate = SONNET.model_copy(update={"cache_write": None})
    assert explicit_cost(usage, no_write_rate) == pytest.approx(0.138, rel=1e-12)
    assert round(explicit_cost(usage, SONNET), 2) == 0.16 and round(explicit_cost(usage, no_write_rate), 2) == 0.14


def test_reasoning_is_billed_at_its_own_rate_when_listed():
    usage = Usage(prompt_tokens=10_000, completion_tokens=5_000, reasoning_tokens=4_000)
    own_rate = Prices(input=1.25, output=10.0, reasoning=20.0)
    # 10,000 input × $1.25 = 0.0125; 1,000 visible output × $10 = 0.01; 4,000 reasoning × $20 = 0.08 → $0.1025
    assert explicit_cost(usage, own_rate) == pytest.approx(0.1025, rel=1e-12)
    # no reasoning rate: all 5,000 completion tokens at $10 = 0.05 → $0.0625
    assert explicit_cost(usage, Prices(input=1.25, output=10.0)) == pytest.approx(0.0625, rel=1e-12)


TIERED = Prices(input=1.25, output=10.0, cached_input=0.125,
                above_200k=PriceTier(input=2.5, output=15.0, cached_input=0.25))


def test_the_above_200k_tier_switches_the_whole_request():
    below = Usage(prompt_tokens=199_999, cached_tokens=100_000, completion_tokens=10_000)
    above = Usage(prompt_tokens=200_001, cached_tokens=100_000, completion_tokens=10_000)
    # below: 99,999 × $1.25 = 0.12499875; 100,000 cached × $0.125 = 0.0125; 10,000 × $10 = 0.1 → $0.23749875
    assert explicit_cost(below, TIERED) == pytest.approx(0.23749875, rel=1e-12)
    # above, every token at the tier: 100,001 × $2.5 = 0.2500025; 100,000 × $0.25 = 0.025; 10,000 × $15 = 0.15
    # → $0.4250025 (not just the tokens past 200k)
    assert explicit_cost(above, TIERED) == pytest.approx(0.4250025, rel=1e-12)
    # exactly 200,000 is not above: 100,000 × $1.25 + 0.0125 + 0.1 = $0.2375
    at = Usage(prompt_tokens=200_000, cached_tokens=100_000, completion_tokens=10_000)
    assert explicit_cost(at, TIERED) == pytest.approx(0.2375, rel=1e-12)


def test_in_the_tier_missing_cache_rates_fall_back_to_the_tier_input_and_reasoning_to_the_tier_output():
    sheet = Prices(input=1.25, output=10.0, cached_input=0.125, reasoning=40.0,
                   above_200k=PriceTier(input=2.5, output=15.0))
    above = Usage(prompt_tokens=200_001, cached_tokens=1_000, cache_write_tokens=2_000, completion_tokens=3_000,
                  reasoning_tokens=1_000)
    # 197,001 uncached × $2.5 = 0.4925025; 1,000 cached × $2.5 = 0.0025; 2,000 written × $2.5 = 0.005;
    # 2,000 output × $15 = 0.03; 1,000 reasoning × $15 = 0.015 → $0.5450025
    assert explicit_cost(above, sheet) == pytest.approx(0.5450025, rel=1e-12)
    below = above.model_copy(update={"prompt_tokens": 199_999})
    # 196,999 × $1.25 = 0.24624875; 1,000 × $0.125 = 0.000125; 2,000 written × $1.25 (no write rate) = 0.0025;
    # 2,000 × $10 = 0.02; 1,000 reasoning × $40 = 0.04 → $0.30887375
    assert explicit_cost(below, sheet) == pytest.approx(0.30887375, rel=1e-12)


def test_the_markup_applies_to_the_whole_bill():
    usage = Usage(prompt_tokens=1_000_000, completion_tokens=100_000)
    # 1M × $1 + 0.1M × $10 = $2.00, × 1.055 = $2.11
    assert explicit_cost(usage, Prices(input=1.0, output=10.0, markup_pct=5.5)) == pytest.approx(2.11, rel=1e-12)
    assert explicit_cost(usage, Prices(input=1.0, output=10.0)) == 2.0


# --- litellm's pinned map --------------------------------------------------------------------------------------------

def test_gemini_2_5_pro_tier_comes_from_litellms_map_and_bills_as_litellm_does():
    sheet = litellm_prices("gemini-2.5-pro")
    # litellm 1.110.2: input 1.25e-06, output 1e-05, cache read 1.25e-07; above 200k: input 2.5e-06, output 1.5e-05,
    # cache read 2.5e-07, cache creation 2.5e-07 (per token)
    assert (sheet.input, sheet.output, sheet.cached_input) == pytest.approx((1.25, 10.0, 0.125), rel=1e-12)
    tier = sheet.above_200k
    assert (tier.input, tier.output, tier.cached_input, tier.cache_write) == pytest.approx((2.5, 15.0, 0.25, 0.25),
                                                                                          rel=1e-12)
    for prompt, expected in ((199_999, 0.23749875), (200_001, 0.4250025)):  # the sums of the tier test above
        usage = Usage(prompt_tokens=prompt, cached_tokens=100_000, completion_tokens=10_000, reasoning_tokens=4_000)
        price = price_call(usage, None, "gemini-2.5-pro")
        assert price.price_source == "litellm" and price.cost_usd == pytest.approx(expected, rel=1e-12)
        assert price.cost_usd == pytest.approx(_litellm_own_cost("gemini-2.5-pro", usage), rel=1e-12)


def _litellm():
    """litellm itself, on its bundled map (never a download at import), for checking our reading of its map."""
    os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
    import litellm

    return litellm


# Every model the tests, the presets, the demo and the docs price from the map, and names it does not price.
MAP_MODELS = ("gpt-5-mini", "openai/gpt-5-mini", LOCAL_ROUTER_PRICED_AS, "gemini-2.5-pro", "gpt-5.4", "openai/gpt-5",
              "claude-sonnet-4-5", "anthropic/claude-sonnet-4.5", "nobody-prices-this-model",
              "no-such-model-anywhere", "openai/no-such-model-anywhere")


def test_the_map_read_from_litellms_json_is_litellms_own_model_cost():
    """compare.pricing reads the JSON litellm ships without importing litellm; what it reads is `litellm.model_cost`
    entry for entry (aliases served as their owner, the generalization rules dropped) and the revision is the
    installed litellm's."""
    litellm = _litellm()
    ours = _litellm_model_cost()
    assert ours.keys() == litellm.model_cost.keys() and ours == litellm.model_cost
    aliases = [name for name, entry in litellm.model_cost.items() if getattr(entry, "names", (name,))[0] != name]
    assert aliases and all(ours[name] == litellm.model_cost[name] for name in aliases)
    assert litellm_revision() == f"litellm {version('litellm')} local map"


def test_alias_rules_are_litellms_own_on_every_conflict():
    """The alias cases the bundled map may hold one day: pointers (to an entry, to nothing, to a pointer), alias
    lists (new names, a name taken by an entry, one claimed twice, one a pointer row also claims, not a list)."""
    import copy

    from litellm.litellm_core_utils.get_model_cost_map import _expand_model_aliases

    _litellm()
    raw = {"a": {"input_cost_per_token": 1, "aliases": ["a1", "b", "shared", "p1"]},
           "b": {"input_cost_per_token": 2, "aliases": ["shared", "b1"]},
           "c": {"input_cost_per_token": 3, "aliases": "not-a-list"},
           "p1": {"alias_of": "b"}, "p2": {"alias_of": "c"}, "p3": {"alias_of": "nothing"}, "p4": {"alias_of": "p2"},
           "a1": {"alias_of": "c"}}
    theirs = _expand_model_aliases(copy.deepcopy(raw))
    ours = _expand_aliases(copy.deepcopy(raw))
    assert ours.keys() == theirs.keys() and ours == theirs
    assert ours["p1"] == ours["a"] and ours["p2"] == ours["c"] and "p3" not in ours and "p4" not in ours


@pytest.mark.parametrize("model", MAP_MODELS)
def test_a_map_price_is_the_one_litellm_looks_up(model):
    litellm = _litellm()
    entry = litellm.model_cost.get(model) or litellm.model_cost.get(model.split("/", 1)[-1])
    sheet = litellm_prices(model)
    if not entry or not entry.get("input_cost_per_token") or not entry.get("output_cost_per_token"):
        assert sheet is None and price_call(USAGE, None, model).price_source == "unpriced"
        return
    info = litellm.get_model_info(entry_model := model if model in litellm.model_cost else model.split("/", 1)[-1])
    rates = {"input": "input_cost_per_token", "output": "output_cost_per_token",
             "cached_input": "cache_read_input_token_cost", "cache_write": "cache_creation_input_token_cost",
             "reasoning": "output_cost_per_reasoning_token"}
    for field, key in rates.items():
        theirs = info.get(key)
        assert getattr(sheet, field) == (None if theirs is None else pytest.approx(theirs * 1_000_000, rel=1e-12))
    usage = Usage(prompt_tokens=120_000, cached_tokens=40_000, completion_tokens=9_000, reasoning_tokens=3_000)
    price = price_call(usage, None, model)
    assert (price.price_source, price.price_revision) == ("litellm", litellm_revision())
    assert price.cost_usd == pytest.approx(_litellm_own_cost(entry_model, usage), rel=1e-12)


def _litellm_own_cost(model: str, usage: Usage) -> float:
    litellm = _litellm()
    from litellm.types.utils import CompletionTokensDetailsWrapper, PromptTokensDetailsWrapper
    from litellm.types.utils import Usage as LitellmUsage

    theirs = LitellmUsage(prompt_tokens=usage.prompt_tokens, completion_tokens=usage.completion_tokens,
                          total_tokens=usage.prompt_tokens + usage.completion_tokens,
                          prompt_tokens_details=PromptTokensDetailsWrapper(cached_tokens=usage.cached_tokens),
                          completion_tokens_details=CompletionTokensDetailsWrapper(
                              reasoning_tokens=usage.reasoning_tokens))
    prompt_cost, completion_cost = litellm.cost_per_token(model=model, usage_object=theirs)
    return prompt_cost + completion_cost


def test_a_model_without_a_200k_tier_has_none_and_other_tiers_are_unpriced_past_their_threshold():
    assert litellm_prices("gpt-5-mini").above_200k is None
    # gpt-5.4's map has only a 272k tier, which Prices cannot hold: below it priced, past it no number
    assert unmodelled_tier_threshold("gpt-5.4") == 272_000 and litellm_prices("gpt-5.4").above_200k is None
    assert price_call(Usage(prompt_tokens=272_000, completion_tokens=1), None, "gpt-5.4").price_source == "litellm"
    past = price_call(Usage(prompt_tokens=272_001, completion_tokens=1), None, "gpt-5.4")
    assert (past.cost_usd, past.price_source) == (None, "unpriced")
    assert "272000" in past.price_revision


# --- the unpriced guard ----------------------------------------------------------------------------------------------

def test_no_cost_or_a_zero_cost_for_a_hosted_call_that_used_tokens_is_unpriced():
    """The rule the summary runs, on real DuckDB rows (the ledger's columns)."""
    calls = [  # (id, cost_usd, prompt_tokens, completion_tokens, price_source, unpriced?)
        (1, None, 10, 0, "unpriced", True), (2, 0.0, 10, 0, "litellm", True), (3, 0.0, 0, 1, "explicit", True),
        (4, 1e-9, 10, 0, "explicit", False),
        (5, 0.0, 0, 0, "litellm", False), (6, None, 0, 0, "unpriced", False),  # no tokens: 0.0 is its right price
        (7, None, 10, 5, "lease", False)]  # a self-hosted arm's call: paid by the lease
    with duckdb.connect() as conn:
        conn.execute("CREATE TABLE model_calls (id INT, cost_usd DOUBLE, prompt_tokens BIGINT, "
                     "completion_tokens BIGINT, price_source VARCHAR)")
        conn.executemany("INSERT INTO model_calls VALUES (?, ?, ?, ?, ?)", [c[:5] for c in calls])
        found = {row[0] for row in conn.execute(f"SELECT id FROM model_calls WHERE {UNPRICED_CALL_SQL}").fetchall()}
    assert found == {c[0] for c in calls if c[5]}
