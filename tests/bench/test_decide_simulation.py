"""The decision simulation runs end to end in its quick mode and its JSON carries every figure docs/benchmarks.md
reads; its truths are the population's (the closed form agrees with a large draw); its verdicts are scored by the
rules the docs state. The goal numbers themselves are the bench's to report, not asserted here."""

from __future__ import annotations

import json
import math
import subprocess
import sys
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest
from support.bench_scripts import load_bench

REPO = Path(__file__).resolve().parents[2]
SCRIPT = REPO / "bench" / "decide_simulation.py"


bench = load_bench("decide_simulation")


@pytest.fixture(scope="module")
def quick():
    done = subprocess.run([sys.executable, str(SCRIPT), "--quick", "--jobs", "1", "--json"], cwd=REPO,
                          capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)


def test_quick_json_has_the_run_record(quick):
    assert quick["runs"] == bench.QUICK_RUNS and quick["alpha"] == bench.ALPHA
    assert "load average" in quick["machine"]["load_before"] and "load average" in quick["machine"]["load_after"]
    assert quick["date"].endswith("UTC")
    assert [d["design"] for d in quick["designs"]] == list(bench.QUICK_DESIGNS)
    assert set(quick["mean_savings"]) == {"all", "off_boundary"}


def test_quick_json_has_every_designs_figures(quick):
    for design in quick["designs"]:
        runs, full = design["runs"], design["episodes"]["full"]
        assert full == design["tasks"] * bench.SEEDS * len(design["arms"])
        for decision in design["decisions"].values():
            assert math.isclose(decision["right"] + decision["wrong"] + decision["undecided"], 1.0)
            assert sum(decision["verdicts"].values()) == runs
        assert sum(design["stops"].values()) == runs
        assert set(design["stops"]) <= {"decided", "exhausted", "budget", "futile"}
        episodes = design["episodes"]
        assert 0 < episodes["p10"] <= episodes["p50"] <= episodes["p90"] <= full
        assert sum(episodes["histogram"]) == runs and len(episodes["histogram"]) == 10
        for coverage in design["coverage"].values():
            assert coverage["runs_with_interval"] <= runs
            assert coverage["at_stop"] is None or 0 <= coverage["at_stop"] <= 1
        assert design["fixed"]["n"] == sorted(design["fixed"]["n"]) and design["fixed"]["n"][-1] == design["tasks"]
        assert design["usd"]["mean"] > 0
        plan = design["plan"]["figures"]
        assert plan["usd_full"]["simulated"] > 0 and plan["usd_full"]["pilots"] == 2
        assert {"sequential_usd", "sequential_episodes", "decided_share"} <= set(plan)
        for key in ("sequential_usd", "sequential_episodes"):  # the share of runs inside the plan's p10–p90
            assert 0 <= plan[key]["inside_plan_range"] <= 1
        assert all(f"width_avg_at_k:{arm}" in plan for arm in design["arms"])
        if design["budget_usd"] is None:
            assert 0 < design["buyer_n"] <= design["tasks"]
            assert set(design["savings"]) == set(design["futility_savings"]) == {"buyer_n", "vs_buyer", "vs_matched",
                                                                                 "vs_full"}
        else:
            assert design["savings"] is None and design["futility_savings"] is None
        futility = design["futility"]
        assert futility["episodes"]["mean"] <= episodes["mean"] and futility["all_right"] <= design["all_right"]
        if design["budget_usd"] is None:  # repeated intervals are wider than one fixed-n interval at alpha
            grouped = design["group_sequential"]
            assert grouped["c"] > 1.96 and set(grouped["decisions"]) == set(design["decisions"])
            assert grouped["episodes"]["p90"] <= full


def test_a_budget_design_stops_at_its_cap(quick):
    capped = next(d for d in quick["designs"] if d["design"] == "budget")
    assert capped["stops"].get("budget", 0) > 0
    assert capped["episodes"]["p10"] < capped["episodes"]["full"] and capped["budget_usd"] > 0


def test_closed_form_truths_agree_with_a_large_draw():
    design = bench.priced(next(d for d in bench.DESIGNS if d.name == "half"))
    draws = bench.draw(np.random.default_rng(7), design, 1, 200_000)
    pooled = bench.pooled(design, draws)
    truths = bench.arm_truths(design.arms)
    for arm in design.arms:
        truth = truths[arm.name]
        assert pooled[arm.name]["avg_at_k"] == pytest.approx(truth["avg_at_k"], rel=0.01)
        assert pooled[arm.name]["cost_per_resolved"] == pytest.approx(truth["cost_per_resolved"], rel=0.02)


def test_a_set_ratio_is_the_true_ratio_exactly():
    for design in bench.DESIGNS:
        if design.ratio is not None:
            assert bench.design_truth(bench.priced(design))["ratio"] == pytest.approx(design.ratio, rel=1e-12)


def test_a_claim_of_none_is_the_arms_true_rate():
    design = next(d for d in bench.DESIGNS if d.name == "claim-at-truth")
    truth = bench.design_truth(design)
    assert truth["claim"] == truth["avg_at_k"]
    assert bench.right_reaches("reaches", truth["avg_at_k"], truth["claim"]) is True
    assert bench.right_reaches("below", truth["avg_at_k"], truth["claim"]) is False


def test_at_the_margins_edge_equivalence_is_wrong():
    assert bench.right_cheaper("equivalent", 1.1, 0.1) is False
    assert bench.right_cheaper("second", 1.1, 0.1) is True
    assert bench.right_cheaper("equivalent", 1.05, 0.1) is True
    assert bench.right_cheaper("first", 1.0, 0.0) is False and bench.right_cheaper("second", 1.0, 0.0) is False
    assert bench.right_cheaper("undecided", 0.5, 0.1) is None


def test_a_lease_arms_task_dollars_sum_to_the_lease_so_far():
    design = bench.priced(next(d for d in bench.DESIGNS if d.name == "half"))
    draws = bench.draw(np.random.default_rng(3), design, 2, 40)
    lease = draws[design.arms[0].name]
    cost, spent = lease.cost(1, 30)
    assert cost.size == 30 and spent == pytest.approx(lease.lease_usd[1, :30].sum())
    assert cost.sum() == pytest.approx(spent)
    assert not np.allclose(cost, lease.lease_usd[1, :30])  # attributed by tokens, not by the tasks' wall time


def test_the_obrien_fleming_constant_holds_alpha_over_its_looks():
    one_look = bench._obf_constant(np.array([1.0]))
    many = bench._obf_constant(np.linspace(0.04, 1.0, 49))
    assert one_look == pytest.approx(1.96, abs=0.02)  # a single look is the fixed-n test
    assert 1.96 < many < 2.6  # more looks need a wider boundary, far narrower than Bonferroni's 3.3


def test_a_quick_design_overrides_suite_size():
    design = replace(next(d for d in bench.DESIGNS if d.name == "half"), tasks=bench.QUICK_TASKS)
    assert design.tasks == bench.QUICK_TASKS and design.kind() == "cheaper"


def test_plan_range_coverage_counts_the_runs_inside_the_plans_p10_to_p90():
    from types import SimpleNamespace

    def spread(p10, p90):
        return SimpleNamespace(p10=p10, p90=p90)

    outcomes = [bench.RunOutcome("decided", tasks, usd) for tasks, usd in ((10, 1.0), (20, 2.0), (30, 3.0), (40, 4.0))]
    document = SimpleNamespace(decide=SimpleNamespace(usd=spread(2.0, 3.5), episodes=spread(60, 60)))
    shares = bench.plan_range_coverage(document, outcomes, arms=2)  # episodes: tasks × 3 seeds × 2 arms
    assert shares == {"sequential_usd": 0.5, "sequential_episodes": 0.25}
    assert bench.plan_range_coverage(SimpleNamespace(decide=None), outcomes, arms=2) == {}
