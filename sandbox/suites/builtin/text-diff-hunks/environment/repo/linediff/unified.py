"""Rendering hunks in the unified diff format (as produced by `diff -u` and `git diff`)."""

from .core import diff_opcodes, split_lines
from .hunks import DEFAULT_CONTEXT, group_hunks

NO_NEWLINE = "\\ No newline at end of file\n"


def unified_diff(old, new, fromfile="a", tofile="b", context=DEFAULT_CONTEXT,
                 fromdate=None, todate=None):
    """Unified diff between two texts (or lists of lines); '' when they are identical."""
    a = split_lines(old) if isinstance(old, str) else list(old)
    b = split_lines(new) if isinstance(new, str) else list(new)
    hunks = group_hunks(diff_opcodes(a, b), a, b, context)
    if not hunks:
        return ""
    out = [_file_line("---", fromfile, fromdate), _file_line("+++", tofile, todate)]
    for hunk in hunks:
        out.append(format_hunk_header(hunk))
        for op, text in hunk.lines:
            out.append(op + text)
            if not text.endswith("\n"):
                out.append("\n" + NO_NEWLINE)
    return "".join(out)


def format_hunk_header(hunk):
    """The `@@ -l,s +l,s @@` line of a hunk (with its newline)."""
    old = format_range(hunk.old_start, hunk.old_len)
    new = format_range(hunk.new_start, hunk.new_len)
    return f"@@ -{old} +{new} @@\n"


def format_range(start, length):
    """A hunk range: 1-based first line and line count; the count is omitted when it is 1."""
    if length == 1:
        return str(start + 1)
    return f"{start + 1},{length}"


def _file_line(marker, name, date):
    return f"{marker} {name}\t{date}\n" if date else f"{marker} {name}\n"
