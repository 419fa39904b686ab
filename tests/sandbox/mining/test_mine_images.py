"""A mined candidate's images: the Dockerfiles leafcost writes (read as text), and, with Podman, a tiny project
built with no package index (its pytest and setuptools come from the base image) into an instance image where the
project imports from every shell, the tree is clean and one set-up commit sits on the base commit; a project whose
install fails is dropped with the failing step's output."""

from __future__ import annotations

import asyncio
import json
import subprocess
from datetime import datetime, timezone
from pathlib import Path

import pytest

from container_images import ULIMITS, ensure_mining_base_image, podman_argv
from sandbox.mining.environment import ProjectFacts, detect_project
from sandbox.mining.errors import Dropped, MiningError
from sandbox.mining.images import (SETUP_COMMIT_MESSAGE, _subprocess_said, build_instance_image, env_dockerfile,
                                   env_image_tag, instance_dockerfile)
from support.git_repos import CommitSpec, make_repo, run_git

HOST_CA = Path("/etc/ssl/certs/ca-certificates.crt")
COMMITTED = datetime(2023, 1, 15, tzinfo=timezone.utc)  # 3.11 the newest CPython: the base here


def facts(**changes) -> ProjectFacts:
    base = ProjectFacts(kind="python", python="3.11", base_image="docker.io/library/python:3.11-slim-bookworm",
                        dependency_files={"requirements.txt": "six\n"}, env_install=["pip install -r requirements.txt"],
                        install=["pip install --no-build-isolation -e ."])
    return base.model_copy(update=changes)


def test_env_dockerfile_passes_the_ca_bundle_to_build_steps_only():
    with_ca, without = env_dockerfile(facts(), ca=True), env_dockerfile(facts(), ca=False)
    assert "COPY ca.pem /tmp/leafcost-build/ca.pem\nARG PIP_CERT=/tmp/leafcost-build/ca.pem\n" in with_ca
    assert "ARG SSL_CERT_FILE=/tmp/leafcost-build/ca.pem" in with_ca
    assert "ca.pem" not in without
    assert not [line for line in with_ca.splitlines() if line.startswith("ENV") and "ca.pem" in line]
    assert with_ca.rstrip().endswith("RUN rm -rf /tmp/leafcost-deps /tmp/leafcost-build")


def test_env_dockerfile_installs_dependencies_beside_their_files_and_the_venv_is_on_every_path():
    text = env_dockerfile(facts(env={"LANG": 'C.UTF-8 "$HOME"'}, system_packages=["libpq-dev"]), ca=False)
    assert text.startswith("# leafcost mine:")
    assert "\nFROM docker.io/library/python:3.11-slim-bookworm\n" in text
    assert "command -v git >/dev/null 2>&1 || missing=git; dpkg -s libpq-dev >/dev/null 2>&1" in text
    assert "python3 -m venv --system-site-packages /opt/leafcost-venv" in text
    assert "> /etc/profile.d/leafcost-venv.sh" in text  # a login shell's /etc/profile resets PATH
    assert "\nENV VIRTUAL_ENV=/opt/leafcost-venv PATH=/opt/leafcost-venv/bin:$PATH PYTHONDONTWRITEBYTECODE=1\n" in text
    assert '\nENV LANG="C.UTF-8 \\"\\$HOME\\""\n' in text  # nothing of the build expands in a hint's value
    assert "COPY deps/ /tmp/leafcost-deps/\nWORKDIR /tmp/leafcost-deps\nRUN pip install -r requirements.txt\n" in text
    assert text.index("RUN pip install -r requirements.txt") < text.index("import pytest")  # their pytest first


def test_instance_dockerfile_ends_in_a_setup_commit_without_hooks():
    text = instance_dockerfile("localhost/leafcost-mined/env-x:0123456789ab", facts(), ca=False)
    assert text.splitlines()[1:5] == ["FROM localhost/leafcost-mined/env-x:0123456789ab",
                                      "ARG PIP_DISABLE_PIP_VERSION_CHECK=1", "ARG PIP_NO_INPUT=1",
                                      "ARG PIP_ROOT_USER_ACTION=ignore"]
    assert "COPY tree/ /testbed/\nWORKDIR /testbed\nRUN pip install --no-build-isolation -e .\n" in text
    last = text.split("\nRUN ")[-1]
    assert "core.hooksPath=/dev/null" in last and "--no-verify" in last and "commit -q --allow-empty" in last


def test_env_image_is_shared_by_a_dependency_set():
    tag = env_image_tag(facts(), "psf/requests")
    assert tag.startswith("localhost/leafcost-mined/env-psf-requests:") and len(tag.rsplit(":", 1)[1]) == 12
    assert env_image_tag(facts(install=["pip install ."]), "psf/requests") == tag  # the instance's own step
    assert env_image_tag(facts(dependency_files={"requirements.txt": "six==1.16\n"}), "psf/requests") != tag
    assert env_image_tag(facts(base_image="localhost/other:1"), "psf/requests") != tag
    assert env_image_tag(facts(env={"TZ": "UTC"}), "psf/requests") != tag


def test_a_missing_ca_bundle_stops_the_run(tmp_path):
    with pytest.raises(MiningError, match=r"CA bundle .*nowhere.pem: no such file"):
        asyncio.run(build_instance_image("podman", facts(), tmp_path, "x-1", ca_bundle=tmp_path / "nowhere.pem",
                                         timeout=10))


# Containers from here on: Podman, the base built from Debian's packages.

PYPROJECT = """[build-system]
requires = ["setuptools>=61"]
build-backend = "setuptools.build_meta"

[project]
name = "tinypkg"
version = "0.1"
requires-python = ">=3.9"

[tool.setuptools]
packages = ["tinypkg"]
"""
BROKEN_SETUP = """from setuptools import setup
raise SystemExit("tinybroken: this project cannot be installed, by design")
setup(name="tinybroken")
"""


@pytest.fixture(scope="module")
def mining_base(container_images):
    """The stand-in for python:3.11-slim-bookworm; every image a test here builds is removed afterwards."""
    ensure_mining_base_image()
    built: list[str] = []
    yield built
    if built:
        subprocess.run([*podman_argv(), "rmi", "-f", *built], capture_output=True)


def podman(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([*podman_argv(), *args], capture_output=True, text=True, timeout=300)


def in_image(image: str, command: str, *, login: bool = False) -> str:
    done = podman("run", "--rm", *ULIMITS, "--network", "none", image, "bash", "-lc" if login else "-c", command)
    assert done.returncode == 0, done.stderr + done.stdout
    return done.stdout.strip()


def build(tree: Path, instance_id: str, built: list[str], ca_bundle: Path | None = None) -> tuple[str, ProjectFacts]:
    """Without the host's CA bundle nothing here can reach PyPI (this machine's TLS is re-signed), so a build that
    passes needed no index."""
    found = detect_project(tree, COMMITTED, None)
    built.append(env_image_tag(found, "tests/tiny"))
    tag = asyncio.run(build_instance_image("podman", found, tree, instance_id, ca_bundle=ca_bundle, timeout=900,
                                           repo="tests/tiny"))
    built.append(tag)
    return tag, found


def tiny_repo(tmp_path: Path, name: str, files: dict[str, str]) -> tuple[Path, str]:
    repo = make_repo(tmp_path / name, [CommitSpec(files=files, message="base", date="2023-01-15T12:00:00Z")])
    return repo, run_git(repo, "rev-parse", "HEAD").strip()


def test_a_tiny_project_builds_and_imports_everywhere(mining_base, tmp_path):
    tree, base = tiny_repo(tmp_path, "tiny", {"pyproject.toml": PYPROJECT, "tinypkg/__init__.py": "ANSWER = 42\n",
                                              "tests/test_answer.py": "import tinypkg\n\ndef test_answer():\n"
                                                                      "    assert tinypkg.ANSWER == 42\n"})
    image, found = build(tree, "tests__tiny-1a2b3c4", mining_base)
    assert image.startswith("localhost/leafcost-mined/tests-tiny-1a2b3c4:")
    assert in_image(image, "cd / && python -c 'import tinypkg; print(tinypkg.ANSWER)'") == "42"
    assert in_image(image, "cd / && python -c 'import tinypkg; print(tinypkg.ANSWER)'", login=True) == "42"
    assert in_image(image, "command -v pytest", login=True) == "/opt/leafcost-venv/bin/pytest"
    # The test command as the eval script runs it; then the tree as the agent finds it.
    ran = in_image(image, f"cd /testbed && {found.test_command} tests/test_answer.py && git status --porcelain")
    assert "PASSED tests/test_answer.py::test_answer" in ran and "??" not in ran  # no bytecode, no cache left
    history = in_image(image, "cd /testbed && git status --porcelain && git rev-parse HEAD^ && git log -1 --format=%s")
    assert history.splitlines() == [base, SETUP_COMMIT_MESSAGE]  # status clean; one set-up commit on the base
    assert podman("image", "inspect", "--format", "{{.Config.WorkingDir}}", image).stdout.strip() == "/testbed"

    # A later candidate with the same dependency set reuses the env image: only its instance image is built.
    env_id = podman("image", "inspect", "--format", "{{.Id}}", env_image_tag(found, "tests/tiny")).stdout
    run_git(tree, "rm", "-q", "tests/test_answer.py")
    run_git(tree, "commit", "-qm", "next")
    later, _ = build(tree, "tests__tiny-5d6e7f8", mining_base)
    assert later != image
    assert podman("image", "inspect", "--format", "{{.Id}}", env_image_tag(found, "tests/tiny")).stdout == env_id
    assert in_image(later, "cd /testbed && git log --format=%s") == f"{SETUP_COMMIT_MESSAGE}\nnext\nbase"


def test_an_install_that_fails_is_dropped_with_the_steps_output(mining_base, tmp_path):
    tree, _ = tiny_repo(tmp_path, "broken", {"setup.py": BROKEN_SETUP, "broken.py": "X = 1\n"})
    with pytest.raises(Dropped) as caught:
        build(tree, "tests__broken-9a8b7c6", mining_base, ca_bundle=HOST_CA)
    assert caught.value.reason == "install_failed"
    detail = str(caught.value)
    assert detail.startswith("instance image: the image build failed at STEP ")
    assert "RUN pip install --no-build-isolation -e ." in detail and "\n" not in detail
    assert detail.endswith("it said: tinybroken: this project cannot be installed, by design")  # pip's own cause
    assert "tinybroken: this project cannot be installed, by design" in caught.value.log
    # Its env image was built with the host's CA bundle, which served the build steps and is gone from the image.
    env_image = env_image_tag(detect_project(tree, COMMITTED, None), "tests/tiny")
    settings = json.loads(podman("image", "inspect", env_image).stdout)[0]["Config"]
    assert not [entry for entry in settings["Env"] if "ca.pem" in entry or entry.startswith(("PIP_CERT", "SSL_"))]
    assert in_image(env_image, "ls /tmp/leafcost-build 2>&1 || true") == \
        "ls: cannot access '/tmp/leafcost-build': No such file or directory"


# npm 9's output for an `npm ci` whose lockfile lacks a dependency package.json declares (issue 24's run with the
# npm registry): npm's last line points at its debug log, the cause is the line after `code`.
NPM_CI_OUT_OF_SYNC = """STEP 14/17: RUN npm ci
npm ERR! code EUSAGE
npm ERR! 
npm ERR! `npm ci` can only install packages when your package.json and package-lock.json are in sync.
npm ERR! 
npm ERR! Missing: left-pad@1.3.0 from lock file
npm ERR! 
npm ERR! A complete log of this run can be found in:
npm ERR!     /root/.npm/_logs/2026-12-05T07_55_47_471Z-debug-0.log
Error: building at STEP "RUN npm ci": while running runtime: exit status 1
"""


@pytest.mark.parametrize("output, said", [
    (NPM_CI_OUT_OF_SYNC, "EUSAGE: `npm ci` can only install packages when your package.json and package-lock.json "
                         "are in sync."),
    ("npm error code E404\nnpm error 404 Not Found - GET https://registry.npmjs.org/nope - Not found\n"
     "npm error A complete log of this run can be found in: /root/.npm/_logs/x-debug-0.log\n",
     "E404: 404 Not Found - GET https://registry.npmjs.org/nope - Not found"),  # npm 10's prefix
    ("STEP 3/5: RUN make\nmake: *** No rule to make target\n", ""),
])
def test_a_failed_npm_install_is_named_by_npms_cause_not_its_log_path(output, said):
    assert _subprocess_said(output) == said
