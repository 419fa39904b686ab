import math
import unittest

from throttle import (
    CompositePolicy,
    FixedWindowCounter,
    KeyedLimiter,
    ManualClock,
    SlidingWindowLog,
    TokenBucket,
)


class TestFailToPassTokenAccrual(unittest.TestCase):
    def setUp(self):
        self.clock = ManualClock(1000.0)

    def test_slow_bucket_refills_when_polled_every_second(self):
        bucket = TokenBucket(capacity=1, rate=0.5, clock=self.clock)   # 1 token / 2 s
        self.assertTrue(bucket.acquire().allowed)
        results = []
        for _ in range(6):
            self.clock.advance(1)
            results.append(bucket.acquire().allowed)
        self.assertEqual(results, [False, True, False, True, False, True])

    def test_frequent_polling_gets_the_sustained_rate(self):
        bucket = TokenBucket(capacity=8, rate=8, clock=self.clock)
        self.assertTrue(bucket.acquire(8).allowed)
        allowed = 0
        for _ in range(32):                      # 2 seconds in steps of 1/16 s
            self.clock.advance(0.0625)
            if bucket.acquire().allowed:
                allowed += 1
        self.assertEqual(allowed, 16)

    def test_reading_tokens_does_not_lose_progress(self):
        bucket = TokenBucket(capacity=3, rate=1, clock=self.clock)
        bucket.acquire(3)
        self.clock.advance(0.75)
        self.assertEqual(bucket.tokens, 0)
        self.assertFalse(bucket.peek().allowed)
        self.clock.advance(0.75)
        self.assertEqual(bucket.tokens, 1)
        self.clock.advance(0.75)
        self.assertEqual(bucket.tokens, 2)

    def test_retry_after_counts_time_already_waited(self):
        bucket = TokenBucket(capacity=1, rate=0.5, clock=self.clock)
        bucket.acquire()
        self.clock.advance(0.5)
        first = bucket.acquire()
        self.assertFalse(first.allowed)
        self.assertAlmostEqual(first.retry_after, 1.5)
        self.clock.advance(1.0)
        second = bucket.acquire()
        self.assertFalse(second.allowed)
        self.assertAlmostEqual(second.retry_after, 0.5)
        self.assertEqual(second.headers()["Retry-After"], "1")
        self.clock.advance(second.retry_after)
        self.assertTrue(bucket.acquire().allowed)

    def test_time_spent_full_is_not_saved_up(self):
        bucket = TokenBucket(capacity=5, rate=1, clock=self.clock)
        self.clock.advance(100.5)
        self.assertTrue(bucket.acquire(5).allowed)
        self.clock.advance(0.5)
        self.assertFalse(bucket.acquire().allowed)
        self.clock.advance(0.5)
        self.assertTrue(bucket.acquire().allowed)

    def test_composite_policy_with_slow_bucket(self):
        bucket = TokenBucket(capacity=2, rate=0.5, clock=self.clock)
        log = SlidingWindowLog(limit=100, window=60, clock=self.clock)
        policy = CompositePolicy([bucket, log])
        self.assertTrue(policy.acquire(2).allowed)
        allowed = 0
        for _ in range(20):
            self.clock.advance(1)
            if policy.acquire().allowed:
                allowed += 1
        self.assertEqual(allowed, 10)
        self.assertEqual(len(log), 11)


class TestPassToPassLimiters(unittest.TestCase):
    def setUp(self):
        self.clock = ManualClock(1000.0)

    def test_remaining_is_whole_tokens(self):
        bucket = TokenBucket(capacity=5, rate=1, clock=self.clock)
        bucket.acquire()
        self.clock.advance(0.5)
        self.assertEqual(bucket.tokens, 4)
        self.assertIsInstance(bucket.tokens, int)
        d = bucket.acquire()
        self.assertEqual(d.remaining, 3)
        self.assertIsInstance(d.remaining, int)
        self.assertEqual(d.headers()["RateLimit-Remaining"], "3")
        p = bucket.peek(2)
        self.assertTrue(p.allowed)
        self.assertEqual(p.remaining, 1)
        self.assertIsInstance(p.remaining, int)

    def test_whole_second_refill_and_cap(self):
        bucket = TokenBucket(capacity=3, rate=1, clock=self.clock)
        self.assertTrue(bucket.acquire(3).allowed)
        self.assertFalse(bucket.acquire().allowed)
        self.clock.advance(2)
        self.assertEqual(bucket.tokens, 2)
        self.clock.advance(50)
        self.assertEqual(bucket.tokens, 3)
        self.assertTrue(bucket.acquire(3).allowed)
        self.assertFalse(bucket.acquire().allowed)

    def test_waiting_retry_after_always_succeeds(self):
        bucket = TokenBucket(capacity=2, rate=0.25, clock=self.clock)
        bucket.acquire(2)
        for _ in range(5):
            d = bucket.acquire()
            self.assertFalse(d.allowed)
            self.assertGreater(d.retry_after, 0)
            self.clock.advance(d.retry_after)
            self.assertTrue(bucket.acquire().allowed)

    def test_denied_bucket_decision(self):
        bucket = TokenBucket(capacity=2, rate=0.5, clock=self.clock)
        bucket.acquire(2)
        d = bucket.acquire()
        self.assertFalse(d.allowed)
        self.assertEqual(d.remaining, 0)
        self.assertAlmostEqual(d.retry_after, 2.0)
        self.assertEqual(d.headers()["Retry-After"], "2")
        self.assertEqual(bucket.acquire(3).retry_after, math.inf)

    def test_sliding_window_log_boundary(self):
        log = SlidingWindowLog(limit=2, window=60, clock=self.clock)
        log.acquire()                 # t = 1000
        self.clock.advance(10)
        log.acquire()                 # t = 1010
        d = log.acquire()
        self.assertFalse(d.allowed)
        self.assertAlmostEqual(d.retry_after, 50)
        self.clock.advance(50)        # t = 1060: the first request stops counting
        self.assertTrue(log.acquire().allowed)
        self.assertFalse(log.acquire().allowed)

    def test_fixed_window_and_keyed(self):
        keyed = KeyedLimiter(lambda: FixedWindowCounter(limit=2, window=10, clock=self.clock))
        self.assertTrue(keyed.acquire("a"))
        self.assertTrue(keyed.acquire("a"))
        self.assertFalse(keyed.acquire("a"))
        self.assertTrue(keyed.acquire("b"))
        self.clock.advance(10)
        self.assertTrue(keyed.acquire("a"))

    def test_composite_does_not_count_denied(self):
        bucket = TokenBucket(capacity=5, rate=1, clock=self.clock)
        window = FixedWindowCounter(limit=2, window=60, clock=self.clock)
        policy = CompositePolicy([bucket, window])
        self.assertTrue(policy.acquire())
        self.assertTrue(policy.acquire())
        self.assertFalse(policy.acquire())
        self.assertEqual(bucket.tokens, 3)


if __name__ == "__main__":
    unittest.main()
