"""Image names as Docker reads them (`python:3.13-slim` is docker.io/library/python:3.13-slim), handed to a real
Podman that has no unqualified-search registry: short names in FROM lines, `docker_image` and the image lock are
found under Docker's name (or Podman's `localhost/` one) on this machine, and a name that is nowhere here fails
in one line that says what to do."""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
from pathlib import Path

import pytest

from compare.validate import validate_task
from sandbox import BuildError, SandboxOptions, open_sandbox
from sandbox.container.engine import engine
from sandbox.image_names import is_reference, local_names, qualified

LEAFCOST = Path(sys.executable).with_name("leafcost")
DIGEST = "sha256:" + "ab" * 32


@pytest.mark.parametrize("name, expected", [
    ("python:3.13-slim", "docker.io/library/python:3.13-slim"),
    ("alpine", "docker.io/library/alpine"),
    (f"golang@{DIGEST}", f"docker.io/library/golang@{DIGEST}"),
    (f"python:3.13-slim@{DIGEST}", f"docker.io/library/python:3.13-slim@{DIGEST}"),
    ("user/app:1", "docker.io/user/app:1"),
    ("swebench/sweb.eval.x86_64.a_1776_b-1:latest", "docker.io/swebench/sweb.eval.x86_64.a_1776_b-1:latest"),
    ("org/team/app", "docker.io/org/team/app"),
    ("docker.io/python", "docker.io/library/python"),  # Docker Hub's own name, still in library/
    ("index.docker.io/user/app", "docker.io/user/app"),
    ("docker.io/library/debian:bookworm", "docker.io/library/debian:bookworm"),
    ("localhost/debian:bookworm", "localhost/debian:bookworm"),
    ("localhost:5000/app:1", "localhost:5000/app:1"),  # a port makes a host
    ("registry:5000/app", "registry:5000/app"),
    ("ghcr.io/astral-sh/uv:0.5", "ghcr.io/astral-sh/uv:0.5"),  # a dot makes a host
    ("Registry/app", "Registry/app"),  # so does an uppercase letter (no repository has one)
    (f"quay.io/org/app@{DIGEST}", f"quay.io/org/app@{DIGEST}"),
    (DIGEST, DIGEST),  # an image ID, which names no repository
    ("ab" * 32, "ab" * 32),
])
def test_names_are_qualified_as_docker_reads_them(name, expected):
    assert is_reference(name)
    assert qualified(name) == expected
    assert qualified(expected) == expected  # once is enough


def test_a_short_name_may_also_be_podmans_localhost_image():
    assert local_names("debian:bookworm") == ["docker.io/library/debian:bookworm", "localhost/debian:bookworm"]
    assert local_names("user/app") == ["docker.io/user/app", "localhost/user/app"]
    assert local_names("docker.io/library/debian:bookworm") == ["docker.io/library/debian:bookworm"]
    assert local_names("localhost/debian:bookworm") == ["localhost/debian:bookworm"]
    assert local_names("ghcr.io/a/b:1") == ["ghcr.io/a/b:1"]
    assert local_names(DIGEST) == [DIGEST]


def run(coro):
    return asyncio.run(coro)


@pytest.fixture(scope="module")
def podman(container_images, tmp_path_factory) -> SandboxOptions:
    return SandboxOptions(backend="podman", cache_dir=tmp_path_factory.mktemp("podman-cache"))


async def python_version(task, options) -> str:
    opened = await open_sandbox(task, options)
    try:
        return (await opened.sandbox.exec("python3 -c 'print(1 + 1)'", timeout=60)).stdout.strip()
    finally:
        await opened.close()


@pytest.mark.parametrize("base", [
    "python:3.13-slim",  # as real tasks name it; present here as docker.io/library/python:3.13-slim
    "leafcost-test/short-name:1",  # no short-name alias covers it: Podman alone would refuse it
    "leafcost-test/toolchain:bookworm",  # Podman's localhost/ name for an image tagged here by its short name
])
def test_a_dockerfile_from_a_short_name_builds_from_the_image_on_this_machine(podman, make_task, base):
    task = make_task(f"from-{base.replace('/', '-').replace(':', '-')}", files={
        "environment/Dockerfile": f"FROM {base} AS first\nFROM first\nWORKDIR /app\nCOPY repo/ /app/\n"})
    assert run(python_version(task, podman)) == "2"


def test_a_docker_image_by_short_name_is_found_under_dockers_name(podman, make_task):
    task = make_task("named-short")  # as Harbor: a named image is used as it is, even beside a Dockerfile
    task.config.environment.docker_image = "leafcost-test/short-name:1"
    task.config.environment.workdir = "/tmp"
    assert run(python_version(task, podman)) == "2"


def test_an_image_that_is_nowhere_here_fails_in_one_line_saying_what_to_do(podman, make_task):
    built = make_task("from-absent", files={"environment/Dockerfile": "FROM leafcost-absent-base:1\nWORKDIR /app\n"})
    named = make_task("named-absent")
    named.config.environment.docker_image = "leafcost-absent-named"
    for task, name in ((built, "docker.io/library/leafcost-absent-base:1"),
                       (named, "docker.io/library/leafcost-absent-named")):
        result = run(validate_task(task, podman))
        assert result.error == (f"BuildError: task {task.task_id}: image {name}: not on this machine and the "
                                "registry is unreachable: build or load it (`podman load`), or point podman at a "
                                "mirror (CONTAINERS_REGISTRIES_CONF)")


def test_images_lock_pins_a_short_name_and_prints_each_failure_once(podman, make_task, tmp_path):
    short = make_task("lock-short")
    (short.path / "task.toml").write_text((short.path / "task.toml").read_text()
                                          + 'docker_image = "python:3.13-slim"\nworkdir = "/tmp"\n')
    make_task("lock-absent", files={"environment/Dockerfile": "FROM leafcost-absent-base:2\nWORKDIR /app\n"})
    lock = tmp_path / "images.lock.json"
    result = subprocess.run([str(LEAFCOST), "images", "lock", str(short.path.parent), "-o", str(lock)],
                            capture_output=True, text=True, timeout=600, cwd=tmp_path)
    assert result.returncode == 1
    assert result.stderr.count("not on this machine and the registry is unreachable") == 1, result.stderr
    assert result.stderr.count("task lock-absent:") == 1, result.stderr  # not again in a list at the end
    locked = json.loads(lock.read_text())["tasks"]
    assert list(locked) == ["lock-short"] and locked["lock-short"]["image"] == "python:3.13-slim"  # the task's name
    present = subprocess.run(engine("podman").command("image", "inspect", "--format", "{{.Id}}",
                                                      "docker.io/library/python:3.13-slim"),
                             capture_output=True, text=True, check=True).stdout.strip()
    assert locked["lock-short"]["id"] == f"sha256:{present}"  # found under Docker's name for it
    assert "wrote" in result.stdout and "1 of 2 tasks locked" in result.stdout


def test_a_failed_build_keeps_the_failing_steps_own_words(podman, make_task):
    """`apk` is not Debian's: the build fails at that RUN, and what the shell said stays in the error, after the
    step's STEP line even when the step printed more than the tail keeps."""
    # on stderr, as the shell's own complaint: one stream, so their order is the order written
    run_step = "RUN for i in $(seq 1 30); do echo line $i >&2; done; apk add curl"
    task = make_task("apk-on-debian", files={"environment/Dockerfile": f"FROM debian:bookworm\n{run_step}\n"})
    with pytest.raises(BuildError) as raised:
        run(open_sandbox(task, podman))
    summary, *tail = str(raised.value).splitlines()
    step = f"STEP 2/3: {run_step}"  # the 3rd step is the engine's own: leafcost's label
    assert summary == (f"task apk-on-debian: the image build failed at {step}: /bin/sh: 1: apk: not found "
                       "(exit status 127)")
    assert tail[:2] == [step, "..."] and len(tail) == 20
    assert "line 30" in tail and "line 5" not in tail and "/bin/sh: 1: apk: not found" in tail


def test_a_swebench_instance_image_that_is_nowhere_here_also_points_at_swebench_namespace(podman, tmp_path):
    from sandbox import load_suite

    fixture = Path(__file__).resolve().parents[1] / "fixtures" / "swebench" / "instances.jsonl"
    row = json.loads(fixture.read_text().splitlines()[0])
    row["image"] = "swebench/sweb.eval.x86_64.leafcost-absent_1776_x-1:latest"  # a short name, as the datasets'
    (tmp_path / "rows.jsonl").write_text(json.dumps(row) + "\n")
    task = load_suite(str(tmp_path / "rows.jsonl"), cache_dir=tmp_path / "cache").tasks[0]
    result = run(validate_task(task, podman))
    assert result.error == (f"BuildError: task {task.task_id}: image docker.io/swebench/sweb.eval.x86_64.leafcost-"
                            "absent_1776_x-1:latest: not on this machine and the registry is unreachable: build or "
                            "load it (`podman load`), or point podman at a mirror (CONTAINERS_REGISTRIES_CONF), or "
                            "name a mirror's instance images with --swebench-namespace")


def test_a_failed_multi_stage_build_is_summed_up_by_its_failing_stages_step():
    """Podman's output for a failing second stage, as it prints it (checked by hand with podman 4.3.1)."""
    from sandbox.container.images import build_failure

    output = ("[1/2] STEP 1/2: FROM docker.io/library/debian:bookworm AS a\n[1/2] STEP 2/2: RUN echo hi\nhi\n"
              "--> 74389c0ea27\n[2/2] STEP 1/2: FROM docker.io/library/debian:bookworm\n"
              "[2/2] STEP 2/2: RUN apk add curl\n/bin/sh: 1: apk: not found\n"
              'Error: building at STEP "RUN apk add curl": while running runtime: exit status 127\n')
    summary, *tail = build_failure(output, 127).splitlines()
    assert summary == ("the image build failed at [2/2] STEP 2/2: RUN apk add curl: /bin/sh: 1: apk: not found "
                       "(exit status 127)")
    assert tail == output.splitlines()
    assert build_failure("Error: no FROM statement found\n", 125) == ("the image build failed (no FROM statement "
                                                                     "found)\nError: no FROM statement found")
