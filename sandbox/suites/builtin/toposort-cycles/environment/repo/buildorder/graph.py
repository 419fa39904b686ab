"""The task graph: named tasks and the tasks each one depends on.

An edge ``task -> dep`` means *task needs dep to have run first*. Tasks are
plain strings; every query returns names in sorted order so that everything
built on top of the graph is deterministic.
"""

from typing import Dict, Iterable, Iterator, List, Mapping, Set, Tuple

_FORBIDDEN = set(":#,")


class UnknownTaskError(KeyError):
    """Raised when a task name is not in the graph."""

    def __init__(self, name: str) -> None:
        super().__init__(name)
        self.name = name

    def __str__(self) -> str:
        return f"unknown task {self.name!r}"


class TaskGraph:
    def __init__(self) -> None:
        self._deps: Dict[str, Set[str]] = {}
        self._rdeps: Dict[str, Set[str]] = {}

    @classmethod
    def from_mapping(cls, mapping: Mapping[str, Iterable[str]]) -> "TaskGraph":
        """Build a graph from ``{task: [dependency, ...]}``."""
        graph = cls()
        for task, deps in mapping.items():
            graph.add_task(task, deps)
        return graph

    def add_task(self, name: str, deps: Iterable[str] = ()) -> None:
        """Declare ``name`` (if new) and add ``deps`` to its dependencies."""
        _check_name(name)
        self._deps.setdefault(name, set())
        self._rdeps.setdefault(name, set())
        for dep in deps:
            self.add_dependency(name, dep)

    def add_dependency(self, task: str, dep: str) -> None:
        """Record that ``task`` depends on ``dep``; both are declared if new."""
        self.add_task(task)
        self.add_task(dep)
        self._deps[task].add(dep)
        self._rdeps[dep].add(task)

    def remove_task(self, name: str) -> None:
        self._require(name)
        for dep in self._deps.pop(name):
            self._rdeps[dep].discard(name)
        for user in self._rdeps.pop(name):
            self._deps[user].discard(name)

    @property
    def tasks(self) -> List[str]:
        return sorted(self._deps)

    def dependencies_of(self, name: str) -> List[str]:
        self._require(name)
        return sorted(self._deps[name])

    def dependents_of(self, name: str) -> List[str]:
        self._require(name)
        return sorted(self._rdeps[name])

    def edges(self) -> List[Tuple[str, str]]:
        return [(task, dep) for task in self.tasks for dep in self.dependencies_of(task)]

    def roots(self) -> List[str]:
        """Tasks nothing else depends on (the usual build targets)."""
        return [task for task in self.tasks if not self._rdeps[task]]

    def leaves(self) -> List[str]:
        """Tasks without dependencies (they can run first)."""
        return [task for task in self.tasks if not self._deps[task]]

    def subgraph(self, targets: Iterable[str]) -> "TaskGraph":
        """The graph restricted to ``targets`` and everything they depend on."""
        wanted: Set[str] = set()
        pending = list(targets)
        for name in pending:
            self._require(name)
        while pending:
            name = pending.pop()
            if name in wanted:
                continue
            wanted.add(name)
            pending.extend(self._deps[name])
        result = TaskGraph()
        for name in sorted(wanted):
            result.add_task(name, self._deps[name])
        return result

    def copy(self) -> "TaskGraph":
        return self.subgraph(self._deps)

    def __contains__(self, name: object) -> bool:
        return name in self._deps

    def __iter__(self) -> Iterator[str]:
        return iter(self.tasks)

    def __len__(self) -> int:
        return len(self._deps)

    def __eq__(self, other: object) -> bool:
        return isinstance(other, TaskGraph) and self._deps == other._deps

    def __repr__(self) -> str:
        return f"TaskGraph({len(self._deps)} tasks, {sum(map(len, self._deps.values()))} edges)"

    def _require(self, name: str) -> None:
        if name not in self._deps:
            raise UnknownTaskError(name)


def _check_name(name: str) -> None:
    if not isinstance(name, str) or not name:
        raise ValueError(f"task names must be non-empty strings, got {name!r}")
    if any(ch.isspace() or ch in _FORBIDDEN for ch in name):
        raise ValueError(f"task name {name!r} may not contain whitespace or any of ':#,'")
