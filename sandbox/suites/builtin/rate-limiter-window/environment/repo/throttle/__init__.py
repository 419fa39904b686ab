"""throttle - rate limiting building blocks with an injectable clock."""

from .bucket import TokenBucket
from .clock import ManualClock, MonotonicClock
from .decision import Decision, most_restrictive
from .policy import CompositePolicy, KeyedLimiter
from .window import FixedWindowCounter, SlidingWindowLog

__version__ = "2.1.0"

__all__ = [
    "CompositePolicy",
    "Decision",
    "FixedWindowCounter",
    "KeyedLimiter",
    "ManualClock",
    "MonotonicClock",
    "SlidingWindowLog",
    "TokenBucket",
    "most_restrictive",
]
