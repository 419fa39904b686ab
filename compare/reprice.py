"""What-if repricing of a finished run: the recorded tokens, leases and sandbox seconds under another price sheet
(another router, another GPU price, spot instead of on-demand), without touching the recorded facts. The
result is a summary document like `leafcost summary`'s, stored in the ledger as a named scenario. The price
sheet's model bounds every price (finite, not negative, at most the run spec's own maxima), so the CLI and the
API refuse the same sheets with the same field names."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import numpy as np
from pydantic import Field, model_validator

from compare.pricing import explicit_cost_arrays
from compare.arms import MAX_USD_PER_HOUR, MAX_USD_PER_VCPU_HOUR, Prices, StrictModel
from compare.spec import RunSpec, SpecError, read_yaml, validate_mapping
from compare.summary import PriceOverrides, SummaryError

SCENARIO_NAME = r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,62}$"


class ArmPrices(StrictModel):
    """Hosted arms: `prices` (USD per 1M tokens) or `litellm_model` (that model's prices in litellm's pinned map).
    Self-hosted arms: `usd_per_hour` (per GPU, or for the local arm's machine)."""

    prices: Prices | None = None
    litellm_model: str | None = None
    usd_per_hour: float | None = Field(None, gt=0, le=MAX_USD_PER_HOUR,
                                       description="USD per GPU-hour (SGLang) or per machine-hour (local arm)")

    @model_validator(mode="after")
    def _one_kind(self) -> ArmPrices:
        given = [k for k in ("prices", "litellm_model", "usd_per_hour") if getattr(self, k) is not None]
        if len(given) != 1:
            raise ValueError("give exactly one of prices, litellm_model (hosted arms) or usd_per_hour "
                             f"(self-hosted arms); got {', '.join(given) or 'none'}")
        return self


class PriceSheet(StrictModel):
    name: str | None = Field(None, pattern=SCENARIO_NAME)
    sandbox_usd_per_vcpu_hour: float | None = Field(None, ge=0, le=MAX_USD_PER_VCPU_HOUR)
    arms: dict[str, ArmPrices] = Field(default_factory=dict)


def load_price_sheet(path: Path | str) -> PriceSheet:
    """The YAML sheet at `path`, or a SummaryError of one line naming every wrong field."""
    try:
        return validate_mapping(PriceSheet, read_yaml(path), str(path),
                                "a price sheet is a mapping (name, sandbox_usd_per_vcpu_hour, arms)")
    except SpecError as exc:
        raise SummaryError(" ".join(str(exc).split())) from None  # YAML's own messages span lines


def check_scenario_name(name: str) -> str:
    """`name` if it can name a scenario (the rule of the sheet's `name` and of the API's), else a SummaryError."""
    if not re.fullmatch(SCENARIO_NAME, name):
        raise SummaryError(f"scenario name {name!r}: letters, digits, '_', '.' and '-' only, at most 63, starting "
                           "with a letter or digit (set it with --name)")
    return name


def overrides_for(conn, run_id: str, spec: RunSpec, sheet: PriceSheet, name: str) -> PriceOverrides:
    """The sheet checked against the run's arms, and every hosted call of a repriced arm priced again from its
    recorded tokens (one vectorised pass per arm)."""
    arms = {arm.name: arm for arm in spec.arms}
    overrides = PriceOverrides(name=name, sandbox_usd_per_vcpu_hour=sheet.sandbox_usd_per_vcpu_hour)
    for arm_name, entry in sheet.arms.items():
        arm = arms.get(arm_name)
        if arm is None:
            raise SummaryError(f"arms.{arm_name}: run {run_id} has no such arm (its arms: {', '.join(arms)})")
        try:
            price = arm.reprice(entry)
        except ValueError as exc:
            raise SummaryError(f"arms.{arm_name}: {exc}") from None
        if arm.billing == "tokens":
            overrides.hosted_cost_by_episode[arm_name] = _repriced_calls(conn, run_id, arm_name, price)
        else:
            overrides.lease_usd_per_hour[arm_name] = price
    return overrides


def _repriced_calls(conn, run_id: str, arm: str, prices: Prices) -> dict[str, float]:
    columns = conn.execute(
        "SELECT episode_id, prompt_tokens, cached_tokens, cache_write_tokens, completion_tokens, reasoning_tokens "
        "FROM model_calls WHERE run_id = ? AND arm = ?", [run_id, arm]).fetchnumpy()
    if len(columns["episode_id"]) == 0:
        return {}
    cost = explicit_cost_arrays(prices, prompt=columns["prompt_tokens"], cached=columns["cached_tokens"],
                                cache_write=columns["cache_write_tokens"], completion=columns["completion_tokens"],
                                reasoning=columns["reasoning_tokens"])
    episodes, inverse = np.unique(columns["episode_id"].astype(str), return_inverse=True)
    sums = np.bincount(inverse, weights=cost, minlength=len(episodes))
    return {str(e): float(s) for e, s in zip(episodes, sums)}


def sheet_summary(sheet: PriceSheet) -> dict[str, Any]:
    return sheet.model_dump(mode="json", exclude_none=True)
