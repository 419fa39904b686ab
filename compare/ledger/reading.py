"""Reading a ledger from another process: a read-only connection (refused while a run writes the file, or when
its schema is not this leafcost's), rows as dicts on any connection, and a `runs` row as a typed record."""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

from pydantic import BaseModel

from compare.ledger.errors import LedgerError
from compare.ledger.opening import default_db_path, import_duckdb, open_error, schema_version, version_error
from compare.ledger.schema import SCHEMA_VERSION, RunStatus
from compare.spec import RunSpec

if TYPE_CHECKING:
    import duckdb


def connect_read_only(path: Path | str | None = None) -> duckdb.DuckDBPyConnection:
    """A read-only connection for another process (reports, the CLI), with timestamps shown in UTC. Raises
    LedgerBusy while a run writes the file: DuckDB allows no other opener then, read-only included."""
    duckdb = import_duckdb()
    path = Path(path) if path is not None else default_db_path()
    if not path.exists():
        raise LedgerError(f"{path}: no ledger here (run `leafcost run` first, or pass --db / set LEAFCOST_DB)")
    try:
        conn = duckdb.connect(str(path), read_only=True)
    except duckdb.Error as exc:
        raise open_error(path, exc, writing=False) from None
    try:
        conn.execute("SET TimeZone = 'UTC'")
        version = schema_version(conn, path)
        if version != SCHEMA_VERSION:
            raise version_error(path, version, read_only=True)
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
    strict_grading: bool = False  # flagged attempts count as not resolved (leafcost run --strict-grading)

    def spec(self) -> RunSpec:
        return RunSpec.model_validate_json(self.spec_json)

    @classmethod
    def from_row(cls, row: dict[str, Any]) -> RunRecord:
        """A `runs` row as SQL returns it (JSON columns as text)."""
        return cls.model_validate({**row, "task_ids": json.loads(row["task_ids"]),
                                   "sandbox_options": json.loads(row["sandbox_options"])
                                   if row["sandbox_options"] else None})
