"""The claim's test (compare.claim_check): its verdict rule on an interval, its interval the betting confidence
sequence sized for the claim tasks, the plan's further tasks, which tasks are the claim's, and its error rate at
exactly the claimed rate on a seeded population."""

from __future__ import annotations

from datetime import date, datetime, timezone

import numpy as np
import pytest

from compare.claim_check import (ClaimCheck, check_claim, claim_task_mask, claim_tasks_needed, claim_within_reach,
                                 claim_word, judge_claim)
from compare.sequential import BettingSequence, confidence_sequence, horizon_tasks, tasks_to_exclude

CLAIMED = 0.615


def scores_at(rate: float, tasks: int, seed: int = 0, seeds: int = 3) -> np.ndarray:
    """Per-task resolved shares of `seeds` attempts, each task's p drawn around `rate`."""
    rng = np.random.default_rng(seed)
    p = rng.beta(rate * 0.4, (1 - rate) * 0.4, tasks)
    return rng.binomial(seeds, p) / seeds


# --- the rule --------------------------------------------------------------------------------------------------------

def test_below_needs_the_interval_wholly_under_the_claim():
    assert claim_word(0.40, 0.60, CLAIMED, 0.05) == "below"
    assert claim_word(0.40, CLAIMED, CLAIMED, 0.05) == "undecided"  # touching the claim is not below it


def test_consistent_needs_the_interval_wholly_at_or_above_the_claim_less_the_tolerance():
    assert claim_word(0.565, 0.70, CLAIMED, 0.05) == "consistent"
    assert claim_word(0.564, 0.70, CLAIMED, 0.05) == "undecided"
    assert claim_word(0.60, 0.70, CLAIMED, 0.0) == "undecided"  # no tolerance: only at or above the claim itself
    assert claim_word(CLAIMED, 0.70, CLAIMED, 0.0) == "consistent"


def test_an_interval_narrower_than_the_tolerance_below_the_claim_is_below():
    assert claim_word(0.58, 0.60, CLAIMED, 0.05) == "below"  # both rules hold: the stronger finding wins


# --- the interval ----------------------------------------------------------------------------------------------------

def test_the_interval_is_the_betting_sequence_sized_for_the_claim_tasks():
    scores = scores_at(0.6, 120)
    check = check_claim(scores, CLAIMED, tolerance=0.05, alpha=0.05, total_tasks=400)
    expected = confidence_sequence(scores, 0.05, horizon_tasks(400))[-1]
    assert (check.lower, check.upper, check.tasks) == (expected.lower, expected.upper, 120)
    assert check.estimate == pytest.approx(scores.mean())
    assert check.lower <= check.estimate <= check.upper


def test_a_model_well_above_the_claim_is_consistent_and_one_well_below_is_below():
    high = check_claim(scores_at(0.80, 300, seed=1), CLAIMED, tolerance=0.05, alpha=0.05, total_tasks=500)
    low = check_claim(scores_at(0.40, 300, seed=2), CLAIMED, tolerance=0.05, alpha=0.05, total_tasks=500)
    assert high.verdict == "consistent" and high.lower >= CLAIMED - 0.05 and high.tasks_to_decide is None
    assert low.verdict == "below" and low.upper < CLAIMED and low.tasks_to_decide is None


def test_a_model_at_the_claim_on_few_tasks_is_undecided_and_the_plan_names_further_tasks():
    check = check_claim(scores_at(CLAIMED, 40, seed=3), CLAIMED, tolerance=0.05, alpha=0.05, total_tasks=500)
    assert check == ClaimCheck("undecided", check.estimate, check.lower, check.upper, 40, check.tasks_to_decide)
    assert check.lower < CLAIMED - 0.05 and check.upper >= CLAIMED
    assert check.tasks_to_decide is not None and check.tasks_to_decide > 0


def test_judge_claim_on_a_carried_sequence_gives_check_claims_verdict():
    scores = scores_at(0.7, 200, seed=4)
    sequence = BettingSequence(0.05, horizon_tasks(500))
    sequence.extend(scores[:90])
    carried = judge_claim(sequence.extend(scores[90:]), scores, CLAIMED, tolerance=0.05, total_tasks=500)
    assert carried == check_claim(scores, CLAIMED, tolerance=0.05, alpha=0.05, total_tasks=500)


# --- the plan --------------------------------------------------------------------------------------------------------

def test_at_no_tolerance_the_plan_is_the_gap_to_the_claim():
    scores = scores_at(0.55, 60, seed=5)
    gap = abs(scores.mean() - CLAIMED)
    expected = tasks_to_exclude(gap, float(np.var(scores, ddof=1)), 0.05, 500) - 60
    assert claim_tasks_needed(scores, CLAIMED, tolerance=0.0, alpha=0.05, total_tasks=500) == expected


def test_a_tolerance_lets_a_mean_between_the_boundaries_decide_sooner():
    scores = np.tile([1.0, 2 / 3, 1 / 3, 1 / 3, 2 / 3], 12)  # 0.6: just under the claim, far above 0.515
    with_tolerance = claim_tasks_needed(scores, CLAIMED, tolerance=0.1, alpha=0.05, total_tasks=500)
    without = claim_tasks_needed(scores, CLAIMED, tolerance=0.0, alpha=0.05, total_tasks=500)
    assert with_tolerance is not None and without is not None and with_tolerance < without


def test_no_task_left_is_out_of_reach():
    scores = scores_at(CLAIMED, 100, seed=7)
    interval = BettingSequence(0.05, horizon_tasks(100)).extend(scores)
    assert not claim_within_reach(interval, scores, CLAIMED, tolerance=0.05, tasks=100, total_tasks=100, luck=2.0)
    early = BettingSequence(0.05, horizon_tasks(1000)).extend(scores)
    assert claim_within_reach(early, scores, CLAIMED, tolerance=0.05, tasks=100, total_tasks=1000, luck=2.0)


# --- the claim's tasks -----------------------------------------------------------------------------------------------

def test_the_claim_tasks_are_those_not_fresh_for_the_arm():
    dates = {"old": datetime(2024, 3, 1, tzinfo=timezone.utc), "same-day": datetime(2025, 1, 10, 23, 0),
             "fresh": datetime(2025, 1, 11, tzinfo=timezone.utc), "a-day": date(2025, 2, 1)}
    ids = ["old", "same-day", "fresh", "undated", "a-day"]
    assert claim_task_mask(ids, dates, date(2025, 1, 10)).tolist() == [True, True, False, True, False]
    assert claim_task_mask(ids, dates, None).tolist() == [True] * 5  # no release day: every task is the claim's


# --- refusals --------------------------------------------------------------------------------------------------------

@pytest.mark.parametrize(("scores", "fields", "message"), [
    ([], {}, "at least one task"),
    ([0.5, 1.2], {}, "numbers in [0, 1]"),
    ([0.5, float("nan")], {}, "numbers in [0, 1]"),
    ([0.5, 1.0], {"total_tasks": 1}, "total_tasks must be"),
    ([0.5, 1.0], {"claimed": 1.0}, "claimed must be"),
    ([0.5, 1.0], {"tolerance": -0.1}, "tolerance must be"),
    ([0.5, 1.0], {"alpha": 0.0}, "alpha must be"),
])
def test_bad_input_is_refused_naming_it(scores, fields, message):
    arguments = {"claimed": CLAIMED, "tolerance": 0.05, "alpha": 0.05, "total_tasks": 10, **fields}
    claimed = arguments.pop("claimed")
    with pytest.raises(ValueError, match=message.replace("[", r"\[").replace("]", r"\]")):
        check_claim(np.asarray(scores, dtype=float), claimed, **arguments)


def test_an_interval_over_other_tasks_is_refused():
    interval = BettingSequence(0.05, 10).extend([1.0, 0.0])
    with pytest.raises(ValueError, match="covers 2 tasks but 3 scores"):
        judge_claim(interval, np.array([1.0, 0.0, 1.0]), CLAIMED, tolerance=0.05, total_tasks=10)


# --- the error rate --------------------------------------------------------------------------------------------------

def test_at_exactly_the_claimed_rate_below_is_rare():
    rng = np.random.default_rng(20261205)
    runs, below = 200, 0
    for _ in range(runs):
        p = rng.beta(CLAIMED * 0.4, (1 - CLAIMED) * 0.4, 150)  # a population whose mean is exactly the claim
        scores = rng.binomial(3, p) / 3
        below += check_claim(scores, CLAIMED, tolerance=0.05, alpha=0.05, total_tasks=150).verdict == "below"
    assert below <= 0.05 * runs
