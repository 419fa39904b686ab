"""The self-hosted cost model: lease cost, utilization, fully loaded and marginal attribution, fitted weights from
SGLang's counters, sandbox cost. Every fixture is hand-computed; the sums are written out beside the asserts."""

from __future__ import annotations

import asyncio
import math
import os
import subprocess
import sys
import threading
from datetime import datetime, timedelta, timezone
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest
from hypothesis import example, given
from hypothesis import strategies as st

from adapters.base import ServerSample
from adapters.sglang import SGLangAdapter
from compare.costs import (CACHED_PREFILL_FRACTION, DEFAULT_WEIGHTS, FORWARD_SECONDS, GPU_SECONDS, Lease,
                           LedgerLease, Sample, Work, WorkWeights, attribute_lease, busy_seconds, fit_weights,
                           lease_cost_usd, lease_end, lease_seconds, marginal_cost,
                           measured_saturation_tokens_per_sec, read_busy, samples_of, sandbox_cost_usd, utilization)

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


def test_an_open_lease_ends_at_its_owners_last_heartbeat_whatever_the_time():
    beating = LedgerLease(**H200_PAIR.model_dump(exclude={"ended_at"}), heartbeat_at=T0 + timedelta(minutes=30))
    # the bill stops at the heartbeat: 2 × $3.50 × 0.5 h = $3.50, today and a year later
    for now in (T0 + timedelta(minutes=31), T0 + timedelta(days=365), None):
        assert lease_end(beating, now) == T0 + timedelta(minutes=30)
        assert lease_cost_usd(beating, now) == 3.50
    assert utilization(1800.0, beating, T0 + timedelta(days=2)) == 0.5  # 1,800 busy GPU-s of 2 × 1,800
    # a closed lease ends where it ended; an open one without a heartbeat (an older ledger's) still ends now
    closed = beating.model_copy(update={"ended_at": T0 + timedelta(minutes=90)})
    assert lease_cost_usd(closed, T0 + timedelta(days=365)) == 10.50
    no_beat = beating.model_copy(update={"heartbeat_at": None})
    assert lease_cost_usd(no_beat, T0 + timedelta(minutes=60)) == 7.00
    # a heartbeat recorded before the start (clock skew) bills nothing, never a negative
    skewed = beating.model_copy(update={"heartbeat_at": T0 - timedelta(seconds=5)})
    assert lease_seconds(skewed) == 0.0


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


def test_busy_seconds_sum_every_category_but_idle_and_give_utilization():
    idle = 'sglang:gpu_execution_seconds_total{category="forward_idle",model_name="frognano-4b"}'
    mixed = 'sglang:gpu_execution_seconds_total{category="forward_mixed",model_name="frognano-4b"}'
    samples = samples_of(TWO_SCRAPES) + [Sample(T0, idle, 1.0), Sample(T0 + timedelta(seconds=60), idle, 21.5),
                                         Sample(T0, mixed, 0.0), Sample(T0 + timedelta(seconds=60), mixed, 2.0)]
    busy = busy_seconds(samples)
    assert busy == 35.0  # 3 extend + 30 decode + 2 mixed; the 20.5 s of idle passes served nobody
    one_gpu = Lease(kind="gpu", hardware="H100", count=1, usd_per_hour=2.95, started_at=T0,
                    ended_at=T0 + timedelta(seconds=100))
    assert utilization(busy, one_gpu) == pytest.approx(0.35, rel=1e-12)  # 35 ÷ 100
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


# --- the busy counter under both of SGLang's spellings ---------------------------------------------------------------
# Exposition texts as SGLang serves them on /metrics (two schedulers, tp 2), read by the SGLang adapter over HTTP with
# the same prometheus parser it uses on a real server. Up to 0.5.10 the counter is gpu_execution_seconds_total with
# categories "forward_" + the ForwardMode name; from 0.5.11 forward_execution_seconds_total with the bare name.

def exposition(name: str, prefix: str, extend: float, decode: float, idle: float, compute: float,
               decode_tokens: float) -> str:
    lines = [f"# HELP {name.removesuffix('_total')} Total time that GPU is busy executing model forward passes.",
             f"# TYPE {name.removesuffix('_total')} counter"]
    for rank in ("0", "1"):  # each scheduler drives one GPU and times its own passes
        for category, seconds in (("extend", extend), ("decode", decode), ("idle", idle)):
            lines.append(f'{name}{{category="{prefix}{category}",model_name="frognano-4b",tp_rank="{rank}"}} '
                         f"{seconds}")
            lines.append(f'{name.removesuffix("_total")}_created{{category="{prefix}{category}",'
                         f'model_name="frognano-4b",tp_rank="{rank}"}} 1.7e9')
    lines += ["# HELP sglang:realtime_tokens Total number of tokens processed.",
              "# TYPE sglang:realtime_tokens counter"]
    for rank in ("0", "1"):  # both tensor-parallel ranks count the same batch
        for mode, tokens in (("prefill_compute", compute), ("decode", decode_tokens)):
            lines.append(f'sglang:realtime_tokens_total{{mode="{mode}",model_name="frognano-4b",tp_rank="{rank}"}} '
                         f"{tokens}")
    lines += ["# HELP sglang:num_running_reqs The number of running requests.", "# TYPE sglang:num_running_reqs gauge",
              'sglang:num_running_reqs{model_name="frognano-4b",tp_rank="0"} 3.0']
    return "\n".join(lines) + "\n"


class MetricsServer:
    """A real HTTP server answering /metrics with whatever text is set, for the adapter to scrape."""

    def __init__(self):
        self.text = ""
        owner = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self):
                body = owner.text.encode()
                self.send_response(200 if self.path == "/metrics" else 404)
                self.send_header("Content-Type", "text/plain; version=0.0.4")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, *args):
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)

    def __enter__(self):
        self.thread.start()
        return self

    def __exit__(self, *exc):
        self.server.shutdown()
        self.server.server_close()

    def scrape_twice(self, first: str, second: str) -> list[ServerSample]:
        adapter = SGLangAdapter(base_url=f"http://127.0.0.1:{self.server.server_port}/v1", model="frognano-4b",
                                sampling={}, gpu_type="H200", gpu_count=2, usd_per_gpu_hour=3.5)

        async def scrape() -> list[ServerSample]:
            scrapes = []
            try:
                for offset, text in ((0, first), (60, second)):
                    self.text = text
                    sample = await adapter.sample_metrics()
                    scrapes.append(sample.model_copy(update={"taken_at": T0 + timedelta(seconds=offset)}))
            finally:
                await adapter.stop()
            return scrapes
        return asyncio.run(scrape())


@pytest.mark.parametrize("name, prefix", [(FORWARD_SECONDS, ""), (GPU_SECONDS, "forward_")],
                         ids=["0.5.11-and-later", "up-to-0.5.10"])
def test_either_spelling_of_the_busy_counter_gives_busy_seconds_and_weights(name, prefix):
    with MetricsServer() as server:
        scrapes = server.scrape_twice(exposition(name, prefix, 10.0, 20.0, 5.0, 100_000, 50_000),
                                      exposition(name, prefix, 13.0, 50.0, 45.0, 160_000, 80_000))
    samples = samples_of(scrapes)
    busy = read_busy(samples)
    # per GPU +3 s extend and +30 s decode (the +40 s of idle passes are not busy), two GPUs
    assert busy == (name, 66.0, None)
    weights = fit_weights(samples)
    # 6 GPU-s ÷ 60,000 prefill tokens, 60 GPU-s ÷ 30,000 decode tokens (both ranks count the same tokens once)
    assert (weights.source, weights.uncached_prefill, weights.decode) == ("fitted", 1e-04, 0.002)
    assert name in weights.note
    lease = Lease(kind="gpu", hardware="H200", count=2, usd_per_hour=3.5, started_at=T0,
                  ended_at=T0 + timedelta(seconds=110))
    assert utilization(busy.seconds, lease) == pytest.approx(0.3, rel=1e-12)  # 66 ÷ (110 s × 2 GPUs)


def test_a_server_exporting_both_spellings_is_read_once_under_the_new_name():
    with MetricsServer() as server:
        first = exposition(FORWARD_SECONDS, "", 10.0, 20.0, 0.0, 100_000, 50_000)
        second = exposition(FORWARD_SECONDS, "", 13.0, 50.0, 0.0, 160_000, 80_000)
        old = exposition(GPU_SECONDS, "forward_", 0.0, 0.0, 0.0, 0, 0)
        scrapes = server.scrape_twice(first + old.split("# HELP sglang:realtime")[0],
                                      second + old.split("# HELP sglang:realtime")[0])
    assert read_busy(samples_of(scrapes)) == (FORWARD_SECONDS, 66.0, None)  # not 66 + the old one's 0, once


def test_without_a_busy_counter_the_reason_says_how_to_get_one():
    no_counter = samples_of(TWO_SCRAPES)
    no_counter = [s for s in no_counter if "execution_seconds" not in s.metric]
    busy = read_busy(no_counter)
    assert busy.counter is None and busy.seconds is None
    assert busy.reason.startswith(f"the server did not export {FORWARD_SECONDS} (SGLang 0.5.11 and later) or "
                                  f"{GPU_SECONDS} (up to 0.5.10): start SGLang with "
                                  "SGLANG_ENABLE_METRICS_DEVICE_TIMER=1")
    assert fit_weights(no_counter) is None
    once = [Sample(T0, f'{FORWARD_SECONDS}{{category="decode",model_name="x"}}', 3.0)]
    assert read_busy(once).reason.startswith(f"{FORWARD_SECONDS} was sampled fewer than twice")


def test_the_printed_sglang_launch_turns_the_device_timer_on(tmp_path):
    """`leafcost sglang command` prints a shell line; run through a real shell with a stand-in `python` first on
    PATH, the server process gets SGLANG_ENABLE_METRICS_DEVICE_TIMER=1 in its environment and the metrics flags."""
    leafcost = Path(sys.executable).with_name("leafcost")
    line = subprocess.run([str(leafcost), "sglang", "command", "--tp", "2"], capture_output=True, text=True,
                          timeout=120, check=True).stdout.strip()
    assert line.startswith("SGLANG_ENABLE_METRICS_DEVICE_TIMER=1 python -m sglang.launch_server ")
    stand_in = tmp_path / "python"
    stand_in.write_text('#!/bin/sh\necho "timer=$SGLANG_ENABLE_METRICS_DEVICE_TIMER"\nprintf "%s\\n" "$@"\n')
    stand_in.chmod(0o755)
    environment = {k: v for k, v in os.environ.items() if k != "SGLANG_ENABLE_METRICS_DEVICE_TIMER"}
    environment["PATH"] = f"{tmp_path}:{environment.get('PATH', '/usr/bin:/bin')}"
    ran = subprocess.run(["sh", "-c", line], capture_output=True, text=True, env=environment, timeout=60, check=True)
    received = ran.stdout.splitlines()
    assert received[0] == "timer=1"
    assert received[1:4] == ["-m", "sglang.launch_server", "--model-path"]
    assert "--enable-metrics" in received and received[received.index("--tp-size") + 1] == "2"
