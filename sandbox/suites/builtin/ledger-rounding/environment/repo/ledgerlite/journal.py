"""Transactions (balanced sets of debit and credit entries) and the Ledger that records them."""

import datetime as dt
from collections import defaultdict
from dataclasses import dataclass, field

from .errors import LedgerError, UnbalancedTransactionError
from .money import Money


@dataclass(frozen=True)
class Entry:
    account: str
    debit: Money = None
    credit: Money = None

    def __post_init__(self):
        if (self.debit is None) == (self.credit is None):
            raise LedgerError("an entry has exactly one of debit or credit")
        if self.amount.is_negative():
            raise LedgerError(f"negative amount on account {self.account}; use the other side")

    @property
    def amount(self):
        return self.debit if self.debit is not None else self.credit

    @property
    def signed(self):
        """Debits positive, credits negative."""
        return self.debit if self.debit is not None else -self.credit


@dataclass
class Transaction:
    date: dt.date
    memo: str
    entries: list = field(default_factory=list)

    def debit(self, account, amount):
        self._add(account, amount, debit=True)
        return self

    def credit(self, account, amount):
        self._add(account, amount, debit=False)
        return self

    def _add(self, account, amount, debit):
        if amount.is_negative():
            debit = not debit
            amount = -amount
        if not amount:
            return
        self.entries.append(Entry(account, debit=amount) if debit else Entry(account, credit=amount))

    def totals(self):
        """{currency: (debits, credits)}."""
        sums = {}
        for entry in self.entries:
            currency = entry.amount.currency
            debits, credits = sums.get(currency, (Money.zero(currency), Money.zero(currency)))
            if entry.debit is not None:
                debits += entry.debit
            else:
                credits += entry.credit
            sums[currency] = (debits, credits)
        return sums

    def validate(self):
        if len(self.entries) < 2:
            raise LedgerError("a transaction needs at least two entries")
        for currency, (debits, credits) in self.totals().items():
            if debits != credits:
                raise UnbalancedTransactionError(currency, debits, credits)


class Ledger:
    """Posted transactions against a chart of accounts."""

    def __init__(self, chart):
        self.chart = chart
        self.transactions = []

    def post(self, transaction):
        transaction.validate()
        for entry in transaction.entries:
            self.chart.get(entry.account)
        self.transactions.append(transaction)
        return transaction

    def balance(self, code, currency, as_of=None):
        """Balance of an account on its normal side (positive = normal)."""
        account = self.chart.get(code)
        total = Money.zero(currency)
        for transaction in self._until(as_of):
            for entry in transaction.entries:
                if entry.account == code and entry.amount.currency == total.currency:
                    total += entry.signed
        return total if account.type.debit_normal else -total

    def trial_balance(self, currency, as_of=None):
        """[(account, debit balance, credit balance)] for accounts with activity."""
        zero = Money.zero(currency)
        net = defaultdict(lambda: zero)
        for transaction in self._until(as_of):
            for entry in transaction.entries:
                if entry.amount.currency == zero.currency:
                    net[entry.account] += entry.signed
        rows = []
        for account in self.chart:
            if account.code not in net:
                continue
            value = net[account.code]
            rows.append((account, value if value.amount > 0 else zero,
                         -value if value.amount < 0 else zero))
        return rows

    def _until(self, as_of):
        return [t for t in self.transactions if as_of is None or t.date <= as_of]
