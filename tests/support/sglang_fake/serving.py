"""The fake's HTTP side: aiohttp's low-level server in front of a `ScriptedApp`, on the running event loop.

aiohttp brings keep-alive and chunked request bodies and writes each plain response in one send; asyncio sets
TCP_NODELAY on every connection. Handlers are cancelled when their client disconnects, as SGLang aborts a
request whose client left.
"""

from __future__ import annotations

from dataclasses import dataclass

from aiohttp import web

from support.sglang_fake.app import Incoming, Reply, ScriptedApp
from support.sglang_fake.script import Script

__all__ = ["Serving", "serve"]

_MAX_HEAD_FIELD = 64 * 1024  # a fake has no reason to refuse a long header or URL (aiohttp's default: 8 KiB)


@dataclass
class Serving:
    """A listening server; `close()` stops it, cancelling delayed and hanging answers first."""

    app: ScriptedApp
    runner: web.ServerRunner
    port: int

    async def close(self) -> None:
        waiting = list(self.app.waiting)
        for task in waiting:
            task.cancel()
        await self.runner.cleanup()


async def serve(script: Script, host: str, port: int) -> Serving:
    app = ScriptedApp(script)

    async def handler(request: web.BaseRequest) -> web.StreamResponse:
        path, _, query = request.raw_path.partition("?")
        if request.headers.get("Expect", "").lower() == "100-continue":  # curl's, for large bodies
            await request.writer.write(b"HTTP/1.1 100 Continue\r\n\r\n")
        # Not request.read(): it refuses bodies over 1 MiB, and a long conversation is bigger.
        body = await request.content.read() if request.body_exists else b""
        headers = {name.lower(): value for name, value in request.headers.items()}
        handled = app.handle(Incoming(request.method, path, query, headers, body))
        reply = handled if isinstance(handled, Reply) else await handled
        return await _respond(request, reply)

    server = web.Server(handler, handler_cancellation=True, access_log=None, max_line_size=_MAX_HEAD_FIELD,
                        max_field_size=_MAX_HEAD_FIELD)
    runner = web.ServerRunner(server, shutdown_timeout=1.0)
    await runner.setup()
    site = web.TCPSite(runner, host, port, reuse_address=True, backlog=1024)
    try:
        await site.start()
    except BaseException:
        await runner.cleanup()
        raise
    app.port = runner.addresses[0][1]
    return Serving(app, runner, app.port)


async def _respond(request: web.BaseRequest, reply: Reply) -> web.StreamResponse:
    if not reply.stream:
        response = web.Response(status=reply.status, body=reply.body, headers=reply.headers)
        if reply.content_type is not None:
            response.headers["Content-Type"] = reply.content_type
        return response
    stream = web.StreamResponse(status=reply.status, headers=reply.headers)
    if reply.content_type is not None:
        stream.headers["Content-Type"] = reply.content_type
    await stream.prepare(request)
    await stream.write(reply.body)
    await stream.write_eof()
    return stream
