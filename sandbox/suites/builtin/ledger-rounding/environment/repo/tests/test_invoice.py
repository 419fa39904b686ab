import datetime as dt
import unittest
from decimal import Decimal

from ledgerlite import ChartOfAccounts, Invoice, Ledger, Money, Transaction, UnbalancedTransactionError
from ledgerlite.report import format_invoice, format_trial_balance


def eur(text):
    return Money.of(text, "EUR")


class InvoiceTest(unittest.TestCase):
    def make_invoice(self):
        inv = Invoice("2024-001", "EUR", dt.date(2024, 5, 1))
        inv.add_line("Consulting", "3", "10.00", "0.19")
        inv.add_line("Hosting", "1", "10.00", "0.19")
        inv.add_line("Book", "2", "4.99", "0.07")
        return inv

    def test_totals(self):
        inv = self.make_invoice()
        self.assertEqual(inv.subtotal, eur("49.98"))
        self.assertEqual(dict(inv.tax_by_rate()), {Decimal("0.19"): eur("7.60"), Decimal("0.07"): eur("0.70")})
        self.assertEqual(inv.total, eur("58.28"))

    def test_discount_shared_pro_rata(self):
        inv = Invoice("2024-002", "EUR", dt.date(2024, 5, 1))
        inv.add_line("A", "1", "30.00")
        inv.add_line("B", "1", "10.00")
        inv.set_discount("4.00")
        self.assertEqual(inv.line_discounts(), [eur("3.00"), eur("1.00")])
        self.assertEqual(inv.total, eur("36.00"))

    def test_posting(self):
        ledger = Ledger(ChartOfAccounts.standard())
        inv = self.make_invoice()
        inv.post(ledger)
        ledger.post(Transaction(dt.date(2024, 5, 20), "payment").debit("1000", inv.total).credit("1200", inv.total))
        self.assertEqual(ledger.balance("1200", "EUR"), eur("0"))
        self.assertEqual(ledger.balance("1000", "EUR"), eur("58.28"))
        self.assertEqual(ledger.balance("2200", "EUR"), eur("8.30"))
        self.assertEqual(ledger.balance("4000", "EUR"), eur("49.98"))
        self.assertIn("Total", format_trial_balance(ledger, "EUR"))

    def test_unbalanced_rejected(self):
        ledger = Ledger(ChartOfAccounts.standard())
        txn = Transaction(dt.date(2024, 1, 1), "oops").debit("1000", eur("1.00")).credit("4000", eur("0.99"))
        with self.assertRaises(UnbalancedTransactionError):
            ledger.post(txn)

    def test_installments(self):
        inv = self.make_invoice()
        plan = inv.installments(2, first_due=dt.date(2024, 6, 1))
        self.assertEqual([d for d, _ in plan], [dt.date(2024, 6, 1), dt.date(2024, 7, 1)])
        self.assertEqual(sum(a for _, a in plan), inv.total)

    def test_format(self):
        text = format_invoice(self.make_invoice(), installments=2)
        self.assertIn("Tax 19%", text)
        self.assertIn("58.28 EUR", text)


if __name__ == "__main__":
    unittest.main()
