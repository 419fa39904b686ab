"""A synthetic ledger at scale: a real ledger file (schema and migrations applied by `Ledger.open`) holding one
finished run of a self-hosted SGLang arm against a hosted router arm, bulk-loaded from numpy arrays, and how fast
DuckDB ingests its model calls.

Run from the repository root:

    .venv/bin/python bench/synthetic_ledger.py [--episodes 100000] [--calls-per-episode 100] [--out PATH] [--quick]
                                               [--json]

The default run is 100,000 episodes × 100 calls (10M model_calls, plus ~2 % infra-failed attempts that are
retried). The file goes to a temporary directory that is removed afterwards unless --out names where to keep it
(reports and summary benchmarks reuse it). Printed: model_calls ingested, the seconds spent in their INSERTs and
the calls/s they imply (goal: >= 200,000 calls/s on 2 cores), the whole build, peak memory and the file size.
A progress line per chunk goes to stderr, and the machine's load average is recorded before and after. --quick
builds a tiny ledger (600 episodes × 10 calls): a check that the bench runs, not a measurement. Timings are
reported, never asserted.

What the file holds (`make_synthetic_ledger` builds it; the first arm is the self-hosted one, the others hosted):
- `runs`: one finished run; spec_json is a validated RunSpec (suite "builtin"), spec_sha256 its digest().
- `arms`: one finished row per arm.
- `episodes`: every (arm, task, seed) has exactly one final attempt; ~2 % of keys first have an infra-failed,
  non-final attempt (sandbox failure, retried as attempt 2). Resolution follows a per-task difficulty shifted
  per arm, so resolve rates differ by arm. Token columns are the sums of the attempt's model_calls.
- `model_calls`: prompts grow with the step (the conversation so far), most of each prompt is served from the
  prefix cache, completions include a reasoning part. Hosted rows are priced with the arm's explicit sheet
  (the arithmetic of `compare.pricing.explicit_cost`, in numpy) and the router reports the same figure;
  self-hosted rows are unpriced (cost NULL, price_source "lease").
- `gpu_leases`: the self-hosted arm's H200 over the run's wall time.
- `server_samples`: a scrape every 15 s of SGLang's cumulative token and GPU-time counters, consistent with the
  self-hosted calls (a call counts once it has ended; the final scrape holds the arm's exact token totals).
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import platform
import resource
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import duckdb
import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from compare.ledger import Ledger, check_no_secrets, episode_id_for  # noqa: E402
from compare.pricing import explicit_cost_arrays  # noqa: E402
from compare.spec import Prices, RunSpec, parse_run_spec  # noqa: E402

GOAL_CALLS_PER_SEC = 200_000
CHUNK_CALLS = 1_000_000  # model_calls per INSERT: ~200 MB of numpy columns at a time
SELF_HOSTED_MODEL = "frognano-4b"
HOSTED_MODEL = "openai/gpt-5"
HOSTED_PRICES = {"input": 1.25, "output": 10.0, "cached_input": 0.125}  # USD per 1M tokens
GPU = {"type": "H200", "count": 1, "usd_per_hour": 3.5}
WORKERS = 150  # concurrent episodes over both arms, as Leaf's preset runs them
QUICK_EPISODES, QUICK_CALLS_PER_EPISODE = 600, 10  # --quick here, and the ledger api_latency and summary_speed build
SCRAPE_SEC = 15.0
INFRA_FAILED_SHARE = 0.02
MAX_PROMPT_TOKENS = 120_000  # stays below the spec's 131072 context budget (and any 200k price tier)
RUN_START = np.datetime64("2026-01-05T08:00:00", "us")  # the lease starts here; episodes 2 s later
# What the simulated H200 spends per token (prefill of uncached tokens, decode), for gpu_execution_seconds_total.
GPU_SEC_PER_PREFILL_TOKEN = 1e-5  # with the decode rate: ~55 % utilization over the run
GPU_SEC_PER_DECODE_TOKEN = 7.5e-5
SANDBOX_SPEC_HASH = hashlib.sha256(json.dumps(
    {"backend": "local", "isolation": "bwrap", "base_root": "host", "cpus": 1.0, "memory_mb": 4096,
     "pids": 512, "synthetic": True}, sort_keys=True).encode()).hexdigest()
_LABELS = f'model_name="{SELF_HOSTED_MODEL}"'
METRICS = {  # the counters scraped, by the token kind (or GPU category) each one counts
    "prefill_compute": f'sglang:realtime_tokens_total{{mode="prefill_compute",{_LABELS}}}',
    "prefill_cache": f'sglang:realtime_tokens_total{{mode="prefill_cache",{_LABELS}}}',
    "decode": f'sglang:realtime_tokens_total{{mode="decode",{_LABELS}}}',
    "forward_extend": f'sglang:gpu_execution_seconds_total{{category="forward_extend",{_LABELS}}}',
    "forward_decode": f'sglang:gpu_execution_seconds_total{{category="forward_decode",{_LABELS}}}',
}

_CALL_COLUMNS = ("call_id", "run_id", "arm", "episode_id", "step", "attempt", "model", "status", "http_status",
                 "error", "finish_reason", "prompt_tokens", "cached_tokens", "completion_tokens",
                 "reasoning_tokens", "total_tokens", "started_at", "latency_sec", "ttft_sec", "router_cost_usd",
                 "router_cost_detail", "router_retries", "router_fallbacks", "router_model", "router_deployment",
                 "cost_usd", "price_source", "price_revision", "request_id")
_EPISODE_COLUMNS = ("episode_id", "run_id", "arm", "task_id", "seed", "attempt", "status", "exit_reason",
                    "resolved", "reward", "grade_error", "error_detail", "infra_error", "harness_error", "final",
                    "n_steps", "prompt_tokens", "cached_tokens", "completion_tokens", "reasoning_tokens",
                    "model_calls", "started_at", "ended_at", "elapsed_sec", "sandbox_spec_hash", "isolation",
                    "sandbox_cpu_seconds", "sandbox_start_sec", "patch_bytes", "trajectory_path")
_INFRA_DETAIL = "SandboxError: the tool runner stopped answering (synthetic)"


def synthetic_spec(arms: Sequence[str], seeds: int, calls_per_episode: int, name: str = "synthetic") -> RunSpec:
    """The run's spec: the first arm self-hosted (SGLang on one H200), the others hosted through a router with
    explicit prices."""
    raw_arms: list[dict[str, Any]] = []
    for i, arm in enumerate(arms):
        if i == 0:
            raw_arms.append({"name": arm, "adapter": "sglang", "model": SELF_HOSTED_MODEL,
                             "base_url": "http://127.0.0.1:30000/v1", "gpu": dict(GPU)})
        else:
            raw_arms.append({"name": arm, "adapter": "router", "model": HOSTED_MODEL,
                             "base_url": "http://127.0.0.1:4000/v1", "api_key_env": "ROUTER_API_KEY",
                             "prices": dict(HOSTED_PRICES)})
    return parse_run_spec({"name": name, "suite": "builtin", "seeds": seeds, "workers": WORKERS, "max_attempts": 2,
                           "budgets": {"max_steps": max(calls_per_episode, 1)}, "arms": raw_arms},
                          source="synthetic spec")


def make_synthetic_ledger(path: Path | str, *, episodes: int = 100_000, calls_per_episode: int = 100,
                          arms: Sequence[str] = ("frognano", "hosted"), seeds: int = 3, seed: int = 0,
                          chunk_calls: int = CHUNK_CALLS, progress: bool = False) -> dict[str, Any]:
    """Creates a real ledger at `path` (which must not exist) holding one finished synthetic run; see the module
    docstring for what it holds. `episodes` is split into tasks = episodes // (len(arms) × seeds) final attempts
    per arm and seed, plus ~2 % infra-failed attempts. Returns counts, the seconds spent in model_calls INSERTs
    and the calls/s they imply, and the whole build's seconds."""
    path = Path(path)
    if path.exists():
        raise FileExistsError(f"{path} exists: the synthetic ledger is written to a new file")
    arms = tuple(arms)
    n_tasks = episodes // (len(arms) * seeds) if arms and seeds > 0 else 0
    if n_tasks < 1 or calls_per_episode < 1:
        raise ValueError("need at least one arm, one call per episode and episodes >= len(arms) × seeds")
    started = time.perf_counter()
    spec = synthetic_spec(arms, seeds, calls_per_episode)
    spec_json = spec.model_dump_json()
    run_id = f"{spec.name}-{RUN_START.item():%Y%m%d-%H%M%S}-{seed:04x}"  # shaped like compare.ledger.new_run_id
    Ledger.open(path).close()  # the schema and every migration, exactly as the runner's ledger gets them

    plan = _plan_episodes(n_tasks, len(arms), seeds, calls_per_episode, seed)
    width = max(5, len(str(n_tasks - 1)))
    task_ids = [f"synthetic-{t:0{width}d}" for t in range(n_tasks)]
    keys = list(zip(plan["arm"].tolist(), plan["task"].tolist(), plan["seed"].tolist(), plan["attempt"].tolist()))
    episode_ids = np.array([episode_id_for(run_id, arms[a], task_ids[t], s, at) for a, t, s, at in keys],
                           dtype=object)
    trajectory_paths = np.array([f"trajectories/{run_id}/{arms[a]}/{task_ids[t]}.s{s}.a{at}.json"
                                 for a, t, s, at in keys], dtype=object)
    del keys
    arm_names = np.array(arms, dtype=object)
    task_names = np.array(task_ids, dtype=object)
    prices = spec.arms[1].prices if len(arms) > 1 else None

    conn = duckdb.connect(str(path))
    counts = {"model_calls": 0, "episodes": 0}
    insert_sec = 0.0
    slot_end = np.full(WORKERS, 2.0)  # seconds after RUN_START when each worker is free
    scraped = {kind: np.zeros(0) for kind in ("prefill_compute", "prefill_cache", "decode")}
    try:
        conn.execute("SET TimeZone = 'UTC'")  # numpy datetime64 values are UTC; TIMESTAMPTZ must read them so
        conn.execute("SET preserve_insertion_order = false")  # lets both cores insert; row order means nothing here
        ends = np.cumsum(plan["n_calls"])
        bounds = np.unique(np.searchsorted(ends, np.arange(chunk_calls, ends[-1], chunk_calls), side="left") + 1)
        bounds = [0, *[int(b) for b in bounds if b < len(ends)], len(ends)]
        next_call_id = 1
        for chunk, (a, b) in enumerate(zip(bounds[:-1], bounds[1:])):
            rng = np.random.default_rng([seed, 1, chunk])
            # `calls` and `eps` (dicts of numpy columns) are scanned by name by _INSERT_CALLS / _INSERT_EPISODES.
            calls, eps = _generate_chunk(plan, a, b, rng, slot_end, next_call_id, prices)
            calls["episode_id"] = episode_ids[a:b][calls.pop("ep_local")]
            eps["episode_id"], eps["trajectory_path"] = episode_ids[a:b], trajectory_paths[a:b]
            eps["arm_name"], eps["task_id"] = arm_names[plan["arm"][a:b]], task_names[plan["task"][a:b]]
            calls["arm_name"] = arm_names[calls["arm_idx"]]
            calls["model_name"] = np.array([SELF_HOSTED_MODEL, HOSTED_MODEL], dtype=object)[
                np.minimum(calls["arm_idx"], 1)]
            _accumulate_scrapes(scraped, calls)
            t0 = time.perf_counter()
            conn.execute(_INSERT_CALLS.format(run_id=run_id))
            chunk_sec = time.perf_counter() - t0
            insert_sec += chunk_sec
            conn.execute(_INSERT_EPISODES.format(run_id=run_id, spec_hash=SANDBOX_SPEC_HASH,
                                                 infra_detail=_INFRA_DETAIL))
            n = len(calls["call_id"])
            next_call_id += n
            counts["model_calls"] += n
            counts["episodes"] += b - a
            if progress:
                print(f"chunk {chunk + 1}/{len(bounds) - 1}: {n:,} calls inserted in {chunk_sec:.2f} s "
                      f"({n / chunk_sec:,.0f}/s); so far {counts['model_calls']:,} calls, {counts['episodes']:,} "
                      f"episodes, {counts['model_calls'] / insert_sec:,.0f} calls/s", file=sys.stderr, flush=True)
            del calls, eps

        # The call_id sequence is advanced past the ids set explicitly above, so a Ledger can append to this file
        # (its writer draws ids from the sequence; without this the next call would collide with call_id 1).
        if counts["model_calls"]:
            conn.execute("SELECT max(nextval('model_calls_call_id_seq')) FROM range(?)",
                         [counts["model_calls"]]).fetchall()
        run_end = float(slot_end.max()) + 3.0
        _insert_run_and_arms(conn, spec, spec_json, run_id, task_ids, run_end)
        n_samples = _insert_samples(conn, run_id, arms[0], scraped, run_end)
        t0 = time.perf_counter()
        conn.execute("CHECKPOINT")
        checkpoint_sec = time.perf_counter() - t0
    finally:
        conn.close()
    total_sec = time.perf_counter() - started
    return {
        "path": str(path), "run_id": run_id, "arms": list(arms), "tasks": n_tasks, "seeds": seeds,
        "calls_per_episode": calls_per_episode, "chunks": len(bounds) - 1, "episodes": counts["episodes"],
        "final_episodes": int(plan["final"].sum()), "infra_failed_attempts": int((~plan["final"]).sum()),
        "model_calls": counts["model_calls"], "server_samples": n_samples, "gpu_leases": 1,
        "insert_sec": round(insert_sec, 3),
        "calls_per_sec": round(counts["model_calls"] / insert_sec) if insert_sec else None,
        "checkpoint_sec": round(checkpoint_sec, 3), "total_sec": round(total_sec, 3),
        "calls_per_sec_whole_build": round(counts["model_calls"] / total_sec),
        "run_wall_hours": round(run_end / 3600, 2),
        "gpu_utilization": round((scraped["prefill_compute"].sum() * GPU_SEC_PER_PREFILL_TOKEN
                                  + scraped["decode"].sum() * GPU_SEC_PER_DECODE_TOKEN) / run_end, 3),
        "file_bytes": path.stat().st_size,
    }


# ---------------------------------------------------------------------------------------------------------
# Episodes: who runs what, in which order, and how it ends (decided up front; calls are generated per chunk)

def _plan_episodes(n_tasks: int, n_arms: int, seeds: int, calls_per_episode: int, seed: int) -> dict[str, np.ndarray]:
    rng = np.random.default_rng([seed, 0])
    n_keys = n_tasks * seeds * n_arms
    key = np.arange(n_keys)  # task-major, then seed, then arm: both arms progress through the suite together
    retried = rng.random(n_keys) < INFRA_FAILED_SHARE
    per_key = 1 + retried.astype(np.int64)
    ep_key = np.repeat(key, per_key)
    first = np.cumsum(per_key) - per_key
    attempt = np.arange(len(ep_key)) - np.repeat(first, per_key) + 1
    final = attempt == per_key[ep_key]
    n = len(ep_key)
    arm, task, seed_no = ep_key % n_arms, ep_key // (n_arms * seeds), (ep_key // n_arms) % seeds
    # Resolution: a per-task difficulty, shifted per arm (the hosted model is the stronger one).
    difficulty = rng.beta(1.3, 1.6, n_tasks)
    arm_shift = np.array([-0.45] + [0.45 - 0.3 * i for i in range(n_arms - 1)])
    logit = np.log(difficulty / (1 - difficulty)).clip(-6, 6)[task] + arm_shift[arm]
    resolved = final & (rng.random(n) < 1 / (1 + np.exp(-logit)))
    # Finals stop by themselves ("agent") or, some unresolved ones, at the step budget.
    max_turns = final & ~resolved & (rng.random(n) < 0.12)
    n_calls = np.where(final, calls_per_episode, rng.integers(1, calls_per_episode + 1, n))
    return {
        "arm": arm, "task": task, "seed": seed_no, "attempt": attempt, "final": final, "resolved": resolved,
        "max_turns": max_turns, "n_calls": n_calls.astype(np.int64),
        "system_prompt": rng.integers(4_500, 9_000, n),  # instruction + Leaf's tool schemas
        "reasoning_share": np.where(arm == 0, rng.uniform(0.35, 0.8, n), rng.uniform(0.15, 0.55, n)),
        "decode_tps": np.where(arm == 0, rng.uniform(45, 75, n), rng.uniform(60, 130, n)),
        "sandbox_start": rng.uniform(0.25, 0.9, n), "grade_sec": rng.uniform(3, 30, n),
        "patch_bytes": np.where(final, rng.lognormal(np.log(1800), 0.8, n).astype(np.int64), 0),
    }


def _generate_chunk(plan: dict[str, np.ndarray], a: int, b: int, rng: np.random.Generator, slot_end: np.ndarray,
                    first_call_id: int, prices: Prices | None) -> tuple[dict[str, np.ndarray], dict[str, np.ndarray]]:
    """The calls of episodes [a, b) and those episodes' rows; advances `slot_end` (the workers' schedule)."""
    p = {k: v[a:b] for k, v in plan.items()}
    counts = p["n_calls"]
    n = int(counts.sum())
    ep = np.repeat(np.arange(b - a), counts)
    first = np.cumsum(counts) - counts
    step = np.arange(n) - first[ep] + 1
    last = step == counts[ep]
    arm = p["arm"][ep]
    self_hosted = arm == 0

    def within_episode_before(values: np.ndarray) -> np.ndarray:
        """For each call, the sum of `values` over the earlier calls of its episode."""
        total = np.cumsum(values)
        before = total - values
        return before - before[first][ep]

    completion = np.clip(np.rint(rng.lognormal(np.where(self_hosted, np.log(420), np.log(280)), 0.7)), 1, 8192)
    completion = completion.astype(np.int64)
    reasoning = np.floor(completion * p["reasoning_share"][ep]).astype(np.int64)
    tool_output = np.clip(rng.lognormal(np.log(380), 0.9, n), 15, 6000).astype(np.int64)
    # The prompt is the conversation so far: the system prompt, then each earlier turn's output and tool result.
    prompt = np.minimum(p["system_prompt"][ep] + within_episode_before(completion + tool_output + 30),
                        MAX_PROMPT_TOKENS)
    previous = np.where(step > 1, np.roll(prompt, 1), 0)
    # Prefix cache: usually the whole previous request (SGLang's radix cache exactly, a provider in 128-token
    # blocks above 1024); on a miss, part of it (SGLang evicted some) or only the shared system prefix.
    hit = rng.random(n) < np.where(self_hosted, 0.96, 0.9)
    shared_prefix = np.minimum(p["system_prompt"][ep], 3_500)
    hosted_hit = np.where(previous >= 1024, previous // 128 * 128, 0)
    cached = np.where(self_hosted,
                      np.where(hit, previous, (previous * rng.random(n)).astype(np.int64)),
                      np.where(hit, hosted_hit, shared_prefix // 128 * 128))
    cached = np.where(step == 1, np.where(rng.random(n) < 0.95, shared_prefix, 0), cached)
    cached = np.minimum(cached, prompt)
    # Latency: time to first token (queue + prefill of what the cache missed), then decode.
    ttft = np.where(self_hosted, 0.04 + (prompt - cached) * 4e-5, 0.35 + prompt * 2e-6) + rng.exponential(
        np.where(self_hosted, 0.15, 0.6))
    latency = ttft + completion / p["decode_tps"][ep]
    tool_sec = np.where(last, 0.0, rng.exponential(1.2, n) + 0.02)  # the tool call, then the next request
    loop_sec = np.add.reduceat(latency + tool_sec, first)
    duration = p["sandbox_start"] + loop_sec + p["grade_sec"]
    # Workers take episodes in order: episode i runs on worker i % WORKERS after that worker's previous one.
    offset = a % WORKERS
    padded = np.zeros(-(-(offset + len(duration)) // WORKERS) * WORKERS)
    padded[offset:offset + len(duration)] = duration
    rounds = padded.reshape(-1, WORKERS)
    starts = slot_end + np.cumsum(rounds, axis=0) - rounds
    slot_end += rounds.sum(axis=0)
    ep_start = starts.reshape(-1)[offset:offset + len(duration)]
    call_start = ep_start[ep] + p["sandbox_start"][ep] + within_episode_before(latency + tool_sec)

    if prices is not None:
        # The cost model's own rule (cache writes, the 200k tier), never a copy of it.
        cost = explicit_cost_arrays(prices, prompt=prompt, cached=cached, cache_write=np.zeros(n),
                                    completion=completion, reasoning=reasoning)
    else:
        cost = np.zeros(n)
    finish_stop = last & ~p["max_turns"][ep] & p["final"][ep]
    calls = {
        # Ids set explicitly (1, 2, ... in episode order) rather than drawn from the column's default sequence;
        # make_synthetic_ledger advances the sequence past them afterwards.
        "call_id": np.arange(first_call_id, first_call_id + n, dtype=np.int64), "ep_local": ep, "arm_idx": arm,
        "self_hosted": self_hosted, "step": step, "prompt_tokens": prompt, "cached_tokens": cached,
        "completion_tokens": completion, "reasoning_tokens": reasoning, "total_tokens": prompt + completion,
        "started_at": _timestamps(call_start), "end_sec": call_start + latency, "latency_sec": latency,
        "ttft_sec": ttft, "cost": cost, "finish_stop": finish_stop,
    }
    tool_cpu = np.add.reduceat(tool_sec, first) * 0.35
    episodes = {
        "arm_idx": p["arm"], "seed": p["seed"], "attempt": p["attempt"], "final": p["final"],
        "resolved": p["resolved"], "max_turns": p["max_turns"], "n_steps": counts,
        "prompt_tokens": np.add.reduceat(prompt, first), "cached_tokens": np.add.reduceat(cached, first),
        "completion_tokens": np.add.reduceat(completion, first),
        "reasoning_tokens": np.add.reduceat(reasoning, first), "model_calls": counts,
        "started_at": _timestamps(ep_start), "ended_at": _timestamps(ep_start + duration), "elapsed_sec": loop_sec,
        "sandbox_cpu_seconds": tool_cpu + p["grade_sec"] * 0.8 + p["sandbox_start"] * 0.3,
        "sandbox_start_sec": p["sandbox_start"], "patch_bytes": p["patch_bytes"],
    }
    return calls, episodes


def _timestamps(seconds: np.ndarray) -> np.ndarray:
    return RUN_START + np.rint(seconds * 1e6).astype("timedelta64[us]")


# The constant and derived text columns are written by DuckDB (cheaper than Python strings for 1M rows).
_INSERT_CALLS = f"""
INSERT INTO model_calls ({", ".join(_CALL_COLUMNS)})
SELECT call_id, '{{run_id}}', arm_name, episode_id, step, 1, model_name, 'ok', 200, NULL,
       CASE WHEN finish_stop THEN 'stop' ELSE 'tool_calls' END,
       prompt_tokens, cached_tokens, completion_tokens, reasoning_tokens, total_tokens, started_at, latency_sec,
       ttft_sec,
       CASE WHEN self_hosted THEN NULL ELSE cost END, NULL,
       CASE WHEN self_hosted THEN NULL ELSE 0 END, CASE WHEN self_hosted THEN NULL ELSE 0 END,
       CASE WHEN self_hosted THEN NULL ELSE model_name END, NULL,
       CASE WHEN self_hosted THEN NULL ELSE cost END,
       CASE WHEN self_hosted THEN 'lease' ELSE 'explicit' END,
       CASE WHEN self_hosted THEN NULL ELSE 'arm sheet' END, NULL
FROM calls
"""
_INSERT_EPISODES = f"""
INSERT INTO episodes ({", ".join(_EPISODE_COLUMNS)})
SELECT episode_id, '{{run_id}}', arm_name, task_id, seed, attempt, 'finished',
       CASE WHEN NOT final THEN 'infrastructure_error' WHEN max_turns THEN 'max_turns' ELSE 'agent' END,
       resolved, CASE WHEN final THEN CASE WHEN resolved THEN 1.0 ELSE 0.0 END END, NULL,
       CASE WHEN final THEN NULL ELSE '{{infra_detail}}' END, NOT final, false, final,
       n_steps, prompt_tokens, cached_tokens, completion_tokens, reasoning_tokens, model_calls,
       started_at, ended_at, elapsed_sec, '{{spec_hash}}', 'bwrap', sandbox_cpu_seconds, sandbox_start_sec,
       patch_bytes, trajectory_path
FROM eps
"""


def _accumulate_scrapes(scraped: dict[str, np.ndarray], calls: dict[str, np.ndarray]) -> None:
    """Adds the self-hosted calls' tokens to the 15-s bin of the first scrape that sees them (the first scrape
    at or after the call ended)."""
    mine = calls["self_hosted"]
    if not mine.any():
        return
    index = np.ceil(calls["end_sec"][mine] / SCRAPE_SEC).astype(np.int64)
    prompt, cached = calls["prompt_tokens"][mine], calls["cached_tokens"][mine]
    for kind, tokens in (("prefill_compute", prompt - cached), ("prefill_cache", cached),
                         ("decode", calls["completion_tokens"][mine])):
        binned = np.bincount(index, weights=tokens)
        if len(binned) > len(scraped[kind]):
            scraped[kind] = np.concatenate([scraped[kind], np.zeros(len(binned) - len(scraped[kind]))])
        scraped[kind][:len(binned)] += binned


def _insert_samples(conn: Any, run_id: str, arm: str, scraped: dict[str, np.ndarray], run_end: float) -> int:
    """Scrapes every 15 s from the lease's start, then a last one as the arm stops (at run_end): counters are
    cumulative, so each scrape holds everything that ended before it."""
    periodic = int(np.floor((run_end - 1e-9) / SCRAPE_SEC)) + 1
    taken = np.append(np.arange(periodic) * SCRAPE_SEC, run_end)
    cumulative = {}
    for kind in ("prefill_compute", "prefill_cache", "decode"):
        per_bin = np.zeros(periodic + 1)
        binned = scraped[kind]
        per_bin[:min(periodic, len(binned))] = binned[:periodic]
        per_bin[periodic] = binned[periodic:].sum()
        cumulative[kind] = np.cumsum(per_bin)
    cumulative["forward_extend"] = cumulative["prefill_compute"] * GPU_SEC_PER_PREFILL_TOKEN
    cumulative["forward_decode"] = cumulative["decode"] * GPU_SEC_PER_DECODE_TOKEN
    metric_names = np.array(list(METRICS.values()), dtype=object)
    samples = {  # noqa: F841 - scanned by DuckDB below
        "taken_at": np.repeat(_timestamps(taken), len(METRICS)),
        "metric": np.tile(metric_names, len(taken)),
        "value": np.stack([cumulative[kind] for kind in METRICS], axis=1).reshape(-1),
    }
    conn.execute(f"INSERT INTO server_samples (run_id, arm, taken_at, metric, value) "
                 f"SELECT '{run_id}', '{arm}', taken_at, metric, value FROM samples")
    return len(samples["value"])


def _insert_run_and_arms(conn: Any, spec: RunSpec, spec_json: str, run_id: str, task_ids: list[str],
                         run_end: float) -> None:
    created, ended = _timestamps(np.array([-20.0]))[0].item(), _timestamps(np.array([run_end]))[0].item()
    arm_start = _timestamps(np.array([-1.0]))[0].item()
    spec_sha256 = spec.digest()  # what a resume compares (the spec without decide: and plan:)
    options = {"base_root": "host", "extra_ro_binds": [], "unsafe_no_isolation": False,
               "cache_dir": "/var/cache/leafcost", "work_dir": None}
    conn.execute("INSERT INTO runs (run_id, name, created_at, updated_at, status, spec_json, spec_sha256, suite, "
                 "task_ids, seeds, leafcost_version, sandbox_options) VALUES (?, ?, ?, ?, 'finished', ?, ?, ?, ?, ?, "
                 "?, ?)", [run_id, spec.name, created, ended, spec_json, spec_sha256, spec.suite,
                           json.dumps(task_ids), spec.seeds, _version(), json.dumps(options)])
    for arm in spec.arms:
        if arm.adapter == "sglang":
            config = {"sampling": arm.sampling.body(), "tool_choice": "auto", "max_retries": arm.max_retries}
            server_info = {"version": "0.5.4", "model_path": SELF_HOSTED_MODEL, "tool_call_parser": "qwen3_coder",
                           "reasoning_parser": "qwen3", "enable_metrics": True, "tp_size": arm.gpu.count}
            model_info = {"model_path": SELF_HOSTED_MODEL, "is_generation": True}
            served = SELF_HOSTED_MODEL
        else:
            config = {"provider_route": "hosted_vllm", "litellm_model": f"hosted_vllm/{arm.model}",
                      "tool_choice": "auto", "sampling": arm.sampling.body(), "max_retries": arm.max_retries,
                      "api_key_env": arm.api_key_env}
            server_info = model_info = None
            served = arm.model
        check_no_secrets(config, f"arm {arm.name!r} config")
        conn.execute("INSERT INTO arms (run_id, arm, adapter, model, endpoint, served_model, config, server_info, "
                     "model_info, warnings, status, status_reason, started_at, ended_at) "
                     "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, '[]', 'finished', NULL, ?, ?)",
                     [run_id, arm.name, arm.adapter, arm.model, arm.base_url, served, json.dumps(config),
                      None if server_info is None else json.dumps(server_info),
                      None if model_info is None else json.dumps(model_info), arm_start, ended])
        if arm.adapter == "sglang":
            # One row: its lease_id is drawn from the table's own sequence.
            conn.execute("INSERT INTO gpu_leases (lease_id, run_id, arm, kind, hardware, count, usd_per_hour, "
                         "started_at, ended_at) VALUES (nextval('gpu_leases_lease_id_seq'), ?, ?, 'gpu', ?, ?, ?, "
                         "?, ?)", [run_id, arm.name, arm.gpu.type, arm.gpu.count, arm.gpu.usd_per_hour,
                                   RUN_START.item(), _timestamps(np.array([run_end + 1.0]))[0].item()])


def _version() -> str:
    from importlib import metadata

    try:
        return metadata.version("leafcost")
    except metadata.PackageNotFoundError:
        return "unknown"


def peak_rss_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--episodes", type=int, default=100_000)
    parser.add_argument("--calls-per-episode", type=int, default=100)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--out", type=Path, help="keep the ledger here (default: a temporary file, removed)")
    parser.add_argument("--quick", action="store_true",
                        help=f"{QUICK_EPISODES} episodes × {QUICK_CALLS_PER_EPISODE} calls: a check that the bench "
                             "runs, not a measurement")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    if args.quick:
        args.episodes, args.calls_per_episode = QUICK_EPISODES, QUICK_CALLS_PER_EPISODE
    load_before = _load()
    with tempfile.TemporaryDirectory(prefix="leafcost-bench-") as tmp:
        path = args.out if args.out is not None else Path(tmp) / "ledger.duckdb"
        path.parent.mkdir(parents=True, exist_ok=True)
        result = make_synthetic_ledger(path, episodes=args.episodes, calls_per_episode=args.calls_per_episode,
                                       seed=args.seed, progress=True)
    result.update(peak_rss_mb=round(peak_rss_mb()), kept=args.out is not None, quick=args.quick,
                  machine={"cpus": os.cpu_count(), "python": platform.python_version(),
                           "duckdb": duckdb.__version__, "load_before": load_before, "load_after": _load()})
    if args.json:
        print(json.dumps(result, indent=2))
        return
    print(f"machine: {result['machine']['cpus']} cores, Python {result['machine']['python']}, "
          f"DuckDB {result['machine']['duckdb']}; load before: {load_before}; after: {result['machine']['load_after']}"
          + ("; --quick: a check that the bench runs, not a measurement" if args.quick else ""))
    print(f"{result['episodes']:,} episodes ({result['final_episodes']:,} final + "
          f"{result['infra_failed_attempts']:,} infra-failed attempts; {result['tasks']:,} tasks × "
          f"{result['seeds']} seeds × {len(result['arms'])} arms), "
          f"{result['server_samples']:,} server samples over a {result['run_wall_hours']} h run")
    print(f"  model_calls ingested   {result['model_calls']:>14,}")
    print(f"  seconds in INSERTs     {result['insert_sec']:>14}")
    print(f"  calls/s                {result['calls_per_sec']:>14,}   (goal >= {GOAL_CALLS_PER_SEC:,}: "
          f"{result['calls_per_sec'] / GOAL_CALLS_PER_SEC:.2f}x)")
    print(f"  whole build            {result['total_sec']:>14} s  ({result['calls_per_sec_whole_build']:,} calls/s: "
          f"schema, generation, episodes, samples, checkpoint {result['checkpoint_sec']} s)")
    print(f"  peak memory (RSS)      {result['peak_rss_mb']:>14,} MB")
    print(f"  file size              {result['file_bytes'] / 2**20:>14,.1f} MB  "
          f"({result['file_bytes'] / max(result['model_calls'], 1):.1f} bytes per call)"
          + (f"  kept at {result['path']}" if result["kept"] else "  (removed)"))


def _load() -> str:
    one, five, _ = os.getloadavg()
    return f"load average {one:.2f} (1 min), {five:.2f} (5 min) on {os.cpu_count()} cores"


if __name__ == "__main__":
    main()
