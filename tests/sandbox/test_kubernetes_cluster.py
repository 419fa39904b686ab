"""A smoke test against a real cluster (kind, or any), run only when LEAFCOST_KUBECONFIG names its kubeconfig: no
API server can run on our machines, so `make test` cannot run it (docs/kubernetes.md). It proves, on a real
API server, kubelet and registry, what the stand-in proves here: one Harbor task validates through pods (its
oracle resolves, an empty run does not), and no pod is left.

    LEAFCOST_KUBECONFIG=~/.kube/config [LEAFCOST_KUBE_NAMESPACE=default] \\
    [LEAFCOST_KUBE_IMAGE=docker.io/library/python:3.12] .venv/bin/python -m pytest tests/sandbox/test_kubernetes_cluster.py
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

KUBECONFIG = os.environ.get("LEAFCOST_KUBECONFIG")
NAMESPACE = os.environ.get("LEAFCOST_KUBE_NAMESPACE", "default")
IMAGE = os.environ.get("LEAFCOST_KUBE_IMAGE", "docker.io/library/python:3.12")  # python3, git, tar, coreutils
LEAFCOST = Path(sys.executable).with_name("leafcost")

pytestmark = [pytest.mark.kubernetes,
              pytest.mark.skipif(not KUBECONFIG, reason="needs a real cluster: set LEAFCOST_KUBECONFIG")]


def test_a_harbor_task_validates_in_a_real_cluster(tmp_path):
    task = tmp_path / "tasks" / "answer"
    for name, text in {
        "task.toml": f'version = "1.0"\n[environment]\ndocker_image = "{IMAGE}"\nworkdir = "/app"\n'
                     "allow_internet = false\ncpus = 0.5\nmemory_mb = 512\n[verifier]\ntimeout_sec = 120\n",
        "instruction.md": "Write 42 into /app/answer.txt.\n",
        "solution/solve.sh": "echo 42 > /app/answer.txt\n",
        "tests/test.sh": 'grep -qx 42 /app/answer.txt && echo 1 > /logs/verifier/reward.txt '
                         '|| echo 0 > /logs/verifier/reward.txt\n',
    }.items():
        (task / name).parent.mkdir(parents=True, exist_ok=True)
        (task / name).write_text(text)
    lock = tmp_path / "images.lock.json"  # pulled by the nodes from the registry, by this reference
    lock.write_text(json.dumps({"format": 1, "engine": "docker", "tasks": {
        "answer": {"image": IMAGE, "id": "sha256:" + "0" * 64, "repo_digest": IMAGE}}}))
    done = subprocess.run([str(LEAFCOST), "validate", str(tmp_path / "tasks"), "--backend", "kubernetes",
                           "--images", str(lock), "--kube-namespace", NAMESPACE, "--json"],
                          capture_output=True, text=True, timeout=1800, env={**os.environ, "KUBECONFIG": KUBECONFIG})
    assert done.returncode == 0, done.stderr[-3000:]
    assert json.loads(done.stdout)["valid"] == 1
    left = subprocess.run([sys.executable, "-c", (
        "from kubernetes import client, config; config.load_kube_config(); "
        f"print(len(client.CoreV1Api().list_namespaced_pod('{NAMESPACE}', label_selector='leafcost=1').items))")],
        capture_output=True, text=True, env={**os.environ, "KUBECONFIG": KUBECONFIG}, timeout=120)
    assert left.stdout.strip() == "0", left.stderr
