import io
import os
import random
import tempfile
import unittest

from linediff import PatchError, apply_patch, unified_diff
from linediff.cli import main


def numbered(n):
    return "".join(f"line {i}\n" for i in range(1, n + 1))


class UnifiedDiffTest(unittest.TestCase):
    def test_readme_example(self):
        patch = unified_diff("alpha\nbeta\ngamma\n", "alpha\nBETA\ngamma\n", "a/greek.txt", "b/greek.txt")
        self.assertEqual(patch, "--- a/greek.txt\n+++ b/greek.txt\n@@ -1,3 +1,3 @@\n alpha\n-beta\n+BETA\n gamma\n")

    def test_identical_is_empty(self):
        self.assertEqual(unified_diff("x\n", "x\n"), "")

    def test_context_is_trimmed(self):
        old = numbered(10)
        new = old.replace("line 5\n", "line five\n")
        self.assertEqual(unified_diff(old, new, context=1),
                         "--- a\n+++ b\n@@ -4,3 +4,3 @@\n line 4\n-line 5\n+line five\n line 6\n")

    def test_distant_changes_get_separate_hunks(self):
        old = numbered(30)
        new = old.replace("line 3\n", "line three\n").replace("line 25\n", "line 25b\n")
        patch = unified_diff(old, new)
        self.assertEqual([l for l in patch.splitlines() if l.startswith("@@")],
                         ["@@ -1,6 +1,6 @@", "@@ -22,7 +22,7 @@"])

    def test_missing_final_newline(self):
        patch = unified_diff("a\nb", "a\nc", context=1)
        self.assertEqual(patch, "--- a\n+++ b\n@@ -1,2 +1,2 @@\n a\n-b\n\\ No newline at end of file\n"
                                "+c\n\\ No newline at end of file\n")
        self.assertEqual(apply_patch("a\nb", patch), "a\nc")


class ApplyTest(unittest.TestCase):
    def test_round_trip(self):
        rnd = random.Random(42)
        for _ in range(200):
            old = [f"{rnd.choice('abcde')}\n" for _ in range(rnd.randint(0, 15))]
            new = [f"{rnd.choice('abcde')}\n" for _ in range(rnd.randint(0, 15))]
            for context in (0, 1, 3):
                patch = unified_diff("".join(old), "".join(new), context=context)
                self.assertEqual(apply_patch("".join(old), patch), "".join(new))

    def test_rejects_mismatch(self):
        patch = unified_diff("a\nb\nc\n", "a\nB\nc\n")
        with self.assertRaises(PatchError):
            apply_patch("a\nx\nc\n", patch)


class CliTest(unittest.TestCase):
    def test_diff_and_apply(self):
        with tempfile.TemporaryDirectory() as tmp:
            old, new, patch = (os.path.join(tmp, n) for n in ("old.txt", "new.txt", "fix.patch"))
            with open(old, "w") as f:
                f.write("one\ntwo\nthree\n")
            with open(new, "w") as f:
                f.write("one\n2\nthree\n")
            out = io.StringIO()
            self.assertEqual(main(["diff", old, new, "--label-old", "a/x", "--label-new", "b/x"], out), 1)
            with open(patch, "w") as f:
                f.write(out.getvalue())
            self.assertEqual(main(["apply", patch, old], io.StringIO()), 0)
            with open(old) as f:
                self.assertEqual(f.read(), "one\n2\nthree\n")
            self.assertEqual(main(["diff", old, new], io.StringIO()), 0)


if __name__ == "__main__":
    unittest.main()
