"""cachekit: small in-process caches with an injectable clock.

The package offers a bounded least-recently-used cache (:class:`LRUCache`), a
cache whose entries expire after a time-to-live (:class:`TTLCache`) and a
:func:`memoize` decorator built on top of both.
"""

from .clock import ManualClock, monotonic
from .lru import CacheInfo, LRUCache
from .memoize import make_key, memoize
from .ttl import TTLCache

__all__ = [
    "CacheInfo",
    "LRUCache",
    "ManualClock",
    "TTLCache",
    "make_key",
    "memoize",
    "monotonic",
]

__version__ = "0.4.1"
