"""The base of every config model (run specs, arms, budgets, what-if prices), in a module of its own so that any of
them can use it without importing the others."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict


class StrictModel(BaseModel):
    """A config model: an unknown key is an error naming its field, and so are NaN and the infinities (past the
    model they would overflow sums or make JSON unencodable)."""

    model_config = ConfigDict(extra="forbid", allow_inf_nan=False)
