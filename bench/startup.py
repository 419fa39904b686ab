"""Start-up: `leafcost --help`, and `leafcost run SPEC` from process start to its first chat request, side by side.

Each repetition runs, as fresh processes through the venv's `leafcost` script, interleaved and in reversed order
every other repetition:
- `help`: `leafcost --help`, its wall time and CPU (os.wait4 of the whole process);
- `run-router` and `run-sglang`: `leafcost run spec.yaml` of one trivial task (bench/trivial_task.py, the local
  bubblewrap backend, a cached environment, a ledger the warm-up created) with one `router` arm (explicit prices)
  or one `sglang` arm against an instant OpenAI-compatible endpoint served by this process; `run-router-map` (not in
  the default set) a `router` arm priced from litellm's map (gpt-5-mini, no explicit prices). The endpoint notes when
  each run's first `/models` probe and first chat request arrive and, at that moment, the leafcost process's CPU
  (/proc/PID/stat), before it answers "Done." (one call ends the episode). "To first request" is from just before
  the process is spawned to the request's arrival; the run then finishes (grading included) and must exit 0.
The children write bytecode (PYTHONDONTWRITEBYTECODE is dropped), so the warm-up leaves every checkout compiled and
every measured start reads cached .pyc files, as a user's installed venv has them; the JSON says so (`bytecode`:
the parent's PYTHONDONTWRITEBYTECODE, and per checkout and for the venv's libraries how many .py files have an
up-to-date .pyc after the warm-up). With PYTHONDONTWRITEBYTECODE=1 and no cached .pyc, every start compiles
leafcost's modules from source: about 0.1 s more CPU, not measured here.

With `--src LABEL=DIR` (repeatable) every checkout runs with this venv (PYTHONPATH=DIR), so a before/after table
comes from one run, its ratios (÷ the first checkout) taken inside each repetition. Each measurement records the
machine's busy cores from /proc/stat and the outside load (busy cores minus this measurement's own process).

    .venv/bin/python bench/startup.py [--reps 7] [--what help run-router run-sglang] [--src LABEL=DIR ...]
                                      [--quick] [--json] [--cache-dir DIR]

Timings are reported, never asserted.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import re
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
BENCH = Path(__file__).resolve().parent
sys.path[:0] = [str(ROOT), str(BENCH)]

from step_server import answer  # noqa: E402
from trivial_task import make_suite  # noqa: E402

WHAT = ("help", "run-router", "run-sglang", "run-router-map")
DEFAULT_WHAT = ("help", "run-router", "run-sglang")
MAP_MODEL = "gpt-5-mini"  # priced from litellm's map
GOAL_SEC = 0.5
ARMS = {
    "run-router": {"name": "bench", "adapter": "router", "model": "bench-model", "max_retries": 0,
                   "prices": {"input": 0.15, "output": 0.6}, "api_key_env": "BENCH_ROUTER_KEY"},
    "run-sglang": {"name": "bench", "adapter": "sglang", "model": "bench-model", "max_retries": 0,
                   "gpu": {"type": "H200", "count": 1, "usd_per_hour": 3.5}, "metrics_interval_sec": 3600},
    "run-router-map": {"name": "bench", "adapter": "router", "model": MAP_MODEL, "max_retries": 0,
                       "api_key_env": "BENCH_ROUTER_KEY"},
}
TICKS = os.sysconf("SC_CLK_TCK")
_PATH = re.compile(r"^/r/([\w-]+)/v1(/.*)$")


# --------------------------------------------------------------------------------------------- the endpoint


class FirstRequests:
    """An instant OpenAI-compatible endpoint in a thread of this process. Under `/r/TAG/v1` it answers every chat
    request with one final answer and notes, per TAG, when the first `/models` and the first chat request came
    and the CPU the registered process had spent by then."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.pids: dict[str, int] = {}
        self.seen: dict[str, dict] = {}
        owner = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def do_GET(self) -> None:  # noqa: N802 - http.server's name
                tag, rest = owner.route(self.path)
                if rest == "/models":
                    owner.note(tag, "models")
                    return self.send({"object": "list", "data": [{"id": model, "object": "model"}
                                                                  for model in ("bench-model", MAP_MODEL)]})
                self.send({"error": {"message": "not found"}}, 404)

            def do_POST(self) -> None:  # noqa: N802
                body = self.rfile.read(int(self.headers.get("content-length") or 0))
                tag, rest = owner.route(self.path)
                if rest != "/chat/completions":
                    return self.send({"error": {"message": "not found"}}, 404)
                owner.note(tag, "chat")
                self.send(answer(json.loads(body), 1))

            def send(self, document: dict, status: int = 200) -> None:
                payload = json.dumps(document).encode()
                self.wfile.write((f"HTTP/1.1 {status} {'OK' if status == 200 else 'Not Found'}\r\nContent-Type: "
                                  f"application/json\r\nContent-Length: {len(payload)}\r\n\r\n").encode() + payload)

            def log_message(self, *args: object) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True

    def __enter__(self) -> FirstRequests:
        threading.Thread(target=self.server.serve_forever, daemon=True).start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.server.shutdown()
        self.server.server_close()

    def base_url(self, tag: str) -> str:
        return f"http://127.0.0.1:{self.server.server_address[1]}/r/{tag}/v1"

    def watch(self, tag: str, pid: int) -> None:
        with self.lock:
            self.pids[tag] = pid

    def route(self, path: str) -> tuple[str | None, str | None]:
        match = _PATH.match(path)
        return (match.group(1), match.group(2)) if match else (None, None)

    def note(self, tag: str | None, kind: str) -> None:
        now = time.monotonic()
        with self.lock:
            seen = self.seen.setdefault(tag, {})
            if kind not in seen:
                seen[kind] = now
                seen[f"{kind}_cpu"] = process_cpu(self.pids[tag]) if tag in self.pids else None

    def first(self, tag: str) -> dict:
        with self.lock:
            return dict(self.seen.get(tag, {}))


def process_cpu(pid: int) -> float | None:
    """User + system CPU seconds of process `pid` (all its threads) so far; None once it is gone."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return None
    return (int(fields[11]) + int(fields[12])) / TICKS


# --------------------------------------------------------------------------------------------- one measurement


def leafcost_command(*args: str) -> list[str]:
    return [str(Path(sys.executable).parent / "leafcost"), *args]


def measure_help(src: Path) -> dict:
    """`leafcost --help`: wall and CPU of the whole process."""
    figures = _measured(leafcost_command("--help"), env=_env(src), cwd=Path(tempfile.gettempdir()))
    figures.pop("started")
    return figures


def measure_run(what: str, src: Path, endpoint: FirstRequests, scratch: Path, env_cache: Path, tag: str,
                ledger: Path) -> dict:
    """`leafcost run` of one trivial task with the arm of `what`: process start to the first chat request (wall and
    the process's CPU by then), to the first `/models` probe, and the whole run. The ledger is `ledger`, one per
    checkout and arm, created by the warm-up (a fresh ledger's schema costs ~0.1 s more, once)."""
    run_dir = Path(tempfile.mkdtemp(prefix=f"{tag}-", dir=scratch))
    spec = {"name": "startup", "suite": str(make_suite(run_dir)), "seeds": 1, "workers": 1, "max_attempts": 1,
            "budgets": {"max_steps": 5, "time_budget_sec": 600},
            "arms": [{**ARMS[what], "base_url": endpoint.base_url(tag)}]}
    (run_dir / "spec.yaml").write_text(json.dumps(spec))  # JSON is YAML
    env = {**_env(src), "LEAFCOST_CACHE": str(env_cache), "BENCH_ROUTER_KEY": "bench-key"}
    command = leafcost_command("run", str(run_dir / "spec.yaml"), "--db", str(ledger), "--json")
    figures = _measured(command, env=env, cwd=run_dir, on_spawn=lambda pid: endpoint.watch(tag, pid))
    seen = endpoint.first(tag)
    if "chat" not in seen:
        raise RuntimeError(f"{what}: the run exited 0 without a chat request")
    started = figures.pop("started")
    return {**figures, "first_request_sec": seen["chat"] - started, "first_request_cpu_sec": seen["chat_cpu"],
            "models_probe_sec": seen["models"] - started if "models" in seen else None}


def _env(src: Path) -> dict:
    """This environment with `src` first on the path, and bytecode written: the warm-up caches every module's
    bytecode, as an installed package has it (with PYTHONDONTWRITEBYTECODE set, every start compiles leafcost's
    modules from source: about 0.1–0.3 s more)."""
    env = {**os.environ, "PYTHONPATH": str(src)}
    env.pop("PYTHONDONTWRITEBYTECODE", None)
    return env


def _measured(command: list[str], *, env: dict, cwd: Path, on_spawn=lambda pid: None) -> dict:
    """Runs `command` to its end: wall, the CPU of its reaped tree (os.wait4), and the machine's busy cores."""
    machine_before = _machine_jiffies()
    started = time.monotonic()
    process = subprocess.Popen(command, env=env, cwd=cwd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    on_spawn(process.pid)
    stderr = process.stderr.read()
    _, status, usage = os.wait4(process.pid, 0)  # reaped here, not by Popen.wait, which drops the rusage
    process.returncode = os.waitstatus_to_exitcode(status)
    wall = time.monotonic() - started
    machine_after = _machine_jiffies()
    if process.returncode != 0:
        tail = stderr.decode(errors="replace")[-2000:]
        raise RuntimeError(f"{' '.join(command)} exited {process.returncode}: {tail}")
    cpu = usage.ru_utime + usage.ru_stime
    busy = (machine_after[0] - machine_before[0]) / max(1, machine_after[1] - machine_before[1]) * os.cpu_count()
    return {"started": started, "wall_sec": wall, "cpu_sec": cpu, "machine_busy_cores": busy,
            "outside_load_cores": max(0.0, busy - cpu / wall), "loadavg_1min": _loadavg()[0]}


def _loadavg() -> list[float]:
    return [float(v) for v in Path("/proc/loadavg").read_text().split()[:3]]


def _machine_jiffies() -> tuple[int, int]:
    """(busy, total) jiffies of all CPUs since boot, from /proc/stat (busy: everything but idle and iowait)."""
    fields = [int(v) for v in Path("/proc/stat").read_text().splitlines()[0].split()[1:]]
    total = sum(fields[:8])
    return total - fields[3] - fields[4], total


# --------------------------------------------------------------------------------------------- bytecode

PACKAGES = ("compare", "adapters", "sandbox", "reports")
LIBRARIES = ("pydantic", "aiohttp", "duckdb", "typer", "rich", "yaml", "litellm")


def bytecode_census(sources: dict[str, Path]) -> dict:
    """How the measured starts load modules: whether the children may write bytecode, and per checkout (its
    packages) and for the venv's libraries the .py files that have an up-to-date .pyc in __pycache__."""
    import importlib.util

    libraries = {}
    for name in LIBRARIES:
        spec = importlib.util.find_spec(name)
        if spec is not None and spec.submodule_search_locations:
            libraries[name] = _pyc_counts([Path(p) for p in spec.submodule_search_locations])
    return {"children_write_bytecode": True,
            "parent_PYTHONDONTWRITEBYTECODE": os.environ.get("PYTHONDONTWRITEBYTECODE"),
            "measured": "with bytecode: PYTHONDONTWRITEBYTECODE dropped for the children and a warm-up run of every "
                        "measurement first, so the measured starts read cached .pyc files as an installed venv does",
            "checkouts": {label: _pyc_counts([src / p for p in PACKAGES]) for label, src in sources.items()},
            "libraries": libraries}


def _pyc_counts(roots: list[Path]) -> dict:
    """.py files, those with an up-to-date .pyc, those whose .pyc is out of date (a module never imported has none)."""
    files = [f for root in roots if root.is_dir() for f in root.rglob("*.py")]
    states = [_pyc_state(f) for f in files]
    return {"py_files": len(files), "with_current_pyc": states.count("current"), "stale_pyc": states.count("stale")}


def _pyc_state(source: Path) -> str:
    """"current" when the interpreter would use the .pyc of `source` (its header's source mtime and size match, or
    it is hash-based), "stale" when one is there but out of date, "none" when there is none."""
    import importlib.util

    try:
        header = Path(importlib.util.cache_from_source(str(source))).read_bytes()[:16]
        stat = source.stat()
    except OSError:
        return "none"
    if len(header) < 16:
        return "stale"
    if int.from_bytes(header[4:8], "little") != 0:  # hash-based: checked (or not) by the interpreter itself
        return "current"
    current = (int.from_bytes(header[8:12], "little") == int(stat.st_mtime) & 0xFFFFFFFF
               and int.from_bytes(header[12:16], "little") == stat.st_size & 0xFFFFFFFF)
    return "current" if current else "stale"


# --------------------------------------------------------------------------------------------- the design


def plan(sources: list[str], what: list[str], rep: int) -> list[tuple[str, str]]:
    """One repetition: every (measurement, checkout), checkouts side by side; reversed every other repetition."""
    order = [(w, label) for w in what for label in sources]
    return order if rep % 2 == 0 else order[::-1]


def headline(what: str) -> str:
    """The figure the goal is about: wall to the first chat request for a run, the whole process for --help."""
    return "wall_sec" if what == "help" else "first_request_sec"


def spread(values: list[float]) -> dict:
    values = [v for v in values if v is not None and v == v]
    if not values:
        return {"median": None, "min": None, "max": None}
    return {"median": statistics.median(values), "min": min(values), "max": max(values)}


FIGURES = ("wall_sec", "cpu_sec", "first_request_sec", "first_request_cpu_sec", "models_probe_sec",
           "outside_load_cores", "loadavg_1min")


def summarize(runs: list[dict], sources: list[str], what: list[str]) -> dict:
    """Per (measurement, checkout): median [min–max] of every figure over repetitions; with more than one checkout,
    the headline figure ÷ the first checkout's, inside each repetition."""
    by_key = {(r["rep"], r["what"], r["src"]): r for r in runs}
    rows = []
    for w in what:
        for label in sources:
            mine = [r for r in runs if r["what"] == w and r["src"] == label]
            row = {"what": w, "src": label, "n": len(mine), **{f: spread([r.get(f) for r in mine]) for f in FIGURES}}
            key = headline(w)
            row["goal_met"] = row[key]["median"] is not None and row[key]["median"] <= GOAL_SEC
            if label != sources[0]:
                row["vs_first"] = spread([r[key] / by_key[r["rep"], w, sources[0]][key] for r in mine
                                          if (r["rep"], w, sources[0]) in by_key])
            rows.append(row)
    return {"rows": rows}


# --------------------------------------------------------------------------------------------- main


def measure(*, reps: int, what: list[str], sources: dict[str, Path], cache_dir: Path,
            progress=lambda text: None) -> dict:
    cache_dir.mkdir(parents=True, exist_ok=True)
    runs = []
    utc_start = _utc_now()
    loadavg_at_start = Path("/proc/loadavg").read_text().split()[:3]
    with tempfile.TemporaryDirectory(prefix="leafcost-startup-") as tmp, FirstRequests() as endpoint:
        scratch, env_cache, count = Path(tmp), cache_dir / "leafcost-env", iter(range(1_000_000))

        def one(w: str, label: str) -> dict:
            if w == "help":
                return measure_help(sources[label])
            return measure_run(w, sources[label], endpoint, scratch, env_cache, f"{label}-{w}-{next(count)}",
                               scratch / f"{label}-{w}.duckdb")

        for w, label in plan(list(sources), what, 0):  # warm-up (environment build, .pyc, page cache), not reported
            one(w, label)
        bytecode = bytecode_census(sources)
        for rep in range(reps):
            for w, label in plan(list(sources), what, rep):
                figures = one(w, label)
                runs.append({"rep": rep, "what": w, "src": label, **figures})
                shown = figures.get("first_request_sec", figures["wall_sec"])
                progress(f"rep {rep + 1}/{reps} {w:<10} {label:<8} {shown:.3f} s (cpu {figures['cpu_sec']:.3f} s), "
                         f"busy {figures['machine_busy_cores']:.2f} cores")
    return {"design": {"reps": reps, "what": what, "sources": {k: str(v) for k, v in sources.items()},
                       "goal_sec": GOAL_SEC, "bytecode": bytecode},
            "machine": {"cpus": os.cpu_count(), "python": platform.python_version(),
                        "loadavg_at_start": loadavg_at_start,
                        "loadavg_at_end": Path("/proc/loadavg").read_text().split()[:3],
                        "utc_start": utc_start, "utc_end": _utc_now()},
            "summary": summarize(runs, list(sources), what), "runs": runs}


def _utc_now() -> str:
    return time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime())


def render(result: dict) -> str:
    design, machine = result["design"], result["machine"]
    bytecode = design["bytecode"]
    pyc = ", ".join(f"{label} {c['with_current_pyc']} of {c['py_files']}, {c['stale_pyc']} stale"
                    for label, c in bytecode["checkouts"].items())
    lines = [f"{machine['utc_start']} to {machine['utc_end']}; machine: {machine['cpus']} cores, Python "
             f"{machine['python']}, load average {machine['loadavg_at_start']} at start, {machine['loadavg_at_end']} "
             f"at end; {design['reps']} interleaved repetitions, medians [min–max] in seconds",
             f"{bytecode['measured']} (.py files with a current .pyc, the ones the commands import: {pyc})", "",
             "| measurement | checkout | to first request (help: whole) | CPU by then | whole process | CPU whole "
             "| ÷ first checkout | goal ≤ 0.5 s | outside load, cores |", "|---|---|---|---|---|---|---|---|---|"]
    for row in result["summary"]["rows"]:
        help_row = row["what"] == "help"
        lines.append(" | ".join([
            f"| {row['what']}", row["src"], _fmt(row[headline(row["what"])]),
            _fmt(row["cpu_sec"] if help_row else row["first_request_cpu_sec"]), _fmt(row["wall_sec"]),
            _fmt(row["cpu_sec"]), _fmt(row["vs_first"], 2) if "vs_first" in row else "–",
            "met" if row["goal_met"] else "not met", _fmt(row["outside_load_cores"], 2)]) + " |")
    return "\n".join(lines)


def _fmt(s: dict, digits: int = 3) -> str:
    if s["median"] is None:
        return "–"
    return f"{s['median']:.{digits}f} [{s['min']:.{digits}f}–{s['max']:.{digits}f}]"


def _source(text: str) -> tuple[str, Path]:
    label, _, directory = text.partition("=")
    if not directory or not Path(directory, "compare", "cli.py").is_file():
        raise argparse.ArgumentTypeError(f"{text}: expected LABEL=DIR, DIR a leafcost checkout")
    return label, Path(directory).resolve()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--reps", type=int, default=7)
    parser.add_argument("--what", nargs="+", choices=WHAT, default=list(DEFAULT_WHAT))
    parser.add_argument("--src", type=_source, action="append", metavar="LABEL=DIR",
                        help="a checkout to run with this venv (repeatable; default: this one, as 'head')")
    parser.add_argument("--quick", action="store_true", help="a fast check: 1 repetition")
    parser.add_argument("--cache-dir", type=Path,
                        default=Path(os.environ.get("XDG_CACHE_HOME", Path.home() / ".cache")) / "leafcost-bench")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    if args.quick:
        args.reps = 1
    sources = dict(args.src or [("head", ROOT)])
    result = measure(reps=args.reps, what=args.what, sources=sources, cache_dir=args.cache_dir,
                     progress=lambda text: print(text, file=sys.stderr, flush=True))
    result["quick"] = args.quick
    print(json.dumps(result, indent=2) if args.json else render(result))


if __name__ == "__main__":
    main()
