"""Rendering the block tree to HTML.

The output follows the shape of the CommonMark reference renderer: one
block per line, ``<li>`` content inline for tight lists, paragraphs wrapped
in ``<p>`` only in loose lists.
"""

import re
from typing import Dict, List, Optional

from .blocks import Block, BlockQuote, CodeBlock, Heading, ListBlock, ListItem, Paragraph, ThematicBreak
from .escape import escape_attr, escape_html
from .inline import plain_text, render_inline


class HtmlRenderer:
    """Render blocks to an HTML fragment.

    With ``heading_ids=True`` every heading gets an ``id`` derived from its
    text (``## Getting started`` -> ``id="getting-started"``), made unique
    within the document with ``-1``, ``-2``... suffixes.
    """

    def __init__(self, heading_ids: bool = False) -> None:
        self.heading_ids = heading_ids
        self._used_ids: Dict[str, int] = {}

    def render(self, blocks: List[Block]) -> str:
        return "".join(self.render_block(block) for block in blocks)

    def render_block(self, block: Block) -> str:
        if isinstance(block, Paragraph):
            return f"<p>{render_inline(block.text)}</p>\n"
        if isinstance(block, Heading):
            id_attr = f' id="{escape_attr(self._heading_id(block.text))}"' if self.heading_ids else ""
            return f"<h{block.level}{id_attr}>{render_inline(block.text)}</h{block.level}>\n"
        if isinstance(block, CodeBlock):
            lang = f' class="language-{escape_attr(block.info)}"' if block.info else ""
            return f"<pre><code{lang}>{escape_html(block.code)}</code></pre>\n"
        if isinstance(block, ThematicBreak):
            return "<hr />\n"
        if isinstance(block, BlockQuote):
            return f"<blockquote>\n{self.render(block.children)}</blockquote>\n"
        if isinstance(block, ListBlock):
            return self._render_list(block)
        raise TypeError(f"cannot render {type(block).__name__}")

    def _render_list(self, block: ListBlock) -> str:
        tag = "ol" if block.ordered else "ul"
        start = f' start="{block.start}"' if block.ordered and block.start != 1 else ""
        items = "".join(self._render_item(item, block.tight) for item in block.items)
        return f"<{tag}{start}>\n{items}</{tag}>\n"

    def _render_item(self, item: ListItem, tight: bool) -> str:
        html = ""
        for child in item.children:
            if tight and isinstance(child, Paragraph):
                html += render_inline(child.text)
                continue
            if not html.endswith("\n"):
                html += "\n"
            html += self.render_block(child)
        return f"<li>{html}</li>\n"

    def _heading_id(self, text: str) -> str:
        slug = slugify(plain_text(text)) or "section"
        count = self._used_ids.get(slug)
        self._used_ids[slug] = 0 if count is None else count + 1
        return slug if count is None else f"{slug}-{count + 1}"


def slugify(text: str) -> str:
    """``'Hello, World!'`` -> ``'hello-world'``."""
    text = re.sub(r"[^\w\s-]", "", text.lower())
    return re.sub(r"[\s_-]+", "-", text).strip("-")


def render_html(blocks: List[Block], heading_ids: bool = False, title: Optional[str] = None) -> str:
    """Render ``blocks``; with a ``title``, as a complete HTML document."""
    body = HtmlRenderer(heading_ids=heading_ids).render(blocks)
    if title is None:
        return body
    return (
        "<!DOCTYPE html>\n<html>\n<head>\n<meta charset=\"utf-8\">\n"
        f"<title>{escape_html(title)}</title>\n</head>\n<body>\n{body}</body>\n</html>\n"
    )
