"""How long the full per-arm summary takes on a large ledger: resolve rates with bootstrap CIs, the cost model
(lease attribution with weights fitted from the server's counters, utilization, marginal cost, sandbox cost) and
cost per resolved with CIs, for every arm of a synthetic run of 10M model calls over 100,000 episodes.

Run from the repository root:

    .venv/bin/python bench/summary_speed.py [--db PATH] [--repeat 5] [--quick] [--json]

Without --db it first builds the ledger with bench/synthetic_ledger.py (and prints its ingestion rate); with
--db it reuses a file that script kept (`--out`). Printed: p50 and max of `compare.summary.summarize` in this
process (goal: <= 2 s on 2 cores, bootstrap included), each arm's task count, and the CLI's whole wall time
(`leafcost summary --json`, Python start-up and imports included) for comparison, and the machine's load average
before and after. --quick builds a tiny ledger (bench/synthetic_ledger.py's --quick) and summarizes it twice: a
check that the bench runs, not a measurement. Timings are reported, never asserted."""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from compare.ledger import connect_read_only  # noqa: E402
from compare.summary import shared_resampler, summarize  # noqa: E402

QUICK_REPEAT = 2


def measure(db: Path, repeat: int) -> dict:
    load_before = _load()
    conn = connect_read_only(db)
    try:
        run_id = conn.execute("SELECT run_id FROM runs ORDER BY created_at DESC LIMIT 1").fetchone()[0]
        episodes, calls = conn.execute("SELECT (SELECT count(*) FROM episodes), (SELECT count(*) FROM model_calls)"
                                       ).fetchone()
        seconds = []
        for _ in range(repeat):
            shared_resampler.cache_clear()  # every repetition draws its bootstrap anew
            started = time.perf_counter()
            document = summarize(conn, run_id)
            seconds.append(time.perf_counter() - started)
    finally:
        conn.close()
    started = time.perf_counter()
    subprocess.run([str(Path(sys.executable).with_name("leafcost")), "summary", run_id, "--db", str(db), "--json"],
                   check=True, capture_output=True)
    cli = time.perf_counter() - started
    return {"db": str(db), "episodes": episodes, "model_calls": calls, "repeat": repeat,
            "summarize_p50_sec": round(statistics.median(seconds), 3), "summarize_max_sec": round(max(seconds), 3),
            "cli_wall_sec": round(cli, 3), "goal_sec": 2.0,
            "machine": {"cpus": os.cpu_count(), "load_before": load_before, "load_after": _load()},
            "arms": [{"arm": a["arm"], "tasks": a["tasks"], "attempts": a["attempts"],
                      "avg_at_k": a["avg_at_k"]["value"], "utilization": a["utilization"]}
                     for a in document["arms"]]}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--db", type=Path, help="a ledger kept by bench/synthetic_ledger.py --out")
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--quick", action="store_true",
                        help=f"a tiny ledger, {QUICK_REPEAT} repetitions: a check that the bench runs, not a "
                             "measurement")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    if args.quick:
        args.repeat = QUICK_REPEAT
    built = None
    with tempfile.TemporaryDirectory(prefix="leafcost-summary-bench-") as folder:
        db = args.db
        if db is None:
            from synthetic_ledger import QUICK_CALLS_PER_EPISODE, QUICK_EPISODES, make_synthetic_ledger

            db = Path(folder) / "ledger.duckdb"
            sizes = {"episodes": QUICK_EPISODES, "calls_per_episode": QUICK_CALLS_PER_EPISODE} if args.quick else {}
            built = make_synthetic_ledger(db, **sizes)
        result = {**measure(db, args.repeat), "quick": args.quick}
    if built is not None:
        result["ingestion_calls_per_sec"] = built["calls_per_sec"]
    if args.json:
        print(json.dumps(result, indent=2))
        return
    print(f"{result['model_calls']:,} model calls, {result['episodes']:,} episodes ({result['db']})")
    print(f"  load before: {result['machine']['load_before']}; after: {result['machine']['load_after']}"
          + ("; --quick: a check that the bench runs, not a measurement" if args.quick else ""))
    if built is not None:
        print(f"  ingestion                 {built['calls_per_sec']:>10,} calls/s   (goal >= 200,000)")
    print(f"  summarize p50             {result['summarize_p50_sec']:>10.3f} s   (max "
          f"{result['summarize_max_sec']:.3f} s over {args.repeat}; goal <= 2 s, 2,000 resamples included)")
    print(f"  leafcost summary --json   {result['cli_wall_sec']:>10.3f} s   (whole process: start-up and imports too)")
    for arm in result["arms"]:
        print(f"  {arm['arm']:<10} {arm['tasks']:,} tasks, {arm['attempts']:,} attempts, Avg@k {arm['avg_at_k']:.3f}"
              + (f", utilization {arm['utilization']:.1%}" if arm["utilization"] is not None else ""))


def _load() -> str:
    one, five, _ = os.getloadavg()
    return f"load average {one:.2f} (1 min), {five:.2f} (5 min) on {os.cpu_count()} cores"


if __name__ == "__main__":
    main()
