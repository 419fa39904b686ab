"""bench/step_path.py: the endpoint scripts both harnesses' episodes, the marginal and in-repetition arithmetic
cancels fixed costs, and the leafcost half runs its real path end to end with both arm kinds."""

from __future__ import annotations

import json

import pytest
from support.bench_scripts import load_bench

server = load_bench("step_server")
bench = load_bench("step_path")
LEAF_TOOLS = [{"type": "function", "function": {"name": "Bash"}}, {"type": "function", "function": {"name": "Read"}}]
MINI_TOOLS = [{"type": "function", "function": {"name": "bash"}}]


def conversation(assistant_turns: int) -> list[dict]:
    return [{"role": "system", "content": "s"}, {"role": "user", "content": "u"},
            *({"role": "assistant", "content": ""} for _ in range(assistant_turns))]


def test_an_n_step_episode_is_n_calls_ending_each_harness_its_own_way():
    leaf = [server.answer({"messages": conversation(k), "tools": LEAF_TOOLS}, 3) for k in range(3)]
    mini = [server.answer({"messages": conversation(k), "tools": MINI_TOOLS}, 3) for k in range(3)]
    for answers, tool in ((leaf, "Bash"), (mini, "bash")):
        for answer in answers[:2]:
            [call] = answer["choices"][0]["message"]["tool_calls"]
            assert call["function"]["name"] == tool and json.loads(call["function"]["arguments"]) == {
                "command": "echo hi"}
        assert all(a["usage"]["total_tokens"] > 0 for a in answers)
    assert leaf[2]["choices"][0]["finish_reason"] == "stop" and "tool_calls" not in leaf[2]["choices"][0]["message"]
    last = json.loads(mini[2]["choices"][0]["message"]["tool_calls"][0]["function"]["arguments"])
    assert last == {"command": server.MINI_SUBMIT}


def run(harness, rep, workers, steps, calls, wall, host, sandbox=0.0):
    return {"rep": rep, "harness": harness, "workers": workers, "steps": steps, "model_calls": calls,
            "wall_sec": wall, "host_cpu_sec": host, "sandbox_cpu_sec": sandbox, "outside_load_cores": 0.0,
            "max_rss_mib": 100.0}


def test_marginal_figures_cancel_fixed_costs_and_ratios_stay_inside_a_repetition():
    # Fixed cost 2 s / 1 s CPU in every run; 300 marginal calls. Repetition 1 is twice as slow for both.
    runs = []
    for rep, slow in ((0, 1.0), (1, 2.0)):
        runs += [run("mini", rep, 1, 20, 400, 2 + slow * 4.0, 1 + 0.004 * 400),
                 run("mini", rep, 1, 5, 100, 2 + slow * 1.0, 1 + 0.004 * 100),
                 run("leaf-sglang", rep, 1, 20, 400, 2 + slow * 2.0, 1 + 0.001 * 400, 0.002 * 400),
                 run("leaf-sglang", rep, 1, 5, 100, 2 + slow * 0.5, 1 + 0.001 * 100, 0.002 * 100)]
    rows = {r["harness"]: r for r in bench.summarize(runs, ["mini", "leaf-sglang"], [1], 20, 5)["rows"]}
    leaf, mini = rows["leaf-sglang"], rows["mini"]
    assert mini["steps_per_sec"]["min"] == pytest.approx(50) and mini["steps_per_sec"]["max"] == pytest.approx(100)
    assert leaf["host_cpu_ms"]["median"] == pytest.approx(1.0) and leaf["sandbox_cpu_ms"]["median"] == pytest.approx(2)
    assert leaf["cpu_ms"]["median"] == pytest.approx(3.0) and mini["cpu_ms"]["median"] == pytest.approx(4.0)
    # Inside each repetition leafcost is exactly twice as fast, whatever the repetition's own speed.
    assert leaf["vs_mini"]["steps_per_sec"] == {"median": pytest.approx(2), "min": pytest.approx(2),
                                                "max": pytest.approx(2)}
    assert leaf["vs_mini"]["cpu_ms"]["median"] == pytest.approx(0.75) and "vs_mini" not in mini


def test_a_repetition_interleaves_every_harness_configuration_by_configuration():
    plan = bench.configurations(["mini", "leaf-sglang"], [1, 8], [20, 5])
    assert plan[:2] == [("mini", 1, 20), ("leaf-sglang", 1, 20)] and len(plan) == len(set(plan)) == 8


def test_the_leafcost_half_runs_both_arms_through_leafcost_run(tmp_path):
    with bench.StepServer(tmp_path) as endpoint:
        results = {harness: bench.run_leaf(harness, endpoint.base_url(3), 2, 2, 3, tmp_path, tmp_path / "cache")
                   for harness in ("leaf-sglang", "leaf-router")}
    for result in results.values():
        assert result["model_calls"] == 6 and result["failed_calls"] == 0 and result["exits"] == {"agent": 2}
        assert result["sandbox_cpu_sec"] > 0 and result["host_cpu_sec"] > 0 and result["wall_sec"] > 0
        assert 0 <= result["machine_busy_cores"] and result["server_cpu_sec"] >= 0
        assert result["episode_windows"] == 2 and result["endpoint_calls"] == 6 and result["unkeyed_calls"] == 0
        assert 0 < result["stepping_sec"] < result["wall_sec"]


def test_the_endpoint_keys_every_call_to_its_episode_by_the_ids_it_hands_out():
    first = server.answer({"messages": conversation(0), "tools": MINI_TOOLS}, 3, episode=7)
    reply = first["choices"][0]["message"]
    later = [{"role": "system", "content": "s"}, {"role": "user", "content": "u"}, reply,
             {"role": "tool", "tool_call_id": reply["tool_calls"][0]["id"], "content": "hi"}]
    assert server.episode_of(later) == 7 and server.episode_of(conversation(0)) is None


def test_the_stepping_window_is_the_union_of_the_episodes_intervals():
    assert bench.stepping_seconds([[0, 2, 5], [1, 3, 5], [5, 6, 5], [5.5, 5.7, 1]]) == pytest.approx(4)
    assert bench.stepping_seconds([]) == 0


def test_stepping_and_whole_run_ratios_stay_inside_a_repetition_per_load_level():
    runs = []
    for rep, slow in ((0, 1.0), (1, 2.0)):
        for load in (0, 1):
            for harness, speed in (("mini", 1.0), ("leaf-sglang", 4.0)):
                for steps in (20, 5):
                    calls = 20 * steps
                    runs.append({**run(harness, rep, 8, steps, calls, slow * calls / (speed * 50), 1.0),
                                 "outside_load": load, "stepping_sec": slow * calls / (speed * 100)})
    rows = bench.summarize(runs, ["mini", "leaf-sglang"], [8], 20, 5, [0, 1])["windows"]
    assert len(rows) == 8 and {(r["outside_load"], r["steps"]) for r in rows} == {(0, 20), (0, 5), (1, 20), (1, 5)}
    leaf = [r for r in rows if r["harness"] == "leaf-sglang"]
    for row in leaf:
        assert row["vs_mini"]["stepping_steps_per_sec"]["min"] == pytest.approx(4)
        assert row["vs_mini"]["whole_run_steps_per_sec"]["max"] == pytest.approx(4)
        assert ("goal" in row) == (row["steps"] == 20)
    assert all(r["goal"] == {"stepping": True, "whole_run": True} for r in leaf if r["steps"] == 20)


def test_outside_load_spins_while_its_block_runs(tmp_path):
    with bench.outside_load(1) as pids:
        assert len(pids) == 1 and bench.Path(f"/proc/{pids[0]}").exists()
    assert not bench.Path(f"/proc/{pids[0]}").exists()
