"""The diff engine: Myers' O(ND) shortest edit script over two sequences of lines.

The result is a list of Opcodes covering both sequences from start to end, each one of
'equal', 'delete', 'insert' or 'replace' with half-open index ranges [i1, i2) into the old
sequence and [j1, j2) into the new one.
"""

from dataclasses import dataclass


@dataclass(frozen=True)
class Opcode:
    tag: str
    i1: int
    i2: int
    j1: int
    j2: int

    @property
    def old_size(self):
        return self.i2 - self.i1

    @property
    def new_size(self):
        return self.j2 - self.j1


def split_lines(text):
    """Split text into lines that keep their '\\n'; a missing final newline is preserved."""
    if not text:
        return []
    pieces = text.split("\n")
    lines = [piece + "\n" for piece in pieces[:-1]]
    if pieces[-1]:
        lines.append(pieces[-1])
    return lines


def diff_opcodes(a, b):
    """Opcodes turning sequence a into sequence b."""
    prefix = _common_prefix(a, b)
    suffix = _common_suffix(a, b, prefix)
    middle = _myers(a[prefix:len(a) - suffix], b[prefix:len(b) - suffix])

    steps = [("=", 1, 1)] * prefix
    steps += middle
    steps += [("=", 1, 1)] * suffix
    return _steps_to_opcodes(steps)


def _common_prefix(a, b):
    n = 0
    limit = min(len(a), len(b))
    while n < limit and a[n] == b[n]:
        n += 1
    return n


def _common_suffix(a, b, prefix):
    n = 0
    limit = min(len(a), len(b)) - prefix
    while n < limit and a[len(a) - 1 - n] == b[len(b) - 1 - n]:
        n += 1
    return n


def _myers(a, b):
    """Edit steps ('=', '-', '+') for a shortest edit script from a to b."""
    n, m = len(a), len(b)
    if n == 0 or m == 0:
        return [("-", 1, 0)] * n + [("+", 0, 1)] * m
    offset = n + m
    frontier = [0] * (2 * offset + 2)
    trace = []
    for d in range(offset + 1):
        trace.append(list(frontier))
        for k in range(-d, d + 1, 2):
            if k == -d or (k != d and frontier[offset + k - 1] < frontier[offset + k + 1]):
                x = frontier[offset + k + 1]
            else:
                x = frontier[offset + k - 1] + 1
            y = x - k
            while x < n and y < m and a[x] == b[y]:
                x += 1
                y += 1
            frontier[offset + k] = x
            if x >= n and y >= m:
                return _backtrack(trace, n, m, offset)
    raise AssertionError("unreachable: an edit script always exists")


def _backtrack(trace, n, m, offset):
    steps = []
    x, y = n, m
    for d in range(len(trace) - 1, -1, -1):
        frontier = trace[d]
        k = x - y
        if k == -d or (k != d and frontier[offset + k - 1] < frontier[offset + k + 1]):
            prev_k = k + 1
        else:
            prev_k = k - 1
        prev_x = frontier[offset + prev_k]
        prev_y = prev_x - prev_k
        while x > prev_x and y > prev_y:
            steps.append(("=", 1, 1))
            x -= 1
            y -= 1
        if d > 0:
            steps.append(("+", 0, 1) if x == prev_x else ("-", 1, 0))
        x, y = prev_x, prev_y
    steps.reverse()
    return steps


def _steps_to_opcodes(steps):
    opcodes = []
    i = j = 0
    index = 0
    while index < len(steps):
        if steps[index][0] == "=":
            start_i, start_j = i, j
            while index < len(steps) and steps[index][0] == "=":
                i, j, index = i + 1, j + 1, index + 1
            opcodes.append(Opcode("equal", start_i, i, start_j, j))
            continue
        start_i, start_j = i, j
        while index < len(steps) and steps[index][0] != "=":
            _, di, dj = steps[index]
            i, j, index = i + di, j + dj, index + 1
        if i == start_i:
            tag = "insert"
        elif j == start_j:
            tag = "delete"
        else:
            tag = "replace"
        opcodes.append(Opcode(tag, start_i, i, start_j, j))
    return opcodes
