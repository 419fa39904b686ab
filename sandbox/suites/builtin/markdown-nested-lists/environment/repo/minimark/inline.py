"""The inline renderer: Markdown inside a paragraph or heading to HTML.

Rendering happens in two passes. The first scans the text left to right and
replaces everything whose extent is unambiguous (backslash escapes, code
spans, autolinks, links, images, hard line breaks) by an opaque placeholder,
escaping the plain text around them. The second pass matches emphasis
delimiters in what is left, then the placeholders are swapped back for
their HTML. Keeping code and URLs out of the emphasis pass means that
``*`` and ``_`` inside them are never taken for emphasis.
"""

import re
from typing import List, Optional, Tuple

from .escape import escape_attr, escape_html, escape_text, normalize_url, unescape_backslashes

_ASCII_PUNCTUATION = set("!\"#$%&'()*+,-./:;<=>?@[\\]^_`{|}~")
_AUTOLINK = re.compile(r"<([A-Za-z][A-Za-z0-9+.\-]{1,31}:[^\s<>]*)>")
_EMAIL_AUTOLINK = re.compile(r"<([A-Za-z0-9.!#$%&'*+/=?^_`{|}~\-]+@[A-Za-z0-9](?:[A-Za-z0-9\-]{0,61}[A-Za-z0-9])?"
                             r"(?:\.[A-Za-z0-9](?:[A-Za-z0-9\-]{0,61}[A-Za-z0-9])?)*)>")
_HARD_BREAK = re.compile(r" {2,}\n")

_PLACEHOLDER = re.compile("\x02(\\d+)\x03")
_EMPHASIS_RULES = [
    (re.compile(r"\*\*\*(?=\S)(.+?)(?<=\S)\*\*\*", re.S), "<em><strong>{}</strong></em>"),
    (re.compile(r"\*\*(?=\S)(.+?)(?<=\S)\*\*", re.S), "<strong>{}</strong>"),
    (re.compile(r"(?<![A-Za-z0-9_])__(?=\S)(.+?)(?<=\S)__(?![A-Za-z0-9_])", re.S), "<strong>{}</strong>"),
    (re.compile(r"\*(?=[^\s*])(.+?)(?<=[^\s*])\*", re.S), "<em>{}</em>"),
    (re.compile(r"(?<![A-Za-z0-9_])_(?=[^\s_])(.+?)(?<=[^\s_])_(?![A-Za-z0-9_])", re.S), "<em>{}</em>"),
]


def render_inline(text: str) -> str:
    """Render the inline Markdown ``text`` to HTML."""
    return _InlineRenderer(text).render()


def plain_text(text: str) -> str:
    """The text content of inline Markdown, for ``alt`` attributes and heading ids."""
    html = render_inline(text)
    return _unescape_basic(re.sub(r"<[^>]+>", "", html))


class _InlineRenderer:
    def __init__(self, text: str) -> None:
        self.text = text
        self.pos = 0
        self.out: List[str] = []
        self.stash: List[str] = []

    def render(self) -> str:
        text = self.text
        plain_start = 0
        while self.pos < len(text):
            handled = self._special_at(self.pos)
            if handled is None:
                self.pos += 1
                continue
            start, end, html = handled
            self._emit_plain(text[plain_start:start])
            self.out.append(self._stash(html))
            self.pos = plain_start = end
        self._emit_plain(text[plain_start:])
        result = "".join(self.out)
        for pattern, template in _EMPHASIS_RULES:
            result = _apply_emphasis(pattern, template, result)
        return _PLACEHOLDER.sub(lambda m: self.stash[int(m.group(1))], result)

    def _special_at(self, i: int) -> Optional[Tuple[int, int, str]]:
        char = self.text[i]
        if char == "\\":
            return self._backslash(i)
        if char == "`":
            return self._code_span(i)
        if char == "<":
            return self._autolink(i)
        if char == "!" and self.text.startswith("![", i):
            return self._link(i, image=True)
        if char == "[":
            return self._link(i, image=False)
        if char == " ":
            match = _HARD_BREAK.match(self.text, i)
            if match:
                return i, match.end(), "<br />\n"
        return None

    def _backslash(self, i: int) -> Optional[Tuple[int, int, str]]:
        following = self.text[i + 1:i + 2]
        if following == "\n":
            return i, i + 2, "<br />\n"
        if following and following in _ASCII_PUNCTUATION:
            return i, i + 2, escape_html(following)
        return None

    def _code_span(self, i: int) -> Optional[Tuple[int, int, str]]:
        run = _run_length(self.text, i, "`")
        search = i + run
        while True:
            close = self.text.find("`" * run, search)
            if close < 0:
                # No closing run: the backticks are literal text.
                return i, i + run, escape_html("`" * run)
            if _run_length(self.text, close, "`") == run:
                break
            search = close + _run_length(self.text, close, "`")
        code = self.text[i + run:close].replace("\n", " ")
        if len(code) >= 2 and code[0] == " " and code[-1] == " " and code.strip(" "):
            code = code[1:-1]
        return i, close + run, f"<code>{escape_html(code)}</code>"

    def _autolink(self, i: int) -> Optional[Tuple[int, int, str]]:
        match = _AUTOLINK.match(self.text, i)
        if match:
            url = match.group(1)
            return i, match.end(), f'<a href="{escape_attr(normalize_url(url))}">{escape_text(url)}</a>'
        match = _EMAIL_AUTOLINK.match(self.text, i)
        if match:
            address = match.group(1)
            return i, match.end(), f'<a href="mailto:{escape_attr(address)}">{escape_text(address)}</a>'
        return None

    def _link(self, i: int, image: bool) -> Optional[Tuple[int, int, str]]:
        label_start = i + (2 if image else 1)
        label_end = _matching_bracket(self.text, label_start)
        if label_end is None or not self.text.startswith("(", label_end + 1):
            return None
        parsed = _link_destination(self.text, label_end + 2)
        if parsed is None:
            return None
        destination, title, end = parsed
        label = self.text[label_start:label_end]
        title_attr = f' title="{escape_attr(unescape_backslashes(title))}"' if title is not None else ""
        if image:
            src = escape_attr(normalize_url(destination, image=True))
            return i, end, f'<img src="{src}" alt="{escape_attr(plain_text(label))}"{title_attr} />'
        href = escape_attr(normalize_url(destination))
        return i, end, f'<a href="{href}"{title_attr}>{render_inline(label)}</a>'

    def _emit_plain(self, text: str) -> None:
        if text:
            self.out.append(escape_text(text))

    def _stash(self, html: str) -> str:
        self.stash.append(html)
        return f"\x02{len(self.stash) - 1}\x03"


def _apply_emphasis(pattern: "re.Pattern[str]", template: str, text: str) -> str:
    previous = None
    while previous != text:
        previous = text
        text = pattern.sub(lambda m: template.format(m.group(1)), text)
    return text


def _run_length(text: str, start: int, char: str) -> int:
    end = start
    while end < len(text) and text[end] == char:
        end += 1
    return end - start


def _matching_bracket(text: str, start: int) -> Optional[int]:
    """Index of the ``]`` closing a label that starts at ``start``, or None."""
    depth = 1
    i = start
    while i < len(text):
        char = text[i]
        if char == "\\":
            i += 2
            continue
        if char == "`":
            run = _run_length(text, i, "`")
            close = text.find("`" * run, i + run)
            i = close + run if close >= 0 else i + run
            continue
        if char == "[":
            depth += 1
        elif char == "]":
            depth -= 1
            if depth == 0:
                return i
        i += 1
    return None


def _link_destination(text: str, i: int) -> Optional[Tuple[str, Optional[str], int]]:
    """Parse ``dest "title")`` starting at ``i``; return (dest, title, end)."""
    i = _skip_spaces(text, i)
    if text.startswith("<", i):
        close = text.find(">", i + 1)
        if close < 0 or "\n" in text[i:close]:
            return None
        destination = text[i + 1:close]
        i = close + 1
    else:
        start, depth = i, 0
        while i < len(text) and not text[i].isspace():
            if text[i] == "\\":
                i += 2
                continue
            if text[i] == "(":
                depth += 1
            elif text[i] == ")":
                if depth == 0:
                    break
                depth -= 1
            i += 1
        destination = text[start:i]
    title = None
    after = _skip_spaces(text, i)
    if after < len(text) and text[after] in "\"'(" and after > i:
        closer = ")" if text[after] == "(" else text[after]
        close = after + 1
        while close < len(text) and text[close] != closer:
            close += 2 if text[close] == "\\" else 1
        if close >= len(text):
            return None
        title = text[after + 1:close]
        after = _skip_spaces(text, close + 1)
    if after >= len(text) or text[after] != ")":
        return None
    return destination, title, after + 1


def _skip_spaces(text: str, i: int) -> int:
    while i < len(text) and text[i] in " \n":
        i += 1
    return i


def _unescape_basic(html: str) -> str:
    return html.replace("&quot;", '"').replace("&lt;", "<").replace("&gt;", ">").replace("&amp;", "&")
