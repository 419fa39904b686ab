import unittest

from minimark.inline import render_inline


class InlineTest(unittest.TestCase):
    def test_emphasis(self):
        self.assertEqual(render_inline("*a* **b** _c_ __d__ ***e***"),
                         "<em>a</em> <strong>b</strong> <em>c</em> <strong>d</strong> <em><strong>e</strong></em>")
        self.assertEqual(render_inline("snake_case_name"), "snake_case_name")

    def test_code_spans(self):
        self.assertEqual(render_inline("`a*b*`"), "<code>a*b*</code>")
        self.assertEqual(render_inline("`` a ` b ``"), "<code>a ` b</code>")
        self.assertEqual(render_inline("a ` b"), "a ` b")

    def test_links_and_images(self):
        self.assertEqual(render_inline('[*x*](http://e.com/?a=1&b=2 "T")'),
                         '<a href="http://e.com/?a=1&amp;b=2" title="T"><em>x</em></a>')
        self.assertEqual(render_inline("![a *b*](i.png)"), '<img src="i.png" alt="a b" />')
        self.assertEqual(render_inline("[x](javascript:alert(1))"), '<a href="#">x</a>')
        self.assertEqual(render_inline("<https://e.com>"), '<a href="https://e.com">https://e.com</a>')

    def test_escaping(self):
        self.assertEqual(render_inline("<b> & &copy; \\*no\\*"), "&lt;b&gt; &amp; &copy; *no*")

    def test_hard_breaks(self):
        self.assertEqual(render_inline("a  \nb\\\nc"), "a<br />\nb<br />\nc")


if __name__ == "__main__":
    unittest.main()
