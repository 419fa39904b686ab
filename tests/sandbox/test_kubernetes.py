"""The kubernetes backend through the official client against the stand-in API server (tests/support/kube_fake) over
real sockets: with container pods, every exec runs in a real Podman container started from the task's locked
image, so tools, patch capture and grading go through the Kubernetes code path for real; with instant pods, the
orchestration (limits, clean-up by label) at scale."""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
import time
from pathlib import Path

import pytest

from sandbox import BuildError, SandboxError, SandboxOptions, load_suite, open_sandbox, run_oracle, verify
from sandbox.kubernetes.manifests import SPEC_HASH_ANNOTATION
from sandbox.kubernetes.pods import close_clusters, remove_run_pods

LEAFCOST = Path(sys.executable).with_name("leafcost")
LABELS = {"leafcost.run": "kube-test", "leafcost.arm": "oracle", "leafcost.task": "cron-next-run",
          "leafcost.seed": "0", "leafcost.attempt": "1"}


@pytest.fixture(scope="module")
def builtin_lock(container_images, tmp_path_factory) -> Path:
    """The built-in suite's images, built by Podman and locked by ID, as a user would before a cluster run."""
    lock = tmp_path_factory.mktemp("lock") / "images.lock.json"
    done = subprocess.run([str(LEAFCOST), "images", "lock", "builtin", "-o", str(lock)], capture_output=True,
                          text=True, timeout=1800)
    assert done.returncode == 0, done.stderr
    return lock


def options_for(kube, lock: Path | None = None, **extra) -> SandboxOptions:
    return SandboxOptions(backend="kubernetes", kubeconfig=kube.kubeconfig, kube_namespace=kube.namespace,
                          images_lock=lock, **extra)


def task(task_id: str = "cron-next-run"):
    return next(t for t in load_suite("builtin").tasks if t.task_id == task_id)


async def attempt(options, the_task, body, *, solution=False):
    try:
        opened = await open_sandbox(the_task, options, solution=solution, labels=LABELS)
        try:
            return await body(opened)
        finally:
            await opened.close()
    finally:
        await close_clusters()


def gone(kube, name: str, timeout: float = 30.0) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if kube.pod(name) is None:
            return True
        time.sleep(0.1)
    return False


def test_the_oracle_resolves_in_a_pod_made_as_promised(kube_containers, builtin_lock):
    kube, the_task = kube_containers, task()
    seen = {}

    async def body(opened):
        seen["pod"] = kube.pod(opened.pod)
        seen["tool"] = await opened.sandbox.run_tool("Bash", {"command": "pwd; id -u"})
        solved = await run_oracle(opened.sandbox, the_task)
        seen["verdict"] = await verify(opened, the_task)
        seen["name"], seen["hash"], seen["cpu"] = opened.pod, opened.spec_hash, opened.cpu_seconds()
        return solved

    solved = asyncio.run(attempt(options_for(kube, builtin_lock), the_task, body, solution=True))
    assert solved.ok, solved.stderr
    assert "/app\n0\n" in seen["tool"]  # the tool runner in the pod, in the task's working directory
    verdict = seen["verdict"]
    assert verdict.grade.resolved and verdict.grade.reward == 1.0 and "cronsched" in verdict.patch
    pod = seen["pod"]
    spec, (container,) = pod["spec"], pod["spec"]["containers"]
    locked = json.loads(builtin_lock.read_text())["tasks"]["cron-next-run"]
    assert container["image"] == locked["id"] and container["imagePullPolicy"] == "Never"  # built here: by ID
    assert container["resources"]["requests"] == container["resources"]["limits"]
    assert spec["automountServiceAccountToken"] is False and spec["restartPolicy"] == "Never"
    assert pod["metadata"]["labels"]["leafcost/run"] == "kube-test"
    assert pod["metadata"]["annotations"][SPEC_HASH_ANNOTATION] == seen["hash"]
    assert seen["cpu"] is not None and seen["cpu"] > 0  # the pod's cgroup, read inside it
    assert gone(kube, seen["name"])  # closing the attempt deletes its pod


def test_no_agent_process_outlives_the_agent_but_what_the_pod_started_with_does(kube_containers, builtin_lock):
    kube, the_task = kube_containers, task()
    planted = ("sleep 6001 & (setsid sleep 6002 &) ; nohup sh -c 'sleep 6003' >/dev/null 2>&1 & "
               "(trap '' TERM HUP; exec sleep 6004) & echo planted")
    listing = "for c in /proc/[0-9]*/cmdline; do tr '\\0' ' ' < $c; echo; done"

    async def body(opened):
        assert "planted" in await opened.sandbox.run_tool("Bash", {"command": planted, "timeout": 10})
        before = (await opened.sandbox.exec(listing, timeout=30)).stdout
        await opened.quiesce()
        after = (await opened.sandbox.exec(listing, timeout=30)).stdout
        return before, after, await verify(opened, the_task), kube.pod(opened.pod)

    before, after, verdict, pod = asyncio.run(attempt(options_for(kube, builtin_lock), the_task, body))
    for marker in ("sleep 6001", "sleep 6002", "sleep 6003", "sleep 6004"):
        assert marker in before and marker not in after
    assert "sleep infinity" in after  # the keep-alive the pod started with is spared: the pod lives on
    assert pod["status"]["phase"] == "Running"
    assert verdict.grade.error is None and not verdict.grade.resolved  # graded, and nothing was fixed


def test_a_planted_reward_and_symlinks_do_not_grade_the_attempt(kube_containers, builtin_lock):
    kube, the_task = kube_containers, task()
    forge = ("mkdir -p /logs/verifier && echo 1 > /logs/verifier/reward.txt && "
             "ln -sf /etc/passwd /logs/verifier/reward.json && echo forged")

    async def body(opened):
        assert "forged" in await opened.sandbox.run_tool("Bash", {"command": forge})
        return await verify(opened, the_task)

    verdict = asyncio.run(attempt(options_for(kube, builtin_lock), the_task, body))
    assert not verdict.grade.resolved and verdict.grade.reward == 0.0


def test_an_image_that_cannot_be_pulled_is_a_task_error_naming_it(kube_containers, builtin_lock):
    kube = kube_containers
    kube.fail_image("sha256:*", "manifest unknown")
    with pytest.raises(BuildError, match=r"image sha256:[0-9a-f]{64} cannot be had: ErrImagePull"):
        asyncio.run(attempt(options_for(kube, builtin_lock), task(), lambda opened: asyncio.sleep(0)))
    assert all(pod["metadata"].get("deletionTimestamp") for pod in kube.pods())  # its pod is being removed


def test_an_evicted_pod_is_an_infrastructure_error_that_says_so(kube_containers, builtin_lock):
    kube = kube_containers

    async def body(opened):
        await opened.sandbox.run_tool("Bash", {"command": "true"})
        kube.evict(opened.pod)
        await opened.sandbox.run_tool("Bash", {"command": "echo after"})

    with pytest.raises(SandboxError, match="Evicted"):
        asyncio.run(attempt(options_for(kube, builtin_lock), task(), body))


def test_creations_and_deletions_keep_to_their_limits_and_nothing_is_left(kube_instant, tmp_path):
    """40 attempts at once against instant pods (whose scripted exec refuses the set-up, so each attempt fails
    after its pod was made): never more than 4 pods being created or 3 being deleted, and every pod removed."""
    kube = kube_instant
    kube.faults.creation_delay = kube.faults.deletion_delay = 0.1
    lock = tmp_path / "lock.json"
    lock.write_text(json.dumps({"format": 1, "engine": "podman", "tasks": {
        "cron-next-run": {"image": "x", "id": "sha256:" + "a" * 64, "repo_digest": None}}}))
    options = options_for(kube, lock, kube_create_limit=4, kube_delete_limit=3)

    async def many():
        opening = [open_sandbox(task(), options, labels=LABELS) for _ in range(40)]
        results = await asyncio.gather(*opening, return_exceptions=True)
        await close_clusters()
        return results

    results = asyncio.run(many())
    assert all(isinstance(r, SandboxError) and "preparing the pod failed" in str(r) for r in results), {
        f"{type(r).__name__}: {r}" for r in results}
    assert len(kube.seen.created) == 40
    assert 2 <= kube.seen.max_creating <= 4 and 2 <= kube.seen.max_deleting <= 3
    assert kube.pods() == [] or all(p["metadata"].get("deletionTimestamp") for p in kube.pods())


def test_a_run_removes_the_pods_it_left_and_no_one_elses(kube_instant):
    from kubernetes import client, config

    from sandbox.kubernetes.manifests import attempt_pod
    from sandbox.tasks import EnvironmentConfig

    kube = kube_instant
    config.load_kube_config(config_file=str(kube.kubeconfig))
    core = client.CoreV1Api()
    for run, count in (("crashed-run", 3), ("other-run", 2)):
        for i in range(count):
            core.create_namespaced_pod(kube.namespace, attempt_pod(
                name=f"{run}-{i}", namespace=kube.namespace, image="x", environment=EnvironmentConfig(),
                workdir="/", labels={"leafcost.run": run}, spec_hash="0", deadline_sec=60))
    removed = remove_run_pods(options_for(kube), "crashed-run")
    assert sorted(removed) == ["pod crashed-run-0", "pod crashed-run-1", "pod crashed-run-2"]
    left = {p["metadata"]["name"] for p in kube.pods() if not p["metadata"].get("deletionTimestamp")}
    assert left == {"other-run-0", "other-run-1"}
    assert remove_run_pods(options_for(kube), None) == []


def test_leafcost_validate_proves_the_builtin_suite_through_pods(kube_containers, builtin_lock, tmp_path):
    """As a user runs it, with the kubeconfig in $KUBECONFIG: every task valid, and no pod left."""
    import os

    kube = kube_containers
    done = subprocess.run([str(LEAFCOST), "validate", "builtin", "--backend", "kubernetes", "--images",
                           str(builtin_lock), "--kube-namespace", kube.namespace, "--workers", "4", "--json"],
                          capture_output=True, text=True, timeout=1800, cwd=tmp_path,
                          env={**os.environ, "KUBECONFIG": str(kube.kubeconfig)})
    report = json.loads(done.stdout)
    assert done.returncode == 0, done.stderr[-2000:]
    assert (report["valid"], report["invalid"]) == (12, 0)
    assert [p for p in kube.pods() if not p["metadata"].get("deletionTimestamp")] == []
    assert len(kube.seen.created) == 24  # an oracle pod and an empty-run pod per task


def test_the_kubernetes_backend_without_an_image_lock_is_refused_at_once(kube_instant, tmp_path):
    import os

    done = subprocess.run([str(LEAFCOST), "validate", "builtin", "--backend", "kubernetes", "--kube-namespace",
                           kube_instant.namespace], capture_output=True, text=True, timeout=120, cwd=tmp_path,
                          env={**os.environ, "KUBECONFIG": str(kube_instant.kubeconfig)})
    assert done.returncode == 2 and "by digest only" in done.stderr and "leafcost images lock" in done.stderr
    assert kube_instant.seen.created == []


def test_a_throttling_api_server_delays_an_attempt_but_does_not_fail_it(tmp_path):
    """429s (with Retry-After) on a pod's creation, exec and deletion, and a creation the server stored but
    answered 500: every request is asked again, the one pod is found made, the attempt resolves, nothing is left."""
    from support.kube_fake import KubeFake
    from support.kube_fake.instant_pod import InstantPods

    lock = tmp_path / "lock.json"
    lock.write_text(json.dumps({"format": 1, "engine": "podman", "tasks": {
        "cron-next-run": {"image": "x", "id": "sha256:" + "a" * 64, "repo_digest": None}}}))
    with KubeFake(mode="instant", exec_handler=InstantPods()) as kube:
        kube.faults.throttled = 2  # the creation, twice; its third try is stored and answered 500
        kube.faults.failing_after_create = 1

        async def body(opened):
            kube.faults.throttled = 2  # the oracle's exec, twice
            solved = await run_oracle(opened.sandbox, task())
            verdict = await verify(opened, task())
            kube.faults.throttled = 1  # the pod's deletion, the next request
            return solved, verdict

        solved, verdict = asyncio.run(attempt(options_for(kube, lock), task(), body, solution=True))
        left = [p for p in kube.pods() if not p["metadata"].get("deletionTimestamp")]
        created = list(kube.seen.created)
        spent = (kube.faults.throttled, kube.faults.failing_after_create)
    assert solved.ok and verdict.grade.resolved
    assert len(created) == 1 and left == []
    assert spent == (0, 0)


def test_the_runs_resource_overrides_size_every_pod(make_task, tmp_path):
    """Harbor's job-config overrides in the run spec (sandbox.override_cpus, ...) replace every task's own
    [environment] resources: each pod asks for, and is limited to, the run's."""
    import yaml

    from support.kube_fake import KubeFake
    from support.kube_fake.instant_pod import InstantPods

    the_task = make_task("calc", memory_mb=512)
    lock = tmp_path / "lock.json"
    lock.write_text(json.dumps({"format": 1, "engine": "podman", "tasks": {
        "calc": {"image": "calc", "id": "sha256:" + "c" * 64, "repo_digest": None}}}))
    with KubeFake(mode="instant", exec_handler=InstantPods()) as kube:
        spec = {"name": "overrides", "suite": str(the_task.path.parent), "seeds": 2, "arms": [{"name": "oracle",
                                                                                          "adapter": "oracle"}],
                "sandbox": {"backend": "kubernetes", "images": str(lock), "override_cpus": 2,
                            "override_memory_mb": 3072, "override_storage_mb": 4096,
                            "kubernetes": {"kubeconfig": str(kube.kubeconfig), "namespace": kube.namespace}}}
        (tmp_path / "spec.yaml").write_text(yaml.safe_dump(spec))
        done = subprocess.run([str(LEAFCOST), "run", str(tmp_path / "spec.yaml"), "--json", "--db",
                               str(tmp_path / "l.duckdb")], capture_output=True, text=True, timeout=300,
                              cwd=tmp_path)
        resources = [container["resources"] for container in kube.seen.containers]
    assert done.returncode == 0, done.stderr[-2000:]
    assert json.loads(done.stdout)["arms"][0]["resolved"] == 2
    wanted = {"cpu": "2000m", "memory": "3072Mi", "ephemeral-storage": "4096Mi"}
    assert resources == [{"requests": wanted, "limits": wanted}] * 2


def test_a_task_run_wholly_as_one_non_root_user_gets_a_non_root_pod(kube_containers, make_task, tmp_path):
    """agent.user = verifier.user = 1000: the pod runs as 1000 with no capability (runAsNonRoot), the harness
    writes in empty directories of the pod's own, and the attempt works as in a root pod: the agent's tools as
    1000, the oracle, patch capture and the verdict."""
    kube = kube_containers
    toml = "version = \"1.0\"\n[verifier]\ntimeout_sec = 60.0\nuser = 1000\n[agent]\ntimeout_sec = 120.0\nuser = 1000\n" \
           "[environment]\ncpus = 1\nmemory_mb = 512\nallow_internet = false\n"
    the_task = make_task("calc", files={"task.toml": toml, "environment/Dockerfile": (
        "FROM python:3.11-slim\nWORKDIR /app\nCOPY repo/ /app/\nRUN chown -R 1000:1000 /app\n")})
    lock = tmp_path / "images.lock.json"
    done = subprocess.run([str(LEAFCOST), "images", "lock", str(the_task.path.parent), "-o", str(lock)],
                          capture_output=True, text=True, timeout=1800)
    assert done.returncode == 0, done.stderr
    seen = {}

    async def body(opened):
        seen["tool"] = await opened.sandbox.run_tool("Bash", {"command": "id -u; touch /app/mine && echo wrote"})
        solved = await run_oracle(opened.sandbox, the_task)
        seen["verdict"] = await verify(opened, the_task)
        return solved

    solved = asyncio.run(attempt(options_for(kube, lock), the_task, body, solution=True))
    container = kube.seen.containers[0]
    assert container["securityContext"]["runAsUser"] == 1000 and container["securityContext"]["runAsNonRoot"]
    assert container["securityContext"]["capabilities"] == {"drop": ["ALL"]}
    assert "1000\nwrote\n" in seen["tool"]
    assert solved.ok, solved.stderr
    verdict = seen["verdict"]
    assert verdict.grade.resolved, verdict.grade
    assert "mine" in verdict.patch and "a + b" in verdict.patch  # captured by the same user, Leaf's way
    assert gone(kube, kube.seen.created[0].split("/", 1)[1])


def test_a_file_out_of_a_pod_is_its_bytes_none_when_missing_and_refused_when_over_the_limit(tmp_path):
    """get_file through the pod's tar stream: the checked bytes, None for no file, and a file larger than the
    limit refused as such (its stream cut off at the cap, never read whole)."""
    from kubernetes import client, config

    from sandbox.kubernetes.pod_files import get_file
    from sandbox.kubernetes.manifests import attempt_pod
    from sandbox.kubernetes.pods import cluster_for
    from sandbox.tasks import EnvironmentConfig
    from support.kube_fake import KubeFake
    from support.kube_fake.instant_pod import InstantPods

    pods = InstantPods()
    with KubeFake(mode="instant", exec_handler=pods) as kube:
        config.load_kube_config(config_file=str(kube.kubeconfig))
        client.CoreV1Api().create_namespaced_pod(kube.namespace, attempt_pod(
            name="p", namespace=kube.namespace, image="x", environment=EnvironmentConfig(), workdir="/",
            labels={}, spec_hash="0", deadline_sec=60))
        pods.files[(kube.namespace, "p")] = {"/logs/verifier/reward.txt": b"1\n",
                                             "/logs/verifier/big": b"x" * (1 << 20)}

        async def read(path: str, limit: int):
            try:
                return await get_file(cluster_for(options_for(kube)), "p", path, limit)
            except OSError as exc:
                return str(exc)
            finally:
                await close_clusters()

        small = asyncio.run(read("/logs/verifier/reward.txt", 1 << 20))
        missing = asyncio.run(read("/logs/verifier/reward.json", 1 << 20))
        big = asyncio.run(read("/logs/verifier/big", 1024))
    assert (small, missing) == (b"1\n", None)
    assert big == "big is larger than 1024 bytes"
