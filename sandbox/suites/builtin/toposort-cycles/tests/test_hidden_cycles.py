import io
import os
import random
import tempfile
import unittest
from contextlib import redirect_stderr, redirect_stdout

from buildorder import CycleError, TaskGraph, find_cycle, parallel_batches, parse_taskfile, topological_order
from buildorder.cli import main

ISSUE_TASKFILE = """\
release: package
package: build docs
build: compile
compile: generate version
version: compile
generate:
docs:
"""


def assert_real_cycle(test, graph, cycle):
    test.assertIsNotNone(cycle)
    test.assertGreaterEqual(len(cycle), 2, cycle)
    test.assertEqual(cycle[0], cycle[-1], cycle)
    test.assertEqual(len(set(cycle[:-1])), len(cycle) - 1, f"task repeated inside cycle {cycle}")
    for task, dep in zip(cycle, cycle[1:]):
        test.assertIn(dep, graph.dependencies_of(task), f"{task} does not depend on {dep} in {cycle}")


def run_cli(*args, text):
    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, "Taskfile")
        with open(path, "w") as fh:
            fh.write(text)
        out, err = io.StringIO(), io.StringIO()
        with redirect_stdout(out), redirect_stderr(err):
            status = main([args[0], path, *args[1:]])
        return status, out.getvalue(), err.getvalue()


class TestFailToPassReportedCycleIsReal(unittest.TestCase):
    def test_issue_taskfile_order(self):
        graph = parse_taskfile(ISSUE_TASKFILE)
        with self.assertRaises(CycleError) as ctx:
            topological_order(graph)
        cycle = ctx.exception.cycle
        assert_real_cycle(self, graph, cycle)
        self.assertEqual(set(cycle), {"compile", "version"})
        self.assertEqual(str(ctx.exception), "dependency cycle: " + " -> ".join(cycle))

    def test_finished_sibling_branches_not_in_cycle(self):
        graph = TaskGraph.from_mapping({"a": ["b", "c", "d"], "b": ["x"], "c": [], "d": ["a"], "x": []})
        cycle = find_cycle(graph)
        assert_real_cycle(self, graph, cycle)
        self.assertEqual(set(cycle), {"a", "d"})

    def test_parallel_batches_reports_real_cycle(self):
        graph = TaskGraph.from_mapping(
            {"deploy": ["test"], "test": ["build", "fixtures"], "fixtures": ["db"], "db": [],
             "build": ["assets", "lint", "migrate"], "assets": [], "lint": [], "migrate": ["build"]}
        )
        with self.assertRaises(CycleError) as ctx:
            parallel_batches(graph)
        assert_real_cycle(self, graph, ctx.exception.cycle)
        self.assertEqual(set(ctx.exception.cycle), {"build", "migrate"})

    def test_cli_check_explains_real_edges(self):
        status, out, _ = run_cli("check", text=ISSUE_TASKFILE)
        self.assertEqual(status, 1)
        self.assertIn("version needs compile", out)
        self.assertIn("compile needs version", out)
        self.assertNotIn("generate needs", out)

    def test_random_graphs_always_report_real_cycles(self):
        rng = random.Random(20240531)
        for _ in range(200):
            names = [f"t{i:02d}" for i in range(rng.randint(3, 14))]
            mapping = {name: [] for name in names}
            for i, name in enumerate(names):
                for dep in names[i + 1:]:
                    if rng.random() < 0.3:
                        mapping[name].append(dep)
            back_from = rng.randrange(1, len(names))
            mapping[names[back_from]].append(names[rng.randrange(0, back_from)])
            graph = TaskGraph.from_mapping(mapping)
            cycle = find_cycle(graph)
            if cycle is None:
                continue
            assert_real_cycle(self, graph, cycle)
            with self.assertRaises(CycleError) as ctx:
                topological_order(graph)
            assert_real_cycle(self, graph, ctx.exception.cycle)


class TestPassToPassCycleBasics(unittest.TestCase):
    def test_self_loop(self):
        graph = TaskGraph.from_mapping({"app": ["app", "lib"], "lib": []})
        with self.assertRaises(CycleError) as ctx:
            topological_order(graph)
        self.assertEqual(ctx.exception.cycle, ["app", "app"])
        self.assertEqual(str(ctx.exception), "dependency cycle: app -> app")

    def test_simple_cycle_and_acyclic(self):
        graph = TaskGraph.from_mapping({"a": ["b"], "b": ["c"], "c": ["a"]})
        self.assertEqual(find_cycle(graph), ["a", "b", "c", "a"])
        diamond = TaskGraph.from_mapping({"a": ["b", "c"], "b": ["d"], "c": ["d"], "d": []})
        self.assertIsNone(find_cycle(diamond))
        self.assertEqual(topological_order(diamond), ["d", "b", "c", "a"])

    def test_deep_chain_cycle(self):
        names = [f"step{i:05d}" for i in range(4000)]
        mapping = {name: [nxt] for name, nxt in zip(names, names[1:])}
        mapping[names[-1]] = [names[0]]
        graph = TaskGraph.from_mapping(mapping)
        cycle = find_cycle(graph)
        self.assertEqual(len(cycle), 4001)
        assert_real_cycle(self, graph, cycle)

    def test_deterministic_order_and_batches(self):
        graph = TaskGraph.from_mapping({"z": [], "m": ["z"], "b": [], "a": ["m", "b"], "c": []})
        self.assertEqual(topological_order(graph), ["b", "c", "z", "m", "a"])
        self.assertEqual(parallel_batches(graph), [["b", "c", "z"], ["m"], ["a"]])

    def test_cli_order_ok(self):
        text = ISSUE_TASKFILE.replace("version: compile\n", "version:\n")
        status, out, _ = run_cli("order", text=text)
        self.assertEqual(status, 0)
        self.assertEqual(out.split(), ["docs", "generate", "version", "compile", "build", "package", "release"])


if __name__ == "__main__":
    unittest.main()
