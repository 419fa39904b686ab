import unittest

from cachekit import LRUCache, ManualClock, TTLCache, memoize


class TestFailToPassLRUUpdateRecency(unittest.TestCase):
    def test_put_existing_key_makes_it_most_recent(self):
        evicted = []
        cache = LRUCache(maxsize=2, on_evict=lambda k, v: evicted.append((k, v)))
        cache.put("a", 1)
        cache.put("b", 2)
        cache.put("a", 10)
        cache.put("c", 3)
        self.assertEqual(list(cache), ["c", "a"])
        self.assertEqual(cache.peek("a"), 10)
        self.assertNotIn("b", cache)
        self.assertEqual(evicted, [("b", 2)])

    def test_setitem_existing_key_makes_it_most_recent(self):
        cache = LRUCache(maxsize=3)
        for key in "abc":
            cache[key] = key
        cache["a"] = "A"
        self.assertEqual(cache.keys(), ["a", "c", "b"])
        cache["d"] = "d"
        cache["e"] = "e"
        self.assertEqual(cache.items(), [("e", "e"), ("d", "d"), ("a", "A")])

    def test_ttl_set_existing_key_makes_it_most_recent(self):
        clock = ManualClock(50.0)
        evicted = []
        cache = TTLCache(maxsize=2, ttl=100, clock=clock, on_evict=lambda k, v: evicted.append(k))
        cache.set("a", 1)
        clock.advance(1)
        cache.set("b", 2)
        clock.advance(1)
        cache["a"] = 11
        clock.advance(1)
        cache.set("c", 3)
        self.assertEqual(cache.get("a"), 11)
        self.assertNotIn("b", cache)
        self.assertEqual(evicted, ["b"])
        self.assertEqual(cache.keys(), ["a", "c"])


class TestPassToPassCacheBehaviour(unittest.TestCase):
    def test_get_marks_recent_and_peek_does_not(self):
        cache = LRUCache(maxsize=2)
        cache.put("a", 1)
        cache.put("b", 2)
        cache.peek("a")
        self.assertIn("a", cache)
        cache.get("a")
        cache.put("c", 3)
        self.assertEqual(list(cache), ["c", "a"])

    def test_zero_and_unbounded_sizes(self):
        evicted = []
        nothing = LRUCache(maxsize=0, on_evict=lambda k, v: evicted.append(k))
        nothing.put("a", 1)
        nothing.put("a", 2)
        self.assertEqual(len(nothing), 0)
        self.assertIsNone(nothing.get("a"))
        self.assertEqual(evicted, [])
        unbounded = LRUCache(maxsize=None)
        for i in range(500):
            unbounded[i] = i
        unbounded[0] = -1
        self.assertEqual(len(unbounded), 500)
        self.assertEqual(unbounded[0], -1)

    def test_update_keeps_size_and_stats(self):
        cache = LRUCache(maxsize=2)
        cache.put("a", 1)
        cache.put("a", 2)
        cache.put("a", 3)
        info = cache.cache_info()
        self.assertEqual((info.currsize, info.evictions), (1, 0))
        self.assertEqual(cache.get("a"), 3)

    def test_ttl_update_restarts_ttl(self):
        clock = ManualClock()
        cache = TTLCache(maxsize=4, ttl=10, clock=clock)
        cache.set("k", 1)
        clock.advance(8)
        cache.set("k", 2)
        clock.advance(8)
        self.assertEqual(cache.get("k"), 2)
        clock.advance(2)
        self.assertIsNone(cache.get("k"))

    def test_ttl_expired_dropped_before_live_evicted(self):
        clock = ManualClock()
        evicted = []
        cache = TTLCache(maxsize=2, ttl=10, clock=clock, on_evict=lambda k, v: evicted.append(k))
        cache.set("short", 1, ttl=1)
        cache.set("live", 2)
        clock.advance(5)
        cache.set("new", 3)
        self.assertEqual(sorted(cache.keys()), ["live", "new"])
        self.assertEqual(evicted, [])

    def test_memoize_lru_bound(self):
        calls = []

        @memoize(maxsize=2)
        def ident(x):
            calls.append(x)
            return x

        for x in [1, 2, 1, 3, 1, 2]:
            ident(x)
        self.assertEqual(calls, [1, 2, 3, 2])


if __name__ == "__main__":
    unittest.main()
