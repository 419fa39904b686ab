"""A least-recently-used cache whose entries also expire.

Each entry carries an absolute deadline computed from the cache's clock when
it is written. An entry written at time ``t`` with a time-to-live ``ttl`` is
alive while ``clock() < t + ttl`` and expired from ``t + ttl`` on. Expired
entries are dropped lazily: on lookup, before an insertion that would
otherwise evict a live entry, and by an explicit :meth:`TTLCache.expire`.
"""

from typing import Any, Callable, Hashable, NamedTuple, Optional

from .clock import monotonic
from .lru import CacheInfo, EvictCallback, LRUCache

_MISSING = object()


class _Entry(NamedTuple):
    value: Any
    expires_at: float


class TTLCache:
    """An LRU cache of at most ``maxsize`` entries that each live ``ttl`` seconds.

    ``clock`` is a zero-argument callable returning seconds (see
    :mod:`cachekit.clock`). ``on_evict(key, value)`` is called for live
    entries pushed out to make room; expired entries are dropped silently
    and counted in :meth:`stats`.
    """

    def __init__(
        self,
        maxsize: Optional[int] = 128,
        ttl: float = 60.0,
        clock: Callable[[], float] = monotonic,
        on_evict: Optional[EvictCallback] = None,
    ) -> None:
        self._ttl = _check_ttl(ttl)
        self._clock = clock
        self._on_evict = on_evict
        self._lru = LRUCache(maxsize, on_evict=self._evicted)
        self._hits = 0
        self._misses = 0
        self._expirations = 0

    @property
    def ttl(self) -> float:
        return self._ttl

    @property
    def maxsize(self) -> Optional[int]:
        return self._lru.maxsize

    def set(self, key: Hashable, value: Any, ttl: Optional[float] = None) -> None:
        """Store ``value`` for ``ttl`` seconds (the cache default if omitted)."""
        ttl = self._ttl if ttl is None else _check_ttl(ttl)
        now = self._clock()
        maxsize = self._lru.maxsize
        if maxsize and key not in self._lru and len(self._lru) >= maxsize:
            self._expire(now)
        self._lru.put(key, _Entry(value, now + ttl))

    def get(self, key: Hashable, default: Any = None) -> Any:
        """Return the live value for ``key`` and mark it as most recently used."""
        entry = self._lru.peek(key, _MISSING)
        if entry is _MISSING:
            self._misses += 1
            return default
        if entry.expires_at <= self._clock():
            self._lru.pop(key, None)
            self._expirations += 1
            self._misses += 1
            return default
        self._lru.touch(key)
        self._hits += 1
        return entry.value

    def ttl_remaining(self, key: Hashable) -> Optional[float]:
        """Seconds until ``key`` expires, or None if it is absent or expired."""
        entry = self._lru.peek(key, _MISSING)
        if entry is _MISSING:
            return None
        remaining = entry.expires_at - self._clock()
        return remaining if remaining > 0 else None

    def pop(self, key: Hashable, default: Any = _MISSING) -> Any:
        entry = self._lru.pop(key, _MISSING)
        if entry is _MISSING or entry.expires_at <= self._clock():
            if default is _MISSING:
                raise KeyError(key)
            return default
        return entry.value

    def expire(self) -> int:
        """Drop every expired entry now; return how many were dropped."""
        return self._expire(self._clock())

    def clear(self) -> None:
        self._lru.clear()

    def keys(self) -> list:
        """Live keys, most recently used first."""
        now = self._clock()
        return [key for key, entry in self._lru.items() if entry.expires_at > now]

    def stats(self) -> dict:
        info = self._lru.cache_info()
        return {
            "hits": self._hits,
            "misses": self._misses,
            "expirations": self._expirations,
            "evictions": info.evictions,
            "currsize": info.currsize,
        }

    def cache_info(self) -> CacheInfo:
        info = self._lru.cache_info()
        return CacheInfo(self._hits, self._misses, info.maxsize, info.currsize, info.evictions)

    def __contains__(self, key: Hashable) -> bool:
        entry = self._lru.peek(key, _MISSING)
        return entry is not _MISSING and entry.expires_at > self._clock()

    def __len__(self) -> int:
        self.expire()
        return len(self._lru)

    def __iter__(self):
        return iter(self.keys())

    def __getitem__(self, key: Hashable) -> Any:
        value = self.get(key, _MISSING)
        if value is _MISSING:
            raise KeyError(key)
        return value

    def __setitem__(self, key: Hashable, value: Any) -> None:
        self.set(key, value)

    def __delitem__(self, key: Hashable) -> None:
        self.pop(key)

    def __repr__(self) -> str:
        return f"TTLCache(maxsize={self.maxsize!r}, ttl={self._ttl!r}, currsize={len(self._lru)})"

    def _expire(self, now: float) -> int:
        dead = [key for key, entry in self._lru.items() if entry.expires_at <= now]
        for key in dead:
            self._lru.pop(key, None)
        self._expirations += len(dead)
        return len(dead)

    def _evicted(self, key: Hashable, entry: _Entry) -> None:
        if self._on_evict is not None:
            self._on_evict(key, entry.value)


def _check_ttl(ttl: float) -> float:
    if isinstance(ttl, bool) or not isinstance(ttl, (int, float)):
        raise TypeError("ttl must be a number of seconds")
    if ttl <= 0:
        raise ValueError("ttl must be positive")
    return float(ttl)
