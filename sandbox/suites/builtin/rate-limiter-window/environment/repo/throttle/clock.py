"""Clocks. Every limiter takes a ``clock`` so that tests (and simulations)
can control time; the default is the monotonic clock."""

import threading
import time


class MonotonicClock:
    """Seconds from :func:`time.monotonic`."""

    def now(self) -> float:
        return time.monotonic()


class ManualClock:
    """A clock that only moves when told to."""

    def __init__(self, start: float = 0.0):
        self._now = float(start)
        self._lock = threading.Lock()

    def now(self) -> float:
        with self._lock:
            return self._now

    def advance(self, seconds: float) -> float:
        if seconds < 0:
            raise ValueError("cannot move a clock backwards")
        with self._lock:
            self._now += seconds
            return self._now

    def set(self, when: float) -> None:
        with self._lock:
            if when < self._now:
                raise ValueError("cannot move a clock backwards")
            self._now = float(when)


DEFAULT_CLOCK = MonotonicClock()
