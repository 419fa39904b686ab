import datetime as dt
import io
import unittest

from cronsched import CronExpression, CronSyntaxError, NoRunError, next_run, runs_between
from cronsched.cli import main


def at(*args):
    return dt.datetime(*args)


class ScheduleTest(unittest.TestCase):
    def test_every_quarter_hour(self):
        self.assertEqual(next_run("*/15 * * * *", at(2024, 1, 1, 10, 7, 59)), at(2024, 1, 1, 10, 15))
        self.assertEqual(next_run("*/15 * * * *", at(2024, 1, 1, 10, 15)), at(2024, 1, 1, 10, 30))

    def test_rolls_over_hour_day_month_year(self):
        self.assertEqual(next_run("0 * * * *", at(2024, 12, 31, 23, 0)), at(2025, 1, 1, 0, 0))
        self.assertEqual(next_run("30 8 1 * *", at(2024, 1, 31, 9, 0)), at(2024, 2, 1, 8, 30))

    def test_weekdays_only(self):
        # 2024-03-01 is a Friday
        self.assertEqual(next_run("0 9 * * MON-FRI", at(2024, 3, 1, 9, 0)), at(2024, 3, 4, 9, 0))

    def test_leap_day(self):
        self.assertEqual(next_run("0 0 29 2 *", at(2024, 3, 1)), at(2028, 2, 29))

    def test_impossible(self):
        with self.assertRaises(NoRunError):
            next_run("0 0 30 2 *", at(2024, 1, 1))

    def test_macros(self):
        self.assertEqual(str(CronExpression.parse("@weekly")), "0 0 * * 0")
        self.assertEqual(next_run("@monthly", at(2024, 5, 20)), at(2024, 6, 1))
        with self.assertRaises(CronSyntaxError):
            CronExpression.parse("@fortnightly")

    def test_matches(self):
        expr = CronExpression.parse("*/10 9-17 * * 1-5")
        self.assertTrue(expr.matches(at(2024, 3, 4, 9, 30)))
        self.assertFalse(expr.matches(at(2024, 3, 3, 9, 30)))

    def test_runs_between(self):
        runs = runs_between("0 12 * * *", at(2024, 1, 1), at(2024, 1, 3, 12, 0))
        self.assertEqual(runs, [at(2024, 1, 1, 12), at(2024, 1, 2, 12), at(2024, 1, 3, 12)])

    def test_cli(self):
        out = io.StringIO()
        code = main(["30 4 * * SUN", "--after", "2024-06-01T00:00", "-n", "2"], out=out)
        self.assertEqual(code, 0)
        self.assertEqual(out.getvalue().splitlines(), ["2024-06-02 04:30 Sun", "2024-06-09 04:30 Sun"])


if __name__ == "__main__":
    unittest.main()
