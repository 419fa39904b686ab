"""Harness throughput: how many Leaf steps per second the runner sustains, and its CPU per step.

150 concurrent episodes (one trivial task × 150 seeds, 150 workers) of 20 steps each run through the real runner,
ledger and bubblewrap sandboxes against the scripted server in `instant` mode (a separate process, so the model
costs nothing and the harness is what is measured). Each step is one model call plus one trivial tool call.

    .venv/bin/python bench/harness_throughput.py [--episodes 150] [--steps 20] [--tool Read|Bash] [--quick] [--json]

Printed: steps/s over the stepping phase (first to last model call) and over the whole run (sandbox starts and
grading included), harness CPU per step (this process and the children it reaped), the sandboxes' own CPU per
step (from each sandbox's cgroup, as the ledger records it in episodes.sandbox_cpu_seconds: getrusage never sees
CPU spent inside a sandbox), and
the ratio to what a 150-worker Leaf run needs at 5 s per model call (150 / 5 = 30 steps/s), with the machine's
load average before and after. --quick checks that the bench runs (4 episodes of 3 steps): not a measurement.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import platform
import resource
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(ROOT), str(ROOT / "tests"), str(ROOT / "bench")]  # tests/ holds the fake SGLang server

from support.sglang_fake import ScriptedServer  # noqa: E402
from trivial_task import make_suite  # noqa: E402

from compare.ledger import Ledger  # noqa: E402
from compare.runner import Runner  # noqa: E402
from compare.spec import parse_run_spec  # noqa: E402

LEAF_NEEDS = 150 / 5.0  # steps/s of a 150-worker Leaf run when each model call takes 5 s
QUICK_EPISODES, QUICK_STEPS = 4, 3


def measure(episodes: int, steps: int, tool: str) -> dict:
    arguments = {"command": "true"} if tool == "Bash" else {"file_path": "README.md"}
    script = {"instant": {"tool": tool, "arguments": arguments, "steps": steps}}
    with tempfile.TemporaryDirectory(prefix="leafcost-bench-") as tmp, \
            ScriptedServer(script, subprocess=True) as server:
        root = Path(tmp)
        os.environ["LEAFCOST_CACHE"] = str(root / "cache")
        spec = parse_run_spec({
            "name": "throughput", "suite": str(make_suite(root)), "seeds": episodes, "workers": episodes,
            "max_attempts": 1, "budgets": {"max_steps": steps + 5, "time_budget_sec": 3600},
            "arms": [{"name": "instant", "adapter": "sglang", "model": "frognano-4b", "base_url": server.base_url,
                      "max_retries": 0, "gpu": {"type": "H200", "usd_per_hour": 3.5}, "metrics_interval_sec": 60}]})
        db = root / "ledger.duckdb"
        ledger = Ledger.open(db)
        load_before = _load()
        before = _own_and_children_cpu()
        started = time.monotonic()
        summary = asyncio.run(Runner(spec, ledger, db_path=db).run())
        wall = time.monotonic() - started
        harness_cpu = _own_and_children_cpu() - before
        calls = ledger.query("select count(*) as n, epoch(max(started_at)) - epoch(min(started_at)) as span, "
                             "count(*) filter (where status <> 'ok') as failed from model_calls")[0]
        exits = ledger.query("select exit_reason, count(*) as n from episodes group by all")
        # What ran inside the sandboxes is in no rusage of ours (their processes are reaped inside bubblewrap's
        # namespace): each sandbox's cgroup counts it, and the runner records it per episode.
        sandbox_cpu = ledger.query("select coalesce(sum(sandbox_cpu_seconds), 0) as s from episodes")[0]["s"]
        ledger.close()
    stepping = calls["n"] / calls["span"] if calls["span"] else float("nan")
    return {"episodes": episodes, "steps_per_episode": steps + 1, "tool": tool, "model_calls": calls["n"],
            "failed_calls": calls["failed"], "exit_reasons": {e["exit_reason"]: e["n"] for e in exits},
            "wall_sec": round(wall, 2), "stepping_sec": round(calls["span"], 2),
            "steps_per_sec_stepping": round(stepping, 1), "steps_per_sec_whole_run": round(calls["n"] / wall, 1),
            "harness_cpu_ms_per_step": round(harness_cpu / calls["n"] * 1000, 2),
            "sandbox_cpu_ms_per_step": round(sandbox_cpu / calls["n"] * 1000, 2),
            "x_leaf_150_workers_at_5s": round(stepping / LEAF_NEEDS, 1), "status": summary.status,
            "machine": {"cpus": os.cpu_count(), "python": platform.python_version(), "load_before": load_before,
                        "load_after": _load()}}


def _load() -> str:
    one, five, _ = os.getloadavg()
    return f"load average {one:.2f} (1 min), {five:.2f} (5 min) on {os.cpu_count()} cores"


def _own_and_children_cpu() -> float:
    """This process's CPU and its reaped children's (bubblewrap itself, git, the grader's launcher)."""
    own, children = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    return own.ru_utime + own.ru_stime + children.ru_utime + children.ru_stime


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--episodes", type=int, default=150)
    parser.add_argument("--steps", type=int, default=20, help="tool-call steps before the final answer")
    parser.add_argument("--tool", choices=["Read", "Bash"], default="Read",
                        help="Read: a trivial tool; Bash: each step also starts a login shell in the sandbox")
    parser.add_argument("--quick", action="store_true",
                        help=f"{QUICK_EPISODES} episodes of {QUICK_STEPS} steps: a check that the bench runs, not a "
                             "measurement")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    if args.quick:
        args.episodes, args.steps = QUICK_EPISODES, QUICK_STEPS
    result = {**measure(args.episodes, args.steps, args.tool), "quick": args.quick}
    if args.json:
        print(json.dumps(result, indent=2))
        return
    print(f"machine: {result['machine']['cpus']} cores, Python {result['machine']['python']}; load before: "
          f"{result['machine']['load_before']}; after: {result['machine']['load_after']}"
          + ("; --quick: a check that the bench runs, not a measurement" if args.quick else ""))
    print(f"{result['episodes']} concurrent episodes × {result['steps_per_episode']} steps, tool {result['tool']}: "
          f"{result['model_calls']} model calls ({result['failed_calls']} failed), exits {result['exit_reasons']}")
    print(f"  steps/s while stepping     {result['steps_per_sec_stepping']:>8}   ({result['stepping_sec']} s)")
    print(f"  steps/s over the whole run {result['steps_per_sec_whole_run']:>8}   ({result['wall_sec']} s, "
          "sandbox starts and grading included)")
    print(f"  harness CPU per step       {result['harness_cpu_ms_per_step']:>8} ms (this process and its reaped "
          "children)")
    print(f"  sandbox CPU per step       {result['sandbox_cpu_ms_per_step']:>8} ms (inside the sandboxes: their "
          "cgroups)")
    print(f"  vs a 150-worker Leaf run at 5 s per call (30 steps/s): {result['x_leaf_150_workers_at_5s']}x"
          f"  (goal: >= 200 steps/s, i.e. >= 6.7x)")


if __name__ == "__main__":
    main()
