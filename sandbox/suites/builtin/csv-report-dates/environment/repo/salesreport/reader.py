"""Reading sales rows from CSV.

Required columns (any order, header names case-insensitive): ``order_id``,
``timestamp``, ``region``, ``product``, ``quantity``, ``unit_price``.
Timestamps are ISO 8601: a date (``2024-03-31``), a local date and time
(``2024-03-31 18:05`` or ``2024-03-31T18:05:00``), or either with a UTC
offset (``2024-03-31T18:05:00-05:00``, ``...Z``). Values without an offset
are taken to be in the *input* time zone (UTC unless told otherwise); a
bare date means midnight there.
"""

import csv
import io
from dataclasses import dataclass
from datetime import date, datetime, timezone, tzinfo
from decimal import Decimal, InvalidOperation
from pathlib import Path
from typing import IO, Iterable, Iterator, List, Union

REQUIRED_COLUMNS = ("order_id", "timestamp", "region", "product", "quantity", "unit_price")


class SalesFileError(ValueError):
    """A malformed row or header, with the line it was found on."""

    def __init__(self, message: str, lineno: int) -> None:
        super().__init__(f"line {lineno}: {message}")
        self.lineno = lineno


@dataclass(frozen=True)
class Sale:
    order_id: str
    timestamp: datetime  # always timezone-aware
    region: str
    product: str
    quantity: int
    unit_price: Decimal

    @property
    def amount(self) -> Decimal:
        return self.unit_price * self.quantity


def read_sales(source: Union[str, Path, IO[str]], input_tz: tzinfo = timezone.utc) -> List[Sale]:
    """Read every sale from a CSV path or open text file."""
    if isinstance(source, (str, Path)):
        with open(source, newline="", encoding="utf-8-sig") as fh:
            return list(iter_sales(fh, input_tz))
    return list(iter_sales(source, input_tz))


def read_sales_text(text: str, input_tz: tzinfo = timezone.utc) -> List[Sale]:
    return list(iter_sales(io.StringIO(text), input_tz))


def iter_sales(lines: Iterable[str], input_tz: tzinfo = timezone.utc) -> Iterator[Sale]:
    reader = csv.reader(lines)
    header = next(reader, None)
    if header is None:
        return
    columns = _column_index(header)
    for row in reader:
        lineno = reader.line_num
        if not row or all(not cell.strip() for cell in row):
            continue
        if len(row) < len(header):
            raise SalesFileError(f"expected {len(header)} fields, got {len(row)}", lineno)
        values = {name: row[index].strip() for name, index in columns.items()}
        yield Sale(
            order_id=values["order_id"],
            timestamp=_parse_timestamp(values["timestamp"], input_tz, lineno),
            region=values["region"] or "unknown",
            product=values["product"],
            quantity=_parse_int(values["quantity"], lineno),
            unit_price=_parse_money(values["unit_price"], lineno),
        )


def parse_timestamp(text: str, input_tz: tzinfo = timezone.utc) -> datetime:
    """Parse one timestamp the way the reader does; the result is aware."""
    return _parse_timestamp(text, input_tz, 0)


def _column_index(header: List[str]) -> dict:
    normalized = [name.strip().lower() for name in header]
    missing = [name for name in REQUIRED_COLUMNS if name not in normalized]
    if missing:
        raise SalesFileError(f"missing column(s): {', '.join(missing)}", 1)
    return {name: normalized.index(name) for name in REQUIRED_COLUMNS}


def _parse_timestamp(text: str, input_tz: tzinfo, lineno: int) -> datetime:
    try:
        if len(text) == 10:
            day = date.fromisoformat(text)
            return datetime(day.year, day.month, day.day, tzinfo=input_tz)
        value = datetime.fromisoformat(text)
    except ValueError:
        raise SalesFileError(f"bad timestamp {text!r}", lineno) from None
    if value.tzinfo is None:
        value = value.replace(tzinfo=input_tz)
    return value


def _parse_int(text: str, lineno: int) -> int:
    try:
        return int(text)
    except ValueError:
        raise SalesFileError(f"bad quantity {text!r}", lineno) from None


def _parse_money(text: str, lineno: int) -> Decimal:
    cleaned = text.replace(",", "").lstrip("$€£")
    try:
        value = Decimal(cleaned)
    except InvalidOperation:
        raise SalesFileError(f"bad unit_price {text!r}", lineno) from None
    if not value.is_finite():
        raise SalesFileError(f"bad unit_price {text!r}", lineno)
    return value
