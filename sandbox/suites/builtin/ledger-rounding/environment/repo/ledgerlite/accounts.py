"""Accounts and the chart of accounts.

Assets and expenses have a debit normal balance; liabilities, equity and income a credit one.
"""

import enum
from dataclasses import dataclass

from .errors import UnknownAccountError


class AccountType(enum.Enum):
    ASSET = "asset"
    LIABILITY = "liability"
    EQUITY = "equity"
    INCOME = "income"
    EXPENSE = "expense"

    @property
    def debit_normal(self):
        return self in (AccountType.ASSET, AccountType.EXPENSE)


@dataclass(frozen=True)
class Account:
    code: str
    name: str
    type: AccountType

    def __str__(self):
        return f"{self.code} {self.name}"


class ChartOfAccounts:
    """The accounts a ledger may post to, by code."""

    def __init__(self, accounts=()):
        self._accounts = {}
        for account in accounts:
            self.add(account)

    def add(self, account):
        if account.code in self._accounts:
            raise ValueError(f"duplicate account code {account.code!r}")
        self._accounts[account.code] = account
        return account

    def get(self, code):
        try:
            return self._accounts[code]
        except KeyError:
            raise UnknownAccountError(code) from None

    def __contains__(self, code):
        return code in self._accounts

    def __iter__(self):
        return iter(sorted(self._accounts.values(), key=lambda a: a.code))

    @classmethod
    def standard(cls):
        """A minimal chart for small businesses that send invoices."""
        return cls([
            Account("1000", "Cash", AccountType.ASSET),
            Account("1200", "Accounts receivable", AccountType.ASSET),
            Account("2200", "Sales tax payable", AccountType.LIABILITY),
            Account("3000", "Owner's equity", AccountType.EQUITY),
            Account("4000", "Sales", AccountType.INCOME),
            Account("4100", "Services", AccountType.INCOME),
            Account("6000", "Operating expenses", AccountType.EXPENSE),
        ])
