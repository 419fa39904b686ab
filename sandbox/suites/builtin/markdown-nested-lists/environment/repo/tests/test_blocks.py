import unittest

from minimark import markdown, parse_blocks
from minimark.blocks import CodeBlock, Heading, Paragraph


class BlockTest(unittest.TestCase):
    def test_headings(self):
        self.assertEqual(markdown("# One\n### Three ###\n####### seven"),
                         "<h1>One</h1>\n<h3>Three</h3>\n<p>####### seven</p>\n")
        self.assertEqual(parse_blocks("## C#"), [Heading(2, "C#")])

    def test_paragraphs_and_breaks(self):
        self.assertEqual(markdown("one\ntwo\n\nthree\n***\nfour"),
                         "<p>one\ntwo</p>\n<p>three</p>\n<hr />\n<p>four</p>\n")

    def test_fenced_code(self):
        source = "```python\ndef f():\n    return '<x>'\n```\n"
        self.assertEqual(markdown(source),
                         '<pre><code class="language-python">def f():\n    return \'&lt;x&gt;\'\n</code></pre>\n')
        self.assertEqual(parse_blocks("  ~~~\n  a\n    b\n~~~"), [CodeBlock("a\n  b\n")])

    def test_indented_code_cannot_interrupt_paragraph(self):
        self.assertEqual(markdown("text\n    more"), "<p>text\nmore</p>\n")
        self.assertEqual(markdown("    x = 1\n\n    y = 2\n"), "<pre><code>x = 1\n\ny = 2\n</code></pre>\n")

    def test_blockquote(self):
        self.assertEqual(markdown("> # Quote\n> text\n>\n> more"),
                         "<blockquote>\n<h1>Quote</h1>\n<p>text</p>\n<p>more</p>\n</blockquote>\n")

    def test_paragraph_interrupted_by_heading(self):
        self.assertEqual(parse_blocks("text\n# Head"), [Paragraph("text"), Heading(1, "Head")])


if __name__ == "__main__":
    unittest.main()
