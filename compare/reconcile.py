"""Reconciliation of a hosted arm's costs: what the router said each call cost beside what leafcost computed from
the arm's price sheet (agreement is expected when both use the same prices; a gap over 1 % is flagged), and the
calls a crash lost: sent (their intent is in the ledger) but never recorded, listed as unrecorded spend with an
upper bound, and looked up in the router's spend log where the router keeps one (a LiteLLM proxy with a
database)."""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel

from adapters.base import AdapterError

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


# The intents of finished attempts whose answer never reached the ledger (no model_calls row with their call_key).
# Attempts still running are left out: their calls may be in flight.
UNRECORDED_SQL = """
SELECT i.* FROM call_intents AS i JOIN episodes AS e USING (episode_id)
WHERE i.run_id = ? AND e.status = 'finished'
  AND NOT EXISTS (SELECT 1 FROM model_calls AS m WHERE m.run_id = i.run_id AND m.call_key = i.call_key)
"""


def unrecorded_spend(rows: list[dict[str, Any]]) -> dict[str, Any]:
    """One arm's unrecorded calls (UNRECORDED_SQL rows) as the summary's `unrecorded_spend` entry."""
    bounds = [row["bound_usd"] for row in rows]
    unbounded = sum(1 for b in bounds if b is None)
    found = [row["router_spend_usd"] for row in rows if row["router_spend_usd"] is not None]
    reason = None
    if unbounded:
        reason = f"{unbounded} of them carried no completion cap or have no price: no upper bound"
    return {"calls": len(rows), "bound_usd": None if unbounded else float(sum(bounds)),
            "prompt_tokens_bound": int(sum(row["request_bytes"] for row in rows)),
            "completion_tokens_bound": None if any(r["max_tokens"] is None for r in rows)
            else int(sum(r["max_tokens"] for r in rows)),
            "reason": reason, "looked_up": sum(1 for row in rows if row["reconciled_at"] is not None),
            "found_in_router_log": len(found), "router_spend_usd": float(sum(found)) if found else None,
            "router_log_note": next((row["reconcile_note"] for row in rows if row["reconcile_note"]), None)}


def unrecorded_note(arm: str, entry: dict[str, Any]) -> str | None:
    """One line for a terminal: the arm's unrecorded calls and their bound, or None when it has none."""
    if not entry.get("calls"):
        return None
    bound = entry["bound_usd"]
    text = (f"{arm}: {entry['calls']} call(s) sent but never recorded (a crash lost their answers): unrecorded spend "
            + (f"at most ${bound:.6g}" if bound is not None else f"with no bound ({entry['reason']})"))
    if entry["found_in_router_log"]:
        text += (f"; the router's spend log billed {entry['found_in_router_log']} of them "
                 f"${entry['router_spend_usd']:.6g}")
    elif entry["looked_up"]:
        text += f"; router's spend log: {entry['router_log_note']}"
    return text


async def reconcile_unrecorded(ledger: Any, run_id: str, arm: Any) -> int:
    """Looks up this arm's unrecorded calls not looked up yet in its router's spend log (an adapter with
    `spend_log`, the router's), and records what it says; returns how many were looked up."""
    await ledger.flush()
    rows = ledger.query(UNRECORDED_SQL + " AND i.arm = ? AND i.reconciled_at IS NULL", [run_id, arm.name])
    if not rows:
        return 0
    try:
        adapter = arm.build_adapter()
    except AdapterError:  # its key is gone since the arm started: the calls stay listed, not looked up
        return 0
    if not hasattr(adapter, "spend_log"):
        return 0
    try:
        for row in rows:
            log = await adapter.spend_log(row["call_key"])
            entries = log.entries or []
            await ledger.record_reconciliation(
                row["call_key"], note=log.note,
                spend_usd=_total([e.spend_usd for e in entries]),
                prompt_tokens=_total([e.prompt_tokens for e in entries]),
                completion_tokens=_total([e.completion_tokens for e in entries]))
    finally:
        await adapter.stop()
    return len(rows)


def unrecorded_warning(ledger: Any, run_id: str, arm: str) -> str | None:
    """The run's closing warning about an arm's unrecorded calls (unrecorded_note), or None when it has none."""
    return unrecorded_note(arm, unrecorded_spend(ledger.query(UNRECORDED_SQL + " AND i.arm = ?", [run_id, arm])))


def _total(values: list[Any]) -> Any:
    present = [v for v in values if v is not None]
    return sum(present) if present else None
