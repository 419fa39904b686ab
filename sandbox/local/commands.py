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
from collections.abc import Callable, Sequence
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
    def scratch(self) -> Path:
        """The host directory whose subdirectories are the sandbox's /tmp, /var/tmp, /run and /root."""
        return self._scratch

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
        first, _ = await self._exec(["/bin/bash", "-lc" if login else "-c", command], timeout, cwd, env, user,
                                    None, 0.0)
        return first

    async def exec_then(self, command: str, *, timeout: float, marker: str, then_timeout: float,
                        env: dict[str, str] | None = None) -> tuple[ExecResult, ExecResult | None]:
        """One bubblewrap for two commands, told apart by `marker`: `command` (the harness's own POSIX sh, run by
        /bin/sh) prints the line `marker` on stdout and on stderr, then `exec`s the second one. (what came before the
        marker on each stream, what came after), each capped and timed on its own: `timeout` until the marker
        reaches the host, `then_timeout` from then on; the second is None when no marker came. The first marker on
        a stream is the only one read, so nothing the second command prints can move the split; its exit status is
        bubblewrap's."""
        return await self._exec(["/bin/sh", "-c", command], timeout, None, env, None, marker.encode(), then_timeout)

    async def _exec(self, command: list[str], timeout: float, cwd: str | None, env: dict[str, str] | None,
                    user: str | None, marker: bytes | None,
                    then_timeout: float) -> tuple[ExecResult, ExecResult | None]:
        if user is not None:
            raise SandboxError(f"the local backend runs every command as uid {SANDBOX_UID}; cannot run as {user!r}")
        async with self._lock:
            if self._closed:
                raise SandboxError("sandbox is not running")
            argv = bwrap_command(self.root, workdir=cwd or self.workdir, env={**self.env, **(env or {})},
                                 network=self._network, options=self._options, mounts=self._mounts,
                                 memory_mb=self._memory_mb, scratch=self._scratch,
                                 command=command)
            return await self._run(argv, timeout, marker, then_timeout)

    async def _run(self, argv: list[str], timeout: float, marker: bytes | None,
                   then_timeout: float) -> tuple[ExecResult, ExecResult | None]:
        loop = asyncio.get_running_loop()
        started = loop.time()
        process = await asyncio.create_subprocess_exec(
            *self.limits.wrap(argv), stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
            env={"PATH": DEFAULT_PATH}, cwd="/", start_new_session=True)
        self._process = process
        assert process.stdout is not None and process.stderr is not None
        marked = asyncio.Event()
        out, err = _Split(marker, marked.set), _Split(marker, None)
        reading = asyncio.ensure_future(asyncio.gather(out.read(process.stdout), err.read(process.stderr),
                                                       process.wait()))
        deadline, second_started = started + timeout, None
        waiting: set[asyncio.Future] = {reading, asyncio.ensure_future(marked.wait())}
        try:
            while not reading.done():
                done, _ = await asyncio.wait(waiting, timeout=max(0.0, deadline - loop.time()),
                                             return_when=asyncio.FIRST_COMPLETED)
                if not done:
                    break
                if second_started is None and marked.is_set():  # the second command's own time starts now
                    second_started, deadline = loop.time(), loop.time() + then_timeout
                    waiting = {reading}
        finally:
            for waiter in waiting - {reading}:
                waiter.cancel()
            finished = reading.done()
            if process.returncode is None:
                _kill(process)
            try:  # bubblewrap's end takes every process of the command with it: the pipes close
                await asyncio.wait_for(reading, _KILL_SECONDS)
            except asyncio.TimeoutError:
                raise SandboxError(f"a verifier command outlived its sandbox by {_KILL_SECONDS:g}s") from None
            finally:
                self._process = None
        ended = loop.time()
        if second_started is None:
            return out.result(0, err, process.returncode if finished else None, not finished, ended - started), None
        first = out.result(0, err, 0, False, second_started - started)
        return first, out.result(1, err, process.returncode if finished else None, not finished,
                                 ended - second_started)

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

    def add(self, chunk: bytes) -> None:
        room = max(STREAM_CAP_BYTES - len(self.data), 0)
        self.data += chunk[:room]
        self.dropped += max(len(chunk) - room, 0)


class _Split:
    """One output stream, split at the first line that is `marker` (None: never split): each part capped."""

    def __init__(self, marker: bytes | None, on_marker: Callable[[], None] | None):
        self.parts = [_Capped()]
        self._marker = b"\n" + marker + b"\n" if marker else None
        self._on_marker = on_marker
        self._held = b""  # the end of the first part, until it cannot be the start of the marker

    async def read(self, stream: asyncio.StreamReader) -> None:
        while chunk := await stream.read(_READ_BYTES):
            self._feed(chunk)
        self.parts[-1].add(self._held)
        self._held = b""

    def _feed(self, chunk: bytes) -> None:
        if self._marker is None or len(self.parts) == 2:
            self.parts[-1].add(chunk)
            return
        data = self._held + chunk
        at = data.find(self._marker)
        if at < 0:
            keep = len(self._marker) - 1
            self.parts[0].add(data[:-keep])
            self._held = data[-keep:]
            return
        self.parts[0].add(data[:at])
        self.parts.append(_Capped())
        self.parts[1].add(data[at + len(self._marker):])
        self._held = b""
        if self._on_marker is not None:
            self._on_marker()

    def result(self, part: int, stderr: _Split, exit_code: int | None, timed_out: bool,
               seconds: float) -> ExecResult:
        """Part `part` of this stream (stdout) and of `stderr` as one command's result."""
        out = self.parts[part] if part < len(self.parts) else _Capped()
        err = stderr.parts[part] if part < len(stderr.parts) else _Capped()
        return ExecResult(exit_code=exit_code, stdout=out.data.decode("utf-8", "replace"),
                          stderr=err.data.decode("utf-8", "replace"), timed_out=timed_out,
                          seconds=round(seconds, 3), truncated_bytes=out.dropped + err.dropped)


def _kill(process: asyncio.subprocess.Process) -> None:
    try:
        os.killpg(process.pid, signal.SIGKILL)
    except ProcessLookupError:
        pass
