"""The container backend against a real Podman: real images built from Dockerfiles, real containers, files in and
out only through the engine. The base images come from Debian's packages (no registry is reachable here)."""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
import uuid
from pathlib import Path

import pytest

from compare.validate import validate_task
from conftest import exec_once
from sandbox import BuildError, SandboxOptions, load_harbor_task, open_sandbox, run_oracle, verify
from sandbox.container.containers import remove_container_leftovers
from sandbox.container.engine import engine
from sandbox.grading import REWARD_CAP_BYTES

FIXTURES = Path(__file__).resolve().parent.parent / "fixtures" / "harbor"
LEAFCOST = Path(sys.executable).with_name("leafcost")


def run(coro):
    return asyncio.run(coro)


@pytest.fixture(scope="module")
def podman(container_images, tmp_path_factory) -> SandboxOptions:
    return SandboxOptions(backend="podman", cache_dir=tmp_path_factory.mktemp("podman-cache"))


def podman_json(*args: str):
    return json.loads(subprocess.run(engine("podman").command(*args), capture_output=True, check=True).stdout)


async def graded(task, options, before=None, *, solution=False, labels=None):
    opened = await open_sandbox(task, options, solution=solution, labels=labels)
    try:
        if before:
            await before(opened)
        return (await verify(opened, task)), opened
    finally:
        await opened.close()


def test_harbor_fixtures_validate_through_podman_and_a_gpu_task_is_refused(podman, tmp_path):
    """Every Dockerfile feature and task.toml field the fixtures exercise (apt-get and useradd as root, a
    multi-stage build with COPY --from, an ENTRYPOINT with a healthcheck, a separate verifier, a multi-key
    reward, task.toml's workdir and env, an unknown key) works through the engine, via the CLI as a user runs it."""
    result = subprocess.run([str(LEAFCOST), "validate", str(FIXTURES), "--backend", "podman", "--json"],
                            capture_output=True, text=True, timeout=1800, cwd=tmp_path)
    report = json.loads(result.stdout)
    verdicts = {task["task_id"]: (task["valid"], task["error"]) for task in report["tasks"]}
    expected = {"apt-user", "compose-service", "copy-top-file", "healthcheck", "multi-reward", "multi-stage",
                "separate-verifier", "unknown-key", "workdir-env"}
    assert {name for name, (valid, _) in verdicts.items() if valid} == expected, verdicts
    assert "environment.gpus = 1 is not supported" in verdicts["gpu-task"][1]
    assert "task unknown-key: task.toml keys Harbor does not know, ignored: environment.colour, owner" in result.stderr
    assert result.returncode == 1  # the GPU task is invalid here


def test_the_agent_runs_as_agent_user_with_task_env_and_never_sees_the_verifiers(podman):
    task = load_harbor_task(FIXTURES / "workdir-env")
    user_task = load_harbor_task(FIXTURES / "apt-user")

    async def who_am_i():
        opened = await open_sandbox(user_task, podman)
        try:
            return await opened.sandbox.run_tool("Bash", {"command": "id -un; pwd"})
        finally:
            await opened.close()

    who = run(who_am_i())
    env = run(exec_once(task, podman, "pwd; echo \"$GREETING\"; echo \"${SECRET_FOR_TESTS:-absent}\""))
    assert "STDOUT:\nagent\n/home/agent/work\n" in who
    assert env.stdout.splitlines() == ["/srv/work", "hi", "absent"]


def test_forged_rewards_planted_links_and_leftover_processes_do_not_reach_the_verdict(podman, make_task):
    """The agent (root in its container) plants a reward, replaces /tests with a link and /logs with a
    file, and leaves a process that rewrites the reward forever: the verifier's own 0 is what counts."""
    task = make_task("forger", files={"tests/test.sh": "mkdir -p /logs/verifier\necho 0 > /logs/verifier/reward.txt\n"})

    async def forge(opened):
        script = ("rm -rf /tests && ln -s /etc /tests && rm -rf /logs && echo 1 > /logs && "
                  "(while true; do [ -d /logs ] && mkdir -p /logs/verifier && echo 1 > /logs/verifier/reward.txt; "
                  "sleep 0.05; done) >/dev/null 2>&1 & echo planted")
        assert "planted" in await opened.sandbox.run_tool("Bash", {"command": script})

    verification, _ = run(graded(task, podman, forge))
    assert verification.grade.reward == 0.0 and verification.grade.resolved is False


def test_oversized_and_linked_rewards_are_refused(podman, make_task):
    big = make_task("big-reward", files={"tests/test.sh": f"mkdir -p /logs/verifier\nhead -c {REWARD_CAP_BYTES + 10} "
                                                          "/dev/zero | tr '\\0' 1 > /logs/verifier/reward.txt\n"})
    # The engine resolves a link inside the container's own root (never the host's): what it points at must be
    # a regular file.
    link = make_task("link-reward", files={"tests/test.sh": "mkdir -p /logs/verifier\nmkfifo /tmp/fifo\n"
                                                            "ln -s /tmp/fifo /logs/verifier/reward.txt\n"})
    big_grade = run(graded(big, podman))[0].grade
    link_grade = run(graded(link, podman))[0].grade
    assert big_grade.error == "reward_invalid" and "larger than" in big_grade.detail
    assert link_grade.error == "reward_invalid" and "not a regular file" in link_grade.detail


def test_the_oracle_resolves_in_a_container_labelled_for_its_attempt_and_the_patch_is_captured(podman, make_task):
    task = make_task("labelled")
    labels = {"leafcost.run": "run-1", "leafcost.arm": "oracle", "leafcost.task": "labelled",
              "leafcost.seed": "0", "leafcost.attempt": "1"}
    seen = {}

    async def oracle(opened):
        inspected = podman_json("inspect", opened.sandbox.container)[0]
        seen["labels"], seen["host"] = inspected["Config"]["Labels"], inspected["HostConfig"]
        seen["nets"] = (await opened.sandbox.exec("ls /sys/class/net", timeout=30)).stdout.split()
        assert (await run_oracle(opened.sandbox, task)).ok
        await opened.sandbox.run_tool("Bash", {"command": "for i in $(seq 300000); do :; done"})

    verification, opened = run(graded(task, podman, oracle, solution=True, labels=labels))
    assert verification.grade.resolved is True
    assert "-    return a - b\n+    return a + b" in verification.patch
    assert {k: seen["labels"][k] for k in labels} == labels and seen["labels"]["leafcost"] == "1"
    assert seen["host"]["Memory"] == 512 * 1024 * 1024 and seen["host"]["PidsLimit"] == 256
    assert seen["nets"] == ["lo"]  # allow_internet = false
    assert opened.cpu_seconds() is not None and opened.cpu_seconds() > 0
    assert opened.spec.image.startswith("sha256:") and opened.spec.backend == "podman"
    assert subprocess.run(engine("podman").command("ps", "-a", "-q", "--filter", "label=leafcost.run=run-1"),
                          capture_output=True, text=True).stdout.strip() == ""  # removed at close


def test_a_python_less_image_validates_but_cannot_host_the_agents_tools(podman, tmp_path):
    task = load_harbor_task(FIXTURES / "copy-top-file")

    async def scenario():
        opened = await open_sandbox(task, podman)
        try:
            await opened.sandbox.run_tool("Bash", {"command": "true"})
        finally:
            await opened.close()

    with pytest.raises(BuildError, match="has no python3, which leafcost's tool runner needs"):
        run(scenario())


def test_images_that_cannot_be_had_fail_in_one_line_naming_the_cause(podman, make_task):
    missing = make_task("missing-image", files={"environment/Dockerfile": "FROM localhost/no-such-image:1\n"})
    broken = make_task("broken-build", files={
        "environment/Dockerfile": "FROM python:3.11-slim\nRUN echo building; exit 3\n"})
    named = make_task("named-image")
    named.config.environment.docker_image = "localhost/leafcost-absent:latest"
    results = [run(validate_task(task, podman)) for task in (missing, broken, named)]
    assert "image localhost/no-such-image:1: not on this machine and the registry is unreachable" in results[0].error
    assert "image localhost/leafcost-absent:latest: not on this machine" in results[2].error
    assert "\n" not in results[0].error and "\n" not in results[2].error
    # a failed build: one line on what failed, then the build's last lines
    summary, *tail = results[1].error.splitlines()
    assert summary == ("BuildError: task broken-build: the image build failed at STEP 2/3: RUN echo building; exit 3: "
                       "building (exit status 3)")
    assert tail[-3:] == ["STEP 2/3: RUN echo building; exit 3", "building",
                         'Error: building at STEP "RUN echo building; exit 3": while running runtime: exit status 3']


def test_a_healthcheck_that_never_passes_is_a_task_error(podman, make_task):
    task = make_task("unhealthy", files={"task.toml": '[environment]\nallow_internet = false\n'
                                                      '[environment.healthcheck]\ncommand = "test -f /nope"\n'
                                                      'interval_sec = 0.2\nretries = 2\n'})
    with pytest.raises(BuildError, match=r"healthcheck 'test -f /nope' never passed"):
        run(open_sandbox(task, podman))


def test_exec_output_is_capped_and_a_timeout_is_reported(podman, make_task):
    task = make_task("flood")

    async def scenario():
        opened = await open_sandbox(task, podman)
        try:
            flood = await opened.sandbox.exec("head -c 20000000 /dev/zero", timeout=60)
            slow = await opened.sandbox.exec("sleep 30", timeout=1)
            return flood, slow
        finally:
            await opened.close()

    flood, slow = run(scenario())
    assert flood.ok and len(flood.stdout) < 20_000_000 and flood.truncated_bytes > 0
    assert slow.timed_out and slow.exit_code is None


def test_the_image_lock_is_enforced(podman, make_task, tmp_path):
    task = make_task("locked")
    lock = tmp_path / "images.lock.json"
    result = subprocess.run([str(LEAFCOST), "images", "lock", str(task.path), "-o", str(lock), "--json"],
                            capture_output=True, text=True, timeout=600, cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    locked = json.loads(lock.read_text())
    assert locked["engine"] == "podman" and locked["tasks"]["locked"]["id"].startswith("sha256:")
    options = podman.model_copy(update={"images_lock": lock})

    async def spec_image():
        opened = await open_sandbox(task, options)
        await opened.close()
        return opened.spec.image

    assert run(spec_image()) == locked["tasks"]["locked"]["id"]
    locked["tasks"]["locked"]["id"] = "sha256:" + "0" * 64
    lock.write_text(json.dumps(locked))
    with pytest.raises(BuildError, match="but the image lock .* says sha256:000000000000"):
        run(open_sandbox(task, options))
    other = make_task("unlocked")
    with pytest.raises(BuildError, match="not in the image lock"):
        run(open_sandbox(other, options))


def test_containers_of_a_dead_owner_are_removed_and_live_ones_kept(podman):
    podman_cli = engine("podman")
    dead = subprocess.run(podman_cli.command(
        "run", "-d", "--ulimit", "nofile=1024:1024", "--ulimit", "nproc=4096:4096", "--label", "leafcost=1",
        "--label", "leafcost.owner=999999999-1", "localhost/debian:bookworm", "sleep", "600"),
        capture_output=True, text=True, check=True).stdout.strip()
    from sandbox.shared.owner import identity
    live = subprocess.run(podman_cli.command(
        "run", "-d", "--ulimit", "nofile=1024:1024", "--ulimit", "nproc=4096:4096", "--label", "leafcost=1",
        "--label", f"leafcost.owner={identity()}", "localhost/debian:bookworm", "sleep", "600"),
        capture_output=True, text=True, check=True).stdout.strip()
    try:
        removed = remove_container_leftovers(podman)
        remaining = subprocess.run(podman_cli.command("ps", "-a", "-q", "--no-trunc"), capture_output=True,
                                   text=True).stdout.split()
        assert f"container {dead[:12]}" in removed and dead not in remaining
        assert live in remaining
    finally:
        subprocess.run(podman_cli.command("rm", "-f", "-t", "0", dead, live), capture_output=True)


def test_the_images_own_healthcheck_holds_the_agent_back_until_its_entrypoint_is_ready(podman, make_task):
    dockerfile = ("FROM python:3.11-slim\nWORKDIR /app\nCOPY repo/ /app/\n"
                  "RUN printf '#!/bin/sh\\n(sleep 2; touch /tmp/ready) &\\nexec \"$@\"\\n' > /entry.sh && "
                  "chmod 755 /entry.sh\nENTRYPOINT [\"/entry.sh\"]\n"
                  "HEALTHCHECK --interval=1s --start-period=20s --retries=2 CMD test -f /tmp/ready\n")
    task = make_task("image-healthcheck", files={"environment/Dockerfile": dockerfile})

    assert run(exec_once(task, podman, "test -f /tmp/ready && echo ready")).stdout == "ready\n"


def test_the_oracle_of_a_task_without_a_solution_is_refused_before_its_image_is_built(podman, make_task):
    def built() -> set[str]:
        return set(subprocess.run(engine("podman").command("images", "-q", "--filter",
                                                           "reference=leafcost-env/oracle-no-solution"),
                                  capture_output=True, text=True, check=True).stdout.split())

    before = built()
    task = make_task("oracle-no-solution", files={"solution/solve.sh": None, "environment/Dockerfile": (
        f"FROM python:3.11-slim\nWORKDIR /app\nRUN echo {uuid.uuid4().hex}\n")})  # a build would be a new image
    with pytest.raises(FileNotFoundError, match="task oracle-no-solution has no solution/solve.sh"):
        run(open_sandbox(task, podman, solution=True))
    assert built() == before
