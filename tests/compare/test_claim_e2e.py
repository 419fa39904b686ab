"""The vendor's claim checked end to end against a stub model scripted per task to resolve at an exact rate.

One run goes as a buyer runs it: `leafcost reproduce PRESET ... --backend podman --run --json --full` on 12
SWE-bench instances (three copies of each fixture instance, in their images) at exactly the claimed Avg@3, with 4
fresh copies dated after the model's release for the contamination gap, then `leafcost report` writing its evidence
pack. The runs 10 points below the claim, 10 points above it, and behind a server without a tool-call parser (a
harness-unhealthy run) go through `leafcost run SPEC.yaml` and `leafcost claim RUN_ID` on 20 Harbor tasks in the
local (bubblewrap) sandbox, each resolved by one Bash command; the spec carries `claim:` and the early stop
`reproduce` writes (`decide: {reaches: {..., tolerance, tasks: seen}}`).

The test claim is 50 % Avg@3 with a 15-point tolerance at alpha 0.2 (ClaimConfig's largest), so that 12 and 20
tasks settle a verdict. The per-task counts were checked against compare.claim_check over every distinct task order
and every prefix of it (as a run that looks after each task would see them): the first settled verdict is the
expected one in every order, so neither the run's task order nor its early stop can change it."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import yaml
from leaf_checkouts import write_checkout
from support.sglang_fake import ScriptedServer

pytestmark = pytest.mark.timeout(1200)  # the podman run's 48 attempts (4 workers) on 2 cores, with a wide margin

LEAFCOST = Path(sys.executable).with_name("leafcost")
ROWS = Path(__file__).parents[1] / "fixtures" / "swebench" / "instances.jsonl"
ORIGINALS = [json.loads(line)["instance_id"] for line in ROWS.read_text().splitlines() if line.strip()]
RELEASED = "2024-06-01"  # the fixtures and the Harbor tasks are created before it: every claim task is "seen"
CLAIMED, CLAIMED_PASS, TOLERANCE, ALPHA = 0.5, 0.7, 0.15, 0.2
SEEDS = 3

# The podman run: 12 claim instances at exactly the claim, 18/36 = 50 % Avg@3, Pass@3 100 %: consistent.
CLAIM_IDS = [f"{original}-claim{n}" for n in range(1, 4) for original in ORIGINALS]
FRESH_IDS = [f"{original}-fresh" for original in ORIGINALS]  # created after the release day
AT_CLAIM = dict(zip(CLAIM_IDS, [2] * 6 + [1] * 6))
FRESH = dict.fromkeys(FRESH_IDS, 1)  # 4/12 = 33.3 % on the instances the model cannot have seen

# The local runs: 20 Harbor tasks, resolved attempts of 3 per task.
TASK_IDS = [f"claim-task-{number:02d}" for number in range(1, 21)]
BELOW = dict(zip(TASK_IDS, [2] * 4 + [1] * 16))  # 24/60 = 40 %, Pass@3 100 %: below
ABOVE = dict(zip(TASK_IDS, [2] * 16 + [1] * 4))  # 36/60 = 60 %, Pass@3 100 %: consistent

# What a server without --tool-call-parser sends: the call as text in the content.
RAW_MARKUP = [{"content": "<tool_call>\n<function=Bash>\n<parameter=command>\nls\n</parameter>\n</function>\n"
                          "</tool_call>"}]


def marker(task_id: str) -> str:
    """The line each task's problem statement ends with: how the stub tells the tasks apart."""
    return f"[leafcost test instance {task_id}]"


def missing(directory: str) -> list[dict]:
    """A look around `directory`, then giving up."""
    return [{"tool_calls": [{"name": "Bash", "arguments": {"command": f"cd {directory} && ls -a"}}]},
            {"content": "I could not find the bug."}]


def bash_then_close(command: str) -> list[dict]:
    return [{"tool_calls": [{"name": "Bash", "arguments": {"command": command}}]}, {"content": "Applied the fix."}]


def applying(patch: str) -> list[dict]:
    """A SWE-bench instance resolved: its gold patch applied with `git apply` from a here-document."""
    delimiter = "LEAFCOST_PATCH"
    assert delimiter not in patch
    return bash_then_close(f"cd /testbed && git apply - <<'{delimiter}'\n{patch}{delimiter}\n")


def stub_script(resolves: dict[str, int], resolving: dict[str, list[dict]], misses: list[dict]) -> dict:
    return {"tasks": {marker(task): {"resolve": count, "resolving": resolving[task], "missing": misses}
                      for task, count in resolves.items()}}


def claim_fields(instances: int) -> dict:
    """compare.claim_spec.ClaimConfig's fields of the test claim (the arm is `frognano`)."""
    return {"title": "the stub resolves 50 % of the test tasks (Avg@3)", "source": "this test",
            "arm": "frognano", "benchmark": "test tasks", "instances": instances, "avg_at_k": CLAIMED,
            "pass_at_k": CLAIMED_PASS, "k": SEEDS, "tolerance": TOLERANCE, "alpha": ALPHA,
            "max_harness_error_rate": 0.02}


def arm_fields(base_url: str) -> dict:
    return {"name": "frognano", "adapter": "sglang", "model": "frognano-4b", "base_url": base_url, "max_retries": 0,
            "released": RELEASED, "gpu": {"type": "H200", "usd_per_hour": 3.5}, "metrics_interval_sec": 1}


@dataclass(frozen=True)
class ClaimRun:
    document: dict[str, Any]  # the ClaimDocument (`reproduce --run --json` or `claim RUN_ID --json`)
    db: Path
    stub_tasks: dict[str, dict[str, int]]  # the stub's conversations per marker and branch


# --- the podman run: `leafcost reproduce` on SWE-bench instances ----------------------------------------------------

@dataclass(frozen=True)
class Inputs:
    root: Path
    dataset: Path
    fresh: Path
    preset: Path
    checkout: Path
    patches: dict[str, str]  # instance id → its gold patch


@pytest.fixture(scope="module")
def inputs(container_images, tmp_path_factory) -> Inputs:
    """The 12 claim copies and 4 fresh ones (their images tagged), the test preset, a fake FrogNano clone."""
    from swebench_images import copy_instances

    root = tmp_path_factory.mktemp("claim-e2e")
    originals = {instance: instance.rsplit("-", 1)[0] for instance in CLAIM_IDS + FRESH_IDS}
    rows = copy_instances(originals, ROWS)
    for number, row in enumerate(rows):
        row["problem_statement"] += f"\n\n{marker(row['instance_id'])}\n"
        if row["instance_id"] in FRESH:
            row["created_at"] = f"2024-09-{number % 28 + 1:02d}T09:00:00Z"
    dataset, fresh = root / "dataset.jsonl", root / "fresh.jsonl"
    dataset.write_text("".join(json.dumps(row) + "\n" for row in rows if row["instance_id"] in AT_CLAIM))
    fresh.write_text("".join(json.dumps(row) + "\n" for row in rows if row["instance_id"] in FRESH))
    preset = root / "test-claim.yaml"
    preset.write_text(yaml.safe_dump(preset_document(), sort_keys=False))
    return Inputs(root=root, dataset=dataset, fresh=fresh, preset=preset,
                  checkout=write_checkout(root / "FrogNano", git=True),
                  patches={row["instance_id"]: row["patch"] for row in rows})


def preset_document() -> dict:
    """compare/claim_preset.py's format, with the settings cut down for 16 instances on 2 cores."""
    return {
        "name": "test-claim", "model": "frognano-4b",
        "claim": {key: value for key, value in claim_fields(len(CLAIM_IDS)).items() if key != "arm"},
        "dataset": {"name": "leafcost/fixture-copies", "split": "test"},
        "settings": {"seeds": SEEDS, "workers": 4, "max_attempts": 1, "task_order_seed": 42,
                     "budgets": {"max_steps": 6, "time_budget_sec": 600, "max_tokens_per_turn": 1024},
                     "sampling": {"temperature": 0.6, "top_p": 0.95}},
        "unconfirmed": ["the stub's sampling: it ignores it"],
    }


@pytest.fixture(scope="module")
def at_claim(inputs) -> ClaimRun:
    """Exactly the claimed rate on every claim instance (--full), the fresh instances beside them."""
    resolves = {**AT_CLAIM, **FRESH}
    script = stub_script(resolves, {task: applying(inputs.patches[task]) for task in resolves}, missing("/testbed"))
    out, db = inputs.root / "at-claim", inputs.root / "at-claim.duckdb"
    with ScriptedServer(script) as stub:
        arm = inputs.root / "at-claim-arm.yaml"
        arm.write_text(yaml.safe_dump(arm_fields(stub.base_url)))
        argv = [str(LEAFCOST), "reproduce", str(inputs.preset), "--arm", str(arm), "--dataset", str(inputs.dataset),
                "--leaf-checkout", str(inputs.checkout), "--fresh", str(inputs.fresh), "--backend", "podman",
                "--out", str(out), "--db", str(db), "--full", "--run", "--json"]
        done = subprocess.run(argv, capture_output=True, text=True, timeout=1100, cwd=inputs.root,
                              env={**os.environ, "LEAFCOST_CACHE": str(inputs.root / "cache")})
        stub_tasks = stub.stats()["tasks"]
    assert done.returncode == 0, done.stderr[-3000:]
    return ClaimRun(document=json.loads(done.stdout), db=db, stub_tasks=stub_tasks)


# --- the local runs: `leafcost run` and `leafcost claim` on Harbor tasks --------------------------------------------

TEST_SH = """#!/bin/bash
mkdir -p /logs/verifier
if [ "$(cat /app/answer.txt 2>/dev/null)" = "{word}" ]; then echo 1 > /logs/verifier/reward.txt
else echo 0 > /logs/verifier/reward.txt; fi
"""


def fix_command(task_id: str) -> str:
    """The one Bash command that makes `task_id`'s test pass."""
    return f"cd /app && echo fixed-{task_id} > answer.txt"


def write_harbor_task(directory: Path, task_id: str) -> None:
    """A Harbor task whose test wants /app/answer.txt to read `fixed-<task id>`, dated before the release day."""
    files = {
        "task.toml": 'version = "1.0"\n[verifier]\ntimeout_sec = 60\n[agent]\ntimeout_sec = 120\n'
                     "[environment]\ncpus = 1\nmemory_mb = 512\npids = 256\nallow_internet = false\n"
                     '[metadata]\ncreated_at = "2024-02-01T09:00:00Z"\n',
        "instruction.md": f"/app/answer.txt should read fixed-{task_id}.\n\n{marker(task_id)}\n",
        "environment/Dockerfile": "FROM python:3.11-slim\nWORKDIR /app\nCOPY repo/ /app/\n",
        "environment/repo/answer.txt": "broken\n",
        "tests/test.sh": TEST_SH.format(word=f"fixed-{task_id}"),
        "solution/solve.sh": f"{fix_command(task_id)}\n",
    }
    for relative, text in files.items():
        path = directory / task_id / relative
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)


@pytest.fixture(scope="module")
def harbor_suite(tmp_path_factory) -> Path:
    suite = tmp_path_factory.mktemp("claim-e2e-harbor") / "tasks"
    for task_id in TASK_IDS:
        write_harbor_task(suite, task_id)
    return suite


def run_claim(suite: Path, name: str, resolves: dict[str, int], *, misses: list[dict] | None = None) -> ClaimRun:
    """`leafcost run` of a spec with the test claim and reproduce's early stop, then `leafcost claim --json`."""
    root = suite.parent
    script = stub_script(resolves, {task: bash_then_close(fix_command(task)) for task in resolves},
                         missing("/app") if misses is None else misses)
    db = root / f"{name}.duckdb"
    env = {**os.environ, "LEAFCOST_CACHE": str(root / "cache")}
    with ScriptedServer(script) as stub:
        spec = root / f"{name}.yaml"
        spec.write_text(yaml.safe_dump({
            "name": name, "suite": str(suite), "seeds": SEEDS, "workers": 4, "max_attempts": 1,
            "budgets": {"max_steps": 6, "time_budget_sec": 120}, "arms": [arm_fields(stub.base_url)],
            "claim": claim_fields(len(TASK_IDS)),
            "decide": {"reaches": {"arm": "frognano", "avg_at_k": CLAIMED, "tolerance": TOLERANCE, "tasks": "seen"},
                       "alpha": ALPHA}}))
        ran = subprocess.run([str(LEAFCOST), "run", str(spec), "--db", str(db), "--json"], capture_output=True,
                             text=True, timeout=600, cwd=root, env=env)
        stub_tasks = stub.stats()["tasks"]
    assert ran.returncode == 0, ran.stderr[-3000:]
    run_id = json.loads(ran.stdout)["run_id"]
    claimed = subprocess.run([str(LEAFCOST), "claim", run_id, "--db", str(db), "--json"], capture_output=True,
                             text=True, timeout=120, cwd=root, env=env)
    assert claimed.returncode == 0, claimed.stderr[-3000:]
    return ClaimRun(document=json.loads(claimed.stdout), db=db, stub_tasks=stub_tasks)


@pytest.fixture(scope="module")
def below(harbor_suite) -> ClaimRun:
    """10 points below the claim."""
    return run_claim(harbor_suite, "below", BELOW)


@pytest.fixture(scope="module")
def above(harbor_suite) -> ClaimRun:
    """10 points above the claim."""
    return run_claim(harbor_suite, "above", ABOVE)


@pytest.fixture(scope="module")
def unhealthy(harbor_suite) -> ClaimRun:
    """The above-claim model behind a server without a tool-call parser: every miss is raw markup."""
    return run_claim(harbor_suite, "unhealthy", ABOVE, misses=RAW_MARKUP)


# --- the checks -----------------------------------------------------------------------------------------------------

def ran(run: ClaimRun, scripted: dict[str, int]) -> dict[str, int]:
    """The scripted resolve counts of the claim tasks the run has a final attempt of; checks each is exact."""
    per_task = {task["task_id"]: task for task in run.document["per_task"]}
    assert per_task and set(per_task) <= set(scripted)
    for task_id, task in per_task.items():
        assert (task["attempts"], task["resolved"]) == (SEEDS, scripted[task_id]), task_id
        assert run.stub_tasks[marker(task_id)] == {"resolving": scripted[task_id],
                                                  "missing": SEEDS - scripted[task_id]}, task_id
    return {task_id: scripted[task_id] for task_id in per_task}


def assert_exact_figures(run: ClaimRun, scripted: dict[str, int]) -> None:
    """Avg@3 and Pass@3 are the scripted ones over the claim tasks that ran, the test's interval is check_claim's on
    those scores in the run's order."""
    from compare.claim_check import check_claim

    counts = ran(run, scripted)
    document = run.document
    scores = np.array([counts[task["task_id"]] / SEEDS for task in document["per_task"]])
    assert document["tasks"] == len(counts) and document["total_tasks"] == len(scripted)
    assert document["avg_at_k"]["estimate"] == pytest.approx(sum(counts.values()) / (SEEDS * len(counts)), abs=1e-12)
    assert document["pass_at_k"]["estimate"] == pytest.approx(np.mean([c > 0 for c in counts.values()]), abs=1e-12)
    for figure in ("avg_at_k", "pass_at_k"):
        assert document[figure]["lower"] <= document[figure]["estimate"] <= document[figure]["upper"]
    expected = check_claim(scores, CLAIMED, tolerance=TOLERANCE, alpha=ALPHA, total_tasks=len(scripted))
    test = document["test"]
    assert (test["alpha"], test["tolerance"], test["tasks"]) == (ALPHA, TOLERANCE, len(counts))
    assert (test["lower"], test["upper"]) == pytest.approx((expected.lower, expected.upper), abs=1e-12)
    assert test["verdict"] == expected.verdict
    assert document["claimed"] == {"avg_at_k": CLAIMED, "pass_at_k": CLAIMED_PASS, "k": SEEDS}


def assert_no_fresh_task(run: ClaimRun) -> None:
    """The arm has `released:` but every task is dated before it: a gap section that says why it has no gap."""
    gap = run.document["contamination"]
    assert gap["released"] == RELEASED
    assert (gap["seen_tasks"], gap["fresh_tasks"], gap["fresh"], gap["gap"]) == (run.document["tasks"], 0, None, None)
    assert "no gap" in gap["reason"]


def test_at_exactly_the_claimed_rate_the_figures_are_exact_and_the_claim_consistent(at_claim):
    document = at_claim.document
    assert_exact_figures(at_claim, AT_CLAIM)
    assert document["tasks"] == 12 and sum(task["resolved"] for task in document["per_task"]) == 18
    assert document["avg_at_k"]["estimate"] == pytest.approx(CLAIMED, abs=1e-12)
    assert document["pass_at_k"]["estimate"] == 1.0
    assert document["test"]["verdict"] == "consistent" and document["verdict"] == "consistent"
    assert document["test"]["lower"] >= CLAIMED - TOLERANCE
    assert document["harness"]["errors"] == 0 and document["harness"]["healthy"] is True
    assert (document["preset"], document["arm"], document["instances"]) == ("test-claim", "frognano", 12)
    assert "consistent" in document["sentence"]


def test_the_contamination_gap_compares_the_claim_instances_with_fresh_ones(at_claim):
    """The fresh copies (created after released:) run beside the claim's and stay out of its figures."""
    gap = at_claim.document["contamination"]
    assert gap["released"] == RELEASED
    assert (gap["seen_tasks"], gap["fresh_tasks"]) == (12, 4)
    assert gap["seen"]["estimate"] == pytest.approx(CLAIMED, abs=1e-12)
    assert gap["fresh"]["estimate"] == pytest.approx(1 / 3, abs=1e-12)
    assert gap["gap"]["estimate"] == pytest.approx(CLAIMED - 1 / 3, abs=1e-12)
    assert gap["gap"]["lower"] <= gap["gap"]["estimate"] <= gap["gap"]["upper"] and gap["reason"] is None
    assert gap["versus"] == []  # no other model arm
    assert not {task["task_id"] for task in at_claim.document["per_task"]} & set(FRESH)
    for instance in FRESH:
        assert at_claim.stub_tasks[marker(instance)] == {"resolving": 1, "missing": 2}


def test_ten_points_below_the_claim_is_below(below):
    assert_exact_figures(below, BELOW)
    assert below.document["test"]["verdict"] == "below" and below.document["verdict"] == "below"
    assert below.document["test"]["upper"] < CLAIMED
    assert below.document["harness"]["errors"] == 0 and "below the claim" in below.document["sentence"]
    assert below.document["preset"] is None and below.document["instances"] == 20
    assert_no_fresh_task(below)


def test_ten_points_above_the_claim_is_consistent(above):
    assert_exact_figures(above, ABOVE)
    assert above.document["test"]["verdict"] == "consistent" and above.document["verdict"] == "consistent"
    assert above.document["test"]["lower"] >= CLAIMED - TOLERANCE
    assert above.document["test"]["tasks_to_decide"] is None and "consistent with the claim" in \
        above.document["sentence"]
    assert_no_fresh_task(above)


def test_a_misconfigured_parser_makes_the_harness_unhealthy_never_a_verdict(unhealthy):
    """The same model as above-the-claim: its misses are now harness errors, so there is no verdict."""
    counts = ran(unhealthy, ABOVE)
    document = unhealthy.document
    misses = SEEDS * len(counts) - sum(counts.values())
    assert misses > 0
    harness = document["harness"]
    assert (harness["attempts"], harness["errors"]) == (SEEDS * len(counts), misses)
    assert harness["by_exit_reason"] == {"parser_misconfigured": misses}
    assert harness["rate"] == pytest.approx(misses / (SEEDS * len(counts)), abs=1e-12)
    assert harness["healthy"] is False and harness["threshold"] == 0.02
    assert document["verdict"] == "harness_unhealthy"
    assert document["test"]["verdict"] in ("consistent", "below", "undecided")  # the test's word, never the verdict
    assert document["sentence"].startswith("harness unhealthy") and "parser_misconfigured" in document["sentence"]
    # Errors count as misses in Avg@3: the figure is the model's resolved share all the same.
    assert document["avg_at_k"]["estimate"] == pytest.approx(sum(counts.values()) / (SEEDS * len(counts)), abs=1e-12)


def test_the_report_of_a_claim_run_writes_the_evidence_pack(at_claim, tmp_path):
    run_id = at_claim.document["run_id"]
    done = subprocess.run([str(LEAFCOST), "report", run_id, "--db", str(at_claim.db), "--out", str(tmp_path / "r")],
                          capture_output=True, text=True, timeout=600, cwd=tmp_path)
    assert done.returncode == 0, done.stderr[-3000:]
    evidence = tmp_path / "r" / "evidence"
    verdict = json.loads((evidence / "verdict.json").read_text())
    assert verdict["run_id"] == run_id and verdict["verdict"] == at_claim.document["verdict"]
    assert verdict["per_task"] == at_claim.document["per_task"]
    for name in ("README.md", "spec.yaml", "spec.sha256", "task_order.json", "images.lock.json", "MANIFEST.sha256",
                 "ledger.duckdb"):
        assert (evidence / name).is_file(), name
    task_order = json.loads((evidence / "task_order.json").read_text())
    assert sorted(task_order) == sorted(CLAIM_IDS + FRESH_IDS)
    files = sorted((evidence / "predictions").glob("frognano.seed*.jsonl"))
    assert len(files) == SEEDS
    predictions = [[json.loads(line) for line in path.read_text().splitlines()] for path in files]
    assert all([row["instance_id"] for row in lines] == task_order for lines in predictions)  # the run's order
    resolved = sum(bool(row["resolved"]) for lines in predictions for row in lines)
    assert resolved == sum(AT_CLAIM.values()) + sum(FRESH.values())
