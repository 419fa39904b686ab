import io
import os
import unittest
from contextlib import redirect_stdout
from datetime import date
from decimal import Decimal

from salesreport import DateRange, parse_tz, period_key, read_sales, summarize
from salesreport.cli import main
from salesreport.reader import read_sales_text

EXAMPLE = os.path.join(os.path.dirname(__file__), "..", "examples", "sales.csv")
HEADER = "order_id,timestamp,region,product,quantity,unit_price\n"


class PeriodTest(unittest.TestCase):
    def test_keys(self):
        self.assertEqual(period_key(date(2024, 12, 30), "week"), "2025-W01")
        self.assertEqual(period_key(date(2021, 1, 1), "week"), "2020-W53")
        self.assertEqual(period_key(date(2024, 11, 30), "quarter"), "2024-Q4")
        self.assertEqual(period_key(date(2024, 2, 29), "month"), "2024-02")


class SummarizeTest(unittest.TestCase):
    def test_monthly_totals_in_utc(self):
        rows = summarize(read_sales(EXAMPLE))
        self.assertEqual([(r.period, r.orders, r.units, r.revenue) for r in rows], [
            ("2024-01", 3, 6, Decimal("248.95")),
            ("2024-02", 2, 6, Decimal("57.49")),
            ("2024-03", 3, 16, Decimal("452.96")),
            ("2024-04", 2, 7, Decimal("268.94")),
        ])

    def test_report_zone_moves_sales_across_months(self):
        rows = summarize(read_sales(EXAMPLE), tz=parse_tz("-06:00"))
        self.assertEqual([(r.period, r.orders) for r in rows], [
            ("2024-01", 3), ("2024-02", 2), ("2024-03", 4), ("2024-04", 1),
        ])

    def test_gaps_are_filled(self):
        sales = read_sales_text(HEADER + "A,2024-01-10,n,w,1,1\nB,2024-04-10,n,w,1,1\n")
        rows = summarize(sales)
        self.assertEqual([(r.period, r.orders) for r in rows],
                         [("2024-01", 1), ("2024-02", 0), ("2024-03", 0), ("2024-04", 1)])

    def test_range_start_day_and_by_region(self):
        sales = read_sales_text(HEADER + "A,2024-02-29T23:59:00Z,n,w,1,1\nB,2024-03-01T00:00:00Z,s,w,2,1\n"
                                "C,2024-03-01T12:00:00Z,n,w,1,1\n")
        rows = summarize(sales, date_range=DateRange(start=date(2024, 3, 1)), by_region=True)
        self.assertEqual([(r.period, r.region, r.units) for r in rows], [("2024-03", "n", 1), ("2024-03", "s", 2)])


class CliTest(unittest.TestCase):
    def test_table(self):
        out = io.StringIO()
        with redirect_stdout(out):
            status = main([EXAMPLE, "--period", "quarter"])
        self.assertEqual(status, 0)
        lines = out.getvalue().splitlines()
        self.assertEqual(lines[1].split(), ["2024-Q1", "8", "28", "759.40"])
        self.assertEqual(lines[-1].split(), ["total", "10", "35", "1028.34"])


if __name__ == "__main__":
    unittest.main()
