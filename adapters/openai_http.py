"""A plain async HTTP client for OpenAI-compatible chat endpoints (SGLang, llama.cpp's server): one request
per attempt, retries with backoff for what the endpoint can recover from, every attempt kept with its tokens.
No SDK: the harness's hot path is one JSON POST. aiohttp, because httpx costs 2.5-5 ms of CPU per request on
our 2-core machines (measured against the scripted server), a tenth of the harness's whole step budget."""

from __future__ import annotations

import asyncio
import errno
import json
import math
import random
import re
import socket
import time
from collections.abc import Awaitable, Callable
from typing import Any

import aiohttp
import yarl
from pydantic import SecretStr

from adapters.base import (IMPOSSIBLE_USAGE, INFRASTRUCTURE_KINDS, USAGE_CEILING, AdapterError, ArmStart,
                           CallAttempt, CallIntent, ImpossibleUsage, ServerSample, ToolCall, Turn, Usage, announce,
                           new_call_key, utcnow)
from adapters.answers import ANSWER_BODY_CAP_BYTES, answer_name, answer_text, valid_text
from adapters.scrubbing import redact_url, scrub, scrub_error, scrub_start, url_secrets

RETRY_STATUSES = {408, 409, 429, 500, 502, 503, 504}
# What is retried is what the endpoint failed us on (AdapterError.infrastructure), nothing the request itself caused.
RETRYABLE_KINDS = INFRASTRUCTURE_KINDS
MAX_BACKOFF_SEC = 10.0
MAX_RETRY_AFTER_SEC = 30.0
CONFIGURATION_STATUSES = {401, 403, 404}
# How routers and servers say that the model name is wrong (HTTP 400 or 404): litellm's proxy ("Invalid model
# name passed in model=X", "key not allowed to access model"), OpenRouter ("X is not a valid model ID", "No
# endpoints found for X"), OpenAI and vLLM ("The model `X` does not exist", code model_not_found).
UNKNOWN_MODEL = re.compile(
    r"invalid model|is not a valid model|model_not_found|unknown model|no such model|not allowed to access model"
    r"|no endpoints found|no allowed providers|model\b[^.\n]{0,120}?\b(?:does not exist|not found|is not supported"
    r"|is not available|not allowed)", re.IGNORECASE)
# A LiteLLM proxy without a database answers any key but its master key with HTTP 400 `no_db_connection`.
REFUSED_KEY = re.compile(r"no_db_connection|No connected db", re.IGNORECASE)
UNLISTED_ADVICE = "set allow_unlisted_model: true for routers that route unlisted names"


class OpenAICompatibleAdapter:
    """The shared core of the `sglang`, `router` and `local` adapters. The key is held as a SecretStr and put
    in the session's headers only: no attribute of the adapter shows it."""

    max_tokens_field = "max_completion_tokens"  # what Leaf sends; llama.cpp's server reads max_tokens

    def __init__(self, *, base_url: str, model: str, api_key: str | None = None,
                 body_extras: dict[str, Any] | None = None, request_timeout_sec: float = 600.0,
                 max_retries: int = 3, allow_unlisted_model: bool = False):
        self.base_url = base_url.rstrip("/")
        self.model = model
        self.body_extras = dict(body_extras or {})
        self.request_timeout_sec = request_timeout_sec
        self.max_retries = max_retries
        self.allow_unlisted_model = allow_unlisted_model
        self._api_key = SecretStr(api_key or "")
        self._session: aiohttp.ClientSession | None = None
        self._session_loop: asyncio.AbstractEventLoop | None = None

    @property
    def secrets(self) -> list[str]:
        key = self._api_key.get_secret_value()
        return [key] if key else []

    def arm_secrets(self) -> list[str]:
        """This arm's key and its URL's credentials (read each time: a local arm's URL is set at start)."""
        return self.secrets + url_secrets(self.base_url)

    def scrub(self, text: str) -> str:
        return scrub(text, self.arm_secrets())

    @property
    def endpoint(self) -> str:
        return redact_url(self.scrub(self.base_url))

    @property
    def session(self) -> aiohttp.ClientSession:
        """Created on first use, inside the running event loop (aiohttp sessions belong to one loop: another
        loop gets its own)."""
        loop = asyncio.get_running_loop()
        if self._session is None or self._session.closed or self._session_loop is not loop:
            headers = {"Content-Type": "application/json"}
            if self.secrets:
                headers["Authorization"] = f"Bearer {self.secrets[0]}"
            self._session = aiohttp.ClientSession(
                # Idle connections are dropped before uvicorn's 5 s keep-alive (SGLang, a LiteLLM proxy) closes
                # them: a reused connection the server already closed fails the call as a connection error.
                headers=headers, connector=aiohttp.TCPConnector(limit=0, ttl_dns_cache=300, keepalive_timeout=4.0),
                timeout=aiohttp.ClientTimeout(total=None, connect=10.0))
            self._session_loop = loop
        return self._session

    async def start(self) -> ArmStart:
        """Probes `/models` so an unreachable endpoint, a wrong key or a model the endpoint does not list fails
        before any episode starts (an endpoint that does not list its models is let through)."""
        try:
            served = await self._list_models()
            warnings = check_listed(self.model, served, self.endpoint, self.allow_unlisted_model)
        except AdapterError as error:
            raise scrub_error(error, self.arm_secrets()) from None
        start = ArmStart(endpoint=self.base_url, served_model=served[0] if served else None,
                         config={"body_extras": self.body_extras, "allow_unlisted_model": self.allow_unlisted_model},
                         warnings=warnings)
        return scrub_start(start, self.arm_secrets())

    def describe(self, attempt: CallAttempt, kind: str) -> str:
        """The message of the AdapterError a failed call ends in (a connection error names the endpoint already)."""
        if attempt.status == "connection_error":
            return attempt.error or ""
        return f"{self.endpoint}: {attempt.error}"

    def read_answer(self, attempt: CallAttempt, headers: Any, data: dict[str, Any] | None) -> None:
        """Whatever else an answer says about the call (a router's cost); `data` is None for an error answer."""

    def request_body(self, messages: list[dict[str, Any]], tools: list[dict[str, Any]],
                     max_tokens: int | None) -> dict[str, Any]:
        body: dict[str, Any] = {"model": self.model, "messages": messages, "tools": tools, "tool_choice": "auto",
                                "parallel_tool_calls": True, **self.body_extras}
        if max_tokens:
            body[self.max_tokens_field] = max_tokens
        return body

    async def chat(self, messages: list[dict[str, Any]], tools: list[dict[str, Any]], *,
                   max_tokens: int | None = None, deadline: float | None = None) -> Turn:
        body = self.request_body(messages, tools, max_tokens)
        payload = json.dumps(body).encode()
        turn = await retry_turn(lambda number: self._post(number, payload, deadline, max_tokens),
                                max_retries=self.max_retries,
                                deadline=deadline, describe=self.describe, scrub=self.scrub)
        return turn.model_copy(update={"request_extras": {k: v for k, v in body.items()
                                                           if k not in {"messages", "tools", "model"}}})

    async def sample_metrics(self) -> ServerSample | None:
        return None

    async def stop(self) -> None:
        if self._session is not None:
            await self._session.close()

    async def _list_models(self) -> list[str] | None:
        """The model ids `/models` lists, or None when the endpoint does not list them (404, 405, no list)."""
        url = self.endpoint + "/models"
        status, text = await self.get_text(self.base_url + "/models", shown=self.endpoint)
        if status is None:
            raise AdapterError("unreachable", self.scrub(text))
        if status in (401, 403) or (status == 400 and REFUSED_KEY.search(text)):
            raise AdapterError("configuration", f"{url}: HTTP {status}: the endpoint refused the key (check the "
                               "key, or set the arm's api_key_env)")
        if status in (404, 405):
            return None
        if status >= 400:
            raise AdapterError("unreachable", f"{url}: HTTP {status}: {self.scrub(error_message(text))}")
        try:
            return listed_models(json.loads(text))
        except ValueError:
            raise AdapterError("bad_response", f"{url}: not JSON: {self.scrub(text[:200])!r}") from None

    async def get_text(self, url: str, timeout: float = 15.0, shown: str | None = None) -> tuple[int | None, str]:
        """(status, body) of a GET, or (None, what went wrong and what to do) when the server could not be reached;
        `shown` is how that names the URL (default: the URL, credentials redacted)."""
        try:
            async with self.session.get(self._request_url(url),
                                        timeout=aiohttp.ClientTimeout(total=timeout)) as response:
                return response.status, await read_answer_body(response)
        except (aiohttp.ClientError, asyncio.TimeoutError, ValueError) as exc:  # ValueError: an unusable URL
            return None, connection_problem(shown or redact_url(url), exc)

    def _request_url(self, url: str) -> Any:
        """With a key, the URL's own credentials are dropped: the bearer key is the credential (aiohttp refuses
        both at once). Without one, aiohttp sends them as Basic auth."""
        if not self.secrets or "@" not in url:
            return url
        return yarl.URL(url).with_user(None)

    def call_headers(self, call_key: str) -> dict[str, str]:
        """Headers naming the request for the endpoint's own logs (a router's spend log); none by default."""
        return {}

    async def _post(self, number: int, payload: bytes, deadline: float | None,
                    max_tokens: int | None = None) -> tuple[CallAttempt, Turn | None, float | None]:
        # The intent is kept before the request leaves: a process killed mid-call leaves it without an answer.
        call_key = new_call_key()
        await announce(CallIntent(call_key=call_key, attempt=number, model=self.model, request_bytes=len(payload),
                                  max_tokens=max_tokens))
        attempt, clock, timeout = open_attempt(number, self.model, self.request_timeout_sec, deadline)
        attempt.call_key = call_key
        try:
            async with asyncio.timeout(timeout):
                async with self.session.post(self._request_url(self.base_url + "/chat/completions"),
                                             data=payload, headers=self.call_headers(call_key)) as response:
                    status, headers = response.status, response.headers
                    text = await read_answer_body(response)
        except TimeoutError:
            status_name = "cancelled" if past_deadline(deadline) else "timeout"
            return fail_attempt(attempt, clock, status_name, f"no answer within {timeout:.1f}s"), None, None
        except aiohttp.ClientError as exc:
            return fail_attempt(attempt, clock, "connection_error", connection_problem(self.endpoint, exc)), None, None
        except AnswerTooLarge as exc:  # never parsed: the attempt is the endpoint's error, its tokens unknown
            return fail_attempt(attempt, clock, "bad_response", str(exc)), None, None
        attempt.latency_sec = time.monotonic() - clock
        attempt.http_status = status
        attempt.request_id = answer_name(headers.get("x-request-id") or "") or None  # raw header bytes
        if status != 200:
            attempt.status = "http_error"
            attempt.error = f"HTTP {status}: {error_message(text)}"
            self.read_answer(attempt, headers, None)
            return attempt, None, _retry_after(headers.get("retry-after"))
        try:
            data = json.loads(text)
            turn = parse_completion(data, self.model)
        except ImpossibleUsage as exc:  # its own reason, counted apart (impossible_usage_calls) and never priced
            attempt.status = "bad_response"
            attempt.error = f"{IMPOSSIBLE_USAGE}: {exc}"
            return attempt, None, None
        except (ValueError, KeyError, TypeError, IndexError, AttributeError, OverflowError, RecursionError) as exc:
            attempt.status = "bad_response"  # any shape or type an endpoint can send: this call's error, no more
            attempt.error = valid_text(f"unusable answer ({type(exc).__name__}: {str(exc)[:200]}): {text[:200]!r}")
            return attempt, None, None
        attempt.usage, attempt.finish_reason, attempt.model = turn.usage, turn.finish_reason, turn.model
        attempt.answer_truncated_chars = sum(turn.truncated_chars.values())
        self.read_answer(attempt, headers, data)
        return attempt, turn, None


SendAttempt = Callable[[int], Awaitable[tuple[CallAttempt, Turn | None, float | None]]]


async def retry_turn(send: SendAttempt, *, max_retries: int, deadline: float | None,
                     describe: Callable[[CallAttempt, str], str], scrub: Callable[[str], str]) -> Turn:
    """Every adapter's retry policy: `send(attempt_number)` until a turn comes back; what the endpoint can
    recover from (429, 5xx, timeouts, refused connections) is retried with jittered backoff (Retry-After
    honoured) up to `max_retries`; the turn carries every attempt, and an AdapterError carries them too.
    Every attempt's error text and the error's message pass through `scrub` (the arm's secrets never leave)."""
    attempts: list[CallAttempt] = []
    started = time.monotonic()
    for number in range(1, max_retries + 2):
        if deadline is not None and time.monotonic() >= deadline:
            raise AdapterError("deadline", "the time budget ran out before the call", attempts)
        attempt, turn, retry_after = await send(number)
        if attempt.error:
            attempt.error = scrub(attempt.error)
        attempts.append(attempt)
        if turn is not None:
            return turn.model_copy(update={"attempts": attempts, "latency_sec": time.monotonic() - started})
        kind = error_kind(attempt)
        if kind not in RETRYABLE_KINDS or number > max_retries:
            raise AdapterError(kind, scrub(describe(attempt, kind)), attempts)  # type: ignore[arg-type]
        pause = min(MAX_BACKOFF_SEC, 0.5 * 2 ** (number - 1)) * (0.5 + random.random() / 2)
        pause = max(pause, retry_after or 0.0)
        if deadline is not None and time.monotonic() + pause >= deadline:
            raise AdapterError("deadline", "the time budget ran out while retrying", attempts)
        await asyncio.sleep(pause)
    raise AssertionError("unreachable")  # the loop always returns or raises


def parse_completion(data: Any, requested_model: str) -> Turn:
    """An OpenAI chat completion (SGLang, vLLM and llama.cpp spellings) as a Turn. Every string is made valid
    Unicode and capped (adapters.answers), the cuts counted in `truncated_chars`; a shape or a type no server
    sends raises TypeError, KeyError or IndexError (the call's bad_response)."""
    choices = _field(data, "choices", list, "the answer")
    choice = choices[0]
    message = _field(choice, "message", dict, "choices[0]")
    cut: dict[str, int] = {}
    calls = []
    raw_calls = message.get("tool_calls") or []  # servers send null, [] or leave it out
    if not isinstance(raw_calls, list):
        raise TypeError(f"message.tool_calls is a {type(raw_calls).__name__}, not a list")
    for index, call in enumerate(raw_calls):
        function = _field(call, "function", dict, f"tool_calls[{index}]")
        arguments, dropped = answer_text(_arguments_text(function.get("arguments")))
        if dropped:
            cut[f"tool_calls[{index}].arguments"] = dropped
        calls.append(ToolCall(id=answer_name(str(call.get("id") or f"call_{index}")),
                              name=answer_name(str(function["name"])), arguments=arguments))
    content = _field(message, "content", str, "message", optional=True)
    reasoning = message.get("reasoning_content") or message.get("reasoning")
    texts = {"content": content, "reasoning": reasoning if isinstance(reasoning, str) else None}
    for field, text in texts.items():
        if text is not None:
            texts[field], dropped = answer_text(text)
            if dropped:
                cut[field] = dropped
    finish_reason = _field(choice, "finish_reason", str, "choices[0]", optional=True)
    return Turn(content=texts["content"], reasoning=texts["reasoning"], tool_calls=calls,
                finish_reason=answer_name(finish_reason) if finish_reason is not None else None,
                usage=parse_usage(data.get("usage") or {}), truncated_chars=cut,
                model=answer_name(str(data.get("model") or requested_model)))


def _field(holder: Any, name: str, kind: type, where: str, *, optional: bool = False) -> Any:
    """`holder[name]`, checked to be a `kind` (None allowed when optional): garbage is named, never guessed at."""
    if not isinstance(holder, dict):
        raise TypeError(f"{where} is a {type(holder).__name__}, not an object")
    value = holder.get(name)
    if value is None and optional:
        return None
    if not isinstance(value, kind):
        shown = "missing" if value is None else f"a {type(value).__name__}"
        raise TypeError(f"{where}.{name} is {shown}, not a {kind.__name__}")
    if kind is list and not optional and not value:
        raise IndexError(f"{where}.{name} is empty")
    return value


def parse_usage(usage: Any) -> Usage:
    """Reads both SGLang's top-level `reasoning_tokens` and OpenAI's `completion_tokens_details`; cache writes
    as OpenRouter (`prompt_tokens_details.cache_write_tokens`) or litellm (`cache_creation_input_tokens`) say.
    A count that is not a whole number (a string, a bool, 1.5, NaN) or is impossible (Usage.impossibility)
    raises ImpossibleUsage: such an answer is the endpoint's error, never priced."""
    if not isinstance(usage, dict):
        raise ImpossibleUsage(f"usage is a {type(usage).__name__}, not an object")
    prompt_details = _details(usage, "prompt_tokens_details")
    completion_details = _details(usage, "completion_tokens_details")
    prompt = _token_count(usage, "prompt_tokens")
    completion = _token_count(usage, "completion_tokens")
    cache_write = (_token_count(prompt_details, "cache_write_tokens", "prompt_tokens_details.")
                   or _token_count(usage, "cache_creation_input_tokens"))
    reasoning = (_token_count(usage, "reasoning_tokens")
                 or _token_count(completion_details, "reasoning_tokens", "completion_tokens_details."))
    parsed = Usage(prompt_tokens=prompt, completion_tokens=completion,
                   cached_tokens=_token_count(prompt_details, "cached_tokens", "prompt_tokens_details."),
                   cache_write_tokens=cache_write, reasoning_tokens=reasoning,
                   total_tokens=_token_count(usage, "total_tokens") or prompt + completion)
    problem = parsed.impossibility()
    if problem is not None:
        raise ImpossibleUsage(problem)
    return parsed


def _details(usage: dict[str, Any], name: str) -> dict[str, Any]:
    details = usage.get(name)
    if not details:  # null, {} or [] say nothing
        return {}
    if not isinstance(details, dict):
        raise ImpossibleUsage(f"{name} is a {type(details).__name__}, not an object")
    return details


def _token_count(fields: dict[str, Any], name: str, prefix: str = "") -> int:
    """A count as a server sends it: a JSON integer (or an integral float such as 12.0); absent or null is 0."""
    value = fields.get(name)
    if value is None:
        return 0
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise ImpossibleUsage(f"{prefix}{name} is not a number: {str(value)[:40]!r}")
    if isinstance(value, float) and not (math.isfinite(value) and value.is_integer()):
        raise ImpossibleUsage(f"{prefix}{name} is not a whole number: {value!r}")
    count = int(value)
    if count < 0 or count > USAGE_CEILING:
        raise ImpossibleUsage(f"{prefix}{name} is {count}, outside 0..{USAGE_CEILING} (2**30, 500x the largest "
                              "context window)")
    return count


def _arguments_text(arguments: Any) -> str:
    if arguments is None:
        return ""
    return arguments if isinstance(arguments, str) else json.dumps(arguments)


class AnswerTooLarge(ValueError):
    """An HTTP answer past ANSWER_BODY_CAP_BYTES: not read further, never parsed."""


async def read_answer_body(response: aiohttp.ClientResponse) -> str:
    """The answer's text (UTF-8, undecodable bytes as U+FFFD), read to ANSWER_BODY_CAP_BYTES at most: aiohttp
    itself puts no bound on a body, so a 100 MB answer would otherwise be held whole (and then written)."""
    declared = response.content_length
    if declared is not None and declared > ANSWER_BODY_CAP_BYTES:
        raise AnswerTooLarge(_too_large(f"{declared} bytes declared"))
    body = bytearray()
    while chunk := await response.content.read(2**20):
        body += chunk
        if len(body) > ANSWER_BODY_CAP_BYTES:
            raise AnswerTooLarge(_too_large(f"over {ANSWER_BODY_CAP_BYTES} bytes sent"))
    return body.decode("utf-8", errors="replace")


def _too_large(what: str) -> str:
    return (f"answer too large ({what}): leafcost reads at most {ANSWER_BODY_CAP_BYTES // 2**20} MiB of an answer "
            "(adapters.answers.ANSWER_BODY_CAP_BYTES); the rest was not read")


def open_attempt(number: int, model: str, request_timeout_sec: float,
                 deadline: float | None) -> tuple[CallAttempt, float, float]:
    """A new attempt, the clock it is timed from, and how long it may take (never past the deadline)."""
    clock = time.monotonic()
    timeout = request_timeout_sec if deadline is None else min(request_timeout_sec, max(0.0, deadline - clock))
    return CallAttempt(attempt=number, model=model, status="ok", started_at=utcnow()), clock, timeout


def fail_attempt(attempt: CallAttempt, clock: float, status: str, error: str) -> CallAttempt:
    attempt.status = status  # type: ignore[assignment]
    attempt.error = error
    attempt.latency_sec = time.monotonic() - clock
    return attempt


def past_deadline(deadline: float | None) -> bool:
    """A timeout that fired at the deadline is the time budget's doing (`cancelled`), not the server's."""
    return deadline is not None and time.monotonic() >= deadline - 0.001


def error_kind(attempt: CallAttempt) -> str:
    if attempt.status == "cancelled":
        return "deadline"
    if attempt.status == "timeout":
        return "timeout"
    if attempt.status == "connection_error":
        return "unreachable"
    if attempt.status == "bad_response":
        return "bad_response"
    status = attempt.http_status or 0
    if status in CONFIGURATION_STATUSES:
        return "configuration"
    if status == 400 and attempt.error and (UNKNOWN_MODEL.search(attempt.error) or REFUSED_KEY.search(attempt.error)):
        return "configuration"
    if status == 429:
        return "rate_limited"
    if status in RETRY_STATUSES or status >= 500:
        return "server_error"
    return "bad_request"


def listed_models(data: Any) -> list[str] | None:
    """The ids of an OpenAI `/models` answer (`{"data": [{"id": ...}]}`), or None when it is not such a list."""
    entries = data.get("data") if isinstance(data, dict) else None
    if not isinstance(entries, list):
        return None
    return [str(m["id"]) for m in entries if isinstance(m, dict) and m.get("id") is not None]


def check_listed(model: str, served: list[str] | None, endpoint: str, allow_unlisted: bool) -> list[str]:
    """Start-time check of the arm's model against what the endpoint lists: an AdapterError("configuration")
    when it lists models and not this one, unless the arm allows unlisted names (then a warning)."""
    if served is None:
        return [f"{endpoint}/models does not list models: the model name {model!r} is first checked by the "
                "first call"]
    if not served or model in served:
        return []
    listing = (f"model {model!r} is not among the {len(served)} models the endpoint lists "
               f"(first few: {', '.join(served[:5])})")
    if allow_unlisted:
        return [f"{listing}; allow_unlisted_model is set, so the first call decides"]
    raise AdapterError("configuration", f"{endpoint}: {listing}; check the arm's model, or {UNLISTED_ADVICE}")


def error_message(text: str) -> str:
    """OpenAI's nested `{"error": {"message"}}`, SGLang's flat `{"message"}` or `{"error": "..."}`, or the text."""
    try:
        data = json.loads(text)
        error = data.get("error") or data
        message = error.get("message") if isinstance(error, dict) else error
        return str(message or text)[:300]
    except (ValueError, AttributeError):
        return text[:300]


def connection_problem(url: str, exc: BaseException) -> str:
    """A request to `url` that got no answer, said so that a person knows what to do (aiohttp's own words, "Cannot
    connect to host 127.0.0.1:9 ssl:default [...]", name neither the arm's URL nor the fix). The class of failure
    stays in the attempt's status (connection_error) and the error's kind (unreachable)."""
    why, fix = _why_unreachable(exc)
    return f"{'lost the connection to' if isinstance(exc, LOST) else 'cannot connect to'} {url} ({why}): {fix}"


CHECK_BASE_URL = "check the arm's base_url"
LOST = (aiohttp.ServerDisconnectedError, aiohttp.ClientPayloadError, ConnectionResetError)  # it answered, then went


def _why_unreachable(exc: BaseException) -> tuple[str, str]:
    """(what happened in a few words, what to do) for an exception of a request that got no answer."""
    beneath = getattr(exc, "os_error", exc)  # a ClientConnectorError holds the OS error beneath it
    if isinstance(exc, aiohttp.ClientSSLError):
        return "TLS failed", "check http:// or https:// in the arm's base_url, and the server's certificate"
    if isinstance(exc, aiohttp.ClientConnectorDNSError) or isinstance(beneath, socket.gaierror):
        return "no such host", "check the host name in the arm's base_url"
    if _refused(beneath):
        return "connection refused", f"is the server running? {CHECK_BASE_URL}"
    if isinstance(exc, TimeoutError):
        return "no answer in time", f"is the server up and reachable from this machine? {CHECK_BASE_URL}"
    if isinstance(exc, LOST):
        return "the server closed it", "is it restarting or out of memory? check its log"
    if isinstance(exc, ValueError):  # aiohttp.InvalidURL among them
        return "not a usable URL", CHECK_BASE_URL
    if isinstance(beneath, OSError) and beneath.strerror:
        return beneath.strerror.lower(), "check this machine's network and the arm's base_url"
    return f"{type(exc).__name__}: {str(exc)[:200]}", CHECK_BASE_URL


def _refused(error: BaseException) -> bool:
    """Refused, also when every address of a host refused (asyncio then raises one OSError listing them all)."""
    if isinstance(error, ConnectionRefusedError):
        return True
    return isinstance(error, OSError) and error.errno is None and f"[Errno {errno.ECONNREFUSED}]" in str(error)


def _retry_after(value: str | None) -> float | None:
    try:
        return min(MAX_RETRY_AFTER_SEC, float(value)) if value else None
    except ValueError:
        return None
