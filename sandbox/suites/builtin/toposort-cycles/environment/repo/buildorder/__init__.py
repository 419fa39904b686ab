"""buildorder: work out the order in which dependent tasks must run.

Build a :class:`TaskGraph` (by hand or from a Taskfile with
:func:`parse_taskfile`), then ask for a :func:`topological_order` or for
:func:`parallel_batches`. A dependency cycle raises :class:`CycleError`,
which names the tasks on the cycle.
"""

from .cycles import CycleError, find_cycle
from .graph import TaskGraph, UnknownTaskError
from .loader import TaskfileError, load_taskfile, parse_taskfile
from .sort import build_plan, parallel_batches, topological_order

__all__ = [
    "CycleError",
    "TaskGraph",
    "TaskfileError",
    "UnknownTaskError",
    "build_plan",
    "find_cycle",
    "load_taskfile",
    "parallel_batches",
    "parse_taskfile",
    "topological_order",
]

__version__ = "1.3.0"
