"""What works in an attempt's sandbox before it is graded: a model driven through the Leaf loop, or the task's own
reference solution (the oracle). The runner starts, uses and stops a solver the same way whatever it is; an
arm builds its solver (compare.arms)."""

from __future__ import annotations

import time
from typing import Protocol

from adapters.base import Adapter, ArmStart, Lease, ServerSample, Usage
from compare.episode import EpisodePrompt, EpisodeRecorder, EpisodeResult, run_episode
from compare.budgets import Budgets
from sandbox import Sandbox, Task, run_oracle


class Solver(Protocol):
    """One arm's way of filling a sandbox, for the whole run: started once, then one `solve` per attempt."""

    sees_solution: bool  # whether the attempt's sandbox gets the task's solution/ (only the oracle may)

    async def start(self) -> ArmStart: ...

    async def solve(self, sandbox: Sandbox, task: Task, recorder: EpisodeRecorder) -> EpisodeResult: ...

    async def sample_metrics(self) -> ServerSample | None: ...

    async def stop(self) -> Lease | None: ...


class LeafAgent:
    """A model behind an adapter, run through Leaf's loop with the run's budgets and the arm's prompt."""

    sees_solution = False

    def __init__(self, adapter: Adapter, budgets: Budgets, prompt: EpisodePrompt):
        self.adapter, self.budgets, self.prompt = adapter, budgets, prompt

    async def start(self) -> ArmStart:
        return await self.adapter.start()

    async def solve(self, sandbox: Sandbox, task: Task, recorder: EpisodeRecorder) -> EpisodeResult:
        return await run_episode(self.adapter, sandbox, task.instruction, self.budgets, recorder, self.prompt)

    async def sample_metrics(self) -> ServerSample | None:
        return await self.adapter.sample_metrics()

    async def stop(self) -> Lease | None:
        return await self.adapter.stop()


class ReferenceSolution:
    """Harbor's oracle: each task's solution/solve.sh instead of a model. Proves the harness end to end; it sends
    no requests, holds no lease and records no calls."""

    sees_solution = True

    async def start(self) -> ArmStart:
        return ArmStart(endpoint="oracle", config={"runs": "solution/solve.sh"})

    async def solve(self, sandbox: Sandbox, task: Task, recorder: EpisodeRecorder) -> EpisodeResult:
        started = time.monotonic()
        solved = await run_oracle(sandbox, task)
        error = None if solved.ok else f"solve.sh exited {solved.exit_code}: {solved.stderr[-300:]}"
        # Shaped like an episode, so the attempt is graded, recorded and shown the same way.
        return EpisodeResult(exit_reason="oracle", n_steps=0, usage=Usage(), model_calls=0, error=error,
                             elapsed_sec=time.monotonic() - started,
                             messages=[{"role": "user", "content": task.instruction}],
                             final_message=solved.stdout[-2000:])

    async def sample_metrics(self) -> ServerSample | None:
        return None

    async def stop(self) -> Lease | None:
        return None
