"""What the routes share: the bootstrap's query parameters, the documented error answers and the server's
version."""

from __future__ import annotations

from importlib import metadata
from typing import Annotated

from fastapi import Query

from compare.api.models import ErrorDetail

MAX_RESAMPLES = 10_000  # the bootstrap's counts are resamples × tasks integers: bounded so no request exhausts memory

NOT_FOUND = {404: {"model": ErrorDetail, "description": "unknown run, arm, episode or scenario"}}
BUSY = {503: {"model": ErrorDetail, "description": "the ledger cannot be read now (a run writes it, or it is "
                                                   "missing or from a newer leafcost)"}}
Resamples = Annotated[int, Query(ge=100, le=MAX_RESAMPLES, description="bootstrap resamples over tasks")]
Seed = Annotated[int, Query(ge=0, le=2**32 - 1, description="bootstrap seed (same seed, same intervals)")]


def leafcost_version() -> str:
    try:
        return metadata.version("leafcost")
    except metadata.PackageNotFoundError:
        return "unknown"
