"""How fast `leafcost serve` answers `GET /runs/{id}/summary` for a finished run on a large ledger: the first
request (which computes the summary), then the latency of one client's requests one after another, then the
sustained rate of a few concurrent clients, errors counted. The server is the real command (uvicorn, the API and
the web page) in its own process; this process is the client.

Run from the repository root:

    .venv/bin/python bench/api_latency.py [--db PATH] [--episodes 100000] [--calls-per-episode 20]
                                          [--requests 200] [--seconds 10] [--clients 4] [--quick] [--json]

Without --db a synthetic ledger is built first (bench/synthetic_ledger.py, 100,000 episodes × 20 calls) in a
temporary folder; with --db a kept one is reused (e.g. /tmp/leafcost-bench/ledger-10m.duckdb, 10M calls).
Goals on 2 cores: p50 <= 50 ms and >= 200 requests/s (a finished run's summary is served from memory once
computed). The machine's load average is recorded before and after. --quick builds a tiny ledger
(bench/synthetic_ledger.py's --quick) and sends a few requests: a check that the bench runs, not a measurement.
Timings are reported, never asserted."""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import platform
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import aiohttp

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
sys.path.insert(0, str(Path(__file__).resolve().parent))

GOAL_P50_MS = 50.0
GOAL_REQUESTS_PER_SEC = 200.0
START_TIMEOUT_SEC = 120.0
QUICK_REQUESTS, QUICK_SECONDS, QUICK_CLIENTS = 20, 1.0, 2


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def start_server(db: Path, port: int, log: Path) -> subprocess.Popen:
    """`leafcost serve --db DB --port PORT`, reads only (no token in its environment)."""
    env = {k: v for k, v in os.environ.items() if k != "LEAFCOST_API_TOKEN"}
    with open(log, "wb") as out:
        return subprocess.Popen([sys.executable, "-c", "import typer; from compare.serve import main; typer.run(main)",
                                 "--db", str(db), "--port", str(port)], env=env, stdout=out, stderr=subprocess.STDOUT)


async def wait_until_up(session: aiohttp.ClientSession, base: str, server: subprocess.Popen, log: Path) -> None:
    deadline = time.monotonic() + START_TIMEOUT_SEC
    while True:
        if server.poll() is not None:
            raise RuntimeError(f"the server exited ({server.returncode}): {log.read_text()[-2000:]}")
        if time.monotonic() > deadline:
            raise RuntimeError(f"the server did not answer within {START_TIMEOUT_SEC:.0f} s")
        try:
            async with session.get(f"{base}/health") as answer:
                if answer.status == 200:
                    return
        except aiohttp.ClientError:
            pass
        await asyncio.sleep(0.2)


async def timed_get(session: aiohttp.ClientSession, url: str) -> tuple[float, int, int]:
    """Seconds until the whole body arrived, the status and the body's size."""
    started = time.perf_counter()
    async with session.get(url) as answer:
        body = await answer.read()
        return time.perf_counter() - started, answer.status, len(body)


async def sequential(session: aiohttp.ClientSession, url: str, requests: int, size: int) -> dict[str, Any]:
    seconds, errors = [], 0
    for _ in range(requests):
        elapsed, status, length = await timed_get(session, url)
        seconds.append(elapsed)
        errors += status != 200 or length != size
    return {"requests": requests, "errors": errors, **percentiles(seconds)}


async def sustained(url: str, clients: int, duration: float, size: int) -> dict[str, Any]:
    """`clients` connections, each sending its next request as soon as the last one's body arrived."""
    seconds: list[float] = []
    errors = 0
    stop = time.perf_counter() + duration

    async def client() -> None:
        nonlocal errors
        async with aiohttp.ClientSession(connector=aiohttp.TCPConnector(limit=1)) as session:
            while time.perf_counter() < stop:
                try:
                    elapsed, status, length = await timed_get(session, url)
                except aiohttp.ClientError:
                    errors += 1
                    continue
                seconds.append(elapsed)
                errors += status != 200 or length != size

    started = time.perf_counter()
    await asyncio.gather(*(client() for _ in range(clients)))
    wall = time.perf_counter() - started
    ok = len(seconds) - errors
    return {"clients": clients, "seconds": round(wall, 2), "requests": len(seconds), "errors": errors,
            "requests_per_sec": round(ok / wall, 1), **percentiles(seconds)}


def percentiles(seconds: list[float]) -> dict[str, float]:
    if not seconds:
        return {"p50_ms": float("nan"), "p99_ms": float("nan"), "max_ms": float("nan")}
    ordered = sorted(seconds)
    p99 = ordered[min(len(ordered) - 1, int(round(0.99 * (len(ordered) - 1))))]
    return {"p50_ms": round(statistics.median(ordered) * 1000, 2), "p99_ms": round(p99 * 1000, 2),
            "max_ms": round(ordered[-1] * 1000, 2)}


async def measure(db: Path, folder: Path, requests: int, duration: float, clients: int) -> dict[str, Any]:
    load_before = _load()
    port = free_port()
    base = f"http://127.0.0.1:{port}"
    log = folder / "serve.log"
    server = start_server(db, port, log)
    try:
        async with aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=600),
                                         connector=aiohttp.TCPConnector(limit=1)) as session:
            started = time.perf_counter()
            await wait_until_up(session, base, server, log)
            startup = time.perf_counter() - started
            async with session.get(f"{base}/runs") as answer:
                run_id = (await answer.json())[0]["run_id"]
            url = f"{base}/runs/{run_id}/summary"
            first, status, size = await timed_get(session, url)
            if status != 200:
                raise RuntimeError(f"GET {url}: {status}")
            one = await sequential(session, url, requests, size)
        many = await sustained(url, clients, duration, size)
    finally:
        server.terminate()
        server.wait(timeout=30)
    return {"db": str(db), "run_id": run_id, "startup_sec": round(startup, 2), "summary_bytes": size,
            "first_request_sec": round(first, 3), "sequential": one, "concurrent": many,
            "goal": {"p50_ms": GOAL_P50_MS, "requests_per_sec": GOAL_REQUESTS_PER_SEC},
            "machine": {"cpus": os.cpu_count(), "python": platform.python_version(), "load_before": load_before,
                        "load_after": _load()}}


def _load() -> str:
    one, five, _ = os.getloadavg()
    return f"load average {one:.2f} (1 min), {five:.2f} (5 min) on {os.cpu_count()} cores"


def counts(db: Path) -> dict[str, int]:
    from compare.ledger import connect_read_only

    conn = connect_read_only(db)
    try:
        episodes, calls = conn.execute("SELECT (SELECT count(*) FROM episodes), (SELECT count(*) FROM model_calls)"
                                       ).fetchone()
    finally:
        conn.close()
    return {"episodes": episodes, "model_calls": calls}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--db", type=Path, help="a ledger kept by bench/synthetic_ledger.py --out")
    parser.add_argument("--episodes", type=int, default=100_000, help="when building the ledger")
    parser.add_argument("--calls-per-episode", type=int, default=20, help="when building the ledger")
    parser.add_argument("--requests", type=int, default=200, help="sequential requests timed")
    parser.add_argument("--seconds", type=float, default=10.0, help="how long the concurrent clients run")
    parser.add_argument("--clients", type=int, default=4, help="concurrent clients")
    parser.add_argument("--quick", action="store_true",
                        help=f"a tiny ledger, {QUICK_REQUESTS} sequential requests, {QUICK_CLIENTS} clients for "
                             f"{QUICK_SECONDS:g} s: a check that the bench runs, not a measurement")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    if args.quick:
        from synthetic_ledger import QUICK_CALLS_PER_EPISODE, QUICK_EPISODES

        args.episodes, args.calls_per_episode = QUICK_EPISODES, QUICK_CALLS_PER_EPISODE
        args.requests, args.seconds, args.clients = QUICK_REQUESTS, QUICK_SECONDS, QUICK_CLIENTS
    with tempfile.TemporaryDirectory(prefix="leafcost-api-bench-") as tmp:
        folder = Path(tmp)
        db, build_sec = args.db, None
        if db is None:
            from synthetic_ledger import make_synthetic_ledger

            db = folder / "ledger.duckdb"
            build_sec = make_synthetic_ledger(db, episodes=args.episodes,
                                              calls_per_episode=args.calls_per_episode)["total_sec"]
        result = {**counts(db), **asyncio.run(measure(db, folder, args.requests, args.seconds, args.clients)),
                  "ledger_build_sec": build_sec, "quick": args.quick}
    if args.json:
        print(json.dumps(result, indent=2))
        return
    one, many = result["sequential"], result["concurrent"]
    print(f"{result['model_calls']:,} model calls, {result['episodes']:,} episodes ({result['db']}); "
          f"{result['machine']['cpus']} cores; summary document {result['summary_bytes']:,} bytes")
    print(f"  load before: {result['machine']['load_before']}; after: {result['machine']['load_after']}"
          + ("; --quick: a check that the bench runs, not a measurement" if args.quick else ""))
    print(f"  server start-up (until /health)   {result['startup_sec']:>9.2f} s")
    print(f"  first summary request (computes)  {result['first_request_sec']:>9.3f} s")
    print(f"  {'':<34}{'p50 ms':>9} {'p99 ms':>9} {'max ms':>9} {'req/s':>9} {'errors':>7}")
    rows = [(f"sequential, {one['requests']} requests", one, ""),
            (f"{many['clients']} clients for {many['seconds']} s", many, f"{many['requests_per_sec']:.1f}")]
    for label, row, rate in rows:
        print(f"  {label:<34}{row['p50_ms']:>9.2f} {row['p99_ms']:>9.2f} {row['max_ms']:>9.2f} {rate:>9} "
              f"{row['errors']:>7}")
    print(f"  goals: p50 <= {GOAL_P50_MS:.0f} ms (sequential: {_verdict(one['p50_ms'] <= GOAL_P50_MS)}), "
          f">= {GOAL_REQUESTS_PER_SEC:.0f} requests/s ({_verdict(many['requests_per_sec'] >= GOAL_REQUESTS_PER_SEC)})")


def _verdict(met: bool) -> str:
    return "met" if met else "NOT met"


if __name__ == "__main__":
    main()
