"""What the stand-in saw, for tests to assert on: requests per verb and path, pods created and deleted, exec
commands, the most pod creations and deletions in flight at once, and the most pods stored at once. Written by
the server's thread, read by the test's: every access holds the lock."""

from __future__ import annotations

import collections
import threading
from dataclasses import dataclass, field

__all__ = ["Seen"]


@dataclass
class Seen:
    requests: collections.Counter[tuple[str, str]] = field(default_factory=collections.Counter)  # (verb, path)
    created: list[str] = field(default_factory=list)  # "namespace/name" of every pod stored
    deleted: list[str] = field(default_factory=list)  # ... of every pod removed
    containers: list[dict] = field(default_factory=list)  # each stored pod's first container, as created
    execs: list[tuple[str, list[str], int | None]] = field(default_factory=list)  # pod, command, exit code
    max_creating: int = 0
    max_deleting: int = 0
    max_live: int = 0  # the most pods stored at once: how many attempts really overlapped
    creating: int = 0
    deleting: int = 0
    live: int = 0
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False)

    def request(self, verb: str, path: str) -> None:
        with self._lock:
            self.requests[verb, path] += 1

    def begin(self, what: str) -> None:
        """`what` is "creating", "deleting" or "live" (a pod stored; `end` once it is removed)."""
        with self._lock:
            now = getattr(self, what) + 1
            setattr(self, what, now)
            peak = "max_" + what
            setattr(self, peak, max(getattr(self, peak), now))

    def end(self, what: str) -> None:
        with self._lock:
            setattr(self, what, getattr(self, what) - 1)

    def add(self, name: str, item: object) -> None:
        with self._lock:
            getattr(self, name).append(item)

    def count(self, verb: str, path_contains: str = "") -> int:
        """Requests of `verb` (create, get, list, watch, patch, delete, deletecollection, exec) whose path holds
        `path_contains`."""
        with self._lock:
            return sum(n for (seen_verb, path), n in self.requests.items()
                       if seen_verb == verb and path_contains in path)

    def snapshot(self) -> dict[str, object]:
        with self._lock:
            return {"requests": dict(self.requests), "created": list(self.created), "deleted": list(self.deleted),
                    "containers": list(self.containers),
                    "execs": list(self.execs), "max_creating": self.max_creating, "max_deleting": self.max_deleting,
                    "max_live": self.max_live, "live": self.live}
