import unittest

from cachekit import ManualClock, make_key, memoize


class MemoizeTest(unittest.TestCase):
    def test_caches_results(self):
        calls = []

        @memoize(maxsize=8)
        def square(x):
            calls.append(x)
            return x * x

        self.assertEqual([square(3), square(3), square(4)], [9, 9, 16])
        self.assertEqual(calls, [3, 4])
        info = square.cache_info()
        self.assertEqual((info.hits, info.misses), (1, 2))

    def test_bare_decorator_and_none_results(self):
        calls = []

        @memoize
        def nothing(x):
            calls.append(x)
            return None

        nothing(1)
        nothing(1)
        self.assertEqual(calls, [1])

    def test_ttl_recomputes_after_expiry(self):
        clock = ManualClock()
        calls = []

        @memoize(ttl=60, clock=clock)
        def fetch(name):
            calls.append(name)
            return len(calls)

        self.assertEqual(fetch("x"), 1)
        clock.advance(59)
        self.assertEqual(fetch("x"), 1)
        clock.advance(1)
        self.assertEqual(fetch("x"), 2)

    def test_keys(self):
        self.assertEqual(make_key((1,), {"a": 1, "b": 2}), make_key((1,), {"b": 2, "a": 1}))
        self.assertNotEqual(make_key((1,), {}, typed=True), make_key((1.0,), {}, typed=True))
        with self.assertRaises(TypeError):
            make_key(([1, 2],), {})


if __name__ == "__main__":
    unittest.main()
