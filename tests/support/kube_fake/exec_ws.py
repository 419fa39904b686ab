"""`pods/{name}/exec` over a websocket, as the API server and kubelet serve it to the official client and to
`kubectl exec`: subprotocol v5.channel.k8s.io or v4.channel.k8s.io (the client's first choice we know, echoed);
every binary frame starts with its channel byte: 0 stdin (client to server), 1 stdout, 2 stderr, 3 the exit
status as JSON (then the server closes); v5 adds 255, whose next byte names a channel the client has closed
(stdin: end of input). Text frames from the client are taken as UTF-8.

A handler runs the command: `ExecCall` gives it the command, the pod and the streams. Output is sent as it comes,
each send waiting for the socket to drain; stdin is handed over through a short queue, so a handler that does not
read stops the socket being read. Nothing is buffered without bound either way.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import re
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any

from aiohttp import WSMsgType, web

__all__ = ["ExecCall", "ExecHandler", "PROTOCOLS", "engine_exec", "exit_status", "scripted_exec", "serve_exec"]

V5, V4 = "v5.channel.k8s.io", "v4.channel.k8s.io"
PROTOCOLS = (V5, V4)
STDIN, STDOUT, STDERR, STATUS, CLOSE = 0, 1, 2, 3, 255
FRAME_BYTES = 1 << 20  # output is sent in frames of at most this much
MAX_CLIENT_FRAME = 1 << 30  # one stdin frame may carry a whole tar stream
KILLED = 137  # the exit code of a command whose container was killed under it (SIGKILL)
CLOSE_WAIT = 2.0  # seconds to wait for the client's answer to our close (websocket-client often sends none)
_STDIN_QUEUE = 8  # stdin frames held for a handler that is not reading


@dataclass(eq=False)  # each call is itself: held in sets of live execs
class ExecCall:
    """One exec: what the client asked for and the streams to answer on."""

    namespace: str
    pod_name: str
    container: str
    command: list[str]
    stdin: bool
    tty: bool  # taken as asked but not honoured: no terminal, no resize channel
    pod: dict[str, Any]
    stdout: bool = True  # an output the client did not ask for is dropped, as the kubelet never opens it
    stderr: bool = True
    _inbox: asyncio.Queue[bytes | None] = field(repr=False, default_factory=lambda: asyncio.Queue(_STDIN_QUEUE))
    _send: Callable[[int, bytes], Awaitable[None]] | None = field(repr=False, default=None)
    _eof: bool = field(repr=False, default=False)
    _killed: asyncio.Event = field(repr=False, default_factory=asyncio.Event)

    def kill(self) -> None:
        """The container went away (pod deleted, evicted): the command ends as killed, exit code 137."""
        self._killed.set()

    async def read(self) -> bytes:
        """The next stdin chunk as the client sent it; b"" once stdin is closed (or was never asked for)."""
        if self._eof or not self.stdin:
            return b""
        chunk = await self._inbox.get()
        if chunk is None:
            self._eof = True
            return b""
        return chunk

    async def write_stdout(self, data: bytes) -> None:
        if self.stdout:
            await self._write(STDOUT, data)

    async def write_stderr(self, data: bytes) -> None:
        if self.stderr:
            await self._write(STDERR, data)

    async def _write(self, channel: int, data: bytes) -> None:
        assert self._send is not None
        for start in range(0, len(data), FRAME_BYTES):
            await self._send(channel, data[start:start + FRAME_BYTES])


ExecHandler = Callable[[ExecCall], Awaitable[int]]


def exit_status(code: int) -> dict[str, Any]:
    """The channel-3 status a kubelet sends when the command ends."""
    if code == 0:
        return {"metadata": {}, "status": "Success"}
    return {"metadata": {}, "status": "Failure",
            "message": f"command terminated with non-zero exit code: exit status {code}",
            "reason": "NonZeroExitCode", "details": {"causes": [{"reason": "ExitCode", "message": str(code)}]}}


async def serve_exec(request: web.BaseRequest, call: ExecCall, handler: ExecHandler,
                     on_done: Callable[[ExecCall, int | None], None] | None = None) -> web.WebSocketResponse:
    """Upgrades `request`, runs `handler(call)` against the socket, sends its exit status and closes. A client that
    goes away cancels the handler (whose own cleanup ends what it started)."""
    socket = web.WebSocketResponse(protocols=PROTOCOLS, max_msg_size=MAX_CLIENT_FRAME, autoclose=True,
                                   timeout=CLOSE_WAIT)
    await socket.prepare(request)
    v5 = socket.ws_protocol == V5
    lock = asyncio.Lock()  # stdout and stderr pumps send concurrently; a frame is written whole

    async def send(channel: int, data: bytes) -> None:
        async with lock:
            await socket.send_bytes(bytes([channel]) + data)

    call._send = send
    reader = asyncio.create_task(_read_client(socket, call, v5))
    runner = asyncio.create_task(handler(call))
    killed = asyncio.create_task(call._killed.wait())
    code: int | None = None
    try:
        await asyncio.wait({reader, runner, killed}, return_when=asyncio.FIRST_COMPLETED)
        if runner.done() or killed.done():
            code = runner.result() if runner.done() else KILLED
            if on_done is not None:
                on_done(call, code)
                on_done = None
            # Our reader stops first: a close() that finds it receiving drops the connection at once, and what the
            # client sent but we did not read makes the kernel reset it, losing the status on the client's side.
            # Without it, close() reads the client's frames up to its close answer, as a kubelet keeps copying stdin.
            reader.cancel()
            await asyncio.gather(reader, return_exceptions=True)
            with contextlib.suppress(ConnectionError, RuntimeError):
                await send(STATUS, json.dumps(exit_status(code)).encode())
                await socket.close()
    except Exception as exc:  # a handler that broke: the kubelet reports it as an internal error
        with contextlib.suppress(ConnectionError, RuntimeError):
            await send(STATUS, json.dumps({"metadata": {}, "status": "Failure", "reason": "InternalError",
                                           "message": f"kube-fake exec handler failed: {exc!r}"}).encode())
            await socket.close()
    finally:
        for task in (runner, reader, killed):
            task.cancel()
        await asyncio.gather(runner, reader, killed, return_exceptions=True)
        if on_done is not None:
            on_done(call, code)
    return socket


async def _read_client(socket: web.WebSocketResponse, call: ExecCall, v5: bool) -> None:
    """Client frames into the call's stdin until the client closes the socket."""
    async for message in socket:
        if message.type == WSMsgType.BINARY:
            data = message.data
        elif message.type == WSMsgType.TEXT:
            data = message.data.encode()
        else:
            break
        if not data:
            continue
        if data[0] == STDIN and len(data) > 1 and call.stdin:
            await call._inbox.put(data[1:])
        elif data[0] == CLOSE and v5 and data[1:2] == bytes([STDIN]):
            await call._inbox.put(None)
    # The socket is gone: anything still reading stdin sees its end.
    with contextlib.suppress(asyncio.QueueFull):
        call._inbox.put_nowait(None)


async def scripted_exec(call: ExecCall) -> int:
    """What instant pods answer, without running anything: `echo ARGS`, `cat` (stdin back), `true`, `false`,
    `sleep N`, `sh -c 'exit N'`; anything else exits 127 saying so on stderr."""
    command = call.command
    if command[:1] == ["echo"]:
        await call.write_stdout((" ".join(command[1:]) + "\n").encode())
        return 0
    if command == ["cat"]:
        while chunk := await call.read():
            await call.write_stdout(chunk)
        return 0
    if command in (["true"], ["false"]):
        return 0 if command == ["true"] else 1
    if len(command) == 2 and command[0] == "sleep":
        await asyncio.sleep(float(command[1]))
        return 0
    exiting = re.fullmatch(r"\s*exit\s+(\d+)\s*", command[2]) if command[:2] == ["sh", "-c"] and len(command) == 3 \
        else None
    if exiting:
        return int(exiting.group(1))
    await call.write_stderr(f"kube-fake: no scripted answer for {command!r}\n".encode())
    return 127


def engine_exec(engine: Any, container: str) -> ExecHandler:
    """Runs the command in a real container with `<engine> exec [-i]`, stdin streamed in and output out as they
    come. The container's user and working directory (set when it was started) apply, as a kubelet's exec does."""
    from sandbox.container.engine import client_env

    async def handler(call: ExecCall) -> int:
        argv = engine.command("exec", *(["-i"] if call.stdin else []), container, *call.command)
        process = await asyncio.create_subprocess_exec(
            *argv, stdin=asyncio.subprocess.PIPE if call.stdin else asyncio.subprocess.DEVNULL,
            stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE, env=client_env())
        feeding = asyncio.create_task(_feed(call, process)) if call.stdin else None
        try:
            await asyncio.gather(_pump(process.stdout, call.write_stdout), _pump(process.stderr, call.write_stderr))
            return await process.wait()
        finally:
            if feeding is not None:
                feeding.cancel()
            if process.returncode is None:
                process.kill()
                await process.wait()

    return handler


async def _feed(call: ExecCall, process: asyncio.subprocess.Process) -> None:
    assert process.stdin is not None
    try:
        while chunk := await call.read():
            process.stdin.write(chunk)
            await process.stdin.drain()
        process.stdin.close()
    except (BrokenPipeError, ConnectionResetError):
        pass  # the command ended without reading all of its input


async def _pump(stream: asyncio.StreamReader | None, write: Callable[[bytes], Awaitable[None]]) -> None:
    assert stream is not None
    while chunk := await stream.read(64 * 1024):
        await write(chunk)
