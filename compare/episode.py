"""One Leaf episode: the short system prompt, the task's instruction, one chat completion per step, tools run
in order, reasoning sent back, Leaf's exit reasons. Improves on Leaf where it is unsafe: the wall-time budget
holds during a slow model call or command too, and a misconfigured parser is a harness error, not a miss.
The prompt and tool schemas are leafcost's own words unless the arm reads Leaf's from a checkout."""

from __future__ import annotations

import hashlib
import json
import math
import time
from datetime import datetime
from typing import Any, Literal, Protocol

from pydantic import BaseModel, ConfigDict, Field

from adapters.base import Adapter, AdapterError, CallAttempt, ToolCall, Turn, Usage, utcnow
from compare.misconfig import detect_parser_misconfiguration
from compare.budgets import Budgets
from sandbox import LEAF_TOOLS, Sandbox, SandboxError, bash_arguments

# Our own words for what Leaf's short prompt says: an engineering agent in a checked-out repository, tools, a
# brief answer. A user who has Leaf can send Leaf's own text instead (compare.leaf_prompt).
SYSTEM_PROMPT = (
    "You are a software engineering agent working in a checked-out code repository. Use the tools to look at "
    "files, make focused edits and run commands. Solve the task, check your change when it is practical, and "
    "finish with a brief answer."
)
TRAJECTORY_FORMAT = "leaf-function-calling"
LENGTH_FINISH = frozenset({"length", "max_tokens", "max_new_tokens"})
CONTEXT_OVERFLOW_MARKERS = ("context_length_exceeded", "reduce the length", "maximum context length")
# How an episode ends: Leaf's reasons, leafcost's own two (parser_misconfigured, configuration_error) and the
# oracle's; the runner adds the ends it decides itself (ExitReason).
EpisodeExit = Literal["agent", "max_turns", "max_time", "max_context_len", "max_tokens_per_turn", "llm_query_error",
                      "infrastructure_error", "parser_misconfigured", "configuration_error", "oracle"]
ExitReason = EpisodeExit | Literal["task_error", "harness_error", "cancelled"]
INFRASTRUCTURE_EXITS = frozenset({"infrastructure_error"})
# Errors of the set-up, not of the model: counted as errors, never retried, never a plain miss.
HARNESS_EXITS = frozenset({"parser_misconfigured", "configuration_error"})


PromptSource = Literal["leafcost", "leaf-checkout"]


class EpisodePrompt(BaseModel):
    """What every request of an episode carries besides the conversation: the system prompt and the tool
    schemas, sent exactly as held here, and where they came from."""

    model_config = ConfigDict(frozen=True)

    source: PromptSource = "leafcost"
    system_prompt: str = SYSTEM_PROMPT
    tools: list[dict[str, Any]] = Field(default_factory=lambda: LEAF_TOOLS)
    leaf_checkout: str | None = None  # the FrogNano clone read, when source is "leaf-checkout"
    leaf_commit: str | None = None  # its git HEAD, when it is a git clone

    @property
    def prompt_sha256(self) -> str:
        return hashlib.sha256(self.system_prompt.encode("utf-8")).hexdigest()

    @property
    def tools_sha256(self) -> str:
        """Of the compact JSON, keys in the order sent: any change to what the model reads changes it."""
        return hashlib.sha256(_compact_json(self.tools).encode("utf-8")).hexdigest()

    def config(self) -> dict[str, Any]:
        """The arm's recorded prompt configuration (runs beside the adapter's in `arms.config`)."""
        return {"prompt_source": self.source, "leaf_checkout": self.leaf_checkout, "leaf_commit": self.leaf_commit,
                "prompt_sha256": self.prompt_sha256, "tools_sha256": self.tools_sha256}


LEAFCOST_PROMPT = EpisodePrompt()


class EpisodeRecorder(Protocol):
    """Where every call goes as it happens (the ledger, in a run). A recorder may keep a call in flight while
    the episode goes on; `settle`, the episode's last act, returns once all of them are kept (or raises)."""

    async def model_call(self, step: int, attempt: CallAttempt) -> None: ...

    async def tool_call(self, step: int, index: int, call: ToolCall, output: str, started_at: datetime,
                        seconds: float) -> None: ...

    async def settle(self) -> None: ...


class EpisodeResult(BaseModel):
    exit_reason: EpisodeExit
    n_steps: int
    usage: Usage  # every attempt of every step, failed ones included
    model_calls: int
    error: str | None = None
    misconfiguration: str | None = None
    context_tokens: int = 0
    elapsed_sec: float
    messages: list[dict[str, Any]]
    steps: list[dict[str, Any]] = Field(default_factory=list)
    final_message: str = ""
    tools: list[dict[str, Any]] = Field(default_factory=lambda: LEAF_TOOLS)  # as sent with every request
    prompt_source: PromptSource = "leafcost"

    @property
    def infrastructure_error(self) -> bool:
        return self.exit_reason in INFRASTRUCTURE_EXITS

    @property
    def harness_error(self) -> bool:
        return self.exit_reason in HARNESS_EXITS

    def trajectory(self, **extra: Any) -> dict[str, Any]:
        """Leaf's trajectory fields, plus per-step usage and whatever the caller adds (patch, ids, grade)."""
        return {"trajectory_format": TRAJECTORY_FORMAT, "messages": self.messages, "tools": self.tools,
                "prompt_source": self.prompt_source,
                "steps": self.steps, "n_steps": self.n_steps, "exit_reason": self.exit_reason, "error": self.error,
                "final_message": self.final_message, "context_tokens": self.context_tokens,
                "elapsed_sec": self.elapsed_sec, "partial": False, "misconfiguration": self.misconfiguration,
                "usage": self.usage.model_dump(), **extra}


async def run_episode(adapter: Adapter, sandbox: Sandbox, instruction: str, budgets: Budgets,
                      recorder: EpisodeRecorder, prompt: EpisodePrompt = LEAFCOST_PROMPT) -> EpisodeResult:
    """One episode; `prompt` is the system prompt and tool schemas every request carries (default: ours). It
    returns once every call it made is recorded."""
    result = await _steps(adapter, sandbox, instruction, budgets, recorder, prompt)
    await recorder.settle()
    return result


async def _steps(adapter: Adapter, sandbox: Sandbox, instruction: str, budgets: Budgets,
                 recorder: EpisodeRecorder, prompt: EpisodePrompt) -> EpisodeResult:
    started = time.monotonic()
    deadline = started + budgets.time_budget_sec
    loop = _Loop(recorder, prompt, [{"role": "system", "content": prompt.system_prompt},
                                    {"role": "user", "content": instruction}])
    for step in range(budgets.max_steps):
        if time.monotonic() >= deadline:
            return loop.finish("max_time", started)
        loop.n_steps += 1
        try:
            turn = await adapter.chat(loop.messages, prompt.tools, max_tokens=budgets.max_tokens_per_turn,
                                      deadline=deadline)
        except AdapterError as exc:
            await loop.record_attempts(step, exc.attempts)
            return loop.finish(_adapter_exit(exc), started, error=f"{exc.kind}: {exc}")
        await loop.record_attempts(step, turn.attempts)
        assistant = _assistant_message(turn)
        loop.messages.append(assistant)
        loop.context_tokens = turn.usage.total_tokens
        record = {"step": step, "assistant": assistant, "observations": [], "usage": turn.usage.model_dump(),
                  "latency_sec": turn.latency_sec, "finish_reason": turn.finish_reason, "model": turn.model,
                  "attempts": len(turn.attempts), "truncated_chars": turn.truncated_chars}
        loop.steps.append(record)
        if (problem := detect_parser_misconfiguration(turn)) is not None:
            return loop.finish("parser_misconfigured", started, error=problem, misconfiguration=problem)
        truncated = (turn.finish_reason or "").lower() in LENGTH_FINISH
        if truncated or not turn.tool_calls:
            loop.final_message = turn.content or ""
            reason = _length_exit(turn, budgets) if truncated else "agent"
            return loop.finish(reason, started)
        try:
            tool_messages = await loop.run_tools(sandbox, step, turn.tool_calls, record, deadline)
        except SandboxError as exc:
            return loop.finish("infrastructure_error", started, error=f"sandbox: {exc}")
        if tool_messages is None:
            return loop.finish("max_time", started)
        loop.context_tokens += count_message_tokens(tool_messages)
        if loop.context_tokens >= budgets.max_context_tokens:
            return loop.finish("max_context_len", started)
    return loop.finish("max_turns", started)


def count_message_tokens(messages: list[dict[str, Any]]) -> int:
    """Leaf's fallback count when no tokenizer is at hand (FrogNano's lives on a model hub): UTF-8 bytes / 4."""
    if not messages:
        return 0
    return math.ceil(len(_compact_json(messages).encode("utf-8")) / 4)


def _compact_json(value: Any) -> str:
    return json.dumps(value, separators=(",", ":"), ensure_ascii=False)


class _Loop:
    """The episode's running state, so the loop above reads as Leaf's."""

    def __init__(self, recorder: EpisodeRecorder, prompt: EpisodePrompt, messages: list[dict[str, Any]]):
        self.recorder = recorder
        self.prompt = prompt
        self.messages = messages
        self.steps: list[dict[str, Any]] = []
        self.usage = Usage()
        self.model_calls = 0
        self.n_steps = 0
        self.context_tokens = 0
        self.final_message = ""

    async def record_attempts(self, step: int, attempts: list[CallAttempt]) -> None:
        for attempt in attempts:
            self.usage = self.usage + attempt.usage
            self.model_calls += 1
            await self.recorder.model_call(step, attempt)

    async def run_tools(self, sandbox: Sandbox, step: int, calls: list[ToolCall], record: dict[str, Any],
                        deadline: float) -> list[dict[str, Any]] | None:
        """Leaf runs a turn's calls one after another; None when the time budget ran out on the way."""
        tool_messages = []
        for index, call in enumerate(calls):
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                return None
            started_at, clock = utcnow(), time.monotonic()
            output = await sandbox.run_tool(call.name, _within_budget(call, remaining))
            seconds = time.monotonic() - clock
            await self.recorder.tool_call(step, index, call, output, started_at, seconds)
            message = {"role": "tool", "tool_call_id": call.id, "content": output}
            self.messages.append(message)
            tool_messages.append(message)
            record["observations"].append({"tool": call.name, "observation": output, "seconds": seconds})
        return tool_messages

    def finish(self, reason: EpisodeExit, started: float, *, error: str | None = None,
               misconfiguration: str | None = None) -> EpisodeResult:
        return EpisodeResult(exit_reason=reason, n_steps=self.n_steps, usage=self.usage, model_calls=self.model_calls,
                             error=error, misconfiguration=misconfiguration, context_tokens=self.context_tokens,
                             elapsed_sec=time.monotonic() - started, messages=self.messages, steps=self.steps,
                             final_message=self.final_message, tools=self.prompt.tools,
                             prompt_source=self.prompt.source)


def _assistant_message(turn: Turn) -> dict[str, Any]:
    """The assistant message kept in history: content, tool calls and the reasoning sent back, as Leaf keeps it."""
    message: dict[str, Any] = {"role": "assistant", "content": turn.content}
    if turn.tool_calls:
        message["tool_calls"] = [{"id": c.id, "type": "function",
                                  "function": {"name": c.name, "arguments": c.arguments}} for c in turn.tool_calls]
    if turn.reasoning:
        message["reasoning_content"] = turn.reasoning
    return message


def _within_budget(call: ToolCall, remaining: float) -> str | dict[str, Any]:
    """A Bash command may not outlive the episode's time budget: its timeout is capped to what remains."""
    bash = bash_arguments(call.arguments) if call.name == "Bash" else None
    if bash is None or bash[1] <= remaining:
        return call.arguments  # within budget, or unusable: the tool itself answers with Leaf's error
    capped = {k: v for k, v in bash[0].items() if k != "timeout_ms"}  # timeout_ms would take precedence
    return {**capped, "timeout": max(0.1, round(remaining, 1))}


def _adapter_exit(error: AdapterError) -> EpisodeExit:
    if error.kind == "deadline":
        return "max_time"
    if error.infrastructure:
        return "infrastructure_error"
    if error.configuration:  # a wrong model name, key or route: the arm is misconfigured, the model did nothing
        return "configuration_error"
    message = str(error).lower()
    if any(marker in message for marker in CONTEXT_OVERFLOW_MARKERS) or ("context length" in message
                                                                          and "exceed" in message):
        return "max_context_len"
    return "llm_query_error"


def _length_exit(turn: Turn, budgets: Budgets) -> EpisodeExit:
    """A length-truncated turn (its tools are not run): the per-turn cap, or the context, whichever was hit."""
    usage, cap = turn.usage, budgets.max_tokens_per_turn or 0
    if usage.prompt_tokens + usage.completion_tokens >= budgets.max_context_tokens:
        return "max_context_len"
    if cap and usage.completion_tokens >= cap:
        return "max_tokens_per_turn"
    return "max_tokens_per_turn" if cap else "max_context_len"
