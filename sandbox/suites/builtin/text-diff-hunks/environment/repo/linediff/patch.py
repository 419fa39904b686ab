"""Reading unified diffs and applying them.

The applier is strict: each hunk must apply exactly at the position its header states, with
every context and removed line matching; nothing is fuzzed or searched for.
"""

import re
from dataclasses import dataclass, field

from .core import split_lines
from .hunks import Hunk

_HUNK_HEADER = re.compile(r"^@@ -(\d+)(?:,(\d+))? \+(\d+)(?:,(\d+))? @@")


class PatchError(ValueError):
    """The patch is malformed or does not apply to the given text."""


@dataclass
class FilePatch:
    old_name: str
    new_name: str
    hunks: list = field(default_factory=list)


def parse_patch(text):
    """All file patches in a unified diff (lines before the first `---` are ignored)."""
    lines = split_lines(text)
    patches = []
    index = 0
    while index < len(lines):
        line = lines[index]
        if line.startswith("--- ") and index + 1 < len(lines) and lines[index + 1].startswith("+++ "):
            patch = FilePatch(_file_name(line), _file_name(lines[index + 1]))
            index += 2
            while index < len(lines) and lines[index].startswith("@@"):
                hunk, index = _parse_hunk(lines, index)
                patch.hunks.append(hunk)
            patches.append(patch)
            continue
        index += 1
    return patches


def apply_hunks(text, hunks):
    """Apply hunks (in order) to text; returns the new text."""
    source = split_lines(text)
    result = []
    position = 0
    for number, hunk in enumerate(hunks, start=1):
        if hunk.old_start < position or hunk.old_start + hunk.old_len > len(source):
            raise PatchError(f"hunk #{number}: lines {hunk.old_start + 1}-"
                             f"{hunk.old_start + hunk.old_len} are out of range")
        result.extend(source[position:hunk.old_start])
        if hunk.new_start != len(result):
            raise PatchError(f"hunk #{number}: new side should start at line "
                             f"{len(result) + 1}, header says {hunk.new_start + 1}")
        expected = hunk.old_lines()
        actual = source[hunk.old_start:hunk.old_start + hunk.old_len]
        if actual != expected:
            raise PatchError(f"hunk #{number} does not apply at line {hunk.old_start + 1}")
        result.extend(hunk.new_lines())
        position = hunk.old_start + hunk.old_len
    result.extend(source[position:])
    return "".join(result)


def apply_patch(text, patch_text):
    """Apply a single-file unified diff to text (an empty diff leaves it unchanged)."""
    patches = parse_patch(patch_text)
    if not patches and not patch_text.strip():
        return text
    if len(patches) != 1:
        raise PatchError(f"expected a patch for one file, found {len(patches)}")
    return apply_hunks(text, patches[0].hunks)


def _parse_hunk(lines, index):
    header = lines[index].rstrip("\n")
    match = _HUNK_HEADER.match(header)
    if not match:
        raise PatchError(f"malformed hunk header: {header}")
    old_start, old_len = _parse_range(match.group(1), match.group(2))
    new_start, new_len = _parse_range(match.group(3), match.group(4))
    hunk = Hunk(old_start, old_len, new_start, new_len)
    index += 1
    old_seen = new_seen = 0
    while index < len(lines) and (old_seen < old_len or new_seen < new_len):
        line = lines[index]
        op, body = line[:1], line[1:]
        if line == "\n":
            op, body = " ", "\n"
        if op not in (" ", "-", "+"):
            break
        hunk.lines.append((op, body))
        old_seen += op != "+"
        new_seen += op != "-"
        index += 1
        if index < len(lines) and lines[index].startswith("\\"):
            hunk.lines[-1] = (op, body[:-1] if body.endswith("\n") else body)
            index += 1
    if (old_seen, new_seen) != (old_len, new_len):
        raise PatchError(f"{header}: expected {old_len} old / {new_len} new lines, "
                         f"found {old_seen} / {new_seen}")
    return hunk, index


def _parse_range(start, length):
    """Header numbers to (0-based start, count)."""
    count = 1 if length is None else int(length)
    return int(start) - 1, count


def _file_name(line):
    return line[4:].rstrip("\n").split("\t", 1)[0]
