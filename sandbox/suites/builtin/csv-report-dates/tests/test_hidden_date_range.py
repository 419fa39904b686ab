import io
import os
import unittest
from contextlib import redirect_stdout
from datetime import date, datetime, timedelta, timezone
from decimal import Decimal

from salesreport import DateRange, parse_tz, read_sales, summarize
from salesreport.cli import main
from salesreport.reader import read_sales_text

EXAMPLE = "/app/examples/sales.csv"
HEADER = "order_id,timestamp,region,product,quantity,unit_price\n"
UTC = timezone.utc
PLUS2 = timezone(timedelta(hours=2))
MINUS5 = timezone(-timedelta(hours=5))


def run_cli(*args):
    out = io.StringIO()
    with redirect_stdout(out):
        status = main([EXAMPLE, *args])
    return status, [line.split() for line in out.getvalue().splitlines()]


def table(rows):
    return [(r.period, r.orders, r.units, r.revenue) for r in rows]


class TestFailToPassLastDayIncluded(unittest.TestCase):
    def test_whole_last_day_is_in_range_utc(self):
        march = DateRange(date(2024, 3, 1), date(2024, 3, 31))
        for moment in [datetime(2024, 3, 31, 0, 0, 1, tzinfo=UTC), datetime(2024, 3, 31, 12, 0, tzinfo=UTC),
                       datetime(2024, 3, 31, 23, 59, 59, 999999, tzinfo=UTC)]:
            self.assertTrue(march.contains(moment, UTC), moment)

    def test_whole_last_day_is_in_range_in_report_zone(self):
        march = DateRange(date(2024, 3, 1), date(2024, 3, 31))
        self.assertTrue(march.contains(datetime(2024, 3, 31, 21, 30, tzinfo=UTC), PLUS2))
        self.assertTrue(march.contains(datetime(2024, 3, 31, 23, 30, tzinfo=MINUS5), MINUS5))
        self.assertTrue(march.contains(datetime(2024, 4, 1, 4, 59, tzinfo=UTC), MINUS5))

    def test_month_range_keeps_leap_day_sales(self):
        sales = read_sales_text(HEADER + "A,2024-02-01T00:00:00Z,n,w,1,10\nB,2024-02-29T20:15:00Z,n,w,2,10\n"
                                "C,2024-02-29,n,w,4,10\nD,2024-03-01T00:00:00Z,n,w,8,10\n")
        rows = summarize(sales, date_range=DateRange.month(2024, 2))
        self.assertEqual(table(rows), [("2024-02", 3, 7, Decimal("70.00"))])

    def test_cli_from_to_matches_unfiltered_report(self):
        status, full = run_cli()
        self.assertEqual(status, 0)
        status, filtered = run_cli("--from", "2024-01-01", "--to", "2024-03-31")
        self.assertEqual(status, 0)
        self.assertEqual(filtered[1:4], full[1:4])
        self.assertEqual(filtered[2], ["2024-02", "2", "6", "57.49"])
        self.assertEqual(filtered[3], ["2024-03", "3", "16", "452.96"])
        self.assertEqual(filtered[-1], ["total", "8", "28", "759.40"])

    def test_cli_month_with_negative_offset(self):
        status, lines = run_cli("--month", "2024-03", "--tz=-05:00", "--format", "csv")
        self.assertEqual(status, 0)
        self.assertEqual(lines, [["period,orders,units,revenue"], ["2024-03,4,17,601.96"]])


class TestPassToPassRangeBoundaries(unittest.TestCase):
    def test_next_midnight_is_excluded(self):
        march = DateRange(date(2024, 3, 1), date(2024, 3, 31))
        self.assertFalse(march.contains(datetime(2024, 4, 1, 0, 0, tzinfo=UTC), UTC))
        self.assertFalse(march.contains(datetime(2024, 3, 31, 22, 0, tzinfo=UTC), PLUS2))
        self.assertFalse(march.contains(datetime(2024, 3, 31, 22, 30, tzinfo=UTC), PLUS2))
        self.assertFalse(march.contains(datetime(2024, 4, 1, 5, 0, tzinfo=UTC), MINUS5))

    def test_start_day_boundaries(self):
        march = DateRange(date(2024, 3, 1), date(2024, 3, 31))
        self.assertTrue(march.contains(datetime(2024, 3, 1, 0, 0, tzinfo=PLUS2), PLUS2))
        self.assertTrue(march.contains(datetime(2024, 2, 29, 22, 0, tzinfo=UTC), PLUS2))
        self.assertFalse(march.contains(datetime(2024, 2, 29, 21, 59, tzinfo=UTC), PLUS2))
        self.assertFalse(march.contains(datetime(2024, 2, 29, 23, 59, tzinfo=UTC), UTC))

    def test_open_ranges(self):
        self.assertTrue(DateRange().contains(datetime(1999, 1, 1, tzinfo=UTC), UTC))
        self.assertTrue(DateRange(start=date(2024, 3, 1)).contains(datetime(2030, 1, 1, tzinfo=UTC), UTC))
        self.assertFalse(DateRange(end=date(2024, 3, 31)).contains(datetime(2024, 4, 1, tzinfo=UTC), UTC))
        with self.assertRaises(ValueError):
            DateRange(date(2024, 3, 2), date(2024, 3, 1))

    def test_range_lists_every_period_it_touches(self):
        sales = read_sales_text(HEADER + "A,2024-02-10,n,w,1,5\nB,2024-06-10,n,w,1,5\n")
        rows = summarize(sales, date_range=DateRange(date(2024, 1, 1), date(2024, 3, 15)))
        self.assertEqual([(r.period, r.orders) for r in rows], [("2024-01", 0), ("2024-02", 1), ("2024-03", 0)])

    def test_unfiltered_report_zones(self):
        sales = read_sales(EXAMPLE)
        self.assertEqual([(r.period, r.orders) for r in summarize(sales)],
                         [("2024-01", 3), ("2024-02", 2), ("2024-03", 3), ("2024-04", 2)])
        self.assertEqual([(r.period, r.orders) for r in summarize(sales, tz=parse_tz("-05:00"))],
                         [("2024-01", 3), ("2024-02", 2), ("2024-03", 4), ("2024-04", 1)])
        weeks = summarize(read_sales_text(HEADER + "A,2024-12-29T23:30:00Z,n,w,1,1\nB,2024-12-30T00:30:00Z,n,w,1,1\n"),
                          period="week")
        self.assertEqual([(r.period, r.orders) for r in weeks], [("2024-W52", 1), ("2025-W01", 1)])


if __name__ == "__main__":
    unittest.main()
