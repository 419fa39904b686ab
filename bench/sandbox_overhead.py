"""What the local sandbox costs: a Bash tool round trip for `true` against the same shell run directly on the
host, sandbox start on a cached environment, and each built-in task's environment build (cold and cached).

Run from the repository root:
    .venv/bin/python bench/sandbox_overhead.py [--rounds N] [--start-rounds N] [--quick] [--json]
Variants measured together are interleaved round by round (A, B, A, B, ...) so machine noise hits them alike.
Everything is built in a temporary cache directory that is removed afterwards; every sandbox is closed.
--json prints the same results as JSON instead of the table; --quick checks that the bench runs (the first
built-in task only, a few rounds): not a measurement. The machine's load average is recorded before and after.
Timings are reported, never asserted.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable
from pathlib import Path

from pydantic import BaseModel

from sandbox import OpenedSandbox, SandboxOptions, Task, load_suite, open_sandbox
from sandbox.local.bwrap import bwrap_version

GOAL_RATIO = 1.5  # sandboxed Bash round trip / host `bash -lc true`, at p50
QUICK_ROUNDS, QUICK_START_ROUNDS, QUICK_TASKS = 3, 1, 1
TOOL = "sandbox Bash tool `true` (bash -lc, sandbox's minimal profile)"
HOST_LOGIN = "host subprocess `bash -lc true` (host's login profile)"
HOST_PLAIN = "host subprocess `bash -c true` (no profile)"


class Timing(BaseModel):
    label: str
    p50_ms: float
    p90_ms: float
    rounds: int


class TaskStart(BaseModel):
    task_id: str
    build_cold_s: float  # the build itself, as recorded in the environment's manifest
    open_cold_s: float  # open_sandbox with an empty cache: build + copy + start
    open_cached_s: float  # second open_sandbox: cache hit + copy + start
    start_p50_ms: float  # open_sandbox on the cached environment until the first Bash answer is back


class Machine(BaseModel):
    nproc: int
    python: str
    bwrap: str | None
    limits_via: str
    load_before: str
    load_after: str


class Report(BaseModel):
    machine: Machine
    quick: bool
    round_trip_task: str
    warmup_rounds: int
    round_trip: list[Timing]
    ratio_p50: float  # TOOL / HOST_LOGIN
    ratio_p50_no_login: float  # TOOL / HOST_PLAIN
    goal_ratio: float
    goal_met: bool
    start_rounds: int
    tasks: list[TaskStart]
    start_p50_ms: float  # over every start of every task


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=100, help="measured round trips per variant (default 100)")
    parser.add_argument("--start-rounds", type=int, default=5, help="sandbox starts per task (default 5)")
    parser.add_argument("--quick", action="store_true",
                        help=f"the first built-in task only, {QUICK_ROUNDS} rounds, {QUICK_START_ROUNDS} start: "
                             "a check that the bench runs, not a measurement")
    parser.add_argument("--json", action="store_true", help="print JSON instead of the table")
    args = parser.parse_args()
    if args.quick:
        args.rounds, args.start_rounds = QUICK_ROUNDS, QUICK_START_ROUNDS
    if args.rounds < 2 or args.start_rounds < 1:
        parser.error("--rounds must be at least 2 (for a p90) and --start-rounds at least 1")
    with tempfile.TemporaryDirectory(prefix="leafcost-bench-") as scratch:
        options = SandboxOptions(cache_dir=Path(scratch) / "cache", work_dir=Path(scratch) / "work")
        report = asyncio.run(measure(options, rounds=args.rounds, start_rounds=args.start_rounds,
                                     task_count=QUICK_TASKS if args.quick else None))
    print(report.model_dump_json(indent=2) if args.json else render(report))


async def measure(options: SandboxOptions, *, rounds: int, start_rounds: int,
                  task_count: int | None = None) -> Report:
    """Every built-in task's starts (the first `task_count` only, when given), then the round trips."""
    load_before = _load()
    tasks = sorted(load_suite("builtin").tasks, key=lambda t: t.task_id)[:task_count]
    starts, start_p50 = await measure_starts(tasks, options, start_rounds)  # builds every environment, cold first
    opened = await open_sandbox(tasks[0], options)
    try:
        warmup = max(5, rounds // 10)
        timings = await measure_round_trips(opened, rounds, warmup)
        via = opened.sandbox.limits.via
    finally:
        await opened.close()
    by_label = {t.label: t for t in timings}
    ratio = by_label[TOOL].p50_ms / by_label[HOST_LOGIN].p50_ms
    return Report(
        machine=Machine(nproc=len(os.sched_getaffinity(0)), python=platform.python_version(),
                        bwrap=bwrap_version(), limits_via=via, load_before=load_before, load_after=_load()),
        quick=task_count is not None, round_trip_task=tasks[0].task_id, warmup_rounds=warmup, round_trip=timings,
        ratio_p50=ratio,
        ratio_p50_no_login=by_label[TOOL].p50_ms / by_label[HOST_PLAIN].p50_ms, goal_ratio=GOAL_RATIO,
        goal_met=ratio <= GOAL_RATIO, start_rounds=start_rounds, tasks=starts,
        start_p50_ms=start_p50)


async def measure_round_trips(opened: OpenedSandbox, rounds: int, warmup: int) -> list[Timing]:
    """Each variant once per round, in the same order, after `warmup` unrecorded rounds."""
    sandbox = opened.sandbox

    async def tool() -> None:
        output = await sandbox.run_tool("Bash", {"command": "true"})
        if not output.startswith("Exit code: 0"):
            raise RuntimeError(f"Bash tool failed: {output[:300]}")

    async def sandbox_exec(login: bool) -> None:
        result = await sandbox.exec("true", timeout=30, login=login)
        if not result.ok:
            raise RuntimeError(f"exec failed: {result}")

    async def host(flag: str) -> None:
        subprocess.run(["bash", flag, "true"], stdin=subprocess.DEVNULL, capture_output=True, check=True)

    variants: dict[str, Callable[[], Awaitable[None]]] = {
        TOOL: tool,
        "sandbox exec op `true` (bash -lc, sandbox's minimal profile)": lambda: sandbox_exec(True),
        "sandbox exec op `true` (bash -c, no profile)": lambda: sandbox_exec(False),
        HOST_LOGIN: lambda: host("-lc"),
        HOST_PLAIN: lambda: host("-c"),
    }
    samples = await _interleaved(variants, rounds, warmup)
    return [_timing(label, values) for label, values in samples.items()]


async def measure_starts(tasks: list[Task], options: SandboxOptions,
                         rounds: int) -> tuple[list[TaskStart], float]:
    """Cold open (empty cache), cached open, then `rounds` starts per task interleaved across tasks; also the
    p50 over every start."""
    cold: dict[str, tuple[float, float]] = {}
    cached: dict[str, float] = {}
    for task in tasks:
        _progress(f"building {task.task_id} (cold)")
        opened = await open_sandbox(task, options)
        await opened.close()
        if opened.built.cache_hit:
            raise RuntimeError(f"{task.task_id}: the fresh cache already held this environment")
        cold[task.task_id] = (opened.built.build_seconds, opened.start_seconds)
    for task in tasks:
        opened = await open_sandbox(task, options)
        await opened.close()
        cached[task.task_id] = opened.start_seconds
    samples = await _interleaved({t.task_id: _start_once(t, options) for t in tasks}, rounds, warmup=0)
    starts = [TaskStart(task_id=t.task_id, build_cold_s=cold[t.task_id][0], open_cold_s=cold[t.task_id][1],
                        open_cached_s=cached[t.task_id], start_p50_ms=statistics.median(samples[t.task_id]))
              for t in tasks]
    return starts, statistics.median(ms for values in samples.values() for ms in values)


def render(report: Report) -> str:
    m = report.machine
    lines = [f"machine: nproc {m.nproc}, Python {m.python}, {m.bwrap or 'no bwrap'}, limits via {m.limits_via}",
             f"load before: {m.load_before}; after: {m.load_after}"
             + ("; --quick: a check that the bench runs, not a measurement" if report.quick else ""),
             f"command: {os.path.relpath(sys.executable)} {' '.join(sys.argv)}", "",
             f"1. Round trip for `true`, measured from the host ({report.round_trip[0].rounds} rounds after "
             f"{report.warmup_rounds} warm-up, interleaved; sandbox on task {report.round_trip_task})",
             f"   {'':64} {'p50 ms':>8} {'p90 ms':>8}"]
    lines += [f"   {t.label:64} {t.p50_ms:8.2f} {t.p90_ms:8.2f}" for t in report.round_trip]
    verdict = "met" if report.goal_met else "NOT met"
    lines += ["", f"   sandboxed Bash tool / host `bash -lc true` at p50: {report.ratio_p50:.2f}x "
                  f"(goal <= {report.goal_ratio:g}x: {verdict})",
              f"   sandboxed Bash tool / host `bash -c true` at p50:  {report.ratio_p50_no_login:.2f}x "
              "(for reference: the host shell without its login profile)", "",
              f"2. Sandbox start and environment build per built-in task (fresh temporary cache; "
              f"start p50 over {report.start_rounds} rounds, interleaved across tasks)",
              f"   {'task':24} {'build cold s':>12} {'open cold s':>12} {'open cached s':>14} {'start p50 ms':>13}"]
    lines += [f"   {t.task_id:24} {t.build_cold_s:12.2f} {t.open_cold_s:12.2f} {t.open_cached_s:14.3f} "
              f"{t.start_p50_ms:13.1f}" for t in report.tasks]
    lines += ["", "   build cold: the Dockerfile replay alone; open cold: open_sandbox with an empty cache (build, "
                  "copy, start);",
              "   open cached: the second open_sandbox; start: open_sandbox on the cached environment until the "
              "first Bash answer",
              f"   start p50 over every start of every task: {report.start_p50_ms:.1f} ms"]
    return "\n".join(lines)


def _start_once(task: Task, options: SandboxOptions) -> Callable[[], Awaitable[OpenedSandbox]]:
    async def start() -> OpenedSandbox:
        opened = await open_sandbox(task, options)
        try:
            await opened.sandbox.run_tool("Bash", {"command": "true"})
        except BaseException:
            await opened.close()
            raise
        return opened  # closed by _interleaved, outside the timing
    return start


async def _interleaved(variants: dict[str, Callable[[], Awaitable[OpenedSandbox | None]]], rounds: int,
                       warmup: int) -> dict[str, list[float]]:
    """Milliseconds per call of each variant. A call that returns a sandbox (the others return None) has it closed
    after the clock stops. OpenedSandbox is a protocol, not a class isinstance can check."""
    samples: dict[str, list[float]] = {label: [] for label in variants}
    for round_number in range(warmup + rounds):
        for label, call in variants.items():
            started = time.perf_counter()
            result = await call()
            elapsed = (time.perf_counter() - started) * 1000
            if result is not None:
                await result.close()
            if round_number >= warmup:
                samples[label].append(elapsed)
    return samples


def _timing(label: str, values: list[float]) -> Timing:
    deciles = statistics.quantiles(values, n=10, method="inclusive")
    return Timing(label=label, p50_ms=statistics.median(values), p90_ms=deciles[8], rounds=len(values))


def _load() -> str:
    one, five, _ = os.getloadavg()
    return f"load average {one:.2f} (1 min), {five:.2f} (5 min) on {os.cpu_count()} cores"


def _progress(message: str) -> None:
    print(message, file=sys.stderr, flush=True)


if __name__ == "__main__":
    main()
