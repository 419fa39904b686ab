"""The fake SGLang server's application, apart from any HTTP framework: routes, auth, the turn each request gets
(per scripted task: which of its conversations resolve), usage with a coarse prefix cache, error injection, delays
and hangs, and what was received.

`ScriptedApp.handle` takes an `Incoming` request and gives a `Reply`; `serving` puts it behind a socket.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import re
import time
import uuid
from dataclasses import dataclass, field
from typing import Any, Awaitable, Callable

from support.sglang_fake import shapes
from support.sglang_fake.metrics import Answer, Metrics
from support.sglang_fake.script import Branch, Script, TaskScript, ToolCallSpec, TurnSpec, UsageSpec

__all__ = ["Incoming", "RecordedRequest", "Reply", "ScriptedApp"]

_ASSISTANT = re.compile(rb'"role"\s*:\s*"assistant"')
_STREAM_TRUE = re.compile(rb'"stream"\s*:\s*true')
_MODEL = re.compile(rb'"model"\s*:\s*"([^"\\]*)"')
_NO_AUTH_PREFIXES = ("/health", "/metrics", "/_scripted/")  # SGLang's api-key middleware skips health and metrics


@dataclass
class Incoming:
    """A request as the HTTP layer hands it over: header names lower-cased, the body whole."""

    method: str
    path: str
    query: str
    headers: dict[str, str]
    body: bytes


@dataclass
class Reply:
    status: int
    body: bytes = b""
    content_type: str | None = "application/json"
    headers: dict[str, str] = field(default_factory=dict)
    stream: bool = False  # sent chunked, as SGLang's StreamingResponse sends SSE


@dataclass
class RecordedRequest:
    """A request as the server received it: header names lower-cased, the body parsed when it is JSON."""

    method: str
    path: str
    query: str
    headers: dict[str, str]
    body: Any = None
    raw: str | None = None  # the body text when it is not JSON
    received_at: float = 0.0


class ScriptedApp:
    """One server's state. Not thread-safe: it lives on the event loop that serves it."""

    def __init__(self, script: Script) -> None:
        self.script = script
        self.port = 0  # set by whoever listens; /get_server_info reports it
        self.started = time.time()
        self.waiting: set[asyncio.Task[Any]] = set()  # delayed and hanging answers, cancelled at shutdown
        self.recorded: list[RecordedRequest] = []
        self.counters = {"chat_requests": 0, "answers": 0, "errors": 0, "in_flight": 0}
        self.metrics = Metrics(script)
        self.server_args = shapes.server_args(script)
        self._attempt_counts: dict[str, int] = {}
        self.task_conversations: dict[str, dict[str, int]] = {}  # marker → conversations started per branch
        # a scripted task's first answer's tool-call ids → (marker, branch): how its later steps are told apart
        self._branch_by_call_id: dict[str, tuple[str, Branch]] = {}
        self._markers = sorted(script.tasks, key=len, reverse=True)  # longest first: it wins over its prefixes
        self._prefix_cache: set[bytes] = set()
        self._in_flight_prompt_tokens = 0
        self._instant = shapes.InstantTemplates(script.instant) if script.instant else None
        self._routes: dict[tuple[str, str], Callable[[Incoming], Reply | Awaitable[Reply]]] = {
            ("POST", "/v1/chat/completions"): self._chat,
            ("GET", "/v1/models"): self._models,
            ("GET", "/health"): self._health,
            ("GET", "/health_generate"): self._health,
            ("GET", "/get_model_info"): self._model_info,
            ("GET", "/get_server_info"): self._server_info,
            ("GET", "/metrics"): self._metrics,
            ("GET", "/_scripted/requests"): lambda _: _json(200, [vars(item) for item in self.recorded]),
            ("GET", "/_scripted/stats"): lambda _: _json(200, self.stats_snapshot()),
        }
        self._route_paths = {path for _, path in self._routes}

    def stats_snapshot(self) -> dict[str, Any]:
        """Counters: chat requests received, answers and errors sent, requests in flight; and per scripted task
        (`tasks`, by marker) the conversations started on each branch."""
        return {**self.counters, "tasks": {marker: dict(counts) for marker, counts in self.task_conversations.items()}}

    def handle(self, request: Incoming) -> Reply | Awaitable[Reply]:
        """A reply now, or an awaitable one for delayed and hanging turns."""
        if self._instant is None and not request.path.startswith("/_scripted/"):
            self._record(request)  # before auth: tests assert what a rejected client sent, too
        if self.script.auth is not None and not request.path.startswith(_NO_AUTH_PREFIXES):
            if request.headers.get("authorization") != self.script.auth:
                return self._unauthorized()
        route = self._routes.get((request.method, request.path))
        if route is not None:
            return route(request)
        if request.method == "GET" and request.path.startswith("/v1/models/"):
            return self._model_card(request)
        if request.path in self._route_paths:
            return _json(405, {"detail": "Method Not Allowed"})
        return _json(404, {"detail": "Not Found"})

    # --- chat completions ---

    def _chat(self, request: Incoming) -> Reply | Awaitable[Reply]:
        started = time.perf_counter()
        self.counters["chat_requests"] += 1
        if self._instant is not None and not _STREAM_TRUE.search(request.body):
            return self._instant_answer(request, started)
        media_type = request.headers.get("content-type", "").split(";", 1)[0].strip().lower()
        if media_type != "application/json":
            return self._error(400, "Unsupported Media Type: Only 'application/json' is allowed")
        try:
            body = json.loads(request.body)
        except ValueError as error:
            return self._error(400, f"request body is not JSON: {error}")
        messages = body.get("messages") if isinstance(body, dict) else None
        if not isinstance(messages, list) or not messages or not all(isinstance(m, dict) for m in messages):
            return self._error(400, "`messages` must be a non-empty list of message objects")
        turn, opened = self._turn_for(messages)
        if turn.hang or turn.delay:
            return self._answer_later(turn, body, started, opened)
        return self._answer(turn, body, started, opened)

    def _instant_answer(self, request: Incoming, started: float) -> Reply:
        """No JSON parsing: the step is the count of assistant messages, the model a regex match."""
        assert self._instant is not None and self.script.instant is not None
        step = len(_ASSISTANT.findall(request.body))
        match = _MODEL.search(request.body)
        model = match.group(1).decode("utf-8", errors="replace") if match else "default"
        body = self._instant.render(step, model)
        instant = self.script.instant
        self.metrics.record(Answer(instant.prompt_tokens, 0, instant.completion_tokens, time.perf_counter() - started))
        self.counters["answers"] += 1
        return Reply(200, body)

    def _turn_for(self, messages: list[dict[str, Any]]) -> tuple[TurnSpec, tuple[str, Branch] | None]:
        """The turn this request gets, and the (marker, branch) of a scripted task's conversation it opens (step 0),
        whose answer's tool-call ids are then remembered."""
        step = _step(messages)
        if self.script.instant is not None:  # a streamed request in instant mode
            return _instant_turn(self.script, step), None
        marker = self._marker(messages)
        opened = None
        if marker is None:
            turn = self._script_turn(step)
        else:
            task = self.script.tasks[marker]
            branch = self._open_branch(marker, task) if step == 0 else self._branch_of(marker, messages)
            opened = (marker, branch) if step == 0 else None
            turns = task.turns(branch)
            turn = turns[min(step, len(turns) - 1)] if turns else TurnSpec(content="")
        return self._attempt_of(turn, messages), opened

    def _script_turn(self, step: int) -> TurnSpec:
        if step < len(self.script.turns):
            return self.script.turns[step]
        if isinstance(self.script.then, TurnSpec):
            return self.script.then
        return self.script.turns[-1] if self.script.turns else TurnSpec(content="")

    def _marker(self, messages: list[dict[str, Any]]) -> str | None:
        """The longest task marker in the conversation's first user message, if any."""
        if not self._markers:
            return None
        first_user = next((message for message in messages if message.get("role") == "user"), None)
        text = _text_of(first_user.get("content")) if first_user else ""
        return next((marker for marker in self._markers if marker in text), None)

    def _open_branch(self, marker: str, task: TaskScript) -> Branch:
        """A new conversation of the task: the first `resolve` of them resolve."""
        counts = self.task_conversations.setdefault(marker, {"resolving": 0, "missing": 0})
        branch: Branch = "resolving" if counts["resolving"] < task.resolve else "missing"
        counts[branch] += 1
        return branch

    def _branch_of(self, marker: str, messages: list[dict[str, Any]]) -> Branch:
        """A later step's branch, by the tool-call ids of the conversation's first answer; a conversation the server
        did not open (its first answer had no tool calls, or another server's) misses."""
        first_answer = next((message for message in messages if message.get("role") == "assistant"), {})
        for call in first_answer.get("tool_calls") or []:
            known = self._branch_by_call_id.get(call.get("id")) if isinstance(call, dict) else None
            if known is not None and known[0] == marker:
                return known[1]
        return "missing"

    def _attempt_of(self, turn: TurnSpec, messages: list[dict[str, Any]]) -> TurnSpec:
        if turn.attempts is not None:
            key = hashlib.sha1(_canonical(messages)).hexdigest()
            seen = self._attempt_counts.get(key, 0)
            self._attempt_counts[key] = seen + 1
            turn = turn.attempts[min(seen, len(turn.attempts) - 1)]
        return turn

    async def _answer_later(self, turn: TurnSpec, body: dict[str, Any], started: float,
                            opened: tuple[str, Branch] | None) -> Reply:
        """A delayed or hanging answer: it counts as running (sglang:num_running_reqs) while it waits."""
        task = asyncio.current_task()
        assert task is not None
        self.waiting.add(task)
        prompt_estimate = sum(_message_chars(message) for message in body["messages"]) // 4 + 1
        self.counters["in_flight"] += 1
        self._in_flight_prompt_tokens += prompt_estimate
        try:
            if turn.hang:
                await asyncio.Event().wait()  # until the client disconnects (the task is cancelled) or shutdown
            await asyncio.sleep(turn.delay)
        finally:
            self.counters["in_flight"] -= 1
            self._in_flight_prompt_tokens -= prompt_estimate
            self.waiting.discard(task)
        return self._answer(turn, body, started, opened)

    def _answer(self, turn: TurnSpec, body: dict[str, Any], started: float,
                opened: tuple[str, Branch] | None = None) -> Reply:
        if turn.status is not None:
            return self._error(turn.status, turn.message or f"scripted {turn.status} {shapes.reason(turn.status)}",
                               headers=_error_headers(turn))
        if turn.garbage is not None:
            self.counters["answers"] += 1
            return Reply(200, turn.garbage.encode(), headers=dict(turn.headers))
        content: str | None = turn.content if turn.content_given else ""
        finish_reason = turn.finish_reason
        if turn.flood_chars is not None:
            content = ("flood " * (turn.flood_chars // 6 + 1))[:turn.flood_chars]
            finish_reason = finish_reason or "length"
        tool_calls = [shapes.tool_call(spec, index) for index, spec in enumerate(turn.tool_calls)]
        if opened is not None:
            self._branch_by_call_id.update((call["id"], opened) for call in tool_calls)
        finish_reason = finish_reason or ("tool_calls" if tool_calls else "stop")
        usage = self._usage(turn, body, content, tool_calls)
        model = body.get("model") if isinstance(body.get("model"), str) else "default"
        completion_id = f"chatcmpl-{uuid.uuid4().hex}"
        details = usage["prompt_tokens_details"]
        self.metrics.record(Answer(usage["prompt_tokens"], details["cached_tokens"] if details else 0,
                                   usage["completion_tokens"], time.perf_counter() - started))
        self.counters["answers"] += 1
        if body.get("stream"):
            include_usage = bool((body.get("stream_options") or {}).get("include_usage"))
            stream = shapes.sse_stream(completion_id, model, content, turn.reasoning, tool_calls, finish_reason,
                                       usage, include_usage=include_usage)
            return Reply(200, stream, "text/event-stream; charset=utf-8", dict(turn.headers), stream=True)
        message = {"role": "assistant", "content": content, "reasoning_content": turn.reasoning or None,
                   "tool_calls": tool_calls or None}
        return _json(200, shapes.chat_completion(completion_id, model, message, finish_reason, usage), turn.headers)

    def _usage(self, turn: TurnSpec, body: dict[str, Any], content: str | None,
               tool_calls: list[dict[str, Any]]) -> dict[str, Any]:
        given = turn.usage or UsageSpec()
        if given.prompt_tokens is None or given.cached_tokens is None:
            prompt_tokens, cached_tokens = self._prompt_and_cached(body["messages"], body.get("tools"))
        else:
            prompt_tokens = cached_tokens = 0
        prompt_tokens = given.prompt_tokens if given.prompt_tokens is not None else prompt_tokens
        cached_tokens = (given.cached_tokens if given.cached_tokens is not None
                         else min(cached_tokens, prompt_tokens - 1))
        reasoning = turn.reasoning or ""
        answer_chars = len(content or "") + len(reasoning) + sum(
            len(call["function"]["name"]) + len(call["function"]["arguments"]) for call in tool_calls)
        completion_tokens = given.completion_tokens if given.completion_tokens is not None else answer_chars // 4 + 1
        reasoning_tokens = (given.reasoning_tokens if given.reasoning_tokens is not None
                            else min(-(-len(reasoning) // 4), completion_tokens))
        usage = shapes.usage_info(prompt_tokens, completion_tokens, max(cached_tokens, 0), reasoning_tokens,
                                  cache_report=bool(self.server_args.get("enable_cache_report")))
        if turn.cost is not None:
            usage["cost"] = turn.cost
        return usage

    def _prompt_and_cached(self, messages: list[dict[str, Any]], tools: Any) -> tuple[int, int]:
        """Prompt tokens ≈ characters // 4 + 1 (tools included); cached = the longest message-aligned prefix
        (tools first, as a chat template puts them) already seen in an earlier request: a radix cache, coarsely."""
        digest = hashlib.sha1(_canonical(tools) if tools else b"")
        chars = len(json.dumps(tools)) if tools else 0
        cached_chars = chars if tools and digest.digest() in self._prefix_cache else 0
        prefixes = [digest.digest()]
        for message in messages:
            digest.update(_canonical(message))
            chars += _message_chars(message)
            prefix = digest.digest()
            if prefix in self._prefix_cache:
                cached_chars = chars
            prefixes.append(prefix)
        if len(self._prefix_cache) > 1_000_000:
            self._prefix_cache.clear()
        self._prefix_cache.update(prefixes)
        return chars // 4 + 1, cached_chars // 4

    # --- errors and auth ---

    def _error(self, status: int, message: str, headers: dict[str, str] | None = None) -> Reply:
        self.counters["errors"] += 1
        return _json(status, shapes.error_body(status, message, self.script.error_style), headers)

    def _unauthorized(self) -> Reply:
        if self.script.error_style == "sglang":
            self.counters["errors"] += 1
            return _json(401, {"error": "Unauthorized"})
        return self._error(401, "Incorrect API key provided (the Authorization header does not match).")

    # --- SGLang's other endpoints ---

    def _models(self, request: Incoming) -> Reply:
        return _json(200, {"object": "list", "data": [self._card(self.script.served_name)]})

    def _model_card(self, request: Incoming) -> Reply:
        name = request.path[len("/v1/models/"):]
        if name != self.script.served_name:
            return _json(404, {"error": {"message": f"The model '{name}' does not exist",
                                         "type": "invalid_request_error", "param": "model",
                                         "code": "model_not_found"}})
        return _json(200, self._card(name))

    def _card(self, name: str) -> dict[str, Any]:
        return {"id": name, "object": "model", "created": int(self.started), "owned_by": "sglang", "root": name,
                "parent": None, "max_model_len": self.server_args.get("context_length")}

    def _health(self, request: Incoming) -> Reply:
        return Reply(self.script.health_status, content_type=None)

    def _model_info(self, request: Incoming) -> Reply:
        return _json(200, {
            "model_path": self.server_args.get("model_path"),
            "tokenizer_path": self.server_args.get("tokenizer_path"),
            "is_generation": not self.server_args.get("is_embedding", False),
            "preferred_sampling_params": self.server_args.get("preferred_sampling_params"),
            "weight_version": self.server_args.get("weight_version", "default"),
        })

    def _server_info(self, request: Incoming) -> Reply:
        internal = {"last_gen_throughput": self.metrics.last_gen_throughput,
                    "memory_usage": {"weight": 7.6, "kvcache": 58.3, "token_capacity": self.metrics.token_capacity,
                                     "graph": 1.1},
                    "avg_spec_accept_length": None}
        scheduler_info = {"max_total_num_tokens": self.metrics.token_capacity,
                          "max_req_input_len": int(self.server_args.get("context_length") or 0) - 1}
        return _json(200, {**self.server_args, "port": self.port, **scheduler_info,
                           "internal_states": [internal], "version": self.script.version})

    def _metrics(self, request: Incoming) -> Reply:
        if not self.script.metrics:
            return _json(404, {"detail": "Not Found"})
        text = self.metrics.render(self.counters["in_flight"], self._in_flight_prompt_tokens)
        return Reply(200, text.encode(), "text/plain; version=0.0.4; charset=utf-8")

    def _record(self, request: Incoming) -> None:
        body: Any = None
        raw: str | None = None
        if request.body:
            try:
                body = json.loads(request.body)
            except ValueError:
                raw = request.body.decode("utf-8", errors="replace")
        self.recorded.append(RecordedRequest(request.method, request.path, request.query, dict(request.headers),
                                             body, raw, time.time()))


def _instant_turn(script: Script, step: int) -> TurnSpec:
    instant = script.instant
    assert instant is not None
    usage = UsageSpec(prompt_tokens=instant.prompt_tokens, completion_tokens=instant.completion_tokens,
                      cached_tokens=0, reasoning_tokens=0)
    if step < instant.steps:
        return TurnSpec(tool_calls=[ToolCallSpec(name=instant.tool, arguments=instant.arguments)], usage=usage)
    return TurnSpec(content=instant.final, usage=usage)


def _step(messages: list[dict[str, Any]]) -> int:
    """The turn index: 0 for a fresh conversation (system + user only), else the number of assistant messages."""
    return sum(1 for message in messages if message.get("role") == "assistant")


def _text_of(content: Any) -> str:
    """A message's text: the string, or its text parts joined."""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "\n".join(str(part.get("text") or "") for part in content if isinstance(part, dict))
    return ""


def _canonical(value: Any) -> bytes:
    return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False).encode()


def _message_chars(message: dict[str, Any]) -> int:
    content = message.get("content")
    if isinstance(content, str):
        chars = len(content)
    elif isinstance(content, list):
        chars = sum(len(part.get("text") or "") for part in content if isinstance(part, dict))
    else:
        chars = 0
    chars += len(message.get("reasoning_content") or "") + 4  # role and delimiters
    for call in message.get("tool_calls") or []:
        function = call.get("function") if isinstance(call, dict) else None
        if not isinstance(function, dict):
            continue
        arguments = function.get("arguments") or ""
        chars += len(str(function.get("name") or "")) + len(arguments if isinstance(arguments, str)
                                                             else json.dumps(arguments))
    return chars


def _error_headers(turn: TurnSpec) -> dict[str, str]:
    headers = dict(turn.headers)
    if turn.retry_after is not None:
        retry_after = turn.retry_after
        headers["retry-after"] = str(int(retry_after)) if retry_after == int(retry_after) else str(retry_after)
    return headers


def _json(status: int, payload: Any, headers: dict[str, str] | None = None) -> Reply:
    return Reply(status, json.dumps(payload, ensure_ascii=False).encode(), headers=dict(headers or {}))
