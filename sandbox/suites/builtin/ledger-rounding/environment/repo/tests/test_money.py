import unittest
from decimal import Decimal

from ledgerlite import CurrencyMismatchError, Money


def usd(text):
    return Money.of(text, "USD")


class MoneyTest(unittest.TestCase):
    def test_rounds_half_up_to_currency(self):
        self.assertEqual(usd("2.675").amount, Decimal("2.68"))
        self.assertEqual(usd("-0.125").amount, Decimal("-0.13"))
        self.assertEqual(Money.of("99.5", "JPY").amount, Decimal("100"))
        self.assertEqual(Money.of("1.0005", "KWD").amount, Decimal("1.001"))

    def test_arithmetic(self):
        self.assertEqual(usd("1.10") + usd("2.20"), usd("3.30"))
        self.assertEqual(sum([usd("1"), usd("2")]), usd("3"))
        self.assertEqual(usd("10.00") * Decimal("0.075"), usd("0.75"))
        self.assertEqual(-usd("5"), usd("-5"))

    def test_rejects_floats_and_mixed_currencies(self):
        with self.assertRaises(TypeError):
            Money.of(0.1, "USD")
        with self.assertRaises(CurrencyMismatchError):
            usd("1") + Money.of("1", "EUR")

    def test_split_evenly(self):
        self.assertEqual(usd("100.00").split(4), [usd("25")] * 4)
        parts = usd("100.00").split(3)
        self.assertEqual(sum(parts), usd("100.00"))
        self.assertEqual(sorted(p.amount for p in parts), [Decimal("33.33"), Decimal("33.33"), Decimal("33.34")])

    def test_allocate_by_ratio(self):
        self.assertEqual(usd("50.00").allocate([70, 20, 10]), [usd("35"), usd("10"), usd("5")])
        self.assertEqual(Money.of("1000", "JPY").allocate([1, 1, 1]),
                         [Money.of("334", "JPY"), Money.of("333", "JPY"), Money.of("333", "JPY")])

    def test_allocate_errors(self):
        for ratios in ([], [1, -1], [0, 0]):
            with self.subTest(ratios=ratios), self.assertRaises(ValueError):
                usd("1").allocate(ratios)
        with self.assertRaises(ValueError):
            usd("1").split(0)

    def test_format(self):
        self.assertEqual(usd("-1234.5").format(), "-1,234.50 USD")
        self.assertEqual(Money.of("1234", "JPY").format(), "1,234 JPY")


if __name__ == "__main__":
    unittest.main()
