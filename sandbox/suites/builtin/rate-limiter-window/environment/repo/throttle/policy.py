"""Combining limiters, and keeping one limiter per client key."""

import threading
from collections import OrderedDict

from .decision import most_restrictive


class CompositePolicy:
    """Applies several limiters to the same stream of requests: a request is
    allowed only if every limiter allows it, and then it is counted by all of
    them. A denied request is counted by none.

    ``CompositePolicy([TokenBucket(10, 1), SlidingWindowLog(100, 3600)])``
    allows bursts of 10, 1/s sustained, and at most 100 per hour.
    """

    def __init__(self, limiters):
        self.limiters = list(limiters)
        if not self.limiters:
            raise ValueError("a composite policy needs at least one limiter")
        self._lock = threading.Lock()

    def peek(self, cost=1):
        with self._lock:
            return most_restrictive(l.peek(cost) for l in self.limiters)

    def acquire(self, cost=1):
        with self._lock:
            checks = [l.peek(cost) for l in self.limiters]
            if not all(checks):
                return most_restrictive(checks)
            return most_restrictive(l.acquire(cost) for l in self.limiters)

    def __repr__(self):
        return f"CompositePolicy({self.limiters!r})"


class KeyedLimiter:
    """One limiter per key (user id, API token, client IP, ...), created on
    first use by ``factory()``. At most ``max_keys`` limiters are kept; the
    least recently used one is dropped when a new key arrives.
    """

    def __init__(self, factory, max_keys=10_000):
        if max_keys < 1:
            raise ValueError("max_keys must be positive")
        self.factory = factory
        self.max_keys = max_keys
        self._limiters = OrderedDict()
        self._lock = threading.Lock()

    def _get(self, key):
        with self._lock:
            limiter = self._limiters.get(key)
            if limiter is None:
                limiter = self.factory()
                self._limiters[key] = limiter
                while len(self._limiters) > self.max_keys:
                    self._limiters.popitem(last=False)
            else:
                self._limiters.move_to_end(key)
            return limiter

    def acquire(self, key, cost=1):
        return self._get(key).acquire(cost)

    def peek(self, key, cost=1):
        return self._get(key).peek(cost)

    def forget(self, key):
        with self._lock:
            self._limiters.pop(key, None)

    def __contains__(self, key):
        with self._lock:
            return key in self._limiters

    def __len__(self):
        with self._lock:
            return len(self._limiters)
