"""The freshness split through the console script: Harbor tasks dated by `[metadata] created_at` on both sides of an
arm's `released:` day, run against a scripted endpoint whose tokens and dollars are known, so every count, rate and
cost per resolved attempt of each part is computed here by hand; no `released:`, no split; a malformed date is that
task's load error, naming the field."""

from __future__ import annotations

import hashlib
import json
import os
import re
import shutil
import subprocess
import sys
from datetime import date, datetime, timezone
from pathlib import Path

import duckdb
import numpy as np
import pytest
import yaml
from support.sglang_fake import ScriptedServer

from compare.arm_table import fmt_usd
from compare.spec import RunSpec, SpecError, parse_run_spec
from compare.stats import Resampler, ratio, resolve_rates
from conftest import SOLVE_SCRIPT, TASK_TOML

LEAFCOST = Path(sys.executable).with_name("leafcost")
KEY_ENV = "LEAFCOST_TEST_FRESH_KEY"
TIMES = "def add(a, b):\n    return a * b\n"  # a bug the scripted fix (a - b → a + b) cannot fix
# One scripted episode: 680 prompt tokens (all at the input price, cached or not), 46 completion, at $1 / $4 per 1M.
EPISODE_USD = 680e-6 + 46 * 4e-6
RELEASED = "2024-01-01"
# name: (created_at as task.toml writes it, or None for no date; whether the scripted fix resolves it)
TASKS = {
    "a-old-fixed": ("2023-03-01", True),                       # a TOML date
    "b-old-broken": ('"2023-06-01T12:00:00Z"', False),         # ISO text
    "c-release-day": ('"2024-01-01T23:59:00Z"', False),        # on the release day: seen
    "d-new-fixed": ("2024-01-02T00:00:00Z", True),             # a TOML date-time, the next day: fresh
    "e-new-broken": ('"2024-02-01"', False),
    "f-new-fixed": ('"2024-03-05 10:00"', True),              # text with a space and no offset (UTC)
    "g-undated": (None, True),
}
SEEDS = 2
RESAMPLES, SEED = 200, 7


def write_suite(make_task, tasks: dict[str, tuple[str | None, bool]]) -> Path:
    for name, (created, fixable) in tasks.items():
        toml = TASK_TOML.format(verifier_timeout=60, memory_mb=512, pids=256, network="false")
        if created is not None:
            toml += f"[metadata]\ncreated_at = {created}\n"
        files = {"task.toml": toml, **({} if fixable else {"environment/repo/calc.py": TIMES})}
        task = make_task(name, files=files)
    return Path(task.path).parent


def arm(name: str, base_url: str, released: str | None = None) -> dict:
    return {"name": name, "adapter": "router", "model": f"scripted-{name}", "base_url": base_url,
            "api_key_env": KEY_ENV, "max_retries": 0, "allow_unlisted_model": True,
            "prices": {"input": 1.0, "output": 4.0, "cached_input": 1.0},
            **({"released": released} if released else {})}


def write_spec(path: Path, suite: Path, arms: list[dict], seeds: int = SEEDS) -> Path:
    path.write_text(yaml.safe_dump({
        "name": "fresh", "suite": str(suite), "seeds": seeds, "workers": 8, "max_attempts": 1,
        "budgets": {"max_steps": 4, "time_budget_sec": 120},
        "costs": {"sandbox_usd_per_vcpu_hour": 0.0},  # dollars are the scripted tokens × prices, exactly
        "arms": arms}))
    return path


def leafcost(*args: str) -> subprocess.CompletedProcess:
    done = subprocess.run([str(LEAFCOST), *args], capture_output=True, text=True, timeout=600,
                          env={**os.environ, KEY_ENV: "sk-test-fresh-0001", "COLUMNS": "200"})
    assert done.returncode == 0, done.stderr[-2000:]
    return done


def expected_part(names: list[str]) -> dict:
    """A part's figures by hand: every seed of a task resolves alike (the script is the same), every episode costs
    EPISODE_USD; the intervals from compare.stats on the part's tasks in the summary's (sorted) order."""
    names = sorted(names)
    n = np.full(len(names), SEEDS)
    c = np.array([SEEDS if TASKS[name][1] else 0 for name in names])
    resolved = int(c.sum())
    return {"tasks": len(names), "attempts": SEEDS * len(names), "resolved_attempts": resolved,
            "avg_at_k_value": resolved / (SEEDS * len(names)),
            "avg_at_k": resolve_rates(n, c, Resampler(len(names), RESAMPLES, SEED))["avg_at_k"].as_json(),
            "cost_value": SEEDS * len(names) * EPISODE_USD / resolved,
            "cost": ratio(n * EPISODE_USD, c.astype(float), Resampler(len(names), RESAMPLES, SEED),
                          nothing="no resolved attempts").as_json()}


def check_part(part: dict, names: list[str]) -> None:
    want = expected_part(names)
    assert (part["tasks"], part["attempts"], part["resolved_attempts"]) == \
        (want["tasks"], want["attempts"], want["resolved_attempts"])
    assert part["avg_at_k"] == want["avg_at_k"] and part["avg_at_k"]["value"] == pytest.approx(want["avg_at_k_value"])
    assert part["cost_per_resolved_attempt"]["value"] == pytest.approx(want["cost_value"], rel=1e-9)
    got, expected = part["cost_per_resolved_attempt"], want["cost"]
    assert [None if b is None else pytest.approx(b, rel=1e-9) for b in expected["ci95"]] == got["ci95"]
    assert got.get("reason") == expected.get("reason")  # an open side says why


FRESH = ["d-new-fixed", "e-new-broken", "f-new-fixed"]   # 2 of 3 resolve: Avg@k 2/3, $ 6 episodes / 4 resolved
SEEN = ["a-old-fixed", "b-old-broken", "c-release-day"]  # 1 of 3 resolve: Avg@k 1/3, $ 6 episodes / 2 resolved


def test_tasks_on_both_sides_of_a_release_day_split_each_figure_exactly(make_task, tmp_path):
    suite = write_suite(make_task, TASKS)
    bad = suite / "h-bad-date"  # a copy of a good task, with a date nobody can read
    shutil.copytree(suite / "g-undated", bad)
    (bad / "task.toml").write_text((bad / "task.toml").read_text() + '[metadata]\ncreated_at = "last tuesday"\n')
    db = tmp_path / "ledger.duckdb"
    with ScriptedServer(SOLVE_SCRIPT) as server:
        spec = write_spec(tmp_path / "spec.yaml", suite, [arm("recent", server.base_url, RELEASED),
                                                         arm("plain", server.base_url)])
        shown = leafcost("run", str(spec), "--db", str(db))
    text = " ".join(shown.stdout.split())
    # the malformed date is that task's load error, naming the field; the rest of the suite runs
    assert "task h-bad-date skipped: task h-bad-date: task.toml: metadata.created_at: not a date" in text
    assert "(got 'last tuesday')" in text
    # leafcost run's own summary carries the split: only the arm with released:
    assert "fresh vs seen tasks" in text and "recent" in text.split("fresh vs seen tasks")[1]
    assert "plain" not in text.split("fresh vs seen tasks")[1].split("fresh: tasks created after")[0]
    assert "recent: 1 task without a date, in neither part" in text
    for share, dollars in (("66.7%", 1.5 * EPISODE_USD), ("33.3%", 3 * EPISODE_USD)):
        assert share in text and fmt_usd(dollars) in text

    # each task's date is in the ledger with the run, UTC; the malformed one is not a task of the run
    with duckdb.connect(str(db), read_only=True) as conn:
        conn.execute("SET TimeZone = 'UTC'")
        (run_id,), = conn.execute("SELECT run_id FROM runs").fetchall()
        dates = dict(conn.execute("SELECT task_id, created_at FROM run_tasks WHERE run_id = ?", [run_id]).fetchall())
    assert set(dates) == set(TASKS)
    assert dates["g-undated"] is None
    assert dates["d-new-fixed"] == datetime(2024, 1, 2, tzinfo=timezone.utc)
    assert dates["f-new-fixed"] == datetime(2024, 3, 5, 10, 0, tzinfo=timezone.utc)

    document = json.loads(leafcost("summary", run_id, "--db", str(db), "--json", "--resamples", str(RESAMPLES),
                                   "--seed", str(SEED)).stdout)
    (split,) = document["freshness"]
    assert (split["arm"], split["released"], split["undated_tasks"]) == ("recent", RELEASED, 1)
    check_part(split["fresh"], FRESH)
    check_part(split["seen"], SEEN)
    # the parts are the arm's own figures on fewer tasks: together with the undated task they make its totals
    recent = document["arms"][0]
    assert recent["resolved_attempts"] == split["fresh"]["resolved_attempts"] + split["seen"]["resolved_attempts"] + 2

    table = " ".join(leafcost("summary", run_id, "--db", str(db)).stdout.split())
    assert "fresh vs seen tasks" in table and fmt_usd(1.5 * EPISODE_USD) in table
    compared = json.loads(leafcost("compare", run_id, "--arms", "recent,plain", "--db", str(db), "--json",
                                   "--resamples", str(RESAMPLES), "--seed", str(SEED)).stdout)
    assert compared["freshness"] == document["freshness"]
    assert "fresh vs seen tasks" in leafcost("compare", run_id, "--arms", "recent,plain", "--db", str(db)).stdout


def test_without_a_release_date_no_split_is_shown(make_task, tmp_path):
    suite = write_suite(make_task, {name: TASKS[name] for name in ("a-old-fixed", "d-new-fixed")})
    db = tmp_path / "ledger.duckdb"
    with ScriptedServer(SOLVE_SCRIPT) as server:
        spec = write_spec(tmp_path / "spec.yaml", suite, [arm("plain", server.base_url)], seeds=1)
        ran = leafcost("run", str(spec), "--db", str(db), "--json")
    summary = json.loads(ran.stdout)
    assert summary["freshness"] is None
    run_id = summary["run_id"]
    assert json.loads(leafcost("summary", run_id, "--db", str(db), "--json").stdout)["freshness"] is None
    assert "fresh vs seen" not in leafcost("summary", run_id, "--db", str(db)).stdout


# --- the spec's released: -------------------------------------------------------------------------------------------

def spec_with(**released) -> RunSpec:
    arms = [{"name": "recent", "adapter": "router", "model": "m", "api_key_env": KEY_ENV, "allow_unpriced": True},
            {"name": "oracle", "adapter": "oracle"}]
    for arm_spec in arms:
        if arm_spec["name"] in released:
            arm_spec["released"] = released[arm_spec["name"]]
    return parse_run_spec({"name": "fresh", "suite": "builtin", "arms": arms})


def test_every_arm_kind_takes_a_release_day_written_as_one():
    assert spec_with(recent="2024-05-13", oracle=date(2024, 5, 13)).arms[1].released == date(2024, 5, 13)
    for wrong in ("2024-5-13", 1715558400, "2024-05-13T10:00:00Z", datetime(2024, 5, 13), "2024-13-01", "May 2024"):
        with pytest.raises(SpecError, match=r"^spec: arms\.0\.released: "):
            spec_with(recent=wrong)


def test_an_unset_release_day_leaves_the_spec_hash_as_before_the_field_existed():
    """A resume compares hashes: a run started before `released` existed must still resume; a set one is hashed as
    the arm's other descriptive fields are, since the summary reads the run's stored spec."""
    plain = spec_with()
    # `claim` came later still, and is outside the hash: the dump without both is the one before either existed.
    without_field = re.sub(r',"released":null', "", plain.model_dump_json(exclude={"decide", "plan", "claim"}))
    assert plain.digest() == hashlib.sha256(without_field.encode()).hexdigest()
    dated, later = spec_with(recent="2024-05-13"), spec_with(recent="2024-06-01")
    assert len({plain.digest(), dated.digest(), later.digest()}) == 3
