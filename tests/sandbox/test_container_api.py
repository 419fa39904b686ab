"""The container backend through the engine's REST API (aiodocker over a socket): the translation of the backend's
flags into the API's create body, the per-process Podman service and its end with its process, and the command
line as the fallback, each against a real Podman."""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from sandbox import SandboxOptions, open_sandbox, run_oracle, verify
from sandbox.container import api
from sandbox.container.engine import ULIMITS, engine

ROOT = Path(__file__).resolve().parent.parent.parent
needs_client = pytest.mark.skipif(not api._has_client(), reason="aiodocker is not installed")


def test_the_backends_run_flags_become_the_apis_create_body(monkeypatch):
    monkeypatch.setenv("FROM_HOST", "host-value")
    flags = ["--init", "--name", "leafcost-x", *ULIMITS, "--cpus", "1.5", "--memory", "512m", "--memory-swap",
             "512m", "--pids-limit", "256", "--label", "leafcost=1", "--label", "leafcost.role=agent", "--network",
             "none", "--workdir", "/app", "--env", "TASK", "--env", "FROM_HOST", "--env", "UNSET_ANYWHERE",
             "--mount", "type=bind,src=/usr/bin/true,dst=/.leafcost/keep-alive,ro=true", "--user", "1000"]
    body = api.container_config(flags, "sha256:abc", ["/.leafcost/keep-alive", "-P"], {"TASK": "task-value"})
    assert body == {
        "name": "leafcost-x", "Image": "sha256:abc", "Cmd": ["/.leafcost/keep-alive", "-P"], "WorkingDir": "/app",
        "User": "1000", "Labels": {"leafcost": "1", "leafcost.role": "agent"},
        "Env": ["TASK=task-value", "FROM_HOST=host-value"],  # a name set nowhere is left out, as the client does
        "HostConfig": {"Init": True, "NanoCpus": 1_500_000_000, "Memory": 512 << 20, "MemorySwap": 512 << 20,
                       "PidsLimit": 256, "NetworkMode": "none",
                       "Ulimits": [{"Name": "nofile", "Soft": 1024, "Hard": 1024},
                                   {"Name": "nproc", "Soft": 4096, "Hard": 4096}],
                       "Binds": ["/usr/bin/true:/.leafcost/keep-alive:ro"]}}


@pytest.mark.parametrize("flags", [["--entrypoint", ""], ["--network", "slirp4netns:allow_host_loopback=false"],
                                   ["--mount", "type=bind,src=/a,dst=/b"], ["--cap-add", "ALL"], ["--init", "--name"],
                                   ["--memory", "lots"]])
def test_a_flag_it_does_not_translate_leaves_the_container_to_the_command_line(flags):
    assert api.container_config(flags, "image", [], {}) is None


def test_the_command_line_is_asked_for_by_name(monkeypatch):
    monkeypatch.setenv("LEAFCOST_CONTAINER_API", "cli")
    assert api.api_socket("podman", ("podman",)) is None


@needs_client
def test_the_processs_own_podman_service_ends_with_the_process(container_images):
    script = ("from sandbox.container.api import api_socket\nfrom sandbox.container.engine import engine\n"
              "print(api_socket('podman', engine('podman').argv), flush=True)")
    child = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, cwd=ROOT, timeout=120,
                           env={**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT), *sys.path])})
    socket = child.stdout.strip()
    assert child.returncode == 0 and socket.endswith("podman.sock"), child.stderr
    deadline = time.monotonic() + 60
    while api._answers(socket) and time.monotonic() < deadline:
        time.sleep(0.2)
    while Path(socket).parent.exists() and time.monotonic() < deadline:
        time.sleep(0.2)
    assert not api._answers(socket) and not Path(socket).parent.exists()


@needs_client
@pytest.mark.parametrize("mode", ["api", "cli"])
def test_an_attempt_runs_the_same_through_the_api_and_the_command_line(mode, container_images, make_task, tmp_path,
                                                                       monkeypatch):
    if mode == "cli":
        monkeypatch.setenv("LEAFCOST_CONTAINER_API", "cli")
    else:
        monkeypatch.delenv("LEAFCOST_CONTAINER_API", raising=False)
    options = SandboxOptions(backend="podman", cache_dir=tmp_path / "cache")
    task = make_task("through-" + mode)

    async def attempt():
        opened = await open_sandbox(task, options, solution=True)
        try:
            assert (opened.api is not None) == (mode == "api")
            said = await opened.sandbox.run_tool("Bash", {"command": "echo $((6 * 7)); echo oops >&2; exit 3"})
            again = await opened.sandbox.run_tool("Bash", {"command": "id -u"})
            harness = await opened.sandbox.exec("printf out; printf err >&2; exit 4", timeout=30)
            slow = await opened.sandbox.exec("sleep 30", timeout=1)
            name = opened.sandbox.container
            inspected = json.loads(subprocess.run(engine("podman").command("inspect", name), capture_output=True,
                                                  check=True).stdout)[0]
            oracle = await run_oracle(opened.sandbox, task)
            grade = (await verify(opened, task)).grade
            return said, again, harness, slow, inspected, oracle, grade
        finally:
            await opened.close()

    said, again, harness, slow, inspected, oracle, grade = asyncio.run(attempt())
    assert "42" in said and "oops" in said and "3" in said
    assert again.strip().splitlines()[-1] != "" and "Exit code: 0" in again
    assert (harness.exit_code, harness.stdout, harness.stderr) == (4, "out", "err")
    assert slow.timed_out and slow.exit_code is None
    host = inspected["HostConfig"]
    assert host["NetworkMode"] == "none" and host["PidsLimit"] == 256 and host["Memory"] == 512 << 20
    limits = {(limit["Name"], limit["Soft"], limit["Hard"]) for limit in host["Ulimits"]}
    assert host["Init"] is True and limits >= {("RLIMIT_NOFILE", 1024, 1024), ("RLIMIT_NPROC", 4096, 4096)}
    assert inspected["Config"]["Labels"]["leafcost"] == "1"
    assert oracle.exit_code == 0 and grade.resolved is True and grade.reward == 1.0
