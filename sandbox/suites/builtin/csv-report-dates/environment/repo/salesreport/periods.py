"""Calendar periods and date ranges in the report time zone.

A period is identified by a sortable key: ``2024-03-31`` (day),
``2024-W13`` (ISO week, with its ISO year), ``2024-03`` (month) and
``2024-Q1`` (quarter). A :class:`DateRange` is a span of whole calendar days
given by its first and last day, both included.
"""

import calendar
from dataclasses import dataclass
from datetime import date, datetime, time, timedelta, tzinfo
from typing import Iterator, Optional

PERIOD_KINDS = ("day", "week", "month", "quarter")


def period_key(day: date, kind: str) -> str:
    """The key of the period of kind ``kind`` that contains ``day``."""
    if kind == "day":
        return day.isoformat()
    if kind == "week":
        iso = day.isocalendar()
        return f"{iso.year}-W{iso.week:02d}"
    if kind == "month":
        return f"{day.year}-{day.month:02d}"
    if kind == "quarter":
        return f"{day.year}-Q{(day.month - 1) // 3 + 1}"
    raise ValueError(f"unknown period kind {kind!r}; expected one of {', '.join(PERIOD_KINDS)}")


def period_start(key: str, kind: str) -> date:
    """The first day of the period identified by ``key``."""
    if kind == "day":
        return date.fromisoformat(key)
    if kind == "week":
        year, week = key.split("-W")
        return date.fromisocalendar(int(year), int(week), 1)
    if kind == "month":
        year, month = key.split("-")
        return date(int(year), int(month), 1)
    if kind == "quarter":
        year, quarter = key.split("-Q")
        return date(int(year), 3 * int(quarter) - 2, 1)
    raise ValueError(f"unknown period kind {kind!r}")


def next_period_start(key: str, kind: str) -> date:
    """The first day after the period identified by ``key``."""
    start = period_start(key, kind)
    if kind == "day":
        return start + timedelta(days=1)
    if kind == "week":
        return start + timedelta(days=7)
    months = 1 if kind == "month" else 3
    month_index = start.month - 1 + months
    return date(start.year + month_index // 12, month_index % 12 + 1, 1)


def iter_period_keys(first: date, last: date, kind: str) -> Iterator[str]:
    """Keys of every period from the one containing ``first`` to the one containing ``last``."""
    key = period_key(first, kind)
    final = period_key(last, kind)
    while True:
        yield key
        if key == final:
            return
        key = period_key(next_period_start(key, kind), kind)


@dataclass(frozen=True)
class DateRange:
    """Whole calendar days from ``start`` to ``end``, both included.

    Either end may be None (unbounded). Days are cut in the time zone passed
    to :meth:`contains`, so the same range selects different instants for a
    report in UTC and one in ``+09:00``.
    """

    start: Optional[date] = None
    end: Optional[date] = None

    def __post_init__(self) -> None:
        if self.start and self.end and self.start > self.end:
            raise ValueError(f"empty date range: {self.start} is after {self.end}")

    @classmethod
    def month(cls, year: int, month: int) -> "DateRange":
        """The whole calendar month ``year-month``."""
        last_day = calendar.monthrange(year, month)[1]
        return cls(date(year, month, 1), date(year, month, last_day))

    @classmethod
    def parse_month(cls, text: str) -> "DateRange":
        """``DateRange.month`` from a ``YYYY-MM`` string."""
        try:
            year, month = (int(part) for part in text.split("-"))
            return cls.month(year, month)
        except ValueError:
            raise ValueError(f"expected a month as YYYY-MM, got {text!r}") from None

    def bounds(self, tz: tzinfo):
        """The range as a pair of aware datetimes (None for an open end)."""
        low = datetime.combine(self.start, time.min, tzinfo=tz) if self.start else None
        high = datetime.combine(self.end, time.min, tzinfo=tz) if self.end else None
        return low, high

    def contains(self, moment: datetime, tz: tzinfo) -> bool:
        low, high = self.bounds(tz)
        if low is not None and moment < low:
            return False
        if high is not None and moment > high:
            return False
        return True
