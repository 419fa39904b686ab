"""Text that came from a task, a model, an endpoint or a log, made safe to show: `shown` for Rich (tables,
progress bars, console.print), `clean` for plain lines (typer.echo). Every CLI message that quotes such text goes
through one of them: an escape sequence never reaches the terminal, and Rich never reads a task's `[/--/]` as
markup (which crashed `validate` with MarkupError on real SWE-bench test ids). `terminal` is the console every
table is printed on."""

from __future__ import annotations

import re

from adapters.answers import valid_text

# C0 controls but tab and newline, DEL, C1 controls (a lone 0x9b is CSI on some terminals), and the Unicode
# controls that reorder or hide text (bidi embeddings, overrides and isolates: "Trojan Source").
_CONTROL = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f\u200e\u200f\u202a-\u202e\u2066-\u2069]")


def clean(text: object) -> str:
    """`text` with every control character shown as its escape (`\\x1b`, `\\r`, `\\u202e`): what it said stays
    readable, nothing in it acts on the terminal; a lone surrogate (which no terminal encoding takes) is U+FFFD."""
    return _CONTROL.sub(_visible, valid_text(str(text)))


def shown(text: object) -> str:
    """`clean(text)` with Rich markup escaped: for any string handed to Rich that holds untrusted text."""
    from rich.markup import escape  # Rich is imported where output is made, never at CLI start

    return escape(clean(text))


def terminal():
    """A Rich console exactly as wide as the terminal ($COLUMNS when set, else 80 when there is no terminal):
    a table narrower than its figures wraps its cells and never runs past the edge."""
    from rich.console import Console

    return Console()


def _visible(match: re.Match[str]) -> str:
    return match.group().encode("unicode_escape").decode("ascii")
