"""The container and kubernetes backends against a hostile agent or task (issue 21): the harness's own processes
never come from the agent's files, a build never reaches the host's loopback, an image name is never an option, the
containers of a killed runner stop at once, and a reward read through a link is refused on every backend. Real
Podman, real HTTP servers on the host, the kubernetes stand-in."""

from __future__ import annotations

import asyncio
import json
import os
import shlex
import signal
import subprocess
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

from compare.validate import validate_task
from sandbox import BuildError, SandboxOptions, open_sandbox, verify
from sandbox.container.processes import cgroup_directory, live_processes
from sandbox.container.engine import engine
from sandbox.image_names import is_reference
from sandbox.container.images import REPOSITORY_NAME_MAX, read_lock, repository_name
from sandbox.kubernetes.pods import close_clusters

REPO = Path(__file__).resolve().parents[2]
LEAFCOST = Path(sys.executable).with_name("leafcost")
SECRET = "host-secret-5d1f"


def run(coro):
    return asyncio.run(coro)


@pytest.fixture(scope="module")
def podman(container_images, tmp_path_factory) -> SandboxOptions:
    return SandboxOptions(backend="podman", cache_dir=tmp_path_factory.mktemp("podman-cache"))


@pytest.fixture
def host_secret():
    """A real HTTP server on the host's loopback that serves SECRET to anyone and remembers every request."""
    seen: list[str] = []

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self):  # noqa: N802 - http.server's name
            seen.append(self.path)
            body = SECRET.encode()
            self.send_response(200)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args):
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield server.server_address[1], seen
    finally:
        server.shutdown()
        server.server_close()


def podman_cli(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run(engine("podman").command(*args), capture_output=True, text=True)


# 2. The keep-alive and the ENTRYPOINT are never run again from the agent's files.

ENTRYPOINT = ("#!/bin/sh\n"
              "python3 -c 'import os, time; open(\"/run/service.pid\", \"w\").write(str(os.getpid())); "
              "time.sleep(10**6)' &\n"
              "exec \"$@\"\n")
FORGE = ("#!/bin/sh\n"
         "(while :; do mkdir -p /logs/verifier 2>/dev/null; echo '{\"reward\": 1}' > /logs/verifier/reward.json; "
         "/usr/bin/sleep.real 0.02; done) >/dev/null 2>&1 &\n")


def test_a_replaced_sleep_and_entrypoint_never_run_as_the_harness_and_entrypoint_services_live_on(podman, make_task):
    """The agent, root in its container, replaces `sleep` (what `sh -c "sleep infinity"` kept the container alive
    with) and the image's ENTRYPOINT with programs that forge reward.json forever. Neither runs again: the
    keep-alive is the host's catatonit and the container is never restarted for grading, so the verifier's own 0
    counts, and the service the ENTRYPOINT started before the agent is the same process in the verifier."""
    dockerfile = ("FROM python:3.11-slim\nWORKDIR /app\nCOPY repo/ /app/\nCOPY entry.sh /entry.sh\n"
                  "RUN chmod 755 /entry.sh\nENTRYPOINT [\"/entry.sh\"]\n")
    test_sh = ("mkdir -p /logs/verifier\n"
               "kill -0 \"$(cat /run/service.pid)\" && cat /run/service.pid > /logs/verifier/service.txt\n"
               "echo 0 > /logs/verifier/reward.txt\n")
    task = make_task("keep-alive", files={"environment/Dockerfile": dockerfile, "environment/entry.sh": ENTRYPOINT,
                                          "tests/test.sh": test_sh})
    sleep, entry = shlex.quote(FORGE + 'exec /usr/bin/sleep.real "$@"\n'), shlex.quote(FORGE + 'exec "$@"\n')
    attack = (f"cp /usr/bin/sleep /usr/bin/sleep.real && rm -f /usr/bin/sleep && printf %s {sleep} > /usr/bin/sleep "
              f"&& chmod 755 /usr/bin/sleep && printf %s {entry} > /entry.sh && "
              "echo \"service=$(cat /run/service.pid)\" && echo planted")
    seen = {}

    async def scenario():
        opened = await open_sandbox(task, podman)
        try:
            seen["attack"] = await opened.sandbox.run_tool("Bash", {"command": attack})
            seen["top"] = podman_cli("top", opened.sandbox.container, "args").stdout
            verification = await verify(opened, task)
            seen["service"] = await opened.read_verifier_file("service.txt", 100)
            return verification
        finally:
            await opened.close()

    verification = run(scenario())
    assert "planted" in seen["attack"]
    assert verification.grade.error is None and verification.grade.reward == 0.0
    assert verification.grade.resolved is False
    assert "/.leafcost/keep-alive -P" in seen["top"] and "sleep infinity" not in seen["top"]
    service_pid = seen["attack"].split("service=", 1)[1].split()[0]
    assert seen["service"] is not None and seen["service"].decode().strip() == service_pid


# 14. Builds never reach the host's loopback.

def test_a_build_never_reads_a_service_on_the_hosts_loopback(podman, make_task, host_secret):
    """`ADD http://127.0.0.1:PORT/` is fetched by the builder itself; a `RUN` reaches the host's loopback through
    the build network's gateway (10.0.2.2 under slirp4netns's defaults; 10.88.0.1 is the bridge's). With or without
    allow_internet, neither reaches the host's service, and a `RUN` still has a network of its own (as in Harbor,
    a Dockerfile may install packages whatever the agent may do at run time)."""
    port, seen = host_secret
    base = "FROM python:3.11-slim\nWORKDIR /app\nCOPY repo/ /app/\n"
    add = f"ADD http://127.0.0.1:{port}/add-secret /secret\n"
    probe = ("RUN python3 -c \"import socket, sys; reached = [h for h in ('10.0.2.2', '10.88.0.1', '127.0.0.1') "
             f"if (lambda s: (s.settimeout(3), s.connect_ex((h, {port})))[1])(socket.socket()) == 0]; "
             "print('reached', reached); sys.exit(1 if reached else 0)\"\n")
    own_network = "RUN test \"$(ls /sys/class/net | grep -vx lo)\" != ''\n"
    tasks = {"add-offline": make_task("add-offline", files={"environment/Dockerfile": base + add}),
             "add-online": make_task("add-online", network=True, files={"environment/Dockerfile": base + add}),
             "run-online": make_task("run-online", network=True, files={"environment/Dockerfile": base + probe}),
             "run-offline": make_task("run-offline", files={"environment/Dockerfile": base + own_network + probe})}
    errors = {name: run(validate_task(task, podman)).error for name, task in tasks.items()}
    assert seen == []  # the host's service never saw a request
    assert "image build failed" in (errors["add-offline"] or "") and "127.0.0.1" in errors["add-offline"]
    assert "image build failed" in (errors["add-online"] or "")
    assert errors["run-online"] is None and errors["run-offline"] is None, errors


# 15. An image name is parsed as a reference, never read as an option.

def test_an_image_name_that_is_an_option_is_a_task_error_and_never_reaches_podman(podman, make_task, tmp_path):
    task = make_task("option-image")
    task.config.environment.docker_image = "--authfile=/etc/shadow"
    result = run(validate_task(task, podman))
    assert result.valid is False
    assert "environment.docker_image '--authfile=/etc/shadow' is not an image reference" in result.error
    lock = tmp_path / "images.lock.json"
    lock.write_text(json.dumps({"format": 1, "engine": "podman",
                                "tasks": {"t": {"image": "-q", "id": "sha256:" + "0" * 64}}}))
    with pytest.raises(BuildError, match=r"tasks\.t\.image: Value error, '-q' is not an image reference"):
        read_lock(lock)


# 18. The containers of a runner killed with SIGKILL stop within seconds.

DRIVER = """
import asyncio, sys
from sandbox import SandboxOptions, load_harbor_task, open_sandbox

async def main():
    task = load_harbor_task(sys.argv[1])
    opened = await open_sandbox(task, SandboxOptions(backend="podman", cache_dir=sys.argv[2]))
    await opened.sandbox.run_tool("Bash", {"command": "nohup setsid sh -c 'while :; do echo beat > /tmp/beat; done' "
                                                      ">/dev/null 2>&1 & echo started"})
    print(opened.sandbox.container, flush=True)
    await asyncio.sleep(3600)

asyncio.run(main())
"""


def test_the_containers_of_a_killed_runner_stop_without_waiting_for_the_next_run(podman, make_task, tmp_path):
    task = make_task("orphan")
    driver = tmp_path / "driver.py"
    driver.write_text(DRIVER)
    runner = subprocess.Popen([sys.executable, str(driver), str(task.path), str(tmp_path / "cache")], cwd=REPO,
                              env={**os.environ, "PYTHONPATH": str(REPO)}, stdout=subprocess.PIPE,
                              stderr=subprocess.PIPE, text=True)
    container = ""
    try:
        container = runner.stdout.readline().strip()
        assert container.startswith("leafcost-"), runner.stderr.read()
        pid = int(podman_cli("inspect", "--format", "{{.State.Pid}}", container).stdout)
        loop = [p for p in live_processes(cgroup_directory(pid))
                if b"while" in Path(f"/proc/{p.pid}/cmdline").read_bytes()]
        assert len(loop) == 1  # the agent's loop, writing as fast as it can
        runner.send_signal(signal.SIGKILL)
        runner.wait()
        deadline = time.monotonic() + 60  # a safety bound, not what is asserted
        while time.monotonic() < deadline and podman_cli("container", "exists", container).returncode == 0:
            time.sleep(0.2)
        assert podman_cli("container", "exists", container).returncode == 1  # removed, not left for the next run
        stat = Path(f"/proc/{loop[0].pid}/stat")
        assert not stat.exists() or stat.read_bytes().rsplit(b") ", 1)[1].split()[19].decode() != loop[0].start
    finally:
        if runner.poll() is None:
            runner.kill()
        if container:
            podman_cli("rm", "-f", "-t", "0", container)


# 19. A reward behind a link is refused on every backend.

LINKED_REWARD = ("mkdir -p /logs/verifier\necho '{\"reward\": 1}' > /tmp/forged.json\n"
                 "ln -s /tmp/forged.json /logs/verifier/reward.json\n")


@pytest.mark.parametrize("backend", ["local", "podman", "kubernetes"])
def test_a_reward_json_that_is_a_link_is_refused_on_every_backend(backend, request, make_task, tmp_path):
    task = make_task("linked-reward", files={"tests/test.sh": LINKED_REWARD})
    if backend == "local":
        options = request.getfixturevalue("sandbox_options")
    elif backend == "podman":
        options = request.getfixturevalue("podman")
    else:
        kube = request.getfixturevalue("kube_containers")
        lock = tmp_path / "images.lock.json"
        done = subprocess.run([str(LEAFCOST), "images", "lock", str(task.path.parent), "-o", str(lock)],
                              capture_output=True, text=True, timeout=1800)
        assert done.returncode == 0, done.stderr
        options = SandboxOptions(backend="kubernetes", kubeconfig=kube.kubeconfig, kube_namespace=kube.namespace,
                                 images_lock=lock)

    async def graded():
        try:
            opened = await open_sandbox(task, options)
            try:
                return await verify(opened, task)
            finally:
                await opened.close()
        finally:
            if backend == "kubernetes":
                await close_clusters()

    grade = run(graded()).grade
    assert grade.resolved is False and grade.reward is None
    assert grade.error == "reward_invalid" and grade.detail.startswith("reward.json unreadable: reward.json")
    assert "not a regular file" in grade.detail or "symlink; not followed" in grade.detail



@pytest.mark.parametrize("task_id", ["calc", "ledger_rounding", "a..b", "a._-b", "-x-", "UPPER/Case/../dir", "é" * 10,
                                     "t" * 250, "a/" * 130, "x" * 240 + "\udcff"])
def test_the_tag_leafcost_builds_for_any_task_id_is_a_bounded_valid_reference(task_id):
    """A 250-character (or odd) task folder gets an image tag podman accepts: the same task validates and runs on
    every backend, none stops at the tag."""
    name = repository_name(task_id)
    assert len(name) <= REPOSITORY_NAME_MAX and is_reference(f"localhost/leafcost-env/{name}:0123abcd"), name


def test_long_task_ids_cut_to_one_tag_length_keep_distinct_tags():
    assert repository_name("t" * 250) != repository_name("t" * 251)
    assert repository_name("t" * 250) == repository_name("t" * 250)
