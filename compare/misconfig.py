"""Parser misconfiguration: a server whose tool-call or reasoning parser is missing or wrong makes a good model
look bad. These signatures end the episode as a harness error, never as the model's miss."""

from __future__ import annotations

from adapters.base import Turn

TOOL_MARKUP = ("<tool_call>", "<function=", "<parameter=")


def detect_parser_misconfiguration(turn: Turn) -> str | None:
    """The first signature found in this turn, phrased as the server flag to fix; None when the turn is clean."""
    content, reasoning = turn.content or "", turn.reasoning or ""
    if any(mark in content for mark in TOOL_MARKUP):
        return ("raw tool-call markup in the answer's content: the server's tool-call parser is missing or wrong "
                "(SGLang: --tool-call-parser qwen3_coder)")
    if not turn.tool_calls and any(mark in reasoning for mark in TOOL_MARKUP):
        return ("a tool call inside reasoning_content: the reasoning parser swallowed it "
                "(SGLang: --reasoning-parser qwen3 with --tool-call-parser qwen3_coder)")
    if "</think>" in content:
        return "</think> in the answer's content: the server has no reasoning parser (SGLang: --reasoning-parser qwen3)"
    if turn.finish_reason == "tool_calls" and not turn.tool_calls:
        return ("finish_reason is tool_calls but no tool calls were parsed: the server's tool-call parser is missing "
                "or wrong (SGLang: --tool-call-parser qwen3_coder)")
    return None
