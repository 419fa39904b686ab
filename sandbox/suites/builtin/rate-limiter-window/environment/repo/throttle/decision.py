"""The result of asking a limiter for permission."""

import math
from dataclasses import dataclass


@dataclass(frozen=True)
class Decision:
    #: whether the request may proceed (and, for acquire(), was counted)
    allowed: bool
    #: the limiter's maximum (bucket capacity / requests per window)
    limit: int
    #: whole units still available after this request
    remaining: int
    #: seconds to wait before the same request can succeed (0.0 if allowed,
    #: math.inf if it can never succeed, e.g. cost > limit)
    retry_after: float = 0.0
    #: seconds until the limiter is completely replenished
    reset_after: float = 0.0

    def __bool__(self) -> bool:
        return self.allowed

    def headers(self) -> dict:
        """HTTP headers in the style of the IETF RateLimit header draft,
        plus Retry-After for denied requests. Times are rounded up to whole
        seconds."""
        out = {
            "RateLimit-Limit": str(self.limit),
            "RateLimit-Remaining": str(self.remaining),
            "RateLimit-Reset": str(_ceil_seconds(self.reset_after)),
        }
        if not self.allowed and math.isfinite(self.retry_after):
            out["Retry-After"] = str(_ceil_seconds(self.retry_after))
        return out


def _ceil_seconds(seconds: float) -> int:
    if seconds <= 0:
        return 0
    return int(math.ceil(seconds - 1e-9))


def most_restrictive(decisions):
    """Combines the decisions of several limiters that all apply to the same
    request: denied if any denies; the numbers come from the tightest one."""
    decisions = list(decisions)
    if not decisions:
        raise ValueError("no decisions to combine")
    denied = [d for d in decisions if not d.allowed]
    if denied:
        worst = max(denied, key=lambda d: d.retry_after)
        return Decision(
            allowed=False,
            limit=worst.limit,
            remaining=min(d.remaining for d in decisions),
            retry_after=worst.retry_after,
            reset_after=max(d.reset_after for d in decisions),
        )
    tightest = min(decisions, key=lambda d: (d.remaining, -d.reset_after))
    return Decision(
        allowed=True,
        limit=tightest.limit,
        remaining=tightest.remaining,
        retry_after=0.0,
        reset_after=max(d.reset_after for d in decisions),
    )
