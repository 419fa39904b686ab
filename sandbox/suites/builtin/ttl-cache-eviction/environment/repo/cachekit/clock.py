"""Clocks for the expiring caches.

A clock is any zero-argument callable that returns the current time in
seconds as a float. Caches default to :func:`monotonic`; tests and
simulations pass a :class:`ManualClock` so expiry can be exercised without
sleeping.
"""

import time


def monotonic() -> float:
    """Return seconds from the system's monotonic clock."""
    return time.monotonic()


class ManualClock:
    """A clock that only moves when told to.

    >>> clock = ManualClock(100.0)
    >>> clock()
    100.0
    >>> clock.advance(5)
    >>> clock()
    105.0
    """

    def __init__(self, start: float = 0.0) -> None:
        self._now = float(start)

    def __call__(self) -> float:
        return self._now

    def advance(self, seconds: float) -> None:
        """Move the clock forward by ``seconds`` (which must not be negative)."""
        if seconds < 0:
            raise ValueError("a ManualClock cannot go backwards")
        self._now += float(seconds)

    def set(self, now: float) -> None:
        """Jump to the absolute time ``now`` (not earlier than the current time)."""
        if now < self._now:
            raise ValueError("a ManualClock cannot go backwards")
        self._now = float(now)

    def __repr__(self) -> str:
        return f"ManualClock({self._now!r})"
