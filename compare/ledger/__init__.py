"""The ledger: one DuckDB file in which every run, arm, episode attempt, model call, tool call, lease and metrics
sample is a row that users query with plain SQL. One background thread owns the writable connection and
group-commits whatever is queued, so an awaited write is committed: a crash afterwards loses nothing recorded.
An episode's call rows are queued without waiting (`queue_call`, `queue_tool_call`): they commit with later
writes, at the latest with the episode's awaited finish, so a crash can lose only rows of an unfinished episode,
which resume reruns.

DuckDB lets one process hold a file for writing; while it does, no other process can open the file at all, not
even read-only (`LedgerBusy` says who holds it). Readers in the writing process use `Ledger.reader()`.

This package's face; behind it, one job per module: `writer` (`Ledger`, the record_* API), `batching` (the writer
thread's group commit), `schema` (tables, comments, migrations), `opening` (paths, opening, migrating, lock
errors), `reading` (read-only connections, rows), `credentials` (the secret guard), `access` (how a server or
a CLI command reads a file it does not hold) and `errors`."""

from compare.ledger.access import InProcessLedgerAccess, LedgerAccess, Stamp
from compare.ledger.credentials import check_no_secrets, redact_secrets
from compare.ledger.errors import LedgerBusy, LedgerError, LedgerOutdated, SecretInLedger
from compare.ledger.opening import default_db_path, migrate
from compare.ledger.reading import RunRecord, connect_read_only, fetch_rows
from compare.ledger.schema import MIGRATIONS, SCHEMA_VERSION, ArmStatus, RunStatus
from compare.ledger.writer import RUN_ID, ArmTotals, Ledger, episode_id_for, new_run_id

__all__ = [
    "MIGRATIONS", "RUN_ID", "SCHEMA_VERSION", "ArmStatus", "ArmTotals", "InProcessLedgerAccess", "Ledger",
    "LedgerAccess", "LedgerBusy", "LedgerError", "LedgerOutdated", "RunRecord", "RunStatus", "SecretInLedger",
    "Stamp", "check_no_secrets", "connect_read_only", "default_db_path", "episode_id_for", "fetch_rows", "migrate",
    "new_run_id", "redact_secrets",
]
