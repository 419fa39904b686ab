"""linediff: line-based diffs (Myers), unified-diff output and a strict patch applier."""

from .core import Opcode, diff_opcodes, split_lines
from .hunks import Hunk, group_hunks
from .patch import FilePatch, PatchError, apply_hunks, apply_patch, parse_patch
from .unified import unified_diff

__all__ = [
    "FilePatch",
    "Hunk",
    "Opcode",
    "PatchError",
    "apply_hunks",
    "apply_patch",
    "diff_opcodes",
    "group_hunks",
    "parse_patch",
    "split_lines",
    "unified_diff",
]

__version__ = "0.6.0"
