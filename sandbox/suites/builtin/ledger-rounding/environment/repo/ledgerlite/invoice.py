"""Invoices: lines with quantities, prices and tax rates, an optional invoice-level discount,
totals, payment installments, and the journal transaction that books the invoice.

Amounts are computed as follows:
  line net      = quantity x unit price, rounded to the currency
  discount      = an amount off the whole invoice, shared among the lines pro rata to their nets
  tax per rate  = (sum of discounted nets at that rate) x rate, rounded once per rate
  total         = subtotal - discount + taxes
A credit note is an invoice with negative quantities; everything above stays valid.
"""

import datetime as dt
from collections import OrderedDict
from dataclasses import dataclass, field
from decimal import Decimal

from .errors import LedgerError
from .journal import Transaction
from .money import Money, get_currency, round_amount

RECEIVABLE = "1200"
TAX_PAYABLE = "2200"
SALES = "4000"


@dataclass(frozen=True)
class InvoiceLine:
    description: str
    quantity: Decimal
    unit_price: Money
    tax_rate: Decimal = Decimal("0")
    account: str = SALES

    def __post_init__(self):
        object.__setattr__(self, "quantity", Decimal(self.quantity))
        object.__setattr__(self, "tax_rate", Decimal(self.tax_rate))
        if self.tax_rate < 0:
            raise ValueError("tax rate must not be negative")

    @property
    def net(self):
        return Money(self.quantity * self.unit_price.amount, self.unit_price.currency)


@dataclass
class Invoice:
    number: str
    currency: str
    issued: dt.date
    lines: list = field(default_factory=list)
    discount: Money = None

    def add_line(self, description, quantity, unit_price, tax_rate="0", account=SALES):
        price = unit_price if isinstance(unit_price, Money) else Money.of(unit_price, self.currency)
        if price.currency.code != self.currency:
            raise LedgerError(f"line currency {price.currency} differs from invoice {self.currency}")
        line = InvoiceLine(description, Decimal(quantity), price, Decimal(tax_rate), account)
        self.lines.append(line)
        return line

    def set_discount(self, amount):
        """An amount off the whole invoice (before tax)."""
        self.discount = amount if isinstance(amount, Money) else Money.of(amount, self.currency)

    # -- totals --------------------------------------------------------------------------

    @property
    def subtotal(self):
        return sum((line.net for line in self.lines), Money.zero(self.currency))

    def line_discounts(self):
        """The invoice discount shared among the lines, pro rata to their nets."""
        zero = Money.zero(self.currency)
        if not self.discount or not self.lines:
            return [zero for _ in self.lines]
        nets = [abs(line.net.amount) for line in self.lines]
        if not any(nets):
            raise LedgerError("cannot discount an invoice whose lines are all zero")
        sign = -1 if self.subtotal.is_negative() else 1
        return [share * sign for share in self.discount.allocate(nets)]

    def discounted_nets(self):
        return [line.net - disc for line, disc in zip(self.lines, self.line_discounts())]

    def tax_by_rate(self):
        """{rate: tax amount}, in order of first appearance."""
        taxable = OrderedDict()
        for line, net in zip(self.lines, self.discounted_nets()):
            taxable[line.tax_rate] = taxable.get(line.tax_rate, Decimal(0)) + net.amount
        return OrderedDict(
            (rate, Money(round_amount(base * rate, get_currency(self.currency)), self.currency))
            for rate, base in taxable.items()
        )

    @property
    def tax(self):
        return sum(self.tax_by_rate().values(), Money.zero(self.currency))

    @property
    def total(self):
        discount = self.discount or Money.zero(self.currency)
        if self.subtotal.is_negative():
            discount = -discount
        return self.subtotal - discount + self.tax

    # -- payment and booking -------------------------------------------------------------

    def installments(self, count, first_due=None, every_days=30):
        """[(due date, amount)]: the total split into `count` payments as equal as possible."""
        first_due = first_due or self.issued
        parts = self.total.split(count)
        return [(first_due + dt.timedelta(days=every_days * i), part)
                for i, part in enumerate(parts)]

    def to_transaction(self):
        """The journal transaction booking this invoice (receivable against sales and tax)."""
        txn = Transaction(self.issued, f"Invoice {self.number}")
        txn.debit(RECEIVABLE, self.total)
        revenue = OrderedDict()
        for line, net in zip(self.lines, self.discounted_nets()):
            revenue[line.account] = revenue.get(line.account, Money.zero(self.currency)) + net
        for account, amount in revenue.items():
            txn.credit(account, amount)
        for rate, amount in self.tax_by_rate().items():
            txn.credit(TAX_PAYABLE, amount)
        return txn

    def post(self, ledger):
        return ledger.post(self.to_transaction())
