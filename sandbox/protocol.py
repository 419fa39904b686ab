"""The sandbox seam: what the episode loop, grading, the oracle and `validate` may ask of a sandbox, whatever runs it
(bubblewrap on this host, a container engine, a Kubernetes pod). Nothing outside a backend touches a sandbox's files
by host path; files go in and out through these calls."""

from __future__ import annotations

import base64
import hashlib
import io
import os
import shlex
import tarfile
from pathlib import Path
from typing import Any, Literal, Protocol

from pydantic import BaseModel, Field

from sandbox.backends import BackendName


class SandboxError(RuntimeError):
    """The sandbox itself failed (could not start, died, stopped answering): an infrastructure error."""


class BuildError(RuntimeError):
    """The task's environment could not be had (built, pulled, started as asked): a task error naming the cause."""


class ExecResult(BaseModel):
    exit_code: int | None
    stdout: str
    stderr: str
    timed_out: bool
    seconds: float
    truncated_bytes: int = 0

    @property
    def ok(self) -> bool:
        return self.exit_code == 0 and not self.timed_out

    def facts(self) -> dict[str, str]:
        """The `name=value` lines a set-up script printed on stdout."""
        return dict(line.split("=", 1) for line in self.stdout.splitlines() if "=" in line)


def default_cache_dir() -> Path:
    if os.environ.get("LEAFCOST_CACHE"):
        return Path(os.environ["LEAFCOST_CACHE"])
    return Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "leafcost"


class SandboxOptions(BaseModel):
    """How sandboxes are made on this machine; identical for every arm of a run."""

    backend: BackendName = Field(
        "local", description="'local' (bubblewrap over the host), a container engine driven by its CLI, or pods")
    base_root: str = Field("host", description="local: 'host' (the host's system directories) or a root directory")
    extra_ro_binds: list[str] = Field(default_factory=list,
                                      description="local: toolchains outside the base root, bound read-only")
    unsafe_no_isolation: bool = False
    images_lock: Path | None = Field(None, description="containers: an image lock file every task's image must match")
    kubeconfig: Path | None = Field(None, description="kubernetes: the kubeconfig (default: $KUBECONFIG, "
                                    "~/.kube/config, or the pod's service account when run in a cluster)")
    kube_context: str | None = None
    kube_namespace: str = "default"
    kube_create_limit: int = Field(16, gt=0, description="kubernetes: pods being created (until scheduled) at once")
    kube_delete_limit: int = Field(16, gt=0, description="kubernetes: pods being deleted at once")
    verifier_network: Literal["swebench", "none"] = Field(
        "swebench", description="a SWE-bench instance's verifier: 'swebench' grades with network as SWE-bench's "
        "harness does (the internet, never this host's or a private address), 'none' offline")
    cache_dir: Path = Field(default_factory=lambda: default_cache_dir())
    work_dir: Path | None = None


class SandboxSpec(BaseModel):
    """Everything that makes two sandboxes behave alike. Its digest goes with every episode: two arms whose
    episodes carry the same digest ran in identical sandboxes."""

    backend: str = "local"
    isolation: str  # bwrap, none, podman, docker
    engine_version: str | None = None  # bubblewrap's or the container engine's
    base_root: str | None = None  # local only
    extra_ro_binds: list[str] = Field(default_factory=list)  # local only
    image: str  # the environment's identity: a build key (local) or an image digest (containers)
    network: bool
    cpus: float
    memory_mb: int
    pids: int
    limits_via: str
    tool_runner_version: str
    leaf_tools_sha256: str

    def digest(self) -> str:
        return hashlib.sha256(self.model_dump_json().encode()).hexdigest()


class GitBaseline(BaseModel):
    """The task's repository as the harness recorded it before the agent started (the agent never had it): what
    patch capture diffs against and what the verifier's repository is put back to (sandbox/shared/git_safe.py).
    Paths are absolute and resolved, inside the sandbox."""

    commit: str  # HEAD before the agent
    workdir: str  # the working directory the agent and the verifier start in
    top: str  # the repository's top directory (the work tree)
    git_dir: str  # its git directory: objects, config, hooks
    config_b64: str | None = None  # git_dir/config before the agent, base64
    link_b64: str | None = None  # top/.git when it was a `gitdir:` file, base64
    restore_as: str | None = None  # who puts the repository back: root, or None where one user runs everything


class Sandbox(Protocol):
    """One running sandbox. Tool calls go to the standard-library tool runner inside it, so every backend gives
    the model byte-for-byte the same observations."""

    @property
    def alive(self) -> bool: ...

    @property
    def closed(self) -> bool: ...

    async def run_tool(self, name: str, arguments: str | dict[str, Any]) -> str:
        """One Leaf tool call; the observation exactly as the model will see it."""

    async def exec(self, command: str, *, timeout: float, cwd: str | None = None,
                   env: dict[str, str] | None = None, user: str | None = None) -> ExecResult:
        """A harness command (build step, oracle, patch capture, verifier) with its own timeout; `user` None is
        the sandbox's default user."""

    def cpu_seconds(self) -> float | None:
        """CPU time its processes used so far, or None where nothing measures it."""

    async def close(self) -> None:
        """Kills every process in it (not asks them)."""


class OpenedSandbox(Protocol):
    """One attempt's sandboxes: the agent's first, then, once every agent process is gone, the verifier's.
    `sandbox` is the one running now."""

    sandbox: Sandbox
    spec: SandboxSpec
    spec_hash: str
    start_seconds: float
    verifier_user: str | None  # who runs test.sh; None is the sandbox's default user
    git_baseline: GitBaseline | None  # the repository before the agent; None where there was none (or no git)

    def cpu_seconds(self) -> float | None:
        """CPU time of every sandbox of this attempt so far."""

    async def quiesce(self) -> None:
        """Kills every process the agent (or the oracle) started; `sandbox` becomes a fresh one over the same
        files, for patch capture."""

    async def start_verifier(self) -> None:
        """`sandbox` becomes the verifier's: the task's tests at /tests and an empty /logs/verifier, in the same
        files (Harbor's shared mode) or in a fresh sandbox from the verifier's environment (separate mode)."""

    async def stop(self) -> None:
        """Kills every process of the current sandbox; its files stay readable through `read_verifier_file`."""

    async def read_verifier_file(self, name: str, limit: int) -> bytes | None:
        """/logs/verifier/<name> as the verifier left it, at most `limit` bytes; None when it does not exist.
        Raises OSError when it cannot be read as a regular file within the limit."""

    async def close(self) -> None:
        """Stops and removes everything of this attempt."""


def verifier_file(name: str) -> str:
    """The path in the sandbox of `read_verifier_file`'s `name`, which must be a plain file name."""
    if "/" in name or name in ("", ".", ".."):
        raise OSError(f"not a file name: {name!r}")
    return f"/logs/verifier/{name}"


def file_from_tar(data: bytes, name: str, limit: int) -> bytes:
    """The one regular file of a tar stream that came out of a sandbox (a container's `cp`, a pod's `tar`), read in
    memory, at most `limit` bytes; a link, a directory, more members or a larger file raise OSError."""
    try:
        with tarfile.open(fileobj=io.BytesIO(data)) as archive:
            members = archive.getmembers()
            if len(members) != 1 or not members[0].isreg():
                raise OSError(f"{name} is not a regular file")
            if members[0].size > limit:
                raise OSError(f"{name} is larger than {limit} bytes")
            handle = archive.extractfile(members[0])
            return handle.read() if handle is not None else b""
    except tarfile.TarError as exc:
        raise OSError(f"the tar stream of {name} is unreadable: {exc}") from None


WRITE_CHUNK_BYTES = 48 * 1024  # its base64 (64 KiB) must fit one argument (128 KiB on Linux)
WRITE_CAP_BYTES = 16 << 20


async def write_file(sandbox: Sandbox, path: str, data: bytes, *, user: str | None = None,
                     timeout: float = 60.0) -> None:
    """Puts `data` at `path` inside the sandbox through the sandbox's own shell, as `user`, in pieces that fit a
    command line: no host path is involved, so it works alike in every backend. For a prediction or a config (at
    most WRITE_CAP_BYTES); trees go in with the backend's own copy."""
    if len(data) > WRITE_CAP_BYTES:
        raise ValueError(f"write_file takes at most {WRITE_CAP_BYTES} bytes, not {len(data)}")
    for start in range(0, max(len(data), 1), WRITE_CHUNK_BYTES):
        encoded = base64.b64encode(data[start:start + WRITE_CHUNK_BYTES]).decode()
        command = f"printf %s {encoded} | base64 -d {'>>' if start else '>'} {shlex.quote(path)}"
        result = await sandbox.exec(command, timeout=timeout, user=user)
        if not result.ok:
            raise SandboxError(f"could not write {path} in the sandbox: "
                               f"{(result.stderr or result.stdout).strip()[-300:]}")
