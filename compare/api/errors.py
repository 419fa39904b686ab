"""The API's answers other than 200: ApiError and the handlers that turn it, an unreadable ledger and a figure
that cannot be made into JSON `{"detail": ...}` bodies."""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

from fastapi import FastAPI
from fastapi.encoders import jsonable_encoder
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse

from compare.ledger import LedgerError
from compare.summary import SummaryError


class ApiError(Exception):
    """An answer other than 200, with the JSON body `{"detail": ..., **extra}`."""

    def __init__(self, status_code: int, detail: Any, **extra: Any):
        super().__init__(str(detail))
        self.status_code, self.detail, self.extra = status_code, detail, extra


def invalid(loc: Sequence[str | int], message: str) -> ApiError:
    """A 422 in FastAPI's own validation shape, so clients parse one kind of 422."""
    return ApiError(422, [{"loc": list(loc), "msg": message, "type": "value_error"}])


def error_body(status_code: int, detail: Any, **extra: Any) -> JSONResponse:
    return JSONResponse({"detail": detail, **extra}, status_code=status_code)


def install_error_handlers(app: FastAPI) -> None:
    import duckdb

    app.add_exception_handler(ApiError, lambda _, exc: error_body(exc.status_code, exc.detail, **exc.extra))
    # A ledger that cannot be read (busy, missing, newer, corrupt) is the server's state, not the request's.
    app.add_exception_handler(LedgerError, lambda _, exc: error_body(503, str(exc)))
    app.add_exception_handler(duckdb.Error, lambda _, exc: error_body(503, f"the ledger could not be read: {exc}"))
    app.add_exception_handler(SummaryError, lambda _, exc: error_body(422, detail_list(str(exc))))
    app.add_exception_handler(RequestValidationError, _validation_error)


def _validation_error(_, exc: RequestValidationError) -> JSONResponse:
    """FastAPI's own 422 body, with a NaN or infinity among the echoed inputs spelled as text: JSON has no such
    numbers, and a 422 that cannot be encoded would become a 500."""
    return error_body(422, _finite(jsonable_encoder(exc.errors())))


def _finite(value: Any) -> Any:
    if isinstance(value, float) and not math.isfinite(value):
        return repr(value)  # 'nan', 'inf', '-inf'
    if isinstance(value, dict):
        return {key: _finite(item) for key, item in value.items()}
    if isinstance(value, list):
        return [_finite(item) for item in value]
    return value


def detail_list(message: str) -> list[dict[str, Any]]:
    return [{"loc": [], "msg": message, "type": "value_error"}]
