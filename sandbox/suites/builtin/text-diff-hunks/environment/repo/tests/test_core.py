import unittest

from linediff import diff_opcodes, split_lines


class SplitLinesTest(unittest.TestCase):
    def test_keeps_newlines(self):
        self.assertEqual(split_lines("a\nb\n"), ["a\n", "b\n"])
        self.assertEqual(split_lines("a\nb"), ["a\n", "b"])
        self.assertEqual(split_lines(""), [])
        self.assertEqual(split_lines("\n\n"), ["\n", "\n"])


class OpcodesTest(unittest.TestCase):
    def tags(self, a, b):
        return [(op.tag, op.i1, op.i2, op.j1, op.j2) for op in diff_opcodes(list(a), list(b))]

    def test_identical(self):
        self.assertEqual(self.tags("abc", "abc"), [("equal", 0, 3, 0, 3)])

    def test_replace_in_middle(self):
        self.assertEqual(self.tags("abcde", "abXde"),
                         [("equal", 0, 2, 0, 2), ("replace", 2, 3, 2, 3), ("equal", 3, 5, 3, 5)])

    def test_insert_and_delete(self):
        self.assertEqual(self.tags("ace", "abcde"),
                         [("equal", 0, 1, 0, 1), ("insert", 1, 1, 1, 2), ("equal", 1, 2, 2, 3),
                          ("insert", 2, 2, 3, 4), ("equal", 2, 3, 4, 5)])
        self.assertEqual(self.tags("abc", ""), [("delete", 0, 3, 0, 0)])

    def test_shortest_script(self):
        a, b = "abcabba", "cbabac"
        ops = diff_opcodes(list(a), list(b))
        self.assertEqual(sum(op.old_size for op in ops if op.tag == "equal"), 4)
        rebuilt = "".join(b[op.j1:op.j2] if op.tag != "equal" else a[op.i1:op.i2] for op in ops)
        self.assertEqual(rebuilt, b)


if __name__ == "__main__":
    unittest.main()
