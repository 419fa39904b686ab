"""Ordering tasks so that every task comes after its dependencies.

The order is deterministic: whenever several tasks could run next, the one
with the smallest name (plain string comparison) is taken first. This is
Kahn's algorithm with a min-heap as the ready queue.
"""

import heapq
from typing import Dict, Iterable, List, Optional

from .cycles import CycleError, find_cycle
from .graph import TaskGraph


def topological_order(graph: TaskGraph) -> List[str]:
    """All tasks, dependencies first; raises :class:`CycleError` on a cycle."""
    pending = _pending_counts(graph)
    ready = [task for task, count in pending.items() if count == 0]
    heapq.heapify(ready)
    order: List[str] = []
    while ready:
        task = heapq.heappop(ready)
        order.append(task)
        for user in graph.dependents_of(task):
            pending[user] -= 1
            if pending[user] == 0:
                heapq.heappush(ready, user)
    if len(order) != len(graph):
        _raise_cycle(graph, set(graph.tasks) - set(order))
    return order


def parallel_batches(graph: TaskGraph) -> List[List[str]]:
    """Group tasks into batches that can each run in parallel.

    Batch *n* holds the tasks whose dependencies are all in batches before
    *n*; every batch is sorted by name.
    """
    pending = _pending_counts(graph)
    batch = sorted(task for task, count in pending.items() if count == 0)
    batches: List[List[str]] = []
    done = 0
    while batch:
        batches.append(batch)
        done += len(batch)
        following = set()
        for task in batch:
            for user in graph.dependents_of(task):
                pending[user] -= 1
                if pending[user] == 0:
                    following.add(user)
        batch = sorted(following)
    if done != len(graph):
        finished = {task for b in batches for task in b}
        _raise_cycle(graph, set(graph.tasks) - finished)
    return batches


def build_plan(graph: TaskGraph, targets: Optional[Iterable[str]] = None) -> List[str]:
    """The order in which to run ``targets`` and everything they need.

    With no targets, the plan covers the whole graph.
    """
    if targets is not None:
        targets = list(targets)
        if targets:
            graph = graph.subgraph(targets)
    return topological_order(graph)


def _pending_counts(graph: TaskGraph) -> Dict[str, int]:
    return {task: len(graph.dependencies_of(task)) for task in graph.tasks}


def _raise_cycle(graph: TaskGraph, stuck: set) -> None:
    # Tasks left over after the sort are on a cycle or depend on one; search
    # only among them.
    cycle = find_cycle(graph.subgraph(stuck))
    if cycle is None:  # pragma: no cover - the sort only gets stuck on cycles
        raise RuntimeError("topological sort stalled without a cycle")
    raise CycleError(cycle)
