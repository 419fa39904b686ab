"""Reconciliation of a hosted arm's costs: what the router said each call cost beside what leafcost computed from
the arm's price sheet. Agreement is expected when both use the same prices; a gap over 1 % is flagged."""

from __future__ import annotations

from pydantic import BaseModel

FLAG_ABOVE = 0.01  # relative difference


class Reconciliation(BaseModel):
    arm: str
    calls_compared: int  # answered calls with both a router-reported and a computed cost
    calls_without_router_cost: int  # answered calls the router gave no cost for
    max_relative_difference: float | None  # |computed - router| / router, the worst call
    flagged: bool

    def warning(self) -> str | None:
        if not self.flagged:
            return None
        return (f"arm {self.arm}: the router's reported cost differs from leafcost's computed cost by up to "
                f"{self.max_relative_difference:.2%} (over {FLAG_ABOVE:.0%}) on {self.calls_compared} compared "
                "calls: the arm's prices are not the router's (check the price sheet, or the router's margin)")


def reconcile(rows: list[dict], arm: str) -> Reconciliation:
    """`rows`: the arm's answered model_calls with `cost_usd` and `router_cost_usd`."""
    differences = [relative_difference(row["cost_usd"], row["router_cost_usd"]) for row in rows
                   if row["cost_usd"] is not None and row["router_cost_usd"] is not None]
    worst = max(differences) if differences else None
    return Reconciliation(arm=arm, calls_compared=len(differences),
                          calls_without_router_cost=sum(1 for row in rows if row["router_cost_usd"] is None),
                          max_relative_difference=worst, flagged=worst is not None and worst > FLAG_ABOVE)


def relative_difference(computed: float, reported: float) -> float:
    if computed == reported:
        return 0.0
    return abs(computed - reported) / max(abs(reported), abs(computed))
