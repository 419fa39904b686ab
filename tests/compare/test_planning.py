"""`leafcost plan` through the console script, on a pilot run written with the ledger's own writer (no episode
runs): its dollars, episodes and wall time against hand computation, the sources it names, the decide Monte Carlo,
--target, and its one-line refusals; and compare.plan_simulation.simulate_sequential with known true distributions."""

from __future__ import annotations

import asyncio
import json
import math
import subprocess
import sys
from datetime import datetime, timedelta, timezone
from pathlib import Path

import numpy as np
import pytest
import yaml

from adapters.base import CallAttempt, Lease, Usage
from compare.decide_spec import CheaperQuestion, DecideConfig
from compare.decision import ArmTasks
from compare.ledger import Ledger
from compare.plan_simulation import SimulatedRun, simulate_sequential
from compare.plan_sources import ArmSample, PlanError, prior_sample
from compare.spec import parse_run_spec

LEAFCOST = Path(sys.executable).with_name("leafcost")
PILOT = "pilot-1"
T0 = datetime(2026, 12, 1, 8, 0, tzinfo=timezone.utc)
TASKS = [f"t{i}" for i in range(8)]
SEEDS = 2
# every call: 1000 prompt tokens (200 cached), 100 completion tokens
USAGE = Usage(prompt_tokens=1000, cached_tokens=200, completion_tokens=100, total_tokens=1100)
RECORDED_PRICES = {"input": 1.0, "output": 4.0, "cached_input": 0.1}  # what the pilot paid
PLAN_PRICES = {"input": 2.0, "output": 8.0, "cached_input": 0.5}  # what the planned run's hosted arm pays
# per episode at the plan's prices: (800 × 2 + 200 × 0.5 + 100 × 8) / 1e6
HOSTED_EPISODE_USD = (800 * 2 + 200 * 0.5 + 100 * 8) / 1e6
SANDBOX_EPISODE_USD = 36 * 0.045 / 3600  # 36 CPU-seconds at the default $0.045 per vCPU-hour
SECONDS = {"frognano": 100.0, "hosted": 60.0}
HOSTED_RESOLVES = {0, 1, 2, 3, 4}  # tasks resolved at both seeds
FROGNANO_RESOLVES = {0, 1, 2}
GPU = {"type": "H200", "count": 2, "usd_per_hour": 3.5}


def pilot_spec(name: str = "pilot") -> dict:
    return {"name": name, "suite": "builtin", "seeds": SEEDS, "workers": 4, "arms": [
        {"name": "frognano", "adapter": "sglang", "model": "frognano-4b", "base_url": "http://127.0.0.1:30000/v1",
         "gpu": dict(GPU)},
        {"name": "hosted", "adapter": "router", "model": "vendor/big", "base_url": "http://127.0.0.1:4000/v1",
         "prices": dict(RECORDED_PRICES)}]}


async def write_run(db: Path, run_id: str, raw: dict, *, hosted_resolves: set[int], created: datetime) -> None:
    """A finished run of the spec's two arms over TASKS × SEEDS: one call per episode, known seconds and CPU."""
    spec = parse_run_spec(raw)
    async with Ledger.open(db) as ledger:
        await ledger.create_run(run_id, spec, task_ids=TASKS, created_at=created)
        for arm in spec.arms:
            await ledger.record_arm(run_id, arm.name, adapter=arm.adapter, model=arm.model, started_at=created)
        await ledger.open_lease(run_id, "frognano", Lease(kind="gpu", hardware="H200", count=2, usd_per_hour=3.5,
                                                          started_at=created,
                                                          ended_at=created + timedelta(hours=1)))
        for i, task in enumerate(TASKS):
            for seed in range(SEEDS):
                for arm, resolves in (("frognano", FROGNANO_RESOLVES), ("hosted", hosted_resolves)):
                    episode = await ledger.start_episode(run_id, arm, task, seed, 1, started_at=created)
                    hosted = arm == "hosted"
                    cost = (800 * 1.0 + 200 * 0.1 + 100 * 4.0) / 1e6 if hosted else None
                    await ledger.record_call(episode, 1, CallAttempt(attempt=1, model="m", status="ok",
                                                                     usage=USAGE, started_at=created),
                                             cost_usd=cost, price_source="explicit" if hosted else "lease",
                                             price_revision=None)
                    await ledger.finish_episode(episode, exit_reason="agent", resolved=i in resolves,
                                                reward=float(i in resolves), final=True, n_steps=1,
                                                ended_at=created + timedelta(seconds=SECONDS[arm]),
                                                elapsed_sec=SECONDS[arm], sandbox_cpu_seconds=36.0)
        for arm in spec.arms:
            await ledger.update_arm(run_id, arm.name, status="finished", ended_at=created + timedelta(hours=1))
        await ledger.set_run_status(run_id, "finished")


@pytest.fixture(scope="module")
def ledger(tmp_path_factory) -> Path:
    db = tmp_path_factory.mktemp("plan") / "ledger.duckdb"
    asyncio.run(write_run(db, PILOT, pilot_spec(), hosted_resolves=HOSTED_RESOLVES, created=T0))
    return db


def plan_spec(tmp_path: Path, *, seeds: int = SEEDS, decide: dict | None = None, priors: bool = True,
              extra_arms: bool = True, name: str = "spec.yaml") -> Path:
    raw = pilot_spec("planned")
    raw.update(seeds=seeds, limit=10)
    raw["arms"][1]["prices"] = dict(PLAN_PRICES)
    if extra_arms:
        raw["arms"] += [{"name": "claude", "adapter": "router", "model": "vendor/claude", "prices": dict(PLAN_PRICES)},
                        {"name": "unknown", "adapter": "router", "model": "vendor/x", "prices": dict(PLAN_PRICES)}]
        if priors:
            raw["plan"] = {"priors": {"claude": {"resolve_rate": 0.6, "prompt_tokens": 5000, "cached_tokens": 1000,
                                                 "completion_tokens": 400, "episode_seconds": 300}}}
    if decide is not None:
        raw["decide"] = decide
    path = tmp_path / name
    path.write_text(yaml.safe_dump(raw))
    return path


def leafcost(*args: str, expect: int = 0) -> subprocess.CompletedProcess:
    result = subprocess.run([str(LEAFCOST), *args], capture_output=True, text=True, timeout=600)
    assert result.returncode == expect, result.stderr[-3000:]
    return result


def plan(*args: str) -> dict:
    return json.loads(leafcost("plan", *args, "--json").stdout)


def test_dollars_episodes_and_wall_time_match_hand_computation(ledger, tmp_path):
    document = plan(str(plan_spec(tmp_path)), "--db", str(ledger), "--pilot", PILOT)
    arms = {arm["arm"]: arm for arm in document["arms"]}
    tasks, k = 10, SEEDS  # the builtin suite's 12 tasks, limit 10
    assert (document["tasks"], document["seeds"], document["episodes"]) == (tasks, k, tasks * k * 4)
    assert {name: arm["episodes"] for name, arm in arms.items()} == dict.fromkeys(arms, tasks * k)
    assert arms["hosted"]["source"] == f"pilot run {PILOT}" and arms["frognano"]["source"] == f"pilot run {PILOT}"
    assert arms["claude"]["source"] == "plan.priors.claude"
    assert arms["unknown"]["source"] is None
    assert arms["unknown"]["no_estimate"] == "no estimate: give --pilot RUN or plan.priors.unknown"
    # hosted: the pilot's tokens at the planned run's prices (not the prices the pilot paid), plus its sandbox
    hosted = arms["hosted"]
    assert hosted["usd"]["tokens"] == pytest.approx(tasks * k * HOSTED_EPISODE_USD, rel=1e-12)
    assert hosted["usd"]["sandbox"] == pytest.approx(tasks * k * SANDBOX_EPISODE_USD, rel=1e-12)
    assert hosted["usd"]["total"] == pytest.approx(hosted["usd"]["tokens"] + hosted["usd"]["sandbox"], rel=1e-12)
    assert hosted["tokens_per_episode"] == {"prompt": 1000.0, "cached": 200.0, "completion": 100.0}
    assert hosted["resolve_rate"] == pytest.approx(len(HOSTED_RESOLVES) / len(TASKS))
    # claude from priors: tokens × prices exactly, no sandbox
    claude_episode = (4000 * 2 + 1000 * 0.5 + 400 * 8) / 1e6
    assert arms["claude"]["usd"]["tokens"] == pytest.approx(tasks * k * claude_episode, rel=1e-9)
    assert arms["claude"]["usd"]["sandbox"] is None
    # wall time: every estimated arm's episode-seconds over the 4 workers; the lease holds 2 GPUs for all of it
    wall = tasks * k * (SECONDS["frognano"] + SECONDS["hosted"] + 300) / 4
    assert document["wall_seconds"] == pytest.approx(wall)
    frognano = arms["frognano"]
    assert frognano["gpu_hours"] == pytest.approx(wall / 3600 * 2)
    assert frognano["usd"]["gpu"] == pytest.approx(wall / 3600 * 2 * 3.5)
    assert document["usd_leaves_out"] == ["unknown"]  # the arm with no estimate has no dollars
    assert document["usd"] == pytest.approx(sum(arms[name]["usd"]["total"] for name in ("frognano", "hosted",
                                                                                        "claude")))


def test_widths_follow_the_normal_approximation(ledger, tmp_path):
    document = plan(str(plan_spec(tmp_path, extra_arms=False)), "--db", str(ledger), "--pilot", PILOT)
    arms = {arm["arm"]: arm for arm in document["arms"]}
    z, n = 1.959963984540054, 10
    # hosted's per-task scores: 1 on 5 of 8 tasks, 0 on 3, each at both seeds: no within-task spread
    scores = np.array([1.0] * 5 + [0.0] * 3)
    assert arms["hosted"]["widths"]["avg_at_k"] == pytest.approx(2 * z * math.sqrt(scores.var(ddof=1) / n))
    # cost per resolved attempt: every task costs the same, so the influence is −resolved/mean(resolved)
    cost = np.full(8, SEEDS * (HOSTED_EPISODE_USD + SANDBOX_EPISODE_USD))
    resolved = scores * SEEDS
    theta = cost.sum() / resolved.sum()
    psi = cost / cost.mean() - resolved / resolved.mean()
    assert arms["hosted"]["widths"]["cost_per_resolved_attempt"] == pytest.approx(
        2 * z * theta * math.sqrt(psi.var(ddof=1) / n))
    comparison = document["comparison"]
    assert comparison["arms"] == ["frognano", "hosted"] and comparison["paired"] is True
    difference = np.array([1.0] * 3 + [0.0] * 5) - scores
    assert comparison["widths"]["avg_at_k_difference"] == pytest.approx(
        2 * z * math.sqrt(difference.var(ddof=1) / n))
    # more tasks, narrower by √(10/12): the same pilot planned for the whole suite (12 tasks)
    path = plan_spec(tmp_path, extra_arms=False, name="whole.yaml")
    raw = yaml.safe_load(path.read_text())
    del raw["limit"]
    path.write_text(yaml.safe_dump(raw))
    whole = plan(str(path), "--db", str(ledger), "--pilot", PILOT)
    assert whole["tasks"] == 12
    widths = {arm["arm"]: arm["widths"]["avg_at_k"] for arm in whole["arms"]}
    assert widths["hosted"] == pytest.approx(arms["hosted"]["widths"]["avg_at_k"] * math.sqrt(10 / 12))


def test_the_ledger_source_is_the_latest_finished_run_of_the_model(ledger, tmp_path):
    document = plan(str(plan_spec(tmp_path)), "--db", str(ledger))
    arms = {arm["arm"]: arm for arm in document["arms"]}
    assert arms["hosted"]["source"] == f"ledger: run {PILOT} of model vendor/big"
    assert arms["frognano"]["source"] == f"ledger: run {PILOT} of model frognano-4b"
    table = leafcost("plan", str(plan_spec(tmp_path)), "--db", str(ledger)).stdout
    assert "unknown: no estimate: give --pilot RUN or plan.priors.unknown" in table


def test_decide_monte_carlo_reports_the_distribution(ledger, tmp_path):
    decide = {"cheaper": {"arms": ["hosted", "frognano"]}, "reaches": {"arm": "hosted", "avg_at_k": 0.3},
              "round_tasks": 2, "min_tasks": 4}
    document = plan(str(plan_spec(tmp_path, decide=decide, extra_arms=False)), "--db", str(ledger), "--pilot",
                    PILOT, "--simulations", "40")
    mc = document["decide"]
    assert mc["simulations"] == 40 and mc["round_tasks"] == 2
    for figure in ("tasks", "episodes", "usd"):
        d = mc[figure]
        assert d["p10"] <= d["p50"] <= d["p90"] and d["p10"] <= d["mean"] <= d["p90"]
    assert 2 <= mc["tasks"]["p10"] and mc["tasks"]["p90"] <= 10
    assert mc["episodes"]["mean"] == pytest.approx(mc["tasks"]["mean"] * SEEDS * 2)
    assert set(mc["verdicts"]) == {"cheaper", "reaches"}
    for shares in mc["verdicts"].values():
        assert sum(shares.values()) == pytest.approx(1.0)
    assert sum(mc["stops"].values()) == pytest.approx(1.0) and mc["decided_probability"] == mc["stops"]["decided"]


def test_decide_needs_a_source_for_the_questions_arms(ledger, tmp_path):
    decide = {"reaches": {"arm": "unknown", "avg_at_k": 0.3}}
    document = plan(str(plan_spec(tmp_path, decide=decide)), "--db", str(ledger), "--pilot", PILOT)
    assert document["decide"] is None
    assert any(line.startswith("decide: no estimate for unknown") for line in document["assumptions"])


def truth_sampler(rate_a: float, rate_b: float, usd_a: float, usd_b: float, seeds: int = 3):
    """Known true distributions: each task's rate the arm's rate, $ per episode fixed."""
    def sample(rng: np.random.Generator, n: int) -> dict[str, ArmTasks]:
        out = {}
        for name, rate, usd in (("a", rate_a, usd_a), ("b", rate_b, usd_b)):
            resolved = rng.binomial(seeds, rate, n)
            cost = np.full(n, usd * seeds) * rng.lognormal(0, 0.3, n)
            out[name] = ArmTasks(arm=name, resolved=resolved, attempts=np.full(n, seeds), cost_usd=cost,
                                 spent_usd=float(cost.sum()))
        return out
    return sample


def test_simulate_sequential_a_bigger_effect_needs_fewer_tasks():
    config = DecideConfig(cheaper=CheaperQuestion(arms=["a", "b"]), round_tasks=10, min_tasks=20)
    used = {}
    for ratio in (1.3, 3.0):
        runs = simulate_sequential(config, truth_sampler(0.5, 0.5, 1.0, ratio), 400, 3, np.random.default_rng(1),
                                   30, workers=4)
        assert all(isinstance(run, SimulatedRun) for run in runs) and len(runs) == 30
        assert {run.action for run in runs} <= {"decided", "exhausted"}
        used[ratio] = np.mean([run.tasks for run in runs])
        decided = [run for run in runs if run.action == "decided"]
        assert decided and all(run.verdicts()["cheaper"] == "first" for run in decided)  # a is the cheaper
        assert all(run.episodes == run.tasks * 3 * 2 for run in runs)
    assert used[3.0] < used[1.3]


def test_simulate_sequential_stops_at_the_budget():
    config = DecideConfig.model_validate({"cheaper": {"arms": ["a", "b"]}, "round_tasks": 10,
                                          "budget": {"total_usd": 100}})
    runs = simulate_sequential(config, truth_sampler(0.5, 0.5, 1.0, 1.0), 400, 3, np.random.default_rng(2), 5,
                               workers=4)
    assert {run.action for run in runs} == {"budget"}
    assert all(run.usd <= 100 for run in runs)


def test_target_avg_width_chooses_tasks_and_says_the_cost(ledger, tmp_path):
    document = plan(str(plan_spec(tmp_path, extra_arms=False)), "--db", str(ledger), "--pilot", PILOT,
                    "--target", "avg-width=0.7")
    hosted = document["target"]["arms"]["hosted"]
    z = 1.959963984540054
    variance = np.array([1.0] * 5 + [0.0] * 3).var(ddof=1)
    assert hosted["tasks"] == math.ceil((2 * z / 0.7) ** 2 * variance) and hosted["seeds"] == SEEDS
    assert hosted["reachable"] is True
    assert hosted["usd"] == pytest.approx(hosted["tasks"] * SEEDS * (HOSTED_EPISODE_USD + SANDBOX_EPISODE_USD))
    narrow = plan(str(plan_spec(tmp_path, extra_arms=False)), "--db", str(ledger), "--pilot", PILOT,
                  "--target", "avg-width=0.05")["target"]["arms"]["hosted"]
    assert narrow["reachable"] is False and "the suite has 10" in narrow["note"]


def test_target_decide_needs_fewer_tasks_for_a_bigger_difference(ledger, tmp_path):
    """Two pilots: in the second, hosted resolves every task, so it is far cheaper per resolved attempt."""
    db = ledger.parent / "two.duckdb"
    asyncio.run(write_run(db, "close", pilot_spec(), hosted_resolves={0, 1, 2, 3}, created=T0))
    asyncio.run(write_run(db, "far", pilot_spec(), hosted_resolves=set(range(8)), created=T0 + timedelta(days=1)))
    decide = {"reaches": {"arm": "hosted", "avg_at_k": 0.3}, "round_tasks": 2}
    spec = plan_spec(tmp_path, decide=decide, extra_arms=False)
    needed = {}
    for run in ("close", "far"):
        target = plan(str(spec), "--db", str(db), "--pilot", run, "--target", "decide", "--simulations", "40")
        needed[run] = target["target"]
    assert needed["far"]["tasks"] is not None and needed["far"]["probability"] >= 0.9
    assert needed["far"]["episodes"] == needed["far"]["tasks"] * SEEDS * 2
    assert needed["close"]["tasks"] is None or needed["close"]["tasks"] > needed["far"]["tasks"]


@pytest.mark.parametrize("target", ["avg-width=0", "avg-width=abc", "width=0.05", "avg-width=1.5"])
def test_a_bad_target_is_one_line_naming_the_forms(ledger, tmp_path, target):
    result = leafcost("plan", str(plan_spec(tmp_path)), "--db", str(ledger), "--target", target, expect=2)
    assert result.stderr.count("\n") == 1
    assert result.stderr.startswith(f"leafcost: --target '{target}': give --target avg-width=W")


def test_target_decide_without_a_question_is_refused(ledger, tmp_path):
    result = leafcost("plan", str(plan_spec(tmp_path)), "--db", str(ledger), "--target", "decide", expect=2)
    assert result.stderr.startswith("leafcost: --target decide: the spec has no decide: question")


def test_an_unknown_pilot_names_the_ledgers_runs(ledger, tmp_path):
    result = leafcost("plan", str(plan_spec(tmp_path)), "--db", str(ledger), "--pilot", "nope", expect=2)
    assert result.stderr.count("\n") == 1
    assert result.stderr.startswith("leafcost: --pilot nope: no run 'nope' in this ledger (recent runs: ")
    assert PILOT in result.stderr


def test_a_spec_error_is_the_specs_own_line(ledger, tmp_path):
    path = plan_spec(tmp_path)
    raw = yaml.safe_load(path.read_text())
    raw["plan"]["priors"]["ghost"] = raw["plan"]["priors"]["claude"]
    path.write_text(yaml.safe_dump(raw))
    result = leafcost("plan", str(path), "--db", str(ledger), expect=2)
    assert result.stderr.count("\n") == 1
    assert "plan.priors.ghost: no arm named 'ghost'" in result.stderr


def test_priors_alone_plan_without_a_ledger_and_an_unloadable_suite_says_why(tmp_path):
    path = plan_spec(tmp_path)
    raw = yaml.safe_load(path.read_text())
    raw.update(suite=str(tmp_path / "no-such-suite"), limit=40)
    path.write_text(yaml.safe_dump(raw))
    document = plan(str(path), "--db", str(tmp_path / "none.duckdb"))
    assert document["tasks"] == 40 and "could not be loaded here" in document["tasks_note"]
    arms = {arm["arm"]: arm for arm in document["arms"]}
    assert [name for name, arm in arms.items() if arm["source"]] == ["claude"]
    assert arms["claude"]["episodes"] == 40 * SEEDS
    assert arms["claude"]["resolve_rate"] == pytest.approx(0.6, abs=0.03)  # drawn from the prior's Beta
    assert not (tmp_path / "none.duckdb").exists()  # planning writes nothing
    result = leafcost("plan", str(path), "--db", str(tmp_path / "none.duckdb"), "--pilot", PILOT, expect=2)
    assert result.stderr.startswith(f"leafcost: --pilot {PILOT}: no ledger at ")


def test_an_arm_without_prices_has_no_dollars_and_says_so(tmp_path):
    path = plan_spec(tmp_path)
    raw = yaml.safe_load(path.read_text())
    del raw["arms"][2]["prices"]
    raw["arms"][2]["model"] = "vendor/not-in-any-price-map"
    path.write_text(yaml.safe_dump(raw))
    document = plan(str(path), "--db", str(tmp_path / "none.duckdb"))
    claude = {arm["arm"]: arm for arm in document["arms"]}["claude"]
    assert claude["source"] == "plan.priors.claude" and claude["usd"]["total"] is None
    assert any("has no price: give the arm prices" in note for note in claude["notes"])
    assert "claude" in document["usd_leaves_out"]


def test_a_pilot_with_other_seeds_is_scaled_per_episode(ledger, tmp_path):
    decide = {"reaches": {"arm": "hosted", "avg_at_k": 0.3}, "round_tasks": 5}
    document = plan(str(plan_spec(tmp_path, seeds=3, decide=decide, extra_arms=False)), "--db", str(ledger),
                    "--pilot", PILOT, "--simulations", "20")
    hosted = {arm["arm"]: arm for arm in document["arms"]}["hosted"]
    assert hosted["episodes"] == 30
    assert hosted["usd"]["tokens"] == pytest.approx(30 * HOSTED_EPISODE_USD, rel=1e-12)
    assert document["decide"]["episodes"]["mean"] == pytest.approx(document["decide"]["tasks"]["mean"] * 3 * 2)


def _pilot(costs: np.ndarray, resolved: np.ndarray) -> ArmSample:
    ones = np.ones(costs.size)
    return ArmSample(source="pilot run p", run_id="p", tasks=[f"t{i}" for i in range(costs.size)],
                     resolved=resolved.astype(float), attempts=ones, episodes=ones, model_usd=costs,
                     sandbox_usd=None, seconds=ones * 60)


def test_the_monte_carlo_shrinks_a_pilots_cost_effect_that_its_noise_explains():
    """A pilot's cost ratio whose log is within its standard error of 0 is shrunk to 0 (James–Stein: the effect
    kept is max(0, 1 − SE²/L̂²) of it): two pilots that differ only by such an effect give the very same simulated
    runs; an effect of 3 SE is kept (8/9 of it) and decides more runs."""
    from compare.planning import plan_from_samples

    rng = np.random.default_rng(7)
    resolved = (rng.random(40) < 0.6).astype(int)
    noise = rng.lognormal(0, 1, (2, 40))
    base = noise[0] * noise[1].sum() / noise[0].sum()  # the pilot's ratio exactly 1
    psi = base / base.mean() - noise[1] / noise[1].mean()  # the paired influence of the log ratio (resolved cancel)
    se = float(np.std(psi, ddof=1) / math.sqrt(40))
    arms = [{"name": name, "adapter": "router", "model": f"v/{name}", "base_url": "http://127.0.0.1:4000/v1",
             "prices": {"input": 1.0, "output": 1.0}} for name in ("a", "b")]
    spec = parse_run_spec({"name": "s", "suite": "builtin", "seeds": 1, "workers": 4, "arms": arms,
                           "decide": {"cheaper": {"arms": ["a", "b"]}, "round_tasks": 20}})

    def simulated(first_cost: np.ndarray):
        plan = plan_from_samples(spec, {"a": _pilot(first_cost, resolved), "b": _pilot(noise[1], resolved)}, 400,
                                 None, simulations=60)
        return plan.decide

    tie = simulated(base)
    assert simulated(base * math.exp(0.9 * se)) == tie  # within its noise: shrunk to the tie exactly
    assert simulated(base * math.exp(3 * se)).decided_probability > tie.decided_probability


def test_a_measured_sources_dollars_carry_their_standard_error_and_priors_none():
    """The plan's dollars from a pilot are a mean over its tasks: their relative standard error is the spread of
    the per-task dollars ÷ √tasks (here one episode per task); stated priors have none."""
    from compare.planning import plan_from_samples

    costs = np.array([1.0, 2.0, 3.0, 6.0])
    arms = [{"name": "a", "adapter": "router", "model": "v/a", "base_url": "http://127.0.0.1:4000/v1",
             "prices": {"input": 1.0, "output": 1.0}},
            {"name": "b", "adapter": "router", "model": "v/b", "base_url": "http://127.0.0.1:4000/v1",
             "prices": {"input": 1.0, "output": 1.0}}]
    spec = parse_run_spec({"name": "s", "suite": "builtin", "seeds": 1, "workers": 4, "arms": arms,
                           "plan": {"priors": {"b": {"resolve_rate": 0.5, "prompt_tokens": 1000,
                                                     "completion_tokens": 100}}}})
    plan = plan_from_samples(spec, {"a": _pilot(costs, np.array([1, 0, 1, 1]))}, 100, None)
    a = plan.arms[0]
    assert a.usd_relative_se == pytest.approx(np.std(costs / costs.mean(), ddof=1) / math.sqrt(4))
    assert a.usd["total"] == pytest.approx(costs.mean() * 100)
    with_prior = plan_from_samples(spec, {"b": prior_sample(spec, spec.arms[1], spec.plan.priors["b"])}, 100, None)
    assert with_prior.arms[1].usd_relative_se is None and with_prior.arms[1].usd["total"] is not None


def test_simulate_sequential_judges_a_seen_only_claim_on_the_seen_tasks_alone():
    """`reaches: {tasks: seen}`: the simulated runs pass the seen mask to look as the runner does, so a claim whose
    seen tasks all come in the last round is never decided before it; counting every task, it is decided early."""
    config = DecideConfig.model_validate({"reaches": {"arm": "a", "avg_at_k": 0.3, "tasks": "seen"},
                                          "round_tasks": 10, "min_tasks": 10})
    total = 200
    last_round_seen = np.arange(total) >= total - 10
    seen_only = simulate_sequential(config, truth_sampler(0.9, 0.9, 1.0, 1.0), total, 3, np.random.default_rng(3),
                                    20, workers=4, reaches_tasks=last_round_seen)
    every_task = simulate_sequential(config, truth_sampler(0.9, 0.9, 1.0, 1.0), total, 3, np.random.default_rng(3),
                                     20, workers=4)
    assert all(run.tasks == total for run in seen_only if run.action == "decided")
    assert all(run.action == "decided" and run.tasks < total for run in every_task)


def test_the_plan_marks_the_seen_tasks_as_the_runner_does(make_task, tmp_path):
    from compare.planning import suite_tasks_and_seen

    dated = {"old": "2024-01-10", "new": "2025-03-01", "undated": None}
    suite = tmp_path / "tasks"
    for name, day in dated.items():
        make_task(name)
        if day is not None:
            toml = suite / name / "task.toml"
            toml.write_text(toml.read_text() + f'\n[metadata]\ncreated_at = "{day}"\n')
    arm = {"name": "frog", "adapter": "sglang", "model": "m", "base_url": "http://127.0.0.1:9/v1",
           "gpu": dict(GPU), "released": "2024-06-01"}
    spec = parse_run_spec({"name": "seen", "suite": str(suite), "seeds": 1, "arms": [arm],
                           "decide": {"reaches": {"arm": "frog", "avg_at_k": 0.5, "tasks": "seen"}}})
    from compare.runner import task_order
    from sandbox import SandboxOptions, load_suite

    order = [t.task_id for t in task_order(load_suite(str(suite), cache_dir=SandboxOptions().cache_dir), spec)]
    tasks, note, seen = suite_tasks_and_seen(spec)
    assert (tasks, note) == (3, None)
    assert dict(zip(order, seen.tolist())) == {"old": True, "new": False, "undated": True}
    every = parse_run_spec({**spec.model_dump(mode="json", exclude_none=True),
                            "decide": {"reaches": {"arm": "frog", "avg_at_k": 0.5}}})
    assert suite_tasks_and_seen(every)[2] is None
    too_old = parse_run_spec({**spec.model_dump(mode="json", exclude_none=True),
                              "arms": [{**arm, "released": "2023-01-01"}]})  # only the undated task is seen
    assert suite_tasks_and_seen(too_old)[2].sum() == 1
    (suite / "undated").rename(tmp_path / "moved")  # now every task is fresh for the arm: refused, as the runner does
    with pytest.raises(PlanError, match="every task is fresh for arm frog"):
        suite_tasks_and_seen(too_old)
