"""The base images the container tests name, made on this machine from Debian's packages, because no image
registry is reachable here or in CI: `localhost/debian:bookworm` (debootstrap, then `podman import`) and one
toolchain image built from it and tagged with every name the tests' Dockerfiles use in `FROM`, and the base of
the SWE-bench-like instance images (tests/swebench_images.py builds those on it), and the stand-ins for
python:3.11-slim-bookworm and node:18-bookworm-slim that the mining tests' projects start from.
The toolchain image is a stand-in: Debian's python3 3.11 for python:3.11(-slim) (and python:3.13-slim), nodejs 18 for
node:20-slim.

Podman's own storage is the cache: when the images are present this costs two `podman image inspect` calls. A lock
file keeps two test processes from making them at once. Standard library only, so any test or script can use it.
"""

from __future__ import annotations

import fcntl
import hashlib
import os
import shutil
import subprocess
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from functools import cache
from pathlib import Path

BASE_IMAGE = "localhost/debian:bookworm"
BASE_ALIASES = ("docker.io/library/debian:bookworm",)
TOOLCHAIN_IMAGE = "localhost/leafcost-test/toolchain:bookworm"
# Docker's names for what the tests' `FROM`s say (`python:3.11-slim` is docker.io/library/python:3.11-slim). The last
# two are only for the tests of how short names are read: python:3.13-slim as real tasks name it, and a `user/name`
# that no short-name alias of Podman's covers.
TOOLCHAIN_ALIASES = ("docker.io/library/python:3.11-slim", "docker.io/library/python:3.11",
                     "docker.io/library/node:20-slim", "docker.io/library/gcc:12",
                     "docker.io/library/python:3.13-slim", "docker.io/leafcost-test/short-name:1")
TOOLCHAIN_DOCKERFILE = Path(__file__).parent / "images" / "toolchain" / "Dockerfile"
SWEBENCH_BASE_IMAGE = "localhost/leafcost-test/swebench-base:bookworm"
SWEBENCH_BASE_DOCKERFILE = Path(__file__).parent / "images" / "swebench" / "Dockerfile"
MINING_BASE_IMAGE = "localhost/leafcost-test/mining-base:bookworm"
MINING_BASE_ALIASES = ("docker.io/library/python:3.11-slim-bookworm",)  # the base leafcost mine picks for 3.11
MINING_BASE_DOCKERFILE = Path(__file__).parent / "images" / "mining" / "Dockerfile"
MINING_NODE_BASE_IMAGE = "localhost/leafcost-test/mining-node-base:bookworm"
MINING_NODE_BASE_ALIASES = ("docker.io/library/node:18-bookworm-slim",)  # the base leafcost mine picks for Node 18
MINING_NODE_BASE_DOCKERFILE = Path(__file__).parent / "images" / "mining-node" / "Dockerfile"
DOCKERFILE_LABEL = "leafcost.test.dockerfile-sha256"
DEBIAN_MIRROR = "http://deb.debian.org/debian"
# Podman's default limits for open files and processes exceed the hard limit some hosts allow (setrlimit fails).
ULIMITS = ["--ulimit", "nofile=1024:1024", "--ulimit", "nproc=4096:4096"]
LOCK_DIR = Path("/var/tmp/leafcost-test-images")


class ImageSetupError(RuntimeError):
    """A command that makes a test image failed; the message names it and ends with its last stderr lines."""


def podman_argv() -> list[str]:
    """`podman` and the global flags this host needs: crun refuses hybrid cgroups (v1 controllers with the v2
    hierarchy mounted at /sys/fs/cgroup/unified), runc does not."""
    return list(_podman_argv())


def ensure_base_image() -> str:
    """`localhost/debian:bookworm` (also tagged docker.io/library/debian:bookworm), made by debootstrap if missing."""
    _require_podman()
    wanted = (BASE_IMAGE, *BASE_ALIASES)
    if _one_image(wanted):
        return BASE_IMAGE
    with _machine_lock():
        if not _image_ids([BASE_IMAGE]):
            _debootstrap_and_import(BASE_IMAGE)
        if not _one_image(wanted):
            _podman("tag", BASE_IMAGE, *BASE_ALIASES)
    return BASE_IMAGE


def ensure_toolchain_images() -> dict[str, str]:
    """The toolchain image under its own name and every name it stands in for: {name: image id}. Built from
    tests/images/toolchain/Dockerfile, again only when that file's text has changed (its sha256 is a label)."""
    ensure_base_image()
    image_id = _ensure_built(TOOLCHAIN_IMAGE, TOOLCHAIN_ALIASES, TOOLCHAIN_DOCKERFILE)
    return {name: image_id for name in (TOOLCHAIN_IMAGE, *TOOLCHAIN_ALIASES)}


def ensure_swebench_base_image() -> str:
    """`localhost/leafcost-test/swebench-base:bookworm`, the base of the SWE-bench-like instance images: Debian's
    Python and pytest in a venv at SWE-bench's conda path (/opt/miniconda3/envs/testbed), with a `conda activate`
    stand-in. Built from tests/images/swebench/Dockerfile, again only when that file's text has changed."""
    ensure_base_image()
    _ensure_built(SWEBENCH_BASE_IMAGE, (), SWEBENCH_BASE_DOCKERFILE)
    return SWEBENCH_BASE_IMAGE


def ensure_mining_base_image() -> str:
    """The stand-in for python:3.11-slim-bookworm, the base `leafcost mine` gives a Python 3.11 project: Debian's
    Python with venv, pip, pytest, setuptools, wheel and git. Built from tests/images/mining/Dockerfile, again only
    when that file's text has changed; returns the name a mined env image's FROM uses."""
    ensure_base_image()
    _ensure_built(MINING_BASE_IMAGE, MINING_BASE_ALIASES, MINING_BASE_DOCKERFILE)
    return MINING_BASE_ALIASES[0]


def ensure_mining_node_base_image() -> str:
    """The stand-in for node:18-bookworm-slim, the base `leafcost mine` gives a Node 18 project: Debian's nodejs 18
    and git. Built from tests/images/mining-node/Dockerfile, again only when that file's text has changed; returns
    the name a mined env image's FROM uses."""
    ensure_base_image()
    _ensure_built(MINING_NODE_BASE_IMAGE, MINING_NODE_BASE_ALIASES, MINING_NODE_BASE_DOCKERFILE)
    return MINING_NODE_BASE_ALIASES[0]


def _ensure_built(image: str, aliases: tuple[str, ...], dockerfile: Path) -> str:
    """The ID of `image` built from `dockerfile`'s current text and named by every alias, building it if not."""
    names = (image, *aliases)
    digest = hashlib.sha256(dockerfile.read_bytes()).hexdigest()
    current = _current_build(names, digest)
    if current is None:
        with _machine_lock():
            current = _current_build(names, digest) or _build(image, aliases, dockerfile, digest)
    return current


def _current_build(names: tuple[str, ...], digest: str) -> str | None:
    """The image ID when every name points at it and it was built from this Dockerfile text."""
    found = _inspect_all(names, f'{{{{.Id}}}} {{{{index .Labels "{DOCKERFILE_LABEL}"}}}}')
    if found is None or len(set(found)) != 1:
        return None
    image_id, _, label = found[0].partition(" ")
    return image_id if label == digest else None


def _build(image: str, aliases: tuple[str, ...], dockerfile: Path, digest: str) -> str:
    """Builds `image` if it is missing or from other Dockerfile text, then gives it every alias."""
    before = _image_ids([image, *aliases])
    if image not in before or _label(image) != digest:
        _podman("build", *ULIMITS, "--pull=never", "--label", f"{DOCKERFILE_LABEL}={digest}",
                "-t", image, "-f", str(dockerfile), str(dockerfile.parent), timeout=1800)
    if aliases:
        _podman("tag", image, *aliases)
    image_id = _inspect(image, "{{.Id}}")
    for stale in set(before.values()) - {image_id}:
        # A superseded build of ours has no names left; it stays only while a container or a derived image uses it.
        if _label(stale):
            subprocess.run([*podman_argv(), "rmi", stale], capture_output=True)
    return image_id


def _debootstrap_and_import(name: str) -> None:
    if os.geteuid() != 0:
        raise ImageSetupError(f"{name} is missing and debootstrap needs root: run the tests as root once, or make it "
                              f"by hand (`debootstrap --variant=minbase bookworm DIR`, then "
                              f"`tar -C DIR -c . | podman import - {name}`)")
    if shutil.which("debootstrap") is None:
        raise ImageSetupError(f"{name} is missing and debootstrap is not installed: run `make system-deps` as root "
                              f"(or `apt-get install -y debootstrap`)")
    root = Path(tempfile.mkdtemp(prefix="debootstrap-", dir=_lock_dir()))
    try:
        _run(["debootstrap", "--variant=minbase", "bookworm", str(root), DEBIAN_MIRROR], timeout=1800)
        _import_tree(root, name)
    finally:
        _remove_tree(root)


def _import_tree(root: Path, name: str) -> None:
    """`tar -C root -c . | podman import - name`, streamed: the tree never exists twice on disk."""
    tar = subprocess.Popen(["tar", "-C", str(root), "--numeric-owner", "-c", "."], stdout=subprocess.PIPE,
                           stderr=subprocess.PIPE)
    try:
        _run([*podman_argv(), "import", "-", name], timeout=900, stdin=tar.stdout)
    finally:
        assert tar.stdout is not None
        tar.stdout.close()
        tar_stderr = tar.stderr.read().decode("utf-8", "replace") if tar.stderr else ""
        tar.wait()
    if tar.returncode != 0:
        raise ImageSetupError(f"`tar -C {root} -c .` failed (exit {tar.returncode}): {_tail(tar_stderr)}")


def _remove_tree(root: Path) -> None:
    """Deletes a debootstrap tree, first unmounting the /proc or /sys a failed debootstrap can leave mounted in it
    (deleting through those mounts would reach the host's)."""
    mounted = [line.split()[1] for line in Path("/proc/self/mounts").read_text().splitlines()]
    for point in sorted((p for p in mounted if p.startswith(f"{root}/")), key=len, reverse=True):
        subprocess.run(["umount", "--lazy", point], capture_output=True)
    shutil.rmtree(root, ignore_errors=True)


@contextmanager
def _machine_lock() -> Iterator[None]:
    """Held while an image is made, so concurrent pytest processes make each image once."""
    with open(_lock_dir() / f"images-{os.geteuid()}.lock", "w") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        yield


def _lock_dir() -> Path:
    # Under /var/tmp (on disk, shared by every process of the machine); per user, because so is Podman's storage.
    try:
        if not LOCK_DIR.is_dir():
            LOCK_DIR.mkdir()
            LOCK_DIR.chmod(0o1777)  # like /tmp: every user can keep a lock file here
        if os.access(LOCK_DIR, os.W_OK):
            return LOCK_DIR
    except OSError:
        pass
    fallback = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "leafcost-test-images"
    fallback.mkdir(parents=True, exist_ok=True)
    return fallback


@cache
def _podman_argv() -> tuple[str, ...]:
    if _hybrid_cgroups() and shutil.which("runc"):
        return ("podman", "--runtime", "runc")
    return ("podman",)


def _hybrid_cgroups() -> bool:
    root = Path("/sys/fs/cgroup")
    return _filesystem_type(root) == "tmpfs" and (root / "unified").is_dir()


def _filesystem_type(path: Path) -> str | None:
    """The type of the filesystem mounted at `path` (the last mount there is the visible one)."""
    types = [fields[2] for fields in map(str.split, Path("/proc/self/mounts").read_text().splitlines())
             if len(fields) > 2 and fields[1] == str(path)]
    return types[-1] if types else None


def _one_image(names: tuple[str, ...]) -> bool:
    """Every name exists and they all name the same image."""
    found = _inspect_all(names, "{{.Id}}")
    return found is not None and len(set(found)) == 1


def _inspect_all(names: tuple[str, ...], template: str) -> list[str] | None:
    """`template` rendered for each name, in one podman call; None when any name is missing."""
    found = subprocess.run([*podman_argv(), "image", "inspect", "--format", template, *names], capture_output=True,
                           text=True)
    lines = found.stdout.splitlines()
    return lines if found.returncode == 0 and len(lines) == len(names) else None


def _image_ids(names: list[str]) -> dict[str, str]:
    """{name: image id} for the names that exist."""
    ids = {}
    for name in names:
        found = _inspect_all((name,), "{{.Id}}")
        if found:
            ids[name] = found[0]
    return ids


def _label(name: str) -> str:
    label = _inspect(name, f'{{{{index .Labels "{DOCKERFILE_LABEL}"}}}}')
    return "" if label == "<no value>" else label


def _inspect(name: str, template: str) -> str:
    return _podman("image", "inspect", "--format", template, name).strip()


def _require_podman() -> None:
    if shutil.which("podman") is None:
        raise ImageSetupError("podman is not installed: run `make system-deps` as root "
                              "(or `apt-get install -y podman runc debootstrap`)")


def _podman(*args: str, timeout: float = 300) -> str:
    return _run([*podman_argv(), *args], timeout=timeout)


def _run(argv: list[str], *, timeout: float, stdin=None) -> str:
    try:
        done = subprocess.run(argv, stdin=stdin, capture_output=True, text=True, timeout=timeout)
    except subprocess.TimeoutExpired:
        raise ImageSetupError(f"`{' '.join(argv)}` ran longer than {timeout:g}s") from None
    if done.returncode != 0:
        output = _tail(done.stderr or done.stdout)
        raise ImageSetupError(f"`{' '.join(argv)}` failed (exit {done.returncode}): {output}")
    return done.stdout


def _tail(text: str, lines: int = 8) -> str:
    return " | ".join(line.strip() for line in text.strip().splitlines()[-lines:] if line.strip()) or "no output"
