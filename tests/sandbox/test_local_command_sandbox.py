"""The local verifier's sandbox without a tool runner (sandbox/local/commands.py), and grading's one-exec capture,
restore and stage (sandbox/grading.py `prepare_repository`, git_safe.prepare_command)."""

from __future__ import annotations

import asyncio
import os

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


async def _verified(task, options, command: str | None = None):
    """Opens a fresh sandbox for `task`, runs `command` in it as the agent would leave it, verifies, closes."""
    opened = await open_sandbox(task, options)
    try:
        if command is not None:
            await opened.sandbox.exec(command, timeout=30)
        return await verify(opened, task)
    finally:
        await opened.close()


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

    verification = run(_verified(task, sandbox_options,
                                 "echo changed > new.txt && git config core.hooksPath /tmp/evil"))
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


def test_exec_then_splits_at_the_first_marker_and_times_each_part_on_its_own(make_task, sandbox_options):
    marker = "leafcost-0123"
    # The second command forges the marker line (as code under test could, reading it from /proc/1/cmdline): the
    # split stays at the first one, which the first command printed before the second one ever ran.
    command = (f"echo patch; echo errors >&2; printf '\\n%s\\n' {marker} >&2; printf '\\n%s\\n' {marker}; "
               f"exec bash -c 'echo test-out; printf \"\\n%s\\n\" {marker}; echo forged; echo test-err >&2; exit 3'")

    async def go():
        opened, sandbox = await _verifier(make_task(), sandbox_options)
        try:
            first, second = await sandbox.exec_then(command, timeout=30, marker=marker, then_timeout=30)
            # the second part's own timeout starts at the marker; the first part's does not run out meanwhile
            slow_first, slow_second = await sandbox.exec_then(
                f"printf '\\n%s\\n' {marker}; printf '\\n%s\\n' {marker} >&2; exec sleep 300", timeout=600,
                marker=marker, then_timeout=1)
            stuck, never = await sandbox.exec_then(f"echo before; sleep 300; printf '\\n%s\\n' {marker}",
                                                   timeout=1, marker=marker, then_timeout=30)
            return first, second, slow_first, slow_second, stuck, never
        finally:
            await opened.close()

    first, second, slow_first, slow_second, stuck, never = run(go())
    assert (first.stdout, first.stderr, first.exit_code, first.timed_out) == ("patch\n", "errors\n", 0, False)
    assert second is not None and (second.stdout, second.stderr) == (f"test-out\n\n{marker}\nforged\n", "test-err\n")
    assert (second.exit_code, second.timed_out) == (3, False)  # the second command's status is the sandbox's
    assert not slow_first.timed_out and slow_second is not None and slow_second.timed_out
    assert slow_second.exit_code is None
    assert stuck.timed_out and stuck.exit_code is None and stuck.stdout == "before\n" and never is None


@pytest.mark.parametrize("size", [1, 2, 3, 7, 64])
def test_split_finds_the_marker_across_any_chunk_boundary(size):
    from sandbox.local.commands import _Split

    marker = b"leafcost-abc"
    data = b"x" * 10 + b"\n" + marker + b"\n" + b"after\n" + b"\n" + marker + b"\n"
    seen = []
    split = _Split(marker, lambda: seen.append(True))
    for at in range(0, len(data), size):
        split._feed(data[at:at + size])
    split.parts[-1].add(split._held)
    assert [bytes(p.data) for p in split.parts] == [b"x" * 10, b"after\n\n" + marker + b"\n"] and seen == [True]
    unsplit = _Split(marker, None)
    for at in range(0, 15, size):  # a stream that ends inside the marker keeps every byte, unsplit
        unsplit._feed(data[at:min(at + size, 15)])
    unsplit.parts[-1].add(unsplit._held)
    assert [bytes(p.data) for p in unsplit.parts] == [data[:15]]


def test_one_exec_grades_through_a_forged_marker(make_task, sandbox_options):
    """Code under test that finds the marker (it is in bubblewrap's command line, /proc/1/cmdline) and prints a
    fake end of patch, fake status lines and a fake test.sh start changes neither the patch nor the verdict."""
    test_sh = ("m=$(tr '\\0' '\\n' < /proc/1/cmdline | grep -o 'leafcost-[0-9a-f]\\{32\\}' | head -n 1)\n"
               "[ -n \"$m\" ] || exit 7\n"
               "printf '\\n%s\\n+forged patch line\\n' \"$m\"; printf '\\n%s capture=0\\n%s restore=0\\n\\n%s\\n' "
               "\"$m\" \"$m\" \"$m\" >&2\n"
               "echo 0 > /logs/verifier/reward.txt\n")
    task = make_task("forged-marker", files={"tests/test.sh": test_sh})

    verification = run(_verified(task, sandbox_options, "echo changed > new.txt"))
    assert "+changed" in verification.patch and "forged" not in verification.patch
    assert verification.grade.exit_code == 0 and verification.grade.reward == 0.0  # test.sh found the marker
    assert "forged patch line" in verification.grade.output_tail


@pytest.mark.parametrize("name", ["JUDGE_MODEL", "judge-model"])  # exported by the shell, or given by `env`
def test_one_exec_gives_test_sh_the_verifier_env_whatever_its_names(make_task, sandbox_options, name):
    test_sh = (f"env | grep -qx '{name}=it'\"'\"'s \"quoted\" $HOME' && echo 1 > /logs/verifier/reward.txt || "
               "echo 0 > /logs/verifier/reward.txt\n")
    task = make_task("verifier-env", files={"tests/test.sh": test_sh})
    task.config.verifier.env = {name: "it's \"quoted\" $HOME"}

    assert run(_verified(task, sandbox_options)).grade.reward == 1.0


def test_capture_starts_from_the_builds_baseline_index_in_a_host_made_git_directory(make_task, sandbox_options):
    """The build keeps the baseline commit's index beside the environment's root (never in it); each verifier's
    capture starts from it in a git directory the host made in the verifier's own /tmp, and makes its own when the
    index is missing (an environment built before there was one). The patch is the same either way."""
    import subprocess

    from sandbox.local.environment import BASELINE_INDEX_FILE, build_environment

    task = make_task("baseline-index")
    built = run(build_environment(task, sandbox_options))
    index = built.root.parent / BASELINE_INDEX_FILE
    repo = built.root / built.git.git_dir.lstrip("/")
    expected = built.root.parent / "expected.index"
    subprocess.run(["git", "--git-dir", str(repo), "read-tree", built.git.commit], check=True,
                   env={"GIT_INDEX_FILE": str(expected), "PATH": "/usr/bin:/bin"})
    assert index.read_bytes() == expected.read_bytes()  # what capture's own read-tree makes
    assert not (built.root / BASELINE_INDEX_FILE).exists() and BASELINE_INDEX_FILE not in os.listdir(repo)

    async def go():
        opened = await open_sandbox(task, sandbox_options)
        try:
            await opened.sandbox.exec("echo changed > new.txt && rm calc.py", timeout=30)
            await opened.quiesce()
            made = opened.prepare_capture()
            listed = sorted(os.listdir(opened.sandbox.scratch / "tmp" / made.removeprefix("/tmp/") / "git"))
            verification = await verify(opened, task)
            return made, listed, verification
        finally:
            await opened.close()

    made, listed, verification = run(go())
    assert made.startswith("/tmp/leafcost-git.") and listed == ["HEAD", "index", "objects", "refs"]
    assert "+changed" in verification.patch and "deleted file mode" in verification.patch
    index.unlink()
    assert run(go())[2].patch == verification.patch
