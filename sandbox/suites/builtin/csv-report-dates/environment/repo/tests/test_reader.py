import unittest
from datetime import datetime, timedelta, timezone
from decimal import Decimal

from salesreport import SalesFileError, parse_tz
from salesreport.reader import parse_timestamp, read_sales_text

HEADER = "order_id,timestamp,region,product,quantity,unit_price\n"


class TimestampTest(unittest.TestCase):
    def test_offsets_are_kept(self):
        ts = parse_timestamp("2024-03-31T23:30:00-05:00")
        self.assertEqual(ts.astimezone(timezone.utc), datetime(2024, 4, 1, 4, 30, tzinfo=timezone.utc))

    def test_naive_values_use_input_zone(self):
        tz = parse_tz("+02:00")
        self.assertEqual(parse_timestamp("2024-03-01 08:00", tz), datetime(2024, 3, 1, 8, 0, tzinfo=tz))
        self.assertEqual(parse_timestamp("2024-03-01", tz), datetime(2024, 3, 1, tzinfo=tz))
        self.assertEqual(parse_timestamp("2024-03-01T00:00:00Z").tzinfo, timezone.utc)

    def test_parse_tz(self):
        self.assertEqual(parse_tz("utc"), timezone.utc)
        self.assertEqual(parse_tz("-0530"), timezone(-timedelta(hours=5, minutes=30)))
        self.assertEqual(parse_tz("+5"), timezone(timedelta(hours=5)))
        with self.assertRaises(ValueError):
            parse_tz("Europe/Paris")


class ReaderTest(unittest.TestCase):
    def test_reads_rows(self):
        sales = read_sales_text(HEADER + "A1,2024-01-05T09:12:00Z,north,widget,3,\"$1,019.99\"\n\n")
        self.assertEqual(len(sales), 1)
        self.assertEqual(sales[0].amount, Decimal("3059.97"))

    def test_reports_line_numbers(self):
        with self.assertRaises(SalesFileError) as ctx:
            read_sales_text(HEADER + "A1,2024-01-05,north,widget,3,1.00\nA2,yesterday,north,widget,1,1.00\n")
        self.assertEqual(ctx.exception.lineno, 3)
        with self.assertRaises(SalesFileError):
            read_sales_text("order_id,timestamp\nA1,2024-01-01\n")


if __name__ == "__main__":
    unittest.main()
