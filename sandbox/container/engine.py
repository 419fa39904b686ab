"""A container engine (Podman or Docker) driven through its command line, as Harbor and Inspect drive Docker: the
same verbs for both. Everything the container backend and the image lock ask of an engine goes through here."""

from __future__ import annotations

import asyncio
import functools
import os
import shutil
import subprocess
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from sandbox.protocol import SandboxError

ENGINES = ("podman", "docker")
# Podman's default limits for open files and processes exceed what some hosts allow a container (setrlimit fails
# at start); explicit values well above what a task needs start everywhere.
ULIMITS = ["--ulimit", "nofile=1024:1024", "--ulimit", "nproc=4096:4096"]
OUTPUT_CAP_BYTES = 4 << 20


class EngineError(SandboxError):
    """An engine command failed; `stderr` holds what it said."""

    def __init__(self, message: str, stderr: str = ""):
        super().__init__(message)
        self.stderr = stderr


@dataclass(frozen=True)
class Completed:
    code: int
    stdout: bytes
    stderr: str

    @property
    def text(self) -> str:
        return self.stdout.decode("utf-8", "replace")

    def last_line(self) -> str:
        lines = [line.strip() for line in self.stderr.splitlines() if line.strip()]
        return lines[-1][:300] if lines else f"exit code {self.code}"


@dataclass(frozen=True)
class Engine:
    name: str
    argv: tuple[str, ...]  # the program and its global flags
    version: str

    def command(self, *args: str) -> list[str]:
        return [*self.argv, *args]

    def remove_args(self, *containers: str) -> list[str]:
        """Kill and remove at once (`docker rm` has no stop timeout; Podman's default would wait 10 s)."""
        return ["rm", "-f", *(["-t", "0"] if self.name == "podman" else []), *containers]

    async def run(self, *args: str, timeout: float = 120.0, check: bool = True, stdin: bytes | None = None,
                  env: dict[str, str] | None = None, prefix: Sequence[str] = (), merged: bool = False) -> Completed:
        """One engine command to completion, its output capped; `check` raises EngineError on a non-zero exit.
        `prefix` runs the client through another program (nsenter, for a build's own network namespace). `merged`
        puts stderr into stdout in the order written and keeps the end of it (a build: the failing step's output
        is on stderr between its STEP line and the verdict)."""
        process = await asyncio.create_subprocess_exec(
            *prefix, *self.command(*args), stdin=subprocess.PIPE if stdin is not None else subprocess.DEVNULL,
            stdout=subprocess.PIPE, stderr=subprocess.STDOUT if merged else subprocess.PIPE, env=client_env(env))
        try:
            stdout, stderr = await asyncio.wait_for(process.communicate(stdin), timeout)
        except asyncio.TimeoutError:
            process.kill()
            await process.wait()
            raise EngineError(f"`{self.name} {args[0]}` ran longer than {timeout:g}s") from None
        stdout = stdout[-OUTPUT_CAP_BYTES:] if merged else stdout[:OUTPUT_CAP_BYTES]
        done = Completed(process.returncode or 0, stdout,
                         (stderr or b"")[-OUTPUT_CAP_BYTES:].decode("utf-8", "replace"))
        if check and done.code != 0:
            raise EngineError(f"`{self.name} {' '.join(args[:2])}` failed: {done.last_line()}", done.stderr)
        return done


def client_env(extra: dict[str, str] | None = None) -> dict[str, str]:
    """The engine client's environment: the host's (it finds its configuration and socket there) plus `extra`,
    whose names an `--env NAME` flag forwards into a container without the value ever being on a command line."""
    return {**os.environ, **(extra or {})}


def hybrid_cgroups() -> bool:
    """cgroup v1 controllers with the v2 hierarchy beside them, which crun (Podman's default runtime) refuses."""
    root = Path("/sys/fs/cgroup")
    return (root / "unified").is_dir() and not (root / "cgroup.controllers").exists()


@functools.cache
def engine(name: str) -> Engine:
    """The engine `name`, asked once per process for its version; SandboxError says what to install."""
    if name not in ENGINES:
        raise SandboxError(f"unknown container engine {name!r}; expected one of {', '.join(ENGINES)}")
    program = shutil.which(name)
    if program is None:
        hint = "apt-get install -y podman runc" if name == "podman" else "install Docker Engine (docs.docker.com)"
        raise SandboxError(f"the {name} backend needs `{name}`, which is not installed: {hint}")
    argv: tuple[str, ...] = (program,)
    if name == "podman" and hybrid_cgroups() and shutil.which("runc"):
        argv += ("--runtime", "runc")
    probe = subprocess.run([*argv, "version", "--format", "{{.Client.Version}}"], capture_output=True, text=True)
    if probe.returncode != 0:
        reason = (probe.stderr.strip().splitlines() or [f"exit code {probe.returncode}"])[-1]
        raise SandboxError(f"`{name} version` failed, so the {name} backend cannot run: {reason}")
    return Engine(name=name, argv=argv, version=f"{name} {probe.stdout.strip()}")


def require_engine(name: str) -> Engine:
    return engine(name)
