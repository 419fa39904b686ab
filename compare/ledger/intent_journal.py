"""The call-intent journal beside a ledger file (`FILE.intents`): one JSON line per request to a per-token endpoint,
appended before the request is sent. A line handed to write() survives the writing process's kill -9 (it is in the
kernel's page cache), so a crash can no longer hide a served call, and the request pays a few microseconds instead
of a database commit. The rows reach the ledger's `call_intents` table with the episode's other rows; what a killed
process left only in the journal is taken in the next time the ledger is opened for writing (a resume, a run)."""

from __future__ import annotations

import json
import os
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import duckdb

_COLUMNS = ("call_key", "run_id", "arm", "episode_id", "attempt", "model", "sent_at", "request_bytes",
            "max_tokens", "bound_usd", "price_source")


def journal_path(ledger_path: Path) -> Path:
    return ledger_path.with_name(ledger_path.name + ".intents")


class IntentJournal:
    """The append end of one ledger's journal; the ledger's single writer process holds it."""

    def __init__(self, path: Path):
        self.path = path
        self._fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_CLOEXEC, 0o600)

    def append(self, row: dict[str, Any]) -> None:
        """One line, written whole by one write() (O_APPEND: lines of concurrent writers never interleave)."""
        line = json.dumps({name: _plain(row.get(name)) for name in _COLUMNS}) + "\n"
        os.write(self._fd, line.encode())

    def clear(self) -> None:
        """Every line is in the ledger now (its writer committed them): the journal starts empty again."""
        os.ftruncate(self._fd, 0)

    def close(self) -> None:
        os.close(self._fd)


def take_in(conn: duckdb.DuckDBPyConnection, path: Path) -> int:
    """Inserts the journal's rows the ledger lacks (a killed writer's last intents) and empties the journal; a line
    cut short by the kill is skipped. Returns how many rows were new."""
    try:
        lines = path.read_bytes().splitlines()
    except FileNotFoundError:
        return 0
    rows = [row for row in (_parse(line) for line in lines) if row is not None]
    before = conn.execute("SELECT count(*) FROM call_intents").fetchone()[0]
    if rows:
        placeholders = ", ".join("?" * len(_COLUMNS))
        conn.execute("BEGIN")
        conn.executemany(f"INSERT OR IGNORE INTO call_intents ({', '.join(_COLUMNS)}) VALUES ({placeholders})",
                         [[row[name] for name in _COLUMNS] for row in rows])
        conn.execute("COMMIT")
    os.truncate(path, 0)
    return conn.execute("SELECT count(*) FROM call_intents").fetchone()[0] - before


def _parse(line: bytes) -> dict[str, Any] | None:
    try:
        row = json.loads(line)
    except ValueError:
        return None
    if not isinstance(row, dict) or not all(name in row for name in _COLUMNS) or not row["call_key"]:
        return None
    try:
        row["sent_at"] = datetime.fromisoformat(row["sent_at"])
    except (TypeError, ValueError):
        return None
    return row


def _plain(value: Any) -> Any:
    return value.isoformat() if isinstance(value, datetime) else value
