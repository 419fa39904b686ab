"""A real HTTP server that speaks OpenAI chat completions the way SGLang does, answering from a script.

It stands in for SGLang where no GPU exists (same JSON shapes, same extra endpoints, Prometheus metrics in
SGLang's names and labels), drives deterministic test cases (errors, delays, hangs, garbage, misconfigured-parser
output) and, in `instant` mode, serves a benchmark fast enough not to be the bottleneck. Run it with
`python -m adapters.scripted_server --port 0 --script FILE.json [--port-file PATH]`, or embed it:
`with ScriptedServer(script) as server: server.base_url`.

Standard library plus pydantic only: an asyncio protocol with a small HTTP/1.1 parser (keep-alive, one write per
response, TCP_NODELAY), so no framework sits on the hot path.
"""

from __future__ import annotations

import argparse
import asyncio
import hashlib
import json
import os
import re
import signal
import socket
import subprocess as _subprocess
import sys
import tempfile
import threading
import time
import urllib.request
import uuid
from dataclasses import dataclass, field
from http import HTTPStatus
from pathlib import Path
from typing import Any, Awaitable, Callable, Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

__all__ = ["InstantSpec", "RecordedRequest", "Script", "ScriptedServer", "ToolCallSpec", "TurnSpec", "UsageSpec",
           "load_script", "main"]


# ----------------------------------------------------------------------------------------------------------------
# The script
# ----------------------------------------------------------------------------------------------------------------

class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid")


class ToolCallSpec(_Strict):
    """One tool call of an answer. `arguments` as a string is sent verbatim (malformed JSON included)."""

    name: str
    arguments: dict[str, Any] | str = Field(default_factory=dict)
    id: str | None = None  # generated (`call_` + 24 hex, as SGLang does) when not given


class UsageSpec(_Strict):
    """Per-turn usage override; a field left out is computed from the request and the answer."""

    prompt_tokens: int | None = Field(default=None, ge=0)
    completion_tokens: int | None = Field(default=None, ge=0)
    cached_tokens: int | None = Field(default=None, ge=0)
    reasoning_tokens: int | None = Field(default=None, ge=0)


class TurnSpec(_Strict):
    """One scripted answer: a normal answer, an HTTP error, garbage, a delay or a hang, or a list of attempts."""

    content: str | None = None  # explicit null is sent as null; left out → "" (SGLang's empty content)
    reasoning: str | None = None  # → message.reasoning_content
    tool_calls: list[ToolCallSpec] = Field(default_factory=list)
    finish_reason: str | None = None  # default: "tool_calls" with tool calls, else "stop"
    usage: UsageSpec | None = None
    headers: dict[str, str] = Field(default_factory=dict)
    cost: float | None = None  # → usage.cost (OpenRouter style)
    status: int | None = Field(default=None, ge=400, le=599)  # an error answer with an error body
    retry_after: float | None = Field(default=None, ge=0)  # → Retry-After header
    message: str | None = None  # the error message
    delay: float = Field(default=0.0, ge=0)  # seconds to wait before answering
    hang: bool = False  # never answer; the connection stays open until the client gives up
    garbage: str | None = None  # 200 with exactly this raw body
    flood_chars: int | None = Field(default=None, ge=1)  # a content string this long, finish_reason "length"
    attempts: list[TurnSpec] | None = None  # the k-th identical request at this step gets attempts[k] (last repeats)

    @model_validator(mode="after")
    def _one_kind(self) -> TurnSpec:
        if self.attempts is not None:
            others = self.model_fields_set - {"attempts"}
            if others:
                raise ValueError(f"a turn with `attempts` takes no other fields (got {sorted(others)}); "
                                 "put them inside the attempts")
            if not self.attempts:
                raise ValueError("`attempts` needs at least one turn")
            if any(attempt.attempts is not None for attempt in self.attempts):
                raise ValueError("`attempts` cannot nest")
        kinds = [name for name, on in (("status", self.status is not None), ("garbage", self.garbage is not None),
                                       ("hang", self.hang)) if on]
        if len(kinds) > 1:
            raise ValueError(f"a turn is one of status, garbage or hang, not {' and '.join(kinds)}")
        return self

    @property
    def content_given(self) -> bool:
        return "content" in self.model_fields_set


class RepeatLast(_Strict):
    repeat_last: Literal[True]


class InstantSpec(_Strict):
    """Benchmark mode: `steps` tool-call answers, then a final content answer, constant small usage."""

    tool: str = "Bash"
    arguments: dict[str, Any] | str = Field(default_factory=lambda: {"command": "true"})
    steps: int = Field(default=20, ge=0)
    final: str = "done"
    prompt_tokens: int = Field(default=100, ge=1)
    completion_tokens: int = Field(default=20, ge=1)


class GpuSpec(_Strict):
    """How the simulated GPU spends time, for `sglang:gpu_execution_seconds_total` and `sglang:utilization`."""

    prefill_seconds_per_token: float = Field(default=1e-5, ge=0)
    decode_seconds_per_token: float = Field(default=1e-3, ge=0)


class Script(_Strict):
    model: str = "frognano-4b"  # the model path SGLang was launched with
    served_model_name: str | None = None  # defaults to `model`, as SGLang does
    turns: list[TurnSpec] = Field(default_factory=list)
    then: RepeatLast | TurnSpec = Field(default_factory=lambda: RepeatLast(repeat_last=True))
    auth: str | None = None  # the one accepted Authorization value, e.g. "Bearer secret"
    instant: InstantSpec | None = None
    metrics: bool = True  # serve /metrics (SGLang's --enable-metrics)
    server_args: dict[str, Any] = Field(default_factory=dict)  # merged over the FrogNano launch's args
    version: str = "0.0.0+scripted"  # /get_server_info "version"
    error_style: Literal["openai", "sglang"] = "openai"  # nested {"error": {...}} or SGLang's flat ErrorResponse
    health_status: int = 200  # /health and /health_generate answer this (503 = still starting / unhealthy)
    gpu: GpuSpec = Field(default_factory=GpuSpec)

    @property
    def served_name(self) -> str:
        return self.served_model_name or self.model


def load_script(script: Script | dict[str, Any] | str | os.PathLike[str]) -> Script:
    """A script from a model, a dict, or a path to a JSON file."""
    if isinstance(script, Script):
        return script
    if isinstance(script, dict):
        return Script.model_validate(script)
    return Script.model_validate_json(Path(script).read_text())


# ----------------------------------------------------------------------------------------------------------------
# Embedding: in a background thread (own event loop) or as a subprocess
# ----------------------------------------------------------------------------------------------------------------

@dataclass
class RecordedRequest:
    """A request as the server received it: header names lower-cased, the body parsed when it is JSON."""

    method: str
    path: str
    query: str
    headers: dict[str, str]
    body: Any = None
    raw: str | None = None  # the body text when it is not JSON
    received_at: float = 0.0


class ScriptedServer:
    """A running scripted server on a real loopback socket.

    In-process (default) the server has its own event loop in a daemon thread, so it never competes with the
    caller's loop for turns; with `subprocess=True` it is a separate Python process (best for benchmarks: it
    gets its own GIL). `requests` lists what clients sent, in arrival order (not recorded in `instant` mode).
    """

    def __init__(self, script: Script | dict[str, Any] | str | os.PathLike[str], *, host: str = "127.0.0.1",
                 port: int = 0, subprocess: bool = False, startup_timeout: float = 30.0) -> None:
        self.script = load_script(script)
        self.host = host
        self.port = port
        self.use_subprocess = subprocess
        self.startup_timeout = startup_timeout
        self._app: _App | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._thread: threading.Thread | None = None
        self._stopping: asyncio.Event | None = None
        self._process: _subprocess.Popen[bytes] | None = None
        self._tmpdir: tempfile.TemporaryDirectory[str] | None = None

    @property
    def root_url(self) -> str:
        return f"http://{self.host}:{self.port}"

    @property
    def base_url(self) -> str:
        """The OpenAI base URL (…/v1)."""
        return f"{self.root_url}/v1"

    @property
    def requests(self) -> list[RecordedRequest]:
        if self._app is not None:
            return list(self._app.recorded)
        return [RecordedRequest(**item) for item in self._fetch_json("/_scripted/requests")]

    @property
    def chat_bodies(self) -> list[Any]:
        """The bodies of the chat-completion requests, in arrival order."""
        return [r.body for r in self.requests if r.method == "POST" and r.path == "/v1/chat/completions"]

    def stats(self) -> dict[str, Any]:
        """Counters: chat requests answered, errors sent, requests in flight."""
        if self._app is not None:
            return self._app.stats_snapshot()
        return self._fetch_json("/_scripted/stats")

    def start(self) -> ScriptedServer:
        if self.use_subprocess:
            self._start_subprocess()
        else:
            self._start_thread()
        return self

    def stop(self) -> None:
        if self._thread is not None:
            loop, stopping = self._loop, self._stopping
            if loop is not None and stopping is not None and not loop.is_closed():
                loop.call_soon_threadsafe(stopping.set)
            self._thread.join(timeout=10)
            self._thread = None
        if self._process is not None:
            _stop_process(self._process)
            self._process = None
        if self._tmpdir is not None:
            self._tmpdir.cleanup()
            self._tmpdir = None

    def __enter__(self) -> ScriptedServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    async def __aenter__(self) -> ScriptedServer:
        return await asyncio.to_thread(self.start)

    async def __aexit__(self, *exc: object) -> None:
        await asyncio.to_thread(self.stop)

    def _start_thread(self) -> None:
        ready = threading.Event()
        failure: list[BaseException] = []

        async def serve() -> None:
            self._stopping = asyncio.Event()
            try:
                server, app = await _serve(self.script, self.host, self.port)
            except BaseException as error:  # report bind errors to the starting thread
                failure.append(error)
                ready.set()
                return
            self._app, self.port = app, server.sockets[0].getsockname()[1]
            ready.set()
            try:
                await self._stopping.wait()
            finally:
                await _shutdown(server, app)

        def run() -> None:
            self._loop = asyncio.new_event_loop()
            try:
                self._loop.run_until_complete(serve())
            finally:
                self._loop.close()

        self._thread = threading.Thread(target=run, name=f"scripted-server-{id(self):x}", daemon=True)
        self._thread.start()
        if not ready.wait(self.startup_timeout):
            raise RuntimeError(f"scripted server did not start within {self.startup_timeout}s")
        if failure:
            self._thread.join()
            self._thread = None
            raise RuntimeError(f"scripted server could not listen on {self.host}:{self.port}: {failure[0]}")

    def _start_subprocess(self) -> None:
        self._tmpdir = tempfile.TemporaryDirectory(prefix="scripted-server-")
        script_path = Path(self._tmpdir.name) / "script.json"
        port_file = Path(self._tmpdir.name) / "port"
        # exclude_unset keeps "content left out" apart from "content: null" across the round trip.
        script_path.write_text(self.script.model_dump_json(exclude_unset=True))
        # stderr goes to a file: a pipe nobody reads during a long run could fill up and block the server.
        stderr_path = Path(self._tmpdir.name) / "stderr"
        with open(stderr_path, "wb") as stderr:
            # The file is run by path so that the package's __init__ (and whatever it imports) stays out of it.
            self._process = _subprocess.Popen(
                [sys.executable, str(Path(__file__).resolve()), "--host", self.host, "--port", str(self.port),
                 "--script", str(script_path), "--port-file", str(port_file)],
                stdout=_subprocess.DEVNULL, stderr=stderr)
        deadline = time.monotonic() + self.startup_timeout
        while not port_file.exists():
            if self._process.poll() is not None:
                error = stderr_path.read_text(errors="replace")
                self._process = None
                raise RuntimeError(f"scripted server exited at start: {error.strip()[-2000:]}")
            if time.monotonic() > deadline:
                self.stop()
                raise RuntimeError(f"scripted server did not write its port within {self.startup_timeout}s")
            time.sleep(0.01)
        self.port = int(port_file.read_text())

    def _fetch_json(self, path: str) -> Any:
        with urllib.request.urlopen(self.root_url + path, timeout=30) as response:
            return json.loads(response.read())


def _stop_process(process: _subprocess.Popen[bytes]) -> None:
    if process.poll() is None:
        process.terminate()
        try:
            process.wait(timeout=10)
        except _subprocess.TimeoutExpired:
            process.kill()
            process.wait(timeout=10)


async def _serve(script: Script, host: str, port: int) -> tuple[asyncio.AbstractServer, _App]:
    app = _App(script)
    loop = asyncio.get_running_loop()
    server = await loop.create_server(lambda: _HttpProtocol(app), host, port, reuse_address=True, backlog=1024)
    app.port = server.sockets[0].getsockname()[1]
    return server, app


async def _shutdown(server: asyncio.AbstractServer, app: _App) -> None:
    server.close()
    for connection in list(app.connections):
        connection.abort()
    waiting = list(app.waiting)  # delayed and hanging answers
    for task in waiting:
        task.cancel()
    if waiting:
        await asyncio.gather(*waiting, return_exceptions=True)
    await server.wait_closed()


# ----------------------------------------------------------------------------------------------------------------
# Command line
# ----------------------------------------------------------------------------------------------------------------

def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m adapters.scripted_server", description=__doc__.split("\n")[0])
    parser.add_argument("--script", required=True, help="the script, a JSON file")
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=0, help="0 picks a free port (printed, and written to --port-file)")
    parser.add_argument("--port-file", help="write the bound port here (atomically) once listening")
    args = parser.parse_args(argv)
    try:
        script = load_script(args.script)
    except (OSError, ValueError) as error:
        print(f"scripted_server: cannot load --script {args.script}: {error}", file=sys.stderr)
        return 2
    asyncio.run(_run_cli(script, args.host, args.port, args.port_file))
    return 0


async def _run_cli(script: Script, host: str, port: int, port_file: str | None) -> None:
    server, app = await _serve(script, host, port)
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for signum in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(signum, stop.set)
    print(app.port, flush=True)
    if port_file:
        _write_atomically(Path(port_file), f"{app.port}\n")
    try:
        await stop.wait()
    finally:
        await _shutdown(server, app)


def _write_atomically(path: Path, text: str) -> None:
    temporary = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    temporary.write_text(text)
    os.replace(temporary, path)


# ----------------------------------------------------------------------------------------------------------------
# HTTP/1.1 over an asyncio protocol
# ----------------------------------------------------------------------------------------------------------------

_MAX_HEAD = 64 * 1024
_QUICKACK = getattr(socket, "TCP_QUICKACK", None)  # Linux only


@dataclass
class _Request:
    method: str
    path: str
    query: str
    version: str
    headers: dict[str, str]
    body: bytes


@dataclass
class _Response:
    status: int
    body: bytes = b""
    content_type: str | None = "application/json"
    headers: dict[str, str] = field(default_factory=dict)
    chunked: bool = False  # send `body` as one HTTP chunk (SSE streams, as uvicorn's StreamingResponse does)

    def encode(self, keep_alive: bool) -> bytes:
        lines = [f"HTTP/1.1 {self.status} {_reason(self.status)}"]
        if self.content_type:
            lines.append(f"content-type: {self.content_type}")
        for name, value in self.headers.items():
            lines.append(f"{name}: {value}")
        if self.chunked:
            lines.append("transfer-encoding: chunked")
            payload = b"%x\r\n%s\r\n0\r\n\r\n" % (len(self.body), self.body) if self.body else b"0\r\n\r\n"
        else:
            lines.append(f"content-length: {len(self.body)}")
            payload = self.body
        if not keep_alive:
            lines.append("connection: close")
        return ("\r\n".join(lines) + "\r\n\r\n").encode("latin-1") + payload


_REASONS: dict[int, str] = {}


def _reason(status: int) -> str:
    reason = _REASONS.get(status)
    if reason is None:
        try:
            reason = HTTPStatus(status).phrase
        except ValueError:
            reason = "Unknown"
        _REASONS[status] = reason
    return reason


class _BadRequest(Exception):
    pass


Handled = _Response | Awaitable[_Response]


class _HttpProtocol(asyncio.Protocol):
    """One connection: parses requests in order, answers each with a single write, keeps the connection alive."""

    def __init__(self, app: _App) -> None:
        self.app = app
        self.transport: asyncio.Transport | None = None
        self.sock: socket.socket | None = None
        self.buffer = bytearray()
        self.pending: asyncio.Task[None] | None = None
        self.closed = False

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        assert isinstance(transport, asyncio.Transport)
        self.transport = transport
        self.sock = transport.get_extra_info("socket")
        if self.sock is not None:
            self.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self.app.connections.add(transport)

    def _quickack(self) -> None:
        """Send the pending ACK now. A client that writes head and body apart without TCP_NODELAY (Nagle) holds
        the body until the head is ACKed, and our delayed ACK would cost it ~40 ms. Only called while a request
        is incomplete: a syscall per request is measurable here."""
        if _QUICKACK is not None and self.sock is not None:
            try:
                self.sock.setsockopt(socket.IPPROTO_TCP, _QUICKACK, 1)
            except OSError:
                pass

    def connection_lost(self, exc: Exception | None) -> None:
        self.closed = True
        if self.transport is not None:
            self.app.connections.discard(self.transport)
        if self.pending is not None:
            self.pending.cancel()

    def data_received(self, data: bytes) -> None:
        self.buffer += data
        if self.pending is None:
            self._process()

    def _process(self) -> None:
        while not self.closed and self.pending is None:
            try:
                parsed = self._parse_one()
            except _BadRequest as error:
                self._write(_Response(400, json.dumps({"detail": str(error)}).encode()), keep_alive=False)
                return
            if parsed is None:
                if self.buffer:
                    self._quickack()
                return
            request, keep_alive = parsed
            handled = self.app.handle(request)
            if isinstance(handled, _Response):
                self._write(handled, keep_alive)
            else:
                self.pending = asyncio.ensure_future(self._finish(handled, keep_alive))
                self.app.waiting.add(self.pending)
                self.pending.add_done_callback(self.app.waiting.discard)

    async def _finish(self, handled: Awaitable[_Response], keep_alive: bool) -> None:
        try:
            response = await handled
        except asyncio.CancelledError:
            return
        self.pending = None
        self._write(response, keep_alive)
        if self.buffer:
            self._process()

    def _write(self, response: _Response, keep_alive: bool) -> None:
        if self.closed or self.transport is None:
            return
        self.transport.write(response.encode(keep_alive))
        if not keep_alive:
            self.closed = True
            self.transport.close()

    def _parse_one(self) -> tuple[_Request, bool] | None:
        buffer = self.buffer
        end = buffer.find(b"\r\n\r\n")
        if end < 0:
            if len(buffer) > _MAX_HEAD:
                raise _BadRequest("request head too large")
            return None
        lines = bytes(buffer[:end]).decode("latin-1").split("\r\n")
        try:
            method, target, version = lines[0].split(" ", 2)
        except ValueError:
            raise _BadRequest(f"bad request line {lines[0][:100]!r}") from None
        headers: dict[str, str] = {}
        for line in lines[1:]:
            name, sep, value = line.partition(":")
            if not sep:
                raise _BadRequest(f"bad header line {line[:100]!r}")
            headers[name.strip().lower()] = value.strip()
        start = end + 4
        if "chunked" in headers.get("transfer-encoding", "").lower():
            decoded = _decode_chunked(buffer, start)
            if decoded is None:
                return None
            body, consumed = decoded
        else:
            try:
                length = int(headers.get("content-length", "0"))
            except ValueError:
                raise _BadRequest("bad content-length") from None
            if len(buffer) - start < length:
                if headers.get("expect", "").lower() == "100-continue" and self.transport is not None:
                    self.transport.write(b"HTTP/1.1 100 Continue\r\n\r\n")
                    headers.pop("expect")
                return None
            body, consumed = bytes(buffer[start:start + length]), start + length
        del buffer[:consumed]
        path, _, query = target.partition("?")
        connection = headers.get("connection", "").lower()
        keep_alive = connection != "close" and (version != "HTTP/1.0" or connection == "keep-alive")
        return _Request(method.upper(), path, query, version, headers, body), keep_alive


def _decode_chunked(buffer: bytearray, start: int) -> tuple[bytes, int] | None:
    body = bytearray()
    position = start
    while True:
        line_end = buffer.find(b"\r\n", position)
        if line_end < 0:
            return None
        try:
            size = int(bytes(buffer[position:line_end]).split(b";")[0], 16)
        except ValueError:
            raise _BadRequest("bad chunk size") from None
        position = line_end + 2
        if size == 0:
            trailer_end = buffer.find(b"\r\n\r\n", position - 2)
            if trailer_end < 0:
                return None
            return bytes(body), trailer_end + 4
        if len(buffer) < position + size + 2:
            return None
        body += buffer[position:position + size]
        position += size + 2


# ----------------------------------------------------------------------------------------------------------------
# The application: routes, turns, usage, metrics
# ----------------------------------------------------------------------------------------------------------------

_ASSISTANT = re.compile(rb'"role"\s*:\s*"assistant"')
_STREAM_TRUE = re.compile(rb'"stream"\s*:\s*true')
_MODEL = re.compile(rb'"model"\s*:\s*"([^"\\]*)"')
_EOS_TOKEN_ID = 151645  # Qwen's <|im_end|>: what SGLang reports as `matched_stop` for a natural stop
_NO_AUTH_PREFIXES = ("/health", "/metrics", "/_scripted/")  # SGLang's api-key middleware skips health and metrics
_OPENAI_ERROR_KINDS = {
    400: ("invalid_request_error", "invalid_request"),
    401: ("authentication_error", "invalid_api_key"),
    403: ("permission_error", "forbidden"),
    404: ("invalid_request_error", "not_found"),
    408: ("timeout_error", "timeout"),
    429: ("rate_limit_error", "rate_limit_exceeded"),
    500: ("server_error", "internal_server_error"),
    502: ("server_error", "bad_gateway"),
    503: ("server_error", "service_unavailable"),
    504: ("server_error", "gateway_timeout"),
}


@dataclass
class _Answer:
    """Usage and timing of one answered chat request, for the metrics."""

    prompt_tokens: int
    cached_tokens: int
    completion_tokens: int
    seconds: float


class _App:
    def __init__(self, script: Script) -> None:
        self.script = script
        self.port = 0
        self.started = time.time()
        self.connections: set[asyncio.Transport] = set()
        self.waiting: set[asyncio.Future[None]] = set()  # delayed and hanging answers
        self.recorded: list[RecordedRequest] = []
        self.attempt_counts: dict[str, int] = {}
        self.prefix_cache: set[bytes] = set()
        self.counters = {"chat_requests": 0, "answers": 0, "errors": 0, "in_flight": 0}
        self.in_flight_prompt_tokens = 0
        self.metrics = _Metrics(script)
        self.server_args = _server_args(script)
        self._routes: dict[tuple[str, str], Callable[[_Request], Handled]] = {
            ("POST", "/v1/chat/completions"): self._chat,
            ("GET", "/v1/models"): self._models,
            ("GET", "/health"): self._health,
            ("GET", "/health_generate"): self._health,
            ("GET", "/get_model_info"): self._model_info,
            ("GET", "/get_server_info"): self._server_info,
            ("GET", "/metrics"): self._metrics,
            ("GET", "/_scripted/requests"): self._scripted_requests,
            ("GET", "/_scripted/stats"): lambda request: _json_response(200, self.stats_snapshot()),
        }
        self._route_paths = {path for _, path in self._routes}
        self._instant_templates = _InstantTemplates(script) if script.instant else None

    def stats_snapshot(self) -> dict[str, Any]:
        return dict(self.counters)

    def handle(self, request: _Request) -> Handled:
        if self._instant_templates is None and not request.path.startswith("/_scripted/"):
            self._record(request)  # before auth: tests assert what a rejected client sent, too
        if self.script.auth is not None and not request.path.startswith(_NO_AUTH_PREFIXES):
            if request.headers.get("authorization") != self.script.auth:
                return self._unauthorized()
        route = self._routes.get((request.method, request.path))
        if route is None:
            if request.method == "GET" and request.path.startswith("/v1/models/"):
                return self._model_card(request)
            if request.path in self._route_paths:
                return _json_response(405, {"detail": "Method Not Allowed"})
            return _json_response(404, {"detail": "Not Found"})
        return route(request)

    # --- chat completions ---

    def _chat(self, request: _Request) -> Handled:
        started = time.perf_counter()
        self.counters["chat_requests"] += 1
        if self._instant_templates is not None and not _STREAM_TRUE.search(request.body):
            return self._instant(request, started)
        media_type = request.headers.get("content-type", "").split(";", 1)[0].strip().lower()
        if media_type != "application/json":
            return self._error(400, "Unsupported Media Type: Only 'application/json' is allowed")
        try:
            body = json.loads(request.body)
        except ValueError as error:
            return self._error(400, f"request body is not JSON: {error}")
        messages = body.get("messages") if isinstance(body, dict) else None
        if not isinstance(messages, list) or not messages or not all(isinstance(m, dict) for m in messages):
            return self._error(400, "`messages` must be a non-empty list of message objects")
        turn = self._turn_for(messages)
        if turn.hang or turn.delay:
            return self._answer_later(turn, body, started)
        return self._answer(turn, body, started)

    def _turn_for(self, messages: list[dict[str, Any]]) -> TurnSpec:
        if self.script.instant is not None:
            return self._instant_turn(_step(messages))
        step = _step(messages)
        if step < len(self.script.turns):
            turn = self.script.turns[step]
        elif isinstance(self.script.then, TurnSpec):
            turn = self.script.then
        else:
            turn = self.script.turns[-1] if self.script.turns else TurnSpec(content="")
        if turn.attempts is not None:
            key = hashlib.sha1(_canonical(messages)).hexdigest()
            seen = self.attempt_counts.get(key, 0)
            self.attempt_counts[key] = seen + 1
            turn = turn.attempts[min(seen, len(turn.attempts) - 1)]
        return turn

    def _instant_turn(self, step: int) -> TurnSpec:
        instant = self.script.instant
        assert instant is not None
        usage = UsageSpec(prompt_tokens=instant.prompt_tokens, completion_tokens=instant.completion_tokens,
                          cached_tokens=0, reasoning_tokens=0)
        if step < instant.steps:
            return TurnSpec(tool_calls=[ToolCallSpec(name=instant.tool, arguments=instant.arguments)], usage=usage)
        return TurnSpec(content=instant.final, usage=usage)

    async def _answer_later(self, turn: TurnSpec, body: dict[str, Any], started: float) -> _Response:
        """A delayed or hanging answer: it counts as running (sglang:num_running_reqs) while it waits."""
        prompt_estimate = sum(_message_chars(message) for message in body["messages"]) // 4 + 1
        self.counters["in_flight"] += 1
        self.in_flight_prompt_tokens += prompt_estimate
        try:
            if turn.hang:
                await asyncio.Event().wait()  # until the client disconnects (the task is cancelled) or shutdown
            await asyncio.sleep(turn.delay)
        finally:
            self.counters["in_flight"] -= 1
            self.in_flight_prompt_tokens -= prompt_estimate
        return self._answer(turn, body, started)

    def _answer(self, turn: TurnSpec, body: dict[str, Any], started: float) -> _Response:
        if turn.status is not None:
            return self._error(turn.status, turn.message or f"scripted {turn.status} {_reason(turn.status)}",
                               headers=_error_headers(turn))
        if turn.garbage is not None:
            self.counters["answers"] += 1
            return _Response(200, turn.garbage.encode(), headers=dict(turn.headers))
        content: str | None = "" if not turn.content_given else turn.content
        finish_reason = turn.finish_reason
        if turn.flood_chars is not None:
            content = ("flood " * (turn.flood_chars // 6 + 1))[:turn.flood_chars]
            finish_reason = finish_reason or "length"
        tool_calls = [_tool_call(spec, index) for index, spec in enumerate(turn.tool_calls)]
        finish_reason = finish_reason or ("tool_calls" if tool_calls else "stop")
        usage = self._usage(turn, body, content, tool_calls)
        model = body.get("model") if isinstance(body.get("model"), str) else "default"
        completion_id = f"chatcmpl-{uuid.uuid4().hex}"
        elapsed = time.perf_counter() - started
        self.metrics.record(_Answer(usage["prompt_tokens"], _cached(usage), usage["completion_tokens"], elapsed))
        self.counters["answers"] += 1
        headers = dict(turn.headers)
        if body.get("stream"):
            options = body.get("stream_options") or {}
            stream = _sse_stream(completion_id, model, content, turn.reasoning, tool_calls, finish_reason, usage,
                                 include_usage=bool(options.get("include_usage")))
            return _Response(200, stream, "text/event-stream; charset=utf-8", headers, chunked=True)
        message = {"role": "assistant", "content": content, "reasoning_content": turn.reasoning or None,
                   "tool_calls": tool_calls or None}
        payload = {
            "id": completion_id, "object": "chat.completion", "created": int(time.time()), "model": model,
            "choices": [{"index": 0, "message": message, "logprobs": None, "finish_reason": finish_reason,
                         "matched_stop": _EOS_TOKEN_ID if finish_reason == "stop" else None}],
            "usage": usage, "metadata": {"weight_version": "default"},
        }
        return _json_response(200, payload, headers)

    def _usage(self, turn: TurnSpec, body: dict[str, Any], content: str | None,
               tool_calls: list[dict[str, Any]]) -> dict[str, Any]:
        given = turn.usage or UsageSpec()
        messages, tools = body["messages"], body.get("tools")
        if given.prompt_tokens is None or given.cached_tokens is None:
            prompt_tokens, cached_tokens = self._prompt_and_cached(messages, tools)
        else:
            prompt_tokens = cached_tokens = 0
        prompt_tokens = given.prompt_tokens if given.prompt_tokens is not None else prompt_tokens
        cached_tokens = given.cached_tokens if given.cached_tokens is not None else min(cached_tokens,
                                                                                         prompt_tokens - 1)
        reasoning = turn.reasoning or ""
        answer_chars = len(content or "") + len(reasoning) + sum(
            len(call["function"]["name"]) + len(call["function"]["arguments"]) for call in tool_calls)
        completion_tokens = given.completion_tokens if given.completion_tokens is not None else answer_chars // 4 + 1
        reasoning_tokens = (given.reasoning_tokens if given.reasoning_tokens is not None
                            else min(-(-len(reasoning) // 4), completion_tokens))
        usage = _usage_info(prompt_tokens, completion_tokens, max(cached_tokens, 0), reasoning_tokens,
                            cache_report=bool(self.server_args.get("enable_cache_report")))
        if turn.cost is not None:
            usage["cost"] = turn.cost
        return usage

    def _prompt_and_cached(self, messages: list[dict[str, Any]], tools: Any) -> tuple[int, int]:
        """Prompt tokens ≈ characters // 4 + 1 (tools included); cached = the longest message-aligned prefix
        (tools first, as a chat template puts them) already seen in an earlier request: a radix cache, coarsely."""
        digest = hashlib.sha1(_canonical(tools) if tools else b"")
        chars = len(json.dumps(tools)) if tools else 0
        cached_chars = chars if tools and digest.digest() in self.prefix_cache else 0
        prefixes = [digest.digest()]
        for message in messages:
            digest.update(_canonical(message))
            chars += _message_chars(message)
            prefix = digest.digest()
            if prefix in self.prefix_cache:
                cached_chars = chars
            prefixes.append(prefix)
        if len(self.prefix_cache) > 1_000_000:
            self.prefix_cache.clear()
        self.prefix_cache.update(prefixes)
        return chars // 4 + 1, cached_chars // 4

    def _instant(self, request: _Request, started: float) -> _Response:
        templates = self._instant_templates
        assert templates is not None
        step = len(_ASSISTANT.findall(request.body))
        match = _MODEL.search(request.body)
        model = match.group(1).decode("utf-8", errors="replace") if match else "default"
        body = templates.render(step, model)
        self.metrics.record(templates.answer(time.perf_counter() - started))
        self.counters["answers"] += 1
        return _Response(200, body)

    # --- errors and auth ---

    def _error(self, status: int, message: str, headers: dict[str, str] | None = None) -> _Response:
        self.counters["errors"] += 1
        if self.script.error_style == "sglang":
            payload: dict[str, Any] = {"object": "error", "message": message, "type": _reason(status), "param": None,
                                       "code": status}
        else:
            err_type, code = _OPENAI_ERROR_KINDS.get(status, ("server_error" if status >= 500 else
                                                              "invalid_request_error", str(status)))
            payload = {"error": {"message": message, "type": err_type, "param": None, "code": code}}
        return _json_response(status, payload, headers)

    def _unauthorized(self) -> _Response:
        if self.script.error_style == "sglang":
            self.counters["errors"] += 1
            return _json_response(401, {"error": "Unauthorized"})
        return self._error(401, "Incorrect API key provided (the Authorization header does not match).")

    # --- SGLang's other endpoints ---

    def _models(self, request: _Request) -> _Response:
        return _json_response(200, {"object": "list", "data": [self._card(self.script.served_name)]})

    def _model_card(self, request: _Request) -> _Response:
        name = request.path[len("/v1/models/"):]
        if name != self.script.served_name:
            return _json_response(404, {"error": {"message": f"The model '{name}' does not exist",
                                                  "type": "invalid_request_error", "param": "model",
                                                  "code": "model_not_found"}})
        return _json_response(200, self._card(name))

    def _card(self, name: str) -> dict[str, Any]:
        return {"id": name, "object": "model", "created": int(self.started), "owned_by": "sglang", "root": name,
                "parent": None, "max_model_len": self.server_args.get("context_length")}

    def _health(self, request: _Request) -> _Response:
        return _Response(self.script.health_status, b"", content_type=None)

    def _model_info(self, request: _Request) -> _Response:
        return _json_response(200, {
            "model_path": self.server_args.get("model_path"),
            "tokenizer_path": self.server_args.get("tokenizer_path"),
            "is_generation": not self.server_args.get("is_embedding", False),
            "preferred_sampling_params": self.server_args.get("preferred_sampling_params"),
            "weight_version": self.server_args.get("weight_version", "default"),
        })

    def _server_info(self, request: _Request) -> _Response:
        internal = {"last_gen_throughput": self.metrics.last_gen_throughput,
                    "memory_usage": {"weight": 7.6, "kvcache": 58.3, "token_capacity": self.metrics.token_capacity,
                                     "graph": 1.1},
                    "avg_spec_accept_length": None}
        scheduler_info = {"max_total_num_tokens": self.metrics.token_capacity,
                          "max_req_input_len": int(self.server_args.get("context_length") or 0) - 1}
        return _json_response(200, {**self.server_args, "port": self.port, **scheduler_info,
                                    "internal_states": [internal], "version": self.script.version})

    def _metrics(self, request: _Request) -> _Response:
        if not self.script.metrics:
            return _json_response(404, {"detail": "Not Found"})
        text = self.metrics.render(self.counters["in_flight"], self.in_flight_prompt_tokens)
        return _Response(200, text.encode(), "text/plain; version=0.0.4; charset=utf-8")

    def _scripted_requests(self, request: _Request) -> _Response:
        return _json_response(200, [vars(item) for item in self.recorded])

    def _record(self, request: _Request) -> None:
        body: Any = None
        raw: str | None = None
        if request.body:
            try:
                body = json.loads(request.body)
            except ValueError:
                raw = request.body.decode("utf-8", errors="replace")
        self.recorded.append(RecordedRequest(request.method, request.path, request.query, dict(request.headers),
                                             body, raw, time.time()))


def _step(messages: list[dict[str, Any]]) -> int:
    """The turn index: 0 for a fresh conversation (system + user only), else the number of assistant messages."""
    return sum(1 for message in messages if message.get("role") == "assistant")


def _canonical(value: Any) -> bytes:
    return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False).encode()


def _message_chars(message: dict[str, Any]) -> int:
    content = message.get("content")
    if isinstance(content, str):
        chars = len(content)
    elif isinstance(content, list):
        chars = sum(len(part.get("text") or "") for part in content if isinstance(part, dict))
    else:
        chars = 0
    chars += len(message.get("reasoning_content") or "") + 4  # role and delimiters
    for call in message.get("tool_calls") or []:
        function = call.get("function") if isinstance(call, dict) else None
        if not isinstance(function, dict):
            continue
        arguments = function.get("arguments") or ""
        chars += len(str(function.get("name") or "")) + len(arguments if isinstance(arguments, str)
                                                             else json.dumps(arguments))
    return chars


def _tool_call(spec: ToolCallSpec, index: int) -> dict[str, Any]:
    arguments = spec.arguments if isinstance(spec.arguments, str) else json.dumps(spec.arguments,
                                                                                   ensure_ascii=False)
    return {"id": spec.id or f"call_{uuid.uuid4().hex[:24]}", "index": index, "type": "function",
            "function": {"name": spec.name, "arguments": arguments}}


def _usage_info(prompt_tokens: int, completion_tokens: int, cached_tokens: int, reasoning_tokens: int, *,
                cache_report: bool) -> dict[str, Any]:
    """SGLang's UsageInfo (field order included), plus OpenAI's completion_tokens_details for reasoning."""
    return {
        "prompt_tokens": prompt_tokens,
        "total_tokens": prompt_tokens + completion_tokens,
        "completion_tokens": completion_tokens,
        "prompt_tokens_details": {"cached_tokens": cached_tokens} if cache_report and cached_tokens > 0 else None,
        "reasoning_tokens": reasoning_tokens,
        "completion_tokens_details": {"reasoning_tokens": reasoning_tokens},
    }


def _cached(usage: dict[str, Any]) -> int:
    details = usage.get("prompt_tokens_details")
    return details["cached_tokens"] if details else 0


def _error_headers(turn: TurnSpec) -> dict[str, str]:
    headers = dict(turn.headers)
    if turn.retry_after is not None:
        retry_after = turn.retry_after
        headers["retry-after"] = str(int(retry_after)) if retry_after == int(retry_after) else str(retry_after)
    return headers


def _json_response(status: int, payload: Any, headers: dict[str, str] | None = None) -> _Response:
    return _Response(status, json.dumps(payload, ensure_ascii=False).encode(), headers=headers or {})


def _sse_stream(completion_id: str, model: str, content: str | None, reasoning: str | None,
                tool_calls: list[dict[str, Any]], finish_reason: str, usage: dict[str, Any], *,
                include_usage: bool) -> bytes:
    created = int(time.time())

    def chunk(delta: dict[str, Any] | None, finish: str | None = None, usage_info: Any = None) -> bytes:
        choices = [] if delta is None else [{
            "index": 0, "delta": {"role": None, "content": None, "reasoning_content": None, "tool_calls": None,
                                  **delta},
            "logprobs": None, "finish_reason": finish,
            "matched_stop": _EOS_TOKEN_ID if finish == "stop" else None}]
        event = {"id": completion_id, "object": "chat.completion.chunk", "created": created, "model": model,
                 "choices": choices, "usage": usage_info}
        return b"data: " + json.dumps(event, ensure_ascii=False).encode() + b"\n\n"

    parts = [chunk({"role": "assistant", "content": ""})]
    if reasoning:
        parts.append(chunk({"reasoning_content": reasoning}))
    if content:
        parts.append(chunk({"content": content}))
    for call in tool_calls:
        parts.append(chunk({"tool_calls": [call]}))
    parts.append(chunk({}, finish=finish_reason))
    if include_usage:
        parts.append(chunk(None, usage_info=usage))
    parts.append(b"data: [DONE]\n\n")
    return b"".join(parts)


def _server_args(script: Script) -> dict[str, Any]:
    """SGLang's ServerArgs as /get_server_info shows them, for the FrogNano launch in costs.md, then the script's."""
    args: dict[str, Any] = {
        "model_path": script.model, "tokenizer_path": script.model, "tokenizer_mode": "auto",
        "skip_tokenizer_init": False, "load_format": "auto", "trust_remote_code": False, "dtype": "auto",
        "kv_cache_dtype": "auto", "quantization": None, "context_length": 131072, "device": "cuda",
        "served_model_name": script.served_name, "chat_template": None, "is_embedding": False,
        "revision": None, "host": "127.0.0.1", "port": 30000, "mem_fraction_static": 0.85,
        "max_running_requests": None, "max_total_tokens": None, "chunked_prefill_size": 8192,
        "max_prefill_tokens": 16384, "schedule_policy": "fcfs", "schedule_conservativeness": 1.0,
        "tp_size": 1, "dp_size": 1, "pp_size": 1, "ep_size": 1, "stream_interval": 1, "random_seed": 0,
        "log_level": "info", "api_key": None, "enable_metrics": script.metrics, "enable_cache_report": True,
        "reasoning_parser": "qwen3", "tool_call_parser": "qwen3_coder", "disable_radix_cache": False,
        "attention_backend": None, "preferred_sampling_params": None, "weight_version": "default",
    }
    if script.auth is not None and script.auth.startswith("Bearer "):
        args["api_key"] = script.auth[len("Bearer "):]  # SGLang echoes its --api-key here; clients must redact it
    args.update(script.server_args)
    return args


# ----------------------------------------------------------------------------------------------------------------
# Instant mode: answers rendered from templates, no JSON parsing of the request
# ----------------------------------------------------------------------------------------------------------------

class _InstantTemplates:
    """Pre-rendered answers: a request costs a regex count (assistant messages) and one string format."""

    def __init__(self, script: Script) -> None:
        instant = script.instant
        assert instant is not None
        self.steps = instant.steps
        self.prompt_tokens, self.completion_tokens = instant.prompt_tokens, instant.completion_tokens
        usage = _usage_info(instant.prompt_tokens, instant.completion_tokens, 0, 0, cache_report=True)
        arguments = (instant.arguments if isinstance(instant.arguments, str)
                     else json.dumps(instant.arguments, ensure_ascii=False))
        marker = {"id": "\x00ID\x00", "model": "\x00MODEL\x00", "created": "\x00CREATED\x00",
                  "call": "\x00CALL\x00"}

        def template(message: dict[str, Any], finish_reason: str) -> str:
            payload = {"id": marker["id"], "object": "chat.completion", "created": marker["created"],
                       "model": marker["model"],
                       "choices": [{"index": 0, "message": message, "logprobs": None, "finish_reason": finish_reason,
                                    "matched_stop": _EOS_TOKEN_ID if finish_reason == "stop" else None}],
                       "usage": usage, "metadata": {"weight_version": "default"}}
            text = json.dumps(payload, ensure_ascii=False).replace("%", "%%")
            return (text.replace(json.dumps(marker["id"]), '"chatcmpl-%s"')
                    .replace(json.dumps(marker["created"]), "%d")
                    .replace(json.dumps(marker["model"]), '"%s"')
                    .replace(json.dumps(marker["call"]), '"call_%s"'))

        call = {"id": marker["call"], "index": 0, "type": "function",
                "function": {"name": instant.tool, "arguments": arguments}}
        self.tool_template = template({"role": "assistant", "content": "", "reasoning_content": None,
                                       "tool_calls": [call]}, "tool_calls")
        self.final_template = template({"role": "assistant", "content": instant.final, "reasoning_content": None,
                                        "tool_calls": None}, "stop")

    def render(self, step: int, model: str) -> bytes:
        token = uuid.uuid4().hex
        if step < self.steps:
            text = self.tool_template % (token, int(time.time()), model, token[:24])
        else:
            text = self.final_template % (token, int(time.time()), model)
        return text.encode()

    def answer(self, seconds: float) -> _Answer:
        return _Answer(self.prompt_tokens, 0, self.completion_tokens, seconds)


# ----------------------------------------------------------------------------------------------------------------
# Prometheus metrics in SGLang's names and labels
# ----------------------------------------------------------------------------------------------------------------

# Bucket bounds as SGLang's TokenizerMetricsCollector and SchedulerMetricsCollector define them by default.
_TTFT_BUCKETS = (0.1, 0.2, 0.4, 0.6, 0.8, 1, 2, 4, 6, 8, 10, 20, 40, 60, 80, 100, 200, 400)
_E2E_BUCKETS = (0.1, 0.2, 0.4, 0.6, 0.8, 1, 2, 4, 6, 8, 10, 20, 40, 60, 80, 100, 200, 400, 600, 1200, 1800, 2400)
_ITL_BUCKETS = (0.002, 0.004, 0.006, 0.008, 0.010, 0.015, 0.020, 0.025, 0.030, 0.035, 0.040, 0.060, 0.080, 0.100,
                0.200, 0.400, 0.600, 0.800, 1.000, 2.000, 4.000, 6.000, 8.000)
_QUEUE_BUCKETS = (0.0, 0.1, 0.2, 0.5, 1, 2, 3, 4, 5, 10, 15, 20, 30, 40, 50, 60, 70, 80, 90, 100, 200, 300, 400,
                  500, 600, 700, 800, 900, 1000, 1200, 1400, 1600, 1800, 2000, 2500, 3000)


class _Histogram:
    def __init__(self, bounds: tuple[float, ...]) -> None:
        self.bounds = bounds
        self.counts = [0] * (len(bounds) + 1)
        self.sum = 0.0

    def observe(self, value: float) -> None:
        for index, bound in enumerate(self.bounds):
            if value <= bound:
                self.counts[index] += 1
                break
        else:
            self.counts[-1] += 1
        self.sum += value


class _Metrics:
    """Counters that grow with served requests, gauges computed at scrape time, histograms of measured latency.

    Token counters are exact sums of the usage the server reported. GPU time is simulated from the script's
    per-token costs; latencies are what this stand-in actually measured (request arrival to answer).
    """

    def __init__(self, script: Script) -> None:
        name = script.served_name
        self.tokenizer_labels = {"model_name": name, "engine_type": "unified"}
        self.scheduler_labels = {"model_name": name, "engine_type": "unified", "tp_rank": "0", "pp_rank": "0",
                                 "moe_ep_rank": "0"}
        self.gpu = script.gpu
        self.token_capacity = int(script.server_args.get("max_total_tokens") or 1_048_576)
        self.prompt_tokens = self.generation_tokens = self.cached_tokens = self.requests = 0
        self.gpu_extend_seconds = self.gpu_decode_seconds = 0.0
        self.ttft = _Histogram(_TTFT_BUCKETS)
        self.e2e = _Histogram(_E2E_BUCKETS)
        self.itl = _Histogram(_ITL_BUCKETS)
        self.queue = _Histogram(_QUEUE_BUCKETS)
        self.last_scrape = (time.monotonic(), 0, 0.0)  # when, generation tokens, gpu seconds
        self.last_gen_throughput = 0.0
        self.last_utilization = 0.0

    def record(self, answer: _Answer) -> None:
        self.requests += 1
        self.prompt_tokens += answer.prompt_tokens
        self.cached_tokens += answer.cached_tokens
        self.generation_tokens += answer.completion_tokens
        self.gpu_extend_seconds += (answer.prompt_tokens - answer.cached_tokens) * self.gpu.prefill_seconds_per_token
        self.gpu_decode_seconds += answer.completion_tokens * self.gpu.decode_seconds_per_token
        self.ttft.observe(answer.seconds)
        self.e2e.observe(answer.seconds)
        self.itl.observe(self.gpu.decode_seconds_per_token)
        self.queue.observe(0.0)

    def render(self, running: int, running_prompt_tokens: int) -> str:
        now = time.monotonic()
        gpu_seconds = self.gpu_extend_seconds + self.gpu_decode_seconds
        then, generated_then, gpu_then = self.last_scrape
        interval = now - then
        if interval > 0:
            self.last_gen_throughput = (self.generation_tokens - generated_then) / interval
            self.last_utilization = min(1.0, (gpu_seconds - gpu_then) / interval)
        self.last_scrape = (now, self.generation_tokens, gpu_seconds)
        tok, sch = self.tokenizer_labels, self.scheduler_labels
        out: list[str] = []
        counter = _family(out, "counter")
        gauge = _family(out, "gauge")
        counter("sglang:prompt_tokens_total", "Number of prefill tokens processed.", [(tok, self.prompt_tokens)])
        counter("sglang:generation_tokens_total", "Number of generation tokens processed.",
                [(tok, self.generation_tokens)])
        counter("sglang:cached_tokens_total", "Number of cached prompt tokens.", [(tok, self.cached_tokens)])
        counter("sglang:num_requests_total", "Number of requests processed.", [(tok, self.requests)])
        counter("sglang:num_aborted_requests_total", "Number of requests aborted.", [(tok, 0)])
        _histogram(out, "sglang:time_to_first_token_seconds", "Histogram of time to first token in seconds.", tok,
                   self.ttft)
        _histogram(out, "sglang:inter_token_latency_seconds", "Histogram of inter-token latency in seconds.", tok,
                   self.itl)
        _histogram(out, "sglang:e2e_request_latency_seconds", "Histogram of End-to-end request latency in seconds",
                   tok, self.e2e)
        gauge("sglang:num_running_reqs", "The number of running requests.", [(sch, running)])
        gauge("sglang:num_used_tokens", "The number of used tokens.", [(sch, running_prompt_tokens)])
        gauge("sglang:token_usage", "The token usage.", [(sch, min(1.0, running_prompt_tokens / self.token_capacity))])
        gauge("sglang:gen_throughput", "The generation throughput (token/s).", [(sch, self.last_gen_throughput)])
        gauge("sglang:num_queue_reqs", "The number of requests in the waiting queue.", [(sch, 0)])
        gauge("sglang:cache_hit_rate", "The prefix cache hit rate.",
              [(sch, self.cached_tokens / self.prompt_tokens if self.prompt_tokens else 0.0)])
        gauge("sglang:max_total_num_tokens", "Maximum total number of tokens in the KV cache pool.",
              [(sch, self.token_capacity)])
        gauge("sglang:utilization", "The utilization.", [(sch, self.last_utilization)])
        _histogram(out, "sglang:queue_time_seconds", "Histogram of queueing time in seconds.", sch, self.queue)
        counter("sglang:realtime_tokens_total",
                "Total number of tokens processed (updated on each log interval). "
                "mode: prefill_compute, prefill_cache, decode.",
                [({**sch, "mode": "prefill_compute"}, self.prompt_tokens - self.cached_tokens),
                 ({**sch, "mode": "prefill_cache"}, self.cached_tokens),
                 ({**sch, "mode": "decode"}, self.generation_tokens)])
        counter("sglang:gpu_execution_seconds_total",
                "Total time that GPU is busy executing a workload. Refer to ForwardMode for category labels.",
                [({**sch, "category": "forward_extend"}, self.gpu_extend_seconds),
                 ({**sch, "category": "forward_decode"}, self.gpu_decode_seconds)])
        return "".join(out)


def _family(out: list[str], kind: str) -> Callable[[str, str, list[tuple[dict[str, str], float]]], None]:
    def add(name: str, documentation: str, samples: list[tuple[dict[str, str], float]]) -> None:
        out.append(f"# HELP {name} {documentation}\n# TYPE {name} {kind}\n")
        for labels, value in samples:
            out.append(f"{name}{_labels(labels)} {float(value)!r}\n")
    return add


def _histogram(out: list[str], name: str, documentation: str, labels: dict[str, str], histogram: _Histogram) -> None:
    out.append(f"# HELP {name} {documentation}\n# TYPE {name} histogram\n")
    cumulative = 0
    for bound, count in zip((*histogram.bounds, float("inf")), histogram.counts):
        cumulative += count
        le = "+Inf" if bound == float("inf") else repr(float(bound))
        out.append(f"{name}_bucket{_labels({**labels, 'le': le})} {float(cumulative)!r}\n")
    out.append(f"{name}_sum{_labels(labels)} {histogram.sum!r}\n")
    out.append(f"{name}_count{_labels(labels)} {float(cumulative)!r}\n")


def _labels(labels: dict[str, str]) -> str:
    def escape(value: str) -> str:
        return value.replace("\\", "\\\\").replace("\n", "\\n").replace('"', '\\"')
    return "{" + ",".join(f'{key}="{escape(str(value))}"' for key, value in labels.items()) + "}"


if __name__ == "__main__":
    sys.exit(main())
