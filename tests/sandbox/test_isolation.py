"""The local sandbox isolates: no host secrets, no writes outside the workspace, no network, bounded
processes and memory, a PID namespace, and timeouts that kill whole process trees. The host stays untouched."""

from __future__ import annotations

import asyncio
import os
import shutil
import socket
import threading
from pathlib import Path

import pytest

from sandbox import SandboxError, SandboxOptions, open_sandbox, require_isolation, verify


def run(coro):
    return asyncio.run(coro)


async def bash(sandbox, command: str, timeout: float = 30) -> str:
    return await sandbox.run_tool("Bash", {"command": command, "timeout": timeout})


@pytest.fixture
def host_canary():
    """A secret-looking file in the invoking user's home, which the sandbox must never show."""
    path = Path.home() / f".leafcost-canary-{os.getpid()}"
    path.write_text("canary-secret-value\n")
    yield path
    path.unlink(missing_ok=True)


def test_environment_has_no_host_secrets_or_home(make_task, sandbox_options, host_canary, monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", "sk-must-not-leak")

    async def scenario():
        opened = await open_sandbox(make_task(), sandbox_options)
        try:
            env = await bash(opened.sandbox, "env; ls -a ~ /root /home 2>&1; echo \"SHADOW[$(cat /etc/shadow)]\"")
            read = await opened.sandbox.run_tool("Read", {"file_path": str(host_canary)})
        finally:
            await opened.close()
        return env, read

    env, read = run(scenario())
    assert "sk-must-not-leak" not in env
    assert host_canary.name not in env
    assert "SHADOW[]" in env  # /etc/shadow is masked by an empty file
    assert read.startswith("FileNotFoundError")
    assert "canary-secret-value" not in read


def test_writes_outside_the_workspace_fail_and_host_is_untouched(make_task, sandbox_options, host_canary):
    async def scenario():
        opened = await open_sandbox(make_task(), sandbox_options)
        try:
            write_root = await opened.sandbox.run_tool("Write", {"file_path": "/leafcost-evil.txt", "content": "x"})
            write_usr = await bash(opened.sandbox, "echo x > /usr/bin/leafcost-evil; echo rc=$?")
            await bash(opened.sandbox, f"ln -s {host_canary} link && ln -s /usr/bin/env envlink")
            through = await opened.sandbox.run_tool("Write", {"file_path": "envlink", "content": "overwritten"})
            read_link = await opened.sandbox.run_tool("Read", {"file_path": "link"})
        finally:
            await opened.close()
        return write_root, write_usr, through, read_link

    write_root, write_usr, through, read_link = run(scenario())
    assert write_root.split(":")[0] in {"PermissionError", "OSError"}
    assert "rc=1" in write_usr or "Read-only" in write_usr
    assert through.split(":")[0] in {"PermissionError", "OSError"}
    assert read_link.startswith("FileNotFoundError")
    assert not Path("/leafcost-evil.txt").exists()
    assert not Path("/usr/bin/leafcost-evil").exists()
    assert Path("/usr/bin/env").read_bytes() != b"overwritten"
    assert host_canary.read_text() == "canary-secret-value\n"


def test_no_network_unless_the_task_allows_it(make_task, sandbox_options):
    server = socket.create_server(("127.0.0.1", 0))
    port = server.getsockname()[1]
    threading.Thread(target=_accept_quietly, args=(server,), daemon=True).start()
    probe = (f"python3 -c \"import socket; socket.create_connection(('127.0.0.1', {port}), timeout=3); "
             "print('CONNECTED')\"")

    async def attempt(network: bool) -> str:
        opened = await open_sandbox(make_task(f"net-{network}", network=network), sandbox_options)
        try:
            return await bash(opened.sandbox, probe)
        finally:
            await opened.close()

    try:
        closed, open_ = run(attempt(False)), run(attempt(True))
    finally:
        server.close()
    assert "CONNECTED" not in closed and not closed.startswith("Exit code: 0")
    assert "CONNECTED" in open_


def _accept_quietly(server: socket.socket) -> None:
    try:
        while True:
            server.accept()
    except OSError:
        pass  # the test closed the server


@pytest.mark.slow
def test_fork_bomb_is_contained_and_the_sandbox_goes_on(make_task, sandbox_options):
    async def scenario():
        bomb = await open_sandbox(make_task("bomb", pids=64), sandbox_options)
        neighbour = await open_sandbox(make_task("neighbour"), sandbox_options)
        try:
            bombed = await bash(bomb.sandbox, "bomb() { bomb | bomb & }; bomb; sleep 30", timeout=4)
            after = await bash(bomb.sandbox, "echo still-alive")
            beside = await bash(neighbour.sandbox, "echo neighbour-fine")
        finally:
            await bomb.close()
            await neighbour.close()
        leftover = [d for d in bomb.sandbox.limits.cgroups if Path(d).exists()]
        return bombed, after, beside, bomb.spec.limits_via, leftover

    bombed, after, beside, via, leftover_cgroups = run(scenario())
    assert leftover_cgroups == []  # every process killed and the cgroups removed on close
    assert bombed.startswith("Timed out after 4.0s")  # `sleep 30` outlives the 4 s timeout: the group is killed
    assert "still-alive" in after
    assert "neighbour-fine" in beside
    # As root a cgroup holds the limits; without root only prlimit is possible.
    assert via in ({"cgroup-v1", "cgroup-v2"} if os.geteuid() == 0 else {"prlimit"})


@pytest.mark.slow
def test_memory_hog_is_stopped_by_the_limit(make_task, sandbox_options):
    async def scenario():
        opened = await open_sandbox(make_task("hog", memory_mb=200), sandbox_options)
        try:
            hog = await bash(opened.sandbox, "python3 -c 'x = bytearray(1500 * 1024 * 1024); print(\"ALLOCATED\")'")
            after = await bash(opened.sandbox, "echo survived")
        finally:
            await opened.close()
        return hog, after

    hog, after = run(scenario())
    assert "ALLOCATED" not in hog
    assert not hog.startswith("Exit code: 0")
    assert "survived" in after


def test_timeout_kills_the_whole_process_tree(make_task, sandbox_options):
    async def scenario():
        opened = await open_sandbox(make_task(), sandbox_options)
        try:
            timed_out = await bash(opened.sandbox, "sleep 300 & (sleep 301 &) ; echo started; sleep 302", timeout=2)
            survivors = await bash(opened.sandbox, "ps -eo args | grep -c '^sleep 30[012]' || true")
        finally:
            await opened.close()
        return timed_out, survivors

    timed_out, survivors = run(scenario())
    assert timed_out.startswith("Timed out after 2.0s")
    assert "started" in timed_out
    assert survivors.split("STDOUT:\n")[1].split("\n")[0].strip() == "0"


def test_own_pid_namespace(make_task, sandbox_options):
    async def scenario():
        opened = await open_sandbox(make_task(), sandbox_options)
        try:
            return await bash(opened.sandbox, "ls /proc | grep -E '^[0-9]+$' | sort -n | tr '\\n' ' '")
        finally:
            await opened.close()

    pids = run(scenario()).split("STDOUT:\n")[1].split("\n")[0].split()
    assert str(os.getpid()) not in pids
    assert len(pids) < 20  # bwrap's init, the runner, the command: not the host's processes


def test_spec_hash_is_stable_and_sensitive(make_task, sandbox_options):
    async def spec_hashes():
        hashes = []
        for task in (make_task("same"), make_task("same"), make_task("other", memory_mb=1024)):
            opened = await open_sandbox(task, sandbox_options)
            hashes.append((opened.spec_hash, opened.built.cache_hit))
            await opened.close()
        return hashes

    (first, _), (second, cached), (third, _) = run(spec_hashes())
    assert first == second and cached is True
    assert third != first


def test_missing_bubblewrap_is_refused_with_the_fix(monkeypatch, tmp_path):
    monkeypatch.setenv("PATH", str(tmp_path))
    with pytest.raises(SandboxError, match="apt-get install -y bubblewrap"):
        require_isolation(SandboxOptions(cache_dir=tmp_path))
    require_isolation(SandboxOptions(cache_dir=tmp_path, unsafe_no_isolation=True))  # explicitly allowed


def test_unsafe_mode_runs_in_this_machines_root_and_is_marked(make_task, tmp_path):
    options = SandboxOptions(cache_dir=tmp_path / "cache", unsafe_no_isolation=True)
    taken = [p for p in ("/app", "/tests", "/logs", "/solution") if os.path.lexists(p)]

    task = make_task("unsafe")

    async def scenario():
        opened = await open_sandbox(task, options, solution=True)
        try:
            output = await bash(opened.sandbox, "pwd; cat calc.py; bash /solution/solve.sh")
            return opened.spec.isolation, output, (await verify(opened, task)).grade
        finally:
            await opened.close()

    if os.geteuid() != 0 or taken:
        with pytest.raises(SandboxError, match="root|already exists"):
            run(scenario())
        return
    isolation, output, grade = run(scenario())
    assert isolation == "none"
    assert "/app" in output and "return a - b" in output
    assert grade.resolved is True  # /tests and /logs/verifier reached through the host view of the mounts
    assert not any(os.path.lexists(p) for p in ("/app", "/tests", "/logs", "/solution"))


@pytest.fixture
def home_toolchain():
    """A toolchain kept under the home directory, as pyenv or cargo keep theirs."""
    path = Path.home() / f".leafcost-toolchain-{os.getpid()}"
    path.mkdir()
    yield path
    shutil.rmtree(path, ignore_errors=True)


def test_named_base_root_and_read_only_toolchain_binds(make_task, tmp_path, home_toolchain):
    toolchain = home_toolchain
    (toolchain / "tool.sh").write_text("echo toolchain-ran\n")
    options = SandboxOptions(cache_dir=tmp_path / "cache", base_root="/", extra_ro_binds=[str(toolchain)])

    async def scenario():
        opened = await open_sandbox(make_task("bound"), options)
        try:
            ran = await bash(opened.sandbox, f"bash {toolchain}/tool.sh; touch {toolchain}/new; echo rc=$?")
        finally:
            await opened.close()
        return opened.spec, ran

    spec, ran = run(scenario())
    assert spec.base_root == "/" and spec.extra_ro_binds == [str(toolchain)]
    assert "toolchain-ran" in ran and "rc=1" in ran
    assert not (toolchain / "new").exists()


def test_base_root_without_python_is_refused(make_task, tmp_path):
    empty_root = tmp_path / "root"
    (empty_root / "usr").mkdir(parents=True)
    options = SandboxOptions(cache_dir=tmp_path / "cache", base_root=str(empty_root))
    with pytest.raises(SandboxError, match="has no /usr/bin/python3"):
        run(open_sandbox(make_task("no-python"), options))
