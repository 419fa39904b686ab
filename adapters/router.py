"""Hosted models behind an OpenAI-compatible router (OrcaRouter, OpenRouter, a LiteLLM proxy) through litellm's
async API: one request per attempt, our own retries so every attempt keeps its tokens, and the router's own word on
cost, retries and fallbacks kept beside the tokens. litellm is imported on first use: its import costs seconds."""

from __future__ import annotations

import asyncio
import json
import logging
import os
import re
import time
from functools import lru_cache
from types import ModuleType
from typing import Any

import httpx
from pydantic import SecretStr

from adapters.base import AdapterError, ArmStart, CallAttempt, ServerSample, ToolCall, Turn
from adapters.openai_http import (MAX_RETRY_AFTER_SEC, REFUSED_KEY, check_listed, error_message, fail_attempt,
                                  listed_models, open_attempt, parse_usage, past_deadline, retry_turn)
from adapters.scrubbing import DEFAULT_KEY_ENVS, redact_url, scrub, scrub_error, scrub_start, url_secrets

# Where the key comes from when the arm names no variable: the first of these that is set, in this order.
API_KEY_ENV_ORDER = DEFAULT_KEY_ENVS

# litellm's `openai` route applies OpenAI's per-model rules by name to whatever the router serves: it refuses
# top_p or temperature for any name containing "gpt-5", drops parallel_tool_calls and rewrites the system message
# as a user message for o-series names, and strips an `openai/` prefix OpenRouter needs. `hosted_vllm` sends the
# model name, sampling, tool_choice and max_completion_tokens as given (checked on litellm 1.110.2). It does remove
# `additionalProperties: false` and `strict` from tool schemas, which Leaf's tools do not use.
PROVIDER_ROUTE = "hosted_vllm"
STANDARD_SAMPLING = frozenset({"temperature", "top_p", "presence_penalty", "frequency_penalty", "seed", "stop"})
COST_HEADER = "x-litellm-response-cost"


class RouterAdapter:
    """A hosted arm: paid per token, so no lease and no server metrics."""

    def __init__(self, *, model: str, base_url: str | None, api_key_env: str | None = None,
                 sampling: dict[str, Any] | None = None, request_timeout_sec: float = 600.0, max_retries: int = 3,
                 allow_unlisted_model: bool = False):
        if not base_url:
            raise AdapterError("configuration", "the router arm has no base_url: set it to the router's OpenAI "
                               "endpoint, e.g. https://openrouter.ai/api/v1")
        self.model = model
        self.base_url = base_url.rstrip("/")
        self.endpoint = redact_url(self.base_url)
        self.request_timeout_sec = request_timeout_sec
        self.max_retries = max_retries
        self.allow_unlisted_model = allow_unlisted_model
        self.api_key_env, key = resolve_api_key(api_key_env)
        self._api_key = SecretStr(key)
        self._secrets = SecretStr(json.dumps([key, *url_secrets(self.base_url)]))
        sampling = dict(sampling or {})
        self.sampling = {k: v for k, v in sampling.items() if k in STANDARD_SAMPLING}
        # Non-standard fields go in the body as the router reads them; `usage.include` asks OpenRouter-style
        # routers to report what the call cost.
        self.extra_body = {**{k: v for k, v in sampling.items() if k not in STANDARD_SAMPLING},
                           "usage": {"include": True}}

    def __repr__(self) -> str:
        return f"RouterAdapter(model={self.model!r}, base_url={self.endpoint!r}, key from ${self.api_key_env})"

    @property
    def secrets(self) -> list[str]:
        """The key and the base URL's credentials: what `scrub` removes from every text this adapter gives out."""
        return json.loads(self._secrets.get_secret_value())

    async def start(self) -> ArmStart:
        """Probes `/models` with the key, so an unreachable router, a refused key or a model the router does not
        list fails before any episode (`allow_unlisted_model` lets an unlisted name through, with a warning).
        Routers whose model list is public (OpenRouter's) only refuse a wrong key at the first call."""
        try:
            served = await self._get_models()
            warnings = check_listed(self.model, served, self.endpoint, self.allow_unlisted_model)
        except AdapterError as error:
            raise scrub_error(error, self.secrets) from None
        _litellm()  # its seconds of import belong to the arm's start, not to the first episode's time budget
        start = ArmStart(endpoint=self.base_url, served_model=self.model if served and self.model in served else None,
                         config=self.recorded_config(), warnings=warnings)
        return scrub_start(start, self.secrets)

    def recorded_config(self) -> dict[str, Any]:
        """What this adapter sends besides the conversation (the key never; the name of its variable, yes)."""
        return {"provider_route": PROVIDER_ROUTE, "litellm_model": f"{PROVIDER_ROUTE}/{self.model}",
                "tool_choice": "auto", "parallel_tool_calls": True, "max_tokens_field": "max_completion_tokens",
                "sampling": self.sampling, "extra_body": self.extra_body, "litellm_retries": 0,
                "max_retries": self.max_retries, "request_timeout_sec": self.request_timeout_sec,
                "api_key_env": self.api_key_env, "allow_unlisted_model": self.allow_unlisted_model,
                "litellm_version": _litellm_version()}

    async def chat(self, messages: list[dict[str, Any]], tools: list[dict[str, Any]], *,
                   max_tokens: int | None = None, deadline: float | None = None) -> Turn:
        litellm = _litellm()
        options = self._request_options(tools, max_tokens)

        def describe(attempt: CallAttempt, kind: str) -> str:
            return f"{self.endpoint}: {attempt.error}{self._advice(attempt) if kind == 'configuration' else ''}"

        turn = await retry_turn(lambda number: self._attempt(litellm, number, messages, options, deadline),
                                max_retries=self.max_retries, deadline=deadline, describe=describe,
                                scrub=self._scrub)
        return turn.model_copy(update={"request_extras": self._request_extras(options)})

    async def sample_metrics(self) -> ServerSample | None:
        return None

    async def stop(self) -> None:
        return None

    def _request_options(self, tools: list[dict[str, Any]], max_tokens: int | None) -> dict[str, Any]:
        options: dict[str, Any] = {
            "model": f"{PROVIDER_ROUTE}/{self.model}", "custom_llm_provider": PROVIDER_ROUTE,
            "api_base": self.base_url, "num_retries": 0, "max_retries": 0, **self.sampling,
            "extra_body": self.extra_body}
        if tools:  # OpenAI refuses tool_choice without tools
            options.update(tools=tools, tool_choice="auto", parallel_tool_calls=True)
        if max_tokens:
            options["max_completion_tokens"] = max_tokens
        return options

    def _request_extras(self, options: dict[str, Any]) -> dict[str, Any]:
        """The body fields besides model, messages and tools, as the router receives them."""
        sent = {k: v for k, v in options.items() if k in STANDARD_SAMPLING or k in
                {"tool_choice", "parallel_tool_calls", "max_completion_tokens"}}
        return {**sent, **self.extra_body}

    async def _attempt(self, litellm: ModuleType, number: int, messages: list[dict[str, Any]],
                       options: dict[str, Any], deadline: float | None
                       ) -> tuple[CallAttempt, Turn | None, float | None]:
        attempt, clock, timeout = open_attempt(number, self.model, self.request_timeout_sec, deadline)
        try:
            # litellm copies `messages` before its own edits (dropping a null content, for one): history is safe.
            response = await asyncio.wait_for(
                litellm.acompletion(messages=messages, api_key=self._api_key.get_secret_value(), timeout=timeout,
                                    **options), timeout)
        except asyncio.TimeoutError:
            status = "cancelled" if past_deadline(deadline) else "timeout"
            return fail_attempt(attempt, clock, status, f"no answer within {timeout:.1f}s"), None, None
        except Exception as exc:  # litellm raises its own classes, not always the ones the failure deserves
            return self._failed_call(litellm, attempt, clock, exc, deadline, timeout)
        attempt.latency_sec = time.monotonic() - clock
        attempt.http_status = 200
        headers = _response_headers(getattr(response, "_hidden_params", None))
        usage_fields = _usage_fields(getattr(response, "usage", None))
        _record_router_facts(attempt, headers, usage_fields)
        attempt.request_id = headers.get("x-request-id") or getattr(response, "id", None)
        try:
            turn = _turn(response, usage_fields, self.model)
        except (ValueError, KeyError, TypeError, IndexError, AttributeError) as exc:
            attempt.status = "bad_response"
            attempt.error = self._scrub(f"unusable answer ({type(exc).__name__}: {str(exc)[:200]})")
            return attempt, None, None
        attempt.usage, attempt.finish_reason, attempt.model = turn.usage, turn.finish_reason, turn.model
        return attempt, turn, None

    def _failed_call(self, litellm: ModuleType, attempt: CallAttempt, clock: float, exc: Exception,
                     deadline: float | None, timeout: float) -> tuple[CallAttempt, None, float | None]:
        status, http_status = _classify(litellm, exc)
        if status == "timeout" and past_deadline(deadline):
            status = "cancelled"
        headers = _lower(getattr(exc, "litellm_response_headers", None))
        _record_router_facts(attempt, headers, {})
        attempt.http_status = http_status
        attempt.request_id = headers.get("x-request-id")
        if status in ("timeout", "cancelled"):
            error = f"no answer within {timeout:.1f}s"
        else:
            error = _failure_text(status, http_status, exc)
        fail_attempt(attempt, clock, status, self._scrub(error))
        return attempt, None, _retry_after(headers)

    def _advice(self, attempt: CallAttempt) -> str:
        if attempt.http_status in (401, 403) or REFUSED_KEY.search(attempt.error or ""):
            return f" (the router refused the key from ${self.api_key_env}: check it, or set the arm's api_key_env)"
        return f" (check the arm's model {self.model!r} and base_url: the router does not serve it there)"

    def _scrub(self, text: str) -> str:
        """A server may echo the key (of any length) or the URL's credentials in an error body: they never
        leave this adapter."""
        return scrub(text, self.secrets)

    async def _get_models(self) -> list[str] | None:
        """The model ids the router lists, or None when it does not list them (404, 405, no list)."""
        url = self.endpoint + "/models"
        headers = {"Authorization": f"Bearer {self._api_key.get_secret_value()}"}
        try:
            async with httpx.AsyncClient(timeout=httpx.Timeout(15.0, connect=10.0)) as client:
                response = await client.get(self.base_url + "/models", headers=headers)
        except httpx.HTTPError as exc:
            raise AdapterError("unreachable", self._scrub(f"{url}: {type(exc).__name__}: {exc}")) from None
        if response.status_code in (401, 403) or _refused_key_without_db(response):
            raise AdapterError("configuration", f"{url}: HTTP {response.status_code}: the router refused the key "
                               f"from ${self.api_key_env} (check the key, or set the arm's api_key_env)")
        if response.status_code in (404, 405):
            return None
        if response.status_code >= 400:
            raise AdapterError("unreachable", self._scrub(f"{url}: HTTP {response.status_code}: "
                                                          f"{error_message(response.text)}"))
        try:
            return listed_models(response.json())
        except ValueError:
            raise AdapterError("bad_response", self._scrub(f"{url}: not JSON: {response.text[:200]!r}")) from None


def _refused_key_without_db(response: httpx.Response) -> bool:
    """A LiteLLM proxy with no database can only check its master key: any other key is answered with HTTP 400
    `no_db_connection` (litellm 1.110.2), which means the key was refused, not that the router is down."""
    if response.status_code != 400:
        return False
    try:
        error = response.json().get("error") or {}
    except (ValueError, AttributeError):
        return False
    return isinstance(error, dict) and error.get("type") == "no_db_connection"


def resolve_api_key(api_key_env: str | None) -> tuple[str, str]:
    """(the variable's name, the key). The arm's own variable if it names one, else the first of
    API_KEY_ENV_ORDER that is set."""
    names = (api_key_env,) if api_key_env else API_KEY_ENV_ORDER
    for name in names:
        value = os.environ.get(name, "").strip()
        if value:
            return name, value
    if api_key_env:
        raise AdapterError("configuration", f"the arm reads its key from ${api_key_env}, which is not set: set "
                           f"{api_key_env}")
    raise AdapterError("configuration", "no router API key: set ROUTER_API_KEY (also read, in this order: "
                       f"{', '.join(API_KEY_ENV_ORDER[1:])}) or name the variable in the arm's api_key_env")


@lru_cache(maxsize=1)
def _litellm() -> ModuleType:
    """litellm, imported once, quiet, and never fetching a price map (prices come from the pinned local table)."""
    os.environ["LITELLM_LOCAL_MODEL_COST_MAP"] = "True"
    import litellm

    litellm.suppress_debug_info = True  # no "Provider List" / "Give Feedback" banners on stdout
    litellm.telemetry = False
    # Its background logging warns each time the event loop changes and repeats what our errors already say.
    logging.getLogger("LiteLLM").setLevel(logging.ERROR)
    return litellm


def _litellm_version() -> str:
    from importlib.metadata import version

    return version("litellm")


def _turn(response: Any, usage_fields: dict[str, Any], requested_model: str) -> Turn:
    choices = getattr(response, "choices", None)
    if not choices:
        raise ValueError("the answer has no choices")
    choice = choices[0]
    message = choice.message
    content = message.content
    if content is not None and not isinstance(content, str):
        raise TypeError("message.content is not a string")
    reasoning = getattr(message, "reasoning_content", None)
    calls = []
    for index, call in enumerate(message.tool_calls or []):
        name = call.function.name
        if not isinstance(name, str) or not name:
            raise ValueError("a tool call without a function name")
        calls.append(ToolCall(id=str(call.id or f"call_{index}"), name=name,
                              arguments=_arguments_text(call.function.arguments)))
    return Turn(content=content, reasoning=reasoning if isinstance(reasoning, str) else None, tool_calls=calls,
                finish_reason=choice.finish_reason, usage=parse_usage(usage_fields),
                model=str(getattr(response, "model", None) or requested_model))


def _usage_fields(usage: Any) -> dict[str, Any]:
    """The usage object as the server sent it (litellm keeps unknown fields such as OpenRouter's `cost`)."""
    if usage is None:
        return {}
    if isinstance(usage, dict):
        return usage
    return usage.model_dump()


def _arguments_text(arguments: Any) -> str:
    if arguments is None:
        return ""
    return arguments if isinstance(arguments, str) else json.dumps(arguments)


def _response_headers(hidden: Any) -> dict[str, str]:
    """The HTTP headers of a litellm answer, lower-cased. litellm 1.110.2 keeps them twice in `_hidden_params`:
    raw in `headers`, and in `additional_headers` with an `llm_provider-` prefix (what its own code reads)."""
    if not isinstance(hidden, dict):
        return {}
    headers = _lower(hidden.get("headers"))
    for name, value in _lower(hidden.get("additional_headers")).items():
        if name.startswith("llm_provider-"):
            headers[name.removeprefix("llm_provider-")] = value
    return headers


def _lower(headers: Any) -> dict[str, str]:
    if not headers:
        return {}
    try:
        return {str(k).lower(): str(v) for k, v in dict(headers).items()}
    except (TypeError, ValueError):
        return {}


def _record_router_facts(attempt: CallAttempt, headers: dict[str, str], usage: dict[str, Any]) -> None:
    """The router's own cost (a LiteLLM proxy's header and its parts, or OpenRouter's `usage.cost`) and the
    retries and fallbacks it made behind this one request."""
    header_cost = _number(headers.get(COST_HEADER))
    usage_cost = _number(usage.get("cost"))
    detail: dict[str, Any] = {}
    for name, value in headers.items():
        number = _number(value) if name.startswith(COST_HEADER + "-") else None
        if number is not None:
            detail[name.removeprefix(COST_HEADER + "-").replace("-", "_")] = number
    cost_details = usage.get("cost_details")
    if isinstance(cost_details, dict):
        detail.update({k: v for k, v in cost_details.items() if isinstance(v, (int, float))})
    if header_cost is not None and usage_cost is not None:
        detail["usage_cost"] = usage_cost
    cost = header_cost if header_cost is not None else usage_cost
    if cost is not None:
        detail["source"] = COST_HEADER if header_cost is not None else "usage.cost"
    attempt.router_cost_usd = cost
    attempt.router_cost_detail = detail or None
    attempt.router_retries = _count(headers.get("x-litellm-attempted-retries"))
    attempt.router_fallbacks = _count(headers.get("x-litellm-attempted-fallbacks"))
    attempt.router_model = headers.get("x-litellm-model-group") or None
    attempt.router_deployment = headers.get("x-litellm-model-id") or None


def _number(value: Any) -> float | None:
    if isinstance(value, bool) or value is None:
        return None
    try:
        number = float(value)
    except (TypeError, ValueError):
        return None
    return number if number == number and abs(number) != float("inf") else None


def _count(value: Any) -> int | None:
    number = _number(value)
    return int(number) if number is not None else None


def _classify(litellm: ModuleType, exc: Exception) -> tuple[str, int | None]:
    """(attempt status, HTTP status) from what actually happened, not from litellm's class: it reports a refused
    connection and an unparseable answer as InternalServerError 500 or APIConnectionError, and a 403 as APIError.
    An HTTP answer arrived exactly when the exception carries the response headers."""
    chain = _causes(exc)
    answered = getattr(exc, "litellm_response_headers", None) is not None
    status_code = getattr(exc, "status_code", None)
    status_code = status_code if isinstance(status_code, int) else None
    if any(isinstance(e, json.JSONDecodeError) for e in chain):
        return "bad_response", status_code if answered else None
    if answered:
        return ("http_error", status_code) if status_code and status_code >= 400 else ("bad_response", status_code)
    if any(isinstance(e, (litellm.Timeout, httpx.TimeoutException, TimeoutError)) for e in chain):
        return "timeout", None
    if any(isinstance(e, (httpx.TransportError, OSError)) for e in chain):
        return "connection_error", None
    if isinstance(exc, litellm.BadRequestError):
        return "http_error", None  # refused by litellm before sending: a bad request, not worth a retry
    return "bad_response", None  # an answer came that litellm could not turn into a completion


def _causes(exc: BaseException) -> list[BaseException]:
    chain: list[BaseException] = []
    current: BaseException | None = exc
    while current is not None and current not in chain and len(chain) < 20:
        chain.append(current)
        current = current.__cause__ or current.__context__
    return chain


def _failure_text(status: str, http_status: int | None, exc: Exception) -> str:
    """What went wrong in the server's own words when it sent an error body (kept whole enough for the episode
    to see "maximum context length"), else in the words of the failure underneath litellm's wrapping."""
    chain = _causes(exc)
    if status == "http_error" and http_status:
        return f"HTTP {http_status}: {_server_message(chain) or _litellm_line(exc)}"
    if status == "http_error":
        return f"litellm refused the request before sending it: {_litellm_line(exc)}"
    if status == "connection_error":
        deepest = [e for e in chain if isinstance(e, (OSError, httpx.TransportError))][-1]
        return f"{type(deepest).__name__}: {str(deepest)[:300]}"
    decode_error = next((e for e in chain if isinstance(e, json.JSONDecodeError)), None)
    if decode_error is not None:
        raw = str(exc).partition("Original Response: ")[2]
        return f"unusable answer (not JSON: {decode_error}): {raw[:200]!r}"
    return f"unusable answer ({_litellm_line(exc)})"


def _server_message(chain: list[BaseException]) -> str | None:
    for link in chain:
        response = getattr(link, "response", None)
        if isinstance(response, httpx.Response) and response.status_code >= 400:
            try:
                message = error_message(response.text)
            except Exception:  # an unread or streamed body
                continue
            if message:  # litellm's own exceptions carry an empty stand-in response; the real one is deeper
                return message
    return None


_LITELLM_PREFIX = re.compile(r"^(?:(?:litellm\.)?\w+(?:Error|Exception)(?::| -)\s*)+")


def _litellm_line(exc: Exception) -> str:
    """litellm's message without its stacked class-name prefixes and the traceback it sometimes appends."""
    lines = str(exc).strip().splitlines()
    return _LITELLM_PREFIX.sub("", lines[0] if lines else type(exc).__name__)[:300]


def _retry_after(headers: dict[str, str]) -> float | None:
    value = _number(headers.get("retry-after"))
    return min(MAX_RETRY_AFTER_SEC, max(0.0, value)) if value is not None else None

