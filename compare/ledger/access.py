"""How a server or a CLI command reads a ledger file it does not hold: a read-only connection per use (a schema
from an older leafcost upgraded once), the occasional write between reads, and the file's on-disk stamp."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from compare.ledger.errors import LedgerError, LedgerOutdated
from compare.ledger.reading import connect_read_only
from compare.ledger.writer import Ledger


class _Gate:
    """Readers share the file; a write waits for them and holds new ones back (writers first, so a steady read
    load cannot starve it). DuckDB refuses a writable connection in a process that has read-only ones open."""

    def __init__(self) -> None:
        self._cond = threading.Condition()
        self._readers = 0
        self._writers = 0  # waiting or writing
        self._writing = False

    def enter(self) -> None:
        with self._cond:
            self._cond.wait_for(lambda: not self._writers)
            self._readers += 1

    def leave(self) -> None:
        with self._cond:
            self._readers -= 1
            self._cond.notify_all()

    @contextmanager
    def writing(self) -> Iterator[None]:
        with self._cond:
            self._writers += 1
            self._cond.wait_for(lambda: not self._readers and not self._writing)
            self._writing = True
        try:
            yield
        finally:
            with self._cond:
                self._writing = False
                self._writers -= 1
                self._cond.notify_all()


Stamp = tuple[tuple[int, int, int] | None, ...]


class LedgerAccess:
    """One ledger file: read-only connections per use, the occasional write, and the file's on-disk stamp."""

    def __init__(self, path: Path):
        self.path = path
        self._gate = _Gate()
        self._wal = path.with_name(path.name + ".wal")

    @contextmanager
    def reading(self):
        conn = self._open_reader()
        try:
            yield conn
        finally:
            conn.close()
            self._gate.leave()

    @contextmanager
    def writing(self) -> Iterator[Ledger]:
        with self._gate.writing():
            ledger = Ledger.open(self.path)
            try:
                yield ledger
            finally:
                ledger.close()

    def upgrade_if_outdated(self) -> None:
        """An older ledger is migrated once (what any `leafcost run` would do); a busy one is left for the first
        request that finds it free, an absent or foreign one for requests to report."""
        try:
            self._open_reader_once().close()
            self._gate.leave()
        except LedgerOutdated:
            try:
                self._upgrade()
            except LedgerError:
                pass
        except LedgerError:
            pass

    def _upgrade(self) -> None:
        with self.writing():  # Ledger.open migrates the file; closing it releases the file again
            pass

    def stamp(self) -> Stamp:
        """What changes whenever anything writes the file (DuckDB appends to the WAL, then checkpoints)."""
        return (_stat(self.path), _stat(self._wal))

    def _open_reader(self):
        try:
            return self._open_reader_once()
        except LedgerOutdated:
            self._upgrade()  # outdated and busy at start, free now: upgrade it as the start would have
            return self._open_reader_once()

    def _open_reader_once(self):
        self._gate.enter()
        try:
            return connect_read_only(self.path)
        except BaseException:
            self._gate.leave()
            raise


class InProcessLedgerAccess(LedgerAccess):
    """The ledger a run is writing in this very process (`leafcost run --serve`): DuckDB lets no other process
    open the file meanwhile, so the API reads through cursors of the writer's own connection, which see every
    committed write, and stores scenarios through the writer itself."""

    def __init__(self, ledger: Ledger):
        super().__init__(ledger.path)
        self._ledger = ledger

    @contextmanager
    def reading(self):
        conn = self._ledger.reader()
        try:
            yield conn
        finally:
            conn.close()

    @contextmanager
    def writing(self) -> Iterator[Ledger]:
        yield self._ledger

    def upgrade_if_outdated(self) -> None:
        return None  # the writer opened (and migrated) it


def _stat(path: Path) -> tuple[int, int, int] | None:
    try:
        st = path.stat()
    except OSError:
        return None
    return (st.st_ino, st.st_size, st.st_mtime_ns)
