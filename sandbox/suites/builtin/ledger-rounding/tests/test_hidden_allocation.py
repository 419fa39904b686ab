import datetime as dt
import unittest
from decimal import Decimal

from ledgerlite import ChartOfAccounts, Invoice, Ledger, Money, get_currency


def amounts(parts):
    return [p.amount for p in parts]


def allocation_problem(money, ratios, parts):
    """None if `parts` is a valid allocation of `money` by `ratios`, else a description."""
    ratios = [Decimal(r) for r in ratios]
    if len(parts) != len(ratios):
        return f"{money} by {ratios}: {len(parts)} parts"
    if any(part.currency != money.currency for part in parts):
        return f"{money} by {ratios}: wrong currency in {parts}"
    if sum(amounts(parts)) != money.amount:
        return f"{money} by {ratios}: {parts} sum to {sum(amounts(parts))}"
    quantum = money.currency.quantum
    total = sum(ratios)
    for ratio, part in zip(ratios, parts):
        if abs(part.amount - money.amount * ratio / total) >= quantum:
            return f"{money} by {ratios}: {parts} not within one unit of the exact shares"
    return None


class AllocationChecks(unittest.TestCase):
    def assertValidAllocation(self, money, ratios, parts):
        problem = allocation_problem(money, ratios, parts)
        if problem:
            self.fail(problem)


# FAIL-TO-PASS: parts must add up exactly and stay within one unit of their share.
class TestFailToPassAllocation(AllocationChecks):
    def test_split_overshooting_rounding(self):
        money = Money.of("200.00", "USD")
        parts = money.split(3)
        self.assertEqual(sorted(amounts(parts)), [Decimal("66.66"), Decimal("66.67"), Decimal("66.67")])
        self.assertValidAllocation(money, [1, 1, 1], parts)

    def test_split_negative_amount(self):
        money = Money.of("-100.00", "USD")
        parts = money.split(3)
        self.assertEqual(sorted(amounts(parts)), [Decimal("-33.34"), Decimal("-33.33"), Decimal("-33.33")])
        self.assertValidAllocation(money, [1, 1, 1], parts)

    def test_split_zero_decimal_currency(self):
        money = Money.of("100", "JPY")
        parts = money.split(6)
        self.assertEqual(sorted(amounts(parts)), [Decimal(16)] * 2 + [Decimal(17)] * 4)
        self.assertValidAllocation(money, [1] * 6, parts)

    def test_zero_ratio_gets_nothing(self):
        money = Money.of("0.10", "USD")
        parts = money.allocate([0, 1, 1, 1])
        self.assertEqual(parts[0].amount, Decimal("0"))
        self.assertValidAllocation(money, [0, 1, 1, 1], parts)
        money = Money.of("0.01", "USD")
        parts = money.allocate([0, 1, 1])
        self.assertEqual(parts[0].amount, Decimal("0"))
        self.assertValidAllocation(money, [0, 1, 1], parts)

    def test_many_amounts_and_ratios(self):
        ratio_sets = [[1, 1, 1], [1] * 6, [1] * 7, [3, 3, 1], [0, 2, 5, 0, 1], [Decimal("0.5"), 1, 1],
                      [10, 10, 10, 10, 10, 10, 1], [1, 2]]
        problems = []
        checked = 0
        for code in ("USD", "JPY", "KWD"):
            quantum = get_currency(code).quantum
            for units in list(range(-25, 26)) + [99, 100, 101, 333, 997, 20000, -20000, 48479]:
                money = Money(quantum * units, code)
                for ratios in ratio_sets:
                    checked += 1
                    problem = allocation_problem(money, ratios, money.allocate(ratios))
                    if problem:
                        problems.append(problem)
        if problems:
            self.fail(f"{len(problems)} of {checked} allocations invalid, e.g.:\n" + "\n".join(problems[:8]))


# FAIL-TO-PASS: invoices built on allocation (discount shares, installments) add up.
class TestFailToPassInvoice(AllocationChecks):
    def make_invoice(self, quantity="1"):
        inv = Invoice("2024-031", "EUR", dt.date(2024, 6, 3))
        for name in ("Logo", "Business cards", "Letterhead"):
            inv.add_line(name, quantity, "10.00", tax_rate="0.19")
        inv.set_discount("5.00")
        return inv

    def test_discounted_invoice_posts(self):
        ledger = Ledger(ChartOfAccounts.standard())
        inv = self.make_invoice()
        self.assertEqual(sum(amounts(inv.line_discounts())), Decimal("5.00"))
        inv.post(ledger)
        self.assertEqual(ledger.balance("4000", "EUR"), Money.of("25.00", "EUR"))
        self.assertEqual(ledger.balance("2200", "EUR"), Money.of("4.75", "EUR"))
        self.assertEqual(ledger.balance("1200", "EUR"), Money.of("29.75", "EUR"))
        rows = ledger.trial_balance("EUR")
        self.assertEqual(sum(d.amount for _, d, _ in rows), sum(c.amount for _, _, c in rows))

    def test_discounted_credit_note_posts(self):
        ledger = Ledger(ChartOfAccounts.standard())
        inv = self.make_invoice(quantity="-1")
        inv.post(ledger)
        self.assertEqual(ledger.balance("4000", "EUR"), Money.of("-25.00", "EUR"))
        self.assertEqual(ledger.balance("1200", "EUR"), Money.of("-29.75", "EUR"))

    def test_installments_add_up(self):
        inv = Invoice("2024-001", "EUR", dt.date(2024, 5, 1))
        inv.add_line("Consulting", "3", "120.00", tax_rate="0.19")
        inv.add_line("Travel", "1", "80.00", tax_rate="0.07")
        inv.set_discount("25.00")
        self.assertEqual(inv.total, Money.of("484.79", "EUR"))
        plan = inv.installments(3, first_due=dt.date(2024, 6, 1))
        self.assertEqual([d for d, _ in plan], [dt.date(2024, 6, 1), dt.date(2024, 7, 1), dt.date(2024, 7, 31)])
        self.assertEqual(sorted(a.amount for _, a in plan), [Decimal("161.59"), Decimal("161.60"), Decimal("161.60")])


# PASS-TO-PASS: allocations that already worked, validation, rounding, bookkeeping.
class TestPassToPassMoney(AllocationChecks):
    def test_exact_and_short_allocations(self):
        usd = Money.of("100.00", "USD")
        self.assertEqual(amounts(usd.allocate([70, 20, 10])), [Decimal("70.00"), Decimal("20.00"), Decimal("10.00")])
        parts = usd.split(3)
        self.assertEqual(sorted(amounts(parts)), [Decimal("33.33"), Decimal("33.33"), Decimal("33.34")])
        self.assertValidAllocation(usd, [1, 1, 1], parts)
        self.assertEqual(amounts(Money.of("7", "JPY").allocate([1])), [Decimal(7)])
        self.assertEqual(amounts(Money.of("0", "USD").split(3)), [Decimal(0)] * 3)

    def test_order_follows_ratios(self):
        parts = Money.of("10.00", "USD").allocate([1, 0, 9])
        self.assertEqual(amounts(parts), [Decimal("1.00"), Decimal("0.00"), Decimal("9.00")])
        parts = Money.of("1.000", "KWD").allocate([2, 1, 1])
        self.assertEqual(amounts(parts), [Decimal("0.500"), Decimal("0.250"), Decimal("0.250")])

    def test_validation(self):
        usd = Money.of("1.00", "USD")
        for ratios in ([], [1, -1], [0, 0]):
            with self.subTest(ratios=ratios), self.assertRaises(ValueError):
                usd.allocate(ratios)
        for count in (0, -2):
            with self.subTest(count=count), self.assertRaises(ValueError):
                usd.split(count)

    def test_half_up_rounding(self):
        self.assertEqual(Money.of("2.675", "USD").amount, Decimal("2.68"))
        self.assertEqual(Money.of("0.125", "EUR").amount, Decimal("0.13"))
        self.assertEqual(Money.of("-0.125", "EUR").amount, Decimal("-0.13"))
        self.assertEqual(Money.of("2.5", "JPY").amount, Decimal("3"))
        self.assertEqual((Money.of("10.00", "EUR") * Decimal("0.0725")).amount, Decimal("0.73"))


class TestPassToPassInvoice(unittest.TestCase):
    def test_invoice_without_discount(self):
        ledger = Ledger(ChartOfAccounts.standard())
        inv = Invoice("2024-040", "USD", dt.date(2024, 7, 1))
        inv.add_line("Widget", "3", "19.99", tax_rate="0.0725")
        inv.add_line("Service", "1", "50.00", tax_rate="0")
        self.assertEqual(inv.subtotal, Money.of("109.97", "USD"))
        self.assertEqual(inv.tax, Money.of("4.35", "USD"))
        self.assertEqual(inv.total, Money.of("114.32", "USD"))
        inv.post(ledger)
        self.assertEqual(ledger.balance("1200", "USD"), Money.of("114.32", "USD"))

    def test_exact_discount_shares(self):
        inv = Invoice("2024-041", "EUR", dt.date(2024, 7, 1))
        inv.add_line("A", "1", "30.00")
        inv.add_line("B", "1", "10.00")
        inv.set_discount("4.00")
        self.assertEqual(amounts(inv.line_discounts()), [Decimal("3.00"), Decimal("1.00")])
        self.assertEqual(inv.total, Money.of("36.00", "EUR"))


if __name__ == "__main__":
    unittest.main()
