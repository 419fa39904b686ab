"""The step path, side by side with mini-swe-agent 2.4.6: steps/s and CPU per step on one instant endpoint, per
marginal step, in the stepping window and over the whole run.

Three harnesses run the same scripted episodes against one instant OpenAI-compatible endpoint
(bench/step_server.py, its own process, so its CPU is in no harness's figure):
- `mini`: mini-swe-agent 2.4.6 (DefaultAgent + LitellmModel + LocalEnvironment, its config/mini.yaml settings),
  installed with pip into its own venv under the cache directory (never a leafcost dependency);
- `leaf-sglang` and `leaf-router`: `leafcost run spec.yaml` (the real path: runner, ledger, bubblewrap
  sandboxes, one trivial task repeated as seeds) with an `sglang` arm and a `router` arm.

Each configuration (harness × workers × episode length) is one fresh process. Marginal per-step figures are
(long-episode run − short-episode run) ÷ the difference in model calls, so start-up and per-episode costs
cancel. Host CPU is the harness process tree's rusage (os.wait4); sandbox CPU is what the sandboxes' cgroups
counted (the ledger's episodes.sandbox_cpu_seconds: getrusage never sees CPU spent inside a sandbox). Runs are
interleaved, the order reversed every other repetition; ratios leafcost ÷ mini are taken inside each repetition,
then the median [min–max] over repetitions. Each run records the machine's busy cores from /proc/stat and the
share of them that was neither the harness, its sandboxes nor the endpoint (outside load); the load average is
recorded at the start and the end.

Besides the marginal figures, every run has two rates of its own:
- *stepping*: model calls ÷ the union of each episode's first-to-last model call interval (from the first
  request's arrival at the endpoint to its last answer's sending), the endpoint keying each request to its
  episode by the tool call ids it hands out (bench/step_server.py), whatever the harness;
- *whole run*: model calls ÷ the process's wall time from start to exit (start-up, every episode's sandboxes and
  grading, the ledger's last commit included), with CPU per step = (host + sandbox CPU) ÷ calls.
`--outside-load CORES [CORES ...]` runs each repetition once per level with that many busy-loop processes
(plain CPU spinners, at the bench's own priority) spinning through every run of it, recorded per run. The goal
of issue 26 is judged on the long runs at 8 workers: leafcost ÷ mini, inside each repetition, median ≥ 3 in the
stepping window and ≥ 2 over the whole run, for each arm and each load level.

--quick checks that the bench runs (1 repetition of 2 episodes of 4 vs 2 steps, 2 workers, no warm-up runs): not
a measurement.
mini-swe-agent is installed on first use only outside --quick: with --quick and no venv for it yet, mini is left
out (the output says so) and only leafcost's arms run.

    .venv/bin/python bench/step_path.py [--reps 5] [--episodes 20] [--long 20] [--short 5] [--workers 1 8]
                                        [--outside-load 0 1] [--quick] [--json] [--cache-dir DIR] [--skip-mini]
                                        [--leafcost-src DIR]

Timings are reported, never asserted.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request
from contextlib import contextmanager
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
BENCH = Path(__file__).resolve().parent
sys.path[:0] = [str(ROOT), str(BENCH)]

from trivial_task import make_suite  # noqa: E402

MINI_VERSION = "2.4.6"
HARNESSES = ("mini", "leaf-sglang", "leaf-router")
LEAF_ARMS = {
    "leaf-sglang": {"name": "bench", "adapter": "sglang", "model": "bench-model", "max_retries": 0,
                    "gpu": {"type": "H200", "count": 1, "usd_per_hour": 3.5}, "metrics_interval_sec": 3600},
    "leaf-router": {"name": "bench", "adapter": "router", "model": "bench-model", "max_retries": 0,
                    "prices": {"input": 0.15, "output": 0.6}, "api_key_env": "BENCH_ROUTER_KEY"},
}
TICKS = os.sysconf("SC_CLK_TCK")
QUICK = {"reps": 1, "episodes": 2, "long": 4, "short": 2, "workers": [2], "outside_load": [0]}
GOALS = {"workers": 8, "stepping": 3.0, "whole_run": 2.0}  # issue 26, goal 3


# --------------------------------------------------------------------------------------------- one run


def run_leaf(harness: str, base_url: str, workers: int, episodes: int, steps: int, scratch: Path,
             env_cache: Path, leafcost_src: Path | None = None) -> dict:
    """One `leafcost run` of `episodes` episodes of `steps` model calls each; its figures. `leafcost_src`: run
    another checkout's code (an older commit, for a before/after table) with this venv."""
    run_dir = Path(tempfile.mkdtemp(prefix=f"{harness}-w{workers}-s{steps}-", dir=scratch))
    spec = {"name": "step-path", "suite": str(make_suite(run_dir)), "seeds": episodes, "workers": workers,
            "max_attempts": 1, "budgets": {"max_steps": steps + 5, "time_budget_sec": 3600},
            "arms": [{**LEAF_ARMS[harness], "base_url": base_url}]}
    spec_path = run_dir / "spec.yaml"
    spec_path.write_text(json.dumps(spec))  # JSON is YAML
    db = run_dir / "ledger.duckdb"
    # this checkout's code (or leafcost_src's), whatever checkout the venv's `leafcost` script was installed from
    env = {**os.environ, "LEAFCOST_CACHE": str(env_cache), "BENCH_ROUTER_KEY": "bench-key",
           "PYTHONPATH": str(leafcost_src or ROOT)}
    command = [str(Path(sys.executable).parent / "leafcost"), "run", str(spec_path), "--db", str(db), "--json"]
    figures = _measured(command, env=env, cwd=run_dir)
    from compare.ledger import connect_read_only

    conn = connect_read_only(db)
    try:
        calls, failed = conn.execute("SELECT count(*), count(*) FILTER (WHERE status <> 'ok') "
                                     "FROM model_calls").fetchone()
        sandbox_cpu, = conn.execute("SELECT coalesce(sum(sandbox_cpu_seconds), 0) FROM episodes").fetchone()
        exits = dict(conn.execute("SELECT exit_reason, count(*) FROM episodes GROUP BY ALL").fetchall())
    finally:
        conn.close()
    return {**figures, "model_calls": calls, "failed_calls": failed, "sandbox_cpu_sec": float(sandbox_cpu),
            "exits": exits}


def run_mini(mini_python: Path, base_url: str, workers: int, episodes: int, scratch: Path) -> dict:
    run_dir = Path(tempfile.mkdtemp(prefix=f"mini-w{workers}-", dir=scratch))
    env = {**os.environ, "LITELLM_LOCAL_MODEL_COST_MAP": "True", "MSWEA_SILENT_STARTUP": "1",
           "MSWEA_GLOBAL_CONFIG_DIR": str(run_dir / "config")}
    command = [str(mini_python), str(BENCH / "step_mini_driver.py"), "--base-url", base_url,
               "--episodes", str(episodes), "--workers", str(workers)]
    figures = _measured(command, env=env, cwd=run_dir)
    report = json.loads(figures.pop("stdout").strip().splitlines()[-1])
    return {**figures, "model_calls": report["model_calls"], "failed_calls": 0, "sandbox_cpu_sec": 0.0,
            "exits": report["exits"]}


def _measured(command: list[str], *, env: dict, cwd: Path) -> dict:
    """Runs `command` to its end: wall, the CPU of its whole reaped tree and its largest RSS (os.wait4), the
    machine's busy cores and the endpoint's CPU over the same interval."""
    _server_windows()  # forget what an earlier run left
    machine_before, server_before = _machine_jiffies(), _server_cpu()
    started = time.monotonic()
    with open(cwd / "stdout", "wb") as out, open(cwd / "stderr", "wb") as err:
        process = subprocess.Popen(command, env=env, cwd=cwd, stdout=out, stderr=err)
        _, status, usage = os.wait4(process.pid, 0)  # reaped here, not by Popen.wait, which drops the rusage
        process.returncode = os.waitstatus_to_exitcode(status)
    wall = time.monotonic() - started
    machine_after, server_after = _machine_jiffies(), _server_cpu()
    windows = _server_windows()
    if process.returncode != 0:
        tail = (cwd / "stderr").read_text(errors="replace")[-2000:]
        raise RuntimeError(f"{command[0]} exited {process.returncode}: {tail}")
    busy = (machine_after[0] - machine_before[0]) / max(1, machine_after[1] - machine_before[1]) * os.cpu_count()
    return {"wall_sec": wall, "host_cpu_sec": usage.ru_utime + usage.ru_stime, "max_rss_mib": usage.ru_maxrss / 1024,
            "server_cpu_sec": server_after - server_before, "machine_busy_cores": busy,
            "stepping_sec": stepping_seconds(windows["windows"]), "episode_windows": len(windows["windows"]),
            # start-up (imports, ledger, probes, first sandbox) and wind-down (last grading, closing), whole-run only
            "before_first_call_sec": min((w[0] for w in windows["windows"]), default=started + wall) - started,
            "after_last_call_sec": started + wall - max((w[1] for w in windows["windows"]), default=started),
            "endpoint_calls": sum(int(w[2]) for w in windows["windows"]), "unkeyed_calls": windows["unkeyed"],
            "stdout": (cwd / "stdout").read_text(errors="replace")}


def stepping_seconds(windows: list[list[float]]) -> float:
    """The length of the union of the episodes' [first call, last call] intervals."""
    total, end = 0.0, float("-inf")
    for first, last, *_ in sorted(windows):
        if last > end:
            total += last - max(first, end)
            end = last
    return total


def _machine_jiffies() -> tuple[int, int]:
    """(busy, total) jiffies of all CPUs since boot, from /proc/stat (busy: everything but idle and iowait)."""
    fields = [int(v) for v in Path("/proc/stat").read_text().splitlines()[0].split()[1:]]
    total = sum(fields[:8])
    return total - fields[3] - fields[4], total


SERVER_PID: int | None = None
SERVER_URL: str | None = None


def _server_windows() -> dict:
    """The endpoint's episode windows since the last time they were taken (none without an endpoint)."""
    if SERVER_URL is None:
        return {"windows": [], "unkeyed": 0}
    with urllib.request.urlopen(f"{SERVER_URL}/windows", timeout=30) as response:
        return json.loads(response.read())


@contextmanager
def outside_load(cores: int):
    """`cores` plain CPU spinners at this process's priority while the block runs; yields their pids."""
    spin = f"import os\nwhile os.getppid() == {os.getpid()}:\n    for _ in range(100000): pass"  # ends if orphaned
    spinners = [subprocess.Popen([sys.executable, "-c", spin], stdin=subprocess.DEVNULL) for _ in range(cores)]
    try:
        yield [p.pid for p in spinners]
    finally:
        for process in spinners:
            process.kill()
            process.wait()


def _server_cpu() -> float:
    if SERVER_PID is None:
        return 0.0
    fields = Path(f"/proc/{SERVER_PID}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / TICKS


# --------------------------------------------------------------------------------------------- the design


def configurations(harnesses: list[str], workers: list[int], lengths: list[int]) -> list[tuple[str, int, int]]:
    """Every (harness, workers, steps) of one repetition, harnesses interleaved configuration by configuration."""
    return [(harness, w, steps) for w in workers for steps in lengths for harness in harnesses]


def run_rates(run: dict) -> dict:
    """A run's own rates: steps/s in its stepping window and over its whole wall time, CPU per step."""
    calls = run["model_calls"]
    stepping = run.get("stepping_sec") or 0.0
    cpu = (run["host_cpu_sec"] + run["sandbox_cpu_sec"]) / calls * 1000 if calls else float("nan")
    return {"stepping_steps_per_sec": calls / stepping if stepping > 0 else float("nan"),
            "whole_run_steps_per_sec": calls / run["wall_sec"] if run["wall_sec"] > 0 else float("nan"),
            "cpu_ms_per_step": cpu,
            "host_cpu_ms_per_step": run["host_cpu_sec"] / calls * 1000 if calls else float("nan")}


def windows_summary(runs: list[dict], harnesses: list[str], workers: list[int], loads: list[int],
                    lengths: list[int]) -> list[dict]:
    """Per harness × workers × outside load × episode length: stepping and whole-run steps/s, CPU per step, and
    leafcost ÷ mini inside each repetition, median [min–max]; at the goal's worker count, whether the goal is met
    (on the medians; the long runs are the goal's)."""
    by_key = {(r["rep"], r["harness"], r["workers"], r.get("outside_load", 0), r["steps"]): r for r in runs}
    reps = sorted({r["rep"] for r in runs})
    rows = []
    for load in loads:
        for w in workers:
            for steps in lengths:
                rates = {h: {rep: run_rates(by_key[rep, h, w, load, steps]) for rep in reps
                             if (rep, h, w, load, steps) in by_key} for h in harnesses}
                for h in harnesses:
                    if not rates[h]:
                        continue
                    mine = rates[h]
                    row = {"harness": h, "workers": w, "outside_load": load, "steps": steps,
                           **{k: spread([r[k] for r in mine.values()]) for k in (
                               "stepping_steps_per_sec", "whole_run_steps_per_sec", "cpu_ms_per_step",
                               "host_cpu_ms_per_step")},
                           "outside_load_cores": spread([by_key[rep, h, w, load, steps]["outside_load_cores"]
                                                         for rep in mine])}
                    if h != "mini" and rates.get("mini"):
                        shared = [rep for rep in mine if rep in rates["mini"]]
                        row["vs_mini"] = {k: spread([mine[rep][k] / rates["mini"][rep][k] for rep in shared])
                                          for k in ("stepping_steps_per_sec", "whole_run_steps_per_sec",
                                                    "cpu_ms_per_step")}
                        if w == GOALS["workers"] and steps == max(lengths):
                            vs = row["vs_mini"]
                            row["goal"] = {
                                "stepping": _at_least(vs["stepping_steps_per_sec"]["median"], GOALS["stepping"]),
                                "whole_run": _at_least(vs["whole_run_steps_per_sec"]["median"],
                                                       GOALS["whole_run"])}
                    rows.append(row)
    return rows


def _at_least(value: float | None, goal: float) -> bool | None:
    return None if value is None else value >= goal


def marginal(long: dict, short: dict) -> dict:
    """Per marginal step: the long run minus the short run, so start-up and per-episode costs cancel."""
    calls = long["model_calls"] - short["model_calls"]
    wall = long["wall_sec"] - short["wall_sec"]
    host = (long["host_cpu_sec"] - short["host_cpu_sec"]) / calls * 1000
    sandbox = (long["sandbox_cpu_sec"] - short["sandbox_cpu_sec"]) / calls * 1000
    return {"steps_per_sec": calls / wall if wall > 0 else float("nan"), "host_cpu_ms": host,
            "sandbox_cpu_ms": sandbox, "cpu_ms": host + sandbox}


def ratios(leaf: dict, mini: dict) -> dict:
    """leafcost ÷ mini, inside one repetition."""
    return {"steps_per_sec": leaf["steps_per_sec"] / mini["steps_per_sec"],
            "cpu_ms": leaf["cpu_ms"] / mini["cpu_ms"] if mini["cpu_ms"] else float("nan")}


def spread(values: list[float]) -> dict:
    values = [v for v in values if v == v]
    if not values:
        return {"median": None, "min": None, "max": None}
    return {"median": statistics.median(values), "min": min(values), "max": max(values)}


def summarize(runs: list[dict], harnesses: list[str], workers: list[int], long: int, short: int,
              loads: list[int] = (0,)) -> dict:
    """Marginal figures and in-repetition ratios, median [min–max] over repetitions, per harness, workers and
    outside load (`rows`); the runs' own stepping and whole-run rates (`windows`)."""
    by_key = {(r["rep"], r["harness"], r["workers"], r.get("outside_load", 0), r["steps"]): r for r in runs}
    reps = sorted({r["rep"] for r in runs})
    rows = []
    for load in loads:
        mine = [r for r in runs if r.get("outside_load", 0) == load]
        for w in workers:
            per_rep = {h: {rep: marginal(by_key[rep, h, w, load, long], by_key[rep, h, w, load, short])
                           for rep in reps if (rep, h, w, load, long) in by_key and (rep, h, w, load, short) in by_key}
                       for h in harnesses}
            for h in harnesses:
                marg = per_rep[h]
                same = [r for r in mine if r["harness"] == h and r["workers"] == w]
                row = {"harness": h, "workers": w, "outside_load": load,
                       **{k: spread([m[k] for m in marg.values()])
                          for k in ("steps_per_sec", "host_cpu_ms", "sandbox_cpu_ms", "cpu_ms")},
                       "outside_load_cores": spread([r["outside_load_cores"] for r in same]),
                       "max_rss_mib": spread([r["max_rss_mib"] for r in same])}
                if h != "mini" and "mini" in per_rep:
                    within = [ratios(marg[rep], per_rep["mini"][rep]) for rep in marg if rep in per_rep["mini"]]
                    row["vs_mini"] = {k: spread([r[k] for r in within]) for k in ("steps_per_sec", "cpu_ms")}
                rows.append(row)
    return {"rows": rows, "windows": windows_summary(runs, harnesses, workers, list(loads), [long, short])}


# --------------------------------------------------------------------------------------------- set-up


def mini_installed(cache_dir: Path) -> bool:
    """Whether mini-swe-agent's venv under the cache dir is there (mini_python installs it otherwise)."""
    return (cache_dir / f"mini-swe-agent-{MINI_VERSION}" / ".installed").exists()


def mini_python(cache_dir: Path) -> Path:
    """mini-swe-agent's interpreter, in its own venv under the cache dir (installed with pip on first use)."""
    venv = cache_dir / f"mini-swe-agent-{MINI_VERSION}"
    python = venv / "bin" / "python"
    stamp = venv / ".installed"
    if not mini_installed(cache_dir):
        subprocess.run([sys.executable, "-m", "venv", "--clear", str(venv)], check=True)
        subprocess.run([str(python), "-m", "pip", "install", "-q", f"mini-swe-agent=={MINI_VERSION}"], check=True)
        stamp.write_text(MINI_VERSION)
    return python


class StepServer:
    """bench/step_server.py as its own process, for the whole bench."""

    def __init__(self, scratch: Path):
        self.port_file = scratch / "server.port"

    def __enter__(self) -> StepServer:
        global SERVER_PID
        self.process = subprocess.Popen([sys.executable, str(BENCH / "step_server.py"), "--port-file",
                                         str(self.port_file)], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
        deadline = time.monotonic() + 30
        while not self.port_file.exists():
            if self.process.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError(f"the step server did not start: {self.process.stderr.read()!r}")
            time.sleep(0.02)
        self.port = int(self.port_file.read_text())
        SERVER_PID = self.process.pid
        global SERVER_URL
        SERVER_URL = f"http://127.0.0.1:{self.port}"
        return self

    def base_url(self, steps: int) -> str:
        return f"http://127.0.0.1:{self.port}/s/{steps}/v1"

    def __exit__(self, *exc: object) -> None:
        global SERVER_PID, SERVER_URL
        SERVER_PID = SERVER_URL = None
        self.process.terminate()
        self.process.wait(timeout=10)


# --------------------------------------------------------------------------------------------- main


def measure(*, reps: int, episodes: int, long: int, short: int, workers: list[int], harnesses: list[str],
            cache_dir: Path, leafcost_src: Path | None = None, warm_up: bool = True, loads: list[int] = (0,),
            progress=lambda text: None) -> dict:
    cache_dir.mkdir(parents=True, exist_ok=True)
    loadavg_at_start = Path("/proc/loadavg").read_text().split()[:3]
    python = mini_python(cache_dir) if "mini" in harnesses else None
    runs = []
    with tempfile.TemporaryDirectory(prefix="leafcost-step-path-") as tmp, StepServer(Path(tmp)) as server:
        scratch, env_cache = Path(tmp), cache_dir / "leafcost-env"

        def one(harness: str, w: int, steps: int, n: int) -> dict:
            url = server.base_url(steps)
            if harness == "mini":
                return run_mini(python, url, w, n, scratch)
            return run_leaf(harness, url, w, n, steps, scratch, env_cache, leafcost_src)

        for harness in harnesses if warm_up else ():  # environment build, page cache, mini's .pyc; not reported
            one(harness, 1, short, 1)
        plan = configurations(harnesses, workers, [long, short])
        for rep in range(reps):
            for load in (loads if rep % 2 == 0 else loads[::-1]):
                with outside_load(load):
                    for harness, w, steps in (plan if rep % 2 == 0 else plan[::-1]):
                        figures = one(harness, w, steps, episodes)
                        own = (figures["host_cpu_sec"] + figures["sandbox_cpu_sec"] + figures["server_cpu_sec"])
                        figures["outside_load_cores"] = max(0.0, figures["machine_busy_cores"]
                                                            - own / figures["wall_sec"])
                        figures.pop("stdout", None)
                        runs.append({"rep": rep, "harness": harness, "workers": w, "steps": steps,
                                     "episodes": episodes, "outside_load": load, **figures})
                        rates = run_rates(figures)
                        progress(f"rep {rep + 1}/{reps} load {load} {harness:<11} w{w} {steps:>2}-step: "
                                 f"{figures['model_calls']} calls {figures['wall_sec']:.2f} s (stepping "
                                 f"{rates['stepping_steps_per_sec']:.0f}/s, whole "
                                 f"{rates['whole_run_steps_per_sec']:.0f}/s), host {figures['host_cpu_sec']:.2f} s, "
                                 f"sandbox {figures['sandbox_cpu_sec']:.2f} s, "
                                 f"busy {figures['machine_busy_cores']:.2f} cores")
    return {"design": {"reps": reps, "episodes": episodes, "long_steps": long, "short_steps": short,
                       "workers": workers, "harnesses": harnesses, "warm_up": warm_up, "mini_swe_agent": MINI_VERSION,
                       "leafcost_src": str(leafcost_src or ROOT), "outside_load": list(loads), "goals": GOALS},
            "machine": {"cpus": os.cpu_count(), "python": platform.python_version(), "nice": os.nice(0),
                        "loadavg_at_start": loadavg_at_start,
                        "loadavg_at_end": Path("/proc/loadavg").read_text().split()[:3]},
            "summary": summarize(runs, harnesses, workers, long, short, list(loads)), "runs": runs}


def render(result: dict) -> str:
    design = result["design"]
    lines = [f"machine: {result['machine']['cpus']} cores, Python {result['machine']['python']}; "
             f"{design['episodes']} episodes of {design['long_steps']} vs {design['short_steps']} steps, "
             f"{design['reps']} interleaved repetitions, medians [min–max] per marginal step; load average at the "
             f"start {' '.join(result['machine']['loadavg_at_start'])}, at the end "
             f"{' '.join(result['machine']['loadavg_at_end'])}",
             *(f"left out: {harness}: {why}" for harness, why in result.get("skipped", {}).items()),
             *(["--quick: a check that the bench runs, not a measurement"] if result.get("quick") else []),
             "", "Per marginal step:", "",
             "| harness | workers | spinners | steps/s | CPU ms/step (host + sandbox) | ÷ mini steps/s "
             "| ÷ mini CPU/step | outside load, cores | max RSS MiB |", "|---|---|---|---|---|---|---|---|---|"]
    for row in result["summary"]["rows"]:
        vs = row.get("vs_mini")
        lines.append(f"| {row['harness']} | {row['workers']} | {row.get('outside_load', 0)} | "
                     f"{_fmt(row['steps_per_sec'], 1)} | "
                     f"{_fmt(row['cpu_ms'], 2)} ({_med(row['host_cpu_ms'])} + {_med(row['sandbox_cpu_ms'])}) | "
                     f"{_fmt(vs['steps_per_sec'], 2) if vs else '–'} | {_fmt(vs['cpu_ms'], 2) if vs else '–'} | "
                     f"{_fmt(row['outside_load_cores'], 2)} | {_med(row['max_rss_mib'], 0)} |")
    lines += ["", "Per run (stepping window: union of each episode's first-to-last call; whole run: start to exit); "
              "goal at 8 workers, long runs: ÷ mini ≥ 3 stepping, ≥ 2 whole run:", "",
              "| harness | workers | spinners | steps | steps/s stepping | steps/s whole run | CPU ms/step | "
              "÷ mini stepping | ÷ mini whole run | ÷ mini CPU/step | outside load, cores | goal met |",
              "|---|---|---|---|---|---|---|---|---|---|---|---|"]
    for row in result["summary"].get("windows", []):
        vs = row.get("vs_mini")
        goal = row.get("goal")
        met = "–" if not goal else (f"stepping {_yes(goal['stepping'])}, whole run {_yes(goal['whole_run'])}")
        lines.append(f"| {row['harness']} | {row['workers']} | {row['outside_load']} | {row['steps']} | "
                     f"{_fmt(row['stepping_steps_per_sec'], 0)} | {_fmt(row['whole_run_steps_per_sec'], 0)} | "
                     f"{_fmt(row['cpu_ms_per_step'], 2)} | "
                     + " | ".join(_fmt(vs[k], 2) if vs else "–" for k in (
                         "stepping_steps_per_sec", "whole_run_steps_per_sec", "cpu_ms_per_step"))
                     + f" | {_fmt(row['outside_load_cores'], 2)} | {met} |")
    return "\n".join(lines)


def _yes(met: bool | None) -> str:
    return "–" if met is None else ("yes" if met else "no")


def _fmt(s: dict, digits: int) -> str:
    if s["median"] is None:
        return "–"
    return f"{s['median']:.{digits}f} [{s['min']:.{digits}f}–{s['max']:.{digits}f}]"


def _med(s: dict, digits: int = 2) -> str:
    return "–" if s["median"] is None else f"{s['median']:.{digits}f}"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--reps", type=int, default=5)
    parser.add_argument("--episodes", type=int, default=20)
    parser.add_argument("--long", type=int, default=20, help="model calls per episode, long runs")
    parser.add_argument("--short", type=int, default=5, help="model calls per episode, short runs")
    parser.add_argument("--workers", type=int, nargs="+", default=[1, 8])
    parser.add_argument("--outside-load", type=int, nargs="+", default=[0], metavar="CORES",
                        help="load levels: each repetition runs once per level with that many CPU spinners running")
    parser.add_argument("--quick", action="store_true",
                        help="1 repetition of 2 × 4 vs 2 steps, 2 workers; mini only if its venv is there already: a "
                             "check that the bench runs, not a measurement")
    parser.add_argument("--skip-mini", action="store_true", help="leafcost's arms only (no ratios)")
    parser.add_argument("--cache-dir", type=Path,
                        default=Path(os.environ.get("XDG_CACHE_HOME", Path.home() / ".cache")) / "leafcost-bench")
    parser.add_argument("--leafcost-src", type=Path, default=None,
                        help="run leafcost from this checkout (e.g. a `git worktree` of an older commit) with this "
                             "venv")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    if args.quick:
        for name, value in QUICK.items():
            setattr(args, name, value)
    skipped = {}
    if args.quick and not args.skip_mini and not mini_installed(args.cache_dir):
        skipped["mini"] = (f"--quick installs nothing and mini-swe-agent {MINI_VERSION}'s venv is not in "
                           f"{args.cache_dir} (a run without --quick installs it): leafcost's arms only, no ratios")
        print(f"left out: mini: {skipped['mini']}", file=sys.stderr, flush=True)
    harnesses = [h for h in HARNESSES if not ((args.skip_mini or "mini" in skipped) and h == "mini")]
    result = measure(reps=args.reps, episodes=args.episodes, long=args.long, short=args.short, workers=args.workers,
                     harnesses=harnesses, cache_dir=args.cache_dir, leafcost_src=args.leafcost_src,
                     warm_up=not args.quick, loads=args.outside_load,
                     progress=lambda text: print(text, file=sys.stderr, flush=True))
    result.update(quick=args.quick, skipped=skipped)
    print(json.dumps(result, indent=2) if args.json else render(result))


if __name__ == "__main__":
    main()
