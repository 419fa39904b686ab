"""The ledger: one DuckDB file in which every run, arm, episode attempt, model call, tool call, lease and metrics
sample is a row that users query with plain SQL. One background thread owns the writable connection and
group-commits whatever is queued, so an awaited write is committed: a crash afterwards loses nothing recorded.

DuckDB lets one process hold a file for writing; while it does, no other process can open the file at all, not
even read-only (`LedgerBusy` says who holds it). Readers in the writing process use `Ledger.reader()`."""

from __future__ import annotations

import asyncio
import atexit
import concurrent.futures
import json
import os
import queue
import re
import secrets
import socket
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime, timezone
from importlib import metadata
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

from pydantic import BaseModel

from adapters.base import CallAttempt, Lease, ServerSample, ToolCall, utcnow
from adapters.scrubbing import credential_shaped, names_env, redact_values, secret_name
from compare.spec import RunSpec

if TYPE_CHECKING:
    import duckdb

RunStatus = Literal["running", "finished", "interrupted", "failed"]
ArmStatus = Literal["ready", "skipped", "failed", "finished", "interrupted"]
RUN_ID = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.:-]{0,120}$")
_OPEN_HERE: set[str] = set()  # files a Ledger of this process holds: one writer per file
_OPEN_HERE_LOCK = threading.Lock()


class LedgerError(RuntimeError):
    """The ledger cannot do what was asked; the message names the file or row and what to do."""


class LedgerBusy(LedgerError):
    """Another process holds the ledger file for writing (DuckDB then refuses every other opener)."""

    def __init__(self, message: str, pid: int | None = None):
        super().__init__(message)
        self.pid = pid


class LedgerOutdated(LedgerError):
    """The file's schema is older than this leafcost's: opening it once for writing upgrades it."""


class SecretInLedger(LedgerError):
    """A value about to be recorded looks like a credential. The ledger never stores secrets."""


def default_db_path() -> Path:
    """`$LEAFCOST_DB`, else `./leafcost.duckdb`."""
    return Path(os.environ.get("LEAFCOST_DB") or "leafcost.duckdb")


def new_run_id(name: str, at: datetime | None = None) -> str:
    """A readable, unique run id: the run's name, UTC time, and 4 random hex digits."""
    at = _utc(at) or utcnow()
    return f"{name}-{at:%Y%m%d-%H%M%S}-{secrets.token_hex(2)}"


def episode_id_for(run_id: str, arm: str, task_id: str, seed: int, attempt: int) -> str:
    return f"{run_id}/{arm}/{task_id}/s{seed}/a{attempt}"


def connect_read_only(path: Path | str | None = None) -> duckdb.DuckDBPyConnection:
    """A read-only connection for another process (reports, the CLI), with timestamps shown in UTC. Raises
    LedgerBusy while a run writes the file: DuckDB allows no other opener then, read-only included."""
    duckdb = _duckdb()
    path = Path(path) if path is not None else default_db_path()
    if not path.exists():
        raise LedgerError(f"{path}: no ledger here (run `leafcost run` first, or pass --db / set LEAFCOST_DB)")
    try:
        conn = duckdb.connect(str(path), read_only=True)
    except duckdb.Error as exc:
        raise _open_error(path, exc, writing=False) from None
    try:
        conn.execute("SET TimeZone = 'UTC'")
        version = _schema_version(conn, path)
        if version != SCHEMA_VERSION:
            raise _version_error(path, version, read_only=True)
    except BaseException:
        conn.close()
        raise
    return conn


def fetch_rows(conn: duckdb.DuckDBPyConnection, sql: str,
               params: Sequence[Any] | Mapping[str, Any] | None = None) -> list[dict[str, Any]]:
    """A query's rows as dicts, on any connection (the writer's cursors, a read-only connection)."""
    result = conn.execute(sql, params) if params is not None else conn.execute(sql)
    names = [d[0] for d in result.description or []]
    return [dict(zip(names, row)) for row in result.fetchall()]


def check_no_secrets(value: Any, where: str) -> None:
    """Raises SecretInLedger if any key at any depth names a credential (api_key, authorization, *_token,
    secret, password, ...) or any string looks like one (`Bearer ...`, `sk-...`). A key ending in `_env` that
    holds an environment variable's name is allowed: it names where the secret lives, not the secret."""
    found = _find_secret(value, where)
    if found:
        raise SecretInLedger(f"{found} looks like a secret; the ledger never stores secrets. Record the name of "
                             "the environment variable that holds it (like api_key_env) instead")


def redact_secrets(value: Any) -> Any:
    """A copy with every credential value replaced by "[redacted]" (for what servers say about themselves:
    SGLang's server info lists its own api_key): the adapters' one rule."""
    return redact_values(value)


class RunRecord(BaseModel):
    """One `runs` row, JSON columns decoded (spec_json stays the exact text its sha256 was taken of)."""

    run_id: str
    name: str
    created_at: datetime
    updated_at: datetime
    status: RunStatus
    spec_json: str
    spec_sha256: str
    suite: str
    task_ids: list[str]
    seeds: int
    leafcost_version: str
    sandbox_options: dict[str, Any] | None = None
    status_reason: str | None = None

    def spec(self) -> RunSpec:
        return RunSpec.model_validate_json(self.spec_json)

    @classmethod
    def from_row(cls, row: dict[str, Any]) -> RunRecord:
        """A `runs` row as SQL returns it (JSON columns as text)."""
        return cls.model_validate({**row, "task_ids": json.loads(row["task_ids"]),
                                   "sandbox_options": json.loads(row["sandbox_options"])
                                   if row["sandbox_options"] else None})


class ArmTotals(BaseModel):
    """An arm's figures as the ledger has them, whichever process ran its episodes: final attempts only."""

    done: int = 0  # (task, seed) keys whose final attempt finished
    resolved: int = 0
    errors: int = 0  # final attempts that ended in an infrastructure or harness error
    calls_cost_usd: float = 0.0  # sum of model_calls.cost_usd over every attempt (hosted arms; 0 when self-hosted)


class Ledger:
    """The single writer of one ledger file. Write methods are coroutines: they queue an operation for the
    writer thread and return once its transaction has committed. Cancelling an await does not unrecord it."""

    def __init__(self, path: Path):
        self.path = path
        self._key = str(path.resolve())
        self._queue: queue.SimpleQueue[_Op | None] = queue.SimpleQueue()
        self._lock = threading.Lock()
        self._closed = False
        self._read_lock = threading.Lock()
        self._reader: duckdb.DuckDBPyConnection | None = None
        self._cursors: list[duckdb.DuckDBPyConnection] = []
        self._conn: duckdb.DuckDBPyConnection | None = None
        self._episodes: dict[str, tuple[str, str]] = {}  # running here: episode_id -> (run_id, arm)
        self._held_leases: set[int] = set()  # opened through this Ledger and not closed: their owner is alive
        self._ids = {table: _IdPool(sequence) for table, (_, sequence) in _ID_COLUMNS.items()}
        self._ready: concurrent.futures.Future[None] = concurrent.futures.Future()
        self._thread = threading.Thread(target=self._write_loop, name=f"ledger-writer:{path.name}", daemon=True)

    @classmethod
    def open(cls, path: Path | str | None = None) -> Ledger:
        """Opens (creating or migrating) the ledger and starts its writer thread. Queued writes are committed
        at interpreter exit if close() was not called."""
        ledger = cls(Path(path) if path is not None else default_db_path())
        with _OPEN_HERE_LOCK:
            if ledger._key in _OPEN_HERE:
                raise LedgerBusy(f"{ledger.path}: this process already has the ledger open for writing; share "
                                 "that Ledger (one writer per file)")
            _OPEN_HERE.add(ledger._key)
        try:
            ledger._thread.start()
            ledger._ready.result()
        except BaseException:
            with _OPEN_HERE_LOCK:
                _OPEN_HERE.discard(ledger._key)
            raise
        atexit.register(ledger.close)
        return ledger

    # runs -------------------------------------------------------------------------------------------------

    async def create_run(self, run_id: str, spec: RunSpec, *, task_ids: Sequence[str],
                         sandbox_options: BaseModel | Mapping[str, Any] | None = None,
                         leafcost_version: str | None = None, created_at: datetime | None = None,
                         spec_sha256: str | None = None) -> None:
        """`spec_sha256` when the run's hash covers more than the spec (a Leaf checkout's prompt and tools)."""
        if not RUN_ID.match(run_id):
            raise LedgerError(f"run id {run_id!r}: use letters, digits and _.:- only (it is part of episode ids)")
        spec_json = spec.model_dump_json()
        options = _plain(sandbox_options)
        check_no_secrets(json.loads(spec_json), "the run spec")
        check_no_secrets(options, "sandbox_options")
        at = _utc(created_at) or utcnow()
        row = {"run_id": run_id, "name": spec.name, "created_at": at, "updated_at": at, "status": "running",
               "spec_json": spec_json, "spec_sha256": spec_sha256 or spec.digest(), "suite": spec.suite,
               "task_ids": _json(list(task_ids)), "seeds": spec.seeds,
               "leafcost_version": leafcost_version or _leafcost_version(), "sandbox_options": _json(options)}
        await self._write("create_run", lambda batch: batch.append("runs", row))

    async def set_run_status(self, run_id: str, status: RunStatus, reason: str | None = None) -> None:
        """Sets the run's status and its reason (None clears a previous one: a resumed run is running again).
        A value that looks like a key is stored as "[redacted]"."""
        changes = {"status": status, "status_reason": redact_secrets(reason), "updated_at": utcnow()}

        def apply(batch: _Batch) -> None:
            batch.update_one("runs", "run_id = ?", [run_id], changes, what=f"run {run_id!r}")
        await self._write("set_run_status", apply)

    # arms -------------------------------------------------------------------------------------------------

    async def record_arm(self, run_id: str, arm: str, *, adapter: str, model: str, endpoint: str | None = None,
                         served_model: str | None = None, config: Mapping[str, Any] | None = None,
                         server_info: Mapping[str, Any] | None = None, model_info: Mapping[str, Any] | None = None,
                         warnings: Sequence[str] = (), status: ArmStatus = "ready", status_reason: str | None = None,
                         started_at: datetime | None = None) -> None:
        """Records an arm (again on resume: fields are replaced, the first started_at is kept). `config` (what
        the adapter forces or adds) must hold no secret: SecretInLedger is raised and nothing is written.
        Credential-named values in server_info and model_info are redacted (servers list their own keys)."""
        check_no_secrets(config or {}, f"arm {arm!r} config")
        row = {"run_id": run_id, "arm": arm, "adapter": adapter, "model": model, "endpoint": endpoint,
               "served_model": served_model, "config": _json(dict(config or {})),
               "server_info": _json(redact_secrets(server_info)), "model_info": _json(redact_secrets(model_info)),
               "warnings": _json(list(warnings)), "status": status, "status_reason": status_reason,
               "started_at": _utc(started_at) or utcnow(), "ended_at": None}

        def apply(batch: _Batch) -> None:
            names = ", ".join(row)
            updates = ", ".join(f"{k} = excluded.{k}" for k in row if k not in {"run_id", "arm", "started_at"})
            batch.execute(f"INSERT INTO arms ({names}) VALUES ({', '.join('?' * len(row))}) "
                          f"ON CONFLICT (run_id, arm) DO UPDATE SET {updates}", list(row.values()))
        await self._write("record_arm", apply)

    async def update_arm(self, run_id: str, arm: str, *, status: ArmStatus | None = None,
                         status_reason: str | None = None, ended_at: datetime | None = None,
                         served_model: str | None = None, server_info: Mapping[str, Any] | None = None,
                         model_info: Mapping[str, Any] | None = None) -> None:
        """Sets the fields given (None leaves a field as it is)."""
        changes: dict[str, Any] = {"status": status, "status_reason": status_reason, "ended_at": _utc(ended_at),
                                   "served_model": served_model,
                                   "server_info": _json(redact_secrets(server_info)) if server_info else None,
                                   "model_info": _json(redact_secrets(model_info)) if model_info else None}
        changes = {k: v for k, v in changes.items() if v is not None}
        if not changes:
            return

        def apply(batch: _Batch) -> None:
            batch.update_one("arms", "run_id = ? AND arm = ?", [run_id, arm], changes,
                             what=f"arm {arm!r} of run {run_id!r}")
        await self._write("update_arm", apply)

    # episodes ---------------------------------------------------------------------------------------------

    async def start_episode(self, run_id: str, arm: str, task_id: str, seed: int, attempt: int, *,
                            started_at: datetime | None = None, sandbox_spec_hash: str | None = None,
                            isolation: str | None = None, trajectory_path: str | None = None) -> str:
        """Records an attempt as 'running' and returns its episode id."""
        episode_id = episode_id_for(run_id, arm, task_id, seed, attempt)
        row = {"episode_id": episode_id, "run_id": run_id, "arm": arm, "task_id": task_id, "seed": seed,
               "attempt": attempt, "status": "running", "infra_error": False, "harness_error": False,
               "final": False, "started_at": _utc(started_at) or utcnow(), "sandbox_spec_hash": sandbox_spec_hash,
               "isolation": isolation, "trajectory_path": trajectory_path}
        self._episodes[episode_id] = (run_id, arm)
        try:
            await self._write("start_episode", lambda batch: batch.append("episodes", row))
        except BaseException:
            self._episodes.pop(episode_id, None)
            raise
        return episode_id

    async def record_call(self, episode_id: str, step: int, attempt: CallAttempt, *, cost_usd: float | None,
                          price_source: str | None, price_revision: str | None) -> int:
        """One HTTP attempt (failed ones too: their tokens were spent). Returns its call_id. cost_usd is None
        when the call has no per-token price (self-hosted: the lease pays), never 0.0 for "unknown"."""
        run_id, arm = self._episode_key(episode_id)
        usage = attempt.usage
        row = {"run_id": run_id, "arm": arm, "episode_id": episode_id, "step": step, "attempt": attempt.attempt,
               "model": attempt.model, "status": attempt.status, "http_status": attempt.http_status,
               "error": attempt.error, "finish_reason": attempt.finish_reason,
               "prompt_tokens": usage.prompt_tokens, "cached_tokens": usage.cached_tokens,
               "cache_write_tokens": usage.cache_write_tokens,
               "completion_tokens": usage.completion_tokens, "reasoning_tokens": usage.reasoning_tokens,
               "total_tokens": usage.total_tokens, "started_at": _utc(attempt.started_at),
               "latency_sec": attempt.latency_sec, "ttft_sec": attempt.ttft_sec,
               "router_cost_usd": attempt.router_cost_usd, "router_cost_detail": _json(attempt.router_cost_detail),
               "router_retries": attempt.router_retries, "router_fallbacks": attempt.router_fallbacks,
               "router_model": attempt.router_model, "router_deployment": attempt.router_deployment,
               "cost_usd": cost_usd, "price_source": price_source, "price_revision": price_revision,
               "request_id": attempt.request_id}
        return await self._write("record_call", lambda batch: batch.append("model_calls", row))

    async def record_tool_call(self, episode_id: str, step: int, index: int, call: ToolCall, *, output_chars: int,
                               started_at: datetime, seconds: float) -> None:
        """One tool call the model made (its `index` among the step's calls is the `idx` column)."""
        run_id, arm = self._episode_key(episode_id)
        row = {"run_id": run_id, "arm": arm, "episode_id": episode_id, "step": step, "idx": index,
               "tool_call_id": call.id or None, "tool_name": call.name, "arguments_chars": len(call.arguments),
               "output_chars": output_chars, "started_at": _utc(started_at), "seconds": seconds}
        await self._write("record_tool_call", lambda batch: batch.append("tool_calls", row))

    async def finish_episode(self, episode_id: str, *, exit_reason: str, resolved: bool, reward: float | None,
                             final: bool, n_steps: int, grade_error: str | None = None,
                             error_detail: str | None = None, infra_error: bool = False, harness_error: bool = False,
                             ended_at: datetime | None = None, elapsed_sec: float | None = None,
                             sandbox_cpu_seconds: float | None = None, sandbox_start_sec: float | None = None,
                             patch_bytes: int | None = None, trajectory_path: str | None = None,
                             sandbox_spec_hash: str | None = None, isolation: str | None = None) -> None:
        """Marks a running attempt finished with its results; token columns and model_calls are summed from
        its model_calls rows. `final`: this attempt counts for its (arm, task, seed), i.e. it will not be
        retried. elapsed_sec defaults to ended_at - started_at."""
        row = {"episode_id": episode_id, "exit_reason": exit_reason, "resolved": resolved, "reward": reward,
               "final": final, "n_steps": n_steps, "grade_error": grade_error, "error_detail": error_detail,
               "infra_error": infra_error, "harness_error": harness_error, "ended_at": _utc(ended_at) or utcnow(),
               "elapsed_sec": elapsed_sec, "sandbox_cpu_seconds": sandbox_cpu_seconds,
               "sandbox_start_sec": sandbox_start_sec, "patch_bytes": patch_bytes,
               "trajectory_path": trajectory_path, "sandbox_spec_hash": sandbox_spec_hash, "isolation": isolation}

        def apply(batch: _Batch) -> None:
            batch.finish(row)
        await self._write("finish_episode", apply)
        self._episodes.pop(episode_id, None)

    # leases and samples -----------------------------------------------------------------------------------

    async def open_lease(self, run_id: str, arm: str, lease: Lease) -> int:
        """Records a lease held by this process (owner_pid, owner_host); its heartbeat starts at started_at.
        Keep it beating with heartbeat_leases while it is open."""
        row = {"run_id": run_id, "arm": arm, "kind": lease.kind, "hardware": lease.hardware, "count": lease.count,
               "usd_per_hour": lease.usd_per_hour, "started_at": _utc(lease.started_at),
               "ended_at": _utc(lease.ended_at), "heartbeat_at": _utc(lease.started_at), "owner_pid": os.getpid(),
               "owner_host": socket.gethostname()}
        lease_id = await self._write("open_lease", lambda batch: batch.append("gpu_leases", row))
        if lease.ended_at is None:
            self._held_leases.add(lease_id)
        return lease_id

    async def close_lease(self, lease_id: int, ended_at: datetime) -> None:
        def apply(batch: _Batch) -> None:
            done = batch.execute("UPDATE gpu_leases SET ended_at = ? WHERE lease_id = ? AND ended_at IS NULL "
                                 "RETURNING lease_id", [_utc(ended_at), lease_id]).fetchall()
            if not done:
                raise LedgerError(f"lease {lease_id} is not open (unknown, or already closed)")
        try:
            await self._write("close_lease", apply)
        finally:
            self._held_leases.discard(lease_id)

    async def heartbeat_leases(self, lease_ids: Sequence[int], at: datetime) -> int:
        """Records that the owner of these open leases is alive at `at` (a heartbeat never moves back). Returns
        how many open leases were updated; closed or unknown ids are ignored."""
        ids = [int(i) for i in lease_ids]
        if not ids:
            return 0

        def apply(batch: _Batch) -> int:
            return len(batch.execute(
                "UPDATE gpu_leases SET heartbeat_at = greatest(coalesce(heartbeat_at, started_at), ?) "
                "WHERE list_contains(?::BIGINT[], lease_id) AND ended_at IS NULL RETURNING lease_id",
                [_utc(at), ids]).fetchall())
        return await self._write("heartbeat_leases", apply)

    async def close_orphan_leases(self, run_id: str | None = None) -> int:
        """Closes the open leases (of one run, or of every run) whose owner is gone, at their last heartbeat
        (started_at when none), so a killed process's lease stops costing. Every open lease not opened through
        this Ledger is such an orphan: DuckDB lets no other process open the file while this one holds it, and
        one process opens it once. Returns how many were closed."""
        held = sorted(self._held_leases)

        def apply(batch: _Batch) -> int:
            return len(batch.execute(
                "UPDATE gpu_leases SET ended_at = greatest(started_at, coalesce(heartbeat_at, started_at)) "
                "WHERE (? IS NULL OR run_id = ?) AND ended_at IS NULL AND NOT list_contains(?::BIGINT[], lease_id) "
                "RETURNING lease_id", [run_id, run_id, held]).fetchall())
        return await self._write("close_orphan_leases", apply)

    async def record_sample(self, run_id: str, arm: str, sample: ServerSample) -> int:
        """One row per metric of the scrape; returns how many."""
        taken_at = _utc(sample.taken_at)
        rows = [{"run_id": run_id, "arm": arm, "taken_at": taken_at, "metric": metric, "value": float(value)}
                for metric, value in sample.values.items()]

        def apply(batch: _Batch) -> int:
            for row in rows:
                batch.append("server_samples", row)
            return len(rows)
        return await self._write("record_sample", apply)

    # resume -----------------------------------------------------------------------------------------------

    async def finished_keys(self, run_id: str) -> set[tuple[str, str, int]]:
        """(arm, task_id, seed) keys whose final attempt has finished: a resumed run skips these."""
        rows = await self._aread("SELECT DISTINCT arm, task_id, seed FROM episodes "
                          "WHERE run_id = ? AND status = 'finished' AND final", [run_id])
        return {(arm, task_id, seed) for arm, task_id, seed in rows}

    async def arm_totals(self, run_id: str) -> dict[str, ArmTotals]:
        """Per arm, the final attempts recorded by every process that ran this run (what a resumed run prints).
        Arms with no finished final attempt and no priced call are absent."""
        rows = await self._aread(_ARM_TOTALS_SQL, [run_id])
        return {arm: ArmTotals(done=done, resolved=resolved, errors=errors, calls_cost_usd=cost)
                for arm, done, resolved, errors, cost in rows}

    async def next_attempt(self, run_id: str, arm: str, task_id: str, seed: int) -> int:
        """1 for a key never tried, else one more than its highest attempt."""
        rows = await self._aread("SELECT coalesce(max(attempt), 0) + 1 FROM episodes "
                          "WHERE run_id = ? AND arm = ? AND task_id = ? AND seed = ?", [run_id, arm, task_id, seed])
        return int(rows[0][0])

    async def interrupt_running(self, run_id: str) -> int:
        """Attempts a crash left 'running' become finished: exit_reason 'interrupted', infra_error, not final
        (so they are retried). Their calls' tokens are summed in; ended_at is their last recorded activity."""
        def apply(batch: _Batch) -> int:
            rows = batch.execute(_INTERRUPT_SQL, [run_id]).fetchall()
            return len(rows)
        return await self._write("interrupt_running", apply)

    async def save_scenario(self, run_id: str, name: str, sheet: Mapping[str, Any], summary: Mapping[str, Any]
                            ) -> None:
        """Stores (or replaces) a named what-if repricing of a run; the run's own rows are not touched."""
        check_no_secrets(dict(sheet), f"scenario {name!r} sheet")
        row = [run_id, name, utcnow(), _json(dict(sheet)), json.dumps(summary, default=str)]
        await self._write("save_scenario", lambda batch: batch.execute(
            "INSERT OR REPLACE INTO scenarios (run_id, name, created_at, sheet, summary) VALUES (?, ?, ?, ?, ?)",
            row))

    async def get_run(self, run_id: str) -> RunRecord | None:
        rows = await asyncio.to_thread(self.query, "SELECT * FROM runs WHERE run_id = ?", [run_id])
        return RunRecord.from_row(rows[0]) if rows else None

    # reading and lifecycle --------------------------------------------------------------------------------

    def query(self, sql: str, params: Sequence[Any] | Mapping[str, Any] | None = None) -> list[dict[str, Any]]:
        """Rows as dicts, read in this process (it sees every committed write)."""
        with self._read_lock:
            cursor = self._reader_cursor()
            return fetch_rows(cursor, sql, params)

    def reader(self) -> duckdb.DuckDBPyConnection:
        """A connection of its own to this ledger, for a reader thread in this process (the API server while a
        run writes). Read with it only; it is closed when the ledger closes."""
        with self._lock:
            if self._closed or self._conn is None:
                raise LedgerError(f"{self.path}: the ledger is closed")
            cursor = self._conn.cursor()
            self._cursors.append(cursor)
        cursor.execute("SET TimeZone = 'UTC'")
        return cursor

    async def flush(self) -> None:
        """Returns once everything queued before it has committed."""
        await self._write("flush", lambda batch: None)

    def close(self) -> None:
        """Commits what is queued, stops the writer thread and releases the file. Idempotent."""
        with self._lock:
            if self._closed:
                return
            self._closed = True
        if self._thread.is_alive():
            self._queue.put(None)
            self._thread.join()
        with _OPEN_HERE_LOCK:
            _OPEN_HERE.discard(self._key)
        atexit.unregister(self.close)

    async def aclose(self) -> None:
        await asyncio.to_thread(self.close)

    def __enter__(self) -> Ledger:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    async def __aenter__(self) -> Ledger:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()

    # internals --------------------------------------------------------------------------------------------

    async def _write(self, name: str, apply: Callable[[_Batch], Any]) -> Any:
        loop = asyncio.get_running_loop()
        future = loop.create_future()
        self._enqueue(_Op(name, apply, future, loop))
        return await future

    def _enqueue(self, op: _Op) -> None:
        with self._lock:
            if self._closed:
                raise LedgerError(f"{self.path}: the ledger is closed")
            self._queue.put(op)

    async def _aread(self, sql: str, params: Sequence[Any]) -> list[tuple[Any, ...]]:
        return await asyncio.to_thread(self._read, sql, params)

    def _read(self, sql: str, params: Sequence[Any]) -> list[tuple[Any, ...]]:
        with self._read_lock:
            return self._reader_cursor().execute(sql, params).fetchall()

    def _reader_cursor(self) -> duckdb.DuckDBPyConnection:
        if self._reader is None or self._closed:
            raise LedgerError(f"{self.path}: the ledger is closed")
        return self._reader

    def _episode_key(self, episode_id: str) -> tuple[str, str]:
        key = self._episodes.get(episode_id)
        if key is None:
            rows = self._read("SELECT run_id, arm FROM episodes WHERE episode_id = ?", [episode_id])
            if not rows:
                raise LedgerError(f"episode {episode_id!r} is unknown: start_episode first")
            key = (rows[0][0], rows[0][1])
        return key

    def _write_loop(self) -> None:
        try:
            self._conn = _open_writable(self.path)
            self._reader = self._conn.cursor()
            self._reader.execute("SET TimeZone = 'UTC'")
            self._types = _column_types(self._conn)
        except BaseException as exc:
            self._closed = True
            self._ready.set_exception(exc)
            return
        self._ready.set_result(None)
        stopping = False
        while not stopping:
            ops = [self._queue.get()]
            # A commit costs far more than a row: gather what arrives within a short window into one transaction.
            window_ends = time.monotonic() + _GROUP_WINDOW_SEC
            while len(ops) < _MAX_BATCH and None not in ops:
                try:
                    ops.append(self._queue.get(timeout=max(0.0, window_ends - time.monotonic())))
                except queue.Empty:
                    break
            stopping = None in ops
            ops = [op for op in ops if op is not None]
            try:
                self._commit(ops)
            except BaseException as exc:  # a bug here must not leave awaits hanging
                _wake([(op, None, _as_ledger_error(op.name, exc)) for op in ops])
                if not isinstance(exc, Exception):
                    raise
        self._release()

    def _release(self) -> None:
        with self._read_lock:
            for cursor in [*self._cursors, self._reader]:
                try:
                    cursor.close()
                except Exception:
                    pass
            self._reader = None
            self._conn.close()

    def _commit(self, ops: list[_Op]) -> None:
        """One transaction for the whole group; if it fails, each operation alone, so one bad operation
        fails only its own caller. Waiters are woken after COMMIT, once per event loop per group."""
        if not ops:
            return
        try:
            settled = list(zip(ops, self._transaction(ops), [None] * len(ops)))
        except Exception as exc:
            if len(ops) == 1:
                settled = [(ops[0], None, _as_ledger_error(ops[0].name, exc))]
            else:
                settled = [self._commit_alone(op) for op in ops]
        _wake(settled)

    def _commit_alone(self, op: _Op) -> tuple[_Op, Any, Exception | None]:
        try:
            [result] = self._transaction([op])
        except Exception as exc:
            return op, None, _as_ledger_error(op.name, exc)
        return op, result, None

    def _transaction(self, ops: list[_Op]) -> list[Any]:
        conn = self._conn
        conn.execute("BEGIN TRANSACTION")
        try:
            batch = _Batch(conn, self._types, self._ids)
            outcomes = [op.apply(batch) for op in ops]
            batch.flush()
            conn.execute("COMMIT")
        except BaseException:
            for pool in self._ids.values():
                pool.drop()
            try:
                conn.execute("ROLLBACK")
            except Exception:
                pass
            raise
        return [o.value if isinstance(o, _Slot) else o for o in outcomes]


# ---------------------------------------------------------------------------------------------------------
# Schema

_SCHEMA_V1 = """
CREATE TABLE meta (
    key VARCHAR PRIMARY KEY,
    value VARCHAR NOT NULL
);
CREATE TABLE runs (
    run_id VARCHAR PRIMARY KEY,
    name VARCHAR NOT NULL,
    created_at TIMESTAMPTZ NOT NULL,
    updated_at TIMESTAMPTZ NOT NULL,
    status VARCHAR NOT NULL CHECK (status IN ('running', 'finished', 'interrupted')),
    spec_json JSON NOT NULL,
    spec_sha256 VARCHAR NOT NULL,
    suite VARCHAR NOT NULL,
    task_ids JSON NOT NULL,
    seeds BIGINT NOT NULL,
    leafcost_version VARCHAR NOT NULL,
    sandbox_options JSON
);
CREATE TABLE arms (
    run_id VARCHAR NOT NULL,
    arm VARCHAR NOT NULL,
    adapter VARCHAR NOT NULL,
    model VARCHAR NOT NULL,
    endpoint VARCHAR,
    served_model VARCHAR,
    config JSON,
    server_info JSON,
    model_info JSON,
    warnings JSON,
    status VARCHAR NOT NULL CHECK (status IN ('ready', 'skipped', 'failed', 'finished', 'interrupted')),
    status_reason VARCHAR,
    started_at TIMESTAMPTZ,
    ended_at TIMESTAMPTZ,
    PRIMARY KEY (run_id, arm)
);
CREATE TABLE episodes (
    episode_id VARCHAR PRIMARY KEY,
    run_id VARCHAR NOT NULL,
    arm VARCHAR NOT NULL,
    task_id VARCHAR NOT NULL,
    seed BIGINT NOT NULL,
    attempt BIGINT NOT NULL,
    status VARCHAR NOT NULL CHECK (status IN ('running', 'finished')),
    exit_reason VARCHAR,
    resolved BOOLEAN,
    reward DOUBLE,
    grade_error VARCHAR,
    error_detail VARCHAR,
    infra_error BOOLEAN NOT NULL DEFAULT false,
    harness_error BOOLEAN NOT NULL DEFAULT false,
    final BOOLEAN NOT NULL DEFAULT false,
    n_steps BIGINT,
    prompt_tokens BIGINT,
    cached_tokens BIGINT,
    completion_tokens BIGINT,
    reasoning_tokens BIGINT,
    model_calls BIGINT,
    started_at TIMESTAMPTZ NOT NULL,
    ended_at TIMESTAMPTZ,
    elapsed_sec DOUBLE,
    sandbox_spec_hash VARCHAR,
    isolation VARCHAR,
    sandbox_cpu_seconds DOUBLE,
    sandbox_start_sec DOUBLE,
    patch_bytes BIGINT,
    trajectory_path VARCHAR,
    UNIQUE (run_id, arm, task_id, seed, attempt)
);
CREATE SEQUENCE model_calls_call_id_seq START 1;
CREATE TABLE model_calls (
    call_id BIGINT PRIMARY KEY DEFAULT nextval('model_calls_call_id_seq'),
    run_id VARCHAR NOT NULL,
    arm VARCHAR NOT NULL,
    episode_id VARCHAR NOT NULL,
    step BIGINT NOT NULL,
    attempt BIGINT NOT NULL,
    model VARCHAR NOT NULL,
    status VARCHAR NOT NULL,
    http_status BIGINT,
    error VARCHAR,
    finish_reason VARCHAR,
    prompt_tokens BIGINT NOT NULL,
    cached_tokens BIGINT NOT NULL,
    completion_tokens BIGINT NOT NULL,
    reasoning_tokens BIGINT NOT NULL,
    total_tokens BIGINT NOT NULL,
    started_at TIMESTAMPTZ NOT NULL,
    latency_sec DOUBLE NOT NULL,
    ttft_sec DOUBLE,
    router_cost_usd DOUBLE,
    router_cost_detail JSON,
    router_retries BIGINT,
    router_fallbacks BIGINT,
    cost_usd DOUBLE,
    price_source VARCHAR,
    price_revision VARCHAR,
    request_id VARCHAR
);
CREATE TABLE tool_calls (
    run_id VARCHAR NOT NULL,
    arm VARCHAR NOT NULL,
    episode_id VARCHAR NOT NULL,
    step BIGINT NOT NULL,
    idx BIGINT NOT NULL,
    tool_call_id VARCHAR,
    tool_name VARCHAR NOT NULL,
    arguments_chars BIGINT NOT NULL,
    output_chars BIGINT NOT NULL,
    started_at TIMESTAMPTZ NOT NULL,
    seconds DOUBLE NOT NULL
);
CREATE SEQUENCE gpu_leases_lease_id_seq START 1;
CREATE TABLE gpu_leases (
    lease_id BIGINT PRIMARY KEY DEFAULT nextval('gpu_leases_lease_id_seq'),
    run_id VARCHAR NOT NULL,
    arm VARCHAR NOT NULL,
    kind VARCHAR NOT NULL CHECK (kind IN ('gpu', 'cpu')),
    hardware VARCHAR NOT NULL,
    count BIGINT NOT NULL,
    usd_per_hour DOUBLE NOT NULL,
    started_at TIMESTAMPTZ NOT NULL,
    ended_at TIMESTAMPTZ
);
CREATE TABLE server_samples (
    run_id VARCHAR NOT NULL,
    arm VARCHAR NOT NULL,
    taken_at TIMESTAMPTZ NOT NULL,
    metric VARCHAR NOT NULL,
    value DOUBLE NOT NULL
);
"""

# What users see in duckdb_tables() / duckdb_columns(): the meaning of each table and of the columns whose
# name alone does not say it.
_COMMENTS: dict[str, str] = {
    "meta": "Ledger facts: schema_version.",
    "runs": "One row per run (a run spec over arms x tasks x seeds).",
    "runs.task_ids": "JSON array: the ordered task list every arm sees.",
    "runs.seeds": "Seeds per (arm, task).",
    "runs.spec_sha256": "sha256 of spec_json; a resume must match it.",
    "arms": "One row per arm of a run: the endpoint, what the server said about itself, and how the arm ended.",
    "arms.config": "JSON: what the adapter forces or adds to requests. Never holds a secret.",
    "arms.status": "ready, skipped (never started), failed (stopped by an error), interrupted (the run was "
                   "stopped) or finished.",
    "episodes": "One row per attempt of (arm, task, seed); infra-failed attempts stay, with final = false.",
    "episodes.final": "This attempt is the one that counts for its (arm, task, seed).",
    "episodes.infra_error": "The endpoint or sandbox failed (not the model); such attempts may be retried.",
    "episodes.harness_error": "leafcost itself failed during this attempt.",
    "episodes.reward": "The verifier's reward; NULL when grading gave none (see grade_error).",
    "episodes.prompt_tokens": "Sum over this attempt's model_calls: all input tokens, cached included.",
    "episodes.cached_tokens": "Sum over model_calls: the part of prompt_tokens served from the prefix cache.",
    "episodes.completion_tokens": "Sum over model_calls: all output tokens, reasoning included.",
    "episodes.reasoning_tokens": "Sum over model_calls: the part of completion_tokens spent reasoning.",
    "episodes.model_calls": "Number of HTTP attempts to the model (failed ones included).",
    "episodes.sandbox_spec_hash": "Hash of the sandbox spec; comparable arms share it.",
    "model_calls": "One row per HTTP attempt to a model endpoint, failed and retried ones included.",
    "model_calls.step": "The episode step (assistant turn) this attempt belongs to.",
    "model_calls.attempt": "The HTTP attempt within the step, from 1.",
    "model_calls.model": "The model or deployment that answered (a router's fallback shows here).",
    "model_calls.prompt_tokens": "All input tokens, cached included, as the server reported them.",
    "model_calls.cached_tokens": "The part of prompt_tokens served from the prefix cache.",
    "model_calls.completion_tokens": "All output tokens, reasoning included.",
    "model_calls.reasoning_tokens": "The part of completion_tokens spent reasoning.",
    "model_calls.cost_usd": "Tokens x the arm's price sheet; NULL when not priced per token (self-hosted).",
    "model_calls.price_source": "Where the prices came from (litellm price map, explicit spec prices, ...).",
    "model_calls.price_revision": "The price table revision used for cost_usd.",
    "model_calls.router_cost_usd": "What the router itself reported this call cost, kept beside cost_usd.",
    "tool_calls": "One row per tool call the model made.",
    "tool_calls.idx": "Position of the call among the step's tool calls.",
    "gpu_leases": "Hardware paid by the hour for a self-hosted arm: GPUs, or the CPU machine of the local arm.",
    "gpu_leases.usd_per_hour": "Per unit (per GPU): the lease costs count x usd_per_hour per hour.",
    "server_samples": "Prometheus samples scraped from a self-hosted server, one row per metric per scrape.",
    "server_samples.metric": "Sample name with its labels, as exposed.",
}


def _comments_sql(comments: Mapping[str, str]) -> str:
    statements = []
    for target, text in comments.items():
        kind = "COLUMN" if "." in target else "TABLE"
        statements.append(f"COMMENT ON {kind} {target} IS '{text.replace(chr(39), chr(39) * 2)}';")
    return "\n".join(statements)


# Ordered schema steps; opening a file applies those it lacks. A released step is never edited: a change is a
# new step appended at the end.
_ROUTER_MODEL_COLUMNS = """
ALTER TABLE model_calls ADD COLUMN router_model VARCHAR;
ALTER TABLE model_calls ADD COLUMN router_deployment VARCHAR;
""" + _comments_sql({
    "model_calls.router_model": "The model name the router says answered (x-litellm-model-group); a fallback's "
                                "differs from the arm's model and is priced at its own prices.",
    "model_calls.router_deployment": "The router's id of the deployment that answered (x-litellm-model-id).",
    "model_calls.router_fallbacks": "Fallbacks the router made behind this one request (its own header).",
})
_CACHE_WRITE_COLUMN = """
ALTER TABLE model_calls ADD COLUMN cache_write_tokens BIGINT NOT NULL DEFAULT 0;
""" + _comments_sql({"model_calls.cache_write_tokens": "The part of prompt_tokens written to the provider's "
                                                       "prompt cache (billed at the cache_write rate)."})
_SCENARIOS_TABLE = """
CREATE TABLE scenarios (
    run_id VARCHAR NOT NULL,
    name VARCHAR NOT NULL,
    created_at TIMESTAMPTZ NOT NULL,
    sheet JSON NOT NULL,
    summary JSON NOT NULL,
    PRIMARY KEY (run_id, name)
);
""" + _comments_sql({
    "scenarios": "What-if repricings of a finished run (leafcost reprice): other prices over the same recorded "
                 "facts, which stay untouched.",
    "scenarios.sheet": "JSON: the price sheet applied.",
    "scenarios.summary": "JSON: the leafcost summary document under that sheet.",
})
# A lease recorded before heartbeats existed and still open was left by a dead process (a migration runs with
# the file to itself): its last sign of life is its arm's last recorded activity before the arm's next lease.
_LEASE_HEARTBEATS = """
ALTER TABLE gpu_leases ADD COLUMN heartbeat_at TIMESTAMPTZ;
ALTER TABLE gpu_leases ADD COLUMN owner_pid BIGINT;
ALTER TABLE gpu_leases ADD COLUMN owner_host VARCHAR;
UPDATE gpu_leases AS l SET heartbeat_at = s.last_seen
FROM (
    SELECT b.lease_id, greatest(any_value(b.started_at), max(a.at)) AS last_seen
    FROM (SELECT lease_id, run_id, arm, started_at, ended_at,
                 lead(started_at) OVER (PARTITION BY run_id, arm ORDER BY started_at, lease_id) AS next_start
          FROM gpu_leases) AS b
    LEFT JOIN (
        SELECT run_id, arm, started_at + to_microseconds(CAST(latency_sec * 1e6 AS BIGINT)) AS at FROM model_calls
        UNION ALL SELECT run_id, arm, started_at + to_microseconds(CAST(seconds * 1e6 AS BIGINT)) FROM tool_calls
        UNION ALL SELECT run_id, arm, taken_at FROM server_samples
        UNION ALL SELECT run_id, arm, coalesce(ended_at, started_at) FROM episodes
    ) AS a ON a.run_id = b.run_id AND a.arm = b.arm AND a.at >= b.started_at
              AND (b.next_start IS NULL OR a.at < b.next_start)
    WHERE b.ended_at IS NULL
    GROUP BY b.lease_id
) AS s
WHERE l.lease_id = s.lease_id;
""" + _comments_sql({
    "gpu_leases.heartbeat_at": "The last time the owner process was known alive while the lease was open. An open "
                               "lease is billed up to here; one whose owner died is closed here on the next start.",
    "gpu_leases.owner_pid": "The process that opened the lease.",
    "gpu_leases.owner_host": "The host of the process that opened the lease.",
})
# DuckDB cannot alter a CHECK constraint: the runs table is rebuilt with 'failed' allowed and a reason column.
_RUN_FAILED_STATUS = """
CREATE TABLE runs_rebuilt (
    run_id VARCHAR PRIMARY KEY,
    name VARCHAR NOT NULL,
    created_at TIMESTAMPTZ NOT NULL,
    updated_at TIMESTAMPTZ NOT NULL,
    status VARCHAR NOT NULL CHECK (status IN ('running', 'finished', 'interrupted', 'failed')),
    spec_json JSON NOT NULL,
    spec_sha256 VARCHAR NOT NULL,
    suite VARCHAR NOT NULL,
    task_ids JSON NOT NULL,
    seeds BIGINT NOT NULL,
    leafcost_version VARCHAR NOT NULL,
    sandbox_options JSON,
    status_reason VARCHAR
);
INSERT INTO runs_rebuilt SELECT run_id, name, created_at, updated_at, status, spec_json, spec_sha256, suite, task_ids,
    seeds, leafcost_version, sandbox_options, NULL FROM runs;
DROP TABLE runs;
ALTER TABLE runs_rebuilt RENAME TO runs;
""" + _comments_sql({
    **{target: text for target, text in _COMMENTS.items() if target.split(".")[0] == "runs"},
    "runs.status": "running, finished, interrupted (stopped before the end: resume it) or failed (refused or "
                   "stopped by an error: see status_reason).",
    "runs.status_reason": "Why the run is failed or interrupted, in one line.",
})
MIGRATIONS: list[str] = [_SCHEMA_V1, _comments_sql(_COMMENTS), _ROUTER_MODEL_COLUMNS, _CACHE_WRITE_COLUMN,
                         _SCENARIOS_TABLE, _LEASE_HEARTBEATS, _RUN_FAILED_STATUS]
SCHEMA_VERSION = len(MIGRATIONS)

_ARM_TOTALS_SQL = """
SELECT arm, sum(done)::BIGINT, sum(resolved)::BIGINT, sum(errors)::BIGINT, sum(cost)::DOUBLE FROM (
    SELECT arm, count(*) AS done, count(*) FILTER (WHERE resolved) AS resolved,
           count(*) FILTER (WHERE errors) AS errors,
           0.0 AS cost
    FROM (SELECT arm, task_id, seed, bool_or(coalesce(resolved, false)) AS resolved,
                 bool_or(infra_error OR harness_error) AS errors
          FROM episodes WHERE run_id = $1 AND status = 'finished' AND final GROUP BY arm, task_id, seed)
    GROUP BY arm
    UNION ALL
    SELECT arm, 0, 0, 0, coalesce(sum(cost_usd), 0.0) FROM model_calls WHERE run_id = $1 AND cost_usd IS NOT NULL
    GROUP BY arm
) GROUP BY arm ORDER BY arm
"""
_TOKEN_SETS = ", ".join(f"{c} = c.{c}" for c in ("prompt_tokens", "cached_tokens", "completion_tokens",
                                                 "reasoning_tokens", "model_calls"))
_FINISH_SQL = """
UPDATE episodes AS e SET status = 'finished', exit_reason = f.exit_reason, resolved = f.resolved,
    reward = f.reward, final = f.final, n_steps = f.n_steps, grade_error = f.grade_error,
    error_detail = f.error_detail, infra_error = f.infra_error, harness_error = f.harness_error,
    ended_at = f.ended_at, elapsed_sec = coalesce(f.elapsed_sec, epoch(f.ended_at) - epoch(e.started_at)),
    sandbox_cpu_seconds = f.sandbox_cpu_seconds, sandbox_start_sec = f.sandbox_start_sec,
    patch_bytes = f.patch_bytes, trajectory_path = coalesce(f.trajectory_path, e.trajectory_path),
    sandbox_spec_hash = coalesce(f.sandbox_spec_hash, e.sandbox_spec_hash),
    isolation = coalesce(f.isolation, e.isolation),
    prompt_tokens = coalesce(c.prompt_tokens, 0), cached_tokens = coalesce(c.cached_tokens, 0),
    completion_tokens = coalesce(c.completion_tokens, 0), reasoning_tokens = coalesce(c.reasoning_tokens, 0),
    model_calls = coalesce(c.model_calls, 0)
FROM (SELECT {unnest}) AS f
LEFT JOIN (
    SELECT episode_id, sum(prompt_tokens) AS prompt_tokens, sum(cached_tokens) AS cached_tokens,
           sum(completion_tokens) AS completion_tokens, sum(reasoning_tokens) AS reasoning_tokens,
           count(*) AS model_calls
    FROM model_calls WHERE episode_id IN (SELECT unnest($1::VARCHAR[])) GROUP BY episode_id
) AS c ON c.episode_id = f.episode_id
WHERE e.episode_id = f.episode_id AND e.status = 'running'
RETURNING e.episode_id
"""
_INTERRUPT_SQL = f"""
UPDATE episodes AS e SET status = 'finished', exit_reason = 'interrupted', infra_error = true, final = false,
    resolved = false,
    error_detail = 'the run stopped while this attempt was running (the process crashed or was killed)',
    ended_at = c.ended_at, elapsed_sec = epoch(c.ended_at) - epoch(e.started_at), {_TOKEN_SETS}
FROM (
    SELECT r.episode_id,
           coalesce(sum(m.prompt_tokens), 0) AS prompt_tokens, coalesce(sum(m.cached_tokens), 0) AS cached_tokens,
           coalesce(sum(m.completion_tokens), 0) AS completion_tokens,
           coalesce(sum(m.reasoning_tokens), 0) AS reasoning_tokens, count(m.call_id) AS model_calls,
           greatest(any_value(r.started_at),
                    coalesce(max(m.started_at + to_microseconds(CAST(m.latency_sec * 1e6 AS BIGINT))),
                             any_value(r.started_at)),
                    coalesce(any_value(t.last_tool), any_value(r.started_at))) AS ended_at
    FROM episodes AS r
    LEFT JOIN model_calls AS m ON m.episode_id = r.episode_id
    LEFT JOIN (SELECT episode_id, max(started_at + to_microseconds(CAST(seconds * 1e6 AS BIGINT))) AS last_tool
               FROM tool_calls WHERE run_id = $1 GROUP BY episode_id) AS t ON t.episode_id = r.episode_id
    WHERE r.run_id = $1 AND r.status = 'running'
    GROUP BY r.episode_id
) AS c
WHERE e.episode_id = c.episode_id AND e.status = 'running'
RETURNING e.episode_id
"""


# ---------------------------------------------------------------------------------------------------------
# Writer internals

_MAX_BATCH = 5000
_GROUP_WINDOW_SEC = 0.005  # waiters wait at most this much longer; commits carry many rows
_ID_COLUMNS = {"model_calls": ("call_id", "model_calls_call_id_seq"),
               "gpu_leases": ("lease_id", "gpu_leases_lease_id_seq")}


@dataclass
class _Op:
    name: str
    apply: Callable[[_Batch], Any]
    future: asyncio.Future[Any]
    loop: asyncio.AbstractEventLoop


class _Slot:
    """A result known only when the batch flushes (an id drawn from a sequence)."""

    value: Any = None


class _Batch:
    """The operations of one transaction. Appends are buffered per table and inserted column-wise (one INSERT
    of unnested lists per table: DuckDB's executemany runs row by row, about 500 rows/s here); every other
    statement first flushes the buffers, so the transaction sees operations in their order."""

    def __init__(self, conn: duckdb.DuckDBPyConnection, types: Mapping[str, Mapping[str, str]],
                 ids: Mapping[str, _IdPool]):
        self._conn = conn
        self._types = types
        self._ids = ids
        self._rows: dict[tuple[str, tuple[str, ...]], list[tuple[Any, ...]]] = {}
        self._slots: dict[tuple[str, tuple[str, ...]], list[_Slot]] = {}
        self._finishes: dict[str, dict[str, Any]] = {}

    def append(self, table: str, row: Mapping[str, Any]) -> _Slot | None:
        key = (table, tuple(row))
        self._rows.setdefault(key, []).append(tuple(row.values()))
        if table not in _ID_COLUMNS:
            return None
        slot = _Slot()
        self._slots.setdefault(key, []).append(slot)
        return slot

    def finish(self, row: Mapping[str, Any]) -> None:
        """Deferred to flush, where every finish of the batch is one UPDATE (after the batch's inserts)."""
        if row["episode_id"] in self._finishes:
            raise LedgerError(f"episode {row['episode_id']!r} is not running (it was just finished)")
        self._finishes[row["episode_id"]] = dict(row)

    def execute(self, sql: str, params: Sequence[Any] = ()) -> duckdb.DuckDBPyConnection:
        self.flush()
        return self._conn.execute(sql, params)

    def update_one(self, table: str, where: str, where_params: Sequence[Any], changes: Mapping[str, Any], *,
                   what: str) -> None:
        sets = ", ".join(f"{k} = ?" for k in changes)
        done = self.execute(f"UPDATE {table} SET {sets} WHERE {where} RETURNING 1",
                            [*changes.values(), *where_params]).fetchall()
        if not done:
            raise LedgerError(f"{what} is not in the ledger")

    def flush(self) -> None:
        for (table, columns), rows in self._rows.items():
            if table in _ID_COLUMNS:
                ids = self._ids[table].take(self._conn, len(rows))
                for slot, new_id in zip(self._slots[(table, columns)], ids):
                    slot.value = new_id
                columns = (_ID_COLUMNS[table][0], *columns)
                rows = [(new_id, *row) for new_id, row in zip(ids, rows)]
            self._conn.execute(f"INSERT INTO {table} ({', '.join(columns)}) SELECT {self._unnest(table, columns)}",
                               [list(values) for values in zip(*rows)])
        self._rows.clear()
        self._slots.clear()
        if self._finishes:
            self._flush_finishes()

    def _flush_finishes(self) -> None:
        finishes = list(self._finishes.values())
        self._finishes.clear()
        columns = tuple(finishes[0])
        values = [list(column) for column in zip(*(tuple(f.values()) for f in finishes))]
        done = {episode_id for (episode_id,) in self._conn.execute(
            _FINISH_SQL.format(unnest=self._unnest("episodes", columns)), values).fetchall()}
        missing = [f["episode_id"] for f in finishes if f["episode_id"] not in done]
        if missing:
            raise LedgerError(f"episode {missing[0]!r} is not running (unknown, or already finished)")

    def _unnest(self, table: str, columns: Sequence[str]) -> str:
        types = self._types[table]
        return ", ".join(f"unnest(${i}::{_param_type(types[c])}[]) AS {c}" for i, c in enumerate(columns, 1))


class _IdPool:
    """Ids drawn from a table's sequence in blocks (one statement per block, not per batch). Ids of a block
    that a crash or a rolled-back batch leaves unused are gaps, never reused."""

    def __init__(self, sequence: str, block: int = 1024):
        self._sequence = sequence
        self._block = block
        self._free: list[int] = []

    def take(self, conn: duckdb.DuckDBPyConnection, n: int) -> list[int]:
        if len(self._free) < n:
            k = max(n - len(self._free), self._block)
            self._free += [r[0] for r in conn.execute(
                f"SELECT nextval('{self._sequence}') AS id FROM range({k}) ORDER BY id").fetchall()]
        taken, self._free = self._free[:n], self._free[n:]
        return taken

    def drop(self) -> None:
        self._free = []


def _wake(settled: Sequence[tuple[_Op, Any, Exception | None]]) -> None:
    by_loop: dict[asyncio.AbstractEventLoop, list[tuple[asyncio.Future[Any], Any, Exception | None]]] = {}
    for op, result, error in settled:
        by_loop.setdefault(op.loop, []).append((op.future, result, error))
    for loop, items in by_loop.items():
        try:
            loop.call_soon_threadsafe(_resolve, items)
        except RuntimeError:  # that loop is closed: nobody is waiting there any more
            pass


def _resolve(items: Sequence[tuple[asyncio.Future[Any], Any, Exception | None]]) -> None:
    for future, result, error in items:
        if future.done():  # the awaiting task was cancelled; what it asked for is recorded all the same
            continue
        if error is not None:
            future.set_exception(error)
        else:
            future.set_result(result)


def _as_ledger_error(name: str, exc: Exception) -> Exception:
    if isinstance(exc, LedgerError):
        return exc
    error = LedgerError(f"{name}: {exc}")
    error.__cause__ = exc
    return error


def _param_type(column_type: str) -> str:
    return "VARCHAR" if column_type == "JSON" else column_type


def _column_types(conn: duckdb.DuckDBPyConnection) -> dict[str, dict[str, str]]:
    types: dict[str, dict[str, str]] = {}
    for table, column, data_type in conn.execute(
            "SELECT table_name, column_name, data_type FROM duckdb_columns() "
            "WHERE database_name = current_database() AND schema_name = 'main'").fetchall():
        types.setdefault(table, {})[column] = data_type
    return types


# ---------------------------------------------------------------------------------------------------------
# Opening and migrating

def _open_writable(path: Path) -> duckdb.DuckDBPyConnection:
    duckdb = _duckdb()
    if not path.parent.exists():
        raise LedgerError(f"{path}: the folder {path.parent} does not exist")
    try:
        conn = duckdb.connect(str(path))
    except duckdb.Error as exc:
        raise _open_error(path, exc, writing=True) from None
    try:
        conn.execute("SET TimeZone = 'UTC'")
        migrate(conn, path)
    except BaseException:
        conn.close()
        raise
    return conn


def migrate(conn: duckdb.DuckDBPyConnection, path: Path | str, steps: Sequence[str] | None = None) -> int:
    """Applies the steps this file lacks, all in one transaction (a failing step leaves the file as it was).
    Returns the version reached. Refuses a file from a newer leafcost and a DuckDB file that is not a ledger."""
    steps = MIGRATIONS if steps is None else steps
    version = _schema_version(conn, path)
    if version > len(steps):
        raise _version_error(Path(path), version, read_only=False, known=len(steps))
    if version == len(steps):
        return version
    conn.execute("BEGIN TRANSACTION")
    try:
        for step in steps[version:]:
            conn.execute(step)
        conn.execute("INSERT OR REPLACE INTO meta (key, value) VALUES ('schema_version', ?)", [str(len(steps))])
        conn.execute("COMMIT")
    except BaseException as exc:
        conn.execute("ROLLBACK")
        if isinstance(exc, Exception) and not isinstance(exc, LedgerError):
            raise LedgerError(f"{path}: upgrading the ledger from schema version {version} failed: {exc}") from exc
        raise
    return len(steps)


def _schema_version(conn: duckdb.DuckDBPyConnection, path: Path | str) -> int:
    tables = {name for (name,) in conn.execute(
        "SELECT table_name FROM duckdb_tables() WHERE database_name = current_database()").fetchall()}
    if "meta" not in tables:
        if tables:
            raise LedgerError(f"{path}: a DuckDB file, but not a leafcost ledger (tables {', '.join(sorted(tables))}"
                              " and no meta table); pass --db with another path")
        return 0
    rows = conn.execute("SELECT value FROM meta WHERE key = 'schema_version'").fetchall()
    if not rows or not str(rows[0][0]).isdigit():
        raise LedgerError(f"{path}: the meta table has no valid schema_version; this file was not written by "
                          "leafcost or was edited by hand")
    return int(rows[0][0])


def _version_error(path: Path, version: int, *, read_only: bool, known: int | None = None) -> LedgerError:
    known = SCHEMA_VERSION if known is None else known
    if version > known:
        return LedgerError(f"{path}: written by a newer leafcost (ledger schema version {version}; this leafcost "
                           f"{_leafcost_version()} knows up to {known}). Upgrade leafcost to use this file")
    assert read_only
    return LedgerOutdated(f"{path}: ledger schema version {version} is older than this leafcost's ({known}); open it "
                       "once for writing (any `leafcost run`, or compare.ledger.Ledger.open) to upgrade it")


def _open_error(path: Path, exc: Exception, *, writing: bool) -> LedgerError:
    message = str(exc)
    if "lock" in message.lower():
        match = re.search(r"PID (\d+)", message)
        pid = int(match.group(1)) if match else None
        holder = f"process {pid}" if pid else "another process"
        if writing:
            return LedgerBusy(f"{path}: {holder} has this ledger open (another run, or a reader such as a report or "
                              "a duckdb shell); a run needs the file to itself: close that process, or pass --db "
                              "to write another file", pid)
        return LedgerBusy(f"{path}: {holder} has this ledger open for writing (a leafcost run?). DuckDB lets no "
                          "other process open the file meanwhile, read-only included: read through the writing "
                          "process (its API server), or wait for it to finish", pid)
    if "different configuration" in message:
        return LedgerBusy(f"{path}: this process already has the ledger open; read through Ledger.reader() or "
                          "Ledger.query() instead of a second connection")
    return LedgerError(f"{path}: cannot open the ledger: {message}")


# ---------------------------------------------------------------------------------------------------------
# Values

def _find_secret(value: Any, where: str) -> str | None:
    if isinstance(value, Mapping):
        for key, item in value.items():
            path = f"{where}.{key}"
            if secret_name(str(key)) and not names_env(str(key), item):
                return f"{path} (a credential-named key)"
            found = _find_secret(item, path)
            if found:
                return found
    elif isinstance(value, list | tuple):
        for i, item in enumerate(value):
            found = _find_secret(item, f"{where}[{i}]")
            if found:
                return found
    elif isinstance(value, str) and credential_shaped(value):
        return f"{where} (its value looks like a key or bearer token)"
    return None


def _plain(value: BaseModel | Mapping[str, Any] | None) -> Any:
    if value is None:
        return None
    if isinstance(value, BaseModel):
        return value.model_dump(mode="json")
    return json.loads(json.dumps(dict(value), default=str))


def _json(value: Any) -> str | None:
    return None if value is None else json.dumps(value, default=str)


def _utc(at: datetime | None) -> datetime | None:
    """Aware UTC; a naive datetime is taken as UTC already."""
    if at is None:
        return None
    return at.replace(tzinfo=timezone.utc) if at.tzinfo is None else at.astimezone(timezone.utc)


def _leafcost_version() -> str:
    try:
        return metadata.version("leafcost")
    except metadata.PackageNotFoundError:
        return "unknown"


def _duckdb():
    import duckdb  # ~0.4 s: imported where used, never at leafcost's import

    return duckdb
