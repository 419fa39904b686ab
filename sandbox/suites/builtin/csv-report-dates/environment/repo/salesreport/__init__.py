"""salesreport: period totals from a CSV export of sales.

Read rows with :func:`read_sales`, then total them per day, ISO week, month
or quarter with :func:`summarize`. Periods are calendar periods in a
*report time zone* (UTC unless told otherwise), whatever UTC offset the
individual timestamps were recorded with.
"""

from .aggregate import Row, summarize
from .periods import PERIOD_KINDS, DateRange, period_key
from .reader import Sale, SalesFileError, read_sales
from .timezones import parse_tz

__all__ = [
    "DateRange",
    "PERIOD_KINDS",
    "Row",
    "Sale",
    "SalesFileError",
    "parse_tz",
    "period_key",
    "read_sales",
    "summarize",
]

__version__ = "2.1.0"
