"""One attempt at an episode key, from a fresh sandbox to a verdict. The solver works in the sandbox; once its
processes are gone the patch is captured and the task graded; the sandbox is closed whatever happened. A
failure is sorted into what the runner retries (infrastructure) or counts as an error (task, harness). The
attempt's record is filled as it goes, so a cancelled attempt still leaves what happened for the ledger."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import Any

from compare.episode import EpisodeRecorder, EpisodeResult, ExitReason, TRAJECTORY_FORMAT
from compare.solvers import Solver
from sandbox import BuildError, SandboxError, SandboxOptions, Task, harness_paths, open_sandbox, verify


class AttemptOutcome:
    def __init__(self, episode_id: str):
        self.episode_id = episode_id
        self.result: EpisodeResult | None = None
        self.sandbox = None  # the OpenedSandbox, once it opened
        self.grade = None
        self.rewards: dict | None = None  # reward.json's keys, or SWE-bench's report
        self.patch = ""
        self.patch_error: str | None = None
        self.decided_exit: ExitReason | None = None  # set when the harness, not the episode, decided how it ended
        self.resolved = False
        self.infra_error = False
        self.harness_error = False
        self.cancelled = False
        self.error: str | None = None
        self.cpu_seconds: float | None = None
        # the patch's paths in the test harness (sandbox.reward_hacking); None: no patch was captured to check
        self.hack_paths: list[str] | None = []

    @property
    def flagged(self) -> bool:
        """A resolved attempt whose patch touches the test harness, or whose patch could not be checked."""
        return self.resolved and self.hack_paths != []

    def fail(self, exit_reason: ExitReason, error: str) -> None:
        """An error of the harness or of the task: not retried, not the model's miss, counted as an error."""
        self.decided_exit, self.error, self.harness_error, self.resolved = exit_reason, error, True, False

    @property
    def exit_reason(self) -> ExitReason:
        if self.cancelled:
            return "cancelled"
        return self.decided_exit or (self.result.exit_reason if self.result is not None else "infrastructure_error")

    def error_detail(self) -> str | None:
        grade = self.grade
        return (self.error or (self.result.error if self.result else None)
                or (grade.detail if grade is not None and grade.error else None))

    def trajectory(self, **ids: Any) -> dict[str, Any]:
        """The trajectory file's document: Leaf's fields, then the attempt's patch, verdict and `ids`."""
        document = (self.result.trajectory() if self.result is not None
                    else {"trajectory_format": TRAJECTORY_FORMAT, "messages": [], "steps": [], "n_steps": 0})
        document.update({"exit_reason": self.exit_reason, "output_patch": self.patch, "patch_error": self.patch_error,
                         **ids, "error": self.error or (self.result.error if self.result else None),
                         "grade": self.grade.model_dump() if self.grade else None, "rewards": self.rewards,
                         "sandbox_spec_hash": self.sandbox.spec_hash if self.sandbox else None,
                         "reward_hacking": {"flagged": self.flagged, "paths": self.hack_paths}})
        return document

    def ledger_fields(self) -> dict[str, Any]:
        """The episode row's results (Ledger.finish_episode's keywords, save `final` and the trajectory path)."""
        result, grade, opened = self.result, self.grade, self.sandbox
        return {"exit_reason": self.exit_reason, "resolved": bool(self.resolved),
                "reward": grade.reward if grade else None, "grade_error": grade.error if grade else None,
                "error_detail": self.error_detail(), "infra_error": self.infra_error or self.cancelled,
                "harness_error": self.harness_error, "n_steps": result.n_steps if result else 0,
                "elapsed_sec": result.elapsed_sec if result else None,
                "sandbox_spec_hash": opened.spec_hash if opened else None,
                "isolation": opened.spec.isolation if opened else None, "sandbox_cpu_seconds": self.cpu_seconds,
                "sandbox_start_sec": opened.start_seconds if opened else None,
                "patch_bytes": len(self.patch.encode()), "hack_paths": self.hack_paths, "flagged": self.flagged}


async def run_attempt(outcome: AttemptOutcome, solver: Solver, task: Task, options: SandboxOptions,
                      recorder: EpisodeRecorder, labels: dict[str, str],
                      on_result: Callable[[EpisodeResult], None] | None = None,
                      recorded: Awaitable[None] | None = None) -> None:
    """Fills `outcome`; raises nothing but a cancel (which it records first). `on_result` hears how the episode
    ended before anything is graded. An episode a configuration error ended is not graded: the model never
    worked, so there is nothing to judge. `recorded`: the commit of the attempt's start row, made while the sandbox
    opens; the solver (and so any model call) starts only once it is in the ledger."""
    opened = None
    try:
        opened = await open_sandbox(task, options, solution=solver.sees_solution, labels=labels)
        outcome.sandbox = opened
        if recorded is not None:  # shielded: a cancel of this attempt must not cancel the ledger's commit
            await asyncio.shield(recorded)
        result = await solver.solve(opened.sandbox, task, recorder)
        outcome.result = result
        outcome.infra_error, outcome.harness_error = result.infrastructure_error, result.harness_error
        if on_result is not None:
            on_result(result)
        # verify stops the solver's processes before it reads anything
        if opened.sandbox.alive and result.exit_reason != "configuration_error":
            verification = await verify(opened, task)
            outcome.patch, outcome.patch_error = verification.patch, verification.patch_error
            outcome.grade, outcome.rewards = verification.grade, verification.reward_document
            outcome.resolved = outcome.grade.resolved
            outcome.hack_paths = None if outcome.patch_error else harness_paths(outcome.patch, task.swebench)
    except SandboxError as exc:
        outcome.infra_error, outcome.error = True, f"{type(exc).__name__}: {exc}"
    except (BuildError, FileNotFoundError) as exc:  # the task itself is broken: rerunning cannot help
        outcome.fail("task_error", f"task: {type(exc).__name__}: {exc}")
    except asyncio.CancelledError:
        outcome.cancelled = True
        raise
    except Exception as exc:  # noqa: BLE001 - a bug or a surprise ends this attempt, never the run
        outcome.fail("harness_error", f"harness: {type(exc).__name__}: {str(exc)[:1000]}")
    finally:
        if opened is not None:
            outcome.cpu_seconds = opened.cpu_seconds()
            await asyncio.shield(opened.close())
