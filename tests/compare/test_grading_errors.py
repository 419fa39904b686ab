"""An attempt the verifier gives no verdict on (no reward file, an invalid reward, a verifier timeout) is a grading
error: counted with its own rate, never a miss, left out of the resolve rates, and `validate` lists its task as
invalid with the reason. Through `leafcost run`, `summary` and `validate` on real tasks in real sandboxes."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import duckdb
import pytest
import yaml

LEAFCOST = Path(sys.executable).with_name("leafcost")
NO_REWARD = "#!/bin/bash\necho 'the tests ran and wrote no reward'\n"
BAD_REWARD = "#!/bin/bash\nmkdir -p /logs/verifier\necho nan > /logs/verifier/reward.txt\n"


@pytest.fixture
def suite(make_task) -> Path:
    make_task("good")
    make_task("no-reward", files={"tests/test.sh": NO_REWARD})
    return Path(make_task("bad-reward", files={"tests/test.sh": BAD_REWARD}).path).parent


def leafcost(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([str(LEAFCOST), *args], capture_output=True, text=True, timeout=600)


def test_an_attempt_without_a_verdict_is_a_grading_error_left_out_of_the_resolve_rates(suite, tmp_path):
    spec = tmp_path / "spec.yaml"
    spec.write_text(yaml.safe_dump({"name": "grading", "suite": str(suite), "seeds": 1, "workers": 2,
                                    "max_attempts": 1, "arms": [{"name": "oracle", "adapter": "oracle"}]}))
    db = tmp_path / "l.duckdb"
    ran = leafcost("run", str(spec), "--db", str(db), "--json")
    assert ran.returncode == 0, ran.stderr
    run_id = json.loads(ran.stdout)["run_id"]
    with duckdb.connect(str(db), read_only=True) as conn:
        grades = dict(conn.execute("SELECT task_id, grade_error FROM episodes").fetchall())
    assert grades == {"good": None, "no-reward": "reward_missing", "bad-reward": "reward_invalid"}

    shown = leafcost("summary", run_id, "--db", str(db), "--json")
    assert shown.returncode == 0, shown.stderr
    arm = json.loads(shown.stdout)["arms"][0]
    assert (arm["attempts"], arm["resolved_attempts"], arm["grading_errors"]) == (3, 1, 2)
    assert arm["grading_error_rate"] == pytest.approx(2 / 3)
    # the one attempt with a verdict resolved its task; the two without one are not misses (1/3 before)
    assert arm["avg_at_k"]["value"] == 1.0 and arm["pass_at_k"]["1"]["value"] == 1.0
    assert (arm["harness_error_rate"], arm["infra_error_rate"]) == (0.0, 0.0)
    # the cost stays whole: every attempt's sandbox is paid for, verdict or not
    assert arm["cost_per_resolved_attempt"]["value"] == pytest.approx(arm["cost_usd"]["total"])

    table = leafcost("summary", run_id, "--db", str(db))
    assert table.returncode == 0, table.stderr

    # strict figures count an attempt without a verdict as a miss: an agent that kills its verifier gains nothing
    strict = leafcost("summary", run_id, "--db", str(db), "--json", "--strict-grading")
    assert strict.returncode == 0, strict.stderr
    arm = json.loads(strict.stdout)["arms"][0]
    assert arm["grading_errors"] == 2 and arm["avg_at_k"]["value"] == pytest.approx(1 / 3)


def test_validate_lists_a_task_whose_runs_got_no_verdict_as_invalid_with_the_reason(suite):
    checked = leafcost("validate", str(suite), "--json")
    assert checked.returncode == 1, checked.stderr
    report = json.loads(checked.stdout)
    by_task = {task["task_id"]: task for task in report["tasks"]}
    assert (report["valid"], report["invalid"]) == (1, 2) and by_task["good"]["valid"]
    for name, kind in (("no-reward", "reward_missing"), ("bad-reward", "reward_invalid")):
        task = by_task[name]
        assert (task["valid"], task["oracle_resolved"], task["empty_resolved"]) == (False, None, None)
        assert f"oracle run: no verdict (grading error {kind})" in task["error"]
        assert f"empty run: no verdict (grading error {kind})" in task["error"]
