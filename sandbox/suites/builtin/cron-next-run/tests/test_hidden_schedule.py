import datetime as dt
import io
import itertools
import unittest

from cronsched import CronExpression, NoRunError, iter_runs, next_run, runs_between
from cronsched.cli import main


def at(*args, **kwargs):
    return dt.datetime(*args, **kwargs)


def first_runs(expr, after, count):
    return list(itertools.islice(iter_runs(expr, after), count))


# FAIL-TO-PASS: both day fields restricted -> a day matches when either field matches.
class TestFailToPassDayFieldsOred(unittest.TestCase):
    def test_first_and_fifteenth_or_monday(self):
        runs = first_runs("0 0 1,15 * MON", at(2024, 3, 1, 9, 30), 8)
        self.assertEqual(runs, [
            at(2024, 3, 4), at(2024, 3, 11), at(2024, 3, 15), at(2024, 3, 18),
            at(2024, 3, 25), at(2024, 4, 1), at(2024, 4, 8), at(2024, 4, 15),
        ])

    def test_thirteenth_or_friday(self):
        runs = runs_between("30 6 13 * FRI", at(2024, 9, 1), at(2024, 10, 20))
        expected_days = [(9, 6), (9, 13), (9, 20), (9, 27), (10, 4), (10, 11), (10, 13), (10, 18)]
        self.assertEqual(runs, [at(2024, m, d, 6, 30) for m, d in expected_days])

    def test_matches_either_field(self):
        expr = CronExpression.parse("0 0 1 * MON")
        self.assertTrue(expr.matches(at(2024, 3, 4)))       # Monday, not the 1st
        self.assertTrue(expr.matches(at(2024, 2, 1)))       # Thursday the 1st
        self.assertFalse(expr.matches(at(2024, 3, 5)))      # Tuesday the 5th
        self.assertFalse(expr.matches(at(2024, 3, 4, 0, 1)))

    def test_nonexistent_day_of_month_with_weekday(self):
        self.assertEqual(next_run("0 0 31 2 MON", at(2024, 1, 1)), at(2024, 2, 5))
        self.assertEqual(next_run("0 0 31 2 MON", at(2024, 2, 26)), at(2025, 2, 3))

    def test_day_ranges_and_weekday_lists(self):
        # 2024-06-01 is a Saturday
        runs = runs_between("0 12 10-11 JUN SAT,SUN", at(2024, 6, 1), at(2024, 6, 17))
        self.assertEqual([r.day for r in runs], [1, 2, 8, 9, 10, 11, 15, 16])

    def test_cli_lists_either_days(self):
        out = io.StringIO()
        self.assertEqual(main(["0 0 1,15 * MON", "--after", "2024-03-01T09:30", "-n", "3"], out=out), 0)
        self.assertEqual(out.getvalue().splitlines(),
                         ["2024-03-04 00:00 Mon", "2024-03-11 00:00 Mon", "2024-03-15 00:00 Fri"])


# PASS-TO-PASS: one day field is `*` -> only the other one restricts.
class TestPassToPassSingleDayField(unittest.TestCase):
    def test_weekday_only(self):
        runs = first_runs("0 9 * * MON-FRI", at(2024, 3, 1, 9, 0), 3)
        self.assertEqual(runs, [at(2024, 3, 4, 9), at(2024, 3, 5, 9), at(2024, 3, 6, 9)])

    def test_day_of_month_only(self):
        runs = first_runs("0 0 1,15 * *", at(2024, 3, 1, 9, 30), 3)
        self.assertEqual(runs, [at(2024, 3, 15), at(2024, 4, 1), at(2024, 4, 15)])

    def test_weekly_macro_and_sunday_seven(self):
        self.assertEqual(next_run("@weekly", at(2024, 3, 1)), at(2024, 3, 3))
        self.assertEqual(next_run("0 0 * * 7", at(2024, 3, 1)), at(2024, 3, 3))

    def test_matches_single_field(self):
        expr = CronExpression.parse("0 0 * * MON")
        self.assertTrue(expr.matches(at(2024, 3, 4)))
        self.assertFalse(expr.matches(at(2024, 3, 1)))
        expr = CronExpression.parse("0 0 1 * *")
        self.assertTrue(expr.matches(at(2024, 2, 1)))
        self.assertFalse(expr.matches(at(2024, 3, 4)))

    def test_impossible_date_still_raises(self):
        with self.assertRaises(NoRunError):
            next_run("0 0 30 2 *", at(2024, 1, 1))
        self.assertEqual(next_run("0 0 29 2 *", at(2024, 3, 1)), at(2028, 2, 29))


# PASS-TO-PASS: steps, rollover, tz handling.
class TestPassToPassGeneral(unittest.TestCase):
    def test_step_ranges(self):
        runs = first_runs("10-50/20 8 * * *", at(2024, 1, 1, 8, 10), 4)
        self.assertEqual(runs, [at(2024, 1, 1, 8, 30), at(2024, 1, 1, 8, 50),
                                at(2024, 1, 2, 8, 10), at(2024, 1, 2, 8, 30)])

    def test_strictly_after_and_seconds_ignored(self):
        self.assertEqual(next_run("*/15 * * * *", at(2024, 1, 1, 10, 15)), at(2024, 1, 1, 10, 30))
        self.assertEqual(next_run("*/15 * * * *", at(2024, 1, 1, 10, 14, 59, 999)), at(2024, 1, 1, 10, 15))

    def test_year_rollover(self):
        self.assertEqual(next_run("0 0 1 1 *", at(2024, 1, 1, 0, 0)), at(2025, 1, 1))

    def test_tzinfo_kept(self):
        tz = dt.timezone(dt.timedelta(hours=2))
        self.assertEqual(next_run("0 3 * * *", at(2024, 1, 1, 4, tzinfo=tz)), at(2024, 1, 2, 3, tzinfo=tz))


if __name__ == "__main__":
    unittest.main()
