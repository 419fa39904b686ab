"""What a model's answer may bring into leafcost: valid Unicode only, and bounded. Every string an endpoint sends
(content, reasoning, tool names, tool call ids, arguments, finish_reason, model) passes through `answer_text`
before anything stores, sends back or shows it; the HTTP body itself is read to ANSWER_BODY_CAP_BYTES at most.

Lone UTF-16 surrogates (JSON's `"\\ud800"`, which Python decodes into a `str` no UTF-8 encoder accepts) become
U+FFFD, the character the tools already show for undecodable bytes: the conversation sent back, the ledger and
the trajectory all hold the same text. Leaf caps no answer; leafcost cuts a field past its cap Leaf's way (the
first N characters, then `[truncated K chars]`) and records how much it cut."""

from __future__ import annotations

import re

# An honest turn is far below these: 1,000,000 characters is ~250,000 tokens, beyond any model's output limit.
ANSWER_FIELD_CAP_CHARS = 1_000_000  # content, reasoning, each tool call's arguments
ANSWER_NAME_CAP_CHARS = 256  # tool names, tool call ids, finish_reason, model, request ids
ANSWER_BODY_CAP_BYTES = 16 * 2**20  # one HTTP answer; a larger one is not read (a bad_response)

_LONE_SURROGATE = re.compile("[\ud800-\udfff]")  # a str from json.loads holds only unpaired ones


def valid_text(text: str) -> str:
    """`text` with every lone surrogate replaced by U+FFFD, so that it encodes as UTF-8."""
    return _LONE_SURROGATE.sub("\ufffd", text)


def answer_text(text: str, cap: int = ANSWER_FIELD_CAP_CHARS) -> tuple[str, int]:
    """(valid text, characters cut): at most `cap` characters kept, then Leaf's `[truncated K chars]` note."""
    text = valid_text(text)
    if len(text) <= cap:
        return text, 0
    cut = len(text) - cap
    return f"{text[:cap]}\n[truncated {cut} chars]", cut


def answer_name(text: str) -> str:
    """A short field (name, id, finish_reason): valid, and cut to ANSWER_NAME_CAP_CHARS without a note."""
    return valid_text(text[:ANSWER_NAME_CAP_CHARS])
