"""Errors raised by ledgerlite."""


class LedgerError(Exception):
    """Base class of ledgerlite errors."""


class CurrencyMismatchError(LedgerError, ValueError):
    def __init__(self, left, right):
        super().__init__(f"cannot combine amounts in {left} and {right}")


class UnbalancedTransactionError(LedgerError):
    def __init__(self, currency, debits, credits):
        self.currency = currency
        self.debits = debits
        self.credits = credits
        super().__init__(
            f"transaction does not balance in {currency}: debits {debits} != credits {credits}"
        )


class UnknownAccountError(LedgerError, KeyError):
    def __init__(self, code):
        self.code = code
        super().__init__(f"unknown account {code!r}")

    def __str__(self):
        return self.args[0]
