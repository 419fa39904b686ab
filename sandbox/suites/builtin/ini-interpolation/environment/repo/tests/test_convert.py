import unittest

from iniconf.convert import ConversionError, to_bool, to_duration, to_int, to_list, to_size


class ConvertTest(unittest.TestCase):
    def test_bool(self):
        self.assertTrue(to_bool(" Yes "))
        self.assertFalse(to_bool("off"))
        with self.assertRaises(ConversionError):
            to_bool("maybe")

    def test_int(self):
        self.assertEqual(to_int("1_000"), 1000)
        self.assertEqual(to_int("0x1F"), 31)

    def test_list(self):
        self.assertEqual(to_list("a, b,,c\n d"), ["a", "b", "c", "d"])

    def test_duration(self):
        self.assertEqual(to_duration("90"), 90.0)
        self.assertEqual(to_duration("1h30m"), 5400.0)
        self.assertEqual(to_duration("250ms"), 0.25)
        for bad in ("", "5 parsecs", "h"):
            with self.subTest(bad=bad), self.assertRaises(ConversionError):
                to_duration(bad)

    def test_size(self):
        self.assertEqual(to_size("512"), 512)
        self.assertEqual(to_size("64k"), 65536)
        self.assertEqual(to_size("1.5G"), 1610612736)


if __name__ == "__main__":
    unittest.main()
