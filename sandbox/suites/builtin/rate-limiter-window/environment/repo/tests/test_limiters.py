import math
import unittest

from throttle import (
    CompositePolicy,
    Decision,
    FixedWindowCounter,
    KeyedLimiter,
    ManualClock,
    SlidingWindowLog,
    TokenBucket,
)


class TokenBucketTests(unittest.TestCase):
    def setUp(self):
        self.clock = ManualClock()

    def test_burst_then_deny(self):
        bucket = TokenBucket(capacity=3, rate=1, clock=self.clock)
        self.assertEqual([bucket.acquire().allowed for _ in range(4)], [True, True, True, False])

    def test_refills_over_time(self):
        bucket = TokenBucket(capacity=2, rate=1, clock=self.clock)
        bucket.acquire(2)
        self.assertFalse(bucket.acquire())
        self.clock.advance(1)
        self.assertTrue(bucket.acquire())
        self.clock.advance(10)
        self.assertEqual(bucket.tokens, 2)

    def test_decision_fields(self):
        bucket = TokenBucket(capacity=5, rate=2, clock=self.clock)
        d = bucket.acquire(2)
        self.assertEqual((d.allowed, d.limit, d.remaining), (True, 5, 3))
        bucket.acquire(3)
        d = bucket.acquire()
        self.assertFalse(d.allowed)
        self.assertEqual(d.remaining, 0)
        self.assertAlmostEqual(d.retry_after, 0.5)

    def test_cost_above_capacity(self):
        bucket = TokenBucket(capacity=5, rate=1, clock=self.clock)
        self.assertEqual(bucket.acquire(6).retry_after, math.inf)

    def test_per(self):
        bucket = TokenBucket.per(60, 60, clock=self.clock)
        self.assertEqual((bucket.capacity, bucket.rate), (60, 1.0))

    def test_peek_does_not_consume(self):
        bucket = TokenBucket(capacity=1, rate=1, clock=self.clock)
        self.assertTrue(bucket.peek())
        self.assertTrue(bucket.acquire())


class FixedWindowTests(unittest.TestCase):
    def test_window_resets(self):
        clock = ManualClock(5)
        counter = FixedWindowCounter(limit=2, window=10, clock=clock)
        self.assertTrue(counter.acquire())
        self.assertTrue(counter.acquire())
        d = counter.acquire()
        self.assertFalse(d.allowed)
        self.assertAlmostEqual(d.retry_after, 5)
        clock.set(10)
        self.assertTrue(counter.acquire())


class SlidingWindowLogTests(unittest.TestCase):
    def test_requests_expire_after_window(self):
        clock = ManualClock()
        log = SlidingWindowLog(limit=2, window=60, clock=clock)
        log.acquire()
        clock.advance(30)
        log.acquire()
        d = log.acquire()
        self.assertFalse(d.allowed)
        self.assertAlmostEqual(d.retry_after, 30)
        clock.advance(30)
        self.assertTrue(log.acquire())
        self.assertEqual(len(log), 2)


class CompositeTests(unittest.TestCase):
    def test_denied_requests_are_not_counted(self):
        clock = ManualClock()
        bucket = TokenBucket(capacity=10, rate=1, clock=clock)
        window = FixedWindowCounter(limit=1, window=60, clock=clock)
        policy = CompositePolicy([bucket, window])
        self.assertTrue(policy.acquire())
        self.assertFalse(policy.acquire())
        self.assertEqual(bucket.tokens, 9)


class KeyedTests(unittest.TestCase):
    def test_per_key_and_lru(self):
        clock = ManualClock()
        keyed = KeyedLimiter(lambda: TokenBucket(1, 1, clock=clock), max_keys=2)
        self.assertTrue(keyed.acquire("a"))
        self.assertFalse(keyed.acquire("a"))
        self.assertTrue(keyed.acquire("b"))
        keyed.acquire("c")
        self.assertNotIn("a", keyed)
        self.assertEqual(len(keyed), 2)


class HeaderTests(unittest.TestCase):
    def test_headers(self):
        d = Decision(allowed=False, limit=10, remaining=0, retry_after=1.2, reset_after=9.5)
        self.assertEqual(
            d.headers(),
            {"RateLimit-Limit": "10", "RateLimit-Remaining": "0", "RateLimit-Reset": "10",
             "Retry-After": "2"},
        )


if __name__ == "__main__":
    unittest.main()
