"""Break-even between a self-hosted and a hosted arm, on arm entries shaped like `leafcost summary`'s, with every
number worked out by hand in the comments, and on a real run's summary with leases of 1, 2 and 8 GPUs."""

from __future__ import annotations

import shutil

import duckdb
import pytest

from compare.breakeven import GPU_PRICE_GRID, HOURS_PER_MONTH, breakeven
from compare.ledger import connect_read_only
from compare.summary import summarize


def self_hosted(**changes):
    # 100 attempts, 50 resolved, $1 of sandbox in all, 1 H200 at $3.50/h busy 36,000 GPU-s over a 20 h lease
    arm = {"arm": "frognano", "kind": "self-hosted", "attempts": 100, "resolved_attempts": 50,
           "cost_usd": {"sandbox": 1.0}, "utilization": 0.5,
           "lease": {"count": 1, "usd_per_hour": 3.5, "busy_seconds": 36_000.0}}
    arm.update(changes)
    return arm


def hosted(value=0.5):
    return {"arm": "gpt", "kind": "hosted", "cost_per_resolved_attempt": {"value": value, "ci95": None}}


def test_the_break_even_price_utilization_and_volume_by_hand():
    result = breakeven(self_hosted(), hosted(0.5))
    # per attempt: B = 360 GPU-s, s = $0.01, r = 0.5; budget = 0.5 × 0.5 − 0.01 = $0.24 of GPU per attempt
    # price at u = 0.5: 0.24 × 3600 × 0.5 / 360 = $1.20 per GPU-hour
    assert result["gpu_usd_per_hour"] == pytest.approx(1.2)
    # utilization needed at $3.50: 3.5 × 360 / (3600 × 0.24) = 1.458 > 1: not reachable
    assert result["utilization"] is None and "146%" in result["utilization_reason"]
    # self-hosted cost per resolved at $3.50 and 50 %: (3.5 × 360 / 1800 + 0.01) / 0.5 = $1.42
    assert result["self_hosted_cost_per_resolved_attempt"] == pytest.approx(1.42)
    # an always-on month: 3.5 × 730 / 0.24 = 10,645.8 attempts, beyond one lease's 730 × 3600 / 360 = 7,300
    assert result["monthly_attempts"] is None and result["monthly_capacity_attempts"] == pytest.approx(7300)
    assert len(result["grid"]) == sum(len(p) for p in GPU_PRICE_GRID.values())
    h100_low = result["grid"][0]
    assert (h100_low["gpu"], h100_low["gpu_usd_per_hour"]) == ("H100", 2.0)
    assert h100_low["breakeven_utilization"] == pytest.approx(2.0 * 360 / (3600 * 0.24))


def test_a_cheaper_gpu_breaks_even_within_reach():
    result = breakeven(self_hosted(), hosted(0.5), gpu_usd_per_hour=1.0, utilization=0.9)
    # utilization needed at $1: 360 / (3600 × 0.24) = 0.4167; month: 730 / 0.24 = 3,041.7 attempts
    assert result["utilization"] == pytest.approx(360 / 864)
    assert result["monthly_attempts"] == pytest.approx(730 / 0.24)
    assert result["gpu_usd_per_hour"] == pytest.approx(0.24 * 3600 * 0.9 / 360)


@pytest.mark.parametrize("changes, target, reason", [
    ({"resolved_attempts": 0}, 0.5, "resolved nothing"),
    ({"lease": {"count": 1, "usd_per_hour": 3.5, "busy_seconds": None}}, 0.5, "no busy GPU-seconds"),
    ({}, None, "the hosted arm has no cost per resolved attempt"),
    ({"cost_usd": {"sandbox": 100.0}}, 0.5, "sandbox cost per resolved attempt alone exceeds"),
])
def test_no_number_without_a_reason(changes, target, reason):
    result = breakeven(self_hosted(**changes), hosted(target))
    assert result["gpu_usd_per_hour"] is None and reason in result["reason"]


def test_the_arms_must_be_one_self_hosted_and_one_hosted():
    assert "is not self-hosted" in breakeven(hosted() | {"attempts": 1}, hosted())["reason"]


@pytest.mark.parametrize("gpus", [1, 2, 8])
def test_the_gpu_count_is_in_the_busy_seconds_and_the_utilization_not_twice(gpus):
    # k GPUs, each busy 360 GPU-s per attempt: B = 360·k summed over the GPUs (as the server's counters add up);
    # the lease holds B/u = 720·k GPU-s per attempt at u = 0.5
    b = 360.0 * gpus
    result = breakeven(self_hosted(lease={"count": gpus, "usd_per_hour": 3.5, "busy_seconds": 100 * b}),
                       hosted(0.5))
    # GPU $ per attempt = p·B / (3600·u) = 3.5 × 360k / 1800 = 0.70·k; per resolved: (0.70k + 0.01) / 0.5
    assert result["self_hosted_cost_per_resolved_attempt"] == pytest.approx((0.7 * gpus + 0.01) / 0.5)
    # p* = (T·r − s)·3600·u / B = 0.24 × 1800 / (360k) = 1.20 / k $/GPU-hour
    assert result["gpu_usd_per_hour"] == pytest.approx(1.2 / gpus)
    # u* = p·B / (3600·(T·r − s)) = 3.5 × 360k / 864 = 1.458k: never reachable here
    assert result["utilization"] is None and f"{1.4583 * gpus:.0%}" in result["utilization_reason"]
    # a month of k always-on GPUs costs 3.5 × 730·k; V = that ÷ 0.24; capacity 730 × 3600 × k / (360k) = 7,300
    assert result["monthly_capacity_attempts"] == pytest.approx(7300)
    assert result["monthly_attempts"] is None and f"{3.5 * gpus * 730 / 0.24:,.0f}" in result["monthly_attempts_reason"]
    assert result["grid"][0]["breakeven_utilization"] == pytest.approx(2.0 * b / (3600 * 0.24))


def test_a_two_gpu_lease_at_half_the_price_breaks_even_at_the_same_volume():
    # 2 GPUs at $1/GPU-h, each busy 180 GPU-s per attempt (B = 360): a month costs 2 × 730 = $1,460 → 6,083.3
    # attempts at 0.24 each, within the 730 × 3600 × 2 / 360 = 14,600 the two GPUs serve
    result = breakeven(self_hosted(lease={"count": 2, "usd_per_hour": 1.0, "busy_seconds": 36_000.0}), hosted(0.5),
                       utilization=0.9)
    assert result["monthly_attempts"] == pytest.approx(2 * HOURS_PER_MONTH / 0.24)
    assert result["monthly_capacity_attempts"] == pytest.approx(14_600)
    assert result["utilization"] == pytest.approx(1.0 * 360 / 864)


@pytest.fixture(scope="module")
def summaries_by_gpus(four_arm_run, tmp_path_factory):
    """The four-arm run's summary with its SGLang lease held on 1, 2 and 8 GPUs (the same recorded lease, busy
    counters and episodes; only gpu_leases.count changed by SQL in a copy of the ledger)."""
    db, run_id = four_arm_run
    documents = {}
    for gpus in (1, 2, 8):
        copy = tmp_path_factory.mktemp(f"gpus-{gpus}") / "ledger.duckdb"
        shutil.copy(db, copy)
        with duckdb.connect(str(copy)) as conn:
            conn.execute("UPDATE gpu_leases SET count = ? WHERE arm = 'frognano'", [gpus])
        conn = connect_read_only(copy)
        try:
            documents[gpus] = {arm["arm"]: arm for arm in summarize(conn, run_id)["arms"]}
        finally:
            conn.close()
    return documents


@pytest.mark.parametrize("gpus", [1, 2, 8])
def test_break_even_at_the_leases_price_and_utilization_is_the_summarys_cost_per_resolved(summaries_by_gpus, gpus):
    arms = summaries_by_gpus[gpus]
    sh, ho = arms["frognano"], arms["hosted"]
    lease = sh["lease"]
    assert lease["count"] == gpus and sh["utilization"] is not None
    result = breakeven(sh, ho)
    # the invariant: the model's cost at the lease's own price and measured utilization is the summary's figure
    assert result["self_hosted_cost_per_resolved_attempt"] == pytest.approx(
        sh["cost_per_resolved_attempt"]["value"], rel=1e-12)
    assert sh["cost_usd"]["gpu"] == pytest.approx(gpus * 3.5 * lease["seconds"] / 3600, rel=1e-12)
    # the hand algebra, from the summary's own fields
    attempts, p, u = sh["attempts"], lease["usd_per_hour"], sh["utilization"]
    b = lease["busy_seconds"] / attempts
    assert u == pytest.approx(lease["busy_seconds"] / (lease["seconds"] * gpus), rel=1e-12)
    budget = ho["cost_per_resolved_attempt"]["value"] * sh["resolved_attempts"] / attempts - \
        sh["cost_usd"]["sandbox"] / attempts
    assert result["gpu_usd_per_hour"] == pytest.approx(budget * 3600 * u / b, rel=1e-12)
    needed = p * b / (3600 * budget)
    assert result["utilization"] == (pytest.approx(needed, rel=1e-12) if needed <= 1 else None)
    assert result["monthly_capacity_attempts"] == pytest.approx(HOURS_PER_MONTH * 3600 * gpus / b, rel=1e-12)
    volume = p * gpus * HOURS_PER_MONTH / budget
    if volume <= result["monthly_capacity_attempts"]:
        assert result["monthly_attempts"] == pytest.approx(volume, rel=1e-12)
    # the same lease on more GPUs: the same busy seconds, so a lower utilization and a higher cost per resolved
    one = summaries_by_gpus[1]["frognano"]
    assert u == pytest.approx(one["utilization"] / gpus, rel=1e-12)
    assert result["gpu_usd_per_hour"] == pytest.approx(breakeven(one, ho)["gpu_usd_per_hour"] / gpus, rel=1e-12)
