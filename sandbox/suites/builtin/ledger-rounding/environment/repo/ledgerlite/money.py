"""Money: an exact Decimal amount in a currency, always held at the currency's precision.

Rounding is commercial (half away from zero, ROUND_HALF_UP), applied whenever a computation
produces more digits than the currency has minor units.
"""

from dataclasses import dataclass
from decimal import ROUND_HALF_UP, Decimal

from .errors import CurrencyMismatchError


@dataclass(frozen=True)
class Currency:
    code: str
    exponent: int

    @property
    def quantum(self):
        """The smallest unit, e.g. Decimal('0.01') for USD, Decimal('1') for JPY."""
        return Decimal(1).scaleb(-self.exponent)

    def __str__(self):
        return self.code


_CURRENCIES = {c.code: c for c in (
    Currency("USD", 2), Currency("EUR", 2), Currency("GBP", 2), Currency("CHF", 2),
    Currency("JPY", 0), Currency("KRW", 0), Currency("KWD", 3), Currency("BHD", 3),
)}


def get_currency(code):
    try:
        return _CURRENCIES[code.upper()]
    except KeyError:
        raise ValueError(f"unknown currency {code!r}") from None


def round_amount(value, currency):
    """Round a Decimal to the currency's minor unit, half away from zero."""
    return Decimal(value).quantize(currency.quantum, rounding=ROUND_HALF_UP)


@dataclass(frozen=True)
class Money:
    amount: Decimal
    currency: Currency

    def __post_init__(self):
        if isinstance(self.currency, str):
            object.__setattr__(self, "currency", get_currency(self.currency))
        if isinstance(self.amount, float):
            raise TypeError("use str or Decimal amounts, not float")
        object.__setattr__(self, "amount", round_amount(Decimal(self.amount), self.currency))

    @classmethod
    def of(cls, amount, currency):
        """Money from an int, a str or a Decimal: Money.of("19.99", "EUR")."""
        if isinstance(amount, float):
            raise TypeError("use str or Decimal amounts, not float")
        return cls(Decimal(amount) if isinstance(amount, (int, str)) else amount, currency)

    @classmethod
    def zero(cls, currency):
        return cls(Decimal(0), currency)

    # -- arithmetic ----------------------------------------------------------------------

    def __add__(self, other):
        if other == 0:
            return self
        self._check(other)
        return Money(self.amount + other.amount, self.currency)

    __radd__ = __add__

    def __sub__(self, other):
        self._check(other)
        return Money(self.amount - other.amount, self.currency)

    def __neg__(self):
        return Money(-self.amount, self.currency)

    def __abs__(self):
        return Money(abs(self.amount), self.currency)

    def __mul__(self, factor):
        if isinstance(factor, (Money, float)):
            raise TypeError("Money can only be multiplied by int or Decimal")
        return Money(self.amount * Decimal(factor), self.currency)

    __rmul__ = __mul__

    def __lt__(self, other):
        self._check(other)
        return self.amount < other.amount

    def __le__(self, other):
        self._check(other)
        return self.amount <= other.amount

    def __bool__(self):
        return self.amount != 0

    def is_negative(self):
        return self.amount < 0

    # -- distribution --------------------------------------------------------------------

    def allocate(self, ratios):
        """Split into parts proportional to `ratios`; the parts add up to this amount."""
        weights = [Decimal(r) for r in ratios]
        if not weights:
            raise ValueError("need at least one ratio")
        if any(w < 0 for w in weights):
            raise ValueError("ratios must not be negative")
        total_weight = sum(weights)
        if total_weight == 0:
            raise ValueError("ratios must not all be zero")

        quantum = self.currency.quantum
        parts = [round_amount(self.amount * w / total_weight, self.currency) for w in weights]
        remainder = self.amount - sum(parts)
        index = 0
        while remainder > 0:
            parts[index] += quantum
            remainder -= quantum
            index += 1
        return [Money(p, self.currency) for p in parts]

    def split(self, count):
        """Split into `count` parts as equal as possible."""
        if count < 1:
            raise ValueError("count must be at least 1")
        return self.allocate([1] * count)

    # -- display -------------------------------------------------------------------------

    def format(self):
        sign = "-" if self.amount < 0 else ""
        return f"{sign}{abs(self.amount):,.{self.currency.exponent}f} {self.currency.code}"

    def __str__(self):
        return f"{self.currency.code} {self.amount}"

    def __repr__(self):
        return f"Money('{self.amount}', '{self.currency.code}')"

    def _check(self, other):
        if not isinstance(other, Money):
            raise TypeError(f"expected Money, got {type(other).__name__}")
        if other.currency != self.currency:
            raise CurrencyMismatchError(self.currency, other.currency)
