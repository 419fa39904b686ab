"""The kubernetes backend at scale, as `leafcost run` drives it: 150 episodes at once against the stand-in API server
whose instant pods answer what the backend really sends (tests/support/kube_fake/instant_pod.py), half of them a
model arm whose tool calls go through the tool runner's exec stream. Every episode resolved, creations and
deletions kept to the spec's limits, no pod left; a runner killed with -9 leaves pods that `--resume` removes by
label before it finishes the run."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import duckdb
import pytest
import yaml
from support.kube_fake import KubeFake
from support.kube_fake.instant_pod import InstantPods
from support.sglang_fake import ScriptedServer

pytestmark = pytest.mark.slow  # leafcost run end to end, 150 episodes: `make test` runs them, `make test-fast` not
LEAFCOST = Path(sys.executable).with_name("leafcost")
STEPS = 3  # tool calls per model episode, each a request on the pod's tool-runner stream
OBSERVATION = "instant pod: Bash done"  # what InstantPods' runner answers a Bash call
# Below the backend's 16 API threads, so the spec's limits, not the thread pool, are what holds creations back.
CREATE_LIMIT, DELETE_LIMIT = 12, 8


def model_script(delay: float) -> dict:
    """STEPS Bash calls, then an answer; each turn `delay` seconds, so the attempts overlap as real ones do."""
    turn = {"tool_calls": [{"name": "Bash", "arguments": {"command": "true"}}], "delay": delay}
    return {"turns": [turn] * STEPS + [{"content": "done", "delay": delay}]}


def write_spec(tmp_path: Path, task, kube: KubeFake, base_url: str, seeds: int) -> Path:
    lock = tmp_path / "images.lock.json"  # an image built here, run by ID: the instant kubelet pulls nothing
    lock.write_text(json.dumps({"format": 1, "engine": "podman", "tasks": {
        task.task_id: {"image": "calc", "id": "sha256:" + "c" * 64, "repo_digest": None}}}))
    spec = {"name": "kube-scale", "suite": str(Path(task.path).parent), "seeds": seeds, "workers": 2 * seeds,
            "max_attempts": 1, "budgets": {"max_steps": STEPS + 2, "time_budget_sec": 600},
            "sandbox": {"backend": "kubernetes", "images": str(lock), "kubernetes": {
                "kubeconfig": str(kube.kubeconfig), "namespace": kube.namespace,
                "create_concurrency": CREATE_LIMIT, "delete_concurrency": DELETE_LIMIT}},
            "arms": [{"name": "oracle", "adapter": "oracle"},
                     {"name": "model", "adapter": "sglang", "model": "frognano-4b", "base_url": base_url,
                      "max_retries": 0, "gpu": {"type": "H200", "usd_per_hour": 3.5}}]}
    path = tmp_path / "spec.yaml"
    path.write_text(yaml.safe_dump(spec))
    return path


def leafcost_run(spec: Path, db: Path, *extra: str) -> dict:
    done = subprocess.run([str(LEAFCOST), "run", str(spec), "--json", "--db", str(db), *extra], capture_output=True,
                          text=True, timeout=1800, cwd=spec.parent)
    assert done.returncode == 0, done.stderr[-3000:]
    return json.loads(done.stdout)


def ledger(db: Path, sql: str) -> list[tuple]:
    with duckdb.connect(str(db), read_only=True) as connection:
        return connection.execute(sql).fetchall()


def settle(kube: KubeFake, timeout: float = 60) -> None:
    """Until no creation or deletion is in flight: one the killed runner sent could still change the pods."""
    deadline = time.monotonic() + timeout
    while (kube.seen.creating or kube.seen.deleting) and time.monotonic() < deadline:
        time.sleep(0.05)


def slow_kube() -> KubeFake:
    """Instant pods, but each creation and deletion takes a moment, so requests pile up against the limits."""
    kube = KubeFake(mode="instant", exec_handler=InstantPods())
    kube.faults.creation_delay = kube.faults.deletion_delay = 0.2
    return kube


def test_150_episodes_at_once_keep_to_the_limits_resolve_and_leave_no_pod(make_task, tmp_path):
    task = make_task("calc")
    seeds = 75  # × 2 arms = 150 episodes, 150 workers
    with ScriptedServer(model_script(delay=1.5)) as server, slow_kube() as kube:
        summary = leafcost_run(write_spec(tmp_path, task, kube, server.base_url, seeds), tmp_path / "l.duckdb")
        seen, left = kube.seen.snapshot(), kube.pods()
        runner_streams = [cmd for _, cmd, _ in seen["execs"] if "/.leafcost/tool_runner.py" in cmd]
    assert {a["arm"]: (a["done"], a["resolved"], a["errors"]) for a in summary["arms"]} == {
        "oracle": (seeds, seeds, 0), "model": (seeds, seeds, 0)}
    assert 2 <= seen["max_creating"] <= CREATE_LIMIT and 2 <= seen["max_deleting"] <= DELETE_LIMIT
    # The model arm's 75 episodes (6 s each) outlast the ramp of creations: their pods, at least, were all there
    # at once, beside the oracle's shorter ones (typically 130-145 pods).
    assert seen["max_live"] >= seeds and seen["live"] == 0
    assert len(seen["created"]) == 2 * seeds and sorted(seen["deleted"]) == sorted(seen["created"])
    assert left == []
    # Every model step went through the pod's tool runner: one stream per attempt, every answer read from it.
    assert len(runner_streams) == seeds
    calls = ledger(tmp_path / "l.duckdb", "select count(*), count(*) filter (where output_chars = "
                                          f"{len(OBSERVATION)}) from tool_calls")
    assert calls == [(seeds * STEPS, seeds * STEPS)]


def test_a_runner_killed_with_9_leaves_pods_that_resume_removes_before_it_finishes(make_task, tmp_path):
    task = make_task("calc")
    seeds, db = 20, tmp_path / "l.duckdb"
    with ScriptedServer(model_script(delay=1.0)) as server, slow_kube() as kube:
        spec = write_spec(tmp_path, task, kube, server.base_url, seeds)
        stderr = tmp_path / "killed.stderr"
        with stderr.open("w") as err:
            runner = subprocess.Popen([str(LEAFCOST), "run", str(spec), "--json", "--db", str(db)], cwd=tmp_path,
                                      stdout=subprocess.DEVNULL, stderr=err, start_new_session=True)
        deadline = time.monotonic() + 300
        while len(kube.pods()) < 10 and runner.poll() is None and time.monotonic() < deadline:
            time.sleep(0.05)
        os.killpg(runner.pid, signal.SIGKILL)
        runner.wait(60)
        settle(kube)
        left = {p["metadata"]["name"] for p in kube.pods()}
        assert len(left) >= 10, stderr.read_text()[-3000:]  # killed mid-run: nothing removed them
        run_id = ledger(db, "select run_id from runs")[0][0]
        summary = leafcost_run(spec, db, "--resume", run_id)
        deleted = {name.split("/", 1)[1] for name in kube.seen.deleted}
        sweeps, after = kube.seen.count("deletecollection"), kube.pods()
    # The resumed process never knew those pods' names: only its sweep by the run's label can have removed them.
    assert left <= deleted and sweeps >= 1
    assert any(w.startswith(f"removed {len(left)} ") for w in summary["warnings"]), summary["warnings"]
    assert after == []
    assert {a["arm"]: (a["done"], a["resolved"]) for a in summary["arms"]} == {"oracle": (seeds, seeds),
                                                                               "model": (seeds, seeds)}
    finals = ledger(db, "select arm, task_id, seed, count(*) from episodes where final group by all")
    assert len(finals) == 2 * seeds and all(row[3] == 1 for row in finals)
    assert ledger(db, "select count(*) from episodes where status = 'running'") == [(0,)]
