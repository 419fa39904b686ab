"""The single writer of a ledger file: `Ledger`, whose record_* coroutines queue operations for its writer thread
(see batching) and return once they have committed, plus the resume queries a run makes and the ids it mints."""

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
from collections.abc import Callable, Mapping, Sequence
from datetime import datetime, timezone
from pathlib import Path
from typing import TYPE_CHECKING, Any

from pydantic import BaseModel

from adapters.base import CallAttempt, CallIntent, Lease, ServerSample, ToolCall, utcnow
from adapters.answers import valid_text
from compare.ledger.batching import Batch, GroupCommit, Op
from compare.ledger.credentials import check_no_secrets, redact_secrets
from compare.ledger.errors import LedgerBusy, LedgerError
from compare.ledger.intent_journal import IntentJournal, journal_path, take_in
from compare.ledger.opening import default_db_path, installed_version, open_writable
from compare.ledger.reading import RunRecord, fetch_rows
from compare.ledger.schema import ARM_TOTALS_SQL, INTERRUPT_SQL, ArmStatus, RunStatus
from compare.spec import RunSpec

if TYPE_CHECKING:
    import duckdb

RUN_ID = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.:-]{0,120}$")
_OPEN_HERE: set[str] = set()  # files a Ledger of this process holds: one writer per file
_OPEN_HERE_LOCK = threading.Lock()


def new_run_id(name: str, at: datetime | None = None) -> str:
    """A readable, unique run id: the run's name, UTC time, and 4 random hex digits."""
    at = _utc(at) or utcnow()
    return f"{name}-{at:%Y%m%d-%H%M%S}-{secrets.token_hex(2)}"


def episode_id_for(run_id: str, arm: str, task_id: str, seed: int, attempt: int) -> str:
    return f"{run_id}/{arm}/{task_id}/s{seed}/a{attempt}"


class ArmTotals(BaseModel):
    """An arm's figures as the ledger has them, whichever process ran its episodes: final attempts only."""

    done: int = 0  # (task, seed) keys whose final attempt finished
    resolved: int = 0
    errors: int = 0  # final attempts that ended in an infrastructure or harness error
    calls_cost_usd: float = 0.0  # sum of model_calls.cost_usd over every attempt (hosted arms; 0 when self-hosted)


class Ledger:
    """The single writer of one ledger file. Write methods are coroutines: they queue an operation for the
    writer thread and return once its transaction has committed. Cancelling an await does not unrecord it.
    The queue_* methods return at once: their rows commit with later writes, always before what is queued
    after them."""

    def __init__(self, path: Path):
        self.path = path
        self._key = str(path.resolve())
        self._queue: queue.SimpleQueue[Op | None] = queue.SimpleQueue()
        self._lock = threading.Lock()
        self._closed = False
        self._read_lock = threading.Lock()
        self._reader: duckdb.DuckDBPyConnection | None = None
        self._cursors: list[duckdb.DuckDBPyConnection] = []
        self._conn: duckdb.DuckDBPyConnection | None = None
        self._episodes: dict[str, tuple[str, str]] = {}  # running here: episode_id -> (run_id, arm)
        self._held_leases: set[int] = set()  # opened through this Ledger and not closed: their owner is alive
        self._journal: IntentJournal | None = None  # call intents, written before their request is sent
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
        row = _run_row(run_id, spec, task_ids=task_ids, sandbox_options=sandbox_options,
                       leafcost_version=leafcost_version, created_at=created_at, spec_sha256=spec_sha256)
        await self._write("create_run", lambda batch: batch.append("runs", row))

    def queue_begin_run(self, run_id: str, spec: RunSpec, *, task_dates: Mapping[str, datetime | None],
                        sandbox_options: BaseModel | Mapping[str, Any] | None = None, spec_sha256: str | None = None,
                        plan: Mapping[str, Any] | None = None) -> asyncio.Future[int]:
        """A new run's first writes as one transaction, queued without waiting: the open leases of killed
        processes closed (close_orphan_leases), the run (create_run), its tasks' dates (record_task_dates) and its
        plan (record_plan). All commit or none does. Returns the future of the commit: how many orphan leases
        were closed, or the LedgerError that kept it all out. The run's id and spec are checked here, before
        anything is queued (LedgerError, SecretInLedger)."""
        row = _run_row(run_id, spec, task_ids=list(task_dates), sandbox_options=sandbox_options,
                       spec_sha256=spec_sha256)
        close_orphans = self._close_orphans(None)
        dates = _task_dates(run_id, task_dates)
        plan_row = _plan_row(run_id, plan) if plan is not None else None

        def apply(batch: Batch) -> int:
            closed = close_orphans(batch)
            batch.append("runs", row)
            dates(batch)
            if plan_row is not None:
                batch.append("run_plans", plan_row)
            return closed
        return self._submit("begin_run", apply, awaited=True)

    def queue_resume_run(self, run_id: str, *, task_dates: Mapping[str, datetime | None]
                         ) -> asyncio.Future[tuple[int, int]]:
        """A resumed run's first writes as one transaction, queued without waiting: the attempts a crash left
        running interrupted (interrupt_running), the open leases of killed processes closed (close_orphan_leases),
        the run running again (set_run_status) and its tasks' dates written again (record_task_dates). All commit
        or none does. Returns the future of the commit: (attempts interrupted, leases closed), or the LedgerError
        that kept it all out."""
        close_orphans = self._close_orphans(None)
        dates = _task_dates(run_id, task_dates)
        running = {"status": "running", "status_reason": None, "updated_at": utcnow()}

        def apply(batch: Batch) -> tuple[int, int]:
            interrupted = len(batch.execute(INTERRUPT_SQL, [run_id]).fetchall())
            closed = close_orphans(batch)
            batch.update_one("runs", "run_id = ?", [run_id], running, what=f"run {run_id!r}")
            dates(batch)
            return interrupted, closed
        return self._submit("resume_run", apply, awaited=True)

    async def record_task_dates(self, run_id: str, created_at: Mapping[str, datetime | None]) -> None:
        """Each task of the run with its creation date (None: the task does not say); a resume writes them again,
        so a run started before the table existed gets them too."""
        await self._write("record_task_dates", _task_dates(run_id, created_at))

    async def set_strict_grading(self, run_id: str) -> None:
        """From now on the run's figures count flagged attempts (episodes.flagged) as not resolved."""
        def apply(batch: Batch) -> None:
            batch.update_one("runs", "run_id = ?", [run_id], {"strict_grading": True}, what=f"run {run_id!r}")
        await self._write("set_strict_grading", apply)

    async def set_run_status(self, run_id: str, status: RunStatus, reason: str | None = None) -> None:
        """Sets the run's status and its reason (None clears a previous one: a resumed run is running again).
        A value that looks like a key is stored as "[redacted]"."""
        changes = {"status": status, "status_reason": redact_secrets(reason), "updated_at": utcnow()}

        def apply(batch: Batch) -> None:
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

        def apply(batch: Batch) -> None:
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

        def apply(batch: Batch) -> None:
            batch.update_one("arms", "run_id = ? AND arm = ?", [run_id, arm], changes,
                             what=f"arm {arm!r} of run {run_id!r}")
        await self._write("update_arm", apply)

    # episodes ---------------------------------------------------------------------------------------------

    async def start_episode(self, run_id: str, arm: str, task_id: str, seed: int, attempt: int, *,
                            started_at: datetime | None = None, sandbox_spec_hash: str | None = None,
                            isolation: str | None = None, trajectory_path: str | None = None) -> str:
        """Records an attempt as 'running' and returns its episode id, once committed."""
        episode_id, committed = self.queue_start_episode(run_id, arm, task_id, seed, attempt, started_at=started_at,
                                                         sandbox_spec_hash=sandbox_spec_hash, isolation=isolation,
                                                         trajectory_path=trajectory_path)
        await committed
        return episode_id

    def queue_start_episode(self, run_id: str, arm: str, task_id: str, seed: int, attempt: int, *,
                            started_at: datetime | None = None, sandbox_spec_hash: str | None = None,
                            isolation: str | None = None, trajectory_path: str | None = None
                            ) -> tuple[str, asyncio.Future[None]]:
        """start_episode without waiting for the commit (it commits within the awaited window, before anything
        queued after it: the episode's rows, its finish): (its episode id, the future of the commit, which gives
        the LedgerError that kept it out). The attempt's rows can be queued at once."""
        episode_id = episode_id_for(run_id, arm, task_id, seed, attempt)
        row = {"episode_id": episode_id, "run_id": run_id, "arm": arm, "task_id": task_id, "seed": seed,
               "attempt": attempt, "status": "running", "infra_error": False, "harness_error": False,
               "final": False, "started_at": _utc(started_at) or utcnow(), "sandbox_spec_hash": sandbox_spec_hash,
               "isolation": isolation, "trajectory_path": trajectory_path}
        self._episodes[episode_id] = (run_id, arm)
        try:
            committed = self._submit("start_episode", lambda batch: batch.append("episodes", row), awaited=True)
        except BaseException:
            self._episodes.pop(episode_id, None)
            raise

        def forget_if_failed(future: asyncio.Future[None]) -> None:
            if future.cancelled() or future.exception() is not None:
                self._episodes.pop(episode_id, None)
        committed.add_done_callback(forget_if_failed)
        return episode_id, committed

    async def record_call(self, episode_id: str, step: int, attempt: CallAttempt, *, cost_usd: float | None,
                          price_source: str | None, price_revision: str | None) -> int:
        """One HTTP attempt (failed ones too: their tokens were spent), committed on return. Returns its call_id.
        cost_usd is None when the call has no per-token price (self-hosted: the lease pays), never 0.0 for
        "unknown"."""
        row = self._call_row(episode_id, step, attempt, cost_usd, price_source, price_revision)
        return await self._write("record_call", lambda batch: batch.append("model_calls", row))

    def queue_call(self, episode_id: str, step: int, attempt: CallAttempt, *, cost_usd: float | None,
                   price_source: str | None, price_revision: str | None) -> asyncio.Future[int]:
        """record_call without waiting for the commit: the row commits with later writes, before any write
        queued after it (an episode's finish), within the deferred window. The future gives its call_id, or
        the LedgerError that kept it out."""
        row = self._call_row(episode_id, step, attempt, cost_usd, price_source, price_revision)
        return self._submit("record_call", lambda batch: batch.append("model_calls", row), awaited=False)

    async def record_tool_call(self, episode_id: str, step: int, index: int, call: ToolCall, *, output_chars: int,
                               started_at: datetime, seconds: float) -> None:
        """One tool call the model made (its `index` among the step's calls is the `idx` column)."""
        row = self._tool_row(episode_id, step, index, call, output_chars, started_at, seconds)
        await self._write("record_tool_call", lambda batch: batch.append("tool_calls", row))

    def queue_tool_call(self, episode_id: str, step: int, index: int, call: ToolCall, *, output_chars: int,
                        started_at: datetime, seconds: float) -> asyncio.Future[None]:
        """record_tool_call without waiting for the commit (as queue_call)."""
        row = self._tool_row(episode_id, step, index, call, output_chars, started_at, seconds)
        return self._submit("record_tool_call", lambda batch: batch.append("tool_calls", row), awaited=False)

    def _call_row(self, episode_id: str, step: int, attempt: CallAttempt, cost_usd: float | None,
                  price_source: str | None, price_revision: str | None) -> dict[str, Any]:
        run_id, arm = self._episode_key(episode_id)
        usage = attempt.usage
        return _storable({
                "run_id": run_id, "arm": arm, "episode_id": episode_id, "step": step, "attempt": attempt.attempt,
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
                "call_key": attempt.call_key,
                "cost_usd": cost_usd, "price_source": price_source, "price_revision": price_revision,
                "request_id": attempt.request_id, "answer_truncated_chars": attempt.answer_truncated_chars})

    def queue_intent(self, episode_id: str, intent: CallIntent, *, bound_usd: float | None,
                     price_source: str | None) -> asyncio.Future[Any]:
        """A request about to be sent: in the intent journal when this returns (a kill -9 after this point leaves
        it, so the call is never silently lost; see intent_journal), and queued for `call_intents` like a call's
        row (the future is that row's commit)."""
        run_id, arm = self._episode_key(episode_id)
        row = {"call_key": intent.call_key, "run_id": run_id, "arm": arm, "episode_id": episode_id,
               "attempt": intent.attempt, "model": intent.model, "sent_at": _utc(intent.sent_at),
               "request_bytes": intent.request_bytes, "max_tokens": intent.max_tokens, "bound_usd": bound_usd,
               "price_source": price_source}
        with self._lock:
            if self._closed or self._journal is None:
                raise LedgerError(f"{self.path}: the ledger is closed")
            self._journal.append(row)
        return self._submit("record_intent", lambda batch: batch.append("call_intents", row), awaited=False)

    async def record_reconciliation(self, call_key: str, *, spend_usd: float | None, prompt_tokens: int | None,
                                    completion_tokens: int | None, note: str) -> None:
        """What the router's spend log says of an unrecorded call (compare.reconcile)."""
        changes = {"router_spend_usd": spend_usd, "router_prompt_tokens": prompt_tokens,
                   "router_completion_tokens": completion_tokens, "reconciled_at": utcnow(), "reconcile_note": note}
        await self._write("record_reconciliation", lambda batch: batch.update_one(
            "call_intents", "call_key = ?", [call_key], changes, what=f"call intent {call_key!r}"))

    def _tool_row(self, episode_id: str, step: int, index: int, call: ToolCall, output_chars: int,
                  started_at: datetime, seconds: float) -> dict[str, Any]:
        run_id, arm = self._episode_key(episode_id)
        return _storable({"run_id": run_id, "arm": arm, "episode_id": episode_id, "step": step, "idx": index,
                          "tool_call_id": call.id or None, "tool_name": call.name,
                          "arguments_chars": len(call.arguments), "output_chars": output_chars,
                          "started_at": _utc(started_at), "seconds": seconds})

    async def finish_episode(self, episode_id: str, *, exit_reason: str, resolved: bool, reward: float | None,
                             final: bool, n_steps: int, grade_error: str | None = None,
                             error_detail: str | None = None, infra_error: bool = False, harness_error: bool = False,
                             ended_at: datetime | None = None, elapsed_sec: float | None = None,
                             sandbox_cpu_seconds: float | None = None, sandbox_start_sec: float | None = None,
                             patch_bytes: int | None = None, trajectory_path: str | None = None,
                             sandbox_spec_hash: str | None = None, isolation: str | None = None,
                             hack_paths: list[str] | None = None, flagged: bool = False) -> None:
        """Marks a running attempt finished with its results; token columns and model_calls are summed from
        its model_calls rows. `final`: this attempt counts for its (arm, task, seed), i.e. it will not be
        retried. elapsed_sec defaults to ended_at - started_at."""
        row = {"episode_id": episode_id, "exit_reason": exit_reason, "resolved": resolved, "reward": reward,
               "final": final, "n_steps": n_steps, "grade_error": grade_error, "error_detail": error_detail,
               "infra_error": infra_error, "harness_error": harness_error, "ended_at": _utc(ended_at) or utcnow(),
               "elapsed_sec": elapsed_sec, "sandbox_cpu_seconds": sandbox_cpu_seconds,
               "sandbox_start_sec": sandbox_start_sec, "patch_bytes": patch_bytes,
               "trajectory_path": trajectory_path, "sandbox_spec_hash": sandbox_spec_hash, "isolation": isolation,
               "hack_paths": None if hack_paths is None else _json(hack_paths), "flagged": flagged}
        row = _storable(row)  # error_detail and grade_error quote what a model or a log said

        def apply(batch: Batch) -> None:
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
        def apply(batch: Batch) -> None:
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

        def apply(batch: Batch) -> int:
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
        return await self._write("close_orphan_leases", self._close_orphans(run_id))

    def _close_orphans(self, run_id: str | None) -> Callable[[Batch], int]:
        held = sorted(self._held_leases)

        def apply(batch: Batch) -> int:
            return len(batch.execute(
                "UPDATE gpu_leases SET ended_at = greatest(started_at, coalesce(heartbeat_at, started_at)) "
                "WHERE (? IS NULL OR run_id = ?) AND ended_at IS NULL AND NOT list_contains(?::BIGINT[], lease_id) "
                "RETURNING lease_id", [run_id, run_id, held]).fetchall())
        return apply

    async def record_sample(self, run_id: str, arm: str, sample: ServerSample) -> int:
        """One row per metric of the scrape; returns how many."""
        taken_at = _utc(sample.taken_at)
        rows = [{"run_id": run_id, "arm": arm, "taken_at": taken_at, "metric": metric, "value": float(value)}
                for metric, value in sample.values.items()]

        def apply(batch: Batch) -> int:
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
        rows = await self._aread(ARM_TOTALS_SQL, [run_id])
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
        def apply(batch: Batch) -> int:
            rows = batch.execute(INTERRUPT_SQL, [run_id]).fetchall()
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

    async def record_look(self, run_id: str, look: int, *, tasks: int, total_tasks: int, episodes: int,
                          spent_usd: Mapping[str, float], budget: Mapping[str, Any], result: Mapping[str, Any],
                          action: str, reason: str | None = None, unspent_episodes: int | None = None,
                          unspent_usd: float | None = None) -> None:
        """One look of a run's decision question (decision_looks); a look is written once and never changed."""
        row = {"run_id": run_id, "look": look, "looked_at": utcnow(), "tasks": tasks, "total_tasks": total_tasks,
               "episodes": episodes, "spent_usd": _json(dict(spent_usd)), "budget": _json(dict(budget)),
               "result": json.dumps(dict(result), default=str), "action": action, "reason": reason,
               "unspent_episodes": unspent_episodes, "unspent_usd": unspent_usd}
        await self._write("record_look", lambda batch: batch.append("decision_looks", row))

    async def record_plan(self, run_id: str, document: Mapping[str, Any]) -> None:
        """The plan made before the run started (run_plans): written once with the new run, never replaced."""
        row = _plan_row(run_id, document)
        await self._write("record_plan", lambda batch: batch.append("run_plans", row))

    async def looks(self, run_id: str) -> list[dict[str, Any]]:
        """The run's decision looks in order (JSON columns parsed)."""
        rows = await asyncio.to_thread(self.query, "SELECT * FROM decision_looks WHERE run_id = ? ORDER BY look",
                                       [run_id])
        return [parse_look(row) for row in rows]

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
        if self._journal is not None:  # everything queued has committed: the journal's lines are in the ledger
            self._journal.clear()
            self._journal.close()
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

    async def _write(self, name: str, apply: Callable[[Batch], Any]) -> Any:
        return await self._submit(name, apply, awaited=True)

    def _submit(self, name: str, apply: Callable[[Batch], Any], *, awaited: bool) -> asyncio.Future[Any]:
        loop = asyncio.get_running_loop()
        future = loop.create_future()
        self._enqueue(Op(name, apply, future, loop, awaited))
        return future

    def _enqueue(self, op: Op) -> None:
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
            self._conn = open_writable(self.path)
            take_in(self._conn, journal_path(self.path))  # what a killed writer left only in the journal
            self._journal = IntentJournal(journal_path(self.path))
            self._reader = self._conn.cursor()
            self._reader.execute("SET TimeZone = 'UTC'")
            engine = GroupCommit(self._conn)
        except BaseException as exc:
            self._closed = True
            self._ready.set_exception(exc)
            return
        self._ready.set_result(None)
        engine.run(self._queue)
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


def _run_row(run_id: str, spec: RunSpec, *, task_ids: Sequence[str],
             sandbox_options: BaseModel | Mapping[str, Any] | None, leafcost_version: str | None = None,
             created_at: datetime | None = None, spec_sha256: str | None = None) -> dict[str, Any]:
    """The runs row of a new run; refuses a bad run id and a spec or sandbox options holding a secret."""
    if not RUN_ID.match(run_id):
        raise LedgerError(f"run id {run_id!r}: use letters, digits and _.:- only (it is part of episode ids)")
    spec_json = spec.model_dump_json()
    options = _plain(sandbox_options)
    check_no_secrets(json.loads(spec_json), "the run spec")
    check_no_secrets(options, "sandbox_options")
    at = _utc(created_at) or utcnow()
    return {"run_id": run_id, "name": spec.name, "created_at": at, "updated_at": at, "status": "running",
            "spec_json": spec_json, "spec_sha256": spec_sha256 or spec.digest(), "suite": spec.suite,
            "task_ids": _json(list(task_ids)), "seeds": spec.seeds,
            "leafcost_version": leafcost_version or installed_version(), "sandbox_options": _json(options)}


def _task_dates(run_id: str, created_at: Mapping[str, datetime | None]) -> Callable[[Batch], None]:
    task_ids, dates = list(created_at), [_utc(at) for at in created_at.values()]

    def apply(batch: Batch) -> None:
        if task_ids:  # one statement for the whole suite (unnest keeps the two lists in step)
            batch.execute("INSERT INTO run_tasks (run_id, task_id, created_at) "
                          "SELECT ?, unnest(?::VARCHAR[]), unnest(?::TIMESTAMPTZ[]) "
                          "ON CONFLICT (run_id, task_id) DO UPDATE SET created_at = excluded.created_at",
                          [run_id, task_ids, dates])
    return apply


def _plan_row(run_id: str, document: Mapping[str, Any]) -> dict[str, Any]:
    return {"run_id": run_id, "made_at": utcnow(), "document": json.dumps(dict(document), default=str)}


def _plain(value: BaseModel | Mapping[str, Any] | None) -> Any:
    if value is None:
        return None
    if isinstance(value, BaseModel):
        return value.model_dump(mode="json")
    return json.loads(json.dumps(dict(value), default=str))


def _json(value: Any) -> str | None:
    return None if value is None else json.dumps(value, default=str)


def _storable(row: dict[str, Any]) -> dict[str, Any]:
    """A row DuckDB can take whatever a model or a log put in its text: a lone surrogate (which DuckDB refuses,
    failing every row of the batch) becomes U+FFFD, as everywhere else (adapters.answers)."""
    return {key: valid_text(value) if isinstance(value, str) else value for key, value in row.items()}


def _utc(at: datetime | None) -> datetime | None:
    """Aware UTC; a naive datetime is taken as UTC already."""
    if at is None:
        return None
    return at.replace(tzinfo=timezone.utc) if at.tzinfo is None else at.astimezone(timezone.utc)


def parse_look(row: Mapping[str, Any]) -> dict[str, Any]:
    """A decision_looks row with its JSON columns as Python values."""
    parsed = dict(row)
    for column in ("spent_usd", "budget", "result"):
        if isinstance(parsed.get(column), str):
            parsed[column] = json.loads(parsed[column])
    return parsed
