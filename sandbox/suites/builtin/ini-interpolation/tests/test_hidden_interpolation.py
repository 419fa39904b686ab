import unittest

from iniconf import Config, InterpolationDepthError, MissingReferenceError


# FAIL-TO-PASS: an escaped dollar in front of a brace is a literal, not a reference.
class TestFailToPassEscapedReference(unittest.TestCase):
    def test_escaped_reference_is_literal(self):
        cfg = Config.from_string("[deploy]\nbin_dir = $${HOME}/bin\n")
        self.assertEqual(cfg.get("deploy", "bin_dir"), "${HOME}/bin")

    def test_escaped_reference_not_substituted_when_key_exists(self):
        cfg = Config.from_string("[deploy]\nhome = /home/x\nbin_dir = $${home}/bin\n")
        self.assertEqual(cfg.get("deploy", "bin_dir"), "${home}/bin")

    def test_escaped_dollar_followed_by_reference(self):
        cfg = Config.from_string("[a]\nx = 7\ny = $$$${x}\nz = $$${x}\n")
        self.assertEqual(cfg.get("a", "y"), "$${x}")
        self.assertEqual(cfg.get("a", "z"), "$7")


# FAIL-TO-PASS: a referenced value keeps its dollars exactly as get() returns them.
class TestFailToPassNestedEscapes(unittest.TestCase):
    def test_password_through_reference(self):
        cfg = Config.from_string(
            "[db]\nuser = app\npassword = s3cr$$$$et\n"
            "dsn = postgres://${user}:${password}@db/app\n"
        )
        self.assertEqual(cfg.get("db", "password"), "s3cr$$et")
        self.assertEqual(cfg.get("db", "dsn"), "postgres://app:s3cr$$et@db/app")

    def test_reference_value_equals_get_value_across_levels(self):
        cfg = Config.from_string(
            "[DEFAULT]\ntoken = a$$$$b\n[one]\nv = ${token}\n[two]\nv = <${one:v}>\n"
        )
        self.assertEqual(cfg.get("one", "v"), "a$$b")
        self.assertEqual(cfg.get("two", "v"), "<a$$b>")

    def test_escaped_reference_through_reference(self):
        cfg = Config.from_string("[s]\nsnippet = echo $${PATH}\ncmd = sh -c '${snippet}'\n")
        self.assertEqual(cfg.get("s", "cmd"), "sh -c 'echo ${PATH}'")


# PASS-TO-PASS: existing interpolation behaviour.
class TestPassToPassInterpolation(unittest.TestCase):
    def setUp(self):
        self.cfg = Config.from_string(
            "[DEFAULT]\nroot = /srv\n"
            "[paths]\nlogs = ${root}/logs\ndata = ${ROOT}/data\n"
            "[server]\nlog = ${paths:logs}/s.log\nprice = $$%.2f\ncost = 5$\nlone = a $ b $x\n"
            "both = ${DEFAULT:root}+${paths:data}\n"
        )

    def test_same_section_and_defaults(self):
        self.assertEqual(self.cfg.get("paths", "logs"), "/srv/logs")
        self.assertEqual(self.cfg.get("paths", "data"), "/srv/data")

    def test_cross_section(self):
        self.assertEqual(self.cfg.get("server", "log"), "/srv/logs/s.log")
        self.assertEqual(self.cfg.get("server", "both"), "/srv+/srv/data")

    def test_plain_escape_and_lone_dollar(self):
        self.assertEqual(self.cfg.get("server", "price"), "$%.2f")
        self.assertEqual(self.cfg.get("server", "cost"), "5$")
        self.assertEqual(self.cfg.get("server", "lone"), "a $ b $x")

    def test_raw_is_untouched(self):
        self.assertEqual(self.cfg.get("server", "price", raw=True), "$$%.2f")
        cfg = Config.from_string("[s]\nv = $${x} $$\n", interpolate=False)
        self.assertEqual(cfg.get("s", "v"), "$${x} $$")

    def test_errors(self):
        cfg = Config.from_string("[a]\nx = ${y}\ny = ${x}\nself = ${self}\nm = ${nope}\nn = ${b:k}\n")
        for key in ("x", "self"):
            with self.subTest(key=key), self.assertRaises(InterpolationDepthError):
                cfg.get("a", key)
        for key in ("m", "n"):
            with self.subTest(key=key), self.assertRaises(MissingReferenceError):
                cfg.get("a", key)

    def test_typed_getter_after_interpolation(self):
        cfg = Config.from_string("[DEFAULT]\nbase = 8000\n[s]\nport = ${base}1\nhosts = a,${base}\n")
        self.assertEqual(cfg.getint("s", "port"), 80001)
        self.assertEqual(cfg.getlist("s", "hosts"), ["a", "8000"])


if __name__ == "__main__":
    unittest.main()
