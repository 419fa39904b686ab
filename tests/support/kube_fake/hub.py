"""Watch events in change order, stamped with the cluster-wide resourceVersion they carry, fanned out to every
open watch. A bounded backlog per resource lets a watch resume from a resourceVersion, as the API server's watch
cache does; older than the backlog is 410 Gone. A watch that falls too far behind is ended (its client resumes)
rather than buffered without bound."""

from __future__ import annotations

import asyncio
import collections
import copy
from typing import Any

__all__ = ["EventHub", "Watcher"]

BACKLOG = 20_000  # events kept per resource for resuming watches
WATCHER_QUEUE = 10_000  # events a slow watch may fall behind before it is ended


class Watcher:
    def __init__(self) -> None:
        self.queue: asyncio.Queue[tuple[int, dict[str, Any]]] = asyncio.Queue(WATCHER_QUEUE)
        self.overflowed = False


class EventHub:
    def __init__(self, backlog: int = BACKLOG) -> None:
        self.revision = 0  # the last resourceVersion handed out
        self._backlog: dict[str, collections.deque[tuple[int, dict[str, Any]]]] = collections.defaultdict(
            lambda: collections.deque(maxlen=backlog))
        self._compacted: dict[str, int] = collections.defaultdict(int)  # newest revision dropped from a backlog
        self._watchers: dict[str, set[Watcher]] = collections.defaultdict(set)

    def next_revision(self) -> str:
        self.revision += 1
        return str(self.revision)

    def publish(self, resource: str, kind: str, obj: dict[str, Any]) -> None:
        revision = int((obj.get("metadata") or {}).get("resourceVersion") or self.revision)
        event = {"type": kind, "object": copy.deepcopy(obj)}
        backlog = self._backlog[resource]
        if len(backlog) == backlog.maxlen:
            self._compacted[resource] = backlog[0][0]
        backlog.append((revision, event))
        for watcher in list(self._watchers[resource]):
            try:
                watcher.queue.put_nowait((revision, event))
            except asyncio.QueueFull:
                watcher.overflowed = True
                self._watchers[resource].discard(watcher)

    def subscribe(self, resource: str) -> Watcher:
        watcher = Watcher()
        self._watchers[resource].add(watcher)
        return watcher

    def unsubscribe(self, resource: str, watcher: Watcher) -> None:
        self._watchers[resource].discard(watcher)

    def since(self, resource: str, revision: int) -> list[tuple[int, dict[str, Any]]] | None:
        """Events after `revision`, or None when the backlog no longer reaches back that far."""
        if revision < self._compacted[resource]:
            return None
        return [(rev, event) for rev, event in self._backlog[resource] if rev > revision]
