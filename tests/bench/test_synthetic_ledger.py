"""The synthetic ledger the benchmarks load is a real ledger: the ledger's own code opens it (schema and
migrations accept it) and appends to it, and its rows keep the ledger's invariants (episode token sums, one final
attempt per key, hosted costs from the price sheet, cumulative server counters matching the self-hosted calls)."""

from __future__ import annotations

import asyncio
import json
from datetime import timedelta

import pytest
from support.bench_scripts import load_bench

from adapters.base import CallAttempt, Usage
from compare.ledger import Ledger
from compare.pricing import explicit_cost
from compare.spec import RunSpec

EPISODES, CALLS = 600, 20


bench = load_bench("synthetic_ledger")


@pytest.fixture(scope="module")
def built(tmp_path_factory):
    path = tmp_path_factory.mktemp("synthetic") / "ledger.duckdb"
    # Small chunks so the chunk boundaries (worker schedule and scrape bins carried across) are exercised too.
    result = bench.make_synthetic_ledger(path, episodes=EPISODES, calls_per_episode=CALLS, chunk_calls=3_000)
    return path, result


@pytest.fixture
def ledger(built):
    with Ledger.open(built[0]) as opened:  # the ledger's own opener: a file it would refuse fails here
        yield opened


def one(ledger, sql, params=None):
    return next(iter(ledger.query(sql, params)[0].values()))


def test_counts_match_what_was_asked_and_reported(built, ledger):
    _, result = built
    tasks = EPISODES // (2 * 3)
    assert result["tasks"] == tasks and result["chunks"] > 1
    assert one(ledger, "select count(*) from runs where status = 'finished'") == 1
    assert ledger.query("select arm, adapter, status from arms order by arm") == [
        {"arm": "frognano", "adapter": "sglang", "status": "finished"},
        {"arm": "hosted", "adapter": "router", "status": "finished"}]
    assert one(ledger, "select count(*) from episodes") == result["episodes"]
    assert one(ledger, "select count(*) from episodes where final") == result["final_episodes"] == EPISODES
    assert 0 < result["infra_failed_attempts"] < 0.05 * EPISODES
    assert one(ledger, "select count(*) from model_calls") == result["model_calls"]
    assert one(ledger, "select count(*) from model_calls where episode_id in (select episode_id from episodes "
                       "where final)") == EPISODES * CALLS
    assert one(ledger, "select count(*) from server_samples") == result["server_samples"]
    assert one(ledger, "select count(distinct call_id) from model_calls") == result["model_calls"]
    assert one(ledger, "select count(*) from model_calls where status <> 'ok'") == 0


def test_run_row_holds_a_valid_spec_and_its_digest(ledger):
    run = asyncio.run(ledger.get_run(one(ledger, "select run_id from runs")))
    spec = run.spec()
    assert isinstance(spec, RunSpec) and spec.suite == "builtin"
    assert run.spec_sha256 == spec.digest()  # the spec without decide: and plan: (they change no episode)
    assert len(run.task_ids) == len(set(run.task_ids)) == EPISODES // 6 and run.seeds == 3
    frognano, hosted = spec.arms
    assert (frognano.adapter, frognano.gpu.type, frognano.gpu.count, frognano.gpu.usd_per_hour) == (
        "sglang", "H200", 1, 3.5)
    assert (hosted.adapter, hosted.prices.input, hosted.prices.output, hosted.prices.cached_input) == (
        "router", 1.25, 10.0, 0.125)


def test_episode_token_columns_are_the_sums_of_their_calls(ledger):
    mismatched = ledger.query("""
        select e.episode_id from episodes e
        left join (select episode_id, sum(prompt_tokens) as p, sum(cached_tokens) as c, sum(completion_tokens) as o,
                          sum(reasoning_tokens) as r, count(*) as n, max(step) as steps
                   from model_calls group by episode_id) m using (episode_id)
        where m.n is null or (e.prompt_tokens, e.cached_tokens, e.completion_tokens, e.reasoning_tokens,
                              e.model_calls, e.n_steps) <> (m.p, m.c, m.o, m.r, m.n, m.steps)""")
    assert mismatched == []
    assert one(ledger, "select count(*) from model_calls where run_id not in (select run_id from runs) or "
                       "episode_id not in (select episode_id from episodes)") == 0
    # Calls are sane: cached and reasoning are parts, prompts grow with the step, calls fall inside the attempt.
    assert one(ledger, "select count(*) from model_calls where cached_tokens > prompt_tokens or reasoning_tokens > "
                       "completion_tokens or total_tokens <> prompt_tokens + completion_tokens") == 0
    assert one(ledger, "select corr(step, prompt_tokens) from model_calls") > 0.8
    assert one(ledger, "select sum(cached_tokens) / sum(prompt_tokens) from model_calls") > 0.7
    assert one(ledger, "select count(*) from model_calls m join episodes e using (episode_id) where m.started_at < "
                       "e.started_at or m.started_at + to_microseconds(cast(m.latency_sec * 1e6 as bigint)) > "
                       "e.ended_at") == 0


def test_every_key_has_exactly_one_final_attempt_and_failures_are_infra(ledger):
    keys = ledger.query("select arm, task_id, seed, count(*) filter (where final) as finals, max(attempt) as last, "
                        "max(attempt) filter (where final) as final_attempt from episodes group by all")
    assert len(keys) == EPISODES
    assert all(k["finals"] == 1 and k["final_attempt"] == k["last"] for k in keys)
    failed = ledger.query("select distinct infra_error, exit_reason, resolved, reward from episodes where not final")
    assert failed == [{"infra_error": True, "exit_reason": "infrastructure_error", "resolved": False, "reward": None}]
    assert one(ledger, "select count(*) from episodes where final and infra_error") == 0
    rates = {r["arm"]: r["rate"] for r in ledger.query(
        "select arm, avg(resolved::int) as rate from episodes where final group by arm")}
    assert 0 < rates["frognano"] < rates["hosted"] < 1
    assert ledger.query("select distinct sandbox_spec_hash, isolation from episodes") == [
        {"sandbox_spec_hash": bench.SANDBOX_SPEC_HASH, "isolation": "bwrap"}]
    assert one(ledger, "select count(*) from episodes where sandbox_cpu_seconds <= 0 or ended_at <= started_at") == 0


def test_hosted_calls_cost_their_tokens_at_the_arm_prices(ledger):
    run = asyncio.run(ledger.get_run(one(ledger, "select run_id from runs")))
    prices = run.spec().arms[1].prices
    rows = ledger.query("select * from model_calls where arm = 'hosted' order by call_id limit 25")
    rows += ledger.query("select * from model_calls where arm = 'hosted' order by prompt_tokens desc limit 5")
    for row in rows:
        usage = Usage(prompt_tokens=row["prompt_tokens"], cached_tokens=row["cached_tokens"],
                      completion_tokens=row["completion_tokens"], reasoning_tokens=row["reasoning_tokens"])
        assert row["cost_usd"] == pytest.approx(explicit_cost(usage, prices), rel=1e-12)
        assert row["router_cost_usd"] == row["cost_usd"]
        assert (row["price_source"], row["model"]) == ("explicit", "openai/gpt-5")
    assert ledger.query("select arm, price_source, count(cost_usd) as priced, count(router_cost_usd) as router "
                        "from model_calls group by all order by arm") == [
        {"arm": "frognano", "price_source": "lease", "priced": 0, "router": 0},
        {"arm": "hosted", "price_source": "explicit",
         "priced": one(ledger, "select count(*) from model_calls where arm = 'hosted'"),
         "router": one(ledger, "select count(*) from model_calls where arm = 'hosted'")}]


def test_server_counters_are_cumulative_and_match_the_self_hosted_calls(ledger):
    decreasing = one(ledger, """
        select count(*) from (select value - lag(value) over (partition by metric order by taken_at) as delta
                              from server_samples) where delta < 0""")
    assert decreasing == 0
    assert {r["metric"] for r in ledger.query("select distinct metric from server_samples")} == set(
        bench.METRICS.values())
    last = {r["metric"]: r["value"] for r in ledger.query(
        "select metric, arg_max(value, taken_at) as value from server_samples group by metric")}
    totals = ledger.query("select sum(prompt_tokens - cached_tokens) as compute, sum(cached_tokens) as cache, "
                          "sum(completion_tokens) as decode from model_calls where arm = 'frognano'")[0]
    assert last[bench.METRICS["prefill_compute"]] == totals["compute"]
    assert last[bench.METRICS["prefill_cache"]] == totals["cache"]
    assert last[bench.METRICS["decode"]] == totals["decode"]
    assert last[bench.METRICS["forward_decode"]] == pytest.approx(totals["decode"] * bench.GPU_SEC_PER_DECODE_TOKEN)
    # Every scrape counts exactly the calls that had ended by then.
    at_scrape = ledger.query("""
        select s.value, (select coalesce(sum(completion_tokens), 0) from model_calls m where m.arm = 'frognano'
                         and m.started_at + to_microseconds(cast(m.latency_sec * 1e6 as bigint)) <= s.taken_at)
                        as ended
        from server_samples s where s.metric = ? order by s.taken_at""", [bench.METRICS["decode"]])
    assert [r["value"] for r in at_scrape] == [r["ended"] for r in at_scrape]
    assert at_scrape[0]["value"] == 0 and at_scrape[-1]["value"] > 0
    # One scrape every 15 s from the lease's start, and a last one as the arm stops (after the last episode).
    lease = ledger.query("select * from gpu_leases")
    assert len(lease) == 1 and (lease[0]["arm"], lease[0]["hardware"], lease[0]["usd_per_hour"]) == (
        "frognano", "H200", 3.5)
    taken = [r["taken_at"] for r in ledger.query("select distinct taken_at from server_samples order by 1")]
    gaps = [b - a for a, b in zip(taken, taken[1:])]
    assert set(gaps[:-1]) == {timedelta(seconds=15)} and timedelta(0) < gaps[-1] <= timedelta(seconds=15)
    assert taken[0] == lease[0]["started_at"] and taken[-1] <= lease[0]["ended_at"]
    assert one(ledger, "select max(ended_at) from episodes") <= taken[-1]


def test_the_ledger_can_append_to_it(tmp_path):
    path = tmp_path / "small.duckdb"
    result = bench.make_synthetic_ledger(path, episodes=12, calls_per_episode=3)
    with Ledger.open(path) as ledger:
        run_id = one(ledger, "select run_id from runs")
        task = json.loads(one(ledger, "select task_ids from runs"))[0]

        async def append():
            episode = await ledger.start_episode(run_id, "hosted", task, 0, 9)
            attempt = CallAttempt(attempt=1, model="openai/gpt-5", status="ok",
                                  usage=Usage(prompt_tokens=10, completion_tokens=2, total_tokens=12))
            call_id = await ledger.record_call(episode, 1, attempt, cost_usd=0.0, price_source="explicit",
                                               price_revision="arm sheet")
            await ledger.finish_episode(episode, exit_reason="agent", resolved=False, reward=0.0, final=False,
                                        n_steps=1)
            return call_id

        # The id sequence was advanced past the bulk-loaded ids: the next call does not collide with call_id 1.
        assert asyncio.run(append()) == result["model_calls"] + 1
        assert one(ledger, "select model_calls from episodes where attempt = 9") == 1


def test_the_file_must_be_new(tmp_path):
    path = tmp_path / "taken.duckdb"
    path.write_text("")
    with pytest.raises(FileExistsError):
        bench.make_synthetic_ledger(path, episodes=12, calls_per_episode=1)
