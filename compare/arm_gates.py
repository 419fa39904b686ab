"""Which of an arm's attempts may start. Until an arm's endpoint has answered one call, one attempt of it runs and
the others wait: a configuration error (401, 404, an unknown model) is met by that one attempt, never by every
worker at once. Once one is met the arm is stopped: its attempts in flight are cancelled (before they are graded)
and no other starts. An arm that sends no model calls (the oracle) is never held back."""

from __future__ import annotations

import asyncio


class ArmGates:
    def __init__(self, ungated: set[str] | None = None):
        self.stopped: dict[str, str] = {}  # arm -> why none of its attempts may run any more
        self._answered: set[str] = set(ungated or ())  # arms whose endpoint answered a call (or that have none)
        self._probing: set[str] = set()  # arms with an attempt running before any answer
        self._wake: dict[str, asyncio.Event] = {}
        self._running: dict[str, set[asyncio.Task]] = {}

    async def admit(self, arm: str) -> bool:
        """Waits until an attempt of `arm` may start; False once the arm is stopped. Every True is paired with a
        `release` when the attempt ends."""
        while True:
            if arm in self.stopped:
                return False
            if arm in self._answered:
                return True
            if arm not in self._probing:
                self._probing.add(arm)
                return True
            await self._wake.setdefault(arm, asyncio.Event()).wait()

    def release(self, arm: str) -> None:
        """An attempt of `arm` ended: if the endpoint never answered it, the next waiting attempt tries."""
        if arm in self._probing:
            self._probing.discard(arm)
            self._notify(arm)

    def answered(self, arm: str) -> None:
        """The arm's endpoint answered a call: its key, route and model work, so every waiting attempt may start."""
        if arm not in self._answered:
            self._answered.add(arm)
            self._probing.discard(arm)
            self._notify(arm)

    def track(self, arm: str, task: asyncio.Task) -> None:
        self._running.setdefault(arm, set()).add(task)
        task.add_done_callback(lambda done: self._running.get(arm, set()).discard(done))

    def stop(self, arm: str, reason: str) -> bool:
        """Stops `arm` and cancels its attempts in flight but the calling one; False when it was already stopped."""
        if arm in self.stopped:
            return False
        self.stopped[arm] = reason
        current = asyncio.current_task()
        for task in list(self._running.get(arm, ())):
            if task is not current:
                task.cancel()
        self._notify(arm)
        return True

    def _notify(self, arm: str) -> None:
        event = self._wake.pop(arm, None)
        if event is not None:
            event.set()
