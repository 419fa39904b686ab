"""`leafcost summary`, `compare`, `reprice` and `breakeven` on a real run (conftest's `four_arm_run`: a scripted
SGLang arm, a hosted arm through litellm, an unpriced hosted arm and the oracle over three small tasks, two
solvable, with two seeds); every figure is checked against numbers computed by hand or read back with SQL."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from datetime import timedelta
from pathlib import Path

import duckdb
import numpy as np
import pytest

from compare.breakeven import breakeven
from compare.costs import FORWARD_SECONDS, GPU_SECONDS
from compare.ledger import connect_read_only
from compare.stats import DEFAULT_SEED, Resampler, resolve_rates
from compare.summary import summarize


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


def test_summary_is_reproducible_and_the_seed_moves_the_intervals_not_the_figures(ledger_run):
    db, run_id = ledger_run
    first = leafcost("summary", run_id, "--db", str(db), "--json").stdout
    assert leafcost("summary", run_id, "--db", str(db), "--json").stdout == first
    # the hosted arm's seeds and resolves per task, read back with SQL: c = 2, 2, 0 of n = 2 (calc-c cannot be fixed)
    rows = sql(db, "select task_id, count(*), count(*) filter (where resolved) from episodes "
                   "where arm = 'hosted' and final group by task_id order by task_id")
    n, c = np.array([r[1] for r in rows]), np.array([r[2] for r in rows])
    intervals = {}
    for seed in (DEFAULT_SEED, 7):
        # 100 resamples of 3 tasks: how many resamples draw only calc-c (0 resolved) depends on the seed
        document = json.loads(leafcost("summary", run_id, "--db", str(db), "--json", "--seed", str(seed),
                                       "--resamples", "100").stdout)
        assert document["bootstrap"] == {"resamples": 100, "seed": seed, "unit": "task"}
        hosted = {arm["arm"]: arm for arm in document["arms"]}["hosted"]
        assert hosted["avg_at_k"] == resolve_rates(n, c, Resampler(3, 100, seed))["avg_at_k"].as_json()
        intervals[seed] = hosted["avg_at_k"]["ci95"], hosted["cost_per_resolved_attempt"]["reason"]
        assert hosted["avg_at_k"]["value"] == pytest.approx(2 / 3)  # the figure itself: the same for every seed
    # the two seeds draw different resamples, so the check above would catch a seed that is not passed through: at
    # 3 tasks the expanded interval (t with 2 df) spans every resample, but 1 of seed 20261202's 100 resamples
    # draws only calc-c (nothing resolved), 4 of seed 7's
    assert intervals[DEFAULT_SEED][0] == intervals[7][0] == pytest.approx([0.0, 1.0])
    assert intervals[DEFAULT_SEED][1].startswith("nothing resolves in 1 of 100 resamples")
    assert intervals[7][1].startswith("nothing resolves in 4 of 100 resamples")
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


# --- the self-hosted arm's lease and busy counter, on copies of the run's ledger changed by SQL ---------------------

def copy_of(db: Path, tmp_path: Path, *statements: str) -> Path:
    """A copy of the ledger `db` with `statements` applied (the run's own ledger stays as it is)."""
    copy = tmp_path / f"copy-{len(list(tmp_path.glob('copy-*')))}.duckdb"
    shutil.copy(db, copy)
    with duckdb.connect(str(copy)) as conn:
        for statement in statements:
            conn.execute(statement)
    return copy


def frognano(db: Path, run_id: str, **options) -> dict:
    conn = connect_read_only(db)
    try:
        document = summarize(conn, run_id, **options)
    finally:
        conn.close()
    return {arm["arm"]: arm for arm in document["arms"]}["frognano"] | {"_document": document}


def test_the_summary_names_the_busy_counter_it_read_under_either_spelling(ledger_run, tmp_path):
    db, run_id = ledger_run
    old = frognano(db, run_id)
    assert old["lease"]["busy_counter"] == GPU_SECONDS and "busy_counter_reason" not in old["lease"]
    # SGLang 0.5.11 and later: the same counters renamed, categories without the forward_ prefix
    renamed = copy_of(db, tmp_path, f"UPDATE server_samples SET metric = replace(replace(metric, '{GPU_SECONDS}', "
                                    f"'{FORWARD_SECONDS}'), 'category=\"forward_', 'category=\"') "
                                    f"WHERE starts_with(metric, '{GPU_SECONDS}')")
    assert sql(renamed, f"select count(*) from server_samples where starts_with(metric, '{FORWARD_SECONDS}') "
                        "and metric like '%category=\"extend\"%'")[0][0] > 0
    new = frognano(renamed, run_id)
    assert new["lease"]["busy_counter"] == FORWARD_SECONDS
    assert new["lease"]["busy_seconds"] == old["lease"]["busy_seconds"] is not None
    assert new["utilization"] == old["utilization"] is not None
    weights_new, weights_old = new["lease"]["weights"], old["lease"]["weights"]
    assert weights_new["source"] == weights_old["source"] == "fitted" and FORWARD_SECONDS in weights_new["note"]
    assert (weights_new["uncached_prefill"], weights_new["decode"]) == (weights_old["uncached_prefill"],
                                                                        weights_old["decode"])


def test_without_a_busy_counter_the_summary_says_why_and_how_to_get_one(ledger_run, tmp_path):
    db, run_id = ledger_run
    stripped = copy_of(db, tmp_path, f"DELETE FROM server_samples WHERE starts_with(metric, '{GPU_SECONDS}')")
    arm = frognano(stripped, run_id)
    lease = arm["lease"]
    assert lease["busy_counter"] is None and lease["busy_seconds"] is None and arm["utilization"] is None
    assert lease["busy_counter_reason"].startswith(f"the server did not export {FORWARD_SECONDS}")
    assert "start SGLang with SGLANG_ENABLE_METRICS_DEVICE_TIMER=1" in lease["busy_counter_reason"]
    assert lease["utilization_reason"] == lease["busy_counter_reason"]
    hosted = {a["arm"]: a for a in arm["_document"]["arms"]}["hosted"]
    assert "SGLANG_ENABLE_METRICS_DEVICE_TIMER=1" in breakeven(arm, hosted)["reason"]


def test_an_open_lease_is_billed_to_its_last_heartbeat_so_the_figures_never_move(ledger_run, tmp_path):
    db, run_id = ledger_run
    # as `kill -9` leaves it: the lease still open, its owner's last heartbeat 10 minutes after the start
    killed = copy_of(db, tmp_path, "UPDATE gpu_leases SET ended_at = NULL, "
                                   "heartbeat_at = started_at + INTERVAL 10 MINUTE WHERE arm = 'frognano'")
    started = sql(killed, "select started_at from gpu_leases where arm = 'frognano'")[0][0]
    today = frognano(killed, run_id, now=started + timedelta(hours=1))
    tomorrow = frognano(killed, run_id, now=started + timedelta(days=1, hours=1))
    assert today == tomorrow  # every figure, cost per resolved and its interval included
    assert today["lease"]["open"] and today["lease"]["seconds"] == 600.0
    assert today["cost_usd"]["gpu"] == pytest.approx(3.5 * 600 / 3600, rel=1e-12)  # 1 GPU × $3.50 × 10 min
    # an open lease without a heartbeat (written before heartbeats existed) still ends at now: it moves
    no_beat = copy_of(killed, tmp_path, "UPDATE gpu_leases SET heartbeat_at = NULL")
    assert frognano(no_beat, run_id, now=started + timedelta(hours=1))["lease"]["seconds"] == 3600.0


def test_a_sandbox_cost_nothing_measured_is_not_zero_but_missing_with_its_reason(ledger_run, tmp_path):
    """Attempts whose CPU no cgroup measured (prlimit without root, an engine elsewhere): never priced as $0."""
    db, run_id = ledger_run
    copy = tmp_path / "ledger.duckdb"
    shutil.copy(db, copy)
    with duckdb.connect(str(copy)) as conn:
        conn.execute("UPDATE episodes SET sandbox_cpu_seconds = NULL WHERE run_id = ? AND arm = 'hosted'", [run_id])
        one = conn.execute("SELECT episode_id FROM episodes WHERE run_id = ? AND arm = 'frognano' ORDER BY "
                           "episode_id LIMIT 1", [run_id]).fetchone()[0]
        conn.execute("UPDATE episodes SET sandbox_cpu_seconds = NULL WHERE episode_id = ?", [one])
        attempts = conn.execute("SELECT count(*) FROM episodes WHERE run_id = ? AND arm = 'frognano'",
                                [run_id]).fetchone()[0]
        arms = {arm["arm"]: arm for arm in summarize(conn, run_id, resamples=200)["arms"]}
    hosted, frognano, oracle = arms["hosted"], arms["frognano"], arms["oracle"]
    assert hosted["cost_usd"]["sandbox"] is None
    assert hosted["sandbox_cost_reason"].startswith("not measured for 6 of 6 attempts: no cgroup measured")
    assert frognano["cost_usd"]["sandbox"] is not None and frognano["cost_usd"]["sandbox"] > 0
    assert frognano["sandbox_cost_reason"] == (
        f"not measured for 1 of {attempts} attempts: no cgroup measured their CPU (the prlimit fallback without "
        "root, or a container engine on another machine); the sandbox cost counts the measured attempts only")
    assert oracle["sandbox_cost_reason"] is None and oracle["cost_usd"]["sandbox"] > 0
