import unittest

from buildorder import TaskGraph, TaskfileError, UnknownTaskError, parse_taskfile
from buildorder.loader import undeclared


class TaskGraphTest(unittest.TestCase):
    def test_build_and_query(self):
        graph = TaskGraph.from_mapping({"app": ["lib", "assets"], "lib": ["codegen"]})
        self.assertEqual(graph.tasks, ["app", "assets", "codegen", "lib"])
        self.assertEqual(graph.dependencies_of("app"), ["assets", "lib"])
        self.assertEqual(graph.dependents_of("codegen"), ["lib"])
        self.assertEqual(graph.roots(), ["app"])
        self.assertEqual(graph.leaves(), ["assets", "codegen"])
        with self.assertRaises(UnknownTaskError):
            graph.dependencies_of("nope")

    def test_subgraph_and_remove(self):
        graph = TaskGraph.from_mapping({"app": ["lib"], "lib": ["codegen"], "docs": []})
        self.assertEqual(graph.subgraph(["lib"]).tasks, ["codegen", "lib"])
        graph.remove_task("lib")
        self.assertEqual(graph.dependencies_of("app"), [])
        self.assertEqual(graph.dependents_of("codegen"), [])

    def test_rejects_bad_names(self):
        graph = TaskGraph()
        for bad in ["", "two words", "a:b", 3]:
            with self.assertRaises(ValueError):
                graph.add_task(bad)


class TaskfileTest(unittest.TestCase):
    def test_parse(self):
        graph = parse_taskfile("# demo\nbuild: compile, lint\ncompile: gen  # codegen first\n\nbuild: docs\n")
        self.assertEqual(graph.dependencies_of("build"), ["compile", "docs", "lint"])
        self.assertEqual(undeclared(graph), ["docs", "gen", "lint"])

    def test_syntax_error_has_line_number(self):
        with self.assertRaises(TaskfileError) as ctx:
            parse_taskfile("a: b\nnot a task line\n", source="Taskfile")
        self.assertEqual(ctx.exception.lineno, 2)
        self.assertIn("Taskfile:2", str(ctx.exception))


if __name__ == "__main__":
    unittest.main()
