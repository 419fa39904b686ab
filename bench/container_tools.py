"""What the container backend costs next to the local one: a Bash tool round trip for `true` through the tool
runner's one long-lived `exec -i` stream, the same command as one `podman exec` per call (what a harness that
execs per tool call pays), the local bubblewrap sandbox's round trip, and opening + closing a sandbox (container
vs bubblewrap) on a cached environment.

Run from the repository root:
    .venv/bin/python bench/container_tools.py [--rounds N] [--start-rounds N] [--quick] [--json]
Variants are interleaved round by round so machine noise hits them alike. The task is the built-in
`cron-next-run`; its image's FROM comes from the test suite's stand-in images (made if missing, never pulled).
The machine's load average is recorded before and after. --quick checks that the bench runs (a few rounds): not
a measurement. Timings are reported, never asserted.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(ROOT), str(ROOT / "tests")]

from container_images import ensure_toolchain_images  # noqa: E402
from sandbox import SandboxOptions, load_suite, open_sandbox  # noqa: E402
from sandbox.container.engine import engine  # noqa: E402

QUICK_ROUNDS, QUICK_START_ROUNDS = 3, 2  # a p90 needs two values


async def measure(rounds: int, start_rounds: int) -> dict[str, list[float]]:
    task = next(t for t in load_suite("builtin").tasks if t.task_id == "cron-next-run")
    with tempfile.TemporaryDirectory() as cache:
        local = SandboxOptions(backend="local", cache_dir=Path(cache))
        podman = SandboxOptions(backend="podman", cache_dir=Path(cache))
        times: dict[str, list[float]] = {"podman: Bash tool over the runner's exec -i stream": [],
                                         "podman: one `podman exec bash -lc true` per call": [],
                                         "local: Bash tool (bubblewrap)": [],
                                         "podman: open + close a sandbox": [],
                                         "local: open + close a sandbox": []}
        keys = list(times)
        in_container, in_bwrap = await open_sandbox(task, podman), await open_sandbox(task, local)
        try:
            await in_container.sandbox.run_tool("Bash", {"command": "true"})  # starts the runner
            per_call = engine("podman").command("exec", in_container.sandbox.container, "bash", "-lc", "true")
            for _ in range(rounds):
                times[keys[0]].append(await _timed(in_container.sandbox.run_tool("Bash", {"command": "true"})))
                started = time.perf_counter()
                await asyncio.to_thread(subprocess.run, per_call, capture_output=True, check=True)
                times[keys[1]].append(time.perf_counter() - started)
                times[keys[2]].append(await _timed(in_bwrap.sandbox.run_tool("Bash", {"command": "true"})))
        finally:
            await in_container.close()
            await in_bwrap.close()
        for _ in range(start_rounds):
            times[keys[3]].append(await _timed(_open_close(task, podman)))
            times[keys[4]].append(await _timed(_open_close(task, local)))
    return times


async def _open_close(task, options) -> None:
    opened = await open_sandbox(task, options)
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
    times = asyncio.run(measure(options.rounds, options.start_rounds))
    machine = {"cpus": os.cpu_count(), "load_before": load_before, "load_after": _load()}
    rows = {label: {"p50_ms": statistics.median(values) * 1000,
                    "p90_ms": statistics.quantiles(values, n=10)[-1] * 1000, "rounds": len(values)}
            for label, values in times.items()}
    labels = list(rows)
    ratios = {"exec per call / runner stream (p50)": rows[labels[1]]["p50_ms"] / rows[labels[0]]["p50_ms"],
              "podman runner stream / local Bash tool (p50)": rows[labels[0]]["p50_ms"] / rows[labels[2]]["p50_ms"],
              "podman open+close / local open+close (p50)": rows[labels[3]]["p50_ms"] / rows[labels[4]]["p50_ms"]}
    if options.json:
        print(json.dumps({"timings": rows, "ratios": ratios, "machine": machine, "quick": options.quick}, indent=2))
        return
    print(f"load before: {machine['load_before']}; after: {machine['load_after']}"
          + ("; --quick: a check that the bench runs, not a measurement" if options.quick else ""))
    print(f"{'variant':<55} {'p50 ms':>9} {'p90 ms':>9} {'rounds':>7}")
    for label, row in rows.items():
        print(f"{label:<55} {row['p50_ms']:>9.1f} {row['p90_ms']:>9.1f} {row['rounds']:>7}")
    for label, ratio in ratios.items():
        print(f"{label}: {ratio:.2f}x")


def _load() -> str:
    one, five, _ = os.getloadavg()
    return f"load average {one:.2f} (1 min), {five:.2f} (5 min) on {os.cpu_count()} cores"


if __name__ == "__main__":
    main()
