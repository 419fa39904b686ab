"""minimark: a small, dependency-free Markdown to HTML converter.

>>> markdown("# Hello *world*")
'<h1>Hello <em>world</em></h1>\\n'
"""

from .blocks import parse_blocks
from .render import HtmlRenderer, render_html

__all__ = ["HtmlRenderer", "markdown", "parse_blocks", "render_html"]

__version__ = "0.6.2"


def markdown(text: str, *, heading_ids: bool = False) -> str:
    """Convert a Markdown document to an HTML fragment."""
    return render_html(parse_blocks(text), heading_ids=heading_ids)
