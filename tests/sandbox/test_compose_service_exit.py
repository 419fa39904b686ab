"""Whether a Compose service exited as it started (sandbox.container.containers.service_exit), against stand-ins of
the engine that answer in a fixed order: a state read that still says "running" is never the answer when the engine's
wait saw the exit, and a service still running at the bound is running. No timing is measured or raced here."""

from __future__ import annotations

import asyncio

from sandbox.container.containers import service_exit
from sandbox.container.engine import Completed, Engine, EngineError


class StaleApi:
    """The API: its state read says `state` whatever happened; its wait answers `waited` (None: the bound passed)."""

    def __init__(self, waited: int | None, state: dict):
        self.waited, self.state_answer, self.waits = waited, state, []

    async def wait_exit(self, name: str, timeout: float) -> int | None:
        self.waits.append(timeout)
        return self.waited if timeout > 0 else None

    async def state(self, name: str) -> dict:
        return self.state_answer


class CommandLine(Engine):
    """The command line: `wait` answers `waited` (an exit code) or runs past its timeout (None); `inspect` answers
    `inspected` (Running ExitCode)."""

    def __init__(self, waited: str | None, inspected: str, name: str = "podman"):
        super().__init__(name, (name,), "4.3.1")
        object.__setattr__(self, "answers", {"waited": waited, "inspected": inspected})
        object.__setattr__(self, "calls", [])

    async def run(self, *args: str, timeout: float = 120.0, check: bool = True, **_: object) -> Completed:
        self.calls.append(args)
        if args[0] == "wait":
            if self.answers["waited"] is None:
                raise EngineError(f"`{self.name} wait` ran longer than {timeout:g}s")
            return Completed(0, f"{self.answers['waited']}\n".encode(), "")
        assert args[0] == "inspect"
        return Completed(0, f"{self.answers['inspected']}\n".encode(), "")


def exit_of(engine: Engine, wait: float, api: StaleApi | None = None) -> int | None:
    return asyncio.run(service_exit(engine, "leafcost-service", wait, api))  # type: ignore[arg-type]


def test_the_engines_wait_decides_over_a_state_read_that_still_says_running():
    api = StaleApi(waited=3, state={"Running": True, "ExitCode": 0})
    assert exit_of(CommandLine(None, "true 0"), 1.0, api) == 3
    assert api.waits == [1.0]
    engine = CommandLine(waited="3", inspected="true 0")
    assert exit_of(engine, 1.0) == 3
    assert engine.calls == [("wait", "--condition", "exited", "--condition", "stopped", "leafcost-service")]


def test_a_service_still_running_at_the_bound_is_running():
    assert exit_of(CommandLine(None, "true 0"), 1.0, StaleApi(None, {"Running": True, "ExitCode": 0})) is None
    engine = CommandLine(waited=None, inspected="true 0")
    assert exit_of(engine, 1.0) is None
    assert [call[0] for call in engine.calls] == ["wait", "inspect"]


def test_an_exit_that_lands_after_the_wait_is_read_from_the_state_after_it():
    assert exit_of(CommandLine(None, "true 0"), 1.0, StaleApi(None, {"Running": False, "ExitCode": 3})) == 3
    assert exit_of(CommandLine(waited=None, inspected="false 3"), 1.0) == 3


def test_with_no_time_left_only_the_state_is_read():
    api = StaleApi(waited=3, state={"Running": True})
    assert exit_of(CommandLine(None, "true 0"), 0.0, api) is None
    engine = CommandLine(waited="3", inspected="false 3")
    assert exit_of(engine, -0.5) == 3
    assert [call[0] for call in engine.calls] == ["inspect"]


def test_a_container_the_engine_no_longer_knows_is_not_running():
    assert exit_of(CommandLine(None, "true 0"), 0.0, StaleApi(None, {})) == -1
    assert exit_of(CommandLine(waited=None, inspected=""), 0.0) == -1


def test_dockers_wait_takes_no_condition():
    engine = CommandLine(waited="0", inspected="false 0", name="docker")
    assert exit_of(engine, 1.0) == 0
    assert engine.calls == [("wait", "leafcost-service")]
