"""The script a fake SGLang server answers from: one turn per conversation step, each an answer, an HTTP error,
garbage, a delay or a hang; per task (a marker in the first user message) a count of conversations that resolve and
the turns that resolve or miss; `instant` for benchmarks; the launch's server args, auth and GPU costs."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

__all__ = ["GpuSpec", "InstantSpec", "RepeatLast", "Script", "TaskScript", "ToolCallSpec", "TurnSpec", "UsageSpec",
           "load_script"]


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid")


class ToolCallSpec(_Strict):
    """One tool call of an answer. `arguments` as a string is sent verbatim (malformed JSON included)."""

    name: str
    arguments: dict[str, Any] | str = Field(default_factory=dict)
    id: str | None = None  # generated (`call_` + 24 hex, as SGLang does) when not given


class UsageSpec(_Strict):
    """Per-turn usage override; a field left out is computed from the request and the answer."""

    prompt_tokens: int | None = Field(default=None, ge=0)
    completion_tokens: int | None = Field(default=None, ge=0)
    cached_tokens: int | None = Field(default=None, ge=0)
    reasoning_tokens: int | None = Field(default=None, ge=0)


class TurnSpec(_Strict):
    """One scripted answer: a normal answer, an HTTP error, garbage, a delay or a hang, or a list of attempts."""

    content: str | None = None  # explicit null is sent as null; left out → "" (SGLang's empty content)
    reasoning: str | None = None  # → message.reasoning_content
    tool_calls: list[ToolCallSpec] = Field(default_factory=list)
    finish_reason: str | None = None  # default: "tool_calls" with tool calls, else "stop"
    usage: UsageSpec | None = None
    headers: dict[str, str] = Field(default_factory=dict)
    cost: float | None = None  # → usage.cost (OpenRouter style)
    status: int | None = Field(default=None, ge=400, le=599)  # an error answer with an error body
    retry_after: float | None = Field(default=None, ge=0)  # → Retry-After header
    message: str | None = None  # the error message
    delay: float = Field(default=0.0, ge=0)  # seconds to wait before answering
    hang: bool = False  # never answer; the connection stays open until the client gives up
    garbage: str | None = None  # 200 with exactly this raw body
    flood_chars: int | None = Field(default=None, ge=1)  # a content string this long, finish_reason "length"
    attempts: list[TurnSpec] | None = None  # the k-th identical request at this step gets attempts[k] (last repeats)

    @model_validator(mode="after")
    def _one_kind(self) -> TurnSpec:
        if self.attempts is not None:
            others = self.model_fields_set - {"attempts"}
            if others:
                raise ValueError(f"a turn with `attempts` takes no other fields (got {sorted(others)}); "
                                 "put them inside the attempts")
            if not self.attempts:
                raise ValueError("`attempts` needs at least one turn")
            if any(attempt.attempts is not None for attempt in self.attempts):
                raise ValueError("`attempts` cannot nest")
        kinds = [name for name, on in (("status", self.status is not None), ("garbage", self.garbage is not None),
                                       ("hang", self.hang)) if on]
        if len(kinds) > 1:
            raise ValueError(f"a turn is one of status, garbage or hang, not {' and '.join(kinds)}")
        return self

    @property
    def content_given(self) -> bool:
        return "content" in self.model_fields_set


class RepeatLast(_Strict):
    repeat_last: Literal[True]


Branch = Literal["resolving", "missing"]


class TaskScript(_Strict):
    """One task's conversations, told apart by a marker in their first user message: the first `resolve` of them
    to start (in the order their step-0 requests arrive) answer from `resolving`, every later one from `missing`.
    Past its list's end a conversation repeats the list's last turn. The server tells a conversation's later steps
    apart by the tool-call ids of its first answer, so those ids are generated, never scripted."""

    resolve: int = Field(default=0, ge=0)
    resolving: list[TurnSpec] = Field(default_factory=list)
    missing: list[TurnSpec] = Field(default_factory=list)

    @model_validator(mode="after")
    def _answerable(self) -> TaskScript:
        if self.resolve and not self.resolving:
            raise ValueError(f"`resolve` is {self.resolve} but `resolving` has no turns")
        for name, turns in (("resolving", self.resolving), ("missing", self.missing)):
            for turn in turns:
                if any(call.id is not None for attempt in (turn.attempts or [turn]) for call in attempt.tool_calls):
                    raise ValueError(f"a task's `{name}` turns may not set tool-call ids: the server tells its "
                                     "conversations apart by the ids it generates")
        return self

    def turns(self, branch: Branch) -> list[TurnSpec]:
        return self.resolving if branch == "resolving" else self.missing


class InstantSpec(_Strict):
    """Benchmark mode: `steps` tool-call answers, then a final content answer, constant small usage."""

    tool: str = "Bash"
    arguments: dict[str, Any] | str = Field(default_factory=lambda: {"command": "true"})
    steps: int = Field(default=20, ge=0)
    final: str = "done"
    prompt_tokens: int = Field(default=100, ge=1)
    completion_tokens: int = Field(default=20, ge=1)


class GpuSpec(_Strict):
    """How the simulated GPU spends time, for `sglang:gpu_execution_seconds_total` and `sglang:utilization`."""

    prefill_seconds_per_token: float = Field(default=1e-5, ge=0)
    decode_seconds_per_token: float = Field(default=1e-3, ge=0)


class Script(_Strict):
    model: str = "frognano-4b"  # the model path SGLang was launched with
    served_model_name: str | None = None  # defaults to `model`, as SGLang does
    turns: list[TurnSpec] = Field(default_factory=list)
    # marker → its task's script; a conversation whose first user message holds no marker answers from `turns`,
    # one that holds several from the longest marker's (so "copy-1" and "copy-10" can both be markers)
    tasks: dict[str, TaskScript] = Field(default_factory=dict)
    then: RepeatLast | TurnSpec = Field(default_factory=lambda: RepeatLast(repeat_last=True))
    auth: str | None = None  # the one accepted Authorization value, e.g. "Bearer secret"
    instant: InstantSpec | None = None
    metrics: bool = True  # serve /metrics (SGLang's --enable-metrics)
    server_args: dict[str, Any] = Field(default_factory=dict)  # merged over the FrogNano launch's args
    version: str = "0.0.0+scripted"  # /get_server_info "version"
    error_style: Literal["openai", "sglang"] = "openai"  # nested {"error": {...}} or SGLang's flat ErrorResponse
    health_status: int = 200  # /health and /health_generate answer this (503 = still starting / unhealthy)
    gpu: GpuSpec = Field(default_factory=GpuSpec)

    @model_validator(mode="after")
    def _markers_given(self) -> Script:
        if any(not marker for marker in self.tasks):
            raise ValueError("a `tasks` marker must be a non-empty string")
        return self

    @property
    def served_name(self) -> str:
        return self.served_model_name or self.model


def load_script(script: Script | dict[str, Any] | str | os.PathLike[str]) -> Script:
    """A script from a model, a dict, or a path to a JSON file."""
    if isinstance(script, Script):
        return script
    if isinstance(script, dict):
        return Script.model_validate(script)
    return Script.model_validate_json(Path(script).read_text())

