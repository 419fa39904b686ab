"""A bounded mapping that evicts its least recently used entry.

Entries live in a dict for lookup and in a circular doubly linked list for
ordering: the entry right after the sentinel is the most recently used, the
one right before it the least recently used. Reading an entry with
:meth:`LRUCache.get` (or ``cache[key]``) and writing it with
:meth:`LRUCache.put` (or ``cache[key] = value``) both count as a use.
"""

import threading
from typing import Any, Callable, Hashable, Iterator, NamedTuple, Optional

_MISSING = object()

EvictCallback = Callable[[Hashable, Any], None]


class CacheInfo(NamedTuple):
    hits: int
    misses: int
    maxsize: Optional[int]
    currsize: int
    evictions: int


class _Node:
    __slots__ = ("key", "value", "prev", "next")

    def __init__(self, key: Any = None, value: Any = None) -> None:
        self.key = key
        self.value = value
        self.prev: "_Node" = self
        self.next: "_Node" = self


class LRUCache:
    """A least-recently-used cache holding at most ``maxsize`` entries.

    ``maxsize=None`` means unbounded; ``maxsize=0`` stores nothing at all.
    ``on_evict(key, value)``, if given, is called for every entry pushed out
    to make room (not for entries removed with ``del``/``pop``/``clear``).
    """

    def __init__(self, maxsize: Optional[int] = 128, on_evict: Optional[EvictCallback] = None) -> None:
        _check_maxsize(maxsize)
        self._maxsize = maxsize
        self._on_evict = on_evict
        self._map: dict = {}
        self._root = _Node()
        self._hits = 0
        self._misses = 0
        self._evictions = 0
        self._lock = threading.RLock()

    @property
    def maxsize(self) -> Optional[int]:
        return self._maxsize

    def __len__(self) -> int:
        return len(self._map)

    def __contains__(self, key: Hashable) -> bool:
        return key in self._map

    def __iter__(self) -> Iterator[Hashable]:
        """Iterate over keys from most to least recently used."""
        return iter(self.keys())

    def keys(self) -> list:
        with self._lock:
            return [node.key for node in self._nodes()]

    def items(self) -> list:
        with self._lock:
            return [(node.key, node.value) for node in self._nodes()]

    def get(self, key: Hashable, default: Any = None) -> Any:
        """Return the value for ``key`` and mark it as most recently used."""
        with self._lock:
            node = self._map.get(key)
            if node is None:
                self._misses += 1
                return default
            self._hits += 1
            self._move_to_front(node)
            return node.value

    def peek(self, key: Hashable, default: Any = None) -> Any:
        """Return the value for ``key`` without touching recency or statistics."""
        node = self._map.get(key)
        return default if node is None else node.value

    def touch(self, key: Hashable) -> bool:
        """Mark ``key`` as most recently used; return whether it was present."""
        with self._lock:
            node = self._map.get(key)
            if node is None:
                return False
            self._move_to_front(node)
            return True

    def put(self, key: Hashable, value: Any) -> None:
        """Store ``value`` under ``key``, evicting the LRU entry if the cache is full."""
        with self._lock:
            node = self._map.get(key)
            if node is not None:
                node.value = value
                return
            if self._maxsize == 0:
                return
            node = _Node(key, value)
            self._map[key] = node
            self._link_front(node)
            if self._maxsize is not None and len(self._map) > self._maxsize:
                self._evict_one()

    def pop(self, key: Hashable, default: Any = _MISSING) -> Any:
        with self._lock:
            node = self._map.pop(key, None)
            if node is None:
                if default is _MISSING:
                    raise KeyError(key)
                return default
            self._unlink(node)
            return node.value

    def resize(self, maxsize: Optional[int]) -> None:
        """Change the capacity, evicting least recently used entries if needed."""
        _check_maxsize(maxsize)
        with self._lock:
            self._maxsize = maxsize
            if maxsize is not None:
                while len(self._map) > maxsize:
                    self._evict_one()

    def clear(self) -> None:
        with self._lock:
            self._map.clear()
            self._root.prev = self._root.next = self._root

    def cache_info(self) -> CacheInfo:
        with self._lock:
            return CacheInfo(self._hits, self._misses, self._maxsize, len(self._map), self._evictions)

    def __getitem__(self, key: Hashable) -> Any:
        value = self.get(key, _MISSING)
        if value is _MISSING:
            raise KeyError(key)
        return value

    def __setitem__(self, key: Hashable, value: Any) -> None:
        self.put(key, value)

    def __delitem__(self, key: Hashable) -> None:
        self.pop(key)

    def __repr__(self) -> str:
        return f"LRUCache(maxsize={self._maxsize!r}, currsize={len(self._map)})"

    def _nodes(self) -> Iterator[_Node]:
        node = self._root.next
        while node is not self._root:
            yield node
            node = node.next

    def _link_front(self, node: _Node) -> None:
        first = self._root.next
        node.prev = self._root
        node.next = first
        first.prev = node
        self._root.next = node

    def _unlink(self, node: _Node) -> None:
        node.prev.next = node.next
        node.next.prev = node.prev
        node.prev = node.next = node

    def _move_to_front(self, node: _Node) -> None:
        if self._root.next is node:
            return
        self._unlink(node)
        self._link_front(node)

    def _evict_one(self) -> None:
        victim = self._root.prev
        if victim is self._root:
            return
        self._unlink(victim)
        del self._map[victim.key]
        self._evictions += 1
        if self._on_evict is not None:
            self._on_evict(victim.key, victim.value)


def _check_maxsize(maxsize: Optional[int]) -> None:
    if maxsize is None:
        return
    if isinstance(maxsize, bool) or not isinstance(maxsize, int):
        raise TypeError(f"maxsize must be an int or None, not {type(maxsize).__name__}")
    if maxsize < 0:
        raise ValueError("maxsize must not be negative")
