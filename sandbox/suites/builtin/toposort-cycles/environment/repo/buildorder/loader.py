"""Reading Taskfiles.

A Taskfile has one task per line, ``name: dependency dependency ...``.
``#`` starts a comment, blank lines are ignored, and a task may be listed
on several lines (its dependencies are merged). A name used only as a
dependency is still a task; :func:`undeclared` lists such names so that
``buildorder check`` can point out likely typos.
"""

from pathlib import Path
from typing import List, Union

from .graph import TaskGraph


class TaskfileError(ValueError):
    """A syntax error in a Taskfile, with its location."""

    def __init__(self, message: str, source: str, lineno: int) -> None:
        super().__init__(f"{source}:{lineno}: {message}")
        self.source = source
        self.lineno = lineno


def parse_taskfile(text: str, source: str = "<string>") -> TaskGraph:
    graph = TaskGraph()
    declared = []
    for lineno, raw in enumerate(text.splitlines(), start=1):
        line = raw.split("#", 1)[0].strip()
        if not line:
            continue
        name, sep, rest = line.partition(":")
        name = name.strip()
        if not sep:
            raise TaskfileError(f"expected 'task: dependencies', got {line!r}", source, lineno)
        if not name:
            raise TaskfileError("missing task name before ':'", source, lineno)
        deps = rest.replace(",", " ").split()
        try:
            graph.add_task(name, deps)
        except ValueError as exc:
            raise TaskfileError(str(exc), source, lineno) from None
        declared.append(name)
    graph.declared = sorted(set(declared))
    return graph


def load_taskfile(path: Union[str, Path]) -> TaskGraph:
    path = Path(path)
    return parse_taskfile(path.read_text(encoding="utf-8"), source=str(path))


def undeclared(graph: TaskGraph) -> List[str]:
    """Tasks that appear only as dependencies in the Taskfile."""
    declared = set(getattr(graph, "declared", graph.tasks))
    return [task for task in graph.tasks if task not in declared]
