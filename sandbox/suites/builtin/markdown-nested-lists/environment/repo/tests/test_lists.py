import unittest

from minimark import markdown


class ListTest(unittest.TestCase):
    def test_tight_bullet_list(self):
        self.assertEqual(markdown("- a\n- b\n"), "<ul>\n<li>a</li>\n<li>b</li>\n</ul>\n")

    def test_ordered_list_start(self):
        self.assertEqual(markdown("3) c\n4) d"), '<ol start="3">\n<li>c</li>\n<li>d</li>\n</ol>\n')

    def test_nested_lists(self):
        source = "- a\n  - b\n    - c\n- d\n"
        expected = ("<ul>\n<li>a\n<ul>\n<li>b\n<ul>\n<li>c</li>\n</ul>\n</li>\n</ul>\n</li>\n"
                    "<li>d</li>\n</ul>\n")
        self.assertEqual(markdown(source), expected)

    def test_bullets_under_ordered_items(self):
        self.assertEqual(markdown("1. a\n   - x\n2. b\n"),
                         "<ol>\n<li>a\n<ul>\n<li>x</li>\n</ul>\n</li>\n<li>b</li>\n</ol>\n")

    def test_loose_list(self):
        self.assertEqual(markdown("- a\n\n- b\n"),
                         "<ul>\n<li>\n<p>a</p>\n</li>\n<li>\n<p>b</p>\n</li>\n</ul>\n")

    def test_code_block_inside_item(self):
        source = "1. Install:\n\n   ```sh\n   pip install minimark\n   ```\n\n2. Use it\n"
        expected = ('<ol>\n<li>\n<p>Install:</p>\n<pre><code class="language-sh">pip install minimark\n'
                    "</code></pre>\n</li>\n<li>\n<p>Use it</p>\n</li>\n</ol>\n")
        self.assertEqual(markdown(source), expected)

    def test_lazy_continuation(self):
        self.assertEqual(markdown("- a long sentence\nthat goes on\n"),
                         "<ul>\n<li>a long sentence\nthat goes on</li>\n</ul>\n")

    def test_new_bullet_character_starts_new_list(self):
        self.assertEqual(markdown("- a\n* b\n"), "<ul>\n<li>a</li>\n</ul>\n<ul>\n<li>b</li>\n</ul>\n")


if __name__ == "__main__":
    unittest.main()
