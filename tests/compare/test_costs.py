"""The self-hosted cost model: lease cost, utilization, fully loaded and marginal attribution, fitted weights from
SGLang's counters, sandbox cost. Every fixture is hand-computed; the sums are written out beside the asserts."""

from __future__ import annotations

import math
from datetime import datetime, timedelta, timezone

import pytest
from hypothesis import example, given
from hypothesis import strategies as st

from adapters.base import ServerSample
from compare.costs import (CACHED_PREFILL_FRACTION, DEFAULT_WEIGHTS, Lease, Sample, Work, WorkWeights,
                           attribute_lease, busy_seconds, fit_weights, lease_cost_usd, lease_seconds, marginal_cost,
                           measured_saturation_tokens_per_sec, samples_of, sandbox_cost_usd, utilization)

T0 = datetime(2026, 10, 1, 12, 0, tzinfo=timezone.utc)
H200_PAIR = Lease(kind="gpu", hardware="H200", count=2, usd_per_hour=3.50, started_at=T0,
                  ended_at=T0 + timedelta(minutes=90))


# --- leases and the sandbox ------------------------------------------------------------------------------------------

def test_a_two_h200_lease_for_ninety_minutes_costs_ten_fifty():
    # 2 GPUs × $3.50 × 1.5 h = $10.50
    assert lease_seconds(H200_PAIR) == 5400.0
    assert lease_cost_usd(H200_PAIR) == 10.50


def test_an_open_lease_ends_now():
    open_lease = H200_PAIR.model_copy(update={"ended_at": None})
    # 30 min so far: 2 × $3.50 × 0.5 h = $3.50
    assert lease_cost_usd(open_lease, now=T0 + timedelta(minutes=30)) == 3.50
    with pytest.raises(ValueError, match="before it starts"):
        lease_seconds(open_lease, now=T0 - timedelta(seconds=1))


def test_the_local_arms_cpu_lease_is_one_machine():
    cpu = Lease(kind="cpu", hardware="cpu", count=1, usd_per_hour=0.10, started_at=T0,
                ended_at=T0 + timedelta(hours=3))
    # 1 × $0.10 × 3 h = $0.30
    assert lease_cost_usd(cpu) == pytest.approx(0.30, rel=1e-12)


def test_sandbox_cost_is_cpu_seconds_at_the_vcpu_hour_price():
    # 3,600 CPU-s = 1 vCPU-hour at $0.045 = $0.045; 900 CPU-s = 0.25 h → $0.01125
    assert sandbox_cost_usd(3600, 0.045) == 0.045
    assert sandbox_cost_usd(900, 0.045) == pytest.approx(0.01125, rel=1e-12)
    with pytest.raises(ValueError):
        sandbox_cost_usd(-1, 0.045)


# --- fully loaded attribution ----------------------------------------------------------------------------------------

# Default weights (1, 0.1, 5): a = 1,000 + 9,000 × 0.1 + 200 × 5 = 2,900 weighted; b twice a's work = 5,800.
EPISODES = {"a": Work(uncached_prefill=1_000, cached_prefill=9_000, decode=200),
            "b": Work(uncached_prefill=2_000, cached_prefill=18_000, decode=400)}


def test_the_whole_lease_idle_time_included_is_split_by_weighted_work():
    busy = 3_780.0  # GPU-seconds that ran forward passes, of the 2 × 5,400 = 10,800 paid: 35 % utilization
    assert utilization(busy, H200_PAIR) == pytest.approx(0.35, rel=1e-12)
    parts = attribute_lease(lease_cost_usd(H200_PAIR), EPISODES, DEFAULT_WEIGHTS)
    # the whole $10.50, not the busy 35 % of it ($3.675): a gets 10.50 × 2,900 / 8,700 = $3.50, b $7.00
    assert parts == {"a": 3.50, "b": 7.00}
    assert math.fsum(parts.values()) == 10.50
    assert parts["b"] == 2 * parts["a"]


def test_weights_set_the_split_decode_costs_more_than_prefill():
    prefill_only = Work(uncached_prefill=5_000, cached_prefill=0, decode=0)
    decode_only = Work(uncached_prefill=0, cached_prefill=0, decode=1_000)
    parts = attribute_lease(6.0, {"p": prefill_only, "d": decode_only}, DEFAULT_WEIGHTS)
    # 5,000 × 1 = 5,000 weighted each (1,000 decode × 5): $3.00 each
    assert parts == {"p": 3.0, "d": 3.0}


def test_the_parts_sum_exactly_even_when_they_do_not_divide():
    parts = attribute_lease(0.1, {k: Work(uncached_prefill=1, cached_prefill=0, decode=0) for k in "xyz"},
                            DEFAULT_WEIGHTS)
    assert math.fsum(parts.values()) == 0.1
    assert all(part == pytest.approx(0.1 / 3, rel=1e-12) for part in parts.values())


def test_no_work_splits_evenly_and_no_episodes_is_empty():
    idle = Work(uncached_prefill=0, cached_prefill=0, decode=0)
    parts = attribute_lease(10.0, {"a": idle, "b": idle, "c": idle}, DEFAULT_WEIGHTS)
    assert math.fsum(parts.values()) == 10.0 and all(p == pytest.approx(10 / 3, rel=1e-12) for p in parts.values())
    assert attribute_lease(10.0, {}, DEFAULT_WEIGHTS) == {}
    with pytest.raises(ValueError):
        attribute_lease(-1.0, EPISODES, DEFAULT_WEIGHTS)


WEIGHT = st.floats(min_value=1e-9, max_value=1e3, allow_nan=False, allow_infinity=False)
WORK = st.builds(Work, uncached_prefill=st.integers(0, 10**9), cached_prefill=st.integers(0, 10**9),
                 decode=st.integers(0, 10**8))


@given(lease_cost=st.floats(min_value=0, max_value=1e7, allow_nan=False, allow_infinity=False),
       works=st.dictionaries(st.text(min_size=1, max_size=8), WORK, max_size=40),
       uncached=WEIGHT, cached=st.one_of(st.just(0.0), WEIGHT), decode=WEIGHT)
# Found by hypothesis: the largest share's unrounded remainder lands on a rounding tie and never reaches the lease.
@example(lease_cost=437.40832214823234, works={"0": Work(uncached_prefill=0, cached_prefill=0, decode=118_512),
                                               "1": Work(uncached_prefill=344_114, cached_prefill=0, decode=0)},
         uncached=1.0, cached=0.0, decode=24.0)
def test_attributions_are_non_negative_and_sum_exactly_to_the_lease(lease_cost, works, uncached, cached, decode):
    weights = WorkWeights(uncached_prefill=uncached, cached_prefill=cached, decode=decode, source="default",
                          note="generated")
    parts = attribute_lease(lease_cost, works, weights)
    assert set(parts) == set(works)
    assert all(part >= 0 for part in parts.values())
    if works:
        assert math.fsum(parts.values()) == lease_cost


# --- marginal --------------------------------------------------------------------------------------------------------

BIG = {"a": Work(uncached_prefill=100_000, cached_prefill=900_000, decode=20_000),  # 1,020,000 tokens
       "b": Work(uncached_prefill=200_000, cached_prefill=1_800_000, decode=40_000)}  # 2,040,000 tokens


def test_marginal_cost_is_the_tokens_at_saturation_throughput():
    usd_per_second = 7.0 / 3600  # the 2×H200 lease: 2 × $3.50 an hour
    parts = marginal_cost(BIG, DEFAULT_WEIGHTS, usd_per_second=usd_per_second, saturation_tokens_per_sec=12_500)
    # 3,060,000 tokens ÷ 12,500 tok/s = 244.8 s × $7/3600 = $0.476, split 1:2 by weighted work:
    # a 81.6 s → $0.158666…, b 163.2 s → $0.317333…
    assert parts["a"] == pytest.approx(81.6 * 7 / 3600, rel=1e-12)
    assert parts["b"] == pytest.approx(163.2 * 7 / 3600, rel=1e-12)
    assert (round(parts["a"], 2), round(parts["b"], 2)) == (0.16, 0.32)
    # one episode alone: its tokens ÷ throughput × $/s, the same $0.158666…
    alone = marginal_cost({"a": BIG["a"]}, DEFAULT_WEIGHTS, usd_per_second=usd_per_second,
                          saturation_tokens_per_sec=12_500)
    assert alone["a"] == pytest.approx(81.6 * 7 / 3600, rel=1e-12)
    # = fully loaded × saturated seconds ÷ lease seconds: $10.50 × 1/3 × 244.8 / 5,400
    loaded = attribute_lease(lease_cost_usd(H200_PAIR), BIG, DEFAULT_WEIGHTS)
    assert parts["a"] == pytest.approx(loaded["a"] * 244.8 / 5400, rel=1e-12)
    # the saturated seconds follow weighted work, not raw tokens: 5,000 prefill tokens and 1,000 decode tokens
    # (5,000 weighted each) take 6,000 ÷ 12,500 = 0.48 s together, 0.24 s each (not 0.40 s and 0.08 s)
    mixed = marginal_cost({"p": Work(uncached_prefill=5_000, cached_prefill=0, decode=0),
                           "d": Work(uncached_prefill=0, cached_prefill=0, decode=1_000)}, DEFAULT_WEIGHTS,
                          usd_per_second=usd_per_second, saturation_tokens_per_sec=12_500)
    assert mixed["p"] == mixed["d"] == pytest.approx(0.24 * 7 / 3600, rel=1e-12)
    with pytest.raises(ValueError):
        marginal_cost(BIG, DEFAULT_WEIGHTS, usd_per_second=usd_per_second, saturation_tokens_per_sec=0)


# --- SGLang's counters -----------------------------------------------------------------------------------------------

def scrape(at: datetime, extend: float, decode_s: float, compute: float, cache: float, decode: float,
           **labels: str) -> ServerSample:
    extra = "".join(f',{k}="{v}"' for k, v in labels.items())
    return ServerSample(taken_at=at, values={
        f'sglang:gpu_execution_seconds_total{{category="forward_extend",model_name="frognano-4b"{extra}}}': extend,
        f'sglang:gpu_execution_seconds_total{{category="forward_decode",model_name="frognano-4b"{extra}}}': decode_s,
        f'sglang:realtime_tokens_total{{mode="prefill_compute",model_name="frognano-4b"{extra}}}': compute,
        f'sglang:realtime_tokens_total{{mode="prefill_cache",model_name="frognano-4b"{extra}}}': cache,
        f'sglang:realtime_tokens_total{{mode="decode",model_name="frognano-4b"{extra}}}': decode,
        'sglang:num_running_reqs{model_name="frognano-4b"}': 7.0,  # a gauge the cost model must ignore
    })


# Two scrapes 60 s apart: +3 s extend over +60,000 computed prompt tokens, +30 s decode over +30,000 decode tokens.
TWO_SCRAPES = [scrape(T0, 10.0, 20.0, 100_000, 400_000, 50_000),
               scrape(T0 + timedelta(seconds=60), 13.0, 50.0, 160_000, 1_000_000, 80_000)]


def test_weights_are_fitted_from_two_scrapes_in_seconds_per_token():
    weights = fit_weights(samples_of(TWO_SCRAPES))
    assert weights is not None and weights.source == "fitted"
    assert weights.uncached_prefill == 5e-05  # 3 s ÷ 60,000 tokens
    assert weights.decode == 0.001  # 30 s ÷ 30,000 tokens
    assert weights.cached_prefill == pytest.approx(5e-06, rel=1e-12) and CACHED_PREFILL_FRACTION == 0.1
    assert "60000 prefill_compute tokens" in weights.note


def test_tensor_parallel_ranks_add_gpu_seconds_but_count_the_same_tokens_once():
    # tp 2: both ranks spend the 3 s / 30 s and both count the same 60,000 / 30,000 tokens
    scrapes = [ServerSample(taken_at=s.taken_at, values={**a.values, **b.values}) for s, a, b in zip(
        TWO_SCRAPES,
        [scrape(s.taken_at, *_counters(s), tp_rank="0") for s in TWO_SCRAPES],
        [scrape(s.taken_at, *_counters(s), tp_rank="1") for s in TWO_SCRAPES])]
    weights = fit_weights(samples_of(scrapes))
    assert (weights.uncached_prefill, weights.decode) == (1e-04, 0.002)  # 6 GPU-s ÷ 60,000; 60 GPU-s ÷ 30,000
    busy = busy_seconds(samples_of(scrapes))
    assert busy == 66.0  # 2 × (3 + 30)
    lease = Lease(kind="gpu", hardware="H200", count=2, usd_per_hour=3.5, started_at=T0,
                  ended_at=T0 + timedelta(seconds=100))
    assert utilization(busy, lease) == pytest.approx(0.33, rel=1e-12)  # 66 ÷ (100 s × 2 GPUs)


def _counters(sample: ServerSample) -> list[float]:
    return [v for k, v in sample.values.items() if "num_running" not in k]


def test_no_weights_without_the_counters_or_without_movement():
    assert fit_weights(samples_of(TWO_SCRAPES[:1])) is None  # one scrape: no interval
    assert fit_weights(samples_of([TWO_SCRAPES[0], TWO_SCRAPES[0].model_copy(
        update={"taken_at": T0 + timedelta(seconds=60)})])) is None  # nothing moved
    no_decode = [Sample(s.taken_at, m, v) for s in TWO_SCRAPES for m, v in s.values.items() if "decode" not in m]
    assert fit_weights(no_decode) is None
    assert fit_weights([]) is None


def test_busy_seconds_sum_every_category_and_give_utilization():
    samples = samples_of(TWO_SCRAPES) + [
        Sample(T0, 'sglang:gpu_execution_seconds_total{category="forward_idle",model_name="frognano-4b"}', 1.0),
        Sample(T0 + timedelta(seconds=60),
               'sglang:gpu_execution_seconds_total{category="forward_idle",model_name="frognano-4b"}', 1.5)]
    busy = busy_seconds(samples)
    assert busy == 33.5  # 3 extend + 30 decode + 0.5 idle
    one_gpu = Lease(kind="gpu", hardware="H100", count=1, usd_per_hour=2.95, started_at=T0,
                    ended_at=T0 + timedelta(seconds=100))
    assert utilization(busy, one_gpu) == pytest.approx(0.335, rel=1e-12)  # 33.5 ÷ 100
    assert busy_seconds([Sample(T0, 'sglang:num_running_reqs{model_name="x"}', 1.0)]) is None
    assert utilization(None, one_gpu) is None


def test_a_counter_reset_counts_what_was_added_after_it():
    name = 'sglang:gpu_execution_seconds_total{category="forward_decode",model_name="frognano-4b"}'
    samples = [Sample(T0, name, 10.0), Sample(T0 + timedelta(seconds=10), name, 15.0),
               Sample(T0 + timedelta(seconds=20), name, 3.0)]  # restarted, then ran 3 s
    assert busy_seconds(samples) == 8.0  # 5 + 3, not 3 − 10


def test_labels_are_parsed_whatever_their_order_and_escapes():
    at = [T0, T0 + timedelta(seconds=10)]
    samples = [Sample(t, 'sglang:gpu_execution_seconds_total{model_name="a\\"b,c",category="forward_decode"}', v)
               for t, v in zip(at, (1.0, 4.0))]
    samples += [Sample(t, 'sglang:gpu_execution_seconds_total_other{category="forward_decode"}', v)
                for t, v in zip(at, (0.0, 100.0))]  # a longer name sharing the prefix is not ours
    assert busy_seconds(samples) == 3.0


def test_saturation_is_the_fastest_interval_between_scrapes():
    third = scrape(T0 + timedelta(seconds=90), 15.0, 80.0, 190_000, 1_300_000, 125_000)
    samples = samples_of([*TWO_SCRAPES, third])
    # 0→60 s: (60,000 + 600,000 + 30,000) tokens ÷ 60 s = 11,500 tok/s
    # 60→90 s: (30,000 + 300,000 + 45,000) ÷ 30 s = 12,500 tok/s → the highest
    assert measured_saturation_tokens_per_sec(samples) == 12_500.0
    assert measured_saturation_tokens_per_sec(samples_of(TWO_SCRAPES)) == 11_500.0
    assert measured_saturation_tokens_per_sec(samples_of(TWO_SCRAPES[:1])) is None
