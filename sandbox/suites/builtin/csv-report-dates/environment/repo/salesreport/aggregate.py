"""Totalling sales per period (and optionally per region).

Each sale is placed in the period that contains its timestamp *as seen in
the report time zone*: a sale at ``2024-03-31T23:30:00-05:00`` is on
2024-04-01 in UTC, so a UTC monthly report counts it in April.
"""

from dataclasses import dataclass
from datetime import timezone, tzinfo
from decimal import Decimal
from typing import Dict, Iterable, List, Optional, Tuple

from .periods import PERIOD_KINDS, DateRange, iter_period_keys, period_key
from .reader import Sale


@dataclass(frozen=True)
class Row:
    period: str
    region: Optional[str]
    orders: int
    units: int
    revenue: Decimal


def summarize(
    sales: Iterable[Sale],
    period: str = "month",
    tz: tzinfo = timezone.utc,
    date_range: Optional[DateRange] = None,
    by_region: bool = False,
) -> List[Row]:
    """Total ``sales`` per period, oldest period first.

    Periods without sales between the first and last one reported are
    included with zero totals; with a ``date_range`` that has both ends, the
    report spans exactly the periods the range touches. ``orders`` counts
    distinct order ids. With ``by_region``, there is one row per period and
    region that had sales, regions sorted by name.
    """
    if period not in PERIOD_KINDS:
        raise ValueError(f"unknown period kind {period!r}")
    totals: Dict[Tuple[str, Optional[str]], _Totals] = {}
    days = []
    for sale in sales:
        if date_range is not None and not date_range.contains(sale.timestamp, tz):
            continue
        local_day = sale.timestamp.astimezone(tz).date()
        days.append(local_day)
        key = (period_key(local_day, period), sale.region if by_region else None)
        totals.setdefault(key, _Totals()).add(sale)

    if date_range is not None and date_range.start and date_range.end:
        first, last = date_range.start, date_range.end
    elif days:
        first, last = min(days), max(days)
    else:
        return []

    rows: List[Row] = []
    for key in iter_period_keys(first, last, period):
        if by_region:
            regions = sorted(region for (p, region) in totals if p == key)
            for region in regions:
                rows.append(totals[(key, region)].row(key, region))
        else:
            rows.append(totals.get((key, None), _Totals()).row(key, None))
    return rows


def grand_total(rows: Iterable[Row]) -> Row:
    """One row adding up ``rows`` (orders are summed per row, not deduplicated)."""
    orders = units = 0
    revenue = Decimal(0)
    for row in rows:
        orders += row.orders
        units += row.units
        revenue += row.revenue
    return Row("total", None, orders, units, revenue)


class _Totals:
    def __init__(self) -> None:
        self.order_ids = set()
        self.units = 0
        self.revenue = Decimal(0)

    def add(self, sale: Sale) -> None:
        self.order_ids.add(sale.order_id)
        self.units += sale.quantity
        self.revenue += sale.amount

    def row(self, period: str, region: Optional[str]) -> Row:
        return Row(period, region, len(self.order_ids), self.units, self.revenue.quantize(Decimal("0.01")))
