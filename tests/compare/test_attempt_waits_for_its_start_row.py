"""An attempt's start row commits while its sandbox opens; the solver, and so any model call, starts only once the
ledger has it (compare.attempt.run_attempt's `recorded`). Real bubblewrap sandboxes, the real oracle solver."""

from __future__ import annotations

import asyncio

from compare.attempt import AttemptOutcome, run_attempt
from compare.ledger import LedgerError
from compare.solvers import ReferenceSolution


class CountingOracle(ReferenceSolution):
    """The oracle, noting whether it was asked to solve."""

    def __init__(self) -> None:
        self.solved = 0

    async def solve(self, sandbox, task, recorder):
        self.solved += 1
        return await super().solve(sandbox, task, recorder)


class Gate:
    """An awaitable start-row commit the test settles itself; it notes when the attempt starts waiting on it."""

    def __init__(self) -> None:
        self.commit = asyncio.get_running_loop().create_future()
        self.awaited = asyncio.Event()

    def __await__(self):
        self.awaited.set()
        return self.commit.__await__()


async def first_of(waiting, attempt: asyncio.Future) -> None:
    """Until the attempt waits on its row, or ends without waiting (which the assertions then catch)."""
    waiter = asyncio.ensure_future(waiting)
    await asyncio.wait([waiter, attempt], return_when=asyncio.FIRST_COMPLETED)
    waiter.cancel()


def test_the_solver_starts_only_once_the_start_row_is_committed(make_task, sandbox_options):
    task = make_task()

    async def scenario():
        solver, gate, outcome = CountingOracle(), Gate(), AttemptOutcome("e1")
        attempt = asyncio.ensure_future(run_attempt(outcome, solver, task, sandbox_options, recorder=None,
                                                    labels={}, recorded=gate))
        await first_of(gate.awaited.wait(), attempt)  # the sandbox is open and the attempt waits for its row
        waiting = (solver.solved, outcome.sandbox is not None, attempt.done())
        gate.commit.set_result(None)
        await attempt
        return waiting, solver.solved, outcome

    waiting, solved, outcome = asyncio.run(scenario())
    assert waiting == (0, True, False)
    assert solved == 1 and outcome.resolved and not outcome.harness_error


def test_a_start_row_the_ledger_refused_means_no_solver_and_a_closed_sandbox(make_task, sandbox_options):
    task = make_task()

    async def scenario():
        refused = asyncio.get_running_loop().create_future()
        refused.set_exception(LedgerError("the ledger refused the write"))
        solver, outcome = CountingOracle(), AttemptOutcome("e1")
        await run_attempt(outcome, solver, task, sandbox_options, recorder=None, labels={}, recorded=refused)
        return solver.solved, outcome

    solved, outcome = asyncio.run(scenario())
    assert solved == 0 and not outcome.resolved
    assert outcome.harness_error and "the ledger refused the write" in outcome.error
    assert outcome.sandbox.sandbox.closed  # closed whatever happened


def test_a_cancelled_attempt_leaves_the_ledgers_commit_alone(make_task, sandbox_options):
    task = make_task()

    async def scenario():
        gate = Gate()
        attempt = asyncio.ensure_future(run_attempt(AttemptOutcome("e1"), CountingOracle(), task, sandbox_options,
                                                    recorder=None, labels={}, recorded=gate))
        await first_of(gate.awaited.wait(), attempt)
        attempt.cancel()
        try:
            await attempt
        except asyncio.CancelledError:
            pass
        return gate.commit.cancelled(), attempt.cancelled()

    assert asyncio.run(scenario()) == (False, True)
