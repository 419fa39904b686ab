"""Every script in bench/ runs at HEAD: each measurement's --quick mode runs here as its own process, and its --json
output has the structure docs/benchmarks.md reads and the invariants its counts must keep (calls per episode,
errors, coverage shares that add up). Timings are the benches' to report, never asserted here. The helper
processes (step_server, step_mini_driver, kube_standin, trivial_task) run inside their callers' quick modes."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from support.bench_scripts import BENCH, load_bench

REPO = BENCH.parent
# Where each measurement's quick mode is run: by test_SCRIPT below (None), or by the test file of its own that also
# checks its parts.
MEASUREMENTS = {"api_latency": None, "ci_coverage": None, "container_tools": None, "harness_throughput": None,
                "kube_scale": None, "mine_real_repos": None, "sandbox_overhead": None, "step_path": None,
                "summary_speed": None, "synthetic_ledger": None, "claim_simulation": "test_claim_simulation.py",
                "decide_simulation": "test_decide_simulation.py", "startup": None,
                "episode_overhead": None, "container_api": None, "run_all": None}
HELPERS = {"step_server": "step_path", "step_mini_driver": "step_path", "kube_standin": "kube_scale",
           "trivial_task": "harness_throughput"}


def quick(script: str, *extra: str) -> dict:
    """bench/SCRIPT.py --quick --json as its own process; its JSON. PYTHONPATH makes the `leafcost` commands the
    benches start run this checkout's code."""
    done = subprocess.run([sys.executable, str(BENCH / f"{script}.py"), "--quick", "--json", *extra], cwd=REPO,
                          env={**os.environ, "PYTHONPATH": str(REPO)}, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]
    document = json.loads(done.stdout)
    assert document["quick"] is True
    return document


def test_every_script_in_bench_is_a_measurement_with_a_quick_test_or_a_helper_of_one():
    assert {path.stem for path in BENCH.glob("*.py")} == set(MEASUREMENTS) | set(HELPERS)
    for script, test_file in MEASUREMENTS.items():
        if test_file is None:
            assert callable(globals().get(f"test_{script}")), script
        else:
            text = (Path(__file__).parent / test_file).read_text()
            assert f"{script}.py" in text and '"--quick"' in text, (script, test_file)
    for helper, caller in HELPERS.items():
        assert helper in (BENCH / f"{caller}.py").read_text(), (helper, caller)


def test_sandbox_overhead():
    bench = load_bench("sandbox_overhead")
    report = quick("sandbox_overhead")
    by_label = {t["label"]: t for t in report["round_trip"]}
    assert len(by_label) == 5 and {bench.TOOL, bench.HOST_LOGIN, bench.HOST_PLAIN} <= set(by_label)
    assert all(t["rounds"] == bench.QUICK_ROUNDS and 0 < t["p50_ms"] <= t["p90_ms"] for t in by_label.values())
    assert report["ratio_p50"] == pytest.approx(by_label[bench.TOOL]["p50_ms"] / by_label[bench.HOST_LOGIN]["p50_ms"])
    assert report["goal_met"] == (report["ratio_p50"] <= report["goal_ratio"])
    [task] = report["tasks"]
    assert task["task_id"] == report["round_trip_task"] and report["start_rounds"] == bench.QUICK_START_ROUNDS
    assert task["start_p50_ms"] == report["start_p50_ms"] and task["build_cold_s"] > 0
    machine = report["machine"]
    assert "load average" in machine["load_before"] and "load average" in machine["load_after"]


def test_container_tools(container_images):
    bench = load_bench("container_tools")
    report = quick("container_tools")
    rounds = [row["rounds"] for row in report["timings"].values()]
    assert rounds == [bench.QUICK_ROUNDS] * 3 + [bench.QUICK_START_ROUNDS] * 2
    assert all(0 < row["p50_ms"] for row in report["timings"].values())
    p50 = [row["p50_ms"] for row in report["timings"].values()]
    assert list(report["ratios"].values()) == pytest.approx([p50[1] / p50[0], p50[0] / p50[2], p50[3] / p50[4]])
    assert "load average" in report["machine"]["load_before"]


def test_harness_throughput():
    bench = load_bench("harness_throughput")
    report = quick("harness_throughput")
    episodes, steps = bench.QUICK_EPISODES, bench.QUICK_STEPS + 1  # the tool calls, then the answer
    assert (report["episodes"], report["steps_per_episode"], report["tool"]) == (episodes, steps, "Read")
    assert report["model_calls"] == episodes * steps and report["failed_calls"] == 0
    assert report["exit_reasons"] == {"agent": episodes} and report["status"] == "finished"
    assert report["harness_cpu_ms_per_step"] > 0 and report["sandbox_cpu_ms_per_step"] >= 0
    assert "load average" in report["machine"]["load_before"]


@pytest.mark.slow  # two `leafcost run`s on the kubernetes backend, stand-ins in their own processes
def test_kube_scale():
    bench = load_bench("kube_scale")
    report = quick("kube_scale")
    design, steps = bench.QUICK, bench.QUICK["steps"]
    assert [run["episodes"] for run in report["runs"]] == design["episodes"]
    for run in report["runs"]:
        n = run["episodes"]
        assert (run["resolved"], run["errors"], run["summary_status"]) == (n, 0, "finished")
        assert run["model_calls"] == n * (steps + 1) and run["tool_calls"] == n * steps
        assert run["created"] == run["deleted"] == n and run["live"] == 0 and 1 <= run["max_live"] <= n
    assert set(report["marginal"]) == {"cpu_sec_per_episode", "rss_mib_per_episode"}
    streams = report["exec_streams"]
    assert streams["cat"]["echoed_mib"] == design["mib"] and streams["cat"]["exit_code"] == 0
    assert len(streams["stream"]["rounds"]) == len(streams["exec_per_call"]["rounds"]) == design["rounds"]
    assert [r["calls"] for r in streams["stream"]["rounds"]] == [design["calls"]] * design["rounds"]
    assert [r["calls"] for r in streams["exec_per_call"]["rounds"]] == [design["exec_calls"]] * design["rounds"]
    assert len(streams["exec_over_stream_p50"]) == design["rounds"]
    assert len(report["machine"]["loadavg_at_start"]) == len(report["machine"]["loadavg_at_end"]) == 3


def test_mine_real_repos(container_images):
    bench = load_bench("mine_real_repos")
    report = quick("mine_real_repos")
    [repo] = report["repositories"]
    assert report["runs"] == bench.QUICK_RUNS and repo["repository"] == bench.QUICK_NAME
    # the root commit (no parent), the fix with its test (kept, and it validates), the README (no tests)
    assert (repo["commits_scanned"], repo["candidates_looked_at"], repo["built"], repo["kept"]) == (3, 1, 1, 1)
    assert (repo["validated"], repo["invalid"], report["validated_total"]) == (1, 0, 1)
    assert repo["dropped"] == {"no_parent": 1, "no_tests": 1} and repo["error"] is None
    assert repo["kept_per_100_commits"] == pytest.approx(100 / 3, abs=0.01)
    assert repo["build_seconds"]["n"] == repo["candidate_seconds_excluding_builds"]["n"] == 1
    assert "(1 min)" in repo["load_before"] and "(1 min)" in repo["load_after"]


@pytest.mark.slow  # four `leafcost run`s through bubblewrap sandboxes against the step server
def test_step_path(tmp_path):
    bench = load_bench("step_path")
    # A fresh cache directory holds no venv for mini-swe-agent, and --quick installs nothing: leafcost's arms only.
    report = quick("step_path", "--cache-dir", str(tmp_path))
    design, leaf = report["design"], ["leaf-sglang", "leaf-router"]
    assert design["harnesses"] == leaf and design["warm_up"] is False and "--quick" in report["skipped"]["mini"]
    assert {k: design[k] for k in ("reps", "episodes", "workers")} == {
        "reps": bench.QUICK["reps"], "episodes": bench.QUICK["episodes"], "workers": bench.QUICK["workers"]}
    lengths = [bench.QUICK["long"], bench.QUICK["short"]]
    assert sorted((r["harness"], r["steps"]) for r in report["runs"]) == sorted(
        (h, steps) for h in leaf for steps in lengths)
    for run in report["runs"]:
        assert run["model_calls"] == design["episodes"] * run["steps"] and run["failed_calls"] == 0
        assert run["exits"] == {"agent": design["episodes"]} and run["sandbox_cpu_sec"] > 0
    rows = report["summary"]["rows"]
    assert [(row["harness"], row["workers"]) for row in rows] == [(h, w) for w in design["workers"] for h in leaf]
    assert not any("vs_mini" in row for row in rows)


def test_synthetic_ledger():
    bench = load_bench("synthetic_ledger")
    report = quick("synthetic_ledger")
    tasks = bench.QUICK_EPISODES // (2 * 3)
    assert (report["tasks"], report["seeds"], report["arms"]) == (tasks, 3, ["frognano", "hosted"])
    assert report["final_episodes"] == bench.QUICK_EPISODES and report["calls_per_episode"] == 10
    assert report["episodes"] == report["final_episodes"] + report["infra_failed_attempts"]
    assert report["model_calls"] > 0 and report["chunks"] == 1 and report["kept"] is False
    assert "load average" in report["machine"]["load_before"]


def test_summary_speed():
    synthetic = load_bench("synthetic_ledger")
    report = quick("summary_speed")
    tasks = synthetic.QUICK_EPISODES // (2 * 3)
    assert report["repeat"] == load_bench("summary_speed").QUICK_REPEAT
    assert [(a["arm"], a["tasks"], a["attempts"]) for a in report["arms"]] == [
        ("frognano", tasks, tasks * 3), ("hosted", tasks, tasks * 3)]
    assert all(0 <= a["avg_at_k"] <= 1 for a in report["arms"])
    assert report["arms"][1]["utilization"] is None and 0 < report["arms"][0]["utilization"] <= 1  # the lease's arm
    assert report["episodes"] >= synthetic.QUICK_EPISODES and report["ingestion_calls_per_sec"] > 0
    assert 0 < report["summarize_p50_sec"] <= report["summarize_max_sec"]


def test_api_latency():
    bench = load_bench("api_latency")
    report = quick("api_latency")
    assert report["sequential"]["requests"] == bench.QUICK_REQUESTS and report["sequential"]["errors"] == 0
    concurrent = report["concurrent"]
    assert concurrent["clients"] == bench.QUICK_CLIENTS and concurrent["errors"] == 0 and concurrent["requests"] > 0
    assert report["summary_bytes"] > 0 and report["ledger_build_sec"] is not None
    assert report["episodes"] >= load_bench("synthetic_ledger").QUICK_EPISODES
    assert "load average" in report["machine"]["load_before"]


def test_ci_coverage():
    bench = load_bench("ci_coverage")
    report = quick("ci_coverage")
    assert [r["design"] for r in report["results"]] == list(bench.DESIGNS)
    for result in report["results"]:
        assert (result["runs"], result["resamples"]) == (bench.QUICK_RUNS, bench.QUICK_RESAMPLES)
        assert set(result["coverage"]) == {key for key, _ in bench.FIGURES}
        for c in result["coverage"].values():
            # every run covers, misses below or above, or has no interval at all (a miss)
            assert c["now"] + c["miss_below"] + c["miss_above"] + c["no_interval"] == pytest.approx(1)
            assert 0 <= c["before"] <= 1 and 0 <= c["one_sided"] <= 1 - c["no_interval"]
    assert report["results"][0]["truth"]["avg_at_k"] == pytest.approx(0.5)  # Beta(.7, .7) is symmetric
    assert "load average" in report["machine"]["load_before"]


def test_startup():
    document = quick("startup")
    rows = {(row["what"], row["src"]): row for row in document["summary"]["rows"]}
    assert set(rows) == {("help", "head"), ("run-router", "head"), ("run-sglang", "head")}
    assert all(row["n"] == 1 for row in rows.values())
    for what in ("run-router", "run-sglang"):  # the endpoint saw the probe, then the first request, then the end
        row = rows[what, "head"]
        assert 0 < row["models_probe_sec"]["median"] < row["first_request_sec"]["median"] < row["wall_sec"]["median"]


def test_episode_overhead():
    document = quick("episode_overhead")
    (checkout,) = document["checkouts"]
    assert checkout["episodes"] == 2 and document["episodes"] == 2
    stages = checkout["stages"]
    assert stages["sandbox start (bwrap + runner)"]["calls"] == 1  # per episode: the verifier runs none
    assert stages["verify: capture + restore + git add + test.sh (one exec)"]["calls"] == 1
    assert "verify: test.sh (+ git add)" not in stages  # test.sh ran in that one bubblewrap
    total = checkout["total"]
    assert total["cpu"] == pytest.approx(total["host"] + total["sandbox"])
    assert checkout["range"]["cpu"][0] <= checkout["range"]["cpu"][1]


def test_container_api(container_images):
    document = quick("container_api")
    assert {row["rounds"] for label, row in document["timings"].items() if label.startswith("step:")} == {3}
    assert all(row["p50_ms"] > 0 for row in document["timings"].values())
    for mode in ("api", "cli", "local"):  # open + runner start + close of each way to run a sandbox
        assert document[f"episode fixed cost p50 ms, {mode}"] > 0
    assert all(ratio > 0 for ratio in document["ratios"].values())


def test_run_all(tmp_path):
    """bench/run_all.py over two cheap quick modes: one record per script with its command, load and headline rows,
    the raw JSON kept, and --write-docs replacing only the table block, in a copy of docs/benchmarks.md."""
    run_all = load_bench("run_all")
    assert {s.name for s in run_all.SCRIPTS} == set(MEASUREMENTS) - {"run_all"} == set(run_all.HEADLINES)
    assert set(run_all.HELPERS) == set(HELPERS)
    original = (REPO / "docs" / "benchmarks.md").read_text()
    docs, raw = tmp_path / "benchmarks.md", tmp_path / "raw.json"
    docs.write_text(original)
    document = quick("run_all", "--only", "startup", "episode_overhead", "--out-json", str(raw), "--write-docs",
                     "--docs", str(docs))
    assert [s["name"] for s in document["scripts"]] == ["episode_overhead", "startup"]  # SCRIPTS' order
    assert set(document["machine"]) >= {"nproc", "cpu", "kernel", "python", "bubblewrap", "podman", "commit"}
    for script in document["scripts"]:
        assert script["status"] == "ok" and script["command"].endswith(f"bench/{script['name']}.py --quick --json")
        assert len(script["load_before"]) == len(script["load_after"]) == 3 and "output" not in script
        for figure in script["figures"]:
            assert set(figure) == {"metric", "leafcost", "other", "ratio", "goal", "met"}
            assert figure["met"] in (True, False, None) and figure["metric"] != "headline not read"
    goals = {s["name"]: [f["goal"] for f in s["figures"]] for s in document["scripts"]}
    assert goals == {"episode_overhead": ["≤ 50 ms", "≤ 250 ms"], "startup": ["≤ 0.5 s"] * 3}
    kept = json.loads(raw.read_text())
    assert [s["output"]["quick"] for s in kept["scripts"]] == [True, True]
    block = run_all.render(kept)  # the kept raw results render the block --write-docs wrote
    written = docs.read_text()
    assert written.count(run_all.BEGIN) == written.count(run_all.END) == 1 and block in written
    # each script names its first figure row and its command row
    assert "`--quick`" in block and block.count("\n| episode_overhead |") == block.count("\n| startup |") == 2
    if run_all.BEGIN in original:
        outside = [text.split(run_all.BEGIN)[0] + text.split(run_all.END)[1] for text in (original, written)]
        assert outside[0] == outside[1]
    else:
        assert written.replace(block + "\n\n", "") == original


def test_run_all_write_docs_puts_one_block_before_the_first_section(tmp_path):
    run_all = load_bench("run_all")
    docs = tmp_path / "benchmarks.md"
    docs.write_text("# Benchmarks\n\nIntro.\n\n## A section\n\nIts text.\n")
    first = f"{run_all.BEGIN}\none\n{run_all.END}"
    run_all.write_docs(docs, first)
    assert docs.read_text() == f"# Benchmarks\n\nIntro.\n\n{first}\n\n## A section\n\nIts text.\n"
    run_all.write_docs(docs, first.replace("one", "two"))
    assert docs.read_text() == f"# Benchmarks\n\nIntro.\n\n{first.replace('one', 'two')}\n\n## A section\n\nIts text.\n"


def test_run_all_records_a_script_this_machine_cannot_run_and_goes_on(tmp_path):
    run_all = load_bench("run_all")
    lacking = run_all.Script("container_api", lambda ctx: [], lambda ctx: [], needs=lambda ctx: "Podman is missing")
    record = run_all.run_one(lacking, run_all.Context("standard", tmp_path, None), "[1/1]", lambda text: None)
    assert (record["status"], record["reason"], record["command"]) == ("not run", "Podman is missing", None)
    assert [f["metric"] for f in record["figures"]] == ["not run: Podman is missing"]
    document = {"setting": "standard", "started": "2026-12-05 13:00:00 UTC", "finished": "2026-12-05 13:30:00 UTC",
                "wall_sec": 1800.0, "machine": run_all.machine(), "scripts": [record]}
    assert "| container_api | not run: Podman is missing | – | – |" in run_all.render(document)
