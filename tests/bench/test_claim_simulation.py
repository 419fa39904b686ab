"""The claim simulation runs end to end in its quick mode and its JSON carries every figure docs/benchmarks.md
reads; its population is calibrated to the claimed Avg@3 and Pass@3; its early-stop runs stop by the decide
machinery's rule. The error rates themselves are the bench's to report, not asserted here."""

from __future__ import annotations

import json
import math
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from support.bench_scripts import load_bench

REPO = Path(__file__).resolve().parents[2]
SCRIPT = REPO / "bench" / "claim_simulation.py"


bench = load_bench("claim_simulation")


@pytest.fixture(scope="module")
def quick():
    done = subprocess.run([sys.executable, str(SCRIPT), "--quick", "--json"], cwd=REPO, capture_output=True,
                          text=True, timeout=600)
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)


def test_quick_json_has_the_run_record(quick):
    assert quick["runs"] == bench.QUICK_RUNS and quick["tasks"] == bench.QUICK_TASKS
    assert quick["alpha"] == bench.ALPHA and quick["tolerance"] == bench.TOLERANCE
    assert "load average" in quick["machine"]["load_before"] and "load average" in quick["machine"]["load_after"]
    assert quick["date"].endswith("UTC")


def test_quick_json_has_every_rows_shares(quick):
    assert [row["shift"] for row in quick["rows"]] == list(bench.QUICK_SHIFTS)
    for row in quick["rows"]:
        assert set(row["procedures"]) == set(bench.PROCEDURES)
        for figures in row["procedures"].values():
            assert math.isclose(figures["below"] + figures["consistent"] + figures["undecided"], 1.0)
            assert figures["below"] <= figures["below_upper95"] <= 1
            assert 0 < figures["mean_tasks"] <= quick["tasks"]
        assert row["procedures"]["once"]["mean_tasks"] == quick["tasks"]  # one look, at the end
    assert set(quick["checks"]) == set(bench.PROCEDURES)
    for entry in quick["checks"].values():
        assert {"false_alarm", "power_below_at_minus_10", "power_consistent_at_plus_10"} <= set(entry)


def test_the_population_at_the_claim_has_the_claimed_avg_and_pass():
    at_claim, = bench.truths((0.0,))
    assert at_claim.avg == pytest.approx(bench.CLAIMED_AVG) and at_claim.pass_at_3 == pytest.approx(bench.CLAIMED_PASS)
    rng = np.random.default_rng(1)
    p = rng.beta(at_claim.a, at_claim.b, 400_000)
    assert 1 - np.mean((1 - p) ** 3) == pytest.approx(bench.CLAIMED_PASS, abs=0.003)  # the closed form, drawn
    lower, upper = bench.truths((-0.1, 0.1))
    assert lower.avg == pytest.approx(0.515) and upper.avg == pytest.approx(0.715)
    assert lower.a + lower.b == pytest.approx(at_claim.a + at_claim.b)  # the same spread of difficulty


def test_a_pass_at_3_no_beta_can_give_is_refused():
    with pytest.raises(ValueError, match="out of a Beta's reach"):
        bench.concentration(0.6, 0.55)


def test_an_early_stop_run_ends_at_the_first_round_whose_claim_check_is_settled():
    from compare.claim_check import check_claim
    from compare.decide_spec import DecideConfig

    config = DecideConfig(reaches={"arm": "model", "avg_at_k": 0.615, "tolerance": 0.05})
    for resolved, word in ((np.full(500, 3), "consistent"), (np.zeros(500, dtype=int), "below")):
        first = next(n for n in range(10, 501, 10) if check_claim(
            resolved[:n] / 3, 0.615, tolerance=0.05, alpha=0.05, total_tasks=500).verdict != "undecided")
        assert bench.early_stop_run(config, resolved, 10) == (word, first) and first < 500


def test_the_upper_bound_is_clopper_pearsons():
    assert bench._upper_bound(0, 2000) == pytest.approx(1 - 0.05 ** (1 / 2000), rel=1e-4)  # the rule of three's
    assert 0.05 < bench._upper_bound(100, 2000) < 0.06  # 5 % seen: the bound a little above it
    assert 0.5 < bench._upper_bound(1000, 2000) < 0.52  # counts whose binomial coefficients overflow a float
