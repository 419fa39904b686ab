"""The container backend through the engine's REST API (aiodocker over the socket) next to the same backend through
the engine's command line, and both next to the local bubblewrap sandbox, in one run:

- a Bash tool round trip (`true`) through the tool runner's one exec stream per episode (API stream vs `podman exec
  -i`), and through bubblewrap. Leaf's Bash tool runs `bash -lc`: a login shell with each side's own profile, and the
  task image's (Debian's /etc/profile runs `id -u`, root's ~/.profile runs `mesg n`: two more processes per step)
  costs what bubblewrap's minimal one does not. So two like-for-like steps are measured too: `bash -c true` through
  the runner's exec request on both sides (no profile), and the Bash tool in a second API container whose login
  profile is bubblewrap's (/etc/profile replaced, the user's ~/.profile and the like removed; the agent's container
  never is);
- one harness exec per call (`sh -c true`): an API exec round trip vs one `podman exec` command;
- an episode's fixed costs on a cached environment: opening the sandbox (`start`), starting the tool runner (the
  first tool call) and closing it, for the API, the command line and bubblewrap.

Run from the repository root:  .venv/bin/python bench/container_api.py [--rounds N] [--start-rounds N] [--json]
Variants are interleaved round by round so machine noise hits them alike; the load (uptime) before and after is
printed with the numbers. The task is the built-in `cron-next-run` (its image's FROM comes from the test suite's
stand-in images, made if missing). Timings are reported, never asserted.
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
sys.path[:0] = [str(ROOT), str(ROOT / "tests")]

from container_images import ensure_toolchain_images  # noqa: E402
from sandbox import SandboxOptions, load_suite, open_sandbox  # noqa: E402
from sandbox.container.engine import engine  # noqa: E402
from sandbox.local.bwrap import PROFILE  # noqa: E402

SWITCH = "LEAFCOST_CONTAINER_API"


def engine_access(mode: str) -> None:
    """The container backend's engine access for the next open: "api" (the socket) or "cli" (bench/container_tools.py
    uses it too)."""
    if mode == "cli":
        os.environ[SWITCH] = "cli"
    else:
        os.environ.pop(SWITCH, None)


async def _open(task, options, mode: str):
    engine_access(mode)
    opened = await open_sandbox(task, options)
    if options.backend != "local" and (opened.api is not None) != (mode == "api"):
        raise SystemExit(f"asked for the {mode} engine access but got the other one (is aiodocker installed?)")
    return opened


async def measure(rounds: int, start_rounds: int) -> dict[str, list[float]]:
    task = next(t for t in load_suite("builtin").tasks if t.task_id == "cron-next-run")
    times: dict[str, list[float]] = {}

    def add(label: str, seconds: float) -> None:
        times.setdefault(label, []).append(seconds)

    with tempfile.TemporaryDirectory() as cache:
        local = SandboxOptions(backend="local", cache_dir=Path(cache))
        podman = SandboxOptions(backend="podman", cache_dir=Path(cache))
        through_api, through_cli = await _open(task, podman, "api"), await _open(task, podman, "cli")
        in_bwrap = await _open(task, local, "local")
        bwrap_profile = await _open(task, podman, "api")
        try:
            await _use_profile(bwrap_profile, PROFILE.read_text())
            for opened in (through_api, through_cli, in_bwrap, bwrap_profile):  # starts each runner
                await opened.sandbox.run_tool("Bash", {"command": "true"})
            per_call = engine("podman").command("exec", through_cli.sandbox.container, "sh", "-c", "true")
            api = through_api.api
            api_runner, bwrap_runner = await _runner(through_api), await _runner(in_bwrap)

            def bash(opened):
                return lambda: opened.sandbox.run_tool("Bash", {"command": "true"})

            def plain(runner):
                return lambda: runner.exec("true", timeout=60, cwd=None, env=None, login=False)

            steps = [("step: API runner stream (Bash true)", bash(through_api)),
                     ("step: CLI runner stream, podman exec -i (Bash true)", bash(through_cli)),
                     ("step: local bubblewrap (Bash true)", bash(in_bwrap)),
                     ("step: API runner stream, bash -c true (no login profile)", plain(api_runner)),
                     ("step: local bubblewrap, bash -c true (no login profile)", plain(bwrap_runner)),
                     ("step: API runner stream, bubblewrap's login profile (Bash true)", bash(bwrap_profile))]
            for index in range(rounds):  # the order turns each round: no variant always follows another
                turn = index % len(steps)
                for label, step in steps[turn:] + steps[:turn]:
                    add(label, await _timed(step()))
            # Apart from the steps: a `podman exec`'s cleanup (conmon, `podman container cleanup`) outlives it.
            calls = [("exec per call: API exec round trip (sh -c true)",
                      lambda: api.exec(through_api.sandbox.container, ["sh", "-c", "true"], user=None, workdir="/",
                                       env=None, timeout=60)),
                     ("exec per call: one `podman exec sh -c true`",
                      lambda: asyncio.to_thread(subprocess.run, per_call, capture_output=True, check=True))]
            for index in range(rounds):
                for label, call in calls[index % 2:] + calls[:index % 2]:
                    add(label, await _timed(call()))
        finally:
            for opened in (through_api, through_cli, in_bwrap, bwrap_profile):
                await opened.close()
        modes = [("api", podman), ("cli", podman), ("local", local)]
        for index in range(start_rounds):
            for mode, options in modes[index % 3:] + modes[:index % 3]:
                started = time.perf_counter()
                opened = await _open(task, options, mode)
                add(f"episode {mode}: open (start)", time.perf_counter() - started)
                add(f"episode {mode}: runner start (first tool)",
                    await _timed(opened.sandbox.run_tool("Bash", {"command": "true"})))
                add(f"episode {mode}: close", await _timed(opened.close()))
    engine_access("api")
    return times


async def _runner(opened):
    """The sandbox's tool runner client (the one stream the Bash tool uses), for its `exec` request."""
    client = opened.sandbox._client()
    return await client if inspect.isawaitable(client) else client


async def _use_profile(opened, profile: str) -> None:
    """Bubblewrap's login profile in this (benchmark-only) container: /etc/profile replaced, the agent user's own
    login files removed, so `bash -lc` does there what it does in bubblewrap."""
    script = f'cat > /etc/profile <<"LEAFCOST_PROFILE"\n{profile.rstrip()}\nLEAFCOST_PROFILE\n'
    wrote = await opened.sandbox.exec(script, timeout=60, user="root")
    removed = await opened.sandbox.exec('cd && rm -f .bash_profile .bash_login .profile', timeout=60)
    if not (wrote.ok and removed.ok):
        raise SystemExit(f"could not replace the login profile: {wrote.stderr} {removed.stderr}")


async def _timed(awaitable) -> float:
    started = time.perf_counter()
    await awaitable
    return time.perf_counter() - started


def _p(values: list[float], q: int) -> float:
    return statistics.quantiles(values, n=100, method="inclusive")[q - 1] if len(values) > 1 else values[0]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=40)
    parser.add_argument("--start-rounds", type=int, default=10)
    parser.add_argument("--json", action="store_true")
    parser.add_argument("--quick", action="store_true", help="a check that it runs: 3 rounds, 2 starts")
    options = parser.parse_args()
    if options.quick:
        options.rounds, options.start_rounds = 3, 2
    ensure_toolchain_images()
    load_before = subprocess.run(["uptime"], capture_output=True, text=True).stdout.strip()
    times = asyncio.run(measure(options.rounds, options.start_rounds))
    load_after = subprocess.run(["uptime"], capture_output=True, text=True).stdout.strip()
    rows = {label: {"p50_ms": statistics.median(values) * 1000, "p95_ms": _p(values, 95) * 1000,
                    "rounds": len(values)} for label, values in times.items()}

    def p50(label: str) -> float:
        return rows[label]["p50_ms"]

    def episode(mode: str) -> float:
        return sum(p50(f"episode {mode}: {part}") for part in ("open (start)", "runner start (first tool)", "close"))

    ratios = {
        "step p50, API stream / bubblewrap": p50("step: API runner stream (Bash true)")
        / p50("step: local bubblewrap (Bash true)"),
        "step p50, CLI stream / bubblewrap": p50("step: CLI runner stream, podman exec -i (Bash true)")
        / p50("step: local bubblewrap (Bash true)"),
        "step p50 without a login profile (bash -c true through the runner), API stream / bubblewrap":
        p50("step: API runner stream, bash -c true (no login profile)")
        / p50("step: local bubblewrap, bash -c true (no login profile)"),
        "step p50 with bubblewrap's login profile on both sides (Bash true), API stream / bubblewrap":
        p50("step: API runner stream, bubblewrap's login profile (Bash true)")
        / p50("step: local bubblewrap (Bash true)"),
        "exec per call p50, podman exec / API exec": p50("exec per call: one `podman exec sh -c true`")
        / p50("exec per call: API exec round trip (sh -c true)"),
        "open p50, CLI / API": p50("episode cli: open (start)") / p50("episode api: open (start)"),
        "episode fixed cost p50 (open+runner+close), CLI / API": episode("cli") / episode("api"),
    }
    extra = {f"episode fixed cost p50 ms, {mode}": episode(mode) for mode in ("api", "cli", "local")}
    # What the task image's own login profile adds to each Bash step (its processes), beside bubblewrap's.
    extra["image login profile ms per step (p50, API Bash true - API with bubblewrap's profile)"] = (
        p50("step: API runner stream (Bash true)")
        - p50("step: API runner stream, bubblewrap's login profile (Bash true)"))
    if options.json:
        print(json.dumps({"load_before": load_before, "load_after": load_after, "quick": options.quick,
                          "timings": rows, "ratios": ratios, **extra}, indent=2))
        return
    print(f"load before: {load_before}")
    print(f"{'variant':<66} {'p50 ms':>9} {'p95 ms':>9} {'rounds':>7}")
    for label, row in rows.items():
        print(f"{label:<66} {row['p50_ms']:>9.1f} {row['p95_ms']:>9.1f} {row['rounds']:>7}")
    for label, value in extra.items():
        print(f"{label}: {value:.1f}")
    for label, ratio in ratios.items():
        print(f"{label}: {ratio:.2f}x")
    print(f"load after: {load_after}")


if __name__ == "__main__":
    main()
