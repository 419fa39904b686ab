"""Token bucket limiter."""

import math
import threading

from .clock import DEFAULT_CLOCK
from .decision import Decision


class TokenBucket:
    """A bucket holding up to ``capacity`` tokens, refilled at ``rate`` tokens
    per second. Each request takes ``cost`` tokens; a request is allowed if
    enough tokens are in the bucket.

    ``TokenBucket(capacity=10, rate=2)`` allows bursts of 10 requests and a
    sustained 2 requests per second. The bucket starts full unless
    ``initial_tokens`` is given.
    """

    def __init__(self, capacity, rate, clock=None, initial_tokens=None):
        if int(capacity) != capacity or capacity < 1:
            raise ValueError("capacity must be a positive integer")
        if not rate > 0:
            raise ValueError("rate must be positive")
        self.capacity = int(capacity)
        self.rate = float(rate)
        self._clock = clock or DEFAULT_CLOCK
        if initial_tokens is None:
            initial_tokens = self.capacity
        if not 0 <= initial_tokens <= self.capacity:
            raise ValueError("initial_tokens must be between 0 and capacity")
        self._tokens = int(initial_tokens)
        self._last = self._clock.now()
        self._lock = threading.Lock()

    @classmethod
    def per(cls, limit, period, clock=None):
        """``limit`` requests per ``period`` seconds, with bursts up to ``limit``."""
        return cls(capacity=limit, rate=limit / period, clock=clock)

    def _refill(self, now):
        if now <= self._last:
            return
        gained = int((now - self._last) * self.rate)
        self._tokens = min(self.capacity, self._tokens + gained)
        self._last = now

    def _seconds_until(self, tokens_needed, now):
        missing = tokens_needed - self._tokens
        if missing <= 0:
            return 0.0
        return missing / self.rate

    def _decide(self, cost, consume):
        if cost < 0:
            raise ValueError("cost must not be negative")
        with self._lock:
            now = self._clock.now()
            self._refill(now)
            if cost > self.capacity:
                return Decision(
                    allowed=False,
                    limit=self.capacity,
                    remaining=self._tokens,
                    retry_after=math.inf,
                    reset_after=self._seconds_until(self.capacity, now),
                )
            if self._tokens >= cost:
                left = self._tokens - cost
                if consume:
                    self._tokens = left
                return Decision(
                    allowed=True,
                    limit=self.capacity,
                    remaining=left,
                    retry_after=0.0,
                    reset_after=(self.capacity - left) / self.rate,
                )
            return Decision(
                allowed=False,
                limit=self.capacity,
                remaining=self._tokens,
                retry_after=self._seconds_until(cost, now),
                reset_after=self._seconds_until(self.capacity, now),
            )

    def acquire(self, cost=1):
        """Takes ``cost`` tokens if available. Returns a :class:`Decision`."""
        return self._decide(cost, consume=True)

    def peek(self, cost=1):
        """Like :meth:`acquire` but never takes tokens."""
        return self._decide(cost, consume=False)

    @property
    def tokens(self):
        """Whole tokens currently available."""
        with self._lock:
            self._refill(self._clock.now())
            return self._tokens

    def __repr__(self):
        return f"TokenBucket(capacity={self.capacity}, rate={self.rate})"
