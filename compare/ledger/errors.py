"""The ledger's exceptions: what callers catch (`LedgerError`) and the cases they may handle apart."""

from __future__ import annotations


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
