"""Break-even between a self-hosted arm and a hosted one: the GPU price, the utilization and the monthly task
volume at which the self-hosted cost per resolved attempt equals the hosted one, and its sensitivity over the
public GPU price grid. Built from the two arms' summaries (compare.summary), so it uses the same numbers.

The model, per attempt of the self-hosted arm: B = busy GPU-seconds per attempt, summed over every GPU (the
server's busy counter, one series per GPU: compare.costs.busy_seconds); a lease of k GPUs at p $/GPU-hour;
u = utilization = busy GPU-seconds ÷ (lease seconds × k); s sandbox $; r resolved per attempt. The lease holds
B/u GPU-seconds per attempt, so
    GPU $ per attempt = p·B / (3600·u)        (k is already in B and u: it appears in neither)
    cost per resolved attempt = (p·B / (3600·u) + s) / r
which, at the lease's own p and measured u, is exactly the summary's cost per resolved attempt. Against a hosted
cost per resolved attempt T the GPU may spend T·r − s per attempt, so
    break-even price p* = (T·r − s)·3600·u / B,  utilization needed u* = p·B / (3600·(T·r − s)),
and an always-on lease of k GPUs for a month (730 h) costs p·k·730: it breaks even at V = p·k·730 / (T·r − s)
attempts a month and serves at most 730·3600·k / B (every GPU-second busy)."""

from __future__ import annotations

from typing import Any

from compare.documents import Breakeven, BreakevenDocument, conforming

HOURS_PER_MONTH = 730.0
# shared/reference/costs.md: 2026 on-demand list prices, $/GPU-hour (low, typical, high): a sensitivity grid.
GPU_PRICE_GRID = {"H100": (2.00, 2.95, 3.99), "H200": (2.50, 3.50, 4.54)}


def breakeven(self_hosted: dict[str, Any], hosted: dict[str, Any], *, gpu_usd_per_hour: float | None = None,
              utilization: float | None = None) -> dict[str, Any]:
    """The break-even (compare.documents.Breakeven); `self_hosted` and `hosted` are arm entries of a summary
    document."""
    return conforming(Breakeven, _breakeven(self_hosted, hosted, gpu_usd_per_hour, utilization))


def breakeven_document(run_id: str, self_hosted: dict[str, Any], hosted: dict[str, Any], *,
                       gpu_usd_per_hour: float | None = None, utilization: float | None = None) -> dict[str, Any]:
    """The `leafcost breakeven --json` document (compare.documents.BreakevenDocument)."""
    result = breakeven(self_hosted, hosted, gpu_usd_per_hour=gpu_usd_per_hour, utilization=utilization)
    return conforming(BreakevenDocument, {"run_id": run_id, **result})


def _breakeven(self_hosted: dict[str, Any], hosted: dict[str, Any], gpu_usd_per_hour: float | None,
               utilization: float | None) -> dict[str, Any]:
    out: dict[str, Any] = {"self_hosted": self_hosted["arm"], "hosted": hosted["arm"],
                           "unit": "cost per resolved attempt"}
    target = (hosted.get("cost_per_resolved_attempt") or {}).get("value")
    lease = self_hosted.get("lease")
    reason = _why_not(self_hosted, hosted, target, lease)
    if reason:
        return {**out, "reason": reason, "gpu_usd_per_hour": None, "utilization": None,
                "monthly_attempts": None, "grid": []}
    attempts = self_hosted["attempts"]
    r = self_hosted["resolved_attempts"] / attempts
    s = self_hosted["cost_usd"]["sandbox"] / attempts
    b = lease["busy_seconds"] / attempts
    k = lease["count"]
    p = gpu_usd_per_hour if gpu_usd_per_hour is not None else lease["usd_per_hour"]
    u = utilization if utilization is not None else self_hosted.get("utilization")
    budget = target * r - s  # what one attempt may spend on the GPU to match the hosted arm
    out.update(hosted_cost_per_resolved_attempt=target, self_hosted_resolve_rate=r,
               busy_seconds_per_attempt=b, sandbox_usd_per_attempt=s, gpus=k, at_gpu_usd_per_hour=p,
               at_utilization=u,
               self_hosted_cost_per_resolved_attempt=_cost(p, u, b, s, r) if u else None)
    if budget <= 0:
        return {**out, "reason": "the self-hosted arm's sandbox cost per resolved attempt alone exceeds the hosted "
                "arm's cost per resolved attempt: no GPU price breaks even", "gpu_usd_per_hour": None,
                "utilization": None, "monthly_attempts": None, "grid": []}
    out["gpu_usd_per_hour"] = budget * 3600 * u / b if u else None
    needed = p * b / (3600 * budget)
    out["utilization"] = needed if needed <= 1 else None
    if needed > 1:
        out["utilization_reason"] = f"would need {needed:.0%} utilization at ${p:.2f}/GPU-hour: not reachable"
    volume = p * k * HOURS_PER_MONTH / budget
    capacity = HOURS_PER_MONTH * 3600 * k / b
    out["monthly_attempts"] = volume if volume <= capacity else None
    out["monthly_capacity_attempts"] = capacity
    if volume > capacity:
        out["monthly_attempts_reason"] = (f"would need {volume:,.0f} attempts a month; one always-on lease serves "
                                          f"at most {capacity:,.0f}")
    if not u:
        out["reason"] = "no measured utilization: pass one to get the break-even GPU price"
    out["grid"] = [{"gpu": gpu, "level": level, "gpu_usd_per_hour": price,
                    "self_hosted_cost_per_resolved_attempt": _cost(price, u, b, s, r) if u else None,
                    "breakeven_utilization": price * b / (3600 * budget)}
                   for gpu, prices in GPU_PRICE_GRID.items() for level, price in zip(("low", "typical", "high"),
                                                                                    prices)]
    return out


def breakeven_if_applicable(summaries: list[dict[str, Any]]) -> dict[str, Any] | None:
    """What `compare` adds for two arms: the break-even when one is self-hosted and the other hosted."""
    kinds = {s["kind"]: s for s in summaries}
    if set(kinds) != {"self-hosted", "hosted"}:
        return None
    return breakeven(kinds["self-hosted"], kinds["hosted"])


def _cost(p: float, u: float, b: float, s: float, r: float) -> float:
    """Cost per resolved attempt at p $/GPU-hour and utilization u (B busy GPU-seconds summed over the GPUs)."""
    return (p * b / (3600 * u) + s) / r


def _why_not(self_hosted: dict[str, Any], hosted: dict[str, Any], target: float | None,
             lease: dict[str, Any] | None) -> str | None:
    if self_hosted.get("kind") != "self-hosted":
        return f"arm {self_hosted['arm']} is not self-hosted"
    if hosted.get("kind") != "hosted":
        return f"arm {hosted['arm']} is not hosted"
    if target is None:
        return (f"the hosted arm has no cost per resolved attempt: "
                f"{(hosted.get('cost_per_resolved_attempt') or {}).get('reason', 'unknown')}")
    if not self_hosted.get("attempts") or not self_hosted.get("resolved_attempts"):
        return "the self-hosted arm resolved nothing: no price makes it match"
    if not lease:
        return "the self-hosted arm has no lease recorded"
    if not lease.get("busy_seconds"):
        return ("no busy GPU-seconds were measured for the self-hosted arm: "
                + (lease.get("busy_counter_reason") or "its server exported no busy counter"))
    return None
