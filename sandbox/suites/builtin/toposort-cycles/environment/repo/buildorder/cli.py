"""Command line interface: ``python -m buildorder COMMAND TASKFILE``.

Commands:

* ``order``   print the tasks one per line, dependencies first
  (``--target NAME`` limits the plan to NAME and what it needs; repeatable)
* ``batches`` print groups of tasks that can run in parallel
* ``check``   validate the Taskfile and report cycles and undeclared tasks

Exit status: 0 on success, 1 if the graph has a cycle (or, for ``check
--strict``, an undeclared task), 2 on usage or Taskfile errors.
"""

import argparse
import sys
from typing import List, Optional

from .cycles import CycleError, describe_cycle, find_cycle
from .graph import UnknownTaskError
from .loader import TaskfileError, load_taskfile, undeclared
from .sort import build_plan, parallel_batches


def main(argv: Optional[List[str]] = None) -> int:
    args = _parser().parse_args(argv)
    try:
        graph = load_taskfile(args.taskfile)
    except (OSError, TaskfileError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    try:
        if args.command == "order":
            for task in build_plan(graph, args.target):
                print(task)
        elif args.command == "batches":
            for number, batch in enumerate(parallel_batches(graph), start=1):
                print(f"{number}: {' '.join(batch)}")
        else:
            return _check(graph, args.strict)
    except CycleError as exc:
        print(f"error: {exc}", file=sys.stderr)
        print(describe_cycle(exc.cycle), file=sys.stderr)
        return 1
    except UnknownTaskError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    return 0


def _check(graph, strict: bool) -> int:
    status = 0
    for name in undeclared(graph):
        print(f"warning: task {name!r} is used as a dependency but never declared")
        if strict:
            status = 1
    cycle = find_cycle(graph)
    if cycle is not None:
        print(f"error: {CycleError(cycle)}")
        print(describe_cycle(cycle))
        return 1
    if status == 0:
        print(f"ok: {len(graph)} tasks, {len(graph.edges())} dependencies")
    return status


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="buildorder", description="Order dependent tasks.")
    sub = parser.add_subparsers(dest="command", required=True)
    order = sub.add_parser("order", help="print a run order")
    order.add_argument("taskfile")
    order.add_argument("--target", action="append", metavar="NAME", help="only what NAME needs")
    batches = sub.add_parser("batches", help="print parallel batches")
    batches.add_argument("taskfile")
    check = sub.add_parser("check", help="validate a Taskfile")
    check.add_argument("taskfile")
    check.add_argument("--strict", action="store_true", help="treat undeclared tasks as errors")
    return parser
