"""Every measurement in bench/ in one run, and the one table docs/benchmarks.md opens with.

Each measurement script (SCRIPTS below) runs at its standard setting as its own process with --json; its JSON, the
exact command, its wall time and /proc/loadavg before and after are kept (--out-json, by default
bench/results/latest.json). Each script's headline figures (metric, leafcost's value, the other side's value,
leafcost ÷ other, the goal, met or not) are read from its JSON by a small function of its own (HEADLINES), tolerant
of keys added later, into one table. A script that needs what this machine lacks (bubblewrap, Podman, a clone of the
repository it mines, PyPI) is recorded as "not run: REASON"; one that fails is recorded with its exit code and the end
of its stderr, and the others still run. Children run this checkout's code (PYTHONPATH), as the quick-mode test does.

    .venv/bin/python bench/run_all.py [--only NAME ...] [--skip NAME ...] [--short | --quick] [--json]
                                      [--out-json PATH] [--write-docs] [--docs PATH] [--note TEXT]
                                      [--from-json PATH] [--mine-repo DIR]

The standard setting takes about 12 minutes on a quiet 2-core machine (`make bench` runs it with --write-docs; under
the load of other work it took 25-50); --short is a real measurement at smaller sizes; --quick runs every script's
own --quick, a check that they all run, not a measurement. --write-docs rewrites only the block between the
bench-table markers at the top of --docs (docs/benchmarks.md); --from-json renders the table from kept raw results
without running anything (after an extractor changed, say; the file's figures are rewritten with it). Timings are
reported, never asserted.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import shlex
import shutil
import signal
import ssl
import stat
import subprocess
import sys
import tempfile
import textwrap
import time
import urllib.request
from dataclasses import asdict, dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import Callable

BENCH = Path(__file__).resolve().parent
ROOT = BENCH.parent
RESULTS = BENCH / "results"
DOCS = ROOT / "docs" / "benchmarks.md"
BEGIN, END = "<!-- bench-table:begin -->", "<!-- bench-table:end -->"
# Processes the measurements start themselves; never run on their own.
HELPERS = ("step_server", "step_mini_driver", "kube_standin", "trivial_task")
CA_BUNDLE = Path("/etc/ssl/certs/ca-certificates.crt")
CACHE = Path(os.environ.get("XDG_CACHE_HOME", Path.home() / ".cache")) / "leafcost-bench"
MINE_REPO_CANDIDATES = (CACHE / "pallets-click", Path("/work/.mirror/pallets+click/repo"))
MINE_BASE_IMAGE = "docker.io/library/python:3.11-slim-bookworm"


@dataclass
class Figure:
    """One row of the table: what was measured, leafcost's value, the other side's (a baseline, another harness or
    backend), leafcost ÷ other, the goal and whether it is met (None: no goal)."""
    metric: str
    leafcost: str
    other: str = "–"
    ratio: str = "–"
    goal: str = "–"
    met: bool | None = None


@dataclass
class Context:
    """What a script's arguments and its needs depend on: the setting, the run's scratch folder, the options."""
    setting: str  # "standard", "short" or "quick"
    scratch: Path
    mine_repo: Path | None
    ran_ok: set[str] = field(default_factory=set)
    notes: dict[str, str] = field(default_factory=dict)

    @property
    def ledger(self) -> Path:
        return self.scratch / "ledger.duckdb"


@dataclass(frozen=True)
class Script:
    """A measurement: its arguments at each setting (besides --json; --quick is the quick setting's), and why it
    cannot run here (None when it can)."""
    name: str
    standard: Callable[[Context], list[str]]
    short: Callable[[Context], list[str]]
    needs: Callable[[Context], str | None] = lambda ctx: None
    timeout_sec: float = 1800.0


# --------------------------------------------------------------------------------------------- what runs here


def _bwrap(ctx: Context) -> str | None:
    return None if shutil.which("bwrap") else "bubblewrap (`bwrap`) is not installed: the local sandbox needs it"


def _podman(ctx: Context) -> str | None:
    return _bwrap(ctx) or (None if shutil.which("podman") else "Podman is not installed (the container backend)")


def _mine(ctx: Context) -> str | None:
    if reason := _podman(ctx):
        return reason
    if ctx.setting == "quick":
        return None  # a tiny local repository, no network
    if ctx.mine_repo is None:
        return ("no clone of pallets/click: give --mine-repo DIR (a clone or bare mirror) or set "
                "LEAFCOST_BENCH_MINE_REPO")
    if subprocess.run(["podman", "image", "exists", MINE_BASE_IMAGE]).returncode != 0:
        return f"no {MINE_BASE_IMAGE} image (tests/container_images.py ensure_mining_base_image builds its stand-in)"
    return _pypi()


def _pypi() -> str | None:
    """Why PyPI cannot be reached from here, or None."""
    context = ssl.create_default_context(cafile=str(CA_BUNDLE) if CA_BUNDLE.exists() else None)
    try:
        urllib.request.urlopen("https://pypi.org/simple/pip/", timeout=10, context=context).close()
    except OSError as error:
        return f"PyPI is unreachable ({error})"
    return None


def _mini_installed() -> bool:
    return any(CACHE.glob("mini-swe-agent-*/.installed"))


def _step_path_arguments(reps: int, episodes: int, loads: str) -> Callable[[Context], list[str]]:
    def arguments(ctx: Context) -> list[str]:
        extra = []
        if not _mini_installed() and (reason := _pypi()):
            ctx.notes["step_path"] = f"mini-swe-agent left out: it installs from PyPI on first use, and {reason}"
            extra = ["--skip-mini"]
        return ["--reps", str(reps), "--episodes", str(episodes), "--workers", "1", "8",
                "--outside-load", *loads.split(), *extra]
    return arguments


def _with_ledger(*rest: str) -> Callable[[Context], list[str]]:
    """The ledger synthetic_ledger kept in this run, when it ran; else the script builds its own."""
    return lambda ctx: [*(["--db", str(ctx.ledger)] if "synthetic_ledger" in ctx.ran_ok else []), *rest]


def _mine_arguments(limit: int) -> Callable[[Context], list[str]]:
    def arguments(ctx: Context) -> list[str]:
        hint = ctx.scratch / "hint311.yaml"
        hint.write_text('python: "3.11"\n')  # the only Python base image the tests' stand-ins provide
        return [f"{ctx.mine_repo}=pallets/click", "--out", str(ctx.scratch / "mined"), "--since", "2023-01-01",
                "--limit", str(limit), "--env-hint", str(hint),
                *(["--ca-bundle", str(CA_BUNDLE)] if CA_BUNDLE.exists() else [])]
    return arguments


def _fixed(*arguments: str) -> Callable[[Context], list[str]]:
    return lambda ctx: list(arguments)


# startup's every measurement: its default leaves out the router arm priced from litellm's map (the quick test's rows).
STARTUP_ALL = ("--what", "help", "run-router", "run-sglang", "run-router-map")
# In the order they run: the sandboxes' and harnesses' timings first, the simulations (pure CPU) after them.
SCRIPTS = (
    Script("sandbox_overhead", _fixed("--rounds", "100", "--start-rounds", "5"),
           _fixed("--rounds", "40", "--start-rounds", "3"), _bwrap),
    Script("episode_overhead", _fixed("--episodes", "30"), _fixed("--episodes", "15"), _bwrap),
    Script("startup", _fixed("--reps", "7", *STARTUP_ALL), _fixed("--reps", "3", *STARTUP_ALL), _bwrap),
    Script("container_tools", _fixed("--rounds", "50", "--start-rounds", "10"),
           _fixed("--rounds", "20", "--start-rounds", "4"), _podman),
    Script("container_api", _fixed("--rounds", "60", "--start-rounds", "12"),
           _fixed("--rounds", "20", "--start-rounds", "4"), _podman),
    Script("harness_throughput", _fixed("--episodes", "150", "--steps", "20"),
           _fixed("--episodes", "60", "--steps", "20"), _bwrap),
    Script("step_path", _step_path_arguments(3, 20, "0 1"), _step_path_arguments(1, 12, "0"), _bwrap),
    Script("kube_scale", _fixed("--episodes", "10", "50", "150"), _fixed("--episodes", "10", "50", "--rounds", "2")),
    Script("synthetic_ledger", lambda ctx: ["--episodes", "100000", "--calls-per-episode", "100", "--out",
                                            str(ctx.ledger)],
           lambda ctx: ["--episodes", "30000", "--calls-per-episode", "100", "--out", str(ctx.ledger)]),
    Script("summary_speed", _with_ledger("--repeat", "5"), _with_ledger("--repeat", "3")),
    Script("api_latency", _with_ledger("--requests", "200", "--seconds", "10", "--clients", "4"),
           _with_ledger("--requests", "100", "--seconds", "5", "--clients", "4")),
    Script("ci_coverage", _fixed("--runs", "10000"), _fixed("--runs", "2000")),
    Script("claim_simulation", _fixed("--runs", "1000", "--jobs", "2"), _fixed("--runs", "500", "--jobs", "2")),
    Script("decide_simulation", _fixed("--runs", "200", "--jobs", "2"), _fixed("--runs", "100", "--jobs", "2")),
    Script("mine_real_repos", _mine_arguments(4), _mine_arguments(2), _mine, timeout_sec=1500.0),
)


# --------------------------------------------------------------------------------------------- headline figures
# One small function per script: its JSON in, its rows out. A key a script drops shows as "headline not read" in the
# table; keys it adds are ignored until a function here reads them.


def _sandbox_overhead(d: dict) -> list[Figure]:
    by = {t["label"]: t["p50_ms"] for t in d["round_trip"]}
    tool = next(v for k, v in by.items() if k.startswith("sandbox Bash tool"))
    login = next(v for k, v in by.items() if k.startswith("host") and "bash -lc" in k)
    plain = next(v for k, v in by.items() if k.startswith("host") and "bash -c" in k)
    return [Figure("Bash tool `true` round trip p50: sandbox vs host `bash -lc true`", _ms(tool), _ms(login),
                   _x(d["ratio_p50"]), f"≤ {d['goal_ratio']:g}×", d["goal_met"]),
            Figure("the same vs host `bash -c true` (no profile)", _ms(tool), _ms(plain), _x(d["ratio_p50_no_login"])),
            Figure(f"sandbox start p50, cached environment, built-in tasks: {len(d['tasks'])}",
                   _ms(d["start_p50_ms"]))]


def _episode_overhead(d: dict) -> list[Figure]:
    mine, *others = d["checkouts"]
    rows = []
    for key, label, goal in (("cpu", "CPU (host + sandbox)", 50.0), ("wall", "wall", 250.0)):
        value = mine["total"][key] * 1e3
        low, high = (x * 1e3 for x in mine["range"][key])
        text = f"{value:.1f} ms [{low:.1f}–{high:.1f}]"
        if key == "cpu":
            text += f" ({mine['total']['host'] * 1e3:.1f} + {mine['total']['sandbox'] * 1e3:.1f})"
        other = others[0]["total"][key] * 1e3 if others else None
        rows.append(Figure(f"zero-step episode {label}, median of {mine['episodes']} [range]", text,
                           "–" if other is None else f"{other:.1f} ms ({others[0]['commit']})",
                           "–" if other is None else _x(value / other), f"≤ {goal:g} ms", value <= goal))
    return rows


def _startup(d: dict) -> list[Figure]:
    rows = d["summary"]["rows"]
    first = rows[0]["src"] if rows else None
    figures = []
    for row in rows:
        if row["src"] != first and "vs_first" not in row:
            continue
        key = "wall_sec" if row["what"] == "help" else "first_request_sec"
        cpu = row["cpu_sec"] if row["what"] == "help" else row["first_request_cpu_sec"]
        what = "`leafcost --help`, whole process" if row["what"] == "help" else (
            f"`leafcost run`, {row['what'].removeprefix('run-')} arm: start to first request")
        ratio = _spread(row["vs_first"], "×", 2) if "vs_first" in row else "–"
        figures.append(Figure(f"{what} ({row['src']}), median [min–max] of {row['n']}",
                              f"{_spread(row[key], ' s', 3)}, CPU {cpu['median']:.3f} s", "–", ratio,
                              f"≤ {d['design']['goal_sec']:g} s", row["goal_met"]))
    return figures


def _synthetic_ledger(d: dict) -> list[Figure]:
    return [Figure(f"model_calls bulk-loaded into DuckDB ({d['model_calls']:,} calls)",
                   f"{d['calls_per_sec']:,} calls/s", goal="≥ 200,000 calls/s", met=d["calls_per_sec"] >= 200_000)]


def _summary_speed(d: dict) -> list[Figure]:
    return [Figure(f"full per-arm summary, {d['episodes']:,} episodes, {d['model_calls']:,} calls: p50 (max)",
                   f"{d['summarize_p50_sec']:.2f} s ({d['summarize_max_sec']:.2f})", goal=f"≤ {d['goal_sec']:g} s",
                   met=d["summarize_p50_sec"] <= d["goal_sec"])]


def _api_latency(d: dict) -> list[Figure]:
    one, many, goal = d["sequential"], d["concurrent"], d["goal"]
    return [Figure(f"`GET /runs/{{id}}/summary` on {d['episodes']:,} episodes, one client: p50 (p99)",
                   f"{one['p50_ms']:.2f} ms ({one['p99_ms']:.2f}), {one['errors']} errors",
                   goal=f"≤ {goal['p50_ms']:g} ms",
                   met=one["p50_ms"] <= goal["p50_ms"] and one["errors"] == 0),
            Figure(f"the same, {many['clients']} clients for {many['seconds']:g} s",
                   f"{many['requests_per_sec']:,.0f} requests/s, {many['errors']} errors",
                   goal=f"≥ {goal['requests_per_sec']:g} requests/s",
                   met=many["requests_per_sec"] >= goal["requests_per_sec"] and many["errors"] == 0)]


def _ci_coverage(d: dict) -> list[Figure]:
    results = d["results"]
    now = [c["now"] for r in results for c in r["coverage"].values()]
    before = [c["before"] for r in results for c in r["coverage"].values()]
    return [Figure(f"95 % intervals' coverage, {len(results)} designs × {len(results[0]['coverage'])} figures × "
                   f"{results[0]['runs']:,} runs: lowest–highest",
                   f"{_pct(min(now))}–{_pct(max(now))}",
                   f"percentile interval {_pct(min(before))}–{_pct(max(before))}",
                   goal="93–97 %", met=all(0.93 <= c <= 0.97 for c in now))]


def _claim_simulation(d: dict) -> list[Figure]:
    once, early = d["checks"]["once"], d["checks"]["early stop"]
    at_claim = next(r for r in d["rows"] if abs(r["shift"]) < 1e-9)["procedures"]
    alpha = d["alpha"]
    return [Figure(f"claim test's false alarm at the claimed rate, {d['runs']:,} runs: once (95 % upper); early stop",
                   f"{_pct(once['false_alarm'], 1)} ({_pct(once['false_alarm_upper95'], 1)}); "
                   f"{_pct(early['false_alarm'], 1)}", goal=f"≤ {_pct(alpha, 0)}",
                   met=once["false_alarm_within_alpha"] and early["false_alarm_within_alpha"]),
            Figure("its power: \"below\" at −10 points; \"consistent\" at +10 points (once)",
                   f"{_pct(once['power_below_at_minus_10'], 1)}; {_pct(once['power_consistent_at_plus_10'], 1)}"),
            Figure("tasks used at the claimed rate: early stop vs once", f"{at_claim['early stop']['mean_tasks']:.0f}",
                   f"{at_claim['once']['mean_tasks']:.0f}",
                   _x(at_claim["early stop"]["mean_tasks"] / at_claim["once"]["mean_tasks"]))]


def _decide_simulation(d: dict) -> list[Figure]:
    g, saved = d["goals"], d["mean_savings"]
    wrong, stop = g["largest_wrong"], g["smallest_coverage_at_stop"]
    off = saved.get("off_boundary", {}).get("vs_buyer")
    return [Figure(f"deciding early, {len(d['designs'])} designs × {d['runs']} runs: largest wrong-decision rate",
                   f"{_pct(wrong[0], 1)} ({wrong[1]})", goal="≤ 5 %", met=wrong[0] <= 0.05),
            # The smallest of many designs' coverages, each over d["runs"] runs: judged with its Monte Carlo error.
            Figure("smallest interval coverage at the stop (± its Monte Carlo standard error)",
                   f"{_pct(stop[0], 1)} ± {_pct(_binomial_se(stop[0], d['runs']), 1)} ({stop[1]})",
                   goal="≥ 95 % within 2 standard errors", met=stop[0] + 2 * _binomial_se(stop[0], d["runs"]) >= 0.95),
            Figure("mean episodes saved vs the buyer's fixed design: all designs (off a boundary)",
                   _pct(saved["all"]["vs_buyer"], 0) + ("" if off is None else f" ({_pct(off, 0)})"), goal="≥ 40 %",
                   met=saved["all"]["vs_buyer"] >= 0.40)]


def _binomial_se(share: float, runs: int) -> float:
    return (share * (1 - share) / runs) ** 0.5


def _harness_throughput(d: dict) -> list[Figure]:
    needs = 150 / 5.0  # steps/s of a 150-worker Leaf run at 5 s per model call
    return [Figure(f"steps/s while stepping, {d['episodes']} concurrent episodes of {d['steps_per_episode']} steps "
                   f"(`{d['tool']}`); other: a 150-worker Leaf run at 5 s per call",
                   f"{d['steps_per_sec_stepping']:.1f}",
                   f"{needs:g}", _x(d["x_leaf_150_workers_at_5s"]), "≥ 200 steps/s",
                   d["steps_per_sec_stepping"] >= 200),
            Figure("steps/s over the whole run (sandbox starts, grading)", f"{d['steps_per_sec_whole_run']:.1f}"),
            Figure("CPU per step: harness + sandboxes",
                   f"{d['harness_cpu_ms_per_step']:.2f} + {d['sandbox_cpu_ms_per_step']:.2f} ms")]


def _container_tools(d: dict) -> list[Figure]:
    t = {k: v["p50_ms"] for k, v in d["timings"].items()}
    stream = _find(t, "exec -i stream")
    per_call = _find(t, "per call")
    local = _find(t, "local: Bash")
    container_open, local_open = _find(t, "podman: open"), _find(t, "local: open")
    return [Figure("container Bash tool p50 (CLI): one `exec -i` stream vs one `podman exec` per call", _ms(stream),
                   _ms(per_call), _x(stream / per_call)),
            Figure("the same stream vs bubblewrap's Bash tool", _ms(stream), _ms(local), _x(stream / local)),
            Figure("open + close p50: container (CLI) vs bubblewrap", _ms(container_open), _ms(local_open),
                   _x(container_open / local_open))] + _container_tools_api(d.get("api"), local, local_open)


def _container_tools_api(api: dict | None, local: float, local_open: float) -> list[Figure]:
    """The same rounds' API path (the backend's default), when the engine's socket was there."""
    if not api:
        return []
    t = {k: v["p50_ms"] for k, v in api["timings"].items()}
    stream, per_call = _find(t, "API exec stream"), _find(t, "per call")
    bare, bare_local = _find(t, "podman API: bash -c true"), _find(t, "local: bash -c true")
    api_open = _find(t, "API: open + close")
    return [Figure("container Bash tool p50 (API): the runner's one exec stream vs one API exec per call",
                   _ms(stream), _ms(per_call), _x(stream / per_call)),
            Figure("the same stream vs bubblewrap's Bash tool (each side's own login profile)", _ms(stream),
                   _ms(local), _x(stream / local)),
            Figure("`bash -c true` through each runner (no login profile): API vs bubblewrap", _ms(bare),
                   _ms(bare_local), _x(bare / bare_local)),
            Figure("open + close p50: container (API) vs bubblewrap", _ms(api_open), _ms(local_open),
                   _x(api_open / local_open))]


def _container_api(d: dict) -> list[Figure]:
    t = {k: v["p50_ms"] for k, v in d["timings"].items()}
    step, step_cli, local = _find(t, "step: API"), _find(t, "step: CLI"), _find(t, "step: local")
    open_api, open_cli = _find(t, "episode api: open"), _find(t, "episode cli: open")
    exec_api, exec_cli = _find(t, "exec per call: API"), _find(t, "exec per call: one")
    fixed_api, fixed_cli = d["episode fixed cost p50 ms, api"], d["episode fixed cost p50 ms, cli"]
    fixed_local = d["episode fixed cost p50 ms, local"]
    figures = [Figure("container step p50 (Bash `true`, each side's own login profile) over the API's exec stream vs "
                      "bubblewrap", _ms(step), _ms(local), _x(step / local), "≤ 1.5×", step / local <= 1.5)]
    if any("bubblewrap's login profile" in k for k in t):  # like for like: the same minimal profile on both sides
        alike = _find(t, "step: API runner stream, bubblewrap's login profile")
        bare, bare_local = _find(t, "step: API runner stream, bash -c"), _find(t, "step: local bubblewrap, bash -c")
        figures += [Figure("the same with bubblewrap's login profile in the container too", _ms(alike), _ms(local),
                           _x(alike / local), "≤ 1.5×", alike / local <= 1.5),
                    Figure("`bash -c true` through each runner (no login profile): API vs bubblewrap", _ms(bare),
                           _ms(bare_local), _x(bare / bare_local))]
    return figures + [
            Figure("the same over the CLI's `podman exec -i` stream vs bubblewrap", _ms(step_cli), _ms(local),
                   _x(step_cli / local)),
            Figure("sandbox start p50: API vs command line", _ms(open_api), _ms(open_cli), _x(open_api / open_cli),
                   "≤ 500 ms", open_api <= 500),
            Figure("episode's fixed cost p50 (open + runner start + close): API vs command line", _ms(fixed_api),
                   _ms(fixed_cli), _x(fixed_api / fixed_cli), "≤ 1000 ms", fixed_api <= 1000),
            Figure("the same, API vs bubblewrap", _ms(fixed_api), _ms(fixed_local), _x(fixed_api / fixed_local)),
            Figure("one harness exec p50: API vs `podman exec`", _ms(exec_api), _ms(exec_cli), _x(exec_api / exec_cli))]


def _step_path(d: dict) -> list[Figure]:
    """leafcost's arms vs mini-swe-agent in the same repetitions, per workers × outside load: steps/s in the stepping
    window and over the whole run of the long episodes (issue 26, goal 3, at 8 workers), then per marginal step
    ((long run − short run) ÷ the extra calls) with its CPU."""
    long_steps, goals = d["design"].get("long_steps"), d["design"].get("goals", {})
    figures = []
    windows = [w for w in d["summary"].get("windows", []) if w["steps"] == long_steps]
    mini_windows = {(w["workers"], w["outside_load"]): w for w in windows if w["harness"] == "mini"}
    for w in windows:
        if w["harness"] == "mini":
            continue
        theirs, vs = mini_windows.get((w["workers"], w["outside_load"])), w.get("vs_mini")
        at_goal = w["workers"] == goals.get("workers")
        for key, label, goal in (("stepping_steps_per_sec", "in the stepping window", goals.get("stepping")),
                                 ("whole_run_steps_per_sec", "over the whole run", goals.get("whole_run"))):
            figures.append(Figure(
                f"steps/s {label}, {w['harness']} arm, {_workers(w['workers'])}, {_load(w)}, vs mini-swe-agent",
                _spread(w[key], "", 1), _num(theirs[key]["median"], 1) if theirs else "– (not run)",
                _spread(vs[key], "×", 2) if vs else "–", f"≥ {goal:g}×" if at_goal and goal else "–",
                _at_least(vs[key]["median"] if vs else None, goal) if at_goal and goal else None))
    rows = d["summary"]["rows"]
    mini = {(row["workers"], row.get("outside_load", 0)): row for row in rows if row["harness"] == "mini"}
    for row in rows:
        if row["harness"] == "mini":
            continue
        w, vs, theirs = row["workers"], row.get("vs_mini"), mini.get((row["workers"], row.get("outside_load", 0)))
        figures.append(Figure(
            f"steps/s per marginal step, {row['harness']} arm, {_workers(w)}, {_load(row)}, vs mini-swe-agent "
            f"{d['design'].get('mini_swe_agent', '')}", _spread(row["steps_per_sec"], "", 1),
            _num(theirs["steps_per_sec"]["median"], 1) if theirs else "– (not run)",
            _spread(vs["steps_per_sec"], "×", 2) if vs else "–"))
        figures.append(Figure(
            f"CPU ms per marginal step (host + sandbox), {row['harness']}, {_workers(w)}, {_load(row)}",
            f"{_spread(row['cpu_ms'], '', 2)} ({_num(row['host_cpu_ms']['median'])} + "
            f"{_num(row['sandbox_cpu_ms']['median'])})", _num(theirs["cpu_ms"]["median"]) if theirs else "–",
            _spread(vs["cpu_ms"], "×", 2) if vs else "–", "≤ 5 ms", _at_most(row["cpu_ms"]["median"], 5)))
    return figures


def _load(row: dict) -> str:
    spun = row.get("outside_load", 0)
    return f"{spun} spinner{'s' if spun != 1 else ''} (outside load {row['outside_load_cores']['median']:.2f} cores)"


def _workers(n: int) -> str:
    return "1 worker" if n == 1 else f"{n} workers"


def _kube_scale(d: dict) -> list[Figure]:
    run = max(d["runs"], key=lambda r: r["episodes"])
    n, streams = run["episodes"], d["exec_streams"]
    stream, per_call = streams["stream"]["p50_ms"], streams["exec_per_call"]["p50_ms"]
    return [Figure(f"{n} concurrent episodes on the kubernetes backend (stand-in), {run['resolved']} resolved: "
                   "runner's peak RSS", f"{run['runner_max_rss_mib']:.0f} MiB", goal="< 1024 MiB",
                   met=run["runner_max_rss_mib"] < 1024),
            Figure("runner's cores with all N live (peak over 2 s)",
                   f"{_num(run['cores_with_n_live'])} ({_num(run['peak_cores'])})", goal="≤ 1 core",
                   met=_at_most(run["cores_with_n_live"], 1)),
            Figure(f"marginal CPU per concurrent episode ({d['runs'][0]['episodes']} → {n})",
                   f"{d['marginal']['cpu_sec_per_episode'] * 1e3:.0f} ms"),
            Figure("Bash `true` p50: the pod's tool-runner stream vs one exec per call", _ms(stream), _ms(per_call),
                   _x(stream / per_call))]


def _mine_real_repos(d: dict) -> list[Figure]:
    figures = []
    for r in d["repositories"]:
        took = r.get("candidate_seconds_excluding_builds") or {}
        figures.append(Figure(
            f"`leafcost mine` {r['repository']} (since {d['since']}, limit {d['limit']}): kept, validated of "
            f"candidates", f"{r['kept']} kept, {r['validated']} validated of {r['candidates_looked_at']}"
            + (f"; stopped: {r['error']}" if r.get("error") else ""),
            f"{r['kept_per_100_commits']} kept per 100 commits; {took.get('median')} s per candidate"))
    return figures


HEADLINES: dict[str, Callable[[dict], list[Figure]]] = {
    "sandbox_overhead": _sandbox_overhead, "episode_overhead": _episode_overhead, "startup": _startup,
    "container_tools": _container_tools, "container_api": _container_api, "harness_throughput": _harness_throughput,
    "step_path": _step_path, "kube_scale": _kube_scale, "synthetic_ledger": _synthetic_ledger,
    "summary_speed": _summary_speed, "api_latency": _api_latency, "ci_coverage": _ci_coverage,
    "claim_simulation": _claim_simulation, "decide_simulation": _decide_simulation,
    "mine_real_repos": _mine_real_repos,
}


def headline(name: str, document: dict) -> list[Figure]:
    """A script's rows; a row saying why when its JSON lacks what the function reads."""
    try:
        return HEADLINES[name](document)
    except (KeyError, IndexError, TypeError, ValueError, ZeroDivisionError, StopIteration) as error:
        return [Figure("headline not read", f"{type(error).__name__}: {error}")]


def _find(timings: dict, part: str) -> float:
    return next(v for k, v in timings.items() if part in k)


def _ms(value: float) -> str:
    return f"{value:.0f} ms" if value >= 100 else f"{value:.1f} ms" if value >= 10 else f"{value:.2f} ms"


def _pct(value: float, digits: int = 2) -> str:
    return f"{100 * value:.{digits}f} %"


def _num(value: float | None, digits: int = 2) -> str:
    return "–" if value is None else f"{value:.{digits}f}"


def _at_least(value: float | None, goal: float) -> bool | None:
    """Whether a figure meets its goal; None when there is no figure (e.g. a median over no valid repetition)."""
    return None if value is None else value >= goal


def _at_most(value: float | None, goal: float) -> bool | None:
    return None if value is None else value <= goal


def _x(value: float) -> str:
    return f"{value:.2f}×" if value < 10 else f"{value:.1f}×"


def _spread(s: dict, unit: str, digits: int) -> str:
    if s.get("median") is None:
        return "–"
    return f"{s['median']:.{digits}f}{unit} [{s['min']:.{digits}f}–{s['max']:.{digits}f}]"


# --------------------------------------------------------------------------------------------- running


def run(names: list[str], ctx: Context, progress=lambda text: None) -> dict:
    started = datetime.now(timezone.utc)
    results = []
    for i, script in enumerate(s for s in SCRIPTS if s.name in names):
        results.append(run_one(script, ctx, f"[{i + 1}/{len(names)}]", progress))
    finished = datetime.now(timezone.utc)
    return {"setting": ctx.setting, "quick": ctx.setting == "quick", "started": _utc(started),
            "finished": _utc(finished), "wall_sec": round((finished - started).total_seconds(), 1),
            "machine": machine(), "scripts": results}


def run_one(script: Script, ctx: Context, counter: str, progress) -> dict:
    record = {"name": script.name, "status": "not run", "reason": None, "command": None, "wall_sec": None,
              "load_before": None, "load_after": None, "figures": []}
    if reason := script.needs(ctx):
        progress(f"{counter} {script.name}: not run: {reason}")
        return {**record, "reason": reason, "figures": [asdict(Figure(f"not run: {reason}", "–"))]}
    arguments = ["--quick"] if ctx.setting == "quick" else getattr(script, ctx.setting)(ctx)
    argv = [sys.executable, str(BENCH / f"{script.name}.py"), *arguments, "--json"]
    record["command"] = " ".join(shlex.quote(_shown(a)) for a in argv)
    progress(f"{counter} {script.name}: {record['command']}")
    record["load_before"] = _loadavg()
    start = time.monotonic()
    code, stdout, stderr = _spawn(argv, script.timeout_sec)
    record.update(wall_sec=round(time.monotonic() - start, 1), load_after=_loadavg(), exit_code=code,
                  stderr_tail=stderr[-2000:], note=ctx.notes.get(script.name))
    try:
        output = json.loads(stdout) if code == 0 else None
    except json.JSONDecodeError as error:
        output, record["reason"] = None, f"its output is not JSON ({error})"
    if output is None:
        last = (stderr.strip().splitlines() or ["no stderr"])[-1]
        record.update(status="failed", reason=record["reason"] or (
            f"timed out after {script.timeout_sec:.0f} s" if code is None else f"exit {code}: {last}"))
        record["figures"] = [asdict(Figure(f"failed: {record['reason']}", "–"))]
    else:
        ctx.ran_ok.add(script.name)
        record.update(status="ok", output=output, figures=[asdict(f) for f in headline(script.name, output)])
    progress(f"{counter} {script.name}: {record['status']} in {record['wall_sec']} s, load average "
             f"{' '.join(record['load_before'][:3])} → {' '.join(record['load_after'][:3])}"
             + (f" ({record['reason']})" if record["reason"] else ""))
    return record


def _spawn(argv: list[str], timeout: float) -> tuple[int | None, str, str]:
    """The script as its own process group (killed whole on timeout): exit code (None on timeout), stdout, stderr."""
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")]))}
    process = subprocess.Popen(argv, cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                               start_new_session=True)
    try:
        stdout, stderr = process.communicate(timeout=timeout)
        return process.returncode, stdout, stderr
    except subprocess.TimeoutExpired:
        os.killpg(process.pid, signal.SIGTERM)
        try:
            stdout, stderr = process.communicate(timeout=15)
        except subprocess.TimeoutExpired:
            os.killpg(process.pid, signal.SIGKILL)
            stdout, stderr = process.communicate()
        return None, stdout, stderr


def _shown(argument: str) -> str:
    """An argument as the command is written in the docs: the venv's python and bench/ relative to the root."""
    if argument == sys.executable and Path(argument).is_relative_to(ROOT):
        return str(Path(argument).relative_to(ROOT))
    if argument.startswith(str(BENCH) + "/"):
        return str(Path(argument).relative_to(ROOT))
    return argument


def machine() -> dict:
    """The facts a reader needs to weigh the figures: cores, CPU, kernel, Python, bubblewrap, Podman, commit."""
    model = next((line.split(":", 1)[1].strip() for line in _read("/proc/cpuinfo").splitlines()
                  if line.startswith("model name")), platform.processor() or "unknown")
    commit = _output(["git", "-C", str(ROOT), "rev-parse", "--short", "HEAD"])
    dirty = _output(["git", "-C", str(ROOT), "status", "--porcelain", "--untracked-files=no"])
    return {"nproc": os.cpu_count(), "cpu": model, "kernel": platform.release(),
            "python": platform.python_version(), "bubblewrap": _output(["bwrap", "--version"]),
            "podman": _output(["podman", "--version"]), "commit": commit,
            "uncommitted_changes": bool(dirty)}


def _output(argv: list[str]) -> str | None:
    try:
        return subprocess.run(argv, capture_output=True, text=True, timeout=30).stdout.strip() or None
    except (OSError, subprocess.TimeoutExpired):
        return None


def _read(path: str) -> str:
    try:
        return Path(path).read_text()
    except OSError:
        return ""


def _loadavg() -> list[str]:
    return _read("/proc/loadavg").split()[:3]


def _utc(moment: datetime) -> str:
    return moment.strftime("%Y-%m-%d %H:%M:%S UTC")


# --------------------------------------------------------------------------------------------- the table


def render(document: dict, note: str | None = None) -> str:
    """The block docs/benchmarks.md opens with, markers included."""
    m, scripts = document["machine"], document["scripts"]
    loads = [float(s[k][0]) for s in scripts for k in ("load_before", "load_after") if s.get(k)]
    start, end = document["started"], document["finished"]
    when = f"{start[:16]}–{end[11:16]} UTC" if start[:10] == end[:10] else f"{start} – {end}"
    lines = [BEGIN, "## All benchmarks in one table", "",
             _prose("Generated by `make bench` (`.venv/bin/python bench/run_all.py --write-docs`), which runs every "
             "measurement in `bench/` at its standard setting, each script with `--json`, and rewrites this block and "
             "nothing else; the raw JSON of every script is in `bench/results/latest.json`. Ratios are leafcost ÷ the "
             "other figure of the same row, measured side by side in the same script's run; `[a–b]` is the range over "
             "a script's repetitions. The sections after this block give each measurement's method and history."), ""]
    if document["setting"] == "quick":
        lines += ["**`--quick`: every script's quick mode, a check that they run; not a measurement.**", ""]
    lines += [_prose(f"Measured {when} ({document['wall_sec'] / 60:.0f} min, the `{document['setting']}` setting) at "
              f"commit {m['commit']}{' with uncommitted changes' if m['uncommitted_changes'] else ''}: "
              f"{m['nproc']} cores ({m['cpu']}), Linux {m['kernel']}, Python {m['python']}, {m['bubblewrap']}, "
              f"{m['podman']}. Load average (1 min) {min(loads, default=0):.2f}–{max(loads, default=0):.2f} "
              "before and after the scripts (each script's below)." + (f" {note}" if note else "")), "",
              "| bench | figure | leafcost | other | leafcost ÷ other | goal | met? |",
              "|---|---|---|---|---|---|---|"]
    for script in scripts:
        for i, f in enumerate(script["figures"]):
            met = {True: "**met**", False: "**not met**", None: "–"}[f["met"]]
            lines.append(f"| {script['name'] if i == 0 else ''} | {f['metric']} | {f['leafcost']} | {f['other']} | "
                         f"{f['ratio']} | {f['goal']} | {met} |")
    lines += ["", "Each script's command (from the repository root), wall time and load average (1, 5, 15 min) before "
              "→ after:", "", "| bench | command | wall | load average |", "|---|---|---|---|"]
    for s in scripts:
        if s["status"] == "not run":
            lines.append(f"| {s['name']} | not run: {s['reason']} | – | – |")
            continue
        load = f"{' '.join(s['load_before'])} → {' '.join(s['load_after'])}"
        status = "" if s["status"] == "ok" else f" ({s['status']})"
        extra = f" ({s['note']})" if s.get("note") else ""
        lines.append(f"| {s['name']}{status} | `{s['command']}`{extra} | {s['wall_sec']:.0f} s | {load} |")
    return "\n".join(lines + [END])


def _prose(text: str) -> str:
    return textwrap.fill(text, width=120, break_long_words=False, break_on_hyphens=False)


def write_docs(path: Path, block: str) -> None:
    """Replaces the block between the markers (or, without them, puts it before the first `## ` section)."""
    text = path.read_text()
    if text.count(BEGIN) != text.count(END) or text.count(BEGIN) > 1:
        raise SystemExit(f"{path}: expected one {BEGIN} … {END} block, found {text.count(BEGIN)} and "
                         f"{text.count(END)} markers; fix the file by hand")
    if BEGIN in text:
        head, rest = text.split(BEGIN, 1)
        text = head + block + rest.split(END, 1)[1]
    else:
        at = text.find("\n## ")
        at = len(text) if at < 0 else at + 1
        text = text[:at] + block + "\n\n" + text[at:]
    _atomic_write(path, text)


def _atomic_write(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    mode = stat.S_IMODE(path.stat().st_mode) if path.exists() else 0o644
    with tempfile.NamedTemporaryFile("w", dir=path.parent, prefix=f".{path.name}.", delete=False) as f:
        f.write(text)
    os.chmod(f.name, mode)
    os.replace(f.name, path)


# --------------------------------------------------------------------------------------------- main


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    names = [s.name for s in SCRIPTS]
    parser.add_argument("--only", nargs="+", choices=names, metavar="NAME", help="these scripts only")
    parser.add_argument("--skip", nargs="+", choices=names, metavar="NAME", default=[])
    setting = parser.add_mutually_exclusive_group()
    setting.add_argument("--short", action="store_true", help="real measurements at smaller sizes (~10-15 min)")
    setting.add_argument("--quick", action="store_true", help="every script's --quick: a check, not a measurement")
    parser.add_argument("--json", action="store_true", help="print the results as JSON (without the scripts' own)")
    parser.add_argument("--out-json", type=Path, help="raw results (default bench/results/latest.json; with "
                        "--quick latest-quick.json)")
    parser.add_argument("--write-docs", action="store_true", help="rewrite the table block of --docs")
    parser.add_argument("--docs", type=Path, default=DOCS)
    parser.add_argument("--note", help="a sentence for the block's header (e.g. what else loaded the machine)")
    parser.add_argument("--from-json", type=Path, help="render kept raw results instead of running")
    parser.add_argument("--mine-repo", type=Path, default=os.environ.get("LEAFCOST_BENCH_MINE_REPO"),
                        help="a clone or bare mirror of pallets/click for mine_real_repos")
    args = parser.parse_args()
    unknown = sorted({p.stem for p in BENCH.glob("*.py")} - set(names) - set(HELPERS) - {"run_all"})
    if unknown:
        print(f"run_all: no setting for {', '.join(unknown)} in SCRIPTS: not run", file=sys.stderr)
    progress = lambda text: print(f"run_all: {text}", file=sys.stderr, flush=True)  # noqa: E731
    if args.from_json:
        document = json.loads(args.from_json.read_text())
        for s in document["scripts"]:
            if s["status"] == "ok":
                s["figures"] = [asdict(f) for f in headline(s["name"], s["output"])]
        _atomic_write(args.from_json, json.dumps(document, indent=1) + "\n")  # its figures as rendered now
    else:
        chosen = [n for n in (args.only or names) if n not in args.skip]
        mine_repo = args.mine_repo or next((p for p in MINE_REPO_CANDIDATES if p.exists()), None)
        with tempfile.TemporaryDirectory(prefix="leafcost-run-all-") as scratch:
            ctx = Context("quick" if args.quick else "short" if args.short else "standard", Path(scratch), mine_repo)
            document = run(chosen, ctx, progress)
        document["note"] = args.note
        out = args.out_json or RESULTS / ("latest-quick.json" if args.quick else "latest.json")
        _atomic_write(out, json.dumps(document, indent=1) + "\n")
        progress(f"raw results in {out}")
    block = render(document, args.note or document.get("note"))
    if args.write_docs:
        write_docs(args.docs, block)
        progress(f"the table block of {args.docs} rewritten")
    if args.json:
        shown = {**document, "scripts": [{k: v for k, v in s.items() if k not in ("output", "stderr_tail")}
                                         for s in document["scripts"]]}
        print(json.dumps(shown, indent=2))
    else:
        print(block)
    return 1 if any(s["status"] == "failed" for s in document["scripts"]) else 0


if __name__ == "__main__":
    sys.exit(main())
