"""The bearer token and body cap in front of the one write route: checked as ASGI middleware, before a byte of
the body is read."""

from __future__ import annotations

import re
import secrets

from fastapi.security.utils import get_authorization_scheme_param
from starlette.datastructures import Headers
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from compare.api.errors import ApiError, error_body

API_TOKEN_ENV = "LEAFCOST_API_TOKEN"
WRITE_BODY_MAX_BYTES = 2**20  # a price sheet is a few hundred bytes; nothing bigger is read into memory

WRITE_PATH = re.compile(r"/runs/[^/]+/scenarios")  # the one route with a body (its {run_id} matches [^/]+)


def token_refusal(token: str | None, authorization: str | None) -> ApiError | None:
    """Why a write with this Authorization header is refused (403 writes disabled, 401 wrong or missing bearer
    token), or None. The header is read as HTTPBearer reads it."""
    if token is None:
        return ApiError(403, f"writes are disabled: set {API_TOKEN_ENV} where the server runs")
    scheme, given = get_authorization_scheme_param(authorization)
    if scheme.lower() != "bearer" or not secrets.compare_digest(given.encode(), token.encode()):
        return ApiError(401, "a valid bearer token is required (Authorization: Bearer ...)")
    return None


class WriteGuard:
    """ASGI middleware in front of the write route: the token is checked before a byte of the body is read, and
    the body is read only up to WRITE_BODY_MAX_BYTES (413 beyond). FastAPI reads a body in full before it runs a
    route's dependencies, so neither check can live in the route itself."""

    def __init__(self, app: ASGIApp, token: str | None, max_bytes: int = WRITE_BODY_MAX_BYTES):
        self.app, self.token, self.max_bytes = app, token, max_bytes

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or scope["method"] != "POST" or not WRITE_PATH.fullmatch(scope["path"]):
            await self.app(scope, receive, send)
            return
        headers = Headers(scope=scope)
        refusal = token_refusal(self.token, headers.get("authorization"))
        if refusal is None and _declared_length(headers) > self.max_bytes:
            refusal = self._too_large()
        if refusal is not None:
            await error_body(refusal.status_code, refusal.detail)(scope, receive, send)
            return
        body = await self._read_capped(receive)
        if body is None:
            too_large = self._too_large()
            await error_body(too_large.status_code, too_large.detail)(scope, receive, send)
            return
        await self.app(scope, _replay(body, receive), send)

    def _too_large(self) -> ApiError:
        return ApiError(413, f"the body is larger than {self.max_bytes:,} bytes (a price sheet is a few hundred)")

    async def _read_capped(self, receive: Receive) -> bytes | None:
        """The whole body, or None as soon as it exceeds the cap (a chunked body declares no length)."""
        chunks, size = [], 0
        while True:
            message = await receive()
            if message["type"] != "http.request":
                return b"".join(chunks)  # the client left; the route sees what came
            size += len(message.get("body", b""))
            if size > self.max_bytes:
                return None
            chunks.append(message.get("body", b""))
            if not message.get("more_body", False):
                return b"".join(chunks)


def _declared_length(headers: Headers) -> int:
    length = headers.get("content-length", "")
    return int(length) if length.isdigit() else 0  # the server refuses a malformed length before we run


def _replay(body: bytes, receive: Receive) -> Receive:
    """The body already read, then whatever the connection says next (its disconnect)."""
    sent = False

    async def replayed() -> Message:
        nonlocal sent
        if sent:
            return await receive()
        sent = True
        return {"type": "http.request", "body": body, "more_body": False}
    return replayed
