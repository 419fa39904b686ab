"""Harbor grading and Leaf's patch capture, including every way a verifier or a build can go wrong."""

from __future__ import annotations

import asyncio
import hashlib

import pytest

from compare.validate import validate_task
from conftest import exec_once
from sandbox import BuildError, LocalSandbox, build_environment, open_sandbox, run_oracle, verify, write_file
from sandbox.grading import capture_patch
from sandbox.local.commands import CommandSandbox
from sandbox.protocol import WRITE_CAP_BYTES
from sandbox.shared import git_safe


def run(coro):
    return asyncio.run(coro)


async def graded(task, options, before=None, solution=False):
    opened = await open_sandbox(task, options, solution=solution)
    try:
        if before:
            await before(opened.sandbox)
        return (await verify(opened, task, capture=False)).grade
    finally:
        await opened.close()


def test_oracle_resolves_and_empty_run_does_not(make_task, sandbox_options):
    task = make_task()
    assert run(graded(task, sandbox_options)).resolved is False

    async def oracle(sandbox):
        result = await run_oracle(sandbox, task)
        assert result.ok

    result = run(graded(task, sandbox_options, oracle, solution=True))
    assert result.resolved is True and result.reward == 1.0 and result.error is None


def test_hanging_verifier_is_a_timeout_error_not_a_miss(make_task, sandbox_options):
    task = make_task("hangs", verifier_timeout=2, files={"tests/test.sh": "sleep 600\n"})
    result = run(graded(task, sandbox_options))
    assert result.error == "verifier_timeout"
    assert result.resolved is False and result.reward is None


@pytest.mark.parametrize("document, resolved, reward", [
    ('{"correctness": 1.0, "style": 1.0}', True, 1.0),  # Harbor: several keys, no `reward`: every key counts
    ('{"correctness": 1.0, "style": 0.5}', False, 0.5),
    ('{"reward": 1, "style": 0}', True, 1.0),  # a `reward` key decides alone
])
@pytest.mark.slow
def test_reward_json_with_several_keys_as_harbor_writes_it(make_task, sandbox_options, document, resolved, reward):
    script = f"echo '{document}' > /logs/verifier/reward.json\n"
    opened_result = run(graded(make_task("multi", files={"tests/test.sh": script}), sandbox_options))
    assert (opened_result.resolved, opened_result.reward, opened_result.error) == (resolved, reward, None)


@pytest.mark.parametrize("script, error", [
    ("echo 'all good!' > /logs/verifier/reward.txt\n", "reward_invalid"),
    ("echo '{\"score\": \"high\"}' > /logs/verifier/reward.json\n", "reward_invalid"),
    ("echo '{}' > /logs/verifier/reward.json\n", "reward_invalid"),
    ("echo '[1]' > /logs/verifier/reward.json\n", "reward_invalid"),
    ("ln -s /etc/hostname /logs/verifier/reward.json\n", "reward_invalid"),
    ("printf '\\xff\\xfe' > /logs/verifier/reward.txt\n", "reward_invalid"),
    ("echo NaN > /logs/verifier/reward.txt\n", "reward_invalid"),
    ("mkfifo /logs/verifier/reward.txt\n", "reward_invalid"),
    ("echo the tests ran but wrote nothing\n", "reward_missing"),
])
@pytest.mark.slow
def test_garbage_or_missing_reward_is_an_error(make_task, sandbox_options, script, error):
    result = run(graded(make_task("garbage", files={"tests/test.sh": script}), sandbox_options))
    assert result.error == error
    assert result.resolved is False and result.reward is None
    assert result.detail


def test_reward_json_and_partial_reward(make_task, sandbox_options):
    full = make_task("full", files={"tests/test.sh": "echo '{\"reward\": 1.0}' > /logs/verifier/reward.json\n"})
    half = make_task("half", files={"tests/test.sh": "echo 0.5 > /logs/verifier/reward.txt\n"})
    assert run(graded(full, sandbox_options)).resolved is True
    partial = run(graded(half, sandbox_options))
    assert partial.reward == 0.5 and partial.resolved is False and partial.error is None


def test_agent_cannot_point_the_host_at_its_files(make_task, sandbox_options, tmp_path):
    """A symlink planted where the host later writes (/logs/verifier, /tests) must not be followed."""
    victim = tmp_path / "host-dir"
    victim.mkdir()
    (victim / "precious.txt").write_text("keep me")

    async def plant(sandbox):
        await sandbox.exec(f"rm -rf /logs/verifier /tests; ln -s {victim} /logs/verifier; "
                           f"ln -s {victim}/precious.txt /tests/test.sh; ln -s {victim} logs", timeout=10)

    result = run(graded(make_task(), sandbox_options, plant))
    assert (victim / "precious.txt").read_text() == "keep me"
    assert result.error is None and result.resolved is False


def test_hidden_tests_and_solution_are_invisible_to_the_agent(make_task, sandbox_options):
    async def scenario():
        opened = await open_sandbox(make_task(), sandbox_options)
        try:
            return await opened.sandbox.run_tool("Bash", {"command": "ls -A /tests /solution; cat /tests/* 2>&1"})
        finally:
            await opened.close()

    listing = run(scenario())
    assert "test.sh" not in listing and "solve.sh" not in listing


@pytest.mark.slow
def test_patch_capture_is_leafs_and_resets_the_index(make_task, sandbox_options):
    async def scenario():
        opened = await open_sandbox(make_task(), sandbox_options)
        try:
            sandbox = opened.sandbox
            await sandbox.run_tool("Edit", {"file_path": "calc.py", "old_string": "a - b", "new_string": "a + b"})
            await sandbox.run_tool("Write", {"file_path": "blob.bin", "content": "x"})
            await sandbox.exec("printf '\\x00\\x01' > blob.bin", timeout=10)
            patch, error = await capture_patch(sandbox, opened.git_baseline)
            assert error is None
            staged = await sandbox.exec("git diff --cached --name-only", timeout=10)
            unstaged = await sandbox.exec("git status --porcelain", timeout=10)
        finally:
            await opened.close()
        return patch, staged.stdout, unstaged.stdout

    patch, staged, status = run(scenario())
    assert "-    return a - b\n+    return a + b" in patch
    assert "GIT binary patch" in patch and "blob.bin" in patch
    assert staged == ""  # index reset, as Leaf does
    assert " M calc.py" in status and "?? blob.bin" in status


def test_an_episode_starts_one_runner_then_one_verifier_command(make_task, sandbox_options, monkeypatch):
    """The agent's sandbox (with the tool runner), then, once every agent process is killed, the verifier's: patch
    capture, restore and stage (the harness's own git), then test.sh, in one command: a fresh bubblewrap without a
    runner over the same files, with the task's tests at /tests."""
    task = make_task()
    run(build_environment(task, sandbox_options))  # the build's own sandbox is not the episode's
    started = []
    start = LocalSandbox.start.__func__

    async def counted(cls, *args, **kwargs):
        started.append(await start(cls, *args, **kwargs))
        return started[-1]

    monkeypatch.setattr(LocalSandbox, "start", classmethod(counted))
    commands = []
    execute = CommandSandbox._exec

    async def recorded(self, command, *args):
        commands.append((command, started[0].alive))
        return await execute(self, command, *args)

    monkeypatch.setattr(CommandSandbox, "_exec", recorded)

    async def scenario():
        opened = await open_sandbox(task, sandbox_options)
        try:
            await opened.sandbox.run_tool("Edit", {"file_path": "calc.py", "old_string": "a - b",
                                                   "new_string": "a + b"})
            agent = opened.sandbox
            return agent, await verify(opened, task)
        finally:
            await opened.close()

    agent, verification = run(scenario())
    assert len(started) == 1 and started[0] is agent and not agent.alive
    assert [alive for _, alive in commands] == [False]  # after every agent process is gone
    shell, command = commands[0][0][:2], commands[0][0][2]
    assert shell == ["/bin/sh", "-c"]  # the harness's own script
    assert "read-tree" in command and "restore=" in command and command.rstrip().endswith(" bash /tests/test.sh")
    assert command.index("restore=") < command.index("add -A", command.index("restore=")) \
        < command.index("bash /tests/test.sh")  # the stage after the restore, test.sh last
    assert "+    return a + b" in verification.patch and verification.grade.resolved


def test_a_git_config_too_long_for_a_command_line_is_restored_through_a_file(make_task, sandbox_options):
    """The restore carries the usual config in its own command line; one over INLINE_CONFIG_CHARS is written in a
    file first. Either way test.sh sees the config as it was before the agent."""
    lines = git_safe.INLINE_CONFIG_CHARS // 30
    dockerfile = ("FROM python:3.11-slim\nWORKDIR /app\nCOPY repo/ /app/\n"
                  "RUN git init -q && for i in $(seq %d); do printf '\\tk%%s = %%s\\n' $i "
                  "vvvvvvvvvvvvvvvvvvvvvv; done > /tmp/keys && { echo '[leafcost]'; cat /tmp/keys; } >> .git/config "
                  "&& git -c user.name=t -c user.email=t@t add -A && git -c user.name=t -c user.email=t@t "
                  "commit -qm base\n" % lines)
    test_sh = ("#!/bin/bash\ncd /app\n"
               f"if [ \"$(git config leafcost.k1)$(git config leafcost.k{lines})\" = {'v' * 44} ] && "
               "[ -z \"$(git config core.pager)\" ]; then echo 1; else echo 0; fi > /logs/verifier/reward.txt\n")
    task = make_task("big-config", files={"environment/Dockerfile": dockerfile, "tests/test.sh": test_sh})

    async def scenario():
        opened = await open_sandbox(task, sandbox_options)
        try:
            assert not git_safe.config_inline(opened.git_baseline)
            changed = await opened.sandbox.exec("git config core.pager evil && git config --unset leafcost.k1",
                                                timeout=30)
            assert changed.ok, changed.stderr
            return await verify(opened, task)
        finally:
            await opened.close()

    verification = run(scenario())
    assert verification.grade.error is None and verification.grade.resolved


def test_failing_run_step_is_a_build_error_naming_the_line(make_task, sandbox_options):
    dockerfile = "FROM python:3.11\nWORKDIR /app\nCOPY repo/ /app/\nRUN echo building && exit 3\n"
    task = make_task("bad-build", files={"environment/Dockerfile": dockerfile})
    with pytest.raises(BuildError, match=r"task bad-build: Dockerfile:4: RUN .* failed with exit code 3"):
        run(open_sandbox(task, sandbox_options))


def test_build_replays_env_workdir_and_run_and_caches(make_task, sandbox_options):
    dockerfile = ("FROM python:3.11\nARG FLAVOUR=mild\nENV GREETING=\"hello ${FLAVOUR}\"\nWORKDIR /srv/project\n"
                  "COPY repo/ ./\nRUN echo \"$GREETING\" > built.txt\nEXPOSE 8000\n")
    task = make_task("replay", files={"environment/Dockerfile": dockerfile})

    async def scenario():
        first = await open_sandbox(task, sandbox_options)
        try:
            out = await first.sandbox.run_tool("Bash", {"command": "pwd; cat built.txt; echo $GREETING"})
        finally:
            await first.close()
        second = await open_sandbox(task, sandbox_options)
        await second.close()
        return first, second, out

    first, second, out = run(scenario())
    assert "/srv/project\nhello mild\nhello mild" in out
    assert first.built.from_image == "python:3.11"
    assert first.built.ignored_instructions == ["7: EXPOSE 8000"]
    assert first.built.cache_hit is False and second.built.cache_hit is True


def test_copy_into_the_base_root_is_refused(make_task, sandbox_options):
    dockerfile = "FROM python:3.11\nWORKDIR /app\nCOPY repo/calc.py /usr/local/lib/\n"
    task = make_task("into-usr", files={"environment/Dockerfile": dockerfile})
    with pytest.raises(BuildError, match=r"Dockerfile:3: COPY into /usr/local/lib/? is not supported"):
        run(open_sandbox(task, sandbox_options))


@pytest.mark.slow
def test_validate_flags_tasks_that_prove_nothing(make_task, sandbox_options):
    always = make_task("always-passes", files={"tests/test.sh": "echo 1 > /logs/verifier/reward.txt\n"})
    broken_oracle = make_task("bad-oracle", files={"solution/solve.sh": "exit 4\n"})
    good = run(validate_task(make_task("good"), sandbox_options))
    trivial = run(validate_task(always, sandbox_options))
    unsolved = run(validate_task(broken_oracle, sandbox_options))
    assert good.valid and good.oracle_resolved is True and good.empty_resolved is False and good.error is None
    assert not trivial.valid and trivial.empty_resolved is True and "already passes" in trivial.error
    assert not unsolved.valid and unsolved.oracle_resolved is False and "solve.sh exited 4" in unsolved.error


def test_grading_never_runs_stale_bytecode(make_task, sandbox_options):
    """An edit of the same size within the same second as an earlier import must still be graded as edited."""
    async def edit_after_import(sandbox):
        await sandbox.exec("python3 -c 'import calc'", timeout=30)  # leaves __pycache__/calc.*.pyc behind
        fixed = await sandbox.exec("m=$(stat -c %Y calc.py); sed -i 's/a - b/a + b/' calc.py; touch -d @$m calc.py",
                                   timeout=30)
        assert fixed.ok

    assert run(graded(make_task("stale-pyc"), sandbox_options, edit_after_import)).resolved is True


def test_copy_to_a_top_level_path_makes_a_file_as_docker_does(make_task, sandbox_options):
    dockerfile = ("FROM python:3.11\nWORKDIR /app\nCOPY repo/ /app/\nCOPY repo/calc.py /calc-copy.py\n"
                  "RUN test -f /calc-copy.py && chmod 640 /calc-copy.py\n")
    task = make_task("top-file", files={"environment/Dockerfile": dockerfile})

    result = run(exec_once(task, sandbox_options, "stat -c '%F %a' /calc-copy.py && head -1 /calc-copy.py"))
    assert result.stdout.splitlines() == ["regular file 640", "def add(a, b):"], result.stderr


def test_task_toml_workdir_and_env_reach_the_agent_locally(make_task, sandbox_options):
    task = make_task("workdir-env", files={"environment/Dockerfile": "FROM python:3.11\nCOPY repo/ /srv/work/\n"})
    task.config.environment.workdir = "/srv/work"
    task.config.environment.env = {"GREETING": "hi from task.toml"}

    result = run(exec_once(task, sandbox_options, "pwd; ls; echo $GREETING"))
    assert result.stdout == "/srv/work\ncalc.py\nhi from task.toml\n", result.stderr


def test_verifier_env_takes_host_variables_as_harbor_does_and_a_missing_one_is_a_task_error(make_task,
                                                                                            sandbox_options,
                                                                                            monkeypatch):
    test_sh = ("#!/bin/bash\nmkdir -p /logs/verifier\n"
               "if [ \"$JUDGE_KEY:$MODEL\" = 'sk-judge:haiku' ]; then echo 1; else echo 0; fi "
               "> /logs/verifier/reward.txt\n")
    task = make_task("judge", files={"tests/test.sh": test_sh})
    task.config.verifier.env = {"JUDGE_KEY": "${LEAFCOST_TEST_JUDGE_KEY}", "MODEL": "${LEAFCOST_TEST_MODEL:-haiku}"}
    monkeypatch.setenv("LEAFCOST_TEST_JUDGE_KEY", "sk-judge")
    monkeypatch.delenv("LEAFCOST_TEST_MODEL", raising=False)
    assert run(graded(task, sandbox_options)).resolved is True
    monkeypatch.delenv("LEAFCOST_TEST_JUDGE_KEY")
    with pytest.raises(BuildError, match=r"verifier.env.JUDGE_KEY = .*: set LEAFCOST_TEST_JUDGE_KEY"):
        run(graded(task, sandbox_options))


@pytest.mark.slow
@pytest.mark.parametrize("backend", ["local", "podman"])
def test_write_file_puts_bytes_in_any_backend_without_a_host_path(backend, make_task, sandbox_options, request):
    if backend == "podman":
        request.getfixturevalue("container_images")
    options = sandbox_options.model_copy(update={"backend": backend})
    # Several command-line pieces (a SWE-bench prediction can be large), with bytes a shell would interpret.
    data = (bytes(range(256)) * 64 + b"'; rm -rf / #\n$(true)") * 13
    task = make_task(f"write-{backend}")

    async def scenario():
        opened = await open_sandbox(task, options)
        try:
            await write_file(opened.sandbox, "/app/it's here.bin", data)
            digest = await opened.sandbox.exec("sha256sum \"it's here.bin\" | cut -c1-64", timeout=30)
            with pytest.raises(ValueError, match="at most"):
                await write_file(opened.sandbox, "/app/big", b"x" * (WRITE_CAP_BYTES + 1))
            return digest.stdout.strip()
        finally:
            await opened.close()

    assert run(scenario()) == hashlib.sha256(data).hexdigest()
