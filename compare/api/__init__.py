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

from compare.api.app import create_app
from compare.api.errors import ApiError
from compare.api.figures import Figures, Outcome
from compare.api.write_guard import API_TOKEN_ENV, WRITE_BODY_MAX_BYTES, WriteGuard

__all__ = ["API_TOKEN_ENV", "WRITE_BODY_MAX_BYTES", "ApiError", "Figures", "Outcome", "WriteGuard", "create_app"]
