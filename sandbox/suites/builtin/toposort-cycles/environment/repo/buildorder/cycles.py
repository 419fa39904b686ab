"""Finding and reporting dependency cycles.

A cycle is reported as a list of task names that starts and ends with the
same task, where each task depends on the next one: ``["a", "b", "a"]``
means *a needs b and b needs a*. A task that depends on itself is reported
as ``["a", "a"]``.
"""

from typing import Iterator, List, Optional, Tuple

from .graph import TaskGraph

_VISITING = 1
_DONE = 2


class CycleError(ValueError):
    """The graph has a dependency cycle; ``cycle`` lists the tasks on it."""

    def __init__(self, cycle: List[str]) -> None:
        self.cycle = list(cycle)
        super().__init__("dependency cycle: " + " -> ".join(self.cycle))


def find_cycle(graph: TaskGraph) -> Optional[List[str]]:
    """Return one dependency cycle of ``graph``, or None if it has none.

    Tasks are explored depth first, starting points and dependencies both in
    name order, so the same graph always yields the same cycle. The walk is
    iterative, which keeps very deep chains clear of the recursion limit.
    """
    state = {}
    for root in graph.tasks:
        if root in state:
            continue
        path: List[str] = [root]
        state[root] = _VISITING
        stack: List[Tuple[str, Iterator[str]]] = [(root, iter(graph.dependencies_of(root)))]
        while stack:
            node, deps = stack[-1]
            for dep in deps:
                seen = state.get(dep)
                if seen == _VISITING:
                    return path[path.index(dep):] + [dep]
                if seen is None:
                    state[dep] = _VISITING
                    path.append(dep)
                    stack.append((dep, iter(graph.dependencies_of(dep))))
                    break
            else:
                state[node] = _DONE
                stack.pop()
    return None


def check_acyclic(graph: TaskGraph) -> None:
    """Raise :class:`CycleError` if ``graph`` has a cycle."""
    cycle = find_cycle(graph)
    if cycle is not None:
        raise CycleError(cycle)


def describe_cycle(cycle: List[str]) -> str:
    """A human-readable explanation, one 'x needs y' line per edge."""
    lines = [f"  {task} needs {dep}" for task, dep in zip(cycle, cycle[1:])]
    return "\n".join(lines)
