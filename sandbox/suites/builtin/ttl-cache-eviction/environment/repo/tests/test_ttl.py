import unittest

from cachekit import ManualClock, TTLCache


class TTLCacheTest(unittest.TestCase):
    def setUp(self):
        self.clock = ManualClock(1000.0)

    def test_entry_expires_at_deadline(self):
        cache = TTLCache(maxsize=10, ttl=30, clock=self.clock)
        cache.set("k", "v")
        self.clock.advance(29.5)
        self.assertEqual(cache.get("k"), "v")
        self.assertAlmostEqual(cache.ttl_remaining("k"), 0.5)
        self.clock.advance(0.5)
        self.assertNotIn("k", cache)
        self.assertIsNone(cache.get("k"))
        self.assertEqual(cache.stats()["expirations"], 1)

    def test_per_entry_ttl(self):
        cache = TTLCache(maxsize=10, ttl=30, clock=self.clock)
        cache.set("short", 1, ttl=5)
        cache.set("long", 2)
        self.clock.advance(10)
        self.assertEqual(cache.keys(), ["long"])
        self.assertEqual(len(cache), 1)

    def test_full_cache_drops_expired_before_live(self):
        evicted = []
        cache = TTLCache(maxsize=2, ttl=10, clock=self.clock, on_evict=lambda k, v: evicted.append(k))
        cache.set("old", 1, ttl=1)
        cache.set("live", 2)
        self.clock.advance(2)
        cache.set("new", 3)
        self.assertEqual(sorted(cache.keys()), ["live", "new"])
        self.assertEqual(evicted, [])

    def test_rejects_bad_ttl(self):
        with self.assertRaises(ValueError):
            TTLCache(ttl=0)
        cache = TTLCache(ttl=1, clock=self.clock)
        with self.assertRaises(ValueError):
            cache.set("k", 1, ttl=-3)


if __name__ == "__main__":
    unittest.main()
