import io
import os
import tempfile
import unittest
from contextlib import redirect_stdout

from minimark import markdown
from minimark.cli import main


class TestFailToPassBlocksAfterLists(unittest.TestCase):
    def test_fence_right_after_list(self):
        source = "- install the package\n- run the tests:\n```sh\nmake test\n```\n"
        self.assertEqual(markdown(source), (
            "<ul>\n<li>install the package</li>\n<li>run the tests:</li>\n</ul>\n"
            '<pre><code class="language-sh">make test\n</code></pre>\n'))

    def test_fence_keeps_its_indentation_after_list(self):
        source = "1. Add this to `conf.py`:\n```python\nif DEBUG:\n    LOG_LEVEL = 'debug'\n```\n"
        self.assertEqual(markdown(source), (
            "<ol>\n<li>Add this to <code>conf.py</code>:</li>\n</ol>\n"
            "<pre><code class=\"language-python\">if DEBUG:\n    LOG_LEVEL = 'debug'\n</code></pre>\n"))

    def test_heading_after_nested_list(self):
        source = "- Fruit\n  - apple\n  - pear\n## Vegetables\n"
        self.assertEqual(markdown(source), (
            "<ul>\n<li>Fruit\n<ul>\n<li>apple</li>\n<li>pear</li>\n</ul>\n</li>\n</ul>\n"
            "<h2>Vegetables</h2>\n"))

    def test_text_after_code_block_in_item(self):
        source = "1. Install:\n   ```\n   pip install minimark\n   ```\nThen import it.\n"
        self.assertEqual(markdown(source), (
            "<ol>\n<li>Install:\n<pre><code>pip install minimark\n</code></pre>\n</li>\n</ol>\n"
            "<p>Then import it.</p>\n"))

    def test_text_after_code_block_in_nested_item(self):
        source = "- a\n  - b\n    ~~~\n    x = 1\n    ~~~\nafter\n"
        self.assertEqual(markdown(source), (
            "<ul>\n<li>a\n<ul>\n<li>b\n<pre><code>x = 1\n</code></pre>\n</li>\n</ul>\n</li>\n</ul>\n"
            "<p>after</p>\n"))

    def test_rule_and_quote_after_list(self):
        self.assertEqual(markdown("- a\n- b\n---\n"), "<ul>\n<li>a</li>\n<li>b</li>\n</ul>\n<hr />\n")
        self.assertEqual(markdown("- a\n> quoted\n"),
                         "<ul>\n<li>a</li>\n</ul>\n<blockquote>\n<p>quoted</p>\n</blockquote>\n")

    def test_text_after_heading_item(self):
        self.assertEqual(markdown("- # Title\nText\n"), "<ul>\n<li>\n<h1>Title</h1>\n</li>\n</ul>\n<p>Text</p>\n")


class TestPassToPassListStructure(unittest.TestCase):
    def test_lazy_continuation_still_works(self):
        self.assertEqual(markdown("- a long sentence\nthat goes on\n- b\n"),
                         "<ul>\n<li>a long sentence\nthat goes on</li>\n<li>b</li>\n</ul>\n")
        self.assertEqual(markdown("1. a\n   - b\n     c\nlazy\n2. d\n"),
                         "<ol>\n<li>a\n<ul>\n<li>b\nc\nlazy</li>\n</ul>\n</li>\n<li>d</li>\n</ol>\n")

    def test_nested_lists_and_dedent(self):
        source = "- a\n  - b\n    - c\n- d\n  1. e\n  2. f\n"
        self.assertEqual(markdown(source), (
            "<ul>\n<li>a\n<ul>\n<li>b\n<ul>\n<li>c</li>\n</ul>\n</li>\n</ul>\n</li>\n"
            "<li>d\n<ol>\n<li>e</li>\n<li>f</li>\n</ol>\n</li>\n</ul>\n"))

    def test_fence_after_blank_line_and_inside_item(self):
        self.assertEqual(markdown("- a\n\n```\ncode\n```\n"),
                         "<ul>\n<li>a</li>\n</ul>\n<pre><code>code\n</code></pre>\n")
        source = "- step:\n  ```\n  one\n\n  two\n  ```\n- next\n"
        self.assertEqual(markdown(source), (
            "<ul>\n<li>step:\n<pre><code>one\n\ntwo\n</code></pre>\n</li>\n<li>next</li>\n</ul>\n"))

    def test_loose_and_tight(self):
        self.assertEqual(markdown("- a\n\n  b\n- c\n"),
                         "<ul>\n<li>\n<p>a</p>\n<p>b</p>\n</li>\n<li>\n<p>c</p>\n</li>\n</ul>\n")
        self.assertEqual(markdown("- a\n  - b\n\n  c\n"),
                         "<ul>\n<li>\n<p>a</p>\n<ul>\n<li>b</li>\n</ul>\n<p>c</p>\n</li>\n</ul>\n")

    def test_top_level_blocks_and_inlines(self):
        source = "# T\ntext with *em* and `a_b`\n```\nx\n```\n> q\n\n[l](u) & <b>\n"
        self.assertEqual(markdown(source), (
            "<h1>T</h1>\n<p>text with <em>em</em> and <code>a_b</code></p>\n<pre><code>x\n</code></pre>\n"
            '<blockquote>\n<p>q</p>\n</blockquote>\n<p><a href="u">l</a> &amp; &lt;b&gt;</p>\n'))

    def test_cli(self):
        with tempfile.TemporaryDirectory() as tmp:
            path = os.path.join(tmp, "doc.md")
            with open(path, "w") as fh:
                fh.write("## Hi there\n\n- x\n  - y\n")
            out = io.StringIO()
            with redirect_stdout(out):
                self.assertEqual(main([path, "--heading-ids"]), 0)
        self.assertEqual(out.getvalue(),
                         '<h2 id="hi-there">Hi there</h2>\n<ul>\n<li>x\n<ul>\n<li>y</li>\n</ul>\n</li>\n</ul>\n')


if __name__ == "__main__":
    unittest.main()
