"""The self-hosted cost model (DESIGN.md "Definitions"): a lease's cost, its utilization from the server's busy
seconds, and the two ways of charging it to episodes — fully loaded (the whole lease, idle time included, split
by weighted work; the parts sum exactly to the lease) and marginal (the cost at saturation throughput). Plus the
sandbox's CPU cost. Pure functions over values the caller read from the ledger; nothing here touches storage."""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Iterable, Mapping
from datetime import datetime
from functools import lru_cache
from typing import Literal, NamedTuple

import numpy as np
from prometheus_client.parser import text_string_to_metric_families
from pydantic import BaseModel, ConfigDict, Field

from adapters.base import Lease, ServerSample, utcnow

__all__ = [
    "BUSY_COUNTERS", "CACHED_PREFILL_FRACTION", "DEFAULT_WEIGHTS", "FORWARD_SECONDS", "GPU_SECONDS", "Busy",
    "Counters", "Lease", "LedgerLease", "Sample", "Work", "WorkWeights", "attribute_lease", "busy_seconds",
    "fit_weights", "lease_cost_usd", "lease_end", "lease_seconds", "lease_window", "marginal_cost",
    "measured_saturation_tokens_per_sec", "read_busy", "samples_of", "sandbox_cost_usd", "utilization",
]

SECONDS_PER_HOUR = 3600.0

# --- leases -----------------------------------------------------------------------------------------------------
# `Lease` is the adapters' own model (adapters/base.py: kind "gpu"|"cpu", hardware, count, usd_per_hour per unit,
# started_at, ended_at), re-exported here so there is one lease type from the adapter to the ledger to the bill.


class LedgerLease(Lease):
    """A lease as the ledger holds it: the adapter's lease plus `gpu_leases.heartbeat_at`, the last time the
    process holding it was known alive (refreshed while it is open; None in ledgers from before heartbeats)."""

    heartbeat_at: datetime | None = None


def lease_end(lease: Lease, now: datetime | None = None) -> datetime:
    """Where the bill stops: the lease's end; for a lease still open, its owner's last heartbeat, so a finished
    run's figures never grow with the wall clock (the owner may be long dead); `now` (default: the current UTC
    time) only for an open lease with no heartbeat, as an older ledger wrote it."""
    if lease.ended_at is not None:
        return lease.ended_at
    heartbeat = lease.heartbeat_at if isinstance(lease, LedgerLease) else None
    if heartbeat is not None:
        return max(heartbeat, lease.started_at)
    return now or utcnow()


def lease_window(leases: Iterable[Lease], now: datetime | None = None) -> tuple[datetime, datetime]:
    """The one window an arm's leases are measured over, for the bill and the utilization alike: from the first
    start to the last `lease_end`. A killed lease ends at its last heartbeat, so server samples its dying process
    took after that heartbeat are outside the window: busy seconds the bill does not cover are not counted busy."""
    leases = list(leases)
    if not leases:
        raise ValueError("no lease: no window")
    return min(lease.started_at for lease in leases), max(lease_end(lease, now) for lease in leases)


def lease_seconds(lease: Lease, now: datetime | None = None) -> float:
    """How long the lease has been held, up to `lease_end`."""
    end = lease_end(lease, now)
    seconds = (end - lease.started_at).total_seconds()
    if seconds < 0:
        raise ValueError(f"lease ends ({end.isoformat()}) before it starts ({lease.started_at.isoformat()})")
    return seconds


def lease_cost_usd(lease: Lease, now: datetime | None = None) -> float:
    """count × $/unit-hour × hours: a 2×H200 lease at $3.50/GPU-hour for 90 min costs 2 × 3.50 × 1.5 = $10.50."""
    return lease.count * lease.usd_per_hour * (lease_seconds(lease, now) / SECONDS_PER_HOUR)


def sandbox_cost_usd(cpu_seconds: float, usd_per_vcpu_hour: float) -> float:
    """Sandbox CPU-seconds × $/vCPU-hour, the same price for every arm (3,600 CPU-s at $0.045 = $0.045)."""
    if cpu_seconds < 0 or usd_per_vcpu_hour < 0:
        raise ValueError("sandbox CPU-seconds and price must be non-negative")
    return cpu_seconds / SECONDS_PER_HOUR * usd_per_vcpu_hour


# --- work and its weights ---------------------------------------------------------------------------------------


class Work(BaseModel):
    """The tokens one episode (or any unit) made the server process, split the way they cost GPU time."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    uncached_prefill: int = Field(ge=0)  # prompt tokens computed (prompt − cached)
    cached_prefill: int = Field(ge=0)  # prompt tokens served from the prefix cache
    decode: int = Field(ge=0)  # generated tokens, reasoning included

    @property
    def tokens(self) -> int:
        return self.uncached_prefill + self.cached_prefill + self.decode


class WorkWeights(BaseModel):
    """What one token of each kind costs: GPU-seconds per token when fitted from the server's counters, relative
    units when defaulted. Attribution only uses their ratios, so both kinds split a lease the same way."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    uncached_prefill: float = Field(gt=0, allow_inf_nan=False, description="the weight of one prompt token computed")
    cached_prefill: float = Field(ge=0, allow_inf_nan=False, description="the weight of one prompt token served "
                                                                         "from the prefix cache")
    decode: float = Field(gt=0, allow_inf_nan=False, description="the weight of one generated token")
    source: Literal["fitted", "default"] = Field(description="fitted from the server's counters, or the documented "
                                                             "defaults")
    note: str = Field(description="how the weights were obtained, one sentence")

    def of(self, work: Work) -> float:
        return (work.uncached_prefill * self.uncached_prefill + work.cached_prefill * self.cached_prefill
                + work.decode * self.decode)


# A prefix-cache hit skips the token's forward pass; what is left (attention of the new tokens over the cached KV,
# the KV memory it holds) is small, and SGLang's extend busy time already charges that attention to the
# computed tokens. Both hosted sheets in costs.md price cached input at 10 % of input (gpt-5 0.125 / 1.25,
# claude-sonnet-4-5 0.30 / 3): we use the same 10 %.
CACHED_PREFILL_FRACTION = 0.1

# Relative units, uncached prefill = 1. Prefill is compute-bound and runs many tokens per forward pass; decode is
# memory-bound (one token per sequence per pass, every pass rereading the weights and KV cache), so a decode token
# holds the GPU far longer. The sheets in costs.md put output at 5× (claude-sonnet-4-5 15 / 3) to 8× (gpt-5
# 10 / 1.25) input; we take the lower 5×, as the providers' ratio also carries their margin. Fitted weights replace
# these whenever the server exposes its counters.
DEFAULT_WEIGHTS = WorkWeights(
    uncached_prefill=1.0, cached_prefill=CACHED_PREFILL_FRACTION, decode=5.0, source="default",
    note="relative defaults: decode 5× and cached prefill 0.1× an uncached prefill token, the low end of the "
         "output:input and the cached:input price ratios of the hosted sheets in costs.md")


# --- server samples ---------------------------------------------------------------------------------------------


class Sample(NamedTuple):
    """One value of one scrape: `metric` is the Prometheus sample name with its labels, exactly as exposed,
    e.g. 'sglang:realtime_tokens_total{mode="decode",model_name="frognano-4b"}'."""

    taken_at: datetime
    metric: str
    value: float


def samples_of(scrapes: Iterable[ServerSample]) -> list[Sample]:
    """The adapters' scrapes flattened to the samples the functions below read."""
    return [Sample(scrape.taken_at, metric, value) for scrape in scrapes for metric, value in scrape.values.items()]


# SGLang's busy counter, exported only with SGLANG_ENABLE_METRICS_DEVICE_TIMER=1: CUDA-event time of the forward
# passes, one series per scheduler (GPU) and category. Renamed in 0.5.11; read the newest spelling first.
FORWARD_SECONDS = "sglang:forward_execution_seconds_total"  # 0.5.11 on; category = ForwardMode name: extend, ...
GPU_SECONDS = "sglang:gpu_execution_seconds_total"  # up to 0.5.10; category = "forward_" + the same name
BUSY_COUNTERS = (FORWARD_SECONDS, GPU_SECONDS)
REALTIME_TOKENS = "sglang:realtime_tokens_total"
# Prefill: extend (a prefix-cache miss is an extend with no prefix), split_prefill (PD multiplexing's layer-split
# prefill); some releases say prefill. Decode: decode. Idle: a padding-only pass of a data-parallel worker with no
# sequence, GPU time that serves no request, so not busy. Mixed, target_verify, draft_extend and the like are busy
# but cannot be split between prefill and decode.
PREFILL_CATEGORIES = frozenset({"forward_extend", "forward_prefill", "forward_split_prefill",
                                "extend", "prefill", "split_prefill"})
DECODE_CATEGORIES = frozenset({"forward_decode", "decode"})
IDLE_CATEGORIES = frozenset({"forward_idle", "idle"})
TOKEN_MODES = frozenset({"prefill_compute", "prefill_cache", "decode"})
# SGLang runs one scheduler process per GPU and each exports its own series, told apart by these labels.
# GPU-seconds add up across them; tokens do not: tensor- and pipeline-parallel ranks all count the same batch.
_SHARD_LABELS = frozenset({"tp_rank", "pp_rank"})

Labels = frozenset[tuple[str, str]]
Series = dict[Labels, tuple[np.ndarray, np.ndarray]]  # labels → (epoch seconds, values), sorted by time


@lru_cache(maxsize=4096)
def _parse(metric: str) -> tuple[str, Labels] | None:
    """`name{k="v",...}` → (name, labels), by prometheus_client's own parser (escapes and commas in values
    included). None for a string that is not one sample name."""
    try:
        families = list(text_string_to_metric_families(f"{metric} 0\n"))
    except ValueError:
        return None
    if len(families) != 1 or len(families[0].samples) != 1:
        return None
    sample = families[0].samples[0]
    return sample.name, frozenset(sample.labels.items())


class Counters:
    """Server samples grouped once by sample name: name → (epoch seconds, values), sorted by time. Every function
    below accepts it in place of a list of samples; a long run holds tens of thousands of scrapes, and grouping
    them once keeps each reading a few numpy passes."""

    def __init__(self, groups: dict[str, tuple[np.ndarray, np.ndarray]]):
        self.groups = groups

    def within(self, start: datetime, end: datetime) -> Counters:
        """Only the points taken from `start` to `end` (see `lease_window`): the busy seconds read from them are the
        ones the lease's bill covers."""
        low, high = start.timestamp(), end.timestamp()
        kept = {}
        for metric, (seconds, values) in self.groups.items():
            inside = (seconds >= low) & (seconds <= high)
            kept[metric] = (seconds[inside], values[inside])
        return Counters(kept)

    @classmethod
    def from_samples(cls, samples: Iterable[Sample]) -> Counters:
        grouped: dict[str, list[tuple[float, float]]] = defaultdict(list)
        for taken_at, metric, value in samples:
            grouped[metric].append((taken_at.timestamp(), float(value)))
        return cls({metric: _sorted_arrays(np.array(points, dtype=np.float64))
                    for metric, points in grouped.items()})


def _sorted_arrays(points: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    points = points[np.argsort(points[:, 0], kind="stable")]
    return points[:, 0], points[:, 1]


def _counters(samples: Iterable[Sample] | Counters) -> Counters:
    return samples if isinstance(samples, Counters) else Counters.from_samples(samples)


def _series(samples: Iterable[Sample] | Counters, name: str, label: str | None = None,
            values: frozenset[str] = frozenset(), exclude: frozenset[str] = frozenset()) -> Series:
    """Every series of counter `name` (optionally only those whose `label` is in `values`, or not in `exclude`):
    labels → (epoch seconds, values) sorted by time."""
    found: Series = {}
    for metric, points in _counters(samples).groups.items():
        labels = _match(metric, name, label, values, exclude)
        if labels is not None:
            found[labels] = points
    return found


def _match(metric: str, name: str, label: str | None, values: frozenset[str],
           exclude: frozenset[str]) -> Labels | None:
    if not metric.startswith(name):
        return None
    parsed = _parse(metric)
    if parsed is None or parsed[0] != name:
        return None
    if label is not None:
        value = dict(parsed[1]).get(label)
        if (values and value not in values) or value in exclude:
            return None
    return parsed[1]


def _steps(values: np.ndarray) -> np.ndarray:
    """A counter's growth between consecutive points; one that went down was reset (server restart): it restarted
    from 0, so it grew by its new value."""
    growth = np.diff(values)
    return np.where(growth >= 0, growth, values[1:])


def _increase(points: tuple[np.ndarray, np.ndarray]) -> float | None:
    """last − first for a counter, robust to resets; None with fewer than two points (no interval to measure)."""
    if len(points[1]) < 2:
        return None
    return math.fsum(_steps(points[1]))


def _gpu_sum(per_series: Mapping[Labels, float]) -> float:
    """GPU-seconds: each series is one scheduler, one GPU, so they add."""
    return math.fsum(per_series.values())


def _token_sum(per_series: Mapping[Labels, float]) -> float:
    """Distinct tokens: the mean over the TP/PP ranks that counted the same batch, summed over the rest (data-
    parallel replicas, modes)."""
    replicas: dict[Labels, list[float]] = defaultdict(list)
    for labels, value in per_series.items():
        replicas[_replica(labels)].append(value)
    return math.fsum(math.fsum(values) / len(values) for values in replicas.values())


def _replica(labels: Labels) -> Labels:
    return frozenset(kv for kv in labels if kv[0] not in _SHARD_LABELS)


def _increases(series: Series) -> dict[Labels, float]:
    measured = {labels: _increase(points) for labels, points in series.items()}
    return {labels: value for labels, value in measured.items() if value is not None}


def fit_weights(samples: list[Sample] | Counters) -> WorkWeights | None:
    """GPU-seconds per token from SGLang's counters over the samples (last − first): prefill (extend) busy seconds
    ÷ prefill_compute tokens for an uncached prefill token, decode busy seconds ÷ decode tokens for a decode token,
    and CACHED_PREFILL_FRACTION of the uncached weight for a cached one (a cache hit skips the forward pass; the
    attention over the cached prefix is already in the extend seconds). The busy counter is whichever spelling
    the server exports (`read_busy`). None when a counter is missing or did not move. Mixed prefill+decode batches
    (mixed, off by default) cannot be split and are left out."""
    samples = _counters(samples)
    counter = read_busy(samples).counter
    if counter is None:
        return None
    extend_seconds = _gpu_sum(_increases(_series(samples, counter, "category", PREFILL_CATEGORIES)))
    decode_seconds = _gpu_sum(_increases(_series(samples, counter, "category", DECODE_CATEGORIES)))
    prefill_tokens = _token_sum(_increases(_series(samples, REALTIME_TOKENS, "mode", frozenset({"prefill_compute"}))))
    decode_tokens = _token_sum(_increases(_series(samples, REALTIME_TOKENS, "mode", frozenset({"decode"}))))
    if min(extend_seconds, decode_seconds, prefill_tokens, decode_tokens) <= 0:
        return None
    uncached = extend_seconds / prefill_tokens
    decode = decode_seconds / decode_tokens
    return WorkWeights(
        uncached_prefill=uncached, cached_prefill=uncached * CACHED_PREFILL_FRACTION, decode=decode,
        source="fitted",
        note=f"fitted from SGLang counters ({counter}): {extend_seconds:.3f} prefill GPU-s over "
             f"{prefill_tokens:.0f} prefill_compute tokens, {decode_seconds:.3f} decode GPU-s over "
             f"{decode_tokens:.0f} decode tokens, cached prefill at {CACHED_PREFILL_FRACTION:g}× uncached (assumed)")


class Busy(NamedTuple):
    """Busy GPU-seconds as read from the server's counters: which counter, how many seconds (None when not
    measured) and, when not, why."""

    counter: str | None
    seconds: float | None
    reason: str | None


NO_BUSY_COUNTER = (f"the server did not export {FORWARD_SECONDS} (SGLang 0.5.11 and later) or {GPU_SECONDS} (up "
                   "to 0.5.10): start SGLang with SGLANG_ENABLE_METRICS_DEVICE_TIMER=1 and --enable-metrics "
                   "(`leafcost sglang command` prints such a launch)")


def read_busy(samples: list[Sample] | Counters) -> Busy:
    """Busy GPU-seconds: Σ over every category but idle (and every scheduler, one per GPU) of the busy counter's
    increase, from the newest spelling the server exported with two points or more."""
    samples = _counters(samples)
    seen = [name for name in BUSY_COUNTERS if _series(samples, name)]
    for name in seen:
        measured = _increases(_series(samples, name, "category", exclude=IDLE_CATEGORIES))
        if measured:
            return Busy(name, _gpu_sum(measured), None)
    if seen:
        return Busy(None, None, f"{seen[0]} was sampled fewer than twice while the arm ran: no interval to "
                                "measure (scrape more often: metrics_interval_sec)")
    return Busy(None, None, NO_BUSY_COUNTER)


def busy_seconds(samples: list[Sample] | Counters) -> float | None:
    """`read_busy`'s seconds: None when the server exports neither busy counter with two points."""
    return read_busy(samples).seconds


def utilization(busy: float | None, lease: Lease, now: datetime | None = None) -> float | None:
    """Busy GPU-seconds ÷ the lease's GPU-seconds (lease seconds × count, up to `lease_end`): the share of the
    hardware paid for that ran forward passes. `busy` counts each GPU's own seconds (SGLang exports one series per
    scheduler and each scheduler drives one GPU), hence the × count. Not capped at 1, so a double count shows.
    None without `busy`."""
    if busy is None:
        return None
    paid = lease_seconds(lease, now) * lease.count
    return busy / paid if paid > 0 else None


def measured_saturation_tokens_per_sec(samples: list[Sample] | Counters) -> float | None:
    """The highest (prompt + output) tokens/s over consecutive scrapes, from realtime_tokens_total (prefill_compute +
    prefill_cache + decode): a lower bound on the server's saturation throughput, reached only if some interval ran
    it flat out. SGLang adds to this counter at each log interval, so scrape intervals should be much longer than
    that. None with fewer than two scrapes."""
    series = _series(samples, REALTIME_TOKENS, "mode", TOKEN_MODES)
    if not series:
        return None
    grid = np.unique(np.concatenate([times for times, _ in series.values()]))
    if len(grid) < 2:
        return None
    # TP/PP ranks count the same batch: each rank's tokens weigh 1/ranks, as _token_sum averages them.
    ranks: dict[Labels, int] = defaultdict(int)
    for labels in series:
        ranks[_replica(labels)] += 1
    tokens = np.zeros(len(grid) - 1)
    counted = np.zeros(len(grid) - 1, dtype=bool)
    for labels, (times, values) in series.items():
        if len(times) < 2:
            continue
        start = np.searchsorted(grid, times[:-1])
        consecutive = grid[np.minimum(start + 1, len(grid) - 1)] == times[1:]  # no other scrape in between
        np.add.at(tokens, start[consecutive], _steps(values)[consecutive] / ranks[_replica(labels)])
        counted[start[consecutive]] = True
    seconds = np.diff(grid)
    usable = counted & (seconds > 0)
    return float(np.max(tokens[usable] / seconds[usable])) if usable.any() else None


# --- charging the lease to episodes -----------------------------------------------------------------------------


def attribute_lease(lease_cost: float, works: Mapping[str, Work], weights: WorkWeights) -> dict[str, float]:
    """Fully loaded: the lease's whole cost, idle time included, split in proportion to each episode's weighted
    work. The parts sum exactly to `lease_cost` (math.fsum(parts) == lease_cost): the largest part absorbs the
    rounding. With no work at all the lease is split evenly (the episodes held it equally, doing nothing);
    no episodes, {}."""
    if not math.isfinite(lease_cost) or lease_cost < 0:
        raise ValueError(f"a lease cost is a finite amount ≥ 0, not {lease_cost}")
    if not works:
        return {}
    weighted = {key: weights.of(work) for key, work in works.items()}
    total = math.fsum(weighted.values())
    if total > 0:
        shares = {key: lease_cost * w / total for key, w in weighted.items()}
    else:
        shares = {key: lease_cost / len(works) for key in works}
    return _sum_exactly_to(shares, lease_cost)


def _sum_exactly_to(shares: dict[str, float], target: float) -> dict[str, float]:
    """Shares adjusted so that math.fsum of them is exactly `target`. Every share but the largest is rounded to a
    multiple of the target's ulp (a change below 1e-15 of the target); their sum is then a multiple of it too, so
    the largest share's remainder, target − that sum, is exactly representable and the total is exact. (Letting
    the largest absorb an unrounded remainder is not enough: the remainder itself can round, even to a tie.)"""
    grain = math.ulp(target)
    largest = max(shares, key=lambda key: shares[key])
    for key, value in shares.items():
        if key != largest:
            shares[key] = round(value / grain) * grain
    shares[largest] = math.fsum([target, *(-value for key, value in shares.items() if key != largest)])
    if shares[largest] < 0 or math.fsum(shares.values()) != target:
        raise ArithmeticError(f"could not make {len(shares)} shares sum exactly to {target!r}")
    return shares


def marginal_cost(works: Mapping[str, Work], weights: WorkWeights, *, usd_per_second: float,
                  saturation_tokens_per_sec: float) -> dict[str, float]:
    """Marginal (the lower bound): what the episodes' tokens would cost on a server running flat out. All the
    episodes' tokens (uncached + cached prefill + decode, as the saturation throughput counts them) take
    Σ tokens ÷ `saturation_tokens_per_sec` seconds, at `usd_per_second` for the whole lease (every GPU); that
    saturated cost is split by weighted work exactly as the fully loaded one is. So an episode's marginal cost is
    its fully loaded cost × (saturated seconds ÷ lease seconds), and one episode alone costs its tokens ÷ throughput
    × $/s."""
    if saturation_tokens_per_sec <= 0 or usd_per_second < 0:
        raise ValueError("saturation throughput must be > 0 and the lease's $/s ≥ 0")
    tokens = sum(work.tokens for work in works.values())
    return attribute_lease(tokens / saturation_tokens_per_sec * usd_per_second, works, weights)
