"""The statistics: per-task estimators by hand, bootstrap CIs over tasks, ratios with nothing resolved, paired
differences on the same resamples, McNemar's exact test, properties (hypothesis) and a coverage simulation."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from statistics import NormalDist

from compare.stats import (DEFAULT_RESAMPLES, Estimate, Resampler, _acceleration, _bca_ci, _percentile_ci,
                           _student_t_quantile,
                           bootstrap_indices, expanded_z, mcnemar, paired_rate_difference, paired_ratio_difference,
                           pass_at_k, pass_hat_k, ratio, resolve_rates)

TOL = 1e-12  # a resampled sum and the point mean add the same numbers in different orders


def bca_by_hand(resampled: np.ndarray, point: float, jackknife: list[float], n_tasks: int) -> tuple[float, float]:
    """The expanded BCa interval written out step by step, independently of compare.stats's vectorised code."""
    normal = NormalDist()
    below = sum(1 for x in resampled if x < point)
    ties = sum(1 for x in resampled if x == point)
    z0 = normal.inv_cdf((below + ties / 2) / len(resampled))
    mean = sum(jackknife) / len(jackknife)
    d = [mean - x for x in jackknife]
    a = sum(x ** 3 for x in d) / (6 * sum(x ** 2 for x in d) ** 1.5)
    z = math.sqrt(n_tasks / (n_tasks - 1)) * _student_t_quantile(0.975, n_tasks - 1)
    levels = [normal.cdf(z0 + (z0 + q) / (1 - a * (z0 + q))) for q in (-z, z)]
    lo, hi = np.quantile(resampled, levels)
    return float(lo), float(hi)


def gathered_ci(per_task: np.ndarray, idx: np.ndarray) -> tuple[float, float]:
    """The expanded BCa CI of a mean, computed the plain way (gather then mean, the jackknife written out), to
    check the counts machinery."""
    n = per_task.size
    jackknife = [(per_task.sum() - x) / (n - 1) for x in per_task]
    return bca_by_hand(per_task[idx].mean(axis=1), float(per_task.mean()), jackknife, n)


# --- per-task estimators by hand ----------------------------------------------------------------------------------

def test_pass_at_k_by_hand():
    assert pass_at_k(5, 2, 1) == pytest.approx(0.4)
    assert pass_at_k(5, 2, 3) == pytest.approx(1 - math.comb(3, 3) / math.comb(5, 3))  # 0.9
    assert pass_at_k(5, 2, 3) == pytest.approx(0.9)
    assert pass_at_k(10, 3, 2) == pytest.approx(1 - 21 / 45)  # 1 − C(7,2)/C(10,2)
    assert pass_at_k(5, 2, 4) == 1.0  # only 3 unresolved seeds: any 4 include a resolved one
    assert pass_at_k(7, 0, 3) == 0.0
    assert pass_at_k(4, 4, 2) == 1.0


def test_pass_hat_k_by_hand():
    assert pass_hat_k(5, 2, 2) == pytest.approx(0.1)  # C(2,2)/C(5,2)
    assert pass_hat_k(6, 4, 2) == pytest.approx(6 / 15)  # C(4,2)/C(6,2)
    assert pass_hat_k(5, 2, 1) == pytest.approx(0.4)
    assert pass_hat_k(5, 2, 3) == 0.0
    assert pass_hat_k(4, 4, 4) == 1.0


def test_pass_at_k_stays_exact_where_the_binomials_overflow_floats():
    # C(2000, 1000) ≈ 2.0e600 is no float; the product form needs none
    assert pass_at_k(2000, 1, 1000) == pytest.approx(0.5)
    assert pass_hat_k(2000, 1999, 1000) == pytest.approx(0.5)


@pytest.mark.parametrize("n, c, k", [(3, 1, 4), (3, 1, 0), (3, 4, 1), (0, 0, 1), (3, -1, 1)])
def test_per_task_estimators_refuse_impossible_inputs(n, c, k):
    for estimator in (pass_at_k, pass_hat_k):
        with pytest.raises(ValueError):
            estimator(n, c, k)


# --- resolve rates ------------------------------------------------------------------------------------------------

def test_resolve_rates_on_three_tasks_by_hand():
    n, c = np.array([3, 3, 4]), np.array([0, 1, 3])
    idx = bootstrap_indices(3)
    rates = resolve_rates(n, c, idx)
    # Avg@k = (0/3 + 1/3 + 3/4) / 3
    assert rates["avg_at_k"].value == pytest.approx(13 / 36)
    assert set(rates["pass_at_k"]) == set(rates["pass_hat_k"]) == {1, 2, 3}  # k up to min n = 3
    # pass@2: 0; 1 − C(2,2)/C(3,2) = 2/3; 1 − C(1,2)/C(4,2) = 1.   pass@3: 0; 1; 1
    expected_pass = {1: 13 / 36, 2: (0 + 2 / 3 + 1) / 3, 3: 2 / 3}
    # pass^2: 0; C(1,2) = 0; C(3,2)/C(4,2) = 1/2.   pass^3: 0; 0; C(3,3)/C(4,3) = 1/4
    expected_hat = {1: 13 / 36, 2: (1 / 2) / 3, 3: (1 / 4) / 3}
    for k in (1, 2, 3):
        assert rates["pass_at_k"][k].value == pytest.approx(expected_pass[k])
        assert rates["pass_hat_k"][k].value == pytest.approx(expected_hat[k])
    # the CI is the expanded BCa interval of the resampled means, as a plain gather computes it
    assert rates["avg_at_k"].ci95 == pytest.approx(gathered_ci(np.array([0, 1 / 3, 3 / 4]), idx))
    assert rates["pass_hat_k"][3].ci95 == pytest.approx(gathered_ci(np.array([0, 0, 1 / 4]), idx))
    assert rates["avg_at_k"].ci95[0] < rates["avg_at_k"].value < rates["avg_at_k"].ci95[1]


def test_no_tasks_give_no_numbers():
    idx = bootstrap_indices(0)
    rates = resolve_rates(np.array([], dtype=int), np.array([], dtype=int), idx)
    assert rates == {"avg_at_k": Estimate(None, None, "no tasks"), "pass_at_k": {}, "pass_hat_k": {}}
    assert ratio([], [], idx, nothing="no resolved attempts") == Estimate(None, None, "no tasks")
    assert paired_rate_difference([], [], [], [], Resampler(0)).reason == "no tasks"
    assert paired_ratio_difference([], [], [], [], idx, nothing="x").reason == "no tasks"
    assert mcnemar(np.array([], dtype=bool), np.array([], dtype=bool)) == {"a_only": 0, "b_only": 0, "p_value": 1.0}


def test_one_task_has_a_degenerate_interval():
    rates = resolve_rates([4], [1], bootstrap_indices(1))
    assert rates["avg_at_k"] == Estimate(0.25, (0.25, 0.25))
    assert ratio([3.0], [2], bootstrap_indices(1), nothing="x") == Estimate(1.5, (1.5, 1.5))


def test_resolve_rates_refuse_impossible_counts():
    with pytest.raises(ValueError):
        resolve_rates([3, 3], [1, 4], bootstrap_indices(2))
    with pytest.raises(ValueError):
        resolve_rates([3, 0], [1, 0], bootstrap_indices(2))
    with pytest.raises(ValueError):  # indices for a different number of tasks
        resolve_rates([3, 3], [1, 2], bootstrap_indices(3))
    with pytest.raises(ValueError):
        resolve_rates([3, 3], [1, 2], Resampler(3))


# --- resampling ---------------------------------------------------------------------------------------------------

def test_bootstrap_indices_are_seeded_draws_with_replacement():
    idx = bootstrap_indices(50, resamples=300, seed=7)
    assert idx.shape == (300, 50) and np.issubdtype(idx.dtype, np.integer)
    assert idx.min() >= 0 and idx.max() < 50
    assert np.array_equal(idx, bootstrap_indices(50, resamples=300, seed=7))
    assert not np.array_equal(idx, bootstrap_indices(50, resamples=300, seed=8))
    assert any(len(set(row)) < 50 for row in idx)  # with replacement: rows repeat tasks
    assert bootstrap_indices(50).shape == (DEFAULT_RESAMPLES, 50)


def test_a_resampler_draws_the_same_indices_in_chunks_and_gives_the_same_estimates():
    n_tasks = 5000  # several chunks of 838 resamples
    rng = np.random.default_rng(3)
    n = rng.integers(1, 4, n_tasks)
    c = rng.binomial(n, 0.3)
    cost = rng.gamma(2.0, 1.0, n_tasks)
    resampler, idx = Resampler(n_tasks), bootstrap_indices(n_tasks)
    chunks = list(resampler.index_chunks())
    assert len(chunks) > 1
    assert np.array_equal(np.concatenate(chunks), idx)
    for row in (0, 900, 1999):  # the kept counts are the draws' counts
        chunk, offset = divmod(row, chunks[0].shape[0])
        assert np.array_equal(resampler.counts[chunk][offset], np.bincount(idx[row], minlength=n_tasks))
    assert resolve_rates(n, c, resampler) == resolve_rates(n, c, idx)
    assert ratio(cost, c, resampler, nothing="x") == ratio(cost, c, idx, nothing="x")
    assert resolve_rates(n, c, resampler)["avg_at_k"].ci95 == pytest.approx(gathered_ci(c / n, idx))


def test_the_same_seed_gives_the_same_intervals_and_another_seed_others():
    rng = np.random.default_rng(5)
    c = rng.integers(0, 4, 40)
    first = resolve_rates(np.full(40, 3), c, bootstrap_indices(40, seed=11))
    again = resolve_rates(np.full(40, 3), c, Resampler(40, seed=11))
    other = resolve_rates(np.full(40, 3), c, bootstrap_indices(40, seed=12))
    assert first == again
    assert first["avg_at_k"].value == other["avg_at_k"].value
    assert first["avg_at_k"].ci95 != other["avg_at_k"].ci95


# --- ratios -------------------------------------------------------------------------------------------------------

def test_ratio_by_hand():
    num, den = np.array([2.0, 4.0, 6.0, 0.0]), np.array([1, 0, 2, 1])
    idx = bootstrap_indices(4)
    estimate = ratio(num, den, idx, nothing="no resolved attempts")
    assert estimate.value == pytest.approx(12 / 4)
    # (1/4)^4 of the resamples draw only the unresolved task: at 4 tasks the expanded interval reads its upper
    # bound at Φ(≈ 3.9), the top 0.005 % of the resamples, where those infinite ones sit
    assert (den[idx].sum(axis=1) == 0).sum() == 4
    assert estimate.ci95[1] is None and estimate.reason.startswith("nothing resolves in 4 of 2000 resamples")
    assert estimate.reason.endswith("the upper bound is unbounded, so the 95 % interval is one-sided, [lower, ∞)")
    assert 0 <= estimate.ci95[0] <= estimate.value  # the lower bound exists and is given


def test_the_bca_interval_by_hand():
    # 20 resamples 1, 2, …, 20 around the point 8.5: 8 below, so z0 = Φ⁻¹(8/20) = −0.253347
    # jackknife 1, 2, 3, 10: mean 4, d = 3, 2, 1, −6; Σd² = 50, Σd³ = −180; a = −180 / (6 · 50^1.5) = −0.0848528
    # lower: z0 − 1.96 = −2.213311 → z0 + (−2.213311) / (1 − a · (−2.213311)) = −2.978448 → Φ = 0.0014486
    # upper: z0 + 1.96 = 1.706617 → z0 + 1.706617 / (1 − a · 1.706617) = 1.237394 → Φ = 0.8920295
    # linear quantiles of 1..20 at q: 1 + 19 q → 1.027523 and 17.948561
    ci, reason = _bca_ci(np.arange(1.0, 21.0), 8.5, np.array([1.0, 2.0, 3.0, 10.0]), "x", 1.959963984540054)
    assert reason is None
    assert ci == pytest.approx((1 + 19 * 0.0014486, 1 + 19 * 0.8920295), abs=1e-5)


def test_bca_without_bias_or_acceleration_is_the_percentile_interval():
    rng = np.random.default_rng(8)
    stats = rng.lognormal(0, 1, 2000)  # skewed resamples: the percentile interval is not symmetric
    point = float(np.median(stats))  # half the resamples below: z0 = 0
    symmetric = np.array([-2.0, -1.0, 0.0, 1.0, 2.0])  # no skew among the leave-one-out values: a = 0
    ci, reason = _bca_ci(stats, point, symmetric, "x", NormalDist().inv_cdf(0.975))
    assert reason is None and ci == pytest.approx(_percentile_ci(stats, "x")[0], rel=1e-12)
    # a bias or a skew moves it
    assert _bca_ci(stats, float(np.quantile(stats, 0.4)), symmetric, "x")[0] != pytest.approx(ci, rel=1e-3)
    assert _bca_ci(stats, point, np.array([0.0, 0.0, 0.0, 5.0]), "x")[0] != pytest.approx(ci, rel=1e-3)


def test_the_expanded_quantile_widens_1_96_for_few_tasks():
    # Student's t(df, 0.975) from the tables: 12.706205, 4.302653, 3.182446, 2.228139, 2.045230
    for df, table in ((1, 12.706205), (2, 4.302653), (3, 3.182446), (10, 2.228139), (29, 2.045230)):
        assert _student_t_quantile(0.975, df) == pytest.approx(table, rel=2e-3 if df == 3 else 1e-5)
    assert expanded_z(30) == pytest.approx(math.sqrt(30 / 29) * 2.04523, rel=1e-5)  # 2.0802
    assert expanded_z(100) == pytest.approx(math.sqrt(100 / 99) * 1.98422, rel=1e-5)  # 1.9942
    assert expanded_z(1) == expanded_z(0) == pytest.approx(1.959964, rel=1e-6)
    assert expanded_z(10**6) == pytest.approx(1.959964, rel=1e-5)


def test_a_ratio_interval_is_the_expanded_bca_of_the_resampled_ratios():
    rng = np.random.default_rng(12)
    den = rng.binomial(3, 0.5, 40)
    num = rng.lognormal(0, 0.8, 40) * (3 - 0.3 * den)
    idx = bootstrap_indices(40)
    estimate = ratio(num, den, idx, nothing="x")
    resampled = num[idx].sum(axis=1) / den[idx].sum(axis=1)
    jackknife = [(num.sum() - num[i]) / (den.sum() - den[i]) for i in range(40)]
    assert estimate.value == pytest.approx(num.sum() / den.sum())
    assert estimate.ci95 == pytest.approx(bca_by_hand(resampled, estimate.value, jackknife, 40), rel=1e-12)
    # not the percentile interval: skewed costs move it up
    percentile = np.quantile(resampled, [0.025, 0.975])
    assert estimate.ci95[1] > percentile[1] and estimate.ci95[1] - estimate.ci95[0] > percentile[1] - percentile[0]


def test_a_ratio_with_nothing_resolved_has_no_number_and_a_reason():
    estimate = ratio([1.0, 2.0, 3.0], [0, 0, 0], bootstrap_indices(3), nothing="no resolved attempts")
    assert estimate == Estimate(None, None, "no resolved attempts")
    assert estimate.as_json() == {"value": None, "ci95": None, "reason": "no resolved attempts"}


def test_a_ratio_whose_resamples_often_resolve_nothing_has_an_unbounded_interval():
    den = np.zeros(20)
    den[3] = 1  # a resample misses task 3 with probability 0.95^20 ≈ 36 %
    estimate = ratio(np.ones(20), den, bootstrap_indices(20), nothing="x")
    assert estimate.value == 20.0
    assert estimate.ci95[1] is None and 0 < estimate.ci95[0] <= 20.0
    assert "upper bound is unbounded" in estimate.reason and "nothing resolves" in estimate.reason


def test_infinite_resamples_count_only_when_a_percentile_reaches_them():
    # 2,000 resamples: the 97.5 % percentile reads sorted positions 1949 and 1950, the 2.5 % one 49 and 50
    stats = np.arange(2000, dtype=float)
    reach = stats.copy()
    reach[-49:] = np.inf  # position 1950 still finite
    assert _percentile_ci(reach, "nothing resolves") == (pytest.approx((49.975, 1949.025)), None)
    reach[-50:] = np.inf
    ci, reason = _percentile_ci(reach, "nothing resolves")
    assert ci == (pytest.approx(49.975), None) and reason.startswith("nothing resolves in 50 of 2000 resamples")
    assert reason.endswith("the upper bound is unbounded, so the 95 % interval is one-sided, [lower, ∞)")
    low = stats.copy()
    low[:50] = -np.inf
    assert _percentile_ci(low, "x")[0] == (None, pytest.approx(1949.025))
    assert _percentile_ci(low, "x")[1].endswith("the lower bound is unbounded, so the 95 % interval is one-sided, "
                                                "(−∞, upper]")
    undefined = stats.copy()
    undefined[[0, 1999]] = np.nan  # undefined: at the bottom for the lower bound, at the top for the upper,
    assert _percentile_ci(undefined, "x")[0] == pytest.approx((48.975, 1950.025))  # so both move out by one
    undefined[1000:1049] = np.nan  # 49 + 2 undefined reach both percentiles
    assert _percentile_ci(undefined, "x")[0] is None
    assert _percentile_ci(undefined, "x")[1].endswith("the lower and upper bounds are unbounded, so there is no "
                                                      "interval")


# --- paired comparisons -------------------------------------------------------------------------------------------

def test_paired_rate_difference_resamples_both_arms_together():
    rng = np.random.default_rng(9)
    n = np.full(60, 3)
    c_a = rng.binomial(3, rng.beta(2, 2, 60))
    c_b = np.clip(c_a - rng.integers(0, 2, 60), 0, 3)  # B: A with some resolves lost
    idx = bootstrap_indices(60)
    same = paired_rate_difference(c_a, n, c_a, n, idx)
    assert same == Estimate(0.0, (0.0, 0.0))  # identical arms on identical resamples never differ
    diff = paired_rate_difference(c_a, n, c_b, n, idx)
    assert diff.value == pytest.approx((c_a - c_b).sum() / 180)
    # the paired t interval: mean ± t(59, 0.975)·s/√60
    d = c_a / 3 - c_b / 3
    half = _student_t_quantile(0.975, 59) * d.std(ddof=1) / math.sqrt(60)
    assert diff.ci95 == pytest.approx((d.mean() - half, d.mean() + half), rel=1e-12)
    # pairing: much narrower than if the arms were resampled independently
    a_ci = resolve_rates(n, c_a, idx)["avg_at_k"].ci95
    b_ci = resolve_rates(n, c_b, bootstrap_indices(60, seed=1))["avg_at_k"].ci95
    unpaired_width = math.hypot(a_ci[1] - a_ci[0], b_ci[1] - b_ci[0])
    assert diff.ci95[1] - diff.ci95[0] < 0.6 * unpaired_width
    assert diff.ci95[0] > 0  # B only ever loses resolves


def test_paired_ratio_difference_by_hand_and_with_an_arm_resolving_nothing():
    idx = bootstrap_indices(4)
    cost_a, res_a = np.array([1.0, 2.0, 3.0, 4.0]), np.array([1, 1, 1, 1])
    cost_b, res_b = np.array([2.0, 2.0, 2.0, 2.0]), np.array([1, 0, 1, 0])
    diff = paired_ratio_difference(cost_a, res_a, cost_b, res_b, idx, nothing="no resolved attempts")
    assert diff.value == pytest.approx(10 / 4 - 8 / 2)
    # B resolves nothing (+inf, difference −inf) in (1/2)^4 of the resamples: beyond the 2.5 % tail
    assert diff.reason is not None and diff.reason.endswith("the lower bound is unbounded, so the 95 % interval "
                                                            "is one-sided, (−∞, upper]")
    assert diff.ci95[0] is None and diff.ci95[1] >= diff.value  # the upper bound that exists is given
    same = paired_ratio_difference(cost_a, res_a, cost_a, res_a, idx, nothing="x")
    assert same == Estimate(0.0, (0.0, 0.0))
    none_b = paired_ratio_difference(cost_a, res_a, cost_b, 0 * res_b, idx, nothing="no resolved attempts")
    assert none_b == Estimate(None, None, "arm B: no resolved attempts")
    none_both = paired_ratio_difference(cost_a, 0 * res_a, cost_b, 0 * res_b, idx, nothing="none resolved")
    assert none_both.value is None and none_both.reason == "arms A and B: none resolved"


def test_paired_ratio_difference_interval_is_the_expanded_percentile_of_the_resampled_difference():
    rng = np.random.default_rng(4)
    res_a, res_b = rng.binomial(3, 0.6, 80), rng.binomial(3, 0.5, 80)
    cost_a, cost_b = rng.gamma(3.0, 1.0, 80), rng.gamma(2.0, 1.0, 80)
    idx = bootstrap_indices(80)
    diff = paired_ratio_difference(cost_a, res_a, cost_b, res_b, idx, nothing="x")
    resampled = (cost_a[idx].sum(1) / res_a[idx].sum(1)) - (cost_b[idx].sum(1) / res_b[idx].sum(1))
    assert diff.value == pytest.approx(cost_a.sum() / res_a.sum() - cost_b.sum() / res_b.sum())
    z = expanded_z(80)  # the resamples' quantiles at Φ(∓z_n): no bias correction, no acceleration
    levels = [NormalDist().cdf(-z), NormalDist().cdf(z)]
    assert diff.ci95 == pytest.approx(tuple(np.quantile(resampled, levels)), rel=1e-12)


def test_one_task_holding_every_resolve_has_a_one_sided_interval_and_says_why():
    den = np.zeros(30)
    den[7] = 2
    estimate = ratio(np.ones(30), den, bootstrap_indices(30), nothing="x")
    assert estimate.value == 15.0 and estimate.ci95[1] is None and 0 < estimate.ci95[0] <= 15.0
    assert estimate.reason.startswith("only one task resolves anything: nothing resolves in ")
    assert estimate.reason.endswith("the upper bound is unbounded, so the 95 % interval is one-sided, [lower, ∞)")
    paired = paired_ratio_difference(np.ones(30), np.ones(30), np.ones(30), den, bootstrap_indices(30), nothing="x")
    assert paired.value == 1 - 15 and paired.ci95[0] is None  # B's single task: its absence is −inf in A − B
    assert paired.ci95[1] >= paired.value
    assert paired.reason.startswith("an arm resolves nothing in ")
    assert paired.reason.endswith("the lower bound is unbounded, so the 95 % interval is one-sided, (−∞, upper]")
    # one task in all: no leave-one-out sample, every resample is that task, the interval is the point
    assert ratio([3.0], [2], bootstrap_indices(1), nothing="x") == Estimate(1.5, (1.5, 1.5))


def test_arms_must_be_aligned_by_task():
    with pytest.raises(ValueError):
        paired_rate_difference([1, 2], [3, 3], [1], [3], bootstrap_indices(2))
    with pytest.raises(ValueError):
        mcnemar(np.array([True, False]), np.array([True]))


# --- McNemar ------------------------------------------------------------------------------------------------------

def flags(a_only: int, b_only: int, both: int = 4, neither: int = 3) -> tuple[np.ndarray, np.ndarray]:
    a = [True] * a_only + [False] * b_only + [True] * both + [False] * neither
    b = [False] * a_only + [True] * b_only + [True] * both + [False] * neither
    return np.array(a), np.array(b)


@pytest.mark.parametrize("a_only, b_only, p", [
    (1, 9, 2 * (1 + 10) / 1024),  # 2·(C(10,0) + C(10,1)) / 2^10 = 22/1024
    (9, 1, 22 / 1024),
    (2, 8, 2 * (1 + 10 + 45) / 1024),  # 2·(C(10,0) + C(10,1) + C(10,2)) / 2^10 = 112/1024
    (0, 5, 2 / 32),  # 2·C(5,0) / 2^5
    (3, 3, 1.0),  # 2·(1 + 6 + 15 + 20)/64 = 84/64, capped at 1
    (0, 0, 1.0),
])
def test_mcnemar_exact_p_by_hand(a_only, b_only, p):
    a, b = flags(a_only, b_only)
    assert mcnemar(a, b) == {"a_only": a_only, "b_only": b_only, "p_value": pytest.approx(p, rel=1e-12)}


def test_mcnemar_takes_zeros_and_ones_and_refuses_other_values():
    assert mcnemar(np.array([1, 0, 1]), np.array([0, 0, 1]))["a_only"] == 1
    with pytest.raises(ValueError):
        mcnemar(np.array([2, 0]), np.array([0, 0]))


def test_estimate_json():
    assert Estimate(0.5, (0.25, 0.75)).as_json() == {"value": 0.5, "ci95": [0.25, 0.75]}
    assert Estimate(2.0, None, "unbounded").as_json() == {"value": 2.0, "ci95": None, "reason": "unbounded"}


# --- properties ---------------------------------------------------------------------------------------------------

seeds_and_resolves = st.integers(1, 12).flatmap(lambda n: st.tuples(st.just(n), st.integers(0, n)))
task_lists = st.lists(seeds_and_resolves, min_size=1, max_size=25)


@given(seeds_and_resolves)
def test_pass_at_k_is_a_probability_growing_in_k_and_pass_hat_k_shrinks(task):
    n, c = task
    at = [pass_at_k(n, c, k) for k in range(1, n + 1)]
    hat = [pass_hat_k(n, c, k) for k in range(1, n + 1)]
    assert all(0.0 <= p <= 1.0 for p in at + hat)
    assert all(x <= y + TOL for x, y in zip(at, at[1:]))
    assert all(x + TOL >= y for x, y in zip(hat, hat[1:]))
    assert at[0] == pytest.approx(c / n) and hat[0] == pytest.approx(c / n)
    assert at[-1] == (1.0 if c else 0.0) and hat[-1] == (1.0 if c == n else 0.0)
    for k in range(1, n + 1):  # against the binomials themselves
        assert at[k - 1] == pytest.approx(1 - math.comb(n - c, k) / math.comb(n, k))
        assert hat[k - 1] == pytest.approx(math.comb(c, k) / math.comb(n, k))


@settings(deadline=None, max_examples=60)
@given(task_lists, st.integers(0, 2**32 - 1))
def test_resolve_rates_agree_with_the_per_task_estimators_and_contain_their_point(tasks, seed):
    n, c = np.array([t[0] for t in tasks]), np.array([t[1] for t in tasks])
    resampler = Resampler(len(tasks), resamples=400, seed=seed)
    rates = resolve_rates(n, c, resampler)
    assert rates["pass_at_k"][1].value == pytest.approx(rates["avg_at_k"].value)
    assert list(rates["pass_at_k"]) == list(range(1, n.min() + 1))
    for k in rates["pass_at_k"]:
        assert rates["pass_at_k"][k].value == pytest.approx(np.mean([pass_at_k(*t, k) for t in tasks]))
        assert rates["pass_hat_k"][k].value == pytest.approx(np.mean([pass_hat_k(*t, k) for t in tasks]))
    for estimate in [rates["avg_at_k"], *rates["pass_at_k"].values(), *rates["pass_hat_k"].values()]:
        lo, hi = estimate.ci95
        assert 0.0 <= lo <= hi <= 1.0
        assert lo - TOL <= estimate.value <= hi + TOL
    assert resolve_rates(n, c, Resampler(len(tasks), resamples=400, seed=seed)) == rates


costs = st.floats(0.0, 1e4, allow_nan=False)
ratio_tasks = st.lists(st.tuples(costs, st.integers(0, 3)), min_size=1, max_size=25)


@settings(deadline=None, max_examples=60)
@given(ratio_tasks, st.integers(0, 2**32 - 1))
def test_ratios_contain_their_point_or_say_why_not(tasks, seed):
    num, den = np.array([t[0] for t in tasks]), np.array([t[1] for t in tasks])
    resampler = Resampler(len(tasks), resamples=400, seed=seed)
    estimate = ratio(num, den, resampler, nothing="no resolved attempts")
    if den.sum() == 0:
        assert estimate == Estimate(None, None, "no resolved attempts")
        return
    assert estimate.value == pytest.approx(num.sum() / den.sum())
    if estimate.ci95 is None or None in estimate.ci95:
        assert "unbounded" in estimate.reason
    if estimate.ci95 is not None:
        lo, hi = estimate.ci95
        assert lo is not None  # a ratio of costs is never unbounded below
        assert math.isfinite(lo) and (hi is None or math.isfinite(hi))
        assert lo * (1 - TOL) - TOL <= estimate.value <= (math.inf if hi is None else hi * (1 + TOL) + TOL)
    assert ratio(num, den, Resampler(len(tasks), resamples=400, seed=seed), nothing="x") == estimate
    diff = paired_ratio_difference(num, den, num[::-1], den[::-1], resampler, nothing="x")
    for number in (diff.value, *(diff.ci95 or ())):
        assert number is None or math.isfinite(number)


# --- coverage -----------------------------------------------------------------------------------------------------

def test_the_95_percent_interval_covers_the_true_resolve_rate_95_percent_of_the_time():
    """1,000 simulated runs of 100 tasks × 3 seeds, each task's true resolve probability drawn from Beta(2, 3), so
    tasks differ; the truth is the population's expected Avg@k, E[p] = 2/5. (A bootstrap over attempts instead
    of tasks ignores that a task's seeds go together and covers about 91 %.)"""
    rng = np.random.default_rng(20261202)
    tasks, seeds, runs, truth = 100, 3, 1000, 2 / 5
    n = np.full(tasks, seeds)
    covered = 0
    for run in range(runs):
        c = rng.binomial(seeds, rng.beta(2.0, 3.0, tasks))
        lo, hi = resolve_rates(n, c, Resampler(tasks, resamples=1000, seed=run))["avg_at_k"].ci95
        covered += lo <= truth <= hi
    assert 0.93 <= covered / runs <= 0.97, covered / runs


def test_the_cost_per_resolved_interval_covers_at_thirty_tasks():
    """2,000 simulated runs of 30 tasks × 3 seeds drawn afresh (bench/ci_coverage.py's design B, Beta(.7,.7)):
    lognormal costs, resolved attempts 0.7×. On these very runs the percentile interval covers 91.7 % (91.6 % over
    the bench's 10,000); the expanded BCa one 93.5 %. Seeded: the same figure every time."""
    rng = np.random.default_rng(20261203)
    runs, truth = 2000, 2.4271876846421248  # e^0.32 · 3 (1.5 − 1.45·0.5 + 0.3·0.3) / (3 · 0.5), in closed form
    resampler = Resampler(30, 1000, 20261202)
    covered = 0
    for _ in range(runs):
        p = rng.beta(0.7, 0.7, 30)
        c = rng.binomial(3, p)
        cost = rng.lognormal(0.0, 0.8, 30) * (1.5 - p) * (3 - 0.3 * c)
        ci = ratio(cost, c, resampler, nothing="x").ci95
        covered += ci is not None and ci[0] <= truth <= ci[1]
    assert 0.93 <= covered / runs <= 0.97, covered / runs


@pytest.mark.parametrize("scale", [1e-160, 1e-200, 1e150])
def test_the_acceleration_does_not_depend_on_the_scale_of_the_costs(scale):
    """Costs of 1e-160 $ (a what-if price sheet may set such prices) once made Σd² a subnormal whose 1.5th power is
    0: a ZeroDivisionError, and a 500 from the API."""
    jackknife = np.array([0.0, 1.0, 3.0, 7.0])
    assert _acceleration(jackknife * scale) == pytest.approx(_acceleration(jackknife), rel=1e-12)
    assert _acceleration(jackknife) != 0.0
