"""The Kubernetes stand-in, driven by the official client over HTTP and websockets as the kubernetes backend
drives a real API server: objects and selectors, watches, exec with exit codes and streamed stdin, failure
hooks, what it records; then real containers in container mode."""

from __future__ import annotations

import json
import os
import subprocess
import threading
import time

import pytest
from kubernetes import client, config, watch
from kubernetes.client.exceptions import ApiException
from kubernetes.stream import stream

from support.kube_fake import ExecCall, KubeFake
from support.kube_fake.fixtures import kube_containers, kube_instant  # noqa: F401 - fixtures used by name

NS = "leafcost-test"
CHUNK = 64 * 1024


def pod_manifest(name: str, *, image: str = "localhost/leafcost-test/toolchain:bookworm",
                 labels: dict[str, str] | None = None, **container: object) -> dict:
    return {"apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": name, "labels": labels or {"leafcost": "1"}},  # no namespace: the URL's applies
            "spec": {"restartPolicy": "Never", "terminationGracePeriodSeconds": 0,
                     "containers": [{"name": "sandbox", "image": image, "args": ["sh", "-c", "sleep infinity"],
                                     **container}]}}


def core_for(kube: KubeFake) -> client.CoreV1Api:
    configuration = client.Configuration()
    config.load_kube_config(config_file=str(kube.kubeconfig), client_configuration=configuration)
    configuration.connection_pool_maxsize = 32  # as many as the tests' threads
    return client.CoreV1Api(client.ApiClient(configuration))


def open_exec(core: client.CoreV1Api, pod: str, command: list[str], *, stdin: bool = False):
    return stream(core.connect_get_namespaced_pod_exec, pod, NS, command=command, container="sandbox",
                  stdin=stdin, stdout=True, stderr=True, tty=False, _preload_content=False, binary=True)


def run_exec(core: client.CoreV1Api, pod: str, command: list[str], data: bytes | None = None
             ) -> tuple[int, bytes, bytes]:
    """Runs `command` in the pod, `data` streamed to its stdin in chunks (output read in between, as a client
    that must not deadlock does); returns the exit code, stdout and stderr."""
    ws = open_exec(core, pod, command, stdin=data is not None)
    out, err = bytearray(), bytearray()

    def collect() -> None:
        ws.update(timeout=0)
        out.extend(ws.read_stdout(timeout=0) if ws.peek_stdout() else b"")
        err.extend(ws.read_stderr(timeout=0) if ws.peek_stderr() else b"")

    if data is not None:
        for start in range(0, len(data), CHUNK):
            ws.write_stdin(data[start:start + CHUNK])
            collect()
        ws.close_channel(0)  # v5: end of stdin, the stream stays open for the output
    while ws.is_open():
        ws.update(timeout=5)
        out.extend(ws.read_stdout(timeout=0) if ws.peek_stdout() else b"")
        err.extend(ws.read_stderr(timeout=0) if ws.peek_stderr() else b"")
    out.extend(ws.read_stdout(timeout=0) if ws.peek_stdout() else b"")
    err.extend(ws.read_stderr(timeout=0) if ws.peek_stderr() else b"")
    code = ws.returncode
    ws.close()
    return code, bytes(out), bytes(err)


def wait_for(check, what: str, seconds: float = 60.0):
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if (found := check()):
            return found
        time.sleep(0.1)
    raise AssertionError(f"{what} did not happen within {seconds:g}s")


@pytest.fixture
def instant(request):
    kube = request.getfixturevalue("kube_instant")
    return kube, core_for(kube)


# --- objects -------------------------------------------------------------------------------------------------

def test_pods_listed_and_deleted_by_label_selector(instant):
    kube, core = instant
    for name, arm in (("a-1", "x"), ("a-2", "x"), ("b-1", "y")):
        core.create_namespaced_pod(NS, pod_manifest(name, labels={"leafcost": "1", "leafcost/arm": arm}))
    core.create_namespaced_pod(NS, pod_manifest("other", labels={"app": "web"}))

    names = lambda **kw: sorted(p.metadata.name for p in core.list_namespaced_pod(NS, **kw).items)  # noqa: E731
    assert names(label_selector="leafcost/arm=x") == ["a-1", "a-2"]
    assert names(label_selector="leafcost=1,leafcost/arm!=x") == ["b-1"]
    assert names(label_selector="leafcost/arm in (y,z)") == ["b-1"]
    assert names(label_selector="!leafcost") == ["other"]
    assert names(field_selector="metadata.name=a-2") == ["a-2"]
    assert names(field_selector="status.phase=Running", label_selector="app") == ["other"]

    first = core.list_namespaced_pod(NS, limit=3)
    rest = core.list_namespaced_pod(NS, limit=3, _continue=first.metadata._continue)
    assert [p.metadata.name for p in first.items + rest.items] == ["a-1", "a-2", "b-1", "other"]
    assert rest.metadata._continue is None

    deleted = core.delete_collection_namespaced_pod(NS, label_selector="leafcost/arm=x", grace_period_seconds=0)
    assert deleted.kind == "PodList"
    assert names() == ["b-1", "other"]
    assert sorted(kube.seen.deleted) == [f"{NS}/a-1", f"{NS}/a-2"]
    assert kube.seen.count("deletecollection") == 1 and kube.seen.count("create", "/pods") == 4


def test_a_created_pod_is_completed_the_way_the_api_server_does_it(instant):
    _, core = instant
    created = core.create_namespaced_pod(NS, {**pod_manifest("ignored"), "metadata": {"generateName": "att-"}})
    assert created.metadata.name.startswith("att-") and created.metadata.namespace == NS
    assert created.metadata.uid and created.metadata.resource_version and created.status.phase == "Pending"

    with pytest.raises(ApiException) as conflict:
        core.create_namespaced_pod(NS, pod_manifest(created.metadata.name))
    assert conflict.value.status == 409 and json.loads(conflict.value.body)["reason"] == "AlreadyExists"
    with pytest.raises(ApiException) as missing:
        core.read_namespaced_pod("no-such-pod", NS)
    assert missing.value.status == 404 and json.loads(missing.value.body)["reason"] == "NotFound"
    with pytest.raises(ApiException) as invalid:
        core.create_namespaced_pod(NS, {"metadata": {"name": "empty"}, "spec": {"containers": []}})
    assert invalid.value.status == 422


def test_pods_of_every_namespace_and_json_patches(instant):
    _, core = instant
    core.create_namespaced_pod(NS, pod_manifest("here"))
    core.create_namespaced_pod("elsewhere", pod_manifest("there"))
    assert sorted(p.metadata.name for p in core.list_pod_for_all_namespaces().items) == ["here", "there"]
    assert [p.metadata.name for p in core.list_namespaced_pod("elsewhere").items] == ["there"]
    patched = core.patch_namespaced_pod("there", "elsewhere", [{"op": "add", "path": "/metadata/labels/extra",
                                                                "value": "yes"}])
    assert patched.metadata.labels == {"leafcost": "1", "extra": "yes"}
    with pytest.raises(ApiException) as missing:
        core.delete_namespaced_pod("there", NS)
    assert missing.value.status == 404


def test_network_policies_have_their_own_objects(instant):
    _, core = instant
    networking = client.NetworkingV1Api(core.api_client)
    policy = {"apiVersion": "networking.k8s.io/v1", "kind": "NetworkPolicy",
              "metadata": {"name": "deny", "labels": {"leafcost": "1"}},
              "spec": {"podSelector": {"matchLabels": {"leafcost/network": "none"}},
                       "policyTypes": ["Ingress", "Egress"]}}
    networking.create_namespaced_network_policy(NS, policy)
    networking.create_namespaced_network_policy(NS, {**policy, "metadata": {"name": "other"}})
    with pytest.raises(ApiException) as conflict:
        networking.create_namespaced_network_policy(NS, policy)
    assert conflict.value.status == 409

    assert networking.read_namespaced_network_policy("deny", NS).spec.policy_types == ["Ingress", "Egress"]
    assert [p.metadata.name for p in networking.list_namespaced_network_policy(NS, label_selector="leafcost").items] \
        == ["deny"]
    networking.delete_collection_namespaced_network_policy(NS, label_selector="leafcost=1")
    assert [p.metadata.name for p in networking.list_namespaced_network_policy(NS).items] == ["other"]
    networking.delete_namespaced_network_policy("other", NS)
    assert networking.list_namespaced_network_policy(NS).items == []
    assert core.list_namespaced_pod(NS).items == []  # kinds do not mix
    core.create_namespaced_event(NS, {"metadata": {"generateName": "ev-"}, "reason": "Tested", "message": "m",
                                      "involvedObject": {"kind": "Pod", "name": "p", "namespace": NS}})
    assert [e.reason for e in core.list_namespaced_event(NS).items] == ["Tested"]


def test_status_subresource_drives_the_phase_and_only_the_status(instant):
    _, core = instant
    core.create_namespaced_pod(NS, pod_manifest("p"))
    patched = core.patch_namespaced_pod_status("p", NS, {"status": {"phase": "Failed", "reason": "Evicted"},
                                                        "metadata": {"labels": {"sneaky": "1"}}})
    assert patched.status.phase == "Failed" and patched.status.reason == "Evicted"
    assert "sneaky" not in patched.metadata.labels
    # Strategic merge: a condition patched by type, the others kept.
    core.patch_namespaced_pod_status("p", NS, {"status": {"conditions": [{"type": "Ready", "status": "False"}]}})
    conditions = {c.type: c.status for c in core.read_namespaced_pod("p", NS).status.conditions}
    assert conditions == {"PodScheduled": "True", "Initialized": "True", "ContainersReady": "True", "Ready": "False"}
    # The main resource keeps its status whatever the patch says.
    relabelled = core.patch_namespaced_pod("p", NS, {"metadata": {"labels": {"x": "y"}}, "status": {"phase": "Ok"}})
    assert relabelled.metadata.labels["x"] == "y" and relabelled.status.phase == "Failed"


# --- watches -------------------------------------------------------------------------------------------------

def test_watch_sees_a_pod_become_ready_in_its_namespace(instant):
    kube, core = instant
    kube.faults.start_delay = 0.3  # Pending a moment, so the watch sees it change
    created = core.create_namespaced_pod(NS, pod_manifest("slow"))
    core.create_namespaced_pod(NS, pod_manifest("unlabelled", labels={"app": "web"}))
    seen = []
    for event in watch.Watch().stream(core.list_namespaced_pod, NS, label_selector="leafcost=1",
                                      resource_version=created.metadata.resource_version, timeout_seconds=20):
        pod = event["object"]
        seen.append((event["type"], pod.metadata.name, pod.status.phase))
        if pod.status.phase == "Running" and all(c.ready for c in pod.status.container_statuses or []):
            break
    assert seen[0] == ("MODIFIED", "slow", "Pending")
    assert seen[-1] == ("MODIFIED", "slow", "Running")
    assert {name for _, name, _ in seen} == {"slow"}


@pytest.mark.timeout(60)
def test_watch_ends_after_its_timeout_seconds(instant):
    _, core = instant
    core.create_namespaced_pod(NS, pod_manifest("one"))
    events = list(watch.Watch().stream(core.list_namespaced_pod, NS, timeout_seconds=1))
    assert [(e["type"], e["object"].metadata.name) for e in events] == [("ADDED", "one")]


def test_watch_from_a_resource_version_sees_only_later_changes_including_deletion(instant):
    _, core = instant
    core.create_namespaced_pod(NS, pod_manifest("before"))
    version = core.list_namespaced_pod(NS).metadata.resource_version
    core.create_namespaced_pod(NS, pod_manifest("after"))
    core.delete_namespaced_pod("before", NS, grace_period_seconds=0)
    events = [(e["type"], e["object"].metadata.name)
              for e in watch.Watch().stream(core.list_namespaced_pod, NS, resource_version=version, timeout_seconds=1)]
    assert events[0] == ("ADDED", "after") and events[-1] == ("DELETED", "before")
    assert ("ADDED", "before") not in events


def test_watch_from_a_version_older_than_the_backlog_is_gone():
    with KubeFake(namespace=NS, watch_backlog=3) as kube:
        core = core_for(kube)
        first = core.create_namespaced_pod(NS, pod_manifest("p-0")).metadata.resource_version
        for n in range(1, 4):  # each pod: ADDED, Pending, Running: the first ones fall out of the backlog
            core.create_namespaced_pod(NS, pod_manifest(f"p-{n}"))
        with pytest.raises(ApiException) as gone:
            list(watch.Watch().stream(core.list_namespaced_pod, NS, resource_version=first, timeout_seconds=1))
        assert gone.value.status == 410


# --- exec ----------------------------------------------------------------------------------------------------

def test_exec_reports_exit_codes(instant):
    _, core = instant
    core.create_namespaced_pod(NS, pod_manifest("p"))
    assert run_exec(core, "p", ["echo", "hello", "pod"]) == (0, b"hello pod\n", b"")
    code, _, _ = run_exec(core, "p", ["sh", "-c", "exit 3"])
    assert code == 3
    code, _, err = run_exec(core, "p", ["uname", "-a"])
    assert code == 127 and b"no scripted answer" in err
    quiet = stream(core.connect_get_namespaced_pod_exec, "p", NS, command=["echo", "unheard"], stdout=False,
                   stderr=True, stdin=False, tty=False, _preload_content=False, binary=True)
    quiet.run_forever(timeout=10)
    assert quiet.returncode == 0 and quiet.read_stdout(timeout=0) == b""


def test_exec_streams_a_megabyte_of_random_bytes_through_cat_intact(instant):
    _, core = instant
    core.create_namespaced_pod(NS, pod_manifest("p"))
    data = os.urandom(1 << 20)
    code, out, _ = run_exec(core, "p", ["cat"], data)
    assert code == 0 and len(out) == len(data) and out == data


def test_deleting_a_pod_ends_the_execs_into_it_as_killed(instant):
    _, core = instant
    core.create_namespaced_pod(NS, pod_manifest("p"))
    ws = open_exec(core, "p", ["cat"], stdin=True)
    ws.write_stdin(b"before\n")
    assert ws.readline_stdout(timeout=10) == b"before"
    core.delete_namespaced_pod("p", NS, grace_period_seconds=0)
    ws.run_forever(timeout=10)
    assert ws.returncode == 137


def test_exec_into_a_missing_container_or_pod_is_refused(instant):
    _, core = instant
    core.create_namespaced_pod(NS, pod_manifest("p"))
    for pod, container in (("nope", "sandbox"), ("p", "nope")):
        with pytest.raises(ApiException):
            stream(core.connect_get_namespaced_pod_exec, pod, NS, command=["true"], container=container,
                   stdout=True, stderr=True, stdin=False, tty=False, _preload_content=False)


def test_a_custom_handler_serves_one_long_lived_json_lines_stream():
    async def runner(call: ExecCall) -> int:  # answers each request line with one line, as the tool runner does
        pending = b""
        while chunk := await call.read():
            pending += chunk
            while b"\n" in pending:
                line, pending = pending.split(b"\n", 1)
                request = json.loads(line)
                await call.write_stdout(json.dumps({"id": request["id"], "ok": True}).encode() + b"\n")
        return 0

    with KubeFake(namespace=NS, exec_handler=runner) as kube:
        core = core_for(kube)
        core.create_namespaced_pod(NS, pod_manifest("p"))
        ws = open_exec(core, "p", ["python3", "-u", "runner.py"], stdin=True)
        for n in range(50):
            ws.write_stdin(json.dumps({"id": n, "op": "ping"}).encode() + b"\n")
            assert json.loads(ws.readline_stdout(timeout=10)) == {"id": n, "ok": True}
        ws.close_channel(0)
        ws.run_forever(timeout=10)
        assert ws.returncode == 0
        assert kube.seen.execs == [(f"{NS}/p", ["python3", "-u", "runner.py"], 0)]


def test_output_a_client_does_not_read_waits_in_the_socket_not_in_the_server():
    """A command writing 32 MiB to a client that reads nothing gets only as far as the socket buffers hold,
    then all of it arrives intact once the client reads."""
    total, written = 32 << 20, [0]

    async def flood(call: ExecCall) -> int:
        block = bytes(range(256)) * 256
        while written[0] < total:
            await call.write_stdout(block)
            written[0] += len(block)
        return 0

    with KubeFake(namespace=NS, exec_handler=flood) as kube:
        core = core_for(kube)
        core.create_namespaced_pod(NS, pod_manifest("p"))
        ws = open_exec(core, "p", ["flood"])
        previous = -1
        while written[0] != previous:  # until the writer is held back (or has written everything)
            previous = written[0]
            time.sleep(0.3)
        assert written[0] < total // 2
        out = bytearray()
        while ws.is_open():
            ws.update(timeout=5)
            out += ws.read_stdout(timeout=0) if ws.peek_stdout() else b""
        out += ws.read_stdout(timeout=0) if ws.peek_stdout() else b""
        assert ws.returncode == 0 and len(out) == total and out == (bytes(range(256)) * 256) * (total // 65536)


def test_stdin_a_command_does_not_read_waits_in_the_socket_not_in_the_server():
    import hashlib

    total, go, received = 32 << 20, threading.Event(), hashlib.sha256()

    async def slow_reader(call: ExecCall) -> int:
        import asyncio

        while not go.is_set():
            await asyncio.sleep(0.05)
        while chunk := await call.read():
            received.update(chunk)
        return 0

    with KubeFake(namespace=NS, exec_handler=slow_reader) as kube:
        core = core_for(kube)
        core.create_namespaced_pod(NS, pod_manifest("p"))
        ws = open_exec(core, "p", ["slow"], stdin=True)
        data, sent = os.urandom(total), [0]

        def write() -> None:
            for start in range(0, total, CHUNK):
                ws.write_stdin(data[start:start + CHUNK])
                sent[0] += CHUNK

        writer = threading.Thread(target=write)
        writer.start()
        previous = -1
        while sent[0] != previous:  # until the client is held back (or has sent everything)
            previous = sent[0]
            time.sleep(0.3)
        assert sent[0] < total // 2
        go.set()
        writer.join(60)
        ws.close_channel(0)
        ws.run_forever(timeout=30)
        assert ws.returncode == 0 and received.hexdigest() == hashlib.sha256(data).hexdigest()


# --- hooks and records ---------------------------------------------------------------------------------------

def test_image_pull_failure_shows_in_the_container_status(instant):
    kube, core = instant
    kube.fail_image("*/broken:*", "manifest unknown")
    core.create_namespaced_pod(NS, pod_manifest("p", image="registry.example/broken:1"))

    def waiting():
        status = core.read_namespaced_pod("p", NS).status
        state = status.container_statuses[0].state if status.container_statuses else None
        return state.waiting if state and state.waiting and state.waiting.reason == "ImagePullBackOff" else None

    found = wait_for(waiting, "ImagePullBackOff")
    assert "manifest unknown" in found.message and core.read_namespaced_pod("p", NS).status.phase == "Pending"


def test_evicted_oom_killed_and_vanished_pods(instant):
    kube, core = instant
    for name in ("evicted", "oom", "gone"):
        core.create_namespaced_pod(NS, pod_manifest(name))
    kube.evict("evicted")
    kube.oom_kill("oom")
    kube.vanish("gone")

    evicted = core.read_namespaced_pod("evicted", NS).status
    assert (evicted.phase, evicted.reason) == ("Failed", "Evicted")
    oom = core.read_namespaced_pod("oom", NS).status
    terminated = oom.container_statuses[0].state.terminated
    assert oom.phase == "Failed" and (terminated.reason, terminated.exit_code) == ("OOMKilled", 137)
    with pytest.raises(ApiException) as gone:
        core.read_namespaced_pod("gone", NS)
    assert gone.value.status == 404


def test_concurrent_creations_and_deletions_are_recorded(instant):
    kube, core = instant
    kube.faults.creation_delay = kube.faults.deletion_delay = 0.5
    start = threading.Barrier(6)

    def life(n: int) -> None:
        start.wait()
        core.create_namespaced_pod(NS, pod_manifest(f"p-{n}"))
        start.wait()
        core.delete_namespaced_pod(f"p-{n}", NS, grace_period_seconds=0)

    threads = [threading.Thread(target=life, args=(n,)) for n in range(6)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(60)
    assert kube.seen.max_creating > 1 and kube.seen.max_deleting > 1
    assert kube.seen.max_creating <= 6 and kube.pods() == []
    assert sorted(kube.seen.created) == sorted(kube.seen.deleted) == sorted(f"{NS}/p-{n}" for n in range(6))


# --- real containers -----------------------------------------------------------------------------------------

@pytest.fixture
def containers(request, container_images):  # container_images: built first, and marks the test slow
    kube = request.getfixturevalue("kube_containers")
    return kube, core_for(kube)


def running(core: client.CoreV1Api, name: str):
    def ready():
        pod = core.read_namespaced_pod(name, NS)
        statuses = pod.status.container_statuses or []
        waiting = statuses[0].state.waiting if statuses and statuses[0].state.waiting else None
        assert waiting is None or waiting.reason == "ContainerCreating", waiting
        return pod if pod.status.phase == "Running" and statuses and statuses[0].ready else None

    return wait_for(ready, f"pod {name} Running and Ready")


def engine_ps(kube: KubeFake) -> list[str]:
    from container_images import podman_argv

    listed = subprocess.run([*podman_argv(), "ps", "-a", "-q", "--filter", f"label={kube.container_label}"],
                            capture_output=True, text=True, check=True)
    return listed.stdout.split()


def test_container_mode_runs_exec_in_a_real_container(containers):
    kube, core = containers
    core.create_namespaced_pod(NS, pod_manifest(
        "real", workingDir="/tmp", securityContext={"runAsUser": 1000},
        resources={"limits": {"cpu": "500m", "memory": "256Mi"}, "requests": {"cpu": "500m", "memory": "256Mi"}}))
    pod = running(core, "real")
    assert pod.status.container_statuses[0].container_id.startswith("podman://")

    assert run_exec(core, "real", ["sh", "-c", "echo marker-7 > marker.txt"])[0] == 0
    assert run_exec(core, "real", ["sh", "-c", "cat /tmp/marker.txt; pwd; id -u"]) == (0, b"marker-7\n/tmp\n1000\n",
                                                                                        b"")
    assert run_exec(core, "real", ["sh", "-c", "echo oops >&2; exit 3"]) == (3, b"", b"oops\n")
    limits = run_exec(core, "real", ["sh", "-c", "cat /sys/fs/cgroup/memory/memory.limit_in_bytes "
                                                 "/sys/fs/cgroup/memory.max 2>/dev/null; true"])[1]
    assert str(256 << 20).encode() in limits
    network = run_exec(core, "real", ["sh", "-c", "ls /sys/class/net"])[1].split()
    assert network == [b"lo"]


def test_container_mode_streams_stdin_and_large_output_intact(containers):
    _, core = containers
    core.create_namespaced_pod(NS, pod_manifest("io"))
    running(core, "io")
    data = os.urandom(1 << 20)
    code, out, _ = run_exec(core, "io", ["cat"], data)
    assert code == 0 and out == data
    code, out, _ = run_exec(core, "io", ["python3", "-c", "import sys; sys.stdout.buffer.write(bytes(range(256)) "
                                                          "* 100000)"])
    assert code == 0 and len(out) == 25_600_000 and out == bytes(range(256)) * 100000


def test_container_mode_deleting_the_pod_removes_its_container(containers):
    kube, core = containers
    version = core.create_namespaced_pod(NS, pod_manifest("doomed")).metadata.resource_version
    running(core, "doomed")
    assert len(engine_ps(kube)) == 1
    core.delete_namespaced_pod("doomed", NS, grace_period_seconds=0)

    def gone():
        try:
            core.read_namespaced_pod("doomed", NS)
            return False
        except ApiException as exc:
            return exc.status == 404

    wait_for(gone, "pod removed")
    assert engine_ps(kube) == []
    events = list(watch.Watch().stream(core.list_namespaced_pod, NS, resource_version=version, timeout_seconds=1))
    terminating = [e for e in events if e["type"] == "MODIFIED" and e["object"].metadata.deletion_timestamp]
    assert terminating and events[-1]["type"] == "DELETED"


def test_container_mode_a_missing_image_fails_to_pull_and_an_exit_ends_the_pod(containers):
    _, core = containers
    core.create_namespaced_pod(NS, pod_manifest("missing", image="localhost/kube-fake/no-such-image:1"))
    core.create_namespaced_pod(NS, pod_manifest("short", args=["sh", "-c", "echo last words; exit 4"]))

    def pull_error():
        statuses = core.read_namespaced_pod("missing", NS).status.container_statuses or []
        waiting = statuses[0].state.waiting if statuses else None
        return waiting if waiting and waiting.reason in ("ErrImagePull", "ImagePullBackOff") else None

    assert "no-such-image" in wait_for(pull_error, "an image pull failure").message
    ended = wait_for(lambda: (pod := core.read_namespaced_pod("short", NS)).status.phase in ("Failed", "Succeeded")
                     and pod, "the short pod ending")
    terminated = ended.status.container_statuses[0].state.terminated
    assert ended.status.phase == "Failed" and terminated.exit_code == 4 and terminated.reason == "Error"
    assert core.read_namespaced_pod_log("short", NS) == "last words\n"


def test_exec_speaks_v4_and_v5_to_an_asyncio_client(instant):
    """The backend's own exec client is aiohttp: the subprotocol it offers first is echoed, v5's close of stdin
    ends `cat`'s input, and v4 (which cannot close stdin alone) still gets output and a status."""
    import asyncio

    import aiohttp

    kube, core = instant
    core.create_namespaced_pod(NS, pod_manifest("p"))

    async def exec_once(protocols: tuple[str, ...], command: list[str], data: bytes) -> tuple[str, bytes, dict]:
        query = [("command", part) for part in command] + [("container", "sandbox"), ("stdin", "true"),
                                                           ("stdout", "true"), ("stderr", "true")]
        async with aiohttp.ClientSession() as session, session.ws_connect(
                f"{kube.url}/api/v1/namespaces/{NS}/pods/p/exec", params=query, protocols=protocols) as ws:
            await ws.send_bytes(b"\x00" + data)
            if ws.protocol == "v5.channel.k8s.io":
                await ws.send_bytes(b"\xff\x00")
            out, status = bytearray(), {}
            async for message in ws:
                if message.data[0] == 1:
                    out += message.data[1:]
                elif message.data[0] == 3:
                    status = json.loads(message.data[1:])
            return ws.protocol, bytes(out), status

    v5 = asyncio.run(exec_once(("v5.channel.k8s.io", "v4.channel.k8s.io"), ["cat"], b"through v5\n"))
    assert v5 == ("v5.channel.k8s.io", b"through v5\n", {"metadata": {}, "status": "Success"})
    protocol, out, status = asyncio.run(exec_once(("v4.channel.k8s.io",), ["sh", "-c", "exit 2"], b"ignored"))
    assert (protocol, out, status["reason"]) == ("v4.channel.k8s.io", b"", "NonZeroExitCode")
    assert status["details"]["causes"] == [{"reason": "ExitCode", "message": "2"}]


def test_a_command_that_ends_without_reading_its_stdin_still_gets_its_status_to_the_client(instant):
    """60 clients at once each send 4 MiB of stdin to `false`, which reads none of it: every one gets exit code 1.
    The stand-in keeps reading what a client sends after the command ended, as a kubelet does (had it closed with
    frames unread, the kernel would reset the connection and the client lose the status), and the backend's
    client stops writing to a stream that closed, as to a closed pipe, and still reads the status."""
    import asyncio

    from sandbox.kubernetes.exec_stream import ExecStream, session_for

    kube, core = instant
    core.create_namespaced_pod(NS, pod_manifest("p"))
    configuration = kube.configuration()

    async def one(session) -> int:
        stream = await ExecStream.open(session, configuration, NS, "p", "sandbox", ["false"], stdin=True)
        try:
            for _ in range(64):
                await stream.write(b"x" * (64 << 10))
            await stream.close_stdin()
            return await stream.wait()
        finally:
            await stream.close()

    async def many() -> list:
        session = session_for(configuration)
        try:
            return await asyncio.gather(*(one(session) for _ in range(60)), return_exceptions=True)
        finally:
            await session.close()

    assert asyncio.run(many()) == [1] * 60


def test_a_pod_past_its_active_deadline_fails(instant):
    _, core = instant
    manifest = pod_manifest("late")
    manifest["spec"]["activeDeadlineSeconds"] = 1
    core.create_namespaced_pod(NS, manifest)
    ended = wait_for(lambda: (pod := core.read_namespaced_pod("late", NS)).status.phase == "Failed" and pod,
                     "the deadline")
    assert ended.status.reason == "DeadlineExceeded"


def test_a_hundred_and_fifty_pods_at_once_leave_nothing_behind(instant):
    """Each pod created, exec'd once and deleted from a pool of threads, as the backend's API threads do."""
    from concurrent.futures import ThreadPoolExecutor

    kube, core = instant
    kube.faults.creation_delay = kube.faults.deletion_delay = 0.05

    def episode(n: int) -> tuple[int, bytes, bytes]:
        core.create_namespaced_pod(NS, pod_manifest(f"ep-{n}", labels={"leafcost": "1", "episode": str(n)}))
        try:  # stream() swaps its ApiClient's call_api while it runs: one client per concurrent exec
            return run_exec(client.CoreV1Api(client.ApiClient(core.api_client.configuration)), f"ep-{n}",
                            ["echo", str(n)])
        finally:
            core.delete_namespaced_pod(f"ep-{n}", NS, grace_period_seconds=0)

    with ThreadPoolExecutor(32) as pool:
        results = list(pool.map(episode, range(150)))
    assert results == [(0, f"{n}\n".encode(), b"") for n in range(150)]
    assert kube.pods() == [] and len(kube.seen.created) == len(kube.seen.deleted) == 150
    assert 1 < kube.seen.max_creating <= 32 and 1 < kube.seen.max_deleting <= 32
    assert kube.seen.count("exec") == 150
