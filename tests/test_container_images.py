"""The images tests/container_images.py makes are all the built-in suite needs without a registry: each task's
Dockerfile builds with `--pull=never`, its oracle resolves and its empty patch does not, in a real Podman
container of that image."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest

from container_images import (BASE_ALIASES, BASE_IMAGE, TOOLCHAIN_ALIASES, TOOLCHAIN_IMAGE, ULIMITS,
                              ensure_toolchain_images, podman_argv)

BUILTIN = Path(__file__).resolve().parents[1] / "sandbox" / "suites" / "builtin"
BUILTIN_TASKS = sorted(path.name for path in BUILTIN.iterdir() if (path / "environment" / "Dockerfile").is_file())
LABEL = ["--label", "leafcost.test=container-images"]  # finds this file's leftovers, should a run be killed


def test_the_builtin_suite_is_found():
    assert len(BUILTIN_TASKS) >= 12  # a suite that is not found would parametrise nothing


@pytest.mark.parametrize("task", BUILTIN_TASKS)
def test_a_builtin_task_builds_offline_and_its_oracle_alone_earns_the_reward(container_images, task):
    task_dir = BUILTIN / task
    image = f"localhost/leafcost-test-builtin/{task}:latest"
    built = podman("build", *ULIMITS, "--pull=never", *LABEL, "-t", image, str(task_dir / "environment"),
                   timeout=900)
    try:
        assert built.returncode == 0, f"{task} does not build in the stand-in image: {built.stderr[-2000:]}"
        workdir = podman("image", "inspect", "--format", "{{.Config.WorkingDir}}", image).stdout.strip()
        assert reward(image, workdir, task_dir, solved=True) == "1"
        assert reward(image, workdir, task_dir, solved=False) == "0"
    finally:
        podman("rmi", image)


def test_short_names_in_from_resolve_to_the_local_images_without_a_pull(container_images, tmp_path):
    expected = {**{name: TOOLCHAIN_IMAGE for name in TOOLCHAIN_ALIASES}, **{name: BASE_IMAGE for name in BASE_ALIASES}}
    for name, stand_in in expected.items():
        short = name.removeprefix("docker.io/library/")
        (tmp_path / "Dockerfile").write_text(f"FROM {short}\nRUN true\n")
        built = podman("build", *ULIMITS, "--pull=never", *LABEL, "--iidfile", str(tmp_path / "iid"), str(tmp_path))
        assert built.returncode == 0, f"FROM {short}: {built.stderr[-1000:]}"
        child = (tmp_path / "iid").read_text().strip()
        try:
            child_layers, stand_in_layers = (layers(image) for image in (child, stand_in))
            # RUN adds one layer: below it lies exactly the stand-in, not just an image sharing its base.
            assert child_layers[:-1] == stand_in_layers, f"FROM {short} did not resolve to {stand_in}"
        finally:
            podman("rmi", child)


def test_ensuring_the_toolchain_again_rebuilds_nothing(container_images):
    first = ensure_toolchain_images()
    created = podman("image", "inspect", "--format", "{{.Created}}", TOOLCHAIN_IMAGE).stdout
    second = ensure_toolchain_images()
    assert first == second and set(first) == {TOOLCHAIN_IMAGE, *TOOLCHAIN_ALIASES}
    assert len(set(first.values())) == 1
    assert podman("image", "inspect", "--format", "{{.Created}}", TOOLCHAIN_IMAGE).stdout == created


def reward(image: str, workdir: str, task_dir: Path, *, solved: bool) -> str:
    """The task's verifier run as root in a fresh offline container, after its oracle when `solved`."""
    started = podman("run", "-d", "--rm", "--network", "none", *ULIMITS, *LABEL, "-w", workdir, image,
                     "sleep", "infinity")
    assert started.returncode == 0, started.stderr
    container = started.stdout.strip()
    try:
        assert podman("cp", str(task_dir / "tests"), f"{container}:/tests").returncode == 0
        if solved:
            assert podman("cp", str(task_dir / "solution"), f"{container}:/solution").returncode == 0
            solve = podman("exec", container, "bash", "/solution/solve.sh")
            assert solve.returncode == 0, f"{task_dir.name}: solve.sh failed: {solve.stdout[-1000:]}{solve.stderr}"
        verify = podman("exec", container, "bash", "/tests/test.sh")
        assert verify.returncode == 0, f"{task_dir.name}: test.sh failed: {verify.stderr[-2000:]}"
        value = podman("exec", container, "cat", "/logs/verifier/reward.txt").stdout.strip()
        if value != ("1" if solved else "0"):
            log = podman("exec", container, "cat", "/logs/verifier/test_output.txt").stdout
            print(f"{task_dir.name} (solved={solved}) verifier output:\n{log[-4000:]}")
        return value
    finally:
        podman("rm", "-f", "-t", "0", container)


def layers(image: str) -> list[str]:
    return json.loads(podman("image", "inspect", "--format", "{{json .RootFS.Layers}}", image).stdout)


def podman(*args: str, timeout: float = 300) -> subprocess.CompletedProcess[str]:
    return subprocess.run([*podman_argv(), *args], capture_output=True, text=True, timeout=timeout)
