"""Window based limiters: fixed window counter and sliding window log."""

import math
import threading
from collections import deque

from .clock import DEFAULT_CLOCK
from .decision import Decision


def _check_limit(limit, window):
    if int(limit) != limit or limit < 1:
        raise ValueError("limit must be a positive integer")
    if not window > 0:
        raise ValueError("window must be positive")


class FixedWindowCounter:
    """At most ``limit`` units per window of ``window`` seconds, where windows
    are aligned to multiples of ``window`` (counted from ``origin``).

    Cheap, but allows up to 2 * limit requests around a window edge.
    """

    def __init__(self, limit, window, clock=None, origin=0.0):
        _check_limit(limit, window)
        self.limit = int(limit)
        self.window = float(window)
        self.origin = float(origin)
        self._clock = clock or DEFAULT_CLOCK
        self._index = None
        self._count = 0
        self._lock = threading.Lock()

    def _roll(self, now):
        index = math.floor((now - self.origin) / self.window)
        if index != self._index:
            self._index = index
            self._count = 0
        return self.origin + (index + 1) * self.window

    def _decide(self, cost, consume):
        if cost < 0:
            raise ValueError("cost must not be negative")
        with self._lock:
            now = self._clock.now()
            window_end = self._roll(now)
            until_reset = window_end - now
            if cost > self.limit:
                return Decision(False, self.limit, self.limit - self._count, math.inf, until_reset)
            if self._count + cost <= self.limit:
                if consume:
                    self._count += cost
                left = self.limit - self._count if consume else self.limit - self._count - cost
                return Decision(True, self.limit, left, 0.0, until_reset if left < self.limit else 0.0)
            return Decision(False, self.limit, self.limit - self._count, until_reset, until_reset)

    def acquire(self, cost=1):
        return self._decide(cost, consume=True)

    def peek(self, cost=1):
        return self._decide(cost, consume=False)

    def __repr__(self):
        return f"FixedWindowCounter(limit={self.limit}, window={self.window})"


class SlidingWindowLog:
    """At most ``limit`` units in any ``window`` seconds.

    Every accepted request is logged with its time; a request made at time
    ``t`` counts against requests made before ``t + window`` (so with a
    60 s window, a request at 10.0 no longer counts at 70.0).
    Exact, at the cost of memory proportional to ``limit``.
    """

    def __init__(self, limit, window, clock=None):
        _check_limit(limit, window)
        self.limit = int(limit)
        self.window = float(window)
        self._clock = clock or DEFAULT_CLOCK
        self._log = deque()   # (timestamp, cost), oldest first
        self._used = 0
        self._lock = threading.Lock()

    def _evict(self, now):
        log = self._log
        while log and log[0][0] + self.window <= now:
            _, cost = log.popleft()
            self._used -= cost

    def _wait_for(self, free_needed, now):
        """Seconds until ``free_needed`` more units are free."""
        freed = 0
        for stamp, cost in self._log:
            freed += cost
            if freed >= free_needed:
                return stamp + self.window - now
        return math.inf

    def _reset_after(self, now):
        if not self._log:
            return 0.0
        return self._log[-1][0] + self.window - now

    def _decide(self, cost, consume):
        if cost < 0:
            raise ValueError("cost must not be negative")
        with self._lock:
            now = self._clock.now()
            self._evict(now)
            if cost > self.limit:
                return Decision(False, self.limit, self.limit - self._used, math.inf,
                                self._reset_after(now))
            if self._used + cost <= self.limit:
                if consume:
                    if cost:
                        self._log.append((now, cost))
                        self._used += cost
                    left = self.limit - self._used
                else:
                    left = self.limit - self._used - cost
                return Decision(True, self.limit, left, 0.0, self._reset_after(now))
            wait = self._wait_for(self._used + cost - self.limit, now)
            return Decision(False, self.limit, self.limit - self._used, wait,
                            self._reset_after(now))

    def acquire(self, cost=1):
        return self._decide(cost, consume=True)

    def peek(self, cost=1):
        return self._decide(cost, consume=False)

    def __len__(self):
        with self._lock:
            self._evict(self._clock.now())
            return len(self._log)

    def __repr__(self):
        return f"SlidingWindowLog(limit={self.limit}, window={self.window})"
