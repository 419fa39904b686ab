"""The one interface every model endpoint speaks: `Adapter.chat(messages, tools) -> Turn`, with typed usage,
timings and every HTTP attempt behind a turn (retries and fallbacks included), plus the arm-level facts an
adapter owns: what the server says about itself, its metrics samples and the lease that pays for it."""

from __future__ import annotations

import uuid
from collections.abc import Awaitable, Callable
from contextvars import ContextVar
from datetime import datetime, timezone
from typing import Any, Literal, Protocol

from pydantic import BaseModel, Field


def utcnow() -> datetime:
    return datetime.now(timezone.utc)


class Usage(BaseModel):
    """Token counts as the server reported them, one meaning per field (never re-estimated client-side)."""

    prompt_tokens: int = 0  # all input, cached included
    cached_tokens: int = 0  # the part of prompt_tokens served from the prefix cache
    cache_write_tokens: int = 0  # the part of prompt_tokens written to a provider's prompt cache (billed apart)
    completion_tokens: int = 0  # all output, reasoning included
    reasoning_tokens: int = 0  # the part of completion_tokens spent thinking
    total_tokens: int = 0

    def __add__(self, other: Usage) -> Usage:
        return Usage(**{name: getattr(self, name) + getattr(other, name) for name in Usage.model_fields})

    def impossibility(self) -> str | None:
        """Why no server could have counted this (a negative count, one past USAGE_CEILING, a part larger than
        its whole), or None. An answer with impossible usage is an endpoint error, never priced."""
        for name in Usage.model_fields:
            value = getattr(self, name)
            if value < 0:
                return f"{name} is negative ({value})"
            if value > USAGE_CEILING:
                return f"{name} is {value}, above {USAGE_CEILING} (2**30, 500x the largest context window)"
        for part, whole in (("cached_tokens", "prompt_tokens"), ("cache_write_tokens", "prompt_tokens"),
                            ("reasoning_tokens", "completion_tokens")):
            if getattr(self, part) > getattr(self, whole):
                return f"{part} ({getattr(self, part)}) exceeds {whole} ({getattr(self, whole)})"
        return None


# The most tokens one call can report: 2**30 (about 1.07e9) is over 500 times the largest context window any
# model offers (2M tokens), so a count above it is not a big call but a broken or hostile server. A fixed bound,
# not the arm's context limit: an adapter does not know the arm's budgets, and sums of such counts over billions
# of calls still fit the ledger's BIGINT.
USAGE_CEILING = 2**30
# How a call whose answer reported impossible usage is recorded: status bad_response, its error starting so.
IMPOSSIBLE_USAGE = "impossible usage"


class ImpossibleUsage(ValueError):
    """An answer's usage that no server could have counted (see Usage.impossibility); the message says why."""


class ToolCall(BaseModel):
    id: str
    name: str
    arguments: str  # the raw JSON text the model produced; the sandbox decides what malformed means


AttemptStatus = Literal["ok", "http_error", "timeout", "connection_error", "bad_response", "cancelled"]


class CallAttempt(BaseModel):
    """One HTTP request to the endpoint. A turn may take several (retries, fallbacks); each keeps its tokens."""

    attempt: int
    model: str  # the model or deployment that answered (a router's fallback shows here)
    status: AttemptStatus
    http_status: int | None = None
    error: str | None = None
    usage: Usage = Field(default_factory=Usage)
    started_at: datetime = Field(default_factory=utcnow)
    latency_sec: float = 0.0
    ttft_sec: float | None = None
    finish_reason: str | None = None
    request_id: str | None = None
    router_cost_usd: float | None = None  # what the router itself said this call cost
    router_cost_detail: dict[str, Any] | None = None  # its parts (input/output/reasoning, margin) when given
    router_retries: int | None = None  # retries and fallbacks the router made behind this one request
    router_fallbacks: int | None = None
    router_model: str | None = None  # the model name (group) the router says answered: a fallback's differs
    router_deployment: str | None = None  # the router's id of the deployment that answered
    answer_truncated_chars: int = 0  # characters cut from the answer's fields past their caps (adapters.answers)
    call_key: str | None = None  # our id of this request, sent to routers that log it (see CallIntent)


class CallIntent(BaseModel):
    """A request about to be sent, announced before it leaves: if the process dies before its answer is recorded,
    the intent is what says a call may have been served (and billed), and how big it could have been."""

    call_key: str  # unique per request; a router that logs request ids (litellm's x-litellm-call-id) keeps it
    attempt: int
    model: str
    request_bytes: int  # the JSON body's size: an upper bound on its prompt tokens
    max_tokens: int | None  # the completion cap the request carries (None: it carries none)
    sent_at: datetime = Field(default_factory=utcnow)


IntentSink = Callable[[CallIntent], Awaitable[None]]
# Who keeps this task's intents (an episode's recorder). A context variable because one adapter serves an arm's
# concurrent episodes, each in its own task: the sink reaches the adapter's send without a parameter of `chat`.
CALL_INTENTS: ContextVar[IntentSink | None] = ContextVar("leafcost_call_intents", default=None)


def new_call_key() -> str:
    return "leafcost-" + uuid.uuid4().hex


async def announce(intent: CallIntent) -> None:
    """Hands the intent to this task's sink and returns once it is kept; a sink that fails stops the send."""
    sink = CALL_INTENTS.get()
    if sink is not None:
        await sink(intent)


class Turn(BaseModel):
    """One assistant turn as the episode loop needs it."""

    content: str | None = None
    reasoning: str | None = None
    tool_calls: list[ToolCall] = Field(default_factory=list)
    finish_reason: str | None = None
    usage: Usage = Field(default_factory=Usage)  # of the answering attempt
    attempts: list[CallAttempt] = Field(default_factory=list)  # every attempt, the answering one last
    latency_sec: float = 0.0  # wall time of the whole turn, retries included
    model: str = ""
    request_extras: dict[str, Any] = Field(default_factory=dict)  # fields the adapter added to the request
    truncated_chars: dict[str, int] = Field(default_factory=dict)  # field -> characters cut past its cap


AdapterErrorKind = Literal["unreachable", "configuration", "rate_limited", "server_error", "timeout", "bad_response",
                           "bad_request", "deadline"]
INFRASTRUCTURE_KINDS = frozenset({"unreachable", "rate_limited", "server_error", "timeout"})
# The arm is set up wrong (a refused or missing key, an unknown model, a wrong URL): never the model's miss,
# never retried, and every further call of the arm would fail the same way.
CONFIGURATION_KINDS = frozenset({"configuration"})


class AdapterError(Exception):
    """A turn that could not be had. `attempts` keeps every request made, so their tokens are never lost."""

    def __init__(self, kind: AdapterErrorKind, message: str, attempts: list[CallAttempt] | None = None):
        super().__init__(message)
        self.kind = kind
        self.attempts = attempts or []

    @property
    def infrastructure(self) -> bool:
        """The endpoint failed us (the episode may be rerun), as opposed to refusing this request."""
        return self.kind in INFRASTRUCTURE_KINDS

    @property
    def configuration(self) -> bool:
        """The arm is misconfigured (key, model name, URL): the fix is in the spec or the environment."""
        return self.kind in CONFIGURATION_KINDS


class Lease(BaseModel):
    """Hardware paid by the hour for a self-hosted arm: a GPU lease, or the CPU machine of the local arm."""

    kind: Literal["gpu", "cpu"]
    hardware: str
    count: int = 1
    usd_per_hour: float
    started_at: datetime = Field(default_factory=utcnow)
    ended_at: datetime | None = None


class ServerSample(BaseModel):
    """One scrape of a server's Prometheus metrics: sample name with labels → value."""

    taken_at: datetime = Field(default_factory=utcnow)
    values: dict[str, float]


class ArmStart(BaseModel):
    """What an adapter learned when its arm started (probed before any episode runs)."""

    endpoint: str
    served_model: str | None = None
    server_info: dict[str, Any] | None = None
    model_info: dict[str, Any] | None = None
    lease: Lease | None = None
    config: dict[str, Any] = Field(default_factory=dict)  # what this adapter forces or adds (recorded)
    warnings: list[str] = Field(default_factory=list)


class Adapter(Protocol):
    """A model endpoint. `start` fails with AdapterError before any episode if the endpoint is unusable."""

    async def start(self) -> ArmStart: ...

    async def chat(self, messages: list[dict[str, Any]], tools: list[dict[str, Any]], *,
                   max_tokens: int | None = None, deadline: float | None = None) -> Turn:
        """`deadline` is a `time.monotonic()` instant: past it the call is abandoned with kind `deadline`,
        its attempts recorded (this is how a wall-time budget is enforced during a slow call)."""
        ...

    async def sample_metrics(self) -> ServerSample | None: ...

    async def stop(self) -> Lease | None: ...
