"""An episode's limits, as the run spec sets them and the Leaf loop keeps them (its own module: the loop needs them
without the rest of the spec)."""

from __future__ import annotations

from pydantic import Field

from compare.strict import StrictModel

MAX_TOKENS = 100_000_000
MAX_SECONDS = 30 * 86_400


class Budgets(StrictModel):
    max_steps: int = Field(150, gt=0, le=1_000_000)
    max_context_tokens: int = Field(131072, gt=0, le=MAX_TOKENS)
    max_tokens_per_turn: int | None = Field(None, gt=0, le=MAX_TOKENS)
    time_budget_sec: float = Field(10800.0, gt=0, le=MAX_SECONDS)
