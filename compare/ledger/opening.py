"""Where the ledger file is and how it is opened: the default path, the writable connection (migrated to this
leafcost's schema in one transaction), schema versions, and DuckDB's lock errors turned into what to do."""

from __future__ import annotations

import os
import re
from collections.abc import Sequence
from importlib import metadata
from pathlib import Path
from typing import TYPE_CHECKING

from compare.ledger.errors import LedgerBusy, LedgerError, LedgerOutdated
from compare.ledger.schema import MIGRATIONS, SCHEMA_VERSION

if TYPE_CHECKING:
    import duckdb


def default_db_path() -> Path:
    """`$LEAFCOST_DB`, else `./leafcost.duckdb`."""
    return Path(os.environ.get("LEAFCOST_DB") or "leafcost.duckdb")


def migrate(conn: duckdb.DuckDBPyConnection, path: Path | str, steps: Sequence[str] | None = None) -> int:
    """Applies the steps this file lacks, all in one transaction (a failing step leaves the file as it was).
    Returns the version reached. Refuses a file from a newer leafcost and a DuckDB file that is not a ledger."""
    steps = MIGRATIONS if steps is None else steps
    version = schema_version(conn, path)
    if version > len(steps):
        raise version_error(Path(path), version, read_only=False, known=len(steps))
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


def open_writable(path: Path) -> duckdb.DuckDBPyConnection:
    """The run's one writable connection, in UTC, migrated to this leafcost's schema."""
    duckdb = import_duckdb()
    if not path.parent.exists():
        raise LedgerError(f"{path}: the folder {path.parent} does not exist")
    try:
        conn = duckdb.connect(str(path))
    except duckdb.Error as exc:
        raise open_error(path, exc, writing=True) from None
    try:
        conn.execute("SET TimeZone = 'UTC'")
        migrate(conn, path)
    except BaseException:
        conn.close()
        raise
    return conn


def schema_version(conn: duckdb.DuckDBPyConnection, path: Path | str) -> int:
    """The file's schema version (0: an empty file); refuses a DuckDB file that is not a ledger."""
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


def version_error(path: Path, version: int, *, read_only: bool, known: int | None = None) -> LedgerError:
    """What to do about a file whose schema is newer (upgrade leafcost) or older (open it once for writing)."""
    known = SCHEMA_VERSION if known is None else known
    if version > known:
        return LedgerError(f"{path}: written by a newer leafcost (ledger schema version {version}; this leafcost "
                           f"{installed_version()} knows up to {known}). Upgrade leafcost to use this file")
    assert read_only
    return LedgerOutdated(f"{path}: ledger schema version {version} is older than this leafcost's ({known}); open it "
                       "once for writing (any `leafcost run`, or compare.ledger.Ledger.open) to upgrade it")


def open_error(path: Path, exc: Exception, *, writing: bool) -> LedgerError:
    """DuckDB's failure to open the file, as what to do (a lock names the process holding it)."""
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
    if "not a valid DuckDB database file" in message:
        return LedgerError(f"{path}: not a leafcost ledger (not a DuckDB file): pass --db with the file a run "
                           "wrote (default ./leafcost.duckdb), or set LEAFCOST_DB")
    return LedgerError(f"{path}: cannot open the ledger: {message}")


def installed_version() -> str:
    """This leafcost's version, as installed ("unknown" when run from a bare checkout)."""
    try:
        return metadata.version("leafcost")
    except metadata.PackageNotFoundError:
        return "unknown"


def import_duckdb():
    """The duckdb module, imported on first use."""
    import duckdb  # ~0.4 s: imported where used, never at leafcost's import

    return duckdb
