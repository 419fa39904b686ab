"""A memoizing decorator backed by :class:`LRUCache` or :class:`TTLCache`.

Unlike :func:`functools.lru_cache` the decorator accepts a ``ttl`` and a
``clock``, so cached results can go stale on a schedule that tests control.
"""

import functools
from typing import Any, Callable, Hashable, Optional

from .clock import monotonic
from .lru import LRUCache
from .ttl import TTLCache

_MISSING = object()
_KWARGS_MARK = object()


def make_key(args: tuple, kwargs: dict, typed: bool = False) -> Hashable:
    """Build a hashable cache key from call arguments.

    Keyword arguments are sorted so that ``f(a=1, b=2)`` and ``f(b=2, a=1)``
    share an entry. With ``typed=True``, ``f(1)`` and ``f(1.0)`` do not.
    """
    key: tuple = tuple(args)
    if kwargs:
        key += (_KWARGS_MARK,) + tuple(sorted(kwargs.items()))
    if typed:
        key += tuple(type(arg) for arg in args)
        key += tuple(type(value) for _, value in sorted(kwargs.items()))
    hash(key)  # surface unhashable arguments here, with the caller's traceback
    return key


def memoize(
    func: Optional[Callable] = None,
    *,
    maxsize: Optional[int] = 128,
    ttl: Optional[float] = None,
    clock: Callable[[], float] = monotonic,
    typed: bool = False,
    key: Optional[Callable[..., Hashable]] = None,
):
    """Cache a function's results.

    Usable bare (``@memoize``) or with options (``@memoize(maxsize=32, ttl=5)``).
    ``key``, if given, computes the cache key from the call's arguments
    instead of :func:`make_key`. The wrapper exposes ``cache``,
    ``cache_info()`` and ``cache_clear()``.
    """

    def decorate(fn: Callable) -> Callable:
        if ttl is None:
            cache: Any = LRUCache(maxsize)
        else:
            cache = TTLCache(maxsize, ttl=ttl, clock=clock)

        @functools.wraps(fn)
        def wrapper(*args, **kwargs):
            k = key(*args, **kwargs) if key is not None else make_key(args, kwargs, typed)
            result = cache.get(k, _MISSING)
            if result is _MISSING:
                result = fn(*args, **kwargs)
                cache[k] = result
            return result

        wrapper.cache = cache
        wrapper.cache_info = cache.cache_info
        wrapper.cache_clear = cache.clear
        return wrapper

    if func is not None:
        return decorate(func)
    return decorate
