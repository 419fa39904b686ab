"""What the container backend costs next to the local one: a Bash tool round trip for `true` through the tool
runner's one long-lived `exec -i` stream, the same command as one `podman exec` per call (what a harness that
execs per tool call pays), the local bubblewrap sandbox's round trip, and opening + closing a sandbox (container
vs bubblewrap) on a cached environment. These keep their first meaning: the engine's command line
(LEAFCOST_CONTAINER_API=cli for those containers).

The same through the engine's REST API (the backend's default where it has a socket and aiodocker) are under `api`:
the Bash tool over the runner's API exec stream, one API exec of `bash -lc true` per call, open + close, and `bash -c
true` through each runner's exec request (no login profile: the task image's /etc/profile and ~/.profile start two
processes per `bash -lc` that bubblewrap's minimal profile does not), interleaved with the rest in the same rounds.

Run from the repository root:
    .venv/bin/python bench/container_tools.py [--rounds N] [--start-rounds N] [--quick] [--json]
Variants are interleaved round by round so machine noise hits them alike (the tool round trips in one loop, the
exec-per-call variants in the next: an exec's cleanup outlives it). The task is the built-in
`cron-next-run`; its image's FROM comes from the test suite's stand-in images (made if missing, never pulled).
The machine's load average is recorded before and after. --quick checks that the bench runs (a few rounds): not
a measurement. Timings are reported, never asserted.
"""

from __future__ import annotations

import argparse
import asyncio
import inspect
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(ROOT), str(ROOT / "tests"), str(ROOT / "bench")]

from container_api import engine_access  # noqa: E402
from container_images import ensure_toolchain_images  # noqa: E402
from sandbox import SandboxOptions, load_suite, open_sandbox  # noqa: E402
from sandbox.container.engine import engine  # noqa: E402

QUICK_ROUNDS, QUICK_START_ROUNDS = 3, 2  # a p90 needs two values


CLI = ["podman: Bash tool over the runner's exec -i stream", "podman: one `podman exec bash -lc true` per call",
       "local: Bash tool (bubblewrap)", "podman: open + close a sandbox", "local: open + close a sandbox"]
API = ["podman API: Bash tool over the runner's API exec stream", "podman API: one API exec of bash -lc true per call",
       "podman API: bash -c true through the runner (no login profile)",
       "local: bash -c true through the runner (no login profile)", "podman API: open + close a sandbox"]


async def measure(rounds: int, start_rounds: int) -> tuple[dict[str, list[float]], dict[str, list[float]] | None]:
    """The command line's timings (CLI's labels, their first meaning) and the API's (None without a socket)."""
    task = next(t for t in load_suite("builtin").tasks if t.task_id == "cron-next-run")
    with tempfile.TemporaryDirectory() as cache:
        local = SandboxOptions(backend="local", cache_dir=Path(cache))
        podman = SandboxOptions(backend="podman", cache_dir=Path(cache))
        times: dict[str, list[float]] = {label: [] for label in CLI}
        api_times: dict[str, list[float]] = {label: [] for label in API}
        in_container, in_bwrap = await _open(task, podman, "cli"), await open_sandbox(task, local)
        through_api = await _open(task, podman, "api")
        has_api = through_api.api is not None
        try:
            for opened in (in_container, through_api, in_bwrap):  # starts each runner
                await opened.sandbox.run_tool("Bash", {"command": "true"})
            per_call = engine("podman").command("exec", in_container.sandbox.container, "bash", "-lc", "true")
            api_runner, bwrap_runner = await _runner(through_api), await _runner(in_bwrap)

            def bash(opened):
                return lambda: opened.sandbox.run_tool("Bash", {"command": "true"})

            def plain(runner):
                return lambda: runner.exec("true", timeout=60, cwd=None, env=None, login=False)

            steps = [(times, CLI[0], bash(in_container)), (times, CLI[2], bash(in_bwrap))]
            steps += [(api_times, API[0], bash(through_api)), (api_times, API[2], plain(api_runner)),
                      (api_times, API[3], plain(bwrap_runner))] if has_api else []
            # Apart from the steps: an exec's cleanup (conmon, `podman container cleanup`) outlives it and would land
            # on the step measured next.
            calls = [(times, CLI[1], lambda: asyncio.to_thread(subprocess.run, per_call, capture_output=True,
                                                               check=True))]
            calls += [(api_times, API[1], lambda: through_api.api.exec(
                through_api.sandbox.container, ["bash", "-lc", "true"], user=None, workdir="/", env=None,
                timeout=60))] if has_api else []
            for variants in (steps, calls):
                for index in range(rounds):  # the order turns each round: no variant always follows another
                    turn = index % len(variants)
                    for into, label, step in variants[turn:] + variants[:turn]:
                        into[label].append(await _timed(step()))
        finally:
            for opened in (in_container, through_api, in_bwrap):
                await opened.close()
        starts = [(times, CLI[3], podman, "cli"), (times, CLI[4], local, "local")]
        starts += [(api_times, API[4], podman, "api")] if has_api else []
        for index in range(start_rounds):
            turn = index % len(starts)
            for into, label, options, mode in starts[turn:] + starts[:turn]:
                into[label].append(await _timed(_open_close(task, options, mode)))
    engine_access("api")
    return times, (api_times if has_api else None)


async def _open(task, options, mode: str):
    engine_access(mode)
    return await open_sandbox(task, options)


async def _runner(opened):
    """The sandbox's tool runner client (the one stream the Bash tool uses), for its `exec` request."""
    client = opened.sandbox._client()
    return await client if inspect.isawaitable(client) else client


async def _open_close(task, options, mode: str) -> None:
    opened = await _open(task, options, mode)
    await opened.close()


async def _timed(awaitable) -> float:
    started = time.perf_counter()
    await awaitable
    return time.perf_counter() - started


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=50)
    parser.add_argument("--start-rounds", type=int, default=10)
    parser.add_argument("--quick", action="store_true",
                        help=f"{QUICK_ROUNDS} rounds, {QUICK_START_ROUNDS} starts: a check that the bench runs, not a "
                             "measurement")
    parser.add_argument("--json", action="store_true")
    options = parser.parse_args()
    if options.quick:
        options.rounds, options.start_rounds = QUICK_ROUNDS, QUICK_START_ROUNDS
    if options.rounds < 2 or options.start_rounds < 2:
        parser.error("--rounds and --start-rounds must be at least 2 (for a p90)")
    ensure_toolchain_images()
    load_before = _load()
    times, api_times = asyncio.run(measure(options.rounds, options.start_rounds))
    machine = {"cpus": os.cpu_count(), "load_before": load_before, "load_after": _load()}
    rows = _rows(times)
    labels = list(rows)
    ratios = {"exec per call / runner stream (p50)": rows[labels[1]]["p50_ms"] / rows[labels[0]]["p50_ms"],
              "podman runner stream / local Bash tool (p50)": rows[labels[0]]["p50_ms"] / rows[labels[2]]["p50_ms"],
              "podman open+close / local open+close (p50)": rows[labels[3]]["p50_ms"] / rows[labels[4]]["p50_ms"]}
    api = None
    if api_times is not None:
        api_rows = _rows(api_times)

        def p50(label: str) -> float:
            return {**rows, **api_rows}[label]["p50_ms"]

        api = {"timings": api_rows, "ratios": {
            "API exec per call / API runner stream (p50)": p50(API[1]) / p50(API[0]),
            "podman API runner stream / local Bash tool (p50)": p50(API[0]) / p50(CLI[2]),
            "podman API runner stream / local, bash -c true without a login profile (p50)": p50(API[2]) / p50(API[3]),
            "podman API open+close / local open+close (p50)": p50(API[4]) / p50(CLI[4]),
            "command line runner stream / API runner stream (p50)": p50(CLI[0]) / p50(API[0]),
            "command line open+close / API open+close (p50)": p50(CLI[3]) / p50(API[4])}}
    if options.json:
        print(json.dumps({"timings": rows, "ratios": ratios, "machine": machine, "quick": options.quick, "api": api},
                         indent=2))
        return
    print(f"load before: {machine['load_before']}; after: {machine['load_after']}"
          + ("; --quick: a check that the bench runs, not a measurement" if options.quick else ""))
    print(f"{'variant':<66} {'p50 ms':>9} {'p90 ms':>9} {'rounds':>7}")
    for label, row in {**rows, **(api["timings"] if api else {})}.items():
        print(f"{label:<66} {row['p50_ms']:>9.1f} {row['p90_ms']:>9.1f} {row['rounds']:>7}")
    for label, ratio in {**ratios, **(api["ratios"] if api else {})}.items():
        print(f"{label}: {ratio:.2f}x")
    if api is None:
        print("the engine's API is not available here (no socket or aiodocker): the command line only")


def _rows(times: dict[str, list[float]]) -> dict[str, dict]:
    return {label: {"p50_ms": statistics.median(values) * 1000,
                    "p90_ms": statistics.quantiles(values, n=10)[-1] * 1000, "rounds": len(values)}
            for label, values in times.items()}


def _load() -> str:
    one, five, _ = os.getloadavg()
    return f"load average {one:.2f} (1 min), {five:.2f} (5 min) on {os.cpu_count()} cores"


if __name__ == "__main__":
    main()
