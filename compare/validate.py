"""`leafcost validate`: proves each task solvable (the oracle resolves it) and not solved by doing nothing."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable

from pydantic import BaseModel

from sandbox import (BuildError, GradeResult, SandboxError, SandboxOptions, Suite, Task, close_backend, open_sandbox,
                     remove_leftovers, run_oracle, verify)


class TaskValidation(BaseModel):
    task_id: str
    oracle_resolved: bool | None
    empty_resolved: bool | None
    valid: bool
    error: str | None
    seconds: float


class ValidationReport(BaseModel):
    tasks: list[TaskValidation]
    valid: int
    invalid: int


NO_SOLUTION = "no solution/solve.sh: validate needs the oracle's solution"


async def validate_task(task: Task, options: SandboxOptions) -> TaskValidation:
    started = time.monotonic()
    if task.solution_dir is None:  # known since the task loaded: nothing is built for a verdict that cannot be had
        return TaskValidation(task_id=task.task_id, oracle_resolved=None, empty_resolved=None, valid=False,
                              error=f"task {task.task_id}: {NO_SOLUTION} (add it to the task)", seconds=0.0)
    problems: list[str] = []
    empty = oracle = None
    try:
        empty = await _empty_run(task, options, problems)
        oracle = await _oracle_run(task, options, problems)
    except (BuildError, SandboxError, FileNotFoundError) as exc:
        problems.append(f"{type(exc).__name__}: {exc}")
    except Exception as exc:  # noqa: BLE001 - one task's failure, whatever it is, never stops the others
        problems.append(f"harness error: {type(exc).__name__}: {str(exc)[:500]}")
    if empty is True:
        problems.append("the unchanged repository already passes the tests")
    return TaskValidation(task_id=task.task_id, oracle_resolved=oracle, empty_resolved=empty,
                          valid=oracle is True and empty is False and not problems,
                          error="; ".join(problems) or None, seconds=round(time.monotonic() - started, 3))


async def validate_suite(suite: Suite, options: SandboxOptions, *, workers: int = 2,
                         on_result: Callable[[TaskValidation], None] | None = None) -> ValidationReport:
    """Every task of the suite, `workers` at a time; tasks that failed to load are reported as invalid."""
    remove_leftovers(options)
    results = [TaskValidation(task_id=e.task_id, oracle_resolved=None, empty_resolved=None, valid=False,
                              error=e.error, seconds=0.0) for e in suite.errors]
    for result in results:
        if on_result:
            on_result(result)
    gate = asyncio.Semaphore(max(1, workers))

    async def one(task: Task) -> TaskValidation:
        async with gate:
            result = await validate_task(task, options)
        if on_result:
            on_result(result)
        return result

    try:
        results += await asyncio.gather(*(one(task) for task in suite.tasks))
    finally:
        await close_backend(options)
    results.sort(key=lambda r: r.task_id)
    valid = sum(r.valid for r in results)
    return ValidationReport(tasks=results, valid=valid, invalid=len(results) - valid)


async def _empty_run(task: Task, options: SandboxOptions, problems: list[str]) -> bool | None:
    opened = await open_sandbox(task, options)
    try:
        result = (await verify(opened, task, capture=False)).grade
    finally:
        await opened.close()
    if result.error:
        problems.append(f"empty run: {_no_verdict(result)}")
        return None
    return result.resolved


async def _oracle_run(task: Task, options: SandboxOptions, problems: list[str]) -> bool | None:
    opened = await open_sandbox(task, options, solution=True)
    try:
        solved = await run_oracle(opened.sandbox, task)
        if not solved.ok:
            status = "timed out" if solved.timed_out else f"exited {solved.exit_code}"
            problems.append(f"solve.sh {status}: {(solved.stderr or solved.stdout).strip()[-300:]}")
        result = (await verify(opened, task, capture=False)).grade
    finally:
        await opened.close()
    if result.error:
        problems.append(f"oracle run: {_no_verdict(result)}{_last_lines(result.output_tail)}")
        return None
    if not result.resolved:
        why = f": {result.detail}" if result.detail else ""
        problems.append(f"the oracle (solution/solve.sh) does not resolve the task (reward {result.reward:g}){why}"
                        f"{_last_lines(result.output_tail)}")
    return result.resolved


def _no_verdict(grade: GradeResult) -> str:
    """A run the verifier gave no verdict on: a grading error (as a run counts it), never a pass or a miss."""
    return f"no verdict (grading error {grade.error}): {grade.detail}"


def _last_lines(output: str, count: int = 8) -> str:
    """The verifier's own words on why: its last lines, which is where test runners put their verdict."""
    lines = [line for line in output.strip().splitlines() if line.strip()][-count:]
    return "; the verifier's last lines:\n" + "\n".join(lines) if lines else "; the verifier printed nothing"
