"""The HTTP API of a ledger (`leafcost serve`): its runs, episodes and model calls, and the figures of
`leafcost summary` / `compare` / `breakeven` as the very documents the CLI prints with `--json` (byte for byte:
both render with compare.summary.dumps), plus what-if scenarios written with a bearer token.

Reading: every request opens its own read-only connection and closes it, so a `leafcost run` can take the file
between requests. While a run writes the file DuckDB lets no other process open it: requests answer 503 with
the reason, except figures of a finished run already in memory (a finished run does not change).
Caching: the summary, comparison and break-even documents of a finished run are kept in memory (a small LRU);
an entry is served without touching the file while the file is unchanged on disk (size, mtime, inode of the
file and its WAL), and after a change it is checked once against the run's `updated_at`.
Errors are JSON `{"detail": ...}`: 404 unknown run/arm/episode/scenario, 422 bad parameters (FastAPI's shape,
our own checks included), 409 unfair comparison or busy ledger on a write, 401/403 writes without the right
token (refused before any byte of the body is read), 413 a write's body over WRITE_BODY_MAX_BYTES, 503 ledger
unreadable (busy, missing, newer schema). Never a 500 by design."""

from __future__ import annotations

import asyncio
import json
import math
import re
import secrets
import threading
from collections import OrderedDict
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import datetime
from importlib import metadata
from pathlib import Path
from typing import Annotated, Any, Literal

from fastapi import APIRouter, Depends, FastAPI, Query
from fastapi.encoders import jsonable_encoder
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse, Response
from fastapi.security import HTTPAuthorizationCredentials, HTTPBearer
from fastapi.security.utils import get_authorization_scheme_param
from starlette.datastructures import Headers
from starlette.types import ASGIApp, Message, Receive, Scope, Send
from pydantic import BaseModel, ConfigDict, Field

from compare.ledger import (
    LedgerAccess,
    LedgerBusy,
    LedgerError,
    fetch_rows,
    SecretInLedger,
    Stamp,
)
from compare.reprice import SCENARIO_NAME, PriceSheet
from compare.spec import Prices
from compare.stats import DEFAULT_RESAMPLES, DEFAULT_SEED
from compare.summary import SummaryError, dumps
from compare.trajectory_files import read_trajectory

API_TOKEN_ENV = "LEAFCOST_API_TOKEN"
MAX_RESAMPLES = 10_000  # the bootstrap's counts are resamples × tasks integers: bounded so no request exhausts memory
CACHE_ENTRIES = 128
WRITE_BODY_MAX_BYTES = 2**20  # a price sheet is a few hundred bytes; nothing bigger is read into memory
JSON = "application/json"


# ---------------------------------------------------------------------------------------------------------
# Response models (the documents' shapes, for the OpenAPI schema; figures are served as the CLI renders them)

class _Open(BaseModel):
    model_config = ConfigDict(extra="allow")  # documents may gain fields; the schema never forbids them


class ErrorDetail(BaseModel):
    detail: str


class UnfairDetail(BaseModel):
    detail: str
    differences: list[str]


class Health(BaseModel):
    status: Literal["ok"]
    ledger: str
    schema_version: int
    leafcost_version: str


class _RunFields(BaseModel):
    run_id: str
    name: str
    status: str
    created_at: datetime
    updated_at: datetime
    suite: str
    seeds: int


class RunItem(_RunFields):
    arms: list[str] = Field(description="arm names in the spec's order")
    tasks: int


class ArmRow(BaseModel):
    arm: str
    adapter: str
    model: str
    status: str = Field(description="ready, skipped, failed, finished, interrupted, or 'not started'")
    status_reason: str | None
    endpoint: str | None
    served_model: str | None
    config: dict[str, Any] | None
    warnings: list[str]
    started_at: datetime | None
    ended_at: datetime | None


class RunDetail(_RunFields):
    task_ids: list[str]
    spec: dict[str, Any]
    spec_sha256: str
    leafcost_version: str
    sandbox_options: dict[str, Any] | None
    arms: list[ArmRow]


class Estimate(_Open):
    value: float | None
    ci95: list[float] | None = Field(description="[2.5 %, 97.5 %] bootstrap percentiles, or null with a reason")
    reason: str | None = None


class CostParts(_Open):
    total: float | None
    tokens: float | None
    gpu: float
    sandbox: float | None = Field(description="null when no attempt's sandbox CPU was measured "
                                  "(sandbox_cost_reason says why)")


class LeaseDetail(_Open):
    kind: str
    hardware: str
    count: int
    usd_per_hour: float
    seconds: float
    cost_usd: float
    fully_loaded_usd: float
    marginal_usd: float | None
    saturation_tokens_per_sec: float | None
    saturation_source: str | None
    busy_seconds: float | None
    busy_counter: str | None = None  # which SGLang counter gave the busy seconds (its name changed in 0.5.11)
    busy_counter_reason: str | None = None
    weights: dict[str, Any]
    open: bool
    utilization_reason: str | None = None
    marginal_reason: str | None = None


class ArmSummary(_Open):
    arm: str
    kind: Literal["hosted", "self-hosted", "oracle"]
    adapter: str
    model: str
    status: str
    status_reason: str | None
    tasks: int
    seeds: int
    attempts: int
    attempts_including_retries: int
    resolved_attempts: int
    resolved_tasks: int
    avg_at_k: Estimate
    pass_at_k: dict[str, Estimate]
    pass_hat_k: dict[str, Estimate]
    harness_error_rate: float | None
    infra_error_rate: float | None
    parser_misconfigured_rate: float | None
    configuration_error_rate: float | None
    task_error_rate: float | None
    prompt_source: Literal["leafcost", "leaf-checkout"] | None  # None: the oracle sends no prompt
    leaf_commit: str | None = None
    cost_usd: CostParts
    cost_per_resolved_attempt: Estimate
    cost_per_resolved_task: Estimate
    utilization: float | None
    price_source: str
    unpriced_calls: int
    router_reported_cost_usd: float | None
    lease: LeaseDetail | None
    sandbox_cpu_seconds: float
    sandbox_cost_reason: str | None = Field(description="why the sandbox cost is missing or partial: attempts whose "
                                            "CPU no cgroup measured")


class Bootstrap(_Open):
    resamples: int
    seed: int
    unit: str


class SummaryDocument(_Open):
    """`leafcost summary RUN --json` (README: "The figures, one sentence each")."""

    run_id: str
    run_status: str
    task_order: list[str]
    seeds: int
    sandbox_usd_per_vcpu_hour: float
    bootstrap: Bootstrap
    scenario: str | None
    arms: list[ArmSummary]


class GridRow(_Open):
    gpu: str
    level: str
    gpu_usd_per_hour: float
    self_hosted_cost_per_resolved_attempt: float | None
    breakeven_utilization: float


class Breakeven(_Open):
    self_hosted: str
    hosted: str
    unit: str
    reason: str | None = None
    gpu_usd_per_hour: float | None
    utilization: float | None
    monthly_attempts: float | None
    grid: list[GridRow]
    hosted_cost_per_resolved_attempt: float | None = None
    self_hosted_resolve_rate: float | None = None
    busy_seconds_per_attempt: float | None = None
    sandbox_usd_per_attempt: float | None = None
    gpus: int | None = None
    at_gpu_usd_per_hour: float | None = None
    at_utilization: float | None = None
    self_hosted_cost_per_resolved_attempt: float | None = None
    utilization_reason: str | None = None
    monthly_capacity_attempts: float | None = None
    monthly_attempts_reason: str | None = None


class BreakevenDocument(Breakeven):
    """`leafcost breakeven RUN --json`."""

    run_id: str


class McNemar(_Open):
    a_only: int
    b_only: int
    p_value: float


class PairedBootstrap(Bootstrap):
    paired: bool


class CompareDocument(_Open):
    """`leafcost compare RUN --arms A,B --json`: differences are A minus B."""

    run_id: str
    arms: list[str]
    scenario: str | None
    comparable: bool
    differences: list[str]
    shared_tasks: int
    bootstrap: PairedBootstrap
    difference: str
    resolve_rate_difference: Estimate
    cost_per_resolved_attempt_difference: Estimate
    cost_per_resolved_task_difference: Estimate
    mcnemar: McNemar | None
    summaries: list[ArmSummary]
    breakeven: Breakeven | None


class Tokens(BaseModel):
    prompt: int | None = Field(description="all input tokens, cached included (null while the attempt runs)")
    cached: int | None
    completion: int | None = Field(description="all output tokens, reasoning included")
    reasoning: int | None


class EpisodeRow(BaseModel):
    episode_id: str
    arm: str
    task_id: str
    seed: int
    attempt: int
    status: str
    final: bool
    resolved: bool | None
    reward: float | None
    exit_reason: str | None
    n_steps: int | None
    tokens: Tokens
    model_calls: int | None = Field(description="HTTP attempts to the model, failed ones included")
    elapsed_sec: float | None
    cost_usd: float | None = Field(description="Σ model_calls.cost_usd (token cost; null when no call is priced "
                                               "per token, e.g. a self-hosted arm, whose lease is the cost)")


class EpisodePage(BaseModel):
    total: int
    limit: int
    offset: int
    episodes: list[EpisodeRow]


class EpisodeFull(EpisodeRow):
    grade_error: str | None
    error_detail: str | None
    infra_error: bool
    harness_error: bool
    started_at: datetime
    ended_at: datetime | None
    sandbox_spec_hash: str | None
    isolation: str | None
    sandbox_cpu_seconds: float | None
    sandbox_start_sec: float | None
    patch_bytes: int | None
    trajectory_path: str | None


class ModelCall(BaseModel):
    call_id: int
    step: int
    attempt: int
    model: str
    status: str
    http_status: int | None
    error: str | None
    finish_reason: str | None
    prompt_tokens: int
    cached_tokens: int
    cache_write_tokens: int
    completion_tokens: int
    reasoning_tokens: int
    total_tokens: int
    started_at: datetime
    latency_sec: float
    ttft_sec: float | None
    cost_usd: float | None
    price_source: str | None
    router_cost_usd: float | None
    router_model: str | None


class EpisodeDetail(BaseModel):
    episode: EpisodeFull
    model_calls: list[ModelCall]
    trajectory: dict[str, Any] | None = Field(description="the attempt's trajectory file (Leaf's fields)")
    trajectory_reason: str | None = Field(description="why trajectory is null")


class ArmPriceSheet(BaseModel):
    arm: str
    adapter: str
    model: str
    source: Literal["explicit", "litellm", "lease", "none"]
    prices: Prices | None = Field(description="USD per 1M tokens, when the spec lists them")
    litellm_model: str | None = Field(description="the model looked up in litellm's pinned map")
    fallback_prices: dict[str, Prices]
    usd_per_hour: float | None = Field(description="per GPU (SGLang) or for the machine (local arm)")
    gpus: int | None
    gpu_type: str | None


class PricesDocument(BaseModel):
    litellm: str = Field(description="the pinned price map's revision")
    run_id: str | None
    sandbox_usd_per_vcpu_hour: float | None
    arms: list[ArmPriceSheet]


# ---------------------------------------------------------------------------------------------------------
# Errors

class ApiError(Exception):
    """An answer other than 200, with the JSON body `{"detail": ..., **extra}`."""

    def __init__(self, status_code: int, detail: Any, **extra: Any):
        super().__init__(str(detail))
        self.status_code, self.detail, self.extra = status_code, detail, extra


def invalid(loc: Sequence[str | int], message: str) -> ApiError:
    """A 422 in FastAPI's own validation shape, so clients parse one kind of 422."""
    return ApiError(422, [{"loc": list(loc), "msg": message, "type": "value_error"}])


def _error_body(status_code: int, detail: Any, **extra: Any) -> JSONResponse:
    return JSONResponse({"detail": detail, **extra}, status_code=status_code)


def _install_error_handlers(app: FastAPI) -> None:
    import duckdb

    app.add_exception_handler(ApiError, lambda _, exc: _error_body(exc.status_code, exc.detail, **exc.extra))
    # A ledger that cannot be read (busy, missing, newer, corrupt) is the server's state, not the request's.
    app.add_exception_handler(LedgerError, lambda _, exc: _error_body(503, str(exc)))
    app.add_exception_handler(duckdb.Error, lambda _, exc: _error_body(503, f"the ledger could not be read: {exc}"))
    app.add_exception_handler(SummaryError, lambda _, exc: _error_body(422, _detail_list(str(exc))))
    app.add_exception_handler(RequestValidationError, _validation_error)


def _validation_error(_, exc: RequestValidationError) -> JSONResponse:
    """FastAPI's own 422 body, with a NaN or infinity among the echoed inputs spelled as text: JSON has no such
    numbers, and a 422 that cannot be encoded would become a 500."""
    return _error_body(422, _finite(jsonable_encoder(exc.errors())))


def _finite(value: Any) -> Any:
    if isinstance(value, float) and not math.isfinite(value):
        return repr(value)  # 'nan', 'inf', '-inf'
    if isinstance(value, dict):
        return {key: _finite(item) for key, item in value.items()}
    if isinstance(value, list):
        return [_finite(item) for item in value]
    return value


def _detail_list(message: str) -> list[dict[str, Any]]:
    return [{"loc": [], "msg": message, "type": "value_error"}]


@dataclass(frozen=True)
class RunState:
    run_id: str
    status: str
    updated_at: datetime
    spec: dict[str, Any]

    @property
    def arm_names(self) -> list[str]:
        return [arm["name"] for arm in self.spec.get("arms", [])]

    def require_arms(self, names: Sequence[str]) -> None:
        unknown = [n for n in names if n not in self.arm_names]
        if unknown:
            raise ApiError(404, f"run {self.run_id} has no arm {', '.join(map(repr, unknown))} (its arms: "
                                f"{', '.join(self.arm_names)})")


def run_state(conn, run_id: str) -> RunState:
    """The run's status and spec, or a 404 naming recent runs (as `leafcost summary` does)."""
    row = conn.execute("SELECT status, updated_at, spec_json FROM runs WHERE run_id = ?", [run_id]).fetchone()
    if row is None:
        known = [r[0] for r in conn.execute("SELECT run_id FROM runs ORDER BY created_at DESC LIMIT 5").fetchall()]
        hint = f" (recent runs: {', '.join(known)})" if known else " (this ledger has no runs)"
        raise ApiError(404, f"no run {run_id!r} in this ledger{hint}")
    return RunState(run_id=run_id, status=row[0], updated_at=row[1], spec=json.loads(row[2]))


# ---------------------------------------------------------------------------------------------------------
# Figures, cached for finished runs

@dataclass(frozen=True)
class Outcome:
    """A figure's answer as served: status, the exact bytes, and the parsed document for in-process users."""

    status_code: int
    body: bytes
    document: dict[str, Any] | None = None

    def response(self) -> Response:
        return Response(content=self.body, status_code=self.status_code, media_type=JSON)


@dataclass(frozen=True)
class _Entry:
    outcome: Outcome
    updated_at: datetime
    stamp: Stamp


class Figures:
    """The run figures of one ledger; those of finished runs are kept (LRU), keyed by (kind, run_id, params)."""

    def __init__(self, access: LedgerAccess, max_entries: int = CACHE_ENTRIES):
        self._access = access
        self._max = max_entries
        self._entries: OrderedDict[tuple, _Entry] = OrderedDict()
        self._lock = threading.Lock()
        # One computation per key at a time (concurrent first requests wait for it); striped to stay bounded.
        self._compute_locks = [threading.Lock() for _ in range(32)]

    def summary(self, run_id: str, resamples: int = DEFAULT_RESAMPLES, seed: int = DEFAULT_SEED) -> Outcome:
        from compare.summary import summarize

        def compute(conn, run: RunState) -> Outcome:
            return _ok(summarize(conn, run_id, resamples=resamples, seed=seed))
        return self.get(("summary", run_id, resamples, seed), run_id, compute)

    def summary_document(self, run_id: str, resamples: int = DEFAULT_RESAMPLES,
                         seed: int = DEFAULT_SEED) -> dict[str, Any]:
        """The summary as a dict (shared: do not modify it); what the web page renders, from the same cache."""
        return self.summary(run_id, resamples, seed).document

    def compare(self, run_id: str, arm_a: str, arm_b: str, *, allow_mismatch: bool, resamples: int,
                seed: int) -> Outcome:
        from compare.breakeven import breakeven_if_applicable
        from compare.comparison import UnfairComparison, compare_arms

        def compute(conn, run: RunState) -> Outcome:
            run.require_arms([arm_a, arm_b])
            try:
                document = compare_arms(conn, run_id, arm_a, arm_b, allow_mismatch=allow_mismatch,
                                        resamples=resamples, seed=seed)
            except UnfairComparison as exc:
                detail = ("the arms are not comparable: " + "; ".join(exc.differences) + " (pass "
                          "allow_mismatch=true to compare anyway; the output then lists these differences)")
                body = json.dumps({"detail": detail, "differences": exc.differences}, ensure_ascii=False,
                                  separators=(",", ":")).encode()
                return Outcome(409, body)
            document["breakeven"] = breakeven_if_applicable(document["summaries"])  # as `leafcost compare`
            return _ok(document)
        return self.get(("compare", run_id, arm_a, arm_b, allow_mismatch, resamples, seed), run_id, compute)

    def breakeven(self, run_id: str, self_hosted: str, hosted: str, *, gpu_usd_per_hour: float | None,
                  utilization: float | None) -> Outcome:
        """From the (cached) summary's arm entries: an arm's entry does not depend on the other arms, so these
        are the entries `leafcost breakeven` computes for the pair."""
        from compare.breakeven import breakeven

        document = self.summary_document(run_id)
        entries = {arm["arm"]: arm for arm in document["arms"]}
        unknown = [n for n in (self_hosted, hosted) if n not in entries]
        if unknown:
            raise ApiError(404, f"run {run_id} has no arm {', '.join(map(repr, unknown))} (its arms: "
                                f"{', '.join(entries)})")
        result = breakeven(entries[self_hosted], entries[hosted], gpu_usd_per_hour=gpu_usd_per_hour,
                           utilization=utilization)
        return _ok({"run_id": run_id, **result})

    def get(self, key: tuple, run_id: str, compute: Callable[[Any, RunState], Outcome]) -> Outcome:
        stamp = self._access.stamp()
        entry = self._cached(key)
        if entry is not None and entry.stamp == stamp:
            return entry.outcome
        with self._compute_locks[hash(key) % len(self._compute_locks)]:
            entry = self._cached(key)
            if entry is not None and entry.stamp == stamp:
                return entry.outcome
            try:
                with self._access.reading() as conn:
                    run = run_state(conn, run_id)
                    unchanged = entry is not None and run.status == "finished" and run.updated_at == entry.updated_at
                    outcome = entry.outcome if unchanged else compute(conn, run)
            except LedgerBusy:
                if entry is not None:  # another process writes the file; this finished run's figures stand
                    return entry.outcome
                raise
            if run.status == "finished":
                self._store(key, _Entry(outcome, run.updated_at, stamp))
            return outcome

    def _cached(self, key: tuple) -> _Entry | None:
        with self._lock:
            entry = self._entries.get(key)
            if entry is not None:
                self._entries.move_to_end(key)
            return entry

    def _store(self, key: tuple, entry: _Entry) -> None:
        with self._lock:
            self._entries[key] = entry
            self._entries.move_to_end(key)
            while len(self._entries) > self._max:
                self._entries.popitem(last=False)


def _ok(document: dict[str, Any]) -> Outcome:
    return Outcome(200, dumps(document).encode(), document)


# ---------------------------------------------------------------------------------------------------------
# The app

def create_app(db_path: Path | str, *, api_token: str | None = None,
               extra_routers: Sequence[APIRouter] = (), access: LedgerAccess | None = None) -> FastAPI:
    """The API of the ledger at `db_path` (binds nothing: `leafcost serve` runs it on uvicorn). Writes need
    `Authorization: Bearer <api_token>`; without a token they are disabled. An outdated ledger is upgraded here
    once unless a run holds it. `app.state.figures` is the figure cache (extra routers may render from it), and
    `app.state.access` how the ledger is read (`access`: an InProcessLedgerAccess while this process writes it)."""
    access = access or LedgerAccess(Path(db_path))
    access.upgrade_if_outdated()
    figures = Figures(access)
    app = FastAPI(title="leafcost", version=_leafcost_version(),
                  summary="Cost per resolved coding task: a ledger's runs, episodes and figures",
                  # One schema per model: the documents omit optional keys, so defaults must stay optional.
                  separate_input_output_schemas=False)
    app.state.figures = figures
    app.state.access = access
    _install_error_handlers(app)
    app.include_router(_ledger_routes(access))
    app.include_router(_figure_routes(access, figures))
    app.include_router(_write_routes(access, api_token or None))
    app.add_middleware(WriteGuard, token=api_token or None)
    for router in extra_routers:
        app.include_router(router)
    return app


NOT_FOUND = {404: {"model": ErrorDetail, "description": "unknown run, arm, episode or scenario"}}
BUSY = {503: {"model": ErrorDetail, "description": "the ledger cannot be read now (a run writes it, or it is "
                                                   "missing or from a newer leafcost)"}}
Resamples = Annotated[int, Query(ge=100, le=MAX_RESAMPLES, description="bootstrap resamples over tasks")]
Seed = Annotated[int, Query(ge=0, le=2**32 - 1, description="bootstrap seed (same seed, same intervals)")]


def _ledger_routes(access: LedgerAccess) -> APIRouter:
    router = APIRouter(tags=["ledger"], responses={**BUSY})

    @router.get("/health", response_model=Health, summary="The server is up and its ledger readable")
    def health() -> Health:
        with access.reading() as conn:
            version = conn.execute("SELECT value FROM meta WHERE key = 'schema_version'").fetchone()[0]
        return Health(status="ok", ledger=str(access.path), schema_version=int(version),
                      leafcost_version=_leafcost_version())

    @router.get("/runs", response_model=list[RunItem], summary="Every run, newest first")
    def runs() -> list[RunItem]:
        with access.reading() as conn:
            rows = fetch_rows(conn, "SELECT run_id, name, status, created_at, updated_at, suite, seeds, spec_json, "
                               "json_array_length(task_ids) AS tasks FROM runs ORDER BY created_at DESC, run_id")
        return [_run_item(row) for row in rows]

    @router.get("/runs/{run_id}", response_model=RunDetail, responses=NOT_FOUND,
                summary="A run: its spec, task order and arms (endpoint, config, status)")
    def run(run_id: str) -> RunDetail:
        with access.reading() as conn:
            run_state(conn, run_id)
            row = fetch_rows(conn, "SELECT * FROM runs WHERE run_id = ?", [run_id])[0]
            arm_rows = {r["arm"]: r for r in fetch_rows(conn, "SELECT * FROM arms WHERE run_id = ?", [run_id])}
        spec = json.loads(row.pop("spec_json"))
        arms = [_arm_row(arm, arm_rows.get(arm["name"])) for arm in spec.get("arms", [])]
        return RunDetail(**{**row, "task_ids": json.loads(row["task_ids"]),
                            "sandbox_options": _loads(row["sandbox_options"])}, spec=spec, arms=arms)

    @router.get("/runs/{run_id}/episodes", response_model=EpisodePage, responses=NOT_FOUND,
                summary="A run's attempts, filtered and paged (final attempts by default)")
    def episodes(run_id: str, arm: str | None = Query(None, description="only this arm"),
                 task: str | None = Query(None, description="only this task id"),
                 resolved: bool | None = Query(None, description="only resolved (true) or unresolved (false)"),
                 exit_reason: str | None = Query(None, description="only attempts that ended this way"),
                 final: bool = Query(True, description="the attempts that count (true) or the retried ones"),
                 limit: int = Query(50, ge=1, le=500), offset: int = Query(0, ge=0, le=2**31 - 1)) -> EpisodePage:
        where, params = _episode_filter(run_id, arm, task, resolved, exit_reason, final)
        with access.reading() as conn:
            run = run_state(conn, run_id)
            if arm is not None:
                run.require_arms([arm])
            total = conn.execute(f"SELECT count(*) FROM episodes WHERE {where}", params).fetchone()[0]
            rows = fetch_rows(conn, f"SELECT * FROM episodes WHERE {where} ORDER BY arm, task_id, seed, attempt, "
                               "episode_id LIMIT ? OFFSET ?", [*params, limit, offset])
            costs = _episode_costs(conn, run_id, [r["episode_id"] for r in rows])
        return EpisodePage(total=total, limit=limit, offset=offset,
                           episodes=[_episode(row, costs.get(row["episode_id"])) for row in rows])

    @router.get("/runs/{run_id}/episodes/{episode_id:path}", response_model=EpisodeDetail, responses=NOT_FOUND,
                summary="One attempt: its row, every model call, and its trajectory file")
    def episode(run_id: str, episode_id: str) -> EpisodeDetail:
        with access.reading() as conn:
            run_state(conn, run_id)
            row = _find_episode(conn, run_id, episode_id)
            if row is None:
                raise ApiError(404, f"run {run_id} has no episode {episode_id!r} (ids look like "
                                    f"{run_id}/ARM/TASK/s0/a1; GET /runs/{run_id}/episodes lists them)")
            calls = fetch_rows(conn, f"SELECT {', '.join(ModelCall.model_fields)} FROM model_calls "
                               "WHERE episode_id = ? ORDER BY step, attempt, call_id", [row["episode_id"]])
        cost = sum(c["cost_usd"] for c in calls if c["cost_usd"] is not None) if any(
            c["cost_usd"] is not None for c in calls) else None
        trajectory, reason = read_trajectory(access.path, row["trajectory_path"])
        return EpisodeDetail(episode=EpisodeFull(**_episode(row, cost).model_dump(), **{
                                 k: row[k] for k in EpisodeFull.model_fields if k not in EpisodeRow.model_fields}),
                             model_calls=[ModelCall(**c) for c in calls], trajectory=trajectory,
                             trajectory_reason=reason)

    return router


def _figure_routes(access: LedgerAccess, figures: Figures) -> APIRouter:
    router = APIRouter(tags=["figures"], responses={**BUSY, **NOT_FOUND})

    @router.get("/runs/{run_id}/summary", response_model=SummaryDocument,
                summary="Per arm: resolve rates and cost per resolved with 95 % CIs (`leafcost summary --json`)")
    def summary(run_id: str, resamples: Resamples = DEFAULT_RESAMPLES, seed: Seed = DEFAULT_SEED,
                scenario: str | None = Query(None, description="a stored what-if repricing instead (served as "
                                                               "stored: resamples and seed do not apply)")) -> Response:
        if scenario is not None:
            return _stored_scenario(access, run_id, scenario).response()
        return figures.summary(run_id, resamples, seed).response()

    @router.get("/runs/{run_id}/compare", response_model=CompareDocument,
                responses={409: {"model": UnfairDetail, "description": "the arms differ (tasks, seeds, "
                                 "temperature or sandbox) and allow_mismatch is false"}},
                summary="Two arms, paired on their shared tasks (`leafcost compare --json`)")
    def compare(run_id: str, arms: str = Query(..., description="two arm names, A,B (differences are A − B)"),
                allow_mismatch: bool = Query(False, description="compare arms that are not comparable"),
                resamples: Resamples = DEFAULT_RESAMPLES, seed: Seed = DEFAULT_SEED) -> Response:
        names = [a.strip() for a in arms.split(",") if a.strip()]
        if len(names) != 2:
            raise invalid(["query", "arms"], f"two arm names separated by a comma, got {arms!r}")
        if names[0] == names[1]:
            raise invalid(["query", "arms"], f"compare two different arms (got {names[0]!r} twice)")
        return figures.compare(run_id, names[0], names[1], allow_mismatch=allow_mismatch, resamples=resamples,
                               seed=seed).response()

    @router.get("/runs/{run_id}/breakeven", response_model=BreakevenDocument,
                summary="Where the self-hosted arm matches the hosted one (`leafcost breakeven --json`)")
    def breakeven(run_id: str, self_hosted: str = Query(..., description="the self-hosted arm"),
                  hosted: str = Query(..., description="the hosted arm"),
                  gpu_usd_per_hour: float | None = Query(None, gt=0, le=1e6, description="evaluate at this "
                                                         "price per GPU-hour (default: the lease's)"),
                  utilization: float | None = Query(None, ge=0.001, le=1.0, description="assumed utilization "
                                                    "(default: the measured one)")) -> Response:
        return figures.breakeven(run_id, self_hosted, hosted, gpu_usd_per_hour=gpu_usd_per_hour,
                                 utilization=utilization).response()

    @router.get("/prices", response_model=PricesDocument,
                summary="The price map revision, and with run_id the price sheet of each of its arms")
    def prices(run_id: str | None = Query(None, description="a run whose arms' prices to list")) -> PricesDocument:
        from compare.pricing import litellm_revision

        spec = None
        if run_id is not None:
            with access.reading() as conn:
                spec = _validated_spec(run_state(conn, run_id))
        return PricesDocument(litellm=litellm_revision(), run_id=run_id,
                              sandbox_usd_per_vcpu_hour=spec.costs.sandbox_usd_per_vcpu_hour if spec else None,
                              arms=[_price_sheet(arm) for arm in spec.arms] if spec else [])

    return router


WRITE_PATH = re.compile(r"/runs/[^/]+/scenarios")  # the one route with a body (its {run_id} matches [^/]+)


def token_refusal(token: str | None, authorization: str | None) -> ApiError | None:
    """Why a write with this Authorization header is refused (403 writes disabled, 401 wrong or missing bearer
    token), or None. The header is read as HTTPBearer reads it."""
    if token is None:
        return ApiError(403, f"writes are disabled: set {API_TOKEN_ENV} where the server runs")
    scheme, given = get_authorization_scheme_param(authorization)
    if scheme.lower() != "bearer" or not secrets.compare_digest(given.encode(), token.encode()):
        return ApiError(401, "a valid bearer token is required (Authorization: Bearer ...)")
    return None


class WriteGuard:
    """ASGI middleware in front of the write route: the token is checked before a byte of the body is read, and
    the body is read only up to WRITE_BODY_MAX_BYTES (413 beyond). FastAPI reads a body in full before it runs a
    route's dependencies, so neither check can live in the route itself."""

    def __init__(self, app: ASGIApp, token: str | None, max_bytes: int = WRITE_BODY_MAX_BYTES):
        self.app, self.token, self.max_bytes = app, token, max_bytes

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or scope["method"] != "POST" or not WRITE_PATH.fullmatch(scope["path"]):
            await self.app(scope, receive, send)
            return
        headers = Headers(scope=scope)
        refusal = token_refusal(self.token, headers.get("authorization"))
        if refusal is None and _declared_length(headers) > self.max_bytes:
            refusal = self._too_large()
        if refusal is not None:
            await _error_body(refusal.status_code, refusal.detail)(scope, receive, send)
            return
        body = await self._read_capped(receive)
        if body is None:
            too_large = self._too_large()
            await _error_body(too_large.status_code, too_large.detail)(scope, receive, send)
            return
        await self.app(scope, _replay(body, receive), send)

    def _too_large(self) -> ApiError:
        return ApiError(413, f"the body is larger than {self.max_bytes:,} bytes (a price sheet is a few hundred)")

    async def _read_capped(self, receive: Receive) -> bytes | None:
        """The whole body, or None as soon as it exceeds the cap (a chunked body declares no length)."""
        chunks, size = [], 0
        while True:
            message = await receive()
            if message["type"] != "http.request":
                return b"".join(chunks)  # the client left; the route sees what came
            size += len(message.get("body", b""))
            if size > self.max_bytes:
                return None
            chunks.append(message.get("body", b""))
            if not message.get("more_body", False):
                return b"".join(chunks)


def _declared_length(headers: Headers) -> int:
    length = headers.get("content-length", "")
    return int(length) if length.isdigit() else 0  # the server refuses a malformed length before we run


def _replay(body: bytes, receive: Receive) -> Receive:
    """The body already read, then whatever the connection says next (its disconnect)."""
    sent = False

    async def replayed() -> Message:
        nonlocal sent
        if sent:
            return await receive()
        sent = True
        return {"type": "http.request", "body": body, "more_body": False}
    return replayed


def _write_routes(access: LedgerAccess, token: str | None) -> APIRouter:
    router = APIRouter(tags=["scenarios"])
    bearer = HTTPBearer(auto_error=False, description=f"the server's {API_TOKEN_ENV}")

    def authorized(credentials: HTTPAuthorizationCredentials | None = Depends(bearer)) -> None:
        # WriteGuard refused a wrong token already; checked again here so the route never relies on middleware
        header = f"{credentials.scheme} {credentials.credentials}" if credentials is not None else None
        refusal = token_refusal(token, header)
        if refusal is not None:
            raise refusal

    @router.post("/runs/{run_id}/scenarios", response_model=SummaryDocument, dependencies=[Depends(authorized)],
                 responses={**NOT_FOUND, **BUSY,
                            400: {"model": ErrorDetail, "description": "the body cannot be parsed (not UTF-8 JSON)"},
                            401: {"model": ErrorDetail, "description": "missing or wrong bearer token"},
                            403: {"model": ErrorDetail, "description": f"writes disabled: no {API_TOKEN_ENV}"},
                            409: {"model": ErrorDetail, "description": "the ledger is busy (a run writes it)"},
                            413: {"model": ErrorDetail,
                                  "description": f"the body is larger than {WRITE_BODY_MAX_BYTES:,} bytes"}},
                 summary="Reprice a run under another price sheet and store it as a named scenario")
    def create_scenario(run_id: str, sheet: PriceSheet,
                        name: str | None = Query(None, pattern=SCENARIO_NAME,
                                                 description="the scenario's name (default: the sheet's)"),
                        resamples: Resamples = DEFAULT_RESAMPLES, seed: Seed = DEFAULT_SEED) -> Response:
        from compare.reprice import overrides_for, sheet_summary
        from compare.summary import summarize

        scenario = name or sheet.name
        if scenario is None:
            raise invalid(["query", "name"], "name the scenario: `name` in the sheet or ?name=")
        try:
            with access.reading() as conn:
                spec = _validated_spec(run_state(conn, run_id))
                try:
                    overrides = overrides_for(conn, run_id, spec, sheet, scenario)
                except SummaryError as exc:
                    raise invalid(["body"], str(exc)) from None
                document = summarize(conn, run_id, resamples=resamples, seed=seed, overrides=overrides)
            with access.writing() as ledger:
                asyncio.run(ledger.save_scenario(run_id, scenario, sheet_summary(sheet), document))
        except SecretInLedger as exc:
            raise invalid(["body"], str(exc)) from None
        except LedgerBusy as exc:
            raise ApiError(409, f"the ledger is busy: {exc}") from None
        return Response(content=dumps(document), media_type=JSON)

    return router


# ---------------------------------------------------------------------------------------------------------
# Rows and files

def _stored_scenario(access: LedgerAccess, run_id: str, scenario: str) -> Outcome:
    """A stored what-if, rendered as `leafcost summary --scenario NAME --json` prints it (never cached: a
    scenario can be replaced)."""
    with access.reading() as conn:
        run_state(conn, run_id)
        row = conn.execute("SELECT summary FROM scenarios WHERE run_id = ? AND name = ?", [run_id, scenario]
                           ).fetchone()
        if row is None:
            known = [r[0] for r in conn.execute("SELECT name FROM scenarios WHERE run_id = ? ORDER BY name",
                                                [run_id]).fetchall()]
            raise ApiError(404, f"run {run_id} has no scenario {scenario!r} (stored: {', '.join(known) or 'none'};"
                                " make one with POST /runs/{run_id}/scenarios or leafcost reprice)")
    return _ok(json.loads(row[0]))


def _validated_spec(run: RunState):
    from compare.spec import RunSpec

    try:
        return RunSpec.model_validate(run.spec)
    except ValueError as exc:  # a spec this leafcost no longer accepts: nothing to price it with
        raise ApiError(422, _detail_list(f"run {run.run_id}: its spec does not validate: {exc}")) from None


def _episode_filter(run_id: str, arm: str | None, task: str | None, resolved: bool | None,
                    exit_reason: str | None, final: bool) -> tuple[str, list[Any]]:
    clauses, params = ["run_id = ?", "final = ?"], [run_id, final]
    for clause, value in (("arm = ?", arm), ("task_id = ?", task), ("coalesce(resolved, false) = ?", resolved),
                          ("exit_reason = ?", exit_reason)):
        if value is not None:
            clauses.append(clause)
            params.append(value)
    return " AND ".join(clauses), params


def _find_episode(conn, run_id: str, episode_id: str) -> dict[str, Any] | None:
    """Episode ids start with the run id (run/arm/task/s0/a1); the part after it names the attempt too."""
    for candidate in (episode_id, f"{run_id}/{episode_id}"):
        rows = fetch_rows(conn, "SELECT * FROM episodes WHERE run_id = ? AND episode_id = ?", [run_id, candidate])
        if rows:
            return rows[0]
    return None


def _episode_costs(conn, run_id: str, episode_ids: list[str]) -> dict[str, float | None]:
    if not episode_ids:
        return {}
    rows = conn.execute("SELECT episode_id, sum(cost_usd) FROM model_calls WHERE run_id = ? AND episode_id IN "
                        "(SELECT unnest(?::VARCHAR[])) GROUP BY episode_id", [run_id, episode_ids]).fetchall()
    return dict(rows)


def _episode(row: dict[str, Any], cost: float | None) -> EpisodeRow:
    tokens = Tokens(prompt=row["prompt_tokens"], cached=row["cached_tokens"], completion=row["completion_tokens"],
                    reasoning=row["reasoning_tokens"])
    return EpisodeRow(**{k: row[k] for k in EpisodeRow.model_fields if k not in ("tokens", "cost_usd")},
                      tokens=tokens, cost_usd=cost)


def _run_item(row: dict[str, Any]) -> RunItem:
    spec = json.loads(row.pop("spec_json"))
    return RunItem(**row, arms=[arm["name"] for arm in spec.get("arms", [])])


def _arm_row(spec_arm: dict[str, Any], row: dict[str, Any] | None) -> ArmRow:
    if row is None:  # in the spec, never started (the run stopped first)
        return ArmRow(arm=spec_arm["name"], adapter=spec_arm.get("adapter", ""), model=spec_arm.get("model", ""),
                      status="not started", status_reason=None, endpoint=spec_arm.get("base_url"),
                      served_model=None, config=None, warnings=[], started_at=None, ended_at=None)
    return ArmRow(**{k: row[k] for k in ("arm", "adapter", "model", "status", "status_reason", "endpoint",
                                         "served_model", "started_at", "ended_at")},
                  config=_loads(row["config"]), warnings=_loads(row["warnings"]) or [])


def _price_sheet(arm) -> ArmPriceSheet:
    return ArmPriceSheet(arm=arm.name, adapter=arm.adapter, model=arm.model, **arm.price_sheet())


def _loads(text: str | None) -> Any:
    return None if text is None else json.loads(text)


def _leafcost_version() -> str:
    try:
        return metadata.version("leafcost")
    except metadata.PackageNotFoundError:
        return "unknown"
