"""Everything inside a sandbox is hostile: a model's commands and a task's files race, plant links, flood pipes and
forge files. Each test is an attack from the security review (shared/reviews/2026-12-03-security.md); the host's
files, the grade and the other tasks must come out untouched."""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys

import pytest

from compare.validate import validate_suite
from sandbox import BuildError, SandboxOptions, Suite, open_sandbox, remove_leftovers, verify
from sandbox.shared.owner import OWNER_FILE, identity


def run(coro):
    return asyncio.run(coro)


async def bash(sandbox, command: str, timeout: float = 30) -> str:
    return await sandbox.run_tool("Bash", {"command": command, "timeout": timeout})


def python_loop(body: str, seconds: int = 120) -> str:
    """A shell command that leaves a detached Python process running `body` in a loop for `seconds`."""
    program = f"import os, time\nend = time.time() + {seconds}\nwhile time.time() < end:\n" + "".join(
        f"    {line}\n" for line in body.splitlines()) + "    time.sleep(0.001)\n"
    return f"nohup setsid python3 -c {json.dumps(program)} >/dev/null 2>&1 & echo started"


@pytest.fixture
def victim(tmp_path):
    directory = tmp_path / "host-victim"
    (directory / "sub").mkdir(parents=True)
    for name in ("a.txt", "sub/c.txt"):
        (directory / name).write_text("keep me")
    return directory


def listing(directory) -> list[str]:
    return sorted(str(p.relative_to(directory)) for p in directory.rglob("*"))


async def agent_then_verify(task, options, commands: list[str]):
    """The agent's Bash calls, then the runner's order: patch capture and grading."""
    opened = await open_sandbox(task, options)
    try:
        for command in commands:
            await bash(opened.sandbox, command)
        return await verify(opened, task)
    finally:
        await opened.close()


@pytest.mark.slow
def test_symlink_racer_left_by_the_agent_cannot_make_the_host_delete_its_files(make_task, sandbox_options, victim):
    racer = python_loop(f"try: os.rmdir('/logs/verifier')\nexcept OSError: pass\n"
                        f"try: os.symlink('{victim}', '/logs/verifier')\nexcept OSError: pass\n"
                        f"try: os.symlink('{victim}', '/tests')\nexcept OSError: pass")
    before = listing(victim)
    for _ in range(5):
        verification = run(agent_then_verify(make_task(), sandbox_options, [racer, "sleep 0.3"]))
        assert verification.grade.error is None and verification.grade.resolved is False
    assert listing(victim) == before
    assert (victim / "a.txt").read_text() == "keep me"


@pytest.mark.parametrize("shape", ["setsid-writer", "double-fork-daemon", "forker"])
def test_processes_left_behind_never_change_a_grade(make_task, sandbox_options, shape):
    """A writer that forges reward.json / test.sh the moment they appear: the verifier runs after it is killed."""
    forge = ("try:\n"
             "    open('/logs/verifier/reward.json', 'w').write('{\"reward\": 1}')\n"
             "    open('/tests/test.sh', 'w').write('echo 1 > /logs/verifier/reward.txt\\n')\n"
             "except Exception: pass")
    if shape == "setsid-writer":
        commands = [python_loop(forge)]
    elif shape == "double-fork-daemon":
        commands = [f"( ( {python_loop(forge)} ) & ) ; echo started"]
    else:  # keeps forking short-lived forgers, so killing one process at a time never catches up
        commands = [python_loop("if os.fork() == 0:\n" + "".join(f"        {line}\n" for line in forge.splitlines())
                                + "        os._exit(0)\n    try: os.waitpid(-1, os.WNOHANG)\n    except OSError: pass")]
    verification = run(agent_then_verify(make_task("forged"), sandbox_options, commands + ["sleep 0.3"]))
    assert verification.patch == ""
    assert verification.grade.resolved is False
    assert verification.grade.reward == 0.0


def test_verifier_planting_a_host_symlink_is_not_read(make_task, sandbox_options, tmp_path):
    host_reward = tmp_path / "host-reward.txt"
    host_reward.write_text("1")
    script = (f"rm -rf /logs/verifier/* ; ln -s {host_reward} /logs/verifier/reward.txt; "
              f"ln -s {tmp_path} /logs/verifier/reward.json 2>/dev/null; true\n")
    task = make_task("plants", files={"tests/test.sh": script})
    verification = run(agent_then_verify(task, sandbox_options, []))
    assert verification.grade.resolved is False
    assert verification.grade.error == "reward_invalid"
    assert "1" not in (verification.grade.detail or "").replace("reward", "")


def test_dockerfile_cannot_write_through_a_symlink_made_by_run(make_task, sandbox_options, tmp_path):
    target = tmp_path / "host-dir"
    target.mkdir()
    dockerfile = ("FROM python:3.11-slim\nWORKDIR /app\nCOPY repo/ /app/\n"
                  f"RUN ln -s {target} /app/link\nCOPY repo/calc.py /app/link/pwned.py\n")
    task = make_task("copy-through-link", files={"environment/Dockerfile": dockerfile})
    with pytest.raises(BuildError, match=r"Dockerfile:5: COPY to /app/link/pwned.py: .*symlink"):
        run(open_sandbox(task, sandbox_options))
    assert list(target.iterdir()) == []
    report = run(validate_suite(Suite(name="one", tasks=[task]), sandbox_options))
    assert report.invalid == 1 and "symlink" in report.tasks[0].error


def test_dockerfile_copy_replaces_a_planted_file_symlink_instead_of_following_it(make_task, sandbox_options,
                                                                                  tmp_path):
    host_file = tmp_path / "host-file.txt"
    host_file.write_text("host content")
    dockerfile = ("FROM python:3.11-slim\nWORKDIR /app\nCOPY repo/ /app/\n"
                  f"RUN ln -s {host_file} /app/calc2.py\nCOPY repo/calc.py /app/calc2.py\n")
    task = make_task("copy-over-link", files={"environment/Dockerfile": dockerfile})

    async def scenario():
        opened = await open_sandbox(task, sandbox_options)
        try:
            return await bash(opened.sandbox, "test -L calc2.py && echo LINK; cat calc2.py")
        finally:
            await opened.close()

    out = run(scenario())
    assert host_file.read_text() == "host content"
    assert "LINK" not in out and "return a - b" in out


def flood_task(make_task, name: str):
    flood = ("python3 -c 'import sys; sys.stdout.buffer.write(b\"\\x01\" * (8 * 1024 * 1024)); "
             "sys.stderr.buffer.write(b\"\\x01\" * (8 * 1024 * 1024))'\n")
    return make_task(name, files={"solution/solve.sh": "sed -i 's/a - b/a + b/' calc.py\n" + flood})


def test_flooding_solve_sh_and_a_non_utf8_dockerfile_do_not_stop_validation(make_task, sandbox_options, tmp_path):
    flood = flood_task(make_task, "flood")
    binary = make_task("binary-dockerfile")
    (binary.dockerfile).write_bytes(os.urandom(300).replace(b"\n", b"\xff") + b"\xff\xfe")
    good = make_task("good")
    report = run(validate_suite(Suite(name="mixed", tasks=[flood, binary, good]), sandbox_options))
    by_id = {t.task_id: t for t in report.tasks}
    assert by_id["good"].valid is True
    assert by_id["flood"].oracle_resolved is True  # the flood is capped, the task still grades
    assert by_id["binary-dockerfile"].valid is False
    assert "not UTF-8" in by_id["binary-dockerfile"].error


def test_protocol_cannot_be_reached_from_inside(make_task, sandbox_options):
    async def scenario():
        opened = await open_sandbox(make_task(), sandbox_options)
        try:
            # PID 1 is bubblewrap's init, PID 2 the tool runner: the only holders of anything the host reads.
            forged = await bash(opened.sandbox, "for p in /proc/1 /proc/2; do for f in 0 1 2 3 4 5 6 7; do "
                                "printf '{\"id\": 1, \"output\": \"FORGED\"}\\n[1]\\n' > $p/fd/$f 2>/dev/null "
                                "&& echo WROTE $p/fd/$f; done; done; echo done")
            after = await bash(opened.sandbox, "echo second")
            return forged, after
        finally:
            await opened.close()

    forged, after = run(scenario())
    assert forged.startswith("Exit code: 0") and "done" in forged
    assert "WROTE /proc/2/" not in forged  # the runner is non-dumpable: none of its fds can be opened
    # bubblewrap's init holds only /dev/null and the runner's stderr log: writable, but nothing the host parses.
    assert after.startswith("Exit code: 0") and "second" in after  # the protocol never went out of step


def test_filling_tmp_fails_the_filler_not_the_sandbox(make_task, sandbox_options):
    async def scenario():
        opened = await open_sandbox(make_task("filler", memory_mb=512), sandbox_options)
        try:
            first = await bash(opened.sandbox, "head -c 300M /dev/zero > /tmp/a; echo exit=$?", timeout=60)
            second = await bash(opened.sandbox, "head -c 600M /dev/zero > /tmp/b; echo exit=$?", timeout=60)
            alive = await bash(opened.sandbox, "echo alive")
            return first, second, alive
        finally:
            await opened.close()

    first, second, alive = run(scenario())
    assert "exit=1" in first or "exit=1" in second  # ENOSPC for the writer
    assert "No space left on device" in first + second
    assert "alive" in alive


def test_leftovers_of_dead_processes_are_removed_and_nothing_else(tmp_path):
    options = SandboxOptions(cache_dir=tmp_path / "cache", work_dir=tmp_path / "work")
    dead = subprocess.Popen([sys.executable, "-c", "from sandbox.shared.owner import identity; print(identity())"],
                            stdout=subprocess.PIPE, text=True, cwd=os.getcwd())
    dead_identity = dead.communicate()[0].strip()
    directories = {
        "dead-ws": options.work_dir / "leafcost-ws-task-dead",
        "live-ws": options.work_dir / "leafcost-ws-task-live",
        "no-owner": options.work_dir / "leafcost-ws-task-unknown",
        "dead-build": options.cache_dir / "envs" / ".building-abc-123",
    }
    for name, directory in directories.items():
        directory.mkdir(parents=True)
        (directory / "file").write_text("x")
        if name != "no-owner":
            owner = identity() if name == "live-ws" else dead_identity
            (directory / OWNER_FILE).write_text(json.dumps({"owner": owner}))
    removed = remove_leftovers(options)
    assert sorted(removed) == sorted([str(directories["dead-ws"]), str(directories["dead-build"])])
    assert directories["live-ws"].exists() and directories["no-owner"].exists()
    assert not directories["dead-ws"].exists() and not directories["dead-build"].exists()
