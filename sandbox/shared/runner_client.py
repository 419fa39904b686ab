"""The host's side of the tool runner's JSON-lines protocol, whatever carries it (two pipes into a bubblewrap
sandbox, the stdin and stdout of a container engine's `exec -i`). One request at a time, answers checked against
their request id; any answer that cannot be trusted kills the sandbox."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Awaitable, Callable
from typing import Any

from sandbox.shared import tool_runner
from sandbox.leaf_tools import bash_arguments
from sandbox.protocol import ExecResult, SandboxError

TOOL_GRACE_SEC = 15.0
# The longest answer line the host reads: the runner trims every answer to fit its own cap.
ANSWER_LIMIT_BYTES = tool_runner.ANSWER_CAP_BYTES + (1 << 20)
RUNNER_IN_SANDBOX = "/.leafcost/tool_runner.py"


class RunnerClient:
    """`kill` ends the sandbox (every process in it); `exit_reason` says why the runner's stream ended."""

    def __init__(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter, *,
                 kill: Callable[[], Awaitable[None]], exit_reason: Callable[[], Awaitable[str]]):
        self._reader, self._writer = reader, writer
        self._kill, self._exit_reason = kill, exit_reason
        self._lock = asyncio.Lock()
        self._next_id = 0
        self.dead = False

    async def hello(self, timeout: float = 30.0) -> dict[str, Any]:
        hello = await self._read_line(timeout)
        if not hello.get("ready"):
            await self._die()
            raise SandboxError(f"tool runner did not start: {str(hello)[:500]}")
        return hello

    async def tool(self, name: str, arguments: str | dict[str, Any]) -> str:
        """One Leaf tool call; the observation text exactly as the model will see it."""
        answer = await self.request({"op": "tool", "name": name, "arguments": arguments},
                                    timeout=tool_deadline(name, arguments))
        if not isinstance(answer.get("output"), str):
            await self._die()
            raise SandboxError(f"tool runner answered without an observation: {str(answer)[:200]}")
        return answer["output"]

    async def exec(self, command: str, *, timeout: float, cwd: str | None, env: dict[str, str] | None,
                   login: bool = False) -> ExecResult:
        answer = await self.request({"op": "exec", "command": command, "timeout": timeout, "cwd": cwd, "env": env,
                                     "login": login}, timeout=timeout + TOOL_GRACE_SEC)
        try:
            return ExecResult.model_validate(answer)
        except ValueError:
            await self._die()
            raise SandboxError(f"tool runner answered an exec with garbage: {str(answer)[:200]}") from None

    async def request(self, payload: dict[str, Any], timeout: float) -> dict[str, Any]:
        async with self._lock:
            if self.dead:
                raise SandboxError(f"sandbox is not running{await self._exit_reason()}")
            self._next_id += 1
            payload = {"id": self._next_id, **payload}
            try:
                self._writer.write((json.dumps(payload) + "\n").encode())
                await self._writer.drain()
            except (BrokenPipeError, ConnectionResetError):
                self.dead = True
                raise SandboxError(f"sandbox died{await self._exit_reason()}") from None
            answer = await self._read_line(timeout)
            if answer.get("id") != self._next_id:
                await self._die()  # the protocol is out of step: nothing it says from here on can be trusted
                raise SandboxError(f"tool runner answered out of order: {str(answer)[:200]}")
            if "error" in answer:
                raise SandboxError(f"tool runner refused the request: {str(answer['error'])[:500]}")
            return answer

    async def _read_line(self, timeout: float) -> dict[str, Any]:
        try:
            line = await asyncio.wait_for(self._reader.readline(), timeout)
        except asyncio.TimeoutError:
            await self._die()
            raise SandboxError(f"tool runner gave no answer within {timeout:.0f}s; sandbox killed") from None
        except ValueError:  # asyncio's limit: the runner never writes lines this long, so something else did
            await self._die()
            raise SandboxError(f"tool runner answer exceeded {ANSWER_LIMIT_BYTES} bytes; sandbox killed") from None
        if not line:
            self.dead = True
            raise SandboxError(f"sandbox exited{await self._exit_reason()}")
        try:
            answer = json.loads(line)
        except (ValueError, RecursionError):
            answer = None
        if not isinstance(answer, dict):
            await self._die()
            raise SandboxError(f"tool runner wrote garbage: {line[:200]!r}; sandbox killed")
        return answer

    async def _die(self) -> None:
        self.dead = True
        await self._kill()

    def close(self) -> None:
        self.dead = True
        self._writer.close()
        transport = getattr(self._reader, "_transport", None)
        if transport is not None:
            transport.close()


def tool_deadline(name: str, arguments: str | dict[str, Any]) -> float:
    """How long the host waits for a tool before declaring the sandbox dead: the tool's own timeout plus grace."""
    bash = bash_arguments(arguments) if name == "Bash" else None
    timeout = bash[1] if bash else 120.0
    return max(timeout, 1.0) + TOOL_GRACE_SEC


class StreamStdin:
    """The StreamWriter face RunnerClient writes requests to, over an exec stream's stdin: writes are buffered and
    sent on drain with `send`, whose failure a backend names as a broken pipe; `close` closes the stream (a
    coroutine, run as a task: RunnerClient's close is not awaited)."""

    def __init__(self, send: Callable[[bytes], Awaitable[None]], close: Callable[[], Awaitable[None]]):
        self._send, self._close, self._pending = send, close, bytearray()

    def write(self, data: bytes) -> None:
        self._pending += data

    async def drain(self) -> None:
        data, self._pending = bytes(self._pending), bytearray()
        await self._send(data)

    def close(self) -> None:
        asyncio.get_running_loop().create_task(self._close())
