import io
import json
import os
import random
import tempfile
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
# Read before the code under test is imported: it runs as the same user and could rewrite the file later.
with open(os.path.join(HERE, "gnu_corpus.json")) as f:
    GNU_CORPUS = json.load(f)

from linediff import PatchError, apply_patch, unified_diff  # noqa: E402
from linediff.cli import main  # noqa: E402


def lines(*items):
    return "".join(f"{item}\n" for item in items)


def numbered(n, prefix="L"):
    return lines(*(f"{prefix}{i}" for i in range(1, n + 1)))


FIVE = lines("one", "two", "three", "four", "five")
FIVE_PLUS = lines("one", "two", "three", "three and a half", "four", "five")


# FAIL-TO-PASS: empty ranges in hunk headers name the line before the change (GNU format).
class TestFailToPassEmptyRangeHeaders(unittest.TestCase):
    def test_insertion_without_context(self):
        self.assertEqual(unified_diff(FIVE, FIVE_PLUS, "a/old.txt", "b/new.txt", context=0),
                         "--- a/old.txt\n+++ b/new.txt\n@@ -3,0 +4 @@\n+three and a half\n")

    def test_deletion_without_context(self):
        self.assertEqual(unified_diff(FIVE_PLUS, FIVE, context=0),
                         "--- a\n+++ b\n@@ -4 +3,0 @@\n-three and a half\n")
        old = lines("a", "b", "c", "d", "e", "f", "g", "h")
        new = lines("a", "d", "e", "X", "f", "g", "h", "Y", "Z")
        self.assertEqual(unified_diff(old, new, "a/p", "b/p", context=0),
                         "--- a/p\n+++ b/p\n@@ -2,2 +1,0 @@\n-b\n-c\n@@ -5,0 +4 @@\n+X\n"
                         "@@ -8,0 +8,2 @@\n+Y\n+Z\n")

    def test_insertion_at_top_without_context(self):
        self.assertEqual(unified_diff("keep\n", "top\nkeep\n", context=0),
                         "--- a\n+++ b\n@@ -0,0 +1 @@\n+top\n")

    def test_created_and_deleted_files(self):
        self.assertEqual(unified_diff("", lines("x", "y", "z"), "/dev/null", "b/new.txt"),
                         "--- /dev/null\n+++ b/new.txt\n@@ -0,0 +1,3 @@\n+x\n+y\n+z\n")
        self.assertEqual(unified_diff("top\nkeep\n", "", "a/k", "/dev/null"),
                         "--- a/k\n+++ /dev/null\n@@ -1,2 +0,0 @@\n-top\n-keep\n")
        self.assertEqual(unified_diff("", "only", context=0),
                         "--- a\n+++ b\n@@ -0,0 +1 @@\n+only\n\\ No newline at end of file\n")


# FAIL-TO-PASS: changes separated by exactly 2*context unchanged lines share one hunk.
class TestFailToPassHunkMerging(unittest.TestCase):
    def test_gap_of_twice_context_merges(self):
        old = numbered(12)
        new = old.replace("L3\n", "L3x\n").replace("L6\n", "changed\n")
        self.assertEqual(unified_diff(old, new, context=1),
                         "--- a\n+++ b\n@@ -2,6 +2,6 @@\n L2\n-L3\n+L3x\n L4\n L5\n-L6\n+changed\n L7\n")
        new = old.replace("L3\n", "L3x\n").replace("L8\n", "changed\n")
        self.assertEqual(unified_diff(old, new, context=2),
                         "--- a\n+++ b\n@@ -1,10 +1,10 @@\n L1\n L2\n-L3\n+L3x\n L4\n L5\n L6\n L7\n"
                         "-L8\n+changed\n L9\n L10\n")

    def test_gap_of_six_with_default_context(self):
        old = numbered(14, "line ")
        new = old.replace("line 4\n", "line four\n").replace("line 11\n", "line eleven\n")
        patch = unified_diff(old, new)
        self.assertEqual([l for l in patch.splitlines() if l.startswith("@@")], ["@@ -1,14 +1,14 @@"])
        self.assertEqual(patch.count(" line 7\n"), 1)
        self.assertEqual(apply_patch(old, patch), new)

    def test_merge_with_insertions(self):
        old = numbered(10)
        new = old.replace("L2\n", "L2\nnew A\n").replace("L4\n", "L4\nnew B\n")
        self.assertEqual(unified_diff(old, new, context=1),
                         "--- a\n+++ b\n@@ -2,4 +2,6 @@\n L2\n+new A\n L3\n L4\n+new B\n L5\n")


# FAIL-TO-PASS: patches in the standard format (e.g. from GNU diff) apply correctly.
class TestFailToPassApplyStandardPatches(unittest.TestCase):
    def test_apply_gnu_zero_context_patch(self):
        patch = "--- a/old.txt\n+++ b/new.txt\n@@ -3,0 +4 @@\n+three and a half\n"
        self.assertEqual(apply_patch(FIVE, patch), FIVE_PLUS)
        patch = ("--- a/p\n+++ b/p\n@@ -2,2 +1,0 @@\n-b\n-c\n@@ -5,0 +4 @@\n+X\n"
                 "@@ -8,0 +8,2 @@\n+Y\n+Z\n")
        self.assertEqual(apply_patch(lines("a", "b", "c", "d", "e", "f", "g", "h"), patch),
                         lines("a", "d", "e", "X", "f", "g", "h", "Y", "Z"))

    def test_apply_at_top_and_new_file(self):
        self.assertEqual(apply_patch("keep\n", "--- k\n+++ k2\n@@ -0,0 +1 @@\n+top\n"), "top\nkeep\n")
        patch = "--- /dev/null\n+++ b/new.txt\n@@ -0,0 +1,3 @@\n+x\n+y\n+z\n"
        self.assertEqual(apply_patch("", patch), "x\ny\nz\n")

    def test_apply_file_deletion(self):
        patch = "--- a/k\n+++ /dev/null\n@@ -1,2 +0,0 @@\n-top\n-keep\n"
        self.assertEqual(apply_patch("top\nkeep\n", patch), "")

    def test_cli_applies_gnu_patch(self):
        with tempfile.TemporaryDirectory() as tmp:
            target, patch, out = (os.path.join(tmp, n) for n in ("old.txt", "fix.patch", "out.txt"))
            with open(target, "w") as f:
                f.write(FIVE)
            with open(patch, "w") as f:
                f.write("--- old.txt\t2024-05-01 10:00:00\n+++ new.txt\t2024-05-01 10:01:00\n"
                        "@@ -3,0 +4 @@\n+three and a half\n")
            self.assertEqual(main(["apply", patch, target, "-o", out], io.StringIO()), 0)
            with open(out) as f:
                self.assertEqual(f.read(), FIVE_PLUS)


# FAIL-TO-PASS: byte-identical to GNU `diff -U<n>` on a corpus of edits.
class TestFailToPassGnuCorpus(unittest.TestCase):
    def test_corpus(self):
        for number, case in enumerate(GNU_CORPUS):
            with self.subTest(case=number):
                self.assertEqual(unified_diff(case["old"], case["new"], "a/f.txt", "b/f.txt",
                                              context=case["context"]), case["expected"])
                self.assertEqual(apply_patch(case["old"], case["expected"]), case["new"])


# PASS-TO-PASS: behaviour that already matched.
class TestPassToPassUnified(unittest.TestCase):
    def test_simple_change(self):
        self.assertEqual(unified_diff("alpha\nbeta\ngamma\n", "alpha\nBETA\ngamma\n", "a/g", "b/g"),
                         "--- a/g\n+++ b/g\n@@ -1,3 +1,3 @@\n alpha\n-beta\n+BETA\n gamma\n")

    def test_gap_larger_than_twice_context_splits(self):
        old = numbered(12)
        new = old.replace("L3\n", "L3x\n").replace("L7\n", "changed\n")
        self.assertEqual(unified_diff(old, new, context=1),
                         "--- a\n+++ b\n@@ -2,3 +2,3 @@\n L2\n-L3\n+L3x\n L4\n"
                         "@@ -6,3 +6,3 @@\n L6\n-L7\n+changed\n L8\n")
        new = old.replace("L3\n", "L3x\n").replace("L5\n", "changed\n")
        self.assertEqual(unified_diff(old, new, context=0),
                         "--- a\n+++ b\n@@ -3 +3 @@\n-L3\n+L3x\n@@ -5 +5 @@\n-L5\n+changed\n")

    def test_dates_identical_and_no_newline(self):
        self.assertEqual(unified_diff("x\n", "x\n"), "")
        self.assertEqual(unified_diff("a\nb", "a\nc", "o", "n", context=1, fromdate="D1", todate="D2"),
                         "--- o\tD1\n+++ n\tD2\n@@ -1,2 +1,2 @@\n a\n-b\n\\ No newline at end of file\n"
                         "+c\n\\ No newline at end of file\n")

    def test_round_trip(self):
        rnd = random.Random(7)
        for _ in range(300):
            old = "".join(f"{rnd.choice('abcdef')}\n" for _ in range(rnd.randint(0, 25)))
            new = "".join(f"{rnd.choice('abcdef')}\n" for _ in range(rnd.randint(0, 25)))
            if rnd.random() < 0.2:
                new = new.rstrip("\n")
            for context in (0, 1, 2, 3, 5):
                patch = unified_diff(old, new, context=context)
                self.assertEqual(apply_patch(old, patch), new, (old, new, context, patch))

    def test_apply_rejects_bad_patches(self):
        patch = "--- a\n+++ b\n@@ -1,3 +1,3 @@\n a\n-b\n+B\n c\n"
        self.assertEqual(apply_patch("a\nb\nc\n", patch), "a\nB\nc\n")
        with self.assertRaises(PatchError):
            apply_patch("a\nx\nc\n", patch)
        with self.assertRaises(PatchError):
            apply_patch("z\na\nb\nc\n", patch)
        with self.assertRaises(PatchError):
            apply_patch("a\nb\nc\n", "--- a\n+++ b\n@@ -1,3 +1,3 @@\n a\n-b\n")

    def test_cli_exit_status(self):
        with tempfile.TemporaryDirectory() as tmp:
            a, b = os.path.join(tmp, "a"), os.path.join(tmp, "b")
            with open(a, "w") as f:
                f.write("1\n2\n")
            with open(b, "w") as f:
                f.write("1\n3\n")
            out = io.StringIO()
            self.assertEqual(main(["diff", a, b, "-U", "0", "--label-old", "x", "--label-new", "y"], out), 1)
            self.assertEqual(out.getvalue(), "--- x\n+++ y\n@@ -2 +2 @@\n-2\n+3\n")
            self.assertEqual(main(["diff", a, a], io.StringIO()), 0)


if __name__ == "__main__":
    unittest.main()
