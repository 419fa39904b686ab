"""Break-even between a self-hosted and a hosted arm, on arm entries shaped like `leafcost summary`'s, with every
number worked out by hand in the comments."""

from __future__ import annotations

import pytest

from compare.breakeven import GPU_PRICE_GRID, breakeven


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
