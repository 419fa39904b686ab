"""Hosted models behind an OpenAI-compatible router (OrcaRouter, OpenRouter, a LiteLLM proxy): every router
speaks the OpenAI chat-completions protocol, so the arm sends it with the same aiohttp client as the sglang arm
(one JSON POST per attempt, our own retries so every attempt keeps its tokens) and keeps the router's own word on
cost, retries and fallbacks beside the tokens. litellm stays where it earns its place: the pinned price map
(compare.pricing), not the request path (it cost ~6 ms of CPU per call and seconds of import)."""

from __future__ import annotations

import json
import os
from typing import Any
from urllib.parse import urlencode

from pydantic import BaseModel

from adapters.base import AdapterError, ArmStart, CallAttempt, ServerSample
from adapters.openai_http import (REFUSED_KEY, OpenAICompatibleAdapter, check_listed, error_message,
                                  listed_models)
from adapters.scrubbing import DEFAULT_KEY_ENVS, redact_url, scrub_error, scrub_start

# Where the key comes from when the arm names no variable: the first of these that is set, in this order.
API_KEY_ENV_ORDER = DEFAULT_KEY_ENVS

# Sent as top-level fields every OpenAI-compatible router reads; the arm's other sampling fields go in the body
# too, as the router (and the model server behind it) reads them.
STANDARD_SAMPLING = frozenset({"temperature", "top_p", "presence_penalty", "frequency_penalty", "seed", "stop"})
PROTOCOL = "openai-chat-completions"
COST_HEADER = "x-litellm-response-cost"
CALL_ID_HEADER = "x-litellm-call-id"


class RouterAdapter(OpenAICompatibleAdapter):
    """A hosted arm: paid per token, so no lease and no server metrics. The model name is sent exactly as
    given (OpenRouter's `openai/gpt-5` keeps its prefix), the tool schemas unchanged."""

    def __init__(self, *, model: str, base_url: str | None, api_key_env: str | None = None,
                 sampling: dict[str, Any] | None = None, request_timeout_sec: float = 600.0, max_retries: int = 3,
                 allow_unlisted_model: bool = False):
        if not base_url:
            raise AdapterError("configuration", "the router arm has no base_url: set it to the router's OpenAI "
                               "endpoint, e.g. https://openrouter.ai/api/v1")
        self.api_key_env, key = resolve_api_key(api_key_env)
        sampling = dict(sampling or {})
        self.sampling = {k: v for k, v in sampling.items() if k in STANDARD_SAMPLING}
        # `usage.include` asks OpenRouter-style routers to report what the call cost.
        self.extra_body = {**{k: v for k, v in sampling.items() if k not in STANDARD_SAMPLING},
                           "usage": {"include": True}}
        super().__init__(base_url=base_url, model=model, api_key=key, body_extras={**self.sampling, **self.extra_body},
                         request_timeout_sec=request_timeout_sec, max_retries=max_retries,
                         allow_unlisted_model=allow_unlisted_model)

    def __repr__(self) -> str:
        return f"RouterAdapter(model={self.model!r}, base_url={self.endpoint!r}, key from ${self.api_key_env})"

    @property
    def endpoint(self) -> str:
        return redact_url(self.base_url)

    async def start(self) -> ArmStart:
        """Probes `/models` with the key, so an unreachable router, a refused key or a model the router does not
        list fails before any episode (`allow_unlisted_model` lets an unlisted name through, with a warning).
        Routers whose model list is public (OpenRouter's) only refuse a wrong key at the first call."""
        try:
            served = await self._get_models()
            warnings = check_listed(self.model, served, self.endpoint, self.allow_unlisted_model)
        except AdapterError as error:
            raise scrub_error(error, self.arm_secrets()) from None
        finally:
            await super().stop()  # the probe's connection belongs to this event loop; calls open their own
        start = ArmStart(endpoint=self.base_url, served_model=self.model if served and self.model in served else None,
                         config=self.recorded_config(), warnings=warnings)
        return scrub_start(start, self.arm_secrets())

    def recorded_config(self) -> dict[str, Any]:
        """What this adapter sends besides the conversation (the key never; the name of its variable, yes)."""
        return {"protocol": PROTOCOL, "transport": "aiohttp", "tool_choice": "auto", "parallel_tool_calls": True,
                "max_tokens_field": self.max_tokens_field, "sampling": self.sampling, "extra_body": self.extra_body,
                "max_retries": self.max_retries, "request_timeout_sec": self.request_timeout_sec,
                "api_key_env": self.api_key_env, "allow_unlisted_model": self.allow_unlisted_model}

    def request_body(self, messages: list[dict[str, Any]], tools: list[dict[str, Any]],
                     max_tokens: int | None) -> dict[str, Any]:
        body: dict[str, Any] = {"model": self.model, "messages": messages}
        if tools:  # OpenAI refuses tool_choice without tools
            body.update(tools=tools, tool_choice="auto", parallel_tool_calls=True)
        body.update(self.body_extras)
        if max_tokens:
            body[self.max_tokens_field] = max_tokens
        return body

    def call_headers(self, call_key: str) -> dict[str, str]:
        """litellm's proxy keeps this id as the request's `litellm_call_id` in its spend log, where a call whose
        answer a crash lost is found again (compare.reconcile); other routers ignore the header."""
        return {CALL_ID_HEADER: call_key}

    def describe(self, attempt: CallAttempt, kind: str) -> str:
        return super().describe(attempt, kind) + (self._advice(attempt) if kind == "configuration" else "")

    def read_answer(self, attempt: CallAttempt, headers: Any, data: dict[str, Any] | None) -> None:
        usage = (data or {}).get("usage")
        _record_router_facts(attempt, {str(k).lower(): str(v) for k, v in headers.items()},
                             usage if isinstance(usage, dict) else {})
        if attempt.request_id is None and data is not None and data.get("id") is not None:
            attempt.request_id = str(data["id"])

    async def sample_metrics(self) -> ServerSample | None:
        return None

    async def spend_log(self, call_key: str) -> SpendLog:
        """What the router's spend log holds for one request we sent (litellm's proxy: `GET /spend/logs?request_id=`
        matches its x-litellm-call-id), read with the arm's key. A router without that log (no database behind a
        LiteLLM proxy, or another router) answers an error: `entries` is then None, and `note` says why."""
        url = self.base_url.removesuffix("/v1") + "/spend/logs?" + urlencode({"request_id": call_key})
        where = redact_url(self.base_url.removesuffix("/v1")) + "/spend/logs"
        status, text = await self.get_text(url, shown=where)
        if status is None:
            return SpendLog(entries=None, note=self.scrub(text))
        if status != 200:
            return SpendLog(entries=None, note=self.scrub(f"{where}: HTTP {status}: {error_message(text)}"))
        try:
            rows = json.loads(text)
        except ValueError:
            return SpendLog(entries=None, note=f"{where}: not JSON")
        if not isinstance(rows, list):
            return SpendLog(entries=None, note=f"{where}: not a list of spend logs")
        entries = [_spend_entry(row) for row in rows if isinstance(row, dict)
                   and call_key in (row.get("request_id"), row.get("litellm_call_id"))]
        return SpendLog(entries=entries, note=f"{where}: {len(entries)} entr{'y' if len(entries) == 1 else 'ies'} "
                                              "for this request")

    async def stop(self) -> None:
        await super().stop()
        return None

    def _advice(self, attempt: CallAttempt) -> str:
        if attempt.http_status in (401, 403) or REFUSED_KEY.search(attempt.error or ""):
            return f" (the router refused the key from ${self.api_key_env}: check it, or set the arm's api_key_env)"
        return f" (check the arm's model {self.model!r} and base_url: the router does not serve it there)"

    async def _get_models(self) -> list[str] | None:
        """The model ids the router lists, or None when it does not list them (404, 405, no list)."""
        url = self.endpoint + "/models"
        status, text = await self.get_text(self.base_url + "/models", shown=self.endpoint)
        if status is None:
            raise AdapterError("unreachable", self.scrub(text))
        if status in (401, 403) or _refused_key_without_db(status, text):
            raise AdapterError("configuration", f"{url}: HTTP {status}: the router refused the key "
                               f"from ${self.api_key_env} (check the key, or set the arm's api_key_env)")
        if status in (404, 405):
            return None
        if status >= 400:
            raise AdapterError("unreachable", self.scrub(f"{url}: HTTP {status}: {error_message(text)}"))
        try:
            return listed_models(json.loads(text))
        except ValueError:
            raise AdapterError("bad_response", self.scrub(f"{url}: not JSON: {text[:200]!r}")) from None


class SpendEntry(BaseModel):
    """One row of a router's spend log: what it billed for a request, and the tokens it counted."""

    spend_usd: float | None
    prompt_tokens: int | None
    completion_tokens: int | None


class SpendLog(BaseModel):
    entries: list[SpendEntry] | None  # None: the router keeps no spend log we can read
    note: str


def _spend_entry(row: dict[str, Any]) -> SpendEntry:
    return SpendEntry(spend_usd=_number(row.get("spend")), prompt_tokens=_count(row.get("prompt_tokens")),
                      completion_tokens=_count(row.get("completion_tokens")))


def _refused_key_without_db(status: int, text: str) -> bool:
    """A LiteLLM proxy with no database can only check its master key: any other key is answered with HTTP 400
    `no_db_connection` (litellm 1.110.2), which means the key was refused, not that the router is down."""
    if status != 400:
        return False
    try:
        error = json.loads(text).get("error") or {}
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
