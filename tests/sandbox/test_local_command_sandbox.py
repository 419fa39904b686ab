"""The local verifier's sandbox without a tool runner (sandbox/local/commands.py), and grading's one-exec capture,
restore and stage (sandbox/grading.py `prepare_repository`, git_safe.prepare_command)."""

from __future__ import annotations

import asyncio

import pytest

from sandbox import open_sandbox, verify
from sandbox.local.commands import CommandSandbox
from sandbox.protocol import GitBaseline, SandboxError, write_file
from sandbox.shared import git_safe


def run(coro):
    return asyncio.run(coro)


async def _verifier(task, options) -> tuple[object, CommandSandbox]:
    opened = await open_sandbox(task, options)
    await opened.quiesce()
    assert isinstance(opened.sandbox, CommandSandbox)
    return opened, opened.sandbox


def test_each_command_is_its_own_sandbox_and_takes_its_processes_with_it(make_task, sandbox_options):
    async def go():
        opened, sandbox = await _verifier(make_task(), sandbox_options)
        try:
            first = await sandbox.exec("sleep 300 & echo $$ > /tmp/pid; echo out; echo err >&2", timeout=30)
            assert (first.exit_code, first.stdout, first.stderr, first.timed_out) == (0, "out\n", "err\n", False)
            # /tmp is the verifier's for all its commands; the background sleep ended with its command
            second = await sandbox.exec("cat /tmp/pid; ps -e -o comm= | grep -c sleep || true", timeout=30)
            assert second.stdout.splitlines()[1] == "0"
            killed = await sandbox.exec("kill -9 $$", timeout=30)
            assert killed.exit_code == 128 + 9  # from bubblewrap on the host, as a container engine reports it
            with pytest.raises(SandboxError):
                await sandbox.run_tool("Bash", {"command": "true"})
            with pytest.raises(SandboxError):
                await sandbox.exec("true", timeout=5, user="root")
        finally:
            await opened.close()
        assert sandbox.closed and not sandbox.alive

    run(go())


def test_timeout_kills_the_command_and_keeps_what_it_wrote(make_task, sandbox_options):
    async def go():
        opened, sandbox = await _verifier(make_task(), sandbox_options)
        try:
            result = await sandbox.exec("echo started; sleep 300", timeout=1)
            assert result.timed_out and result.exit_code is None and result.stdout == "started\n"
            assert (await sandbox.exec("echo $FOO $PWD", timeout=30, env={"FOO": "bar"}, cwd="/tmp")).stdout \
                == "bar /tmp\n"
        finally:
            await opened.close()

    run(go())


def test_output_is_capped_and_the_rest_counted(make_task, sandbox_options, monkeypatch):
    import sandbox.local.commands as commands

    monkeypatch.setattr(commands, "STREAM_CAP_BYTES", 1000)

    async def go():
        opened, sandbox = await _verifier(make_task(), sandbox_options)
        try:
            result = await sandbox.exec("head -c 5000 /dev/zero | tr '\\0' a", timeout=30)
            assert len(result.stdout) == 1000 and result.truncated_bytes == 4000
        finally:
            await opened.close()

    run(go())


def test_write_file_then_exec_sees_it(make_task, sandbox_options):
    async def go():
        opened, sandbox = await _verifier(make_task(), sandbox_options)
        try:
            await write_file(sandbox, "/tmp/config", b"x" * 100_000)
            assert (await sandbox.exec("wc -c < /tmp/config", timeout=30)).stdout.strip() == "100000"
        finally:
            await opened.close()

    run(go())


def test_one_exec_capture_gives_the_same_patch_and_grade(make_task, sandbox_options):
    """The agent's change is in the patch, the repository's config is put back and staged, test.sh grades it."""
    test_sh = "cd /app && git diff --cached --quiet && echo 0 > /logs/verifier/reward.txt || " \
              "echo 1 > /logs/verifier/reward.txt\n"
    task = make_task("one-exec", files={"tests/test.sh": test_sh})

    async def go():
        opened = await open_sandbox(task, sandbox_options)
        try:
            await opened.sandbox.exec("echo changed > new.txt && git config core.hooksPath /tmp/evil", timeout=30)
            return await verify(opened, task)
        finally:
            await opened.close()

    verification = run(go())
    assert "+changed" in verification.patch and verification.patch_error is None
    assert verification.grade.reward == 1.0 and verification.grade.error is None  # staged before test.sh


def test_prepared_parts_reads_back_each_part():
    marker = "leafcost-m"
    assert git_safe.prepared_parts(f"oops\n\n{marker} capture=0\nrestored\n{marker} restore=0\n", marker) \
        == ("oops\n", 0, "restored\n", 0)
    assert git_safe.prepared_parts(f"\n{marker} capture=3\n", marker) == ("", 3, "", None)
    assert git_safe.prepared_parts("killed before the marker", marker) == ("killed before the marker", None, "", None)


def test_prepare_command_carries_the_same_scripts():
    baseline = GitBaseline(commit="c0ffee", workdir="/app", top="/app", git_dir="/app/.git", config_b64="eA==")
    command = git_safe.prepare_command(baseline, "leafcost-m")
    for script in (git_safe._CAPTURE, git_safe._RESTORE, git_safe._STAGE):  # quoted inside: lines without quotes
        assert all(line in command for line in script.splitlines() if "'" not in line)
    assert command.startswith("env -i ") and "add -A" in command.rsplit("restore=%s", 1)[1]
