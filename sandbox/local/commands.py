"""The verifier's sandbox on the local backend: no tool runner, every harness command a bubblewrap of its own.

The verifier runs a few fixed commands (patch capture and the repository's restore, then test.sh), never a tool, so
it needs no long-lived runner: each `exec` starts bubblewrap with `bash -c <command>` as its one child, over the same
files, mounts, limits (one cgroup for all of them) and scratch directories (/tmp, /var/tmp, /run and /root, made by
the host, so what one command leaves there the next one sees, as in one sandbox). Bubblewrap is the PID 1 of each
command's namespace: when the command ends, every process it started ends with it, and its exit status (128 + N for
a signal) comes from bubblewrap on the host, which nothing inside can forge. A start costs a bubblewrap and a shell,
not a Python interpreter with the runner's imports.
"""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import time
from collections.abc import Sequence
from pathlib import Path

from sandbox.local.bwrap import DEFAULT_PATH, SANDBOX_UID, Mount, bwrap_command, require_isolation
from sandbox.local.limits import AppliedLimits, Limits, apply_limits
from sandbox.protocol import ExecResult, SandboxError, SandboxOptions
from sandbox.shared.tool_runner import STREAM_CAP_BYTES

_READ_BYTES = 64 * 1024
_KILL_SECONDS = 10.0


class CommandSandbox:
    """A `Sandbox` whose `exec` runs each command in a fresh bubblewrap over `root`; tools are refused."""

    def __init__(self, root: Path, *, workdir: str, env: dict[str, str], limits: Limits, network: bool,
                 options: SandboxOptions, mounts: Sequence[Mount], scratch: Path):
        require_isolation(options)
        if options.unsafe_no_isolation:
            raise SandboxError("a command sandbox needs bubblewrap")
        self.root, self.workdir, self.env = Path(root), workdir, env
        self._network, self._options, self._mounts = network, options, list(mounts)
        self._memory_mb = limits.memory_mb
        scratch.mkdir(exist_ok=True)
        self._scratch = scratch
        self.limits: AppliedLimits = apply_limits(limits)
        self._lock = asyncio.Lock()
        self._process: asyncio.subprocess.Process | None = None
        self._closed = False

    @property
    def alive(self) -> bool:
        return not self._closed

    @property
    def closed(self) -> bool:
        return self._closed

    async def run_tool(self, name: str, arguments: object) -> str:
        raise SandboxError("the verifier's sandbox runs no tools")

    async def exec(self, command: str, *, timeout: float, cwd: str | None = None,
                   env: dict[str, str] | None = None, user: str | None = None, login: bool = False) -> ExecResult:
        """`command` under `bash -c` (`-lc` with `login`), as the tool runner runs it, in a bubblewrap of its own."""
        if user is not None:
            raise SandboxError(f"the local backend runs every command as uid {SANDBOX_UID}; cannot run as {user!r}")
        async with self._lock:
            if self._closed:
                raise SandboxError("sandbox is not running")
            argv = bwrap_command(self.root, workdir=cwd or self.workdir, env={**self.env, **(env or {})},
                                 network=self._network, options=self._options, mounts=self._mounts,
                                 memory_mb=self._memory_mb, scratch=self._scratch,
                                 command=["/bin/bash", "-lc" if login else "-c", command])
            return await self._run(argv, timeout)

    async def _run(self, argv: list[str], timeout: float) -> ExecResult:
        started = time.monotonic()
        process = await asyncio.create_subprocess_exec(
            *self.limits.wrap(argv), stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
            env={"PATH": DEFAULT_PATH}, cwd="/", start_new_session=True)
        self._process = process
        assert process.stdout is not None and process.stderr is not None
        streams = [_Capped(), _Capped()]
        reading = asyncio.gather(streams[0].read(process.stdout), streams[1].read(process.stderr), process.wait())
        try:
            await asyncio.wait_for(asyncio.shield(reading), timeout)
            finished = True
        except asyncio.TimeoutError:
            finished = False
        finally:
            if process.returncode is None:
                _kill(process)
            try:  # bubblewrap's end takes every process of the command with it: the pipes close
                await asyncio.wait_for(reading, _KILL_SECONDS)
            except asyncio.TimeoutError:
                raise SandboxError(f"a verifier command outlived its sandbox by {_KILL_SECONDS:g}s") from None
            finally:
                self._process = None
        out, err = streams
        return ExecResult(exit_code=process.returncode if finished else None,
                          stdout=out.data.decode("utf-8", "replace"), stderr=err.data.decode("utf-8", "replace"),
                          timed_out=not finished, seconds=round(time.monotonic() - started, 3),
                          truncated_bytes=out.dropped + err.dropped)

    def cpu_seconds(self) -> float | None:
        return self.limits.cpu_seconds()

    async def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        if self._process is not None and self._process.returncode is None:
            _kill(self._process)
            await self._process.wait()
        await self.limits.release()


class _Capped:
    """One output stream, kept up to STREAM_CAP_BYTES as the tool runner keeps it; the rest only counted."""

    def __init__(self) -> None:
        self.data = bytearray()
        self.dropped = 0

    async def read(self, stream: asyncio.StreamReader) -> None:
        while chunk := await stream.read(_READ_BYTES):
            room = STREAM_CAP_BYTES - len(self.data)
            self.data += chunk[:max(room, 0)]
            self.dropped += max(len(chunk) - max(room, 0), 0)


def _kill(process: asyncio.subprocess.Process) -> None:
    try:
        os.killpg(process.pid, signal.SIGKILL)
    except ProcessLookupError:
        pass
