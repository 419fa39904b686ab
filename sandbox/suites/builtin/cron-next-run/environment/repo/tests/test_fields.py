import unittest

from cronsched import CronSyntaxError
from cronsched.fields import DAY_OF_MONTH, DAY_OF_WEEK, HOUR, MINUTE, MONTH, parse_field


class FieldTest(unittest.TestCase):
    def values(self, text, spec):
        return parse_field(text, spec).ordered()

    def test_star_and_single(self):
        self.assertEqual(self.values("*", HOUR), list(range(24)))
        self.assertEqual(self.values("5", MINUTE), [5])

    def test_ranges_and_lists(self):
        self.assertEqual(self.values("1-3,10,20-21", DAY_OF_MONTH), [1, 2, 3, 10, 20, 21])

    def test_steps(self):
        self.assertEqual(self.values("*/15", MINUTE), [0, 15, 30, 45])
        self.assertEqual(self.values("10-50/20", MINUTE), [10, 30, 50])
        self.assertEqual(self.values("5/20", MINUTE), [5, 25, 45])
        self.assertEqual(self.values("*/5", MONTH), [1, 6, 11])

    def test_names(self):
        self.assertEqual(self.values("MON-FRI", DAY_OF_WEEK), [1, 2, 3, 4, 5])
        self.assertEqual(self.values("jan,Jul", MONTH), [1, 7])

    def test_sunday_as_seven(self):
        self.assertEqual(self.values("5-7", DAY_OF_WEEK), [0, 5, 6])
        self.assertEqual(self.values("*", DAY_OF_WEEK), list(range(7)))

    def test_errors(self):
        for text, spec in [("60", MINUTE), ("0", DAY_OF_MONTH), ("5-1", HOUR),
                           ("*/0", MINUTE), ("x", HOUR), ("", MINUTE), ("1-", HOUR)]:
            with self.subTest(text=text), self.assertRaises(CronSyntaxError):
                parse_field(text, spec)


if __name__ == "__main__":
    unittest.main()
