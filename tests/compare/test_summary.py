"""`leafcost summary`, `compare`, `reprice` and `breakeven` on a real run (conftest's `four_arm_run`: a scripted
SGLang arm, a hosted arm through litellm, an unpriced hosted arm and the oracle over three small tasks, two
solvable, with two seeds); every figure is checked against numbers computed by hand or read back with SQL."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import duckdb
import pytest


LEAFCOST = Path(sys.executable).with_name("leafcost")
# Per episode at $1.25 / $10 / $0.125 per 1M: 300·1.25 + 40·10 + 80·1.25 + 300·0.125 + 6·10 = 972.5 µ$
HOSTED_EPISODE_USD = 972.5e-6


@pytest.fixture(scope="module")
def ledger_run(four_arm_run):
    return four_arm_run


def leafcost(*args: str, expect: int = 0) -> subprocess.CompletedProcess:
    result = subprocess.run([str(LEAFCOST), *args], capture_output=True, text=True, timeout=300)
    assert result.returncode == expect, result.stderr[-2000:]
    return result


def sql(db: Path, query: str, params=()):
    with duckdb.connect(str(db), read_only=True) as conn:
        return conn.execute(query, list(params)).fetchall()


def test_summary_has_every_figure_of_the_contract(ledger_run):
    db, run_id = ledger_run
    document = json.loads(leafcost("summary", run_id, "--db", str(db), "--json").stdout)
    arms = {arm["arm"]: arm for arm in document["arms"]}
    assert list(arms) == ["frognano", "hosted", "unpriced", "oracle"]
    assert {arm["status"] for arm in arms.values()} == {"finished"}
    hosted = arms["hosted"]
    for key in ("tasks", "seeds", "attempts", "resolved_attempts", "resolved_tasks", "avg_at_k", "pass_at_k",
                "pass_hat_k", "harness_error_rate", "infra_error_rate", "cost_usd", "cost_per_resolved_attempt",
                "cost_per_resolved_task", "utilization", "price_source", "unpriced_calls"):
        assert key in hosted, key
    assert (hosted["tasks"], hosted["seeds"], hosted["attempts"]) == (3, 2, 6)
    assert (hosted["resolved_attempts"], hosted["resolved_tasks"]) == (4, 2)
    assert hosted["avg_at_k"]["value"] == pytest.approx(2 / 3)
    assert set(hosted["pass_at_k"]) == {"1", "2"} and hosted["pass_at_k"]["2"]["value"] == pytest.approx(2 / 3)
    assert hosted["pass_hat_k"]["2"]["value"] == pytest.approx(2 / 3)
    lo, hi = hosted["avg_at_k"]["ci95"]
    assert 0 <= lo <= 2 / 3 <= hi <= 1
    assert (hosted["harness_error_rate"], hosted["infra_error_rate"]) == (0.0, 0.0)
    # tokens to the cent (and beyond): six episodes of the same two scripted calls
    assert hosted["cost_usd"]["tokens"] == pytest.approx(6 * HOSTED_EPISODE_USD, rel=1e-12)
    cpu = sql(db, "select sum(sandbox_cpu_seconds) from episodes where arm = 'hosted'")[0][0]
    assert hosted["cost_usd"]["sandbox"] == pytest.approx(cpu * 0.045 / 3600, rel=1e-12)
    total = hosted["cost_usd"]["total"]
    assert total == pytest.approx(hosted["cost_usd"]["tokens"] + hosted["cost_usd"]["sandbox"], rel=1e-12)
    assert hosted["cost_per_resolved_attempt"]["value"] == pytest.approx(total / 4, rel=1e-12)
    assert hosted["cost_per_resolved_task"]["value"] == pytest.approx(total / 2, rel=1e-12)
    assert hosted["price_source"] == "explicit" and hosted["unpriced_calls"] == 0
    # the self-hosted arm: its whole lease, attributed to its episodes; utilization from the server's counters
    frognano = arms["frognano"]
    started, ended, rate = sql(db, "select started_at, ended_at, usd_per_hour from gpu_leases "
                                   "where arm = 'frognano'")[0]
    assert frognano["cost_usd"]["gpu"] == pytest.approx((ended - started).total_seconds() / 3600 * rate, rel=1e-9)
    assert frognano["kind"] == "self-hosted" and frognano["price_source"] == "lease"
    assert frognano["utilization"] is not None and 0 < frognano["utilization"] <= 1
    # unpriced calls: no cost number, only the reason
    unpriced = arms["unpriced"]
    assert unpriced["unpriced_calls"] == 12 and unpriced["cost_usd"]["total"] is None
    assert unpriced["cost_per_resolved_attempt"]["value"] is None
    assert "unpriced" in unpriced["cost_per_resolved_attempt"]["reason"]


def test_summary_is_reproducible_and_the_table_prints(ledger_run):
    db, run_id = ledger_run
    first = leafcost("summary", run_id, "--db", str(db), "--json").stdout
    assert leafcost("summary", run_id, "--db", str(db), "--json").stdout == first
    other_seed = leafcost("summary", run_id, "--db", str(db), "--json", "--seed", "7").stdout
    assert json.loads(other_seed)["arms"][1]["avg_at_k"]["value"] == json.loads(first)["arms"][1]["avg_at_k"]["value"]
    table = leafcost("summary", run_id, "--db", str(db)).stdout
    assert "frognano" in table and "hosted" in table and "12 hosted calls are unpriced" in table


def test_compare_pairs_comparable_arms_and_refuses_others(ledger_run):
    db, run_id = ledger_run
    document = json.loads(leafcost("compare", run_id, "--arms", "hosted,frognano", "--db", str(db),
                                   "--json").stdout)
    assert document["comparable"] and document["differences"] == [] and document["shared_tasks"] == 3
    assert document["resolve_rate_difference"]["value"] == 0.0  # same script, same tasks
    assert document["mcnemar"] is None  # two seeds
    assert document["breakeven"]["self_hosted"] == "frognano"
    # a different temperature: refused, unless allowed, and then every output carries the difference
    refused = leafcost("compare", run_id, "--arms", "hosted,unpriced", "--db", str(db), expect=2)
    assert "temperature differs: hosted None, unpriced 0.0" in refused.stderr
    allowed = json.loads(leafcost("compare", run_id, "--arms", "hosted,unpriced", "--allow-mismatch", "--db",
                                  str(db), "--json").stdout)
    assert not allowed["comparable"] and allowed["differences"] == ["temperature differs: hosted None, unpriced 0.0"]
    assert allowed["cost_per_resolved_attempt_difference"]["value"] is None  # one side is unpriced
    assert "temperature differs" in leafcost("compare", run_id, "--arms", "hosted,unpriced", "--allow-mismatch",
                                             "--db", str(db)).stdout
    unknown = leafcost("compare", run_id, "--arms", "hosted,nosuch", "--db", str(db), expect=2)
    assert "no arm 'nosuch'" in unknown.stderr
    missing = leafcost("summary", "no-such-run", "--db", str(db), expect=2)
    assert "no run 'no-such-run'" in missing.stderr


def test_reprice_stores_a_scenario_and_leaves_the_facts_alone(ledger_run, tmp_path):
    db, run_id = ledger_run
    before = sql(db, "select sum(cost_usd) from model_calls where arm = 'hosted'")[0][0]
    sheet = tmp_path / "double.yaml"
    sheet.write_text("name: double\nsandbox_usd_per_vcpu_hour: 0.09\narms:\n"
                     "  hosted: {prices: {input: 2.5, output: 20.0, cached_input: 0.25}}\n"
                     "  frognano: {usd_per_hour: 1.75}\n")
    repriced = json.loads(leafcost("reprice", run_id, "--prices", str(sheet), "--db", str(db), "--json").stdout)
    recorded = json.loads(leafcost("summary", run_id, "--db", str(db), "--json").stdout)
    r = {a["arm"]: a for a in repriced["arms"]}
    o = {a["arm"]: a for a in recorded["arms"]}
    assert repriced["scenario"] == "double"
    assert r["hosted"]["cost_usd"]["tokens"] == pytest.approx(2 * o["hosted"]["cost_usd"]["tokens"], rel=1e-12)
    assert r["hosted"]["cost_usd"]["sandbox"] == pytest.approx(2 * o["hosted"]["cost_usd"]["sandbox"], rel=1e-12)
    assert r["frognano"]["cost_usd"]["gpu"] == pytest.approx(o["frognano"]["cost_usd"]["gpu"] / 2, rel=1e-9)
    assert r["hosted"]["price_source"] == "scenario double"
    assert sql(db, "select sum(cost_usd) from model_calls where arm = 'hosted'")[0][0] == before
    stored = leafcost("summary", run_id, "--db", str(db), "--scenario", "double", "--json").stdout
    assert json.loads(stored) == repriced
    bad = tmp_path / "bad.yaml"
    bad.write_text("arms:\n  hosted: {usd_per_hour: 2.0}\n")
    assert "a hosted arm is priced per token" in leafcost("reprice", run_id, "--prices", str(bad), "--db", str(db),
                                                          expect=2).stderr
