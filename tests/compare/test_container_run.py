"""The built-in suite end to end through the container backend (`leafcost run` with a real local model and the
oracle, every task in its own image), through the kubernetes backend (the same images by ID, one pod per attempt,
against the stand-in API server whose pods are real containers), and through bubblewrap: the same verdicts."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import duckdb
import pytest
import yaml

from support.kube_fake import KubeFake

LEAFCOST = Path(sys.executable).with_name("leafcost")


def _run(tmp_path: Path, backend: str, sandbox: dict | None = None) -> tuple[dict, list[tuple]]:
    spec = {"name": f"backends-{backend}", "suite": "builtin", "seeds": 1, "workers": 2, "max_attempts": 2,
            "sandbox": {"backend": backend, **(sandbox or {})},
            "budgets": {"max_steps": 3, "max_tokens_per_turn": 128, "time_budget_sec": 240},
            "arms": [{"name": "oracle", "adapter": "oracle"},
                     {"name": "local-smol", "adapter": "local", "sampling": {"temperature": 0},
                      "request_timeout_sec": 120}]}
    path = tmp_path / f"{backend}.yaml"
    path.write_text(yaml.safe_dump(spec))
    db = tmp_path / f"{backend}.duckdb"
    result = subprocess.run([str(LEAFCOST), "run", str(path), "--json", "--db", str(db)], capture_output=True,
                            text=True, timeout=3000, cwd=tmp_path)
    assert result.returncode == 0, result.stderr[-3000:]
    with duckdb.connect(str(db), read_only=True) as ledger:
        rows = ledger.execute("select arm, task_id, seed, resolved, infra_error, harness_error, isolation, "
                              "sandbox_cpu_seconds from episodes where final order by arm, task_id, seed").fetchall()
    return json.loads(result.stdout), rows


@pytest.mark.timeout(1500)  # three backends × 24 episodes of a real model on 2 cores: 7–8 minutes when shared
def test_the_builtin_suite_gives_the_same_verdicts_in_containers_pods_and_bubblewrap(container_images, tmp_path):
    podman_summary, podman_rows = _run(tmp_path, "podman")
    local_summary, local_rows = _run(tmp_path, "local")
    lock = tmp_path / "images.lock.json"
    subprocess.run([str(LEAFCOST), "images", "lock", "builtin", "-o", str(lock)], check=True, capture_output=True,
                   timeout=1800)
    with KubeFake(mode="container") as kube:
        kube_summary, kube_rows = _run(tmp_path, "kubernetes", {"images": str(lock), "kubernetes": {
            "kubeconfig": str(kube.kubeconfig), "namespace": kube.namespace}})
        left = [p for p in kube.pods() if not p["metadata"].get("deletionTimestamp")]
    assert left == []  # every attempt's pod removed
    assert len(kube_rows) == 24 and {row[6] for row in kube_rows} == {"kubernetes"}
    assert not any(row[4] or row[5] for row in kube_rows)
    assert [row[:4] for row in kube_rows] == [row[:4] for row in local_rows]
    assert all(row[7] is not None and row[7] > 0 for row in kube_rows)  # CPU from the pods' cgroups
    assert {a["arm"]: a["resolved"] for a in kube_summary["arms"]}["oracle"] == 12
    assert len(podman_rows) == len(local_rows) == 24
    assert {row[6] for row in podman_rows} == {"podman"} and {row[6] for row in local_rows} == {"bwrap"}
    assert not any(row[4] or row[5] for row in podman_rows + local_rows)  # no infrastructure or harness errors
    verdicts = {backend: [row[:4] for row in rows] for backend, rows in (("podman", podman_rows),
                                                                         ("local", local_rows))}
    assert verdicts["podman"] == verdicts["local"]
    assert [row[3] for row in podman_rows if row[0] == "oracle"] == [True] * 12
    assert all(row[7] is not None and row[7] > 0 for row in podman_rows)  # CPU measured from the containers
    for summary in (podman_summary, local_summary):
        arms = {arm["arm"]: arm for arm in summary["arms"]}
        assert arms["oracle"]["resolved"] == 12 and arms["local-smol"]["done"] == 12
