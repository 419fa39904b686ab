"""The writer thread's group commit: operations queued by `Ledger` are gathered for a few milliseconds into one
transaction, appends are inserted column-wise, ids are drawn from sequences in blocks, and each waiter is woken
(on its own event loop) only once its transaction has committed."""

from __future__ import annotations

import asyncio
import queue
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from compare.ledger.errors import LedgerError
from compare.ledger.schema import FINISH_SQL

if TYPE_CHECKING:
    import duckdb

_MAX_BATCH = 5000
_GROUP_WINDOW_SEC = 0.005  # an awaited operation waits at most this much longer; commits carry many rows
# Queued operations nobody awaits (an episode's call rows) wait at most this long for company: a commit costs
# milliseconds of CPU whatever it carries. A killed process loses at most this much of its running episodes' rows,
# and those episodes are re-run on --resume; an awaited operation (the episode's finish) commits them first.
_DEFERRED_WINDOW_SEC = 0.2
# An awaited operation reaching a writer that has committed nothing for this long commits at once (with what is
# queued already): nobody is writing, so company is unlikely, and a run's start-up writes come one after another.
_IDLE_SEC = 0.1
_ID_COLUMNS = {"model_calls": ("call_id", "model_calls_call_id_seq"),
               "gpu_leases": ("lease_id", "gpu_leases_lease_id_seq")}


class GroupCommit:
    """Commits what the queue brings, on the writable connection, until it brings None."""

    def __init__(self, conn: duckdb.DuckDBPyConnection):
        self._conn = conn
        self._types = _column_types(conn)
        self._ids = {table: _IdPool(sequence) for table, (_, sequence) in _ID_COLUMNS.items()}

    def run(self, ops_queue: queue.SimpleQueue[Op | None]) -> None:
        """Returns once it has taken None (what was queued before it is committed first)."""
        stopping = False
        last_commit = float("-inf")
        while not stopping:
            ops = [ops_queue.get()]
            # A commit costs far more than a row: gather what arrives within a window into one transaction, a
            # short one as soon as anybody awaits an operation of it, none when the writer was idle.
            idle = time.monotonic() - last_commit > _IDLE_SEC
            window_ends = time.monotonic() + (0.0 if idle and ops[0] is not None and ops[0].awaited
                                              else _window(ops[0]))
            while len(ops) < _MAX_BATCH and None not in ops:
                try:
                    op = ops_queue.get(timeout=max(0.0, window_ends - time.monotonic()))
                except queue.Empty:
                    break
                ops.append(op)
                window_ends = min(window_ends, time.monotonic() + _window(op))
            stopping = None in ops
            ops = [op for op in ops if op is not None]
            try:
                self._commit(ops)
            except BaseException as exc:  # a bug here must not leave awaits hanging
                _wake([(op, None, _as_ledger_error(op.name, exc)) for op in ops])
                if not isinstance(exc, Exception):
                    raise
            last_commit = time.monotonic()

    def _commit(self, ops: list[Op]) -> None:
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

    def _commit_alone(self, op: Op) -> tuple[Op, Any, Exception | None]:
        try:
            [result] = self._transaction([op])
        except Exception as exc:
            return op, None, _as_ledger_error(op.name, exc)
        return op, result, None

    def _transaction(self, ops: list[Op]) -> list[Any]:
        conn = self._conn
        conn.execute("BEGIN TRANSACTION")
        try:
            batch = Batch(conn, self._types, self._ids)
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


@dataclass
class Op:
    """One queued write: `apply` runs inside a batch's transaction; `future` settles once it commits."""

    name: str
    apply: Callable[[Batch], Any]
    future: asyncio.Future[Any]
    loop: asyncio.AbstractEventLoop
    awaited: bool = True  # False: queued to commit with later operations (its future is checked later, if ever)


def _window(op: Op | None) -> float:
    """How much longer the group may wait for company once `op` is in it (None: the ledger is closing)."""
    if op is None:
        return 0.0
    return _GROUP_WINDOW_SEC if op.awaited else _DEFERRED_WINDOW_SEC


class _Slot:
    """A result known only when the batch flushes (an id drawn from a sequence)."""

    value: Any = None


class Batch:
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
            FINISH_SQL.format(unnest=self._unnest("episodes", columns)), values).fetchall()}
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


def _wake(settled: Sequence[tuple[Op, Any, Exception | None]]) -> None:
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
