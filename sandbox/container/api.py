"""The container engine's REST API over its unix socket (Docker's API, which Podman also serves), through aiodocker
(aio-libs): what an attempt does to its containers without a command line per operation. A container is created
and started in two requests, a harness command is one exec request whose output comes back on the same connection,
and the tool runner keeps one exec stream (stdin in, stdout and stderr out) for the whole attempt.

The socket is the engine's own when one is configured (`CONTAINER_HOST` or `DOCKER_HOST` as `unix://PATH`, or
Docker's `/var/run/docker.sock`); for Podman without one, each leafcost process starts its own `podman system
service` on a private socket, under a keeper that stops it when that process dies (the watchdog's pipe). Without a
socket (or aiodocker) the backend drives the command line, as before; `LEAFCOST_CONTAINER_API=cli` asks for that.

Containers are the engine's either way: the command line and the API see the same ones, so images, builds, the
watchdog and leftover removal keep the command line."""

from __future__ import annotations

import asyncio
import functools
import io
import os
import re
import subprocess
import sys
import tarfile
import tempfile
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from sandbox.protocol import ExecResult
from sandbox.shared.runner_client import ANSWER_LIMIT_BYTES, StreamStdin
from sandbox.shared.tool_runner import STREAM_CAP_BYTES

_SERVICE_START_SEC = 20.0
_MEMORY = re.compile(r"(\d+)([bkmg]?)", re.IGNORECASE)
_UNITS = {"": 1, "b": 1, "k": 1 << 10, "m": 1 << 20, "g": 1 << 30}
_services: dict[tuple[int, tuple[str, ...]], tuple[int, str]] = {}
_lock = threading.Lock()
# The keeper: starts the service, waits for its owner's pipe to close (the owner exited or was killed), stops it
# and removes the socket's private directory (its first argument).
_KEEPER = """import os, shutil, subprocess, sys
service = subprocess.Popen(sys.argv[2:], stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                           stderr=subprocess.DEVNULL)
while os.read(0, 4096):
    pass
service.terminate()
try:
    service.wait(10)
except subprocess.TimeoutExpired:
    service.kill()
    service.wait()
shutil.rmtree(sys.argv[1], ignore_errors=True)
"""


def api_socket(engine_name: str, engine_argv: tuple[str, ...]) -> str | None:
    """The unix socket of the engine's API for this process, or None (the command line is used)."""
    if os.environ.get("LEAFCOST_CONTAINER_API", "").lower() == "cli" or not _has_client():
        return None
    configured = os.environ.get("CONTAINER_HOST" if engine_name == "podman" else "DOCKER_HOST", "")
    if configured:
        return configured.removeprefix("unix://") if configured.startswith("unix://") else None
    if engine_name == "docker":
        return "/var/run/docker.sock" if Path("/var/run/docker.sock").exists() else None
    return _own_service(engine_argv)


@functools.cache
def _has_client() -> bool:
    try:
        import aiodocker  # noqa: F401
    except ImportError:
        return False
    return True


def _own_service(engine_argv: tuple[str, ...]) -> str | None:
    """This process's `podman system service` (started once, again after a fork), ready to answer; None if it
    does not come up."""
    key = (os.getpid(), engine_argv)
    with _lock:
        if key in _services:
            return _services[key][1]
        directory = tempfile.mkdtemp(prefix="leafcost-podman-")
        socket = os.path.join(directory, "podman.sock")
        read_end, write_end = os.pipe()
        try:
            subprocess.Popen([sys.executable, "-I", "-c", _KEEPER, directory, *engine_argv, "system", "service",
                              "--time", "0", f"unix://{socket}"], stdin=read_end, stdout=subprocess.DEVNULL,
                             stderr=subprocess.DEVNULL, start_new_session=True, close_fds=True)
        finally:
            os.close(read_end)
        deadline = time.monotonic() + _SERVICE_START_SEC
        while not _answers(socket):
            if time.monotonic() > deadline:
                os.close(write_end)  # the keeper stops the service
                _services[key] = (-1, "")
                return None
            time.sleep(0.05)
        _services[key] = (write_end, socket)  # the write end stays open for this process's life
        return socket


def _answers(socket: str) -> bool:
    return _ping(socket) is not None


def _ping(socket: str) -> str | None:
    """The API version the engine speaks (its `/_ping` answer's `Api-Version`, "" if it names none); None when
    nothing answers. Asked here because aiodocker's own negotiation asks `/version`, which Podman answers slowly
    (~0.4 s: it runs its runtime and conmon to report their versions)."""
    import socket as sockets

    if not os.path.exists(socket):
        return None
    try:
        with sockets.socket(sockets.AF_UNIX, sockets.SOCK_STREAM) as client:
            client.settimeout(2)
            client.connect(socket)
            client.sendall(b"GET /_ping HTTP/1.0\r\nHost: d\r\n\r\n")
            answer = b""
            while b"\r\n\r\n" not in answer and len(answer) < 8192 and (chunk := client.recv(4096)):
                answer += chunk
    except OSError:
        return None
    lines = answer.decode("latin-1").split("\r\n")
    if lines[0].split(" ")[1:2] != ["200"]:
        return None
    return next((line.split(":", 1)[1].strip() for line in lines[1:] if line.lower().startswith("api-version:")), "")


def container_config(flags: list[str], image: str, command: list[str], env: dict[str, str]) -> dict[str, Any] | None:
    """The API's create body for `run -d FLAGS -- IMAGE COMMAND` as this backend writes it, with `--env NAME` taking
    its value from `env` (else the host's environment, as the command line's client does). None for a flag it does
    not translate: that container is run through the command line."""
    config: dict[str, Any] = {"Image": image, "Cmd": command, "Labels": {}, "Env": []}
    host: dict[str, Any] = {"Binds": [], "Ulimits": []}
    index = 0
    while index < len(flags):
        flag = flags[index]
        if flag == "--init":
            host["Init"] = True
            index += 1
            continue
        if index + 1 >= len(flags):
            return None
        value = flags[index + 1]
        index += 2
        if flag == "--name":
            config["name"] = value
        elif flag == "--ulimit":
            name, _, limits = value.partition("=")
            soft, _, hard = limits.partition(":")
            host["Ulimits"].append({"Name": name, "Soft": int(soft), "Hard": int(hard or soft)})
        elif flag == "--cpus":
            host["NanoCpus"] = int(float(value) * 1e9)
        elif flag in ("--memory", "--memory-swap"):
            found = _MEMORY.fullmatch(value)
            if found is None:
                return None
            host["Memory" if flag == "--memory" else "MemorySwap"] = int(found[1]) * _UNITS[found[2].lower()]
        elif flag == "--pids-limit":
            host["PidsLimit"] = int(value)
        elif flag == "--label":
            key, _, text = value.partition("=")
            config["Labels"][key] = text
        elif flag == "--network" and (value == "none" or value.startswith("container:")):
            host["NetworkMode"] = value
        elif flag == "--workdir":
            config["WorkingDir"] = value
        elif flag == "--user":
            config["User"] = value
        elif flag == "--env" and "=" not in value:
            found_value = env.get(value, os.environ.get(value))
            if found_value is not None:
                config["Env"].append(f"{value}={found_value}")
        elif flag == "--mount":
            parts = dict(part.partition("=")[::2] for part in value.split(","))
            if set(parts) != {"type", "src", "dst", "ro"} or parts["type"] != "bind" or parts["ro"] != "true":
                return None
            host["Binds"].append(f"{parts['src']}:{parts['dst']}:ro")
        else:
            return None
    config["HostConfig"] = host
    return config


@dataclass
class RunnerStream:
    """A command's exec stream: `stdout` a StreamReader, stderr's tail kept for error messages."""

    stream: Any
    execution: Any
    stdout: asyncio.StreamReader = field(default_factory=lambda: asyncio.StreamReader(limit=ANSWER_LIMIT_BYTES))
    stderr: bytearray = field(default_factory=bytearray)
    pump: asyncio.Task | None = None
    writer: StreamStdin | None = None

    async def read(self) -> None:
        try:
            while (message := await self.stream.read_out()) is not None:
                if message.stream == 2:
                    self.stderr = (self.stderr + message.data)[-4096:]
                    continue
                self.stdout.feed_data(message.data)
                # Backpressure, as a pipe's StreamReader applies it: nothing more is read off the connection
                # while its reader holds more than its limit unread (the engine then stops reading the command).
                while len(self.stdout._buffer) > ANSWER_LIMIT_BYTES:  # type: ignore[attr-defined]
                    await asyncio.sleep(0.01)
        except Exception:  # noqa: BLE001 - a broken connection ends the stream like its end does
            pass
        finally:
            self.stdout.feed_eof()

    async def exit_code(self, wait: float = 5.0) -> int | None:
        """The command's exit code once its stream ended (None if it still runs after `wait` seconds)."""
        if self.pump is not None:
            try:
                await asyncio.wait_for(asyncio.shield(self.pump), wait)
            except asyncio.TimeoutError:
                return None
        try:
            return (await self.execution.inspect()).get("ExitCode")
        except Exception:  # noqa: BLE001 - the engine forgot it: unknown
            return None

    async def close(self) -> None:
        try:
            await self.stream.close()
        except Exception:  # noqa: BLE001 - already gone
            pass
        if self.pump is not None:
            self.pump.cancel()


async def send_stdin(stream: RunnerStream, data: bytes) -> None:
    """One drain of the runner's requests over the exec stream's stdin (sandbox.shared.runner_client.StreamStdin)."""
    try:
        await stream.stream.write_in(data)
    except (RuntimeError, OSError, AssertionError) as exc:  # a closed stream: a broken pipe
        raise BrokenPipeError(str(exc)) from None


class EngineApi:
    """One attempt's client of the engine's API (closed with the attempt)."""

    def __init__(self, socket: str, version: str = ""):
        import aiodocker

        self.errors: tuple[type[BaseException], ...] = (aiodocker.DockerError, OSError)
        self.docker = aiodocker.Docker(url=f"unix://{socket}", api_version=f"v{version}" if version else "auto")

    def _container(self, name: str) -> Any:
        return self.docker.containers.container(name)

    async def run(self, config: dict[str, Any]) -> str:
        """Creates and starts a container; its name."""
        body = dict(config)
        name = body.pop("name")
        container = await self.docker.containers.create(body, name=name)
        await container.start()
        return name

    async def state(self, name: str) -> dict[str, Any]:
        """The container's State (Running, Pid...); empty when the engine does not know it."""
        try:
            return (await self._container(name).show()).get("State", {})
        except self.errors:
            return {}

    async def wait_exit(self, name: str, timeout: float) -> int | None:
        """The container's exit code once it no longer runs (at once if it already stopped); None if it still runs
        after `timeout` seconds, or the engine cannot say."""
        if timeout <= 0:
            return None
        try:
            answer = await asyncio.wait_for(self._container(name).wait(condition="not-running"), timeout)
        except (asyncio.TimeoutError, *self.errors):
            return None
        code = answer.get("StatusCode") if isinstance(answer, dict) else None
        return code if isinstance(code, int) else None

    async def pause(self, name: str) -> bool:
        try:
            await self._container(name).pause()
        except self.errors:
            return False
        return True

    async def unpause(self, name: str) -> None:
        try:
            await self._container(name).unpause()
        except self.errors:
            pass

    async def stop(self, name: str) -> None:
        try:
            await self._container(name).stop(t=0, timeout=60)
        except self.errors:
            pass

    async def remove(self, *names: str) -> None:
        for name in names:
            try:
                await self._container(name).delete(force=True, timeout=120)
            except self.errors:
                pass

    async def exec(self, name: str, argv: list[str], *, user: str | None, workdir: str,
                   env: dict[str, str] | None, timeout: float) -> ExecResult:
        """A command to completion, stdout and stderr each kept up to STREAM_CAP_BYTES; on timeout the stream is
        closed (what runs in the container is the caller's to stop, as with the command line)."""
        started = time.monotonic()
        kept: dict[int, bytearray] = {1: bytearray(), 2: bytearray()}
        dropped = 0
        execution = await self._container(name).exec(argv, stdout=True, stderr=True, user=user or "",
                                                     environment=env or None, workdir=workdir)
        stream = execution.start(detach=False)

        async def drain() -> None:
            nonlocal dropped
            while (message := await stream.read_out()) is not None:
                into = kept.get(message.stream, kept[1])
                room = max(STREAM_CAP_BYTES - len(into), 0)
                into += message.data[:room]
                dropped += max(len(message.data) - room, 0)

        timed_out = False
        try:
            await asyncio.wait_for(drain(), timeout)
        except asyncio.TimeoutError:
            timed_out = True
        finally:
            await stream.close()
        code = None if timed_out else (await execution.inspect()).get("ExitCode")
        text = {key: data.decode("utf-8", "replace") for key, data in kept.items()}
        return ExecResult(exit_code=code, stdout=text[1], stderr=text[2], timed_out=timed_out,
                          seconds=time.monotonic() - started, truncated_bytes=dropped)

    async def open_stream(self, name: str, argv: list[str], *, user: str | None, workdir: str) -> RunnerStream:
        """A long-lived command with stdin: the tool runner's one stream for the attempt."""
        execution = await self._container(name).exec(argv, stdin=True, stdout=True, stderr=True, user=user or "",
                                                     workdir=workdir)
        stream = execution.start(detach=False)
        await stream._init()  # the hijacked connection, before anything is written
        runner = RunnerStream(stream=stream, execution=execution)
        runner.pump = asyncio.get_running_loop().create_task(runner.read())
        runner.writer = StreamStdin(functools.partial(send_stdin, runner), runner.close)
        return runner

    async def put_directory(self, name: str, source: Path, target: str) -> None:
        """`cp SOURCE NAME:TARGET` for a directory whose target does not exist yet: the copy is owned by root, as
        the command line's copy is."""
        def owned_by_root(member: tarfile.TarInfo) -> tarfile.TarInfo:
            member.uid = member.gid = 0
            member.uname = member.gname = "root"
            return member

        buffer = io.BytesIO()
        with tarfile.open(fileobj=buffer, mode="w") as archive:
            archive.add(str(source), arcname=os.path.basename(target.rstrip("/")), filter=owned_by_root)
        parent = os.path.dirname(target.rstrip("/")) or "/"
        await self._container(name).put_archive(parent, buffer.getvalue())

    async def read_member(self, name: str, directory: str, member_name: str, limit: int) -> bytes | None:
        """The regular file `member_name` of the container's `directory`, from the archive of that directory read
        as it streams (at most `limit` bytes); None when it does not exist; OSError for anything but a regular
        file within the limit."""
        loop = asyncio.get_running_loop()
        try:
            async with self.docker._query(f"containers/{name}/archive", method="GET",
                                          params={"path": directory}) as response:
                return await asyncio.to_thread(_member, _Chunks(response.content, loop), member_name, limit)
        except self.errors[0] as exc:  # the engine's answer, not the file's
            if is_missing(exc):
                return None
            raise OSError(f"cannot copy {member_name}'s directory out of the container: "
                          f"{getattr(exc, 'message', exc)}") from None

    async def close(self) -> None:
        await self.docker.close()


class _Chunks(io.RawIOBase):
    """A blocking reader (for tarfile, in a thread) over an aiohttp response body read on the event loop."""

    def __init__(self, content: Any, loop: asyncio.AbstractEventLoop):
        self._content, self._loop, self._buffer = content, loop, b""

    def readable(self) -> bool:
        return True

    def readinto(self, target: Any) -> int:
        if not self._buffer:
            self._buffer = asyncio.run_coroutine_threadsafe(self._content.read(1 << 16), self._loop).result()
        count = min(len(target), len(self._buffer))
        target[:count] = self._buffer[:count]
        self._buffer = self._buffer[count:]
        return count


def _member(reader: io.RawIOBase, name: str, limit: int) -> bytes | None:
    try:
        return directory_member(io.BufferedReader(reader), name, limit)
    except tarfile.TarError as exc:
        raise OSError(f"the tar stream of {name}'s directory is unreadable: {exc}") from None


def directory_member(stream: Any, name: str, limit: int) -> bytes | None:
    """The regular file `name` of the directory archived in the tar `stream` (read as it comes, at most `limit`
    bytes); None when the archive has no such member; OSError for a link, a directory, a sparse file or anything
    larger. A broken archive raises tarfile.TarError: the caller knows whether the engine said why."""
    with tarfile.open(fileobj=stream, mode="r|") as archive:
        top = None
        for member in archive:
            top = top if top is not None else member.name.rstrip("/")
            if member.name != f"{top}/{name}":
                continue
            if not member.isreg() or member.issparse():
                raise OSError(f"{name} is not a regular file")
            if member.size > limit:
                raise OSError(f"{name} is larger than {limit} bytes")
            handle = archive.extractfile(member)
            return handle.read() if handle is not None else b""
    return None


async def connect(engine_name: str, engine_argv: tuple[str, ...]) -> EngineApi | None:
    socket = await asyncio.to_thread(api_socket, engine_name, engine_argv)
    if not socket:
        return None
    version = await asyncio.to_thread(_ping, socket)
    return None if version is None else EngineApi(socket, version)


def is_missing(error: BaseException) -> bool:
    """The engine's 404 for a path that does not exist (not for a container that does not)."""
    return getattr(error, "status", None) == 404 and "no such container" not in str(getattr(error, "message", ""))
