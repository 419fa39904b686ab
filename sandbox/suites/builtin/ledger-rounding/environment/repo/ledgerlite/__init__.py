"""ledgerlite: double-entry bookkeeping and invoicing on top of decimal.Decimal."""

from .accounts import Account, AccountType, ChartOfAccounts
from .errors import CurrencyMismatchError, LedgerError, UnbalancedTransactionError
from .invoice import Invoice, InvoiceLine
from .journal import Entry, Ledger, Transaction
from .money import Currency, Money, get_currency

__all__ = [
    "Account",
    "AccountType",
    "ChartOfAccounts",
    "Currency",
    "CurrencyMismatchError",
    "Entry",
    "Invoice",
    "InvoiceLine",
    "Ledger",
    "LedgerError",
    "Money",
    "Transaction",
    "UnbalancedTransactionError",
    "get_currency",
]

__version__ = "0.9.3"
