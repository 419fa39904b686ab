"""``python -m salesreport SALES.csv``: print period totals.

Options:
  --period {day,week,month,quarter}   period to total by (default: month)
  --tz OFFSET         report time zone, e.g. UTC, +02:00, -05:00 (default: UTC)
  --input-tz OFFSET   zone of timestamps that have no offset (default: UTC)
  --from DATE         first day to include (YYYY-MM-DD, in the report time zone)
  --to DATE           last day to include, inclusive (YYYY-MM-DD)
  --month YYYY-MM     shorthand for --from/--to covering one calendar month
  --by-region         one row per period and region
  --format {table,csv}
"""

import argparse
import sys
from datetime import date
from typing import List, Optional

from .aggregate import summarize
from .formatting import render_csv, render_table
from .periods import PERIOD_KINDS, DateRange
from .reader import SalesFileError, read_sales
from .timezones import parse_tz


def main(argv: Optional[List[str]] = None) -> int:
    parser = _parser()
    args = parser.parse_args(argv)
    try:
        report_tz = parse_tz(args.tz)
        input_tz = parse_tz(args.input_tz)
        date_range = _date_range(args)
    except ValueError as exc:
        parser.error(str(exc))
    try:
        sales = read_sales(args.sales, input_tz=input_tz)
    except (OSError, SalesFileError) as exc:
        print(f"salesreport: {args.sales}: {exc}", file=sys.stderr)
        return 1
    rows = summarize(sales, period=args.period, tz=report_tz, date_range=date_range, by_region=args.by_region)
    render = render_csv if args.format == "csv" else render_table
    sys.stdout.write(render(rows, with_region=args.by_region))
    return 0


def _date_range(args) -> Optional[DateRange]:
    if args.month:
        if args.date_from or args.date_to:
            raise ValueError("--month cannot be combined with --from/--to")
        return DateRange.parse_month(args.month)
    if not (args.date_from or args.date_to):
        return None
    start = date.fromisoformat(args.date_from) if args.date_from else None
    end = date.fromisoformat(args.date_to) if args.date_to else None
    return DateRange(start, end)


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="salesreport", description="Period totals from a sales CSV.")
    parser.add_argument("sales", help="CSV export with order_id,timestamp,region,product,quantity,unit_price")
    parser.add_argument("--period", choices=PERIOD_KINDS, default="month")
    parser.add_argument("--tz", default="UTC", help="report time zone (UTC or an offset like +02:00)")
    parser.add_argument("--input-tz", default="UTC", help="time zone of timestamps without an offset")
    parser.add_argument("--from", dest="date_from", metavar="DATE", help="first day included (YYYY-MM-DD)")
    parser.add_argument("--to", dest="date_to", metavar="DATE", help="last day included (YYYY-MM-DD)")
    parser.add_argument("--month", metavar="YYYY-MM", help="one calendar month")
    parser.add_argument("--by-region", action="store_true")
    parser.add_argument("--format", choices=("table", "csv"), default="table")
    return parser
