"""The block parser: turns Markdown source into a tree of block nodes.

Blocks are recognised line by line. Container blocks (block quotes and list
items) collect the lines that belong to them, strip their own markers and
indentation, and hand the result to a fresh parser, so nesting is handled by
recursion. Inline content (the text of headings and paragraphs) is kept as
raw Markdown; :mod:`minimark.inline` renders it later.

Tabs are expanded to spaces (tab stops every 4 columns) before parsing.
"""

import re
from dataclasses import dataclass, field
from typing import List, Optional, Union

TAB_STOP = 4
CODE_INDENT = 4

_ATX = re.compile(r"^ {0,3}(#{1,6})(?=[ ]|$)(.*)$")
_ATX_CLOSING = re.compile(r"(?:^|[ ]+)#+[ ]*$")
_THEMATIC = re.compile(r"^ {0,3}(?:(?:\*[ ]*){3,}|(?:-[ ]*){3,}|(?:_[ ]*){3,})$")
_FENCE_OPEN = re.compile(r"^( {0,3})(`{3,}|~{3,})(.*)$")
_FENCE_CLOSE = re.compile(r"^ {0,3}(`{3,}|~{3,})[ ]*$")
_QUOTE = re.compile(r"^ {0,3}>")
_LIST_MARKER = re.compile(r"^( {0,3})([-+*]|[0-9]{1,9}[.)])(?=[ ]|$)(.*)$")


@dataclass
class Heading:
    level: int
    text: str


@dataclass
class Paragraph:
    text: str


@dataclass
class CodeBlock:
    code: str
    info: str = ""


@dataclass
class ThematicBreak:
    pass


@dataclass
class BlockQuote:
    children: List["Block"] = field(default_factory=list)


@dataclass
class ListItem:
    children: List["Block"] = field(default_factory=list)


@dataclass
class ListBlock:
    ordered: bool
    marker: str  # the bullet character, or the delimiter ("." or ")") of an ordered list
    start: int = 1
    items: List[ListItem] = field(default_factory=list)
    tight: bool = True


Block = Union[Heading, Paragraph, CodeBlock, ThematicBreak, BlockQuote, ListBlock]


@dataclass
class ListMarker:
    """A list item's opening line, taken apart."""

    indent: int  # columns before the marker
    marker: str  # "-", "*", "+", "." or ")"
    ordered: bool
    number: int
    content_indent: int  # column where the item's content starts
    first_line: str  # the content that follows the marker on the opening line


def parse_blocks(text: str) -> List[Block]:
    """Parse a whole Markdown document into a list of blocks."""
    return BlockParser(split_lines(text)).parse()


def split_lines(text: str) -> List[str]:
    text = text.replace("\r\n", "\n").replace("\r", "\n")
    if text.endswith("\n"):
        text = text[:-1]
    return [expand_tabs(line) for line in text.split("\n")]


def expand_tabs(line: str) -> str:
    if "\t" not in line:
        return line
    out = []
    column = 0
    for char in line:
        if char == "\t":
            width = TAB_STOP - column % TAB_STOP
            out.append(" " * width)
            column += width
        else:
            out.append(char)
            column += 1
    return "".join(out)


def is_blank(line: str) -> bool:
    return not line.strip()


def indent_of(line: str) -> int:
    return len(line) - len(line.lstrip(" "))


def strip_indent(line: str, columns: int) -> str:
    """Remove up to ``columns`` leading spaces."""
    return line[min(columns, indent_of(line)):]


def match_list_marker(line: str) -> Optional[ListMarker]:
    """Recognise a list item's opening line (``- x``, ``* x``, ``3. x``, ``1) x``)."""
    match = _LIST_MARKER.match(line)
    if not match:
        return None
    indent, marker, rest = len(match.group(1)), match.group(2), match.group(3)
    ordered = marker[-1] in ".)"
    after_marker = indent + len(marker)
    spaces = indent_of(rest)
    if is_blank(rest):
        content_indent, first_line = after_marker + 1, ""
    elif spaces > CODE_INDENT:
        # "-      code": one space belongs to the marker, the rest is indented code.
        content_indent, first_line = after_marker + 1, rest[1:]
    else:
        content_indent, first_line = after_marker + spaces, rest[spaces:]
    return ListMarker(
        indent=indent,
        marker=marker[-1] if ordered else marker,
        ordered=ordered,
        number=int(marker[:-1]) if ordered else 1,
        content_indent=content_indent,
        first_line=first_line,
    )


def interrupts_paragraph(line: str) -> bool:
    """Whether ``line`` starts a block that ends a paragraph in progress.

    Indented code cannot interrupt a paragraph, and neither can an empty
    list item or an ordered list that does not start at 1.
    """
    if indent_of(line) >= CODE_INDENT:
        return False
    if _fence_start(line) or _THEMATIC.match(line) or _ATX.match(line) or _QUOTE.match(line):
        return True
    marker = match_list_marker(line)
    return marker is not None and marker.first_line.strip() != "" and marker.number == 1


def _fence_start(line: str):
    match = _FENCE_OPEN.match(line)
    if match is None:
        return None
    if match.group(2)[0] == "`" and "`" in match.group(3):
        return None
    return match


class BlockParser:
    """Parses a list of (tab-expanded) lines into blocks.

    After :meth:`parse`, ``blank_between_blocks`` tells whether a blank line
    separated two of the blocks found at this level; list items use it to
    decide whether their list is loose.
    """

    def __init__(self, lines: List[str]) -> None:
        self.lines = lines
        self.pos = 0
        self.blank_between_blocks = False

    def parse(self) -> List[Block]:
        blocks: List[Block] = []
        pending_blank = False
        while self.pos < len(self.lines):
            line = self.lines[self.pos]
            if is_blank(line):
                pending_blank = True
                self.pos += 1
                continue
            block = self._block_at(line)
            if pending_blank and blocks:
                self.blank_between_blocks = True
            pending_blank = False
            blocks.append(block)
        return blocks

    def _block_at(self, line: str) -> Block:
        if indent_of(line) >= CODE_INDENT:
            return self._indented_code()
        for start in (self._fenced_code, self._thematic_break, self._heading, self._blockquote, self._list):
            block = start(line)
            if block is not None:
                return block
        return self._paragraph()

    def _indented_code(self) -> CodeBlock:
        code: List[str] = []
        while self.pos < len(self.lines):
            line = self.lines[self.pos]
            if is_blank(line):
                code.append(line[CODE_INDENT:])
            elif indent_of(line) >= CODE_INDENT:
                code.append(line[CODE_INDENT:])
            else:
                break
            self.pos += 1
        while code and is_blank(code[-1]):
            code.pop()
            self.pos -= 1
        return CodeBlock("".join(text + "\n" for text in code))

    def _fenced_code(self, line: str) -> Optional[CodeBlock]:
        match = _fence_start(line)
        if match is None:
            return None
        fence_indent, fence = len(match.group(1)), match.group(2)
        info = match.group(3).strip()
        self.pos += 1
        code: List[str] = []
        while self.pos < len(self.lines):
            line = self.lines[self.pos]
            self.pos += 1
            close = _FENCE_CLOSE.match(line)
            if close and close.group(1)[0] == fence[0] and len(close.group(1)) >= len(fence):
                break
            code.append(strip_indent(line, fence_indent))
        language = info.split()[0] if info else ""
        return CodeBlock("".join(text + "\n" for text in code), language)

    def _thematic_break(self, line: str) -> Optional[ThematicBreak]:
        if not _THEMATIC.match(line):
            return None
        self.pos += 1
        return ThematicBreak()

    def _heading(self, line: str) -> Optional[Heading]:
        match = _ATX.match(line)
        if not match:
            return None
        self.pos += 1
        text = _ATX_CLOSING.sub("", match.group(2).strip())
        return Heading(len(match.group(1)), text.strip())

    def _blockquote(self, line: str) -> Optional[BlockQuote]:
        if not _QUOTE.match(line):
            return None
        inner: List[str] = []
        while self.pos < len(self.lines) and _QUOTE.match(self.lines[self.pos]):
            text = self.lines[self.pos].lstrip(" ")[1:]
            inner.append(text[1:] if text.startswith(" ") else text)
            self.pos += 1
        return BlockQuote(BlockParser(inner).parse())

    def _list(self, line: str) -> Optional[ListBlock]:
        marker = match_list_marker(line)
        if marker is None:
            return None
        block = ListBlock(ordered=marker.ordered, marker=marker.marker, start=marker.number)
        loose = False
        while True:
            item_parser = BlockParser(self._collect_item(marker))
            block.items.append(ListItem(item_parser.parse()))
            loose = loose or item_parser.blank_between_blocks
            following = self.pos
            while following < len(self.lines) and is_blank(self.lines[following]):
                following += 1
            if following >= len(self.lines):
                break
            next_line = self.lines[following]
            marker = match_list_marker(next_line)
            if marker is None or marker.marker != block.marker or _THEMATIC.match(next_line):
                break
            if following > self.pos:
                loose = True
            self.pos = following
        block.tight = not loose
        return block

    def _collect_item(self, marker: ListMarker) -> List[str]:
        """Consume the lines of one list item and return them de-indented.

        Lines indented at least to the item's content column belong to it,
        as do blank lines followed by such lines. Trailing blank lines are
        left for the caller, which needs them to tell tight lists from loose.
        """
        body = [marker.first_line]
        self.pos += 1
        while self.pos < len(self.lines):
            line = self.lines[self.pos]
            if is_blank(line):
                body.append("")
                self.pos += 1
                continue
            if indent_of(line) >= marker.content_indent:
                body.append(line[marker.content_indent:])
                self.pos += 1
                continue
            if body[-1] == "" or match_list_marker(line) is not None:
                break
            # A lazy continuation line: the paragraph in the item goes on even
            # though the line is not indented.
            body.append(line.lstrip(" "))
            self.pos += 1
        while len(body) > 1 and body[-1] == "":
            body.pop()
            self.pos -= 1
        return body

    def _paragraph(self) -> Paragraph:
        lines = [self.lines[self.pos].lstrip(" ")]
        self.pos += 1
        while self.pos < len(self.lines):
            line = self.lines[self.pos]
            if is_blank(line) or interrupts_paragraph(line):
                break
            lines.append(line.lstrip(" "))
            self.pos += 1
        return Paragraph("\n".join(lines).rstrip(" "))
