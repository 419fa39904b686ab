import os
import tempfile
import unittest

from iniconf import Config, InterpolationDepthError, MissingReferenceError, NoOptionError, NoSectionError

SAMPLE = """\
[DEFAULT]
root = /srv/app

[paths]
logs = ${root}/logs

[server]
port = 8080
debug = no
log_file = ${paths:logs}/server.log
price_format = $$%.2f
"""


class LoaderTest(unittest.TestCase):
    def setUp(self):
        self.cfg = Config.from_string(SAMPLE)

    def test_interpolation(self):
        self.assertEqual(self.cfg.get("paths", "logs"), "/srv/app/logs")
        self.assertEqual(self.cfg.get("server", "log_file"), "/srv/app/logs/server.log")

    def test_literal_dollar(self):
        self.assertEqual(self.cfg.get("server", "price_format"), "$%.2f")

    def test_raw(self):
        self.assertEqual(self.cfg.get("server", "log_file", raw=True), "${paths:logs}/server.log")

    def test_typed(self):
        self.assertEqual(self.cfg.getint("server", "port"), 8080)
        self.assertIs(self.cfg.getbool("server", "debug"), False)
        self.assertEqual(self.cfg.getint("server", "workers", fallback=4), 4)

    def test_missing(self):
        with self.assertRaises(NoSectionError):
            self.cfg.get("nope", "x")
        with self.assertRaises(NoOptionError):
            self.cfg.get("server", "nope")

    def test_bad_references(self):
        cfg = Config.from_string("[a]\nx = ${y}\ny = ${x}\nz = ${b:q}\n")
        with self.assertRaises(InterpolationDepthError):
            cfg.get("a", "x")
        with self.assertRaises(MissingReferenceError):
            cfg.get("a", "z")

    def test_later_files_override(self):
        with tempfile.TemporaryDirectory() as tmp:
            first = os.path.join(tmp, "a.ini")
            second = os.path.join(tmp, "b.ini")
            with open(first, "w") as f:
                f.write("[s]\nk = 1\nj = 2\n")
            with open(second, "w") as f:
                f.write("[s]\nk = 3\n")
            cfg = Config.from_files([first, second, os.path.join(tmp, "none.ini")], missing_ok=True)
        self.assertEqual(cfg.section("s")["k"], "3")
        self.assertEqual(cfg.section("s")["j"], "2")


if __name__ == "__main__":
    unittest.main()
