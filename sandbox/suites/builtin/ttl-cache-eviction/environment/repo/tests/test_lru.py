import unittest

from cachekit import LRUCache


class LRUCacheTest(unittest.TestCase):
    def test_get_and_put(self):
        cache = LRUCache(maxsize=3)
        cache.put("a", 1)
        cache["b"] = 2
        self.assertEqual(cache.get("a"), 1)
        self.assertEqual(cache["b"], 2)
        self.assertIsNone(cache.get("missing"))
        self.assertEqual(cache.get("missing", 0), 0)
        with self.assertRaises(KeyError):
            cache["missing"]

    def test_evicts_least_recently_used(self):
        evicted = []
        cache = LRUCache(maxsize=2, on_evict=lambda k, v: evicted.append((k, v)))
        cache.put("a", 1)
        cache.put("b", 2)
        cache.get("a")
        cache.put("c", 3)
        self.assertEqual(list(cache), ["c", "a"])
        self.assertEqual(evicted, [("b", 2)])

    def test_peek_and_contains_do_not_touch(self):
        cache = LRUCache(maxsize=2)
        cache.put("a", 1)
        cache.put("b", 2)
        self.assertEqual(cache.peek("a"), 1)
        self.assertIn("a", cache)
        cache.put("c", 3)
        self.assertNotIn("a", cache)

    def test_unbounded_and_zero(self):
        unbounded = LRUCache(maxsize=None)
        for i in range(1000):
            unbounded.put(i, i)
        self.assertEqual(len(unbounded), 1000)
        nothing = LRUCache(maxsize=0)
        nothing.put("a", 1)
        self.assertEqual(len(nothing), 0)
        self.assertIsNone(nothing.get("a"))

    def test_pop_resize_and_stats(self):
        cache = LRUCache(maxsize=4)
        for key in "abcd":
            cache.put(key, key.upper())
        self.assertEqual(cache.pop("a"), "A")
        self.assertEqual(cache.pop("a", None), None)
        cache.resize(2)
        self.assertEqual(list(cache), ["d", "c"])
        cache.get("d")
        cache.get("zz")
        info = cache.cache_info()
        self.assertEqual((info.hits, info.misses, info.currsize, info.evictions), (1, 1, 2, 1))

    def test_invalid_maxsize(self):
        with self.assertRaises(ValueError):
            LRUCache(maxsize=-1)
        with self.assertRaises(TypeError):
            LRUCache(maxsize=2.5)


if __name__ == "__main__":
    unittest.main()
