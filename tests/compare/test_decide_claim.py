"""The reaches question as the claim's test (issue 25): `decide.reaches.tolerance` settles a run as "consistent"
when its Avg@k is within the tolerance of the claim (compare.claim_check's verdict), 0 keeping the question's
old meaning exactly; `decide.reaches.tasks: seen` judges only the tasks the arm may have seen, the horizon their
count; through `leafcost run`, a run on dated tasks stops on the seen tasks' verdict and one with no seen task is
refused before anything runs."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import duckdb
import numpy as np
import pytest
import yaml
from pydantic import ValidationError
from support.sglang_fake import ScriptedServer

from compare.decide_spec import DecideConfig
from compare.decision import ArmTasks, after_look, look
from compare.sequential import BettingSequence, claim_verdict, confidence_sequence, horizon_tasks
from conftest import SOLVE_SCRIPT, TASK_TOML

SEEDS = 3
TOTAL = 500


def arm(resolved, attempts=None) -> ArmTasks:
    resolved = np.asarray(resolved, dtype=int)
    attempts = np.full(resolved.size, SEEDS) if attempts is None else np.asarray(attempts, dtype=int)
    return ArmTasks("f", resolved, attempts, np.zeros(resolved.size), 0.0)


def reaches(**fields) -> DecideConfig:
    return DecideConfig.model_validate({"reaches": {"arm": "f", **fields}})


def one_question(config: DecideConfig, resolved, *, total=TOTAL, mask=None):
    result = look(config, {"f": arm(resolved)}, look_number=1, total_tasks=total, previous=None,
                  reaches_tasks=mask)
    return result, result.questions[0]


# --- the question in the spec ---------------------------------------------------------------------------------------

def test_the_new_fields_default_to_the_old_question():
    question = reaches(avg_at_k=0.615).reaches
    assert question.tolerance == 0.0 and question.tasks == "all"
    seen = reaches(avg_at_k=0.615, tolerance=0.05, tasks="seen").reaches
    assert seen.tolerance == 0.05 and seen.tasks == "seen"


@pytest.mark.parametrize(("fields", "message"), [
    ({"avg_at_k": 0.3, "tolerance": 0.3}, "tolerance (0.3) must be below avg_at_k (0.3)"),
    ({"avg_at_k": 0.6, "tolerance": -0.01}, "greater than or equal to 0"),
    ({"avg_at_k": 0.6, "tasks": "fresh"}, "'all' or 'seen'"),
])
def test_a_tolerance_or_task_set_that_cannot_be_is_refused(fields, message):
    with pytest.raises(ValidationError, match=message.replace("(", r"\(").replace(")", r"\)")):
        reaches(**fields)


# --- the verdict ----------------------------------------------------------------------------------------------------

def test_without_a_tolerance_the_verdict_is_the_claim_verdict_of_the_sequence():
    rng = np.random.default_rng(3)
    for rate in (0.45, 0.6, 0.75):
        resolved = rng.binomial(SEEDS, rate, 150)
        _, question = one_question(reaches(avg_at_k=0.6), resolved)
        interval = confidence_sequence(resolved / SEEDS, 0.05, horizon_tasks(TOTAL))[-1]
        assert question.verdict == claim_verdict(interval, 0.6)
        assert (question.lower, question.upper) == (interval.lower, interval.upper)


def test_a_rate_within_the_tolerance_is_consistent_and_settles_the_run():
    resolved = np.tile([3, 2, 2, 1], 60)  # Avg@3 0.667 over 240 tasks: the interval clears 0.6, not 0.7
    result, question = one_question(reaches(avg_at_k=0.7, tolerance=0.1), resolved)
    assert question.verdict == "consistent" and 0.6 <= question.lower < 0.7 and result.decided
    assert question.decided_at_tasks == 240 and question.tasks_to_decide is None
    assert question.sentence.startswith("f's Avg@3 is consistent with 0.7 (at least 0.6, within the tolerance of "
                                        "0.1): 0.67 [")
    assert after_look(reaches(avg_at_k=0.7, tolerance=0.1), result, spent={"f": 0.0}, round_tasks=10)[0] == "decided"
    _, strict = one_question(reaches(avg_at_k=0.7), resolved)
    assert strict.verdict == "undecided"  # the same figures without a tolerance: not settled


def test_an_interval_above_the_claim_still_reads_reaches_with_a_tolerance():
    _, question = one_question(reaches(avg_at_k=0.5, tolerance=0.05), np.tile([3, 3, 2], 80))
    assert question.verdict == "reaches" and question.lower >= 0.5
    assert question.sentence.startswith("f's Avg@3 reaches 0.5: ")


def test_below_is_below_whatever_the_tolerance():
    _, question = one_question(reaches(avg_at_k=0.8, tolerance=0.2), np.tile([1, 2, 1], 80))
    assert question.verdict == "below" and question.upper < 0.8


# --- the claim's tasks only ------------------------------------------------------------------------------------------

def test_seen_reads_only_the_marked_tasks_and_sizes_its_bets_for_their_count():
    rng = np.random.default_rng(8)
    resolved = rng.binomial(SEEDS, 0.7, 200)
    mask = np.zeros(TOTAL, dtype=bool)
    mask[::2] = True  # every other task of the run is one the arm may have seen
    resolved[1::2] = 0  # the fresh ones all missed: they must not pull the claim down
    config = reaches(avg_at_k=0.6, tasks="seen")
    _, question = one_question(config, resolved, mask=mask)
    seen = resolved[::2] / SEEDS
    interval = confidence_sequence(seen, 0.05, horizon_tasks(int(mask.sum())))[-1]
    assert (question.estimate, question.lower, question.upper) == pytest.approx(
        (seen.mean(), interval.lower, interval.upper))
    assert "on the tasks it may have seen" in question.sentence
    _, everything = one_question(reaches(avg_at_k=0.6), resolved)
    assert everything.estimate == pytest.approx(resolved.mean() / SEEDS) and everything.verdict == "below"


def test_a_carried_sequence_over_seen_tasks_matches_a_fresh_one():
    rng = np.random.default_rng(9)
    resolved = rng.binomial(SEEDS, 0.6, 100)
    mask = rng.random(TOTAL) < 0.7
    config = reaches(avg_at_k=0.62, tasks="seen")  # near the truth: undecided at the first look, so it is carried
    first = look(config, {"f": arm(resolved[:40])}, look_number=1, total_tasks=TOTAL, previous=None,
                 reaches_tasks=mask)
    second = look(config, {"f": arm(resolved)}, look_number=2, total_tasks=TOTAL, previous=first,
                  reaches_tasks=mask)
    alone = look(config, {"f": arm(resolved)}, look_number=2, total_tasks=TOTAL, previous=None, reaches_tasks=mask)
    assert first.questions[0].verdict == "undecided" and second.questions == alone.questions
    expected = BettingSequence(0.05, horizon_tasks(int(mask.sum()))).extend(resolved[mask[:100]] / SEEDS)
    assert second._reaches_state.sequence.interval == expected


def test_undecided_with_every_seen_task_run_is_out_of_reach_while_fresh_tasks_remain():
    mask = np.zeros(100, dtype=bool)
    mask[:30] = True
    config = reaches(avg_at_k=0.5, tasks="seen")
    result, question = one_question(config, np.tile([2, 1], 25), total=100, mask=mask)
    assert question.verdict == "undecided" and question.futile
    assert after_look(config, result, spent={"f": 0.0}, round_tasks=10)[0] == "futile"


def test_no_seen_task_leaves_the_claim_undecided_and_says_why():
    result, question = one_question(reaches(avg_at_k=0.5, tasks="seen"), [3] * 10, total=20,
                                    mask=np.zeros(20, dtype=bool))
    assert question.verdict == "undecided" and question.estimate is None and result.futile
    assert question.sentence.endswith("every task is fresh for it (none to judge)")


def test_a_mask_that_does_not_cover_the_run_is_refused():
    with pytest.raises(ValueError, match="reaches_tasks must mark each of the run's 500 tasks"):
        one_question(reaches(avg_at_k=0.5, tasks="seen"), [3] * 10, mask=np.ones(10, dtype=bool))


# --- through leafcost run --------------------------------------------------------------------------------------------

LEAFCOST = Path(sys.executable).with_name("leafcost")
KEY_ENV = "LEAFCOST_TEST_DECIDE_CLAIM_KEY"
TIMES = "def add(a, b):\n    return a * b\n"  # the scripted fix cannot fix this one
SEEN_DAY, RELEASED, FRESH_DAY = "2024-06-01", "2025-01-01", "2025-06-01"


def dated_suite(make_task, *, fresh_every: int) -> Path:
    """20 tasks; every `fresh_every`-th pair's odd task is dated after the release and unfixable, the others dated
    before it and fixable (fresh_every 1: every odd task fresh; 0: every task fresh and fixable)."""
    for i in range(20):
        fresh = fresh_every == 0 or (i % 2 == 1)
        metadata = f'[metadata]\ncreated_at = "{FRESH_DAY if fresh else SEEN_DAY}T12:00:00Z"\n'
        toml = TASK_TOML.format(verifier_timeout=60, memory_mb=512, pids=256, network="false") + metadata
        files = {"task.toml": toml, **({"environment/repo/calc.py": TIMES} if fresh and fresh_every else {})}
        task = make_task(f"calc-{i:02d}", files=files)
    return Path(task.path).parent


def write_spec(path: Path, suite: Path, server: ScriptedServer, decide: dict) -> Path:
    arm_spec = {"name": "frog", "adapter": "router", "model": "scripted-frog", "base_url": server.base_url,
                "api_key_env": KEY_ENV, "max_retries": 0, "allow_unlisted_model": True, "released": RELEASED,
                "prices": {"input": 1.0, "output": 4.0, "cached_input": 1.0}}
    spec = {"name": "claim", "suite": str(suite), "seeds": 1, "workers": 4, "max_attempts": 1,
            "budgets": {"max_steps": 4, "time_budget_sec": 120}, "costs": {"sandbox_usd_per_vcpu_hour": 0.0},
            "arms": [arm_spec], "decide": decide}
    path.write_text(yaml.safe_dump(spec))
    return path


def leafcost(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([str(LEAFCOST), *args], capture_output=True, text=True, timeout=600,
                          env={**os.environ, KEY_ENV: "sk-test-decide-claim-0001"})


def test_a_run_judges_the_claim_on_the_seen_tasks_and_stops_when_it_is_settled(make_task, tmp_path):
    suite = dated_suite(make_task, fresh_every=1)  # seen tasks all resolve, fresh ones all miss
    claim = {"arm": "frog", "avg_at_k": 0.9, "tolerance": 0.5}
    with ScriptedServer(SOLVE_SCRIPT) as server:
        seen_spec = write_spec(tmp_path / "seen.yaml", suite, server,
                               {"reaches": {**claim, "tasks": "seen"}, "round_tasks": 4})
        seen = leafcost("run", str(seen_spec), "--db", str(tmp_path / "seen.duckdb"), "--json")
        all_spec = write_spec(tmp_path / "all.yaml", suite, server, {"reaches": claim, "round_tasks": 4})
        every = leafcost("run", str(all_spec), "--db", str(tmp_path / "all.duckdb"), "--json")
    assert seen.returncode == 0, seen.stderr
    line = json.loads(seen.stdout)["decision"]
    assert line.startswith("decided after"), line
    assert "frog's Avg@1 on the tasks it may have seen is consistent with 0.9" in line
    with duckdb.connect(str(tmp_path / "seen.duckdb"), read_only=True) as conn:
        tasks, action = conn.execute("SELECT tasks, action FROM decision_looks ORDER BY look DESC LIMIT 1").fetchone()
        resolved, episodes = conn.execute("SELECT sum(resolved::int), count(*) FROM episodes").fetchone()
    assert action == "decided" and tasks < 20 and episodes == tasks
    assert 0 < resolved < episodes  # fresh tasks ran beside the seen ones, and missed
    assert every.returncode == 0, every.stderr
    assert "frog's Avg@1 is below 0.9" in json.loads(every.stdout)["decision"]  # the fresh misses count here


def test_a_seen_claim_on_a_suite_of_only_fresh_tasks_is_refused_before_anything_runs(make_task, tmp_path):
    suite = dated_suite(make_task, fresh_every=0)
    db = tmp_path / "ledger.duckdb"
    with ScriptedServer(SOLVE_SCRIPT) as server:
        spec = write_spec(tmp_path / "spec.yaml", suite, server,
                          {"reaches": {"arm": "frog", "avg_at_k": 0.6, "tasks": "seen"}})
        done = leafcost("run", str(spec), "--db", str(db), "--json")
    assert done.returncode != 0
    assert "decide.reaches.tasks: seen, but every task is fresh for arm frog (created after its released: " \
           "2025-01-01)" in done.stderr
    if db.exists():
        with duckdb.connect(str(db), read_only=True) as conn:
            assert conn.execute("SELECT count(*) FROM episodes").fetchone() == (0,)
