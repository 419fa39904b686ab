"""Exec into a pod over the API server's websocket (the protocol `kubectl exec` speaks), asynchronously, with the
official client's configuration for the address, TLS and credentials. One stream carries stdin in and stdout and
stderr out, then the command's exit status. The official client's own `stream()` is synchronous and hides the
exit code; 150 concurrent episodes need streams that cost no thread each.

Frames are binary. The first byte is the channel: 0 stdin, 1 stdout, 2 stderr, 3 the status (JSON), 255 a close
of the channel in the next byte (v5 only: how stdin ends while stdout stays open)."""

from __future__ import annotations

import asyncio
import contextlib
import json
import ssl
from typing import Any
from urllib.parse import urlencode

import aiohttp

from sandbox.protocol import SandboxError

PROTOCOLS = ("v5.channel.k8s.io", "v4.channel.k8s.io")
STDIN, STDOUT, STDERR, STATUS, CLOSE = 0, 1, 2, 3, 255
READ_LIMIT_BYTES = 64 << 20  # asyncio's line limit for stdout readers (the tool runner's answers are lines)
# An API server that throttles (429) or fails for a moment (5xx) is asked again, after its Retry-After or a
# growing pause: a busy control plane must not fail attempts (whose retries would only add load).
RETRY_STATUSES = frozenset({429, 500, 502, 503, 504})
API_RETRIES, RETRY_MAX_SEC = 5, 10.0


class ExecError(SandboxError):
    """The API server refused the exec, or the stream broke: an infrastructure failure."""


def session_for(configuration: Any) -> aiohttp.ClientSession:
    """An aiohttp session speaking to the API server as the official client would (its CA, client certificate,
    proxy-free); credentials are added per request (`auth_headers`) because exec plugins refresh them."""
    context: ssl.SSLContext | bool = False
    if configuration.host.startswith("https"):
        context = ssl.create_default_context(cafile=configuration.ssl_ca_cert or None)
        if not configuration.verify_ssl:
            context.check_hostname, context.verify_mode = False, ssl.CERT_NONE
        if configuration.cert_file:
            context.load_cert_chain(configuration.cert_file, configuration.key_file)
    connector = aiohttp.TCPConnector(ssl=context, limit=0)
    return aiohttp.ClientSession(connector=connector, timeout=aiohttp.ClientTimeout(total=None, sock_connect=30))


def retry_pause(headers: Any, attempt: int) -> float:
    """The server's Retry-After (whole seconds) when it gives one, else 0.5 s doubling per attempt; at most
    RETRY_MAX_SEC."""
    said = str((headers or {}).get("Retry-After", ""))
    return min(float(said) if said.strip().isdigit() else 0.5 * 2 ** attempt, RETRY_MAX_SEC)


def auth_headers(configuration: Any) -> dict[str, str]:
    if configuration.refresh_api_key_hook is not None:
        configuration.refresh_api_key_hook(configuration)
    headers = {}
    for setting in configuration.auth_settings().values():
        if setting.get("in") == "header" and setting.get("value"):
            headers[setting["key"]] = setting["value"]
    return headers


class ExecStream:
    """A running command in a pod. `stdout` is a StreamReader; stderr is kept (its tail) for error messages."""

    def __init__(self, socket: aiohttp.ClientWebSocketResponse, *, v5: bool):
        self.socket, self.v5 = socket, v5
        self.stdout = asyncio.StreamReader(limit=READ_LIMIT_BYTES)
        self.stderr = bytearray()
        self.stdin_dropped = False  # the stream closed while stdin was still being written
        self.exit_code: int | None = None
        self.failure: str | None = None  # the API server's reason when the command could not run
        self._done = asyncio.get_running_loop().create_future()
        self._pump = asyncio.create_task(self._read())

    @classmethod
    async def open(cls, session: aiohttp.ClientSession, configuration: Any, namespace: str, pod: str,
                   container: str, command: list[str], *, stdin: bool) -> ExecStream:
        query = [("container", container), ("stdout", "true"), ("stderr", "true"), ("tty", "false"),
                 ("stdin", "true" if stdin else "false"), *(("command", word) for word in command)]
        url = f"{configuration.host.rstrip('/')}/api/v1/namespaces/{namespace}/pods/{pod}/exec?{urlencode(query)}"
        for attempt in range(API_RETRIES + 1):
            try:
                socket = await session.ws_connect(url.replace("http", "ws", 1), protocols=PROTOCOLS,
                                                  headers=auth_headers(configuration), max_msg_size=0, heartbeat=None)
                break
            except aiohttp.WSServerHandshakeError as exc:
                if exc.status not in RETRY_STATUSES or attempt == API_RETRIES:
                    raise ExecError(f"exec into pod {pod} refused: HTTP {exc.status} {exc.message}") from None
                await asyncio.sleep(retry_pause(exc.headers, attempt))
            except aiohttp.ClientError as exc:
                raise ExecError(f"exec into pod {pod}: {type(exc).__name__}: {exc}") from None
        if socket.protocol not in PROTOCOLS:
            await socket.close()
            raise ExecError(f"exec into pod {pod}: the API server chose no known subprotocol ({socket.protocol})")
        return cls(socket, v5=socket.protocol == PROTOCOLS[0])

    async def write(self, data: bytes) -> None:
        """To the command's stdin. A command that ended without reading all of it closes the stream: like a write
        to a closed pipe, the rest is dropped (`stdin_dropped`) and the exit status is what `wait` reports."""
        for start in range(0, len(data), 1 << 20):
            if self.stdin_dropped:
                return
            try:
                await self.socket.send_bytes(bytes([STDIN]) + data[start:start + (1 << 20)])
            except ConnectionError:  # aiohttp's ClientConnectionResetError too
                self.stdin_dropped = True

    async def close_stdin(self) -> None:
        """v5 ends stdin alone; v4 cannot, so the whole stream is half-closed by closing the socket after output."""
        if self.v5 and not self.stdin_dropped:
            with contextlib.suppress(ConnectionError):
                await self.socket.send_bytes(bytes([CLOSE, STDIN]))

    async def wait(self) -> int:
        """The exit code once the command ended (ExecError when it could not run)."""
        await asyncio.shield(self._done)
        if self.exit_code is None:
            raise ExecError(self.failure or "the exec stream ended without an exit status")
        return self.exit_code

    async def close(self) -> None:
        self._pump.cancel()
        await asyncio.gather(self._pump, return_exceptions=True)
        await self.socket.close()

    async def _read(self) -> None:
        try:
            async for message in self.socket:
                if message.type != aiohttp.WSMsgType.BINARY or not message.data:
                    continue
                channel, payload = message.data[0], message.data[1:]
                if channel == STDOUT:
                    self.stdout.feed_data(payload)
                elif channel == STDERR:
                    self.stderr = (self.stderr + payload)[-8192:]
                elif channel == STATUS:
                    self._status(payload)
        except (aiohttp.ClientError, asyncio.TimeoutError) as exc:
            self.failure = self.failure or f"the exec stream broke: {type(exc).__name__}: {exc}"
        finally:
            self.stdout.feed_eof()
            if not self._done.done():
                self._done.set_result(None)

    def _status(self, payload: bytes) -> None:
        try:
            status = json.loads(payload)
        except ValueError:
            self.failure = f"unreadable exec status: {payload[:200]!r}"
            return
        if status.get("status") == "Success":
            self.exit_code = 0
            return
        causes = (status.get("details") or {}).get("causes") or []
        code = next((c.get("message") for c in causes if c.get("reason") == "ExitCode"), None)
        if status.get("reason") == "NonZeroExitCode" and code is not None and str(code).isdigit():
            self.exit_code = int(code)
        else:
            self.failure = f"exec failed: {str(status.get('message') or status)[:300]}"
