"""Grouping of opcodes into hunks: runs of changes with up to `context` unchanged lines
around them. Changes separated by only a few unchanged lines share one hunk, so that no
unchanged line is printed twice.
"""

from dataclasses import dataclass, field

from .core import Opcode

DEFAULT_CONTEXT = 3


@dataclass
class Hunk:
    """A block of changes.

    old_start/new_start are 0-based indexes of the first line the hunk covers in each file;
    when a side is empty (old_len or new_len is 0) its start is the index at which lines are
    inserted, or were removed. `lines` holds (op, text) pairs with op ' ', '-' or '+'.
    """

    old_start: int
    old_len: int
    new_start: int
    new_len: int
    lines: list = field(default_factory=list)

    @property
    def added(self):
        return sum(1 for op, _ in self.lines if op == "+")

    @property
    def removed(self):
        return sum(1 for op, _ in self.lines if op == "-")

    def old_lines(self):
        return [text for op, text in self.lines if op != "+"]

    def new_lines(self):
        return [text for op, text in self.lines if op != "-"]


def group_hunks(opcodes, a, b, context=DEFAULT_CONTEXT):
    """Hunks for opcodes over old lines a and new lines b."""
    if context < 0:
        raise ValueError("context must not be negative")
    return [_build_hunk(group, a, b) for group in _group_opcodes(opcodes, context)]


def _group_opcodes(opcodes, context):
    ops = list(opcodes)
    if not any(op.tag != "equal" for op in ops):
        return []
    if ops[0].tag == "equal":
        ops[0] = _tail(ops[0], context)
    if ops[-1].tag == "equal":
        ops[-1] = _head(ops[-1], context)

    groups = []
    group = []
    for index, op in enumerate(ops):
        is_inner = 0 < index < len(ops) - 1
        if op.tag == "equal" and is_inner and op.old_size >= 2 * context:
            group.append(_head(op, context))
            groups.append(group)
            group = [_tail(op, context)]
            continue
        group.append(op)
    groups.append(group)
    return [[op for op in g if op.old_size or op.new_size] for g in groups]


def _head(op, size):
    """The first `size` lines of an equal opcode."""
    n = min(size, op.old_size)
    return Opcode("equal", op.i1, op.i1 + n, op.j1, op.j1 + n)


def _tail(op, size):
    """The last `size` lines of an equal opcode."""
    n = min(size, op.old_size)
    return Opcode("equal", op.i2 - n, op.i2, op.j2 - n, op.j2)


def _build_hunk(group, a, b):
    first, last = group[0], group[-1]
    hunk = Hunk(first.i1, last.i2 - first.i1, first.j1, last.j2 - first.j1)
    for op in group:
        if op.tag == "equal":
            hunk.lines.extend((" ", line) for line in a[op.i1:op.i2])
            continue
        hunk.lines.extend(("-", line) for line in a[op.i1:op.i2])
        hunk.lines.extend(("+", line) for line in b[op.j1:op.j2])
    return hunk
