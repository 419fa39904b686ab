import io
import os
import tempfile
import unittest
from contextlib import redirect_stderr, redirect_stdout

from buildorder import CycleError, TaskGraph, build_plan, find_cycle, parallel_batches, topological_order
from buildorder.cli import main

TASKFILE = """\
release: package
package: build docs
build: compile
compile: generate
generate:
docs:
"""


class OrderTest(unittest.TestCase):
    def test_order_is_smallest_name_first(self):
        graph = TaskGraph.from_mapping({"z": [], "b": ["z"], "a": [], "c": ["a"]})
        self.assertEqual(topological_order(graph), ["a", "c", "z", "b"])

    def test_batches(self):
        graph = TaskGraph.from_mapping({"app": ["lib", "assets"], "lib": ["codegen"], "docs": []})
        self.assertEqual(parallel_batches(graph), [["assets", "codegen", "docs"], ["lib"], ["app"]])

    def test_build_plan_targets(self):
        graph = TaskGraph.from_mapping({"app": ["lib"], "lib": [], "docs": []})
        self.assertEqual(build_plan(graph, ["lib"]), ["lib"])
        self.assertEqual(build_plan(graph), ["docs", "lib", "app"])


class CycleTest(unittest.TestCase):
    def test_two_task_cycle(self):
        graph = TaskGraph.from_mapping({"app": ["lib"], "lib": ["codegen"], "codegen": ["lib"]})
        with self.assertRaises(CycleError) as ctx:
            topological_order(graph)
        self.assertEqual(ctx.exception.cycle, ["lib", "codegen", "lib"])
        self.assertEqual(str(ctx.exception), "dependency cycle: lib -> codegen -> lib")

    def test_acyclic_has_no_cycle(self):
        graph = TaskGraph.from_mapping({"a": ["b", "c"], "b": ["d"], "c": ["d"], "d": []})
        self.assertIsNone(find_cycle(graph))


class CliTest(unittest.TestCase):
    def run_cli(self, *args):
        with tempfile.TemporaryDirectory() as tmp:
            path = os.path.join(tmp, "Taskfile")
            with open(path, "w") as fh:
                fh.write(TASKFILE)
            out, err = io.StringIO(), io.StringIO()
            with redirect_stdout(out), redirect_stderr(err):
                status = main([args[0], path, *args[1:]])
            return status, out.getvalue(), err.getvalue()

    def test_order(self):
        status, out, _ = self.run_cli("order")
        self.assertEqual(status, 0)
        self.assertEqual(out.split(), ["docs", "generate", "compile", "build", "package", "release"])

    def test_batches_and_check(self):
        status, out, _ = self.run_cli("batches")
        self.assertEqual(out.splitlines()[0], "1: docs generate")
        status, out, _ = self.run_cli("check")
        self.assertEqual((status, out.strip()), (0, "ok: 6 tasks, 5 dependencies"))


if __name__ == "__main__":
    unittest.main()
