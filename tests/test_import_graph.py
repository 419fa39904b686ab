"""The dependency rules of DESIGN.md, read from the code: `compare` may import `adapters` and `sandbox`, `reports`
may import `compare`, `adapters` and `sandbox` import neither each other nor `compare`, and only the composition
root (the CLI and the server) imports `reports`. And no two modules need each other at run time: every import,
at the top or inside a function, counts; imports only for type checkers do not. No module
imports another one's private (underscored) name."""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).parents[1]
PACKAGES = ("compare", "adapters", "sandbox", "reports")
MAY_IMPORT = {"compare": {"compare", "adapters", "sandbox"}, "reports": {"reports", "compare", "adapters", "sandbox"},
              "adapters": {"adapters"}, "sandbox": {"sandbox"}}
COMPOSITION_ROOT = {"compare.cli", "compare.serve"}  # may import reports (DESIGN: the CLI and the server)


def modules() -> dict[str, Path]:
    found = {}
    for package in PACKAGES:
        for path in (ROOT / package).rglob("*.py"):
            name = ".".join(path.relative_to(ROOT).with_suffix("").parts)
            found[name.removesuffix(".__init__")] = path
    return found


def _type_checking(node: ast.AST) -> bool:
    return isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test)


def runtime_imports(path: Path, known: dict[str, Path]) -> set[str]:
    """The project modules `path` imports when it runs. `from package import submodule` is an edge to the
    submodule; `from module import name` to the module (its package's __init__ is not counted: a package face
    that re-exports its submodules would otherwise tie every sibling import into a cycle)."""
    found: set[str] = set()

    def visit(node: ast.AST) -> None:
        if _type_checking(node):
            return
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names if alias.name in known)
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module in known:
            subs = {f"{node.module}.{alias.name}" for alias in node.names} & known.keys()
            found.update(subs or {node.module})
            if len(subs) < len(node.names):
                found.add(node.module)
        for child in ast.iter_child_nodes(node):
            visit(child)

    visit(ast.parse(path.read_text()))
    return found


def graph() -> dict[str, set[str]]:
    known = modules()
    return {name: runtime_imports(path, known) - {name} for name, path in known.items()}


def cycles(edges: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components of more than one module (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    found: list[list[str]] = []

    def connect(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        for other in sorted(edges.get(node, ())):
            if other not in index:
                connect(other)
                low[node] = min(low[node], low[other])
            elif other in stack:
                low[node] = min(low[node], index[other])
        if low[node] == index[node]:
            component = []
            while (top := stack.pop()) != node:
                component.append(top)
            if component:
                found.append(sorted([*component, node]))

    for node in sorted(edges):
        if node not in index:
            connect(node)
    return found


def wrong_directions(edges: dict[str, set[str]]) -> list[str]:
    def allowed(module: str, target: str) -> bool:
        package, wanted = module.split(".")[0], target.split(".")[0]
        return wanted in MAY_IMPORT[package] or (module in COMPOSITION_ROOT and wanted == "reports")
    return sorted(f"{module} -> {target}" for module, targets in edges.items() for target in targets
                  if not allowed(module, target))


def test_dependencies_point_the_way_design_says():
    assert wrong_directions(graph()) == []


def test_no_two_modules_need_each_other_at_run_time():
    assert cycles(graph()) == []


def private_imports(path: Path, module: str) -> list[str]:
    """`from other import _name` in `path`, anywhere in it: a name another module needs is its shared API (no
    underscore), or belongs in the one module that uses it."""
    return [f"{module}:{node.lineno}: from {node.module} import {alias.name}"
            for node in ast.walk(ast.parse(path.read_text())) if isinstance(node, ast.ImportFrom)
            and node.level == 0 and (node.module or "").split(".")[0] in PACKAGES and node.module != module
            for alias in node.names if alias.name.startswith("_")]


def test_no_module_imports_another_modules_private_name():
    assert [found for name, path in modules().items() for found in private_imports(path, name)] == []


def test_the_checker_finds_a_private_import_anywhere_but_not_a_public_or_foreign_one(tmp_path):
    source = tmp_path / "m.py"
    source.write_text("from compare.ledger.opening import _duckdb, default_db_path\nfrom os import _exit\n"
                      "def f():\n    from compare.arms.sglang import _hourly\nfrom compare.m import _own\n")
    assert private_imports(source, "compare.m") == ["compare.m:1: from compare.ledger.opening import _duckdb",
                                                    "compare.m:4: from compare.arms.sglang import _hourly"]


def test_the_checker_finds_a_cycle_and_a_wrong_direction():
    assert cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]
    edges = {"compare.x": {"reports.web", "sandbox.tasks"}, "compare.cli": {"reports.cli"},
             "sandbox.y": {"adapters.base"}, "reports.z": {"compare.summary"}}
    assert wrong_directions(edges) == ["compare.x -> reports.web", "sandbox.y -> adapters.base"]


def test_imports_for_type_checkers_only_and_submodules_are_read_as_such(tmp_path):
    source = tmp_path / "m.py"
    source.write_text("from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from compare import spec\n"
                      "from sandbox import tasks, Task\ndef f():\n    from adapters.base import Usage\n")
    known = {"compare.spec": source, "sandbox": source, "sandbox.tasks": source, "adapters.base": source}
    assert runtime_imports(source, known) == {"sandbox.tasks", "sandbox", "adapters.base"}
