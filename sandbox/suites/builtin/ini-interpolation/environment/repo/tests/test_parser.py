import unittest

from iniconf import DuplicateKeyError, ParseError, parse


class ParserTest(unittest.TestCase):
    def test_sections_and_defaults(self):
        doc = parse("top = 1\n[DEFAULT]\nshared = x\n[a]\nKey = v\n[b]\nother: w\n")
        self.assertEqual(doc.defaults, {"top": "1", "shared": "x"})
        self.assertEqual(doc.sections, {"a": {"key": "v"}, "b": {"other": "w"}})

    def test_comments_and_blank_lines(self):
        doc = parse("# comment\n; other\n\n[s]\n  # indented comment\nk = v\n")
        self.assertEqual(doc.sections["s"], {"k": "v"})

    def test_continuation_lines(self):
        doc = parse("[s]\nhosts = a\n  b\n\tc\nnext = 1\n")
        self.assertEqual(doc.sections["s"]["hosts"], "a\nb\nc")
        self.assertEqual(doc.sections["s"]["next"], "1")

    def test_value_keeps_separators(self):
        doc = parse("[s]\nurl = http://example.com:8080/x?a=b\n")
        self.assertEqual(doc.sections["s"]["url"], "http://example.com:8080/x?a=b")

    def test_duplicate_key_reports_line(self):
        with self.assertRaises(DuplicateKeyError) as ctx:
            parse("[s]\nk = 1\nK = 2\n", source="app.ini")
        self.assertEqual(ctx.exception.lineno, 3)
        self.assertIn("app.ini:3", str(ctx.exception))

    def test_bad_lines(self):
        for text in ("[s\n", "[ ]\n", "just words\n", "= value\n"):
            with self.subTest(text=text), self.assertRaises(ParseError):
                parse(text)


if __name__ == "__main__":
    unittest.main()
