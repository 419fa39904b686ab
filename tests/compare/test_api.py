"""The HTTP API (compare.api) on a real run (conftest's `four_arm_run`: a scripted SGLang arm with an H200 lease, a
priced hosted arm through litellm, an unpriced hosted arm at temperature 0, the oracle; three tasks, two seeds).
Figures are checked byte for byte against the real `leafcost` CLI, episode listings against SQL, and the
ledger's states (busy, outdated) against what a client sees."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import duckdb
import pytest
from fastapi.testclient import TestClient

from compare.api import create_app
from compare.trajectory_files import read_trajectory
from compare.ledger import MIGRATIONS, SCHEMA_VERSION, migrate

LEAFCOST = Path(sys.executable).with_name("leafcost")
TOKEN = "test-api-token-0001"
ENDPOINTS = ["/health", "/runs", "/runs/{run_id}", "/runs/{run_id}/summary", "/runs/{run_id}/compare",
             "/runs/{run_id}/episodes", "/runs/{run_id}/episodes/{episode_id}", "/runs/{run_id}/breakeven",
             "/runs/{run_id}/decision", "/runs/{run_id}/plan", "/runs/{run_id}/scenarios",
             "/prices"]


@pytest.fixture(scope="module")
def run(four_arm_run):
    return four_arm_run


@pytest.fixture(scope="module")
def client(run):
    db, _ = run
    return TestClient(create_app(db, api_token=TOKEN))


def cli(*args: str, expect: int = 0) -> bytes:
    result = subprocess.run([str(LEAFCOST), *args], capture_output=True, timeout=300)
    assert result.returncode == expect, result.stderr[-2000:]
    return result.stdout


def sql(db: Path, query: str, params=()):
    with duckdb.connect(str(db), read_only=True) as conn:
        return conn.execute(query, list(params)).fetchall()


def test_health_runs_and_a_run(client, run):
    db, run_id = run
    health = client.get("/health").json()
    assert health["status"] == "ok" and health["schema_version"] == SCHEMA_VERSION
    assert health["ledger"] == str(db) and health["leafcost_version"]
    listed = {r["run_id"]: r for r in client.get("/runs").json()}
    assert listed[run_id]["arms"] == ["frognano", "hosted", "unpriced", "oracle"]
    assert (listed[run_id]["tasks"], listed[run_id]["seeds"], listed[run_id]["status"]) == (3, 2, "finished")
    detail = client.get(f"/runs/{run_id}").json()
    assert detail["spec"]["arms"][0]["gpu"] == {"type": "H200", "count": 1, "usd_per_hour": 3.5,
                                                "saturation_tokens_per_sec": None, "from_deployment": None,
                                                "namespace": "default", "kubeconfig": None, "context": None}
    assert sorted(detail["task_ids"]) == ["calc-a", "calc-b", "calc-c"]
    arms = {a["arm"]: a for a in detail["arms"]}
    assert arms["frognano"]["adapter"] == "sglang" and arms["frognano"]["endpoint"].startswith("http://")
    assert arms["hosted"]["model"] == "hosted-gpt" and arms["hosted"]["status"] == "finished"
    assert all(a["status_reason"] is None for a in detail["arms"])


def test_summary_is_the_clis_output_byte_for_byte(client, run):
    db, run_id = run
    answer = client.get(f"/runs/{run_id}/summary")
    assert answer.status_code == 200 and answer.headers["content-type"] == "application/json"
    assert answer.content == cli("summary", run_id, "--db", str(db), "--json")
    assert client.get(f"/runs/{run_id}/summary").content == answer.content  # the finished run's cached copy
    other = client.get(f"/runs/{run_id}/summary", params={"seed": 7, "resamples": 500})
    assert other.content == cli("summary", run_id, "--db", str(db), "--json", "--seed", "7", "--resamples", "500")
    assert other.content != answer.content


def test_compare_is_the_clis_output_and_refuses_unfair_pairs(client, run):
    db, run_id = run
    paired = client.get(f"/runs/{run_id}/compare", params={"arms": "hosted,frognano"})
    assert paired.status_code == 200
    assert paired.content == cli("compare", run_id, "--arms", "hosted,frognano", "--db", str(db), "--json")
    assert paired.json()["breakeven"]["self_hosted"] == "frognano"
    unfair = client.get(f"/runs/{run_id}/compare", params={"arms": "hosted,unpriced"})
    assert unfair.status_code == 409
    assert unfair.json()["differences"] == ["temperature differs: hosted None, unpriced 0.0"]
    assert "allow_mismatch=true" in unfair.json()["detail"]
    allowed = client.get(f"/runs/{run_id}/compare", params={"arms": "hosted,unpriced", "allow_mismatch": "true"})
    assert allowed.content == cli("compare", run_id, "--arms", "hosted,unpriced", "--allow-mismatch", "--db", str(db),
                                  "--json")
    assert client.get(f"/runs/{run_id}/compare", params={"arms": "hosted,nosuch"}).status_code == 404
    for arms in ("hosted", "hosted,hosted", "a,b,c", ","):
        assert client.get(f"/runs/{run_id}/compare", params={"arms": arms}).status_code == 422, arms


def test_breakeven_is_the_clis_output(client, run):
    db, run_id = run
    pair = {"self_hosted": "frognano", "hosted": "hosted"}
    answer = client.get(f"/runs/{run_id}/breakeven", params=pair)
    assert answer.content == cli("breakeven", run_id, "--self-hosted", "frognano", "--hosted", "hosted", "--db",
                                 str(db), "--json")
    assert answer.json()["gpu_usd_per_hour"] > 0 and len(answer.json()["grid"]) == 6
    at = client.get(f"/runs/{run_id}/breakeven", params={**pair, "gpu_usd_per_hour": 2.5, "utilization": 0.4})
    assert at.content == cli("breakeven", run_id, "--self-hosted", "frognano", "--hosted", "hosted",
                             "--gpu-usd-per-hour", "2.5", "--utilization", "0.4", "--db", str(db), "--json")
    # a pair the model has no number for: the reason, as the CLI gives it
    oracle = client.get(f"/runs/{run_id}/breakeven", params={"self_hosted": "oracle", "hosted": "hosted"}).json()
    assert oracle["reason"] == "arm oracle is not self-hosted" and oracle["grid"] == []


def test_unknown_things_are_404_with_the_reason(client, run):
    _, run_id = run
    for path in ("/runs/nope", "/runs/nope/summary", "/runs/nope/episodes", "/runs/nope/episodes/x/y",
                 "/runs/nope/compare?arms=a,b", "/runs/nope/breakeven?self_hosted=a&hosted=b", "/prices?run_id=nope"):
        answer = client.get(path)
        assert answer.status_code == 404, path
        assert "no run 'nope'" in answer.json()["detail"] and run_id in answer.json()["detail"]
    assert "has no arm 'nosuch'" in client.get(f"/runs/{run_id}/episodes?arm=nosuch").json()["detail"]
    assert client.get(f"/runs/{run_id}/breakeven?self_hosted=nosuch&hosted=hosted").status_code == 404
    missing = client.get(f"/runs/{run_id}/episodes/{run_id}/hosted/calc-a/s0/a9")
    assert missing.status_code == 404 and "has no episode" in missing.json()["detail"]
    scenario = client.get(f"/runs/{run_id}/summary", params={"scenario": "never-made"})
    assert scenario.status_code == 404 and "no scenario 'never-made'" in scenario.json()["detail"]


@pytest.mark.parametrize("query", ["limit=0", "limit=501", "offset=-1", "resolved=maybe", "final=perhaps"])
def test_bad_episode_parameters_are_422(client, run, query):
    _, run_id = run
    answer = client.get(f"/runs/{run_id}/episodes?{query}")
    assert answer.status_code == 422 and answer.json()["detail"][0]["loc"][0] == "query"


@pytest.mark.parametrize("path", ["summary?resamples=99", "summary?seed=-1", "summary?resamples=many",
                                  "breakeven?self_hosted=frognano&hosted=hosted&utilization=2",
                                  "breakeven?self_hosted=frognano&hosted=hosted&gpu_usd_per_hour=0",
                                  "breakeven?self_hosted=frognano", "compare"])
def test_bad_figure_parameters_are_422(client, run, path):
    _, run_id = run
    assert client.get(f"/runs/{run_id}/{path}").status_code == 422


@pytest.mark.parametrize("filters", [{}, {"arm": "hosted"}, {"resolved": "true"}, {"resolved": "false"},
                                     {"task": "calc-c", "arm": "frognano"}, {"exit_reason": "agent"},
                                     {"final": "false"}, {"arm": "oracle", "resolved": "true", "task": "calc-a"}])
def test_episode_filters_and_pages_match_sql(client, run, filters):
    db, run_id = run
    where, params = ["run_id = ?", "final = ?"], [run_id, filters.get("final", "true") == "true"]
    for key, column in (("arm", "arm"), ("task", "task_id"), ("exit_reason", "exit_reason")):
        if key in filters:
            where.append(f"{column} = ?")
            params.append(filters[key])
    if "resolved" in filters:
        where.append("coalesce(resolved, false) = ?")
        params.append(filters["resolved"] == "true")
    expected = {r[0] for r in sql(db, f"SELECT episode_id FROM episodes WHERE {' AND '.join(where)}", params)}
    seen, offset = [], 0
    while True:
        page = client.get(f"/runs/{run_id}/episodes", params={**filters, "limit": 5, "offset": offset}).json()
        assert page["total"] == len(expected) and page["limit"] == 5 and page["offset"] == offset
        seen += [e["episode_id"] for e in page["episodes"]]
        offset += 5
        if offset >= page["total"]:
            break
    assert len(seen) == len(set(seen)) and set(seen) == expected


def test_an_episode_row_and_its_cost(client, run):
    db, run_id = run
    rows = client.get(f"/runs/{run_id}/episodes", params={"arm": "hosted", "limit": 500}).json()["episodes"]
    assert len(rows) == 6
    for row in rows:
        cost, calls, prompt = sql(db, "SELECT sum(cost_usd), count(*), sum(prompt_tokens) FROM model_calls "
                                      "WHERE episode_id = ?", [row["episode_id"]])[0]
        assert row["cost_usd"] == pytest.approx(cost, rel=1e-12) and row["model_calls"] == calls
        assert row["tokens"]["prompt"] == prompt and row["final"] is True
    frognano = client.get(f"/runs/{run_id}/episodes", params={"arm": "frognano", "limit": 1}).json()["episodes"][0]
    assert frognano["cost_usd"] is None  # the lease pays: no per-token cost


def test_an_episode_in_detail_with_its_calls_and_trajectory(client, run):
    db, run_id = run
    episode_id = f"{run_id}/hosted/calc-a/s0/a1"
    detail = client.get(f"/runs/{run_id}/episodes/{episode_id}").json()
    assert detail["episode"]["episode_id"] == episode_id and detail["episode"]["resolved"] is True
    calls = sql(db, "SELECT step, prompt_tokens, completion_tokens, cost_usd, latency_sec FROM model_calls WHERE "
                    "episode_id = ? ORDER BY step, attempt, call_id", [episode_id])
    assert [(c["step"], c["prompt_tokens"], c["completion_tokens"], c["cost_usd"], c["latency_sec"])
            for c in detail["model_calls"]] == calls
    assert detail["episode"]["cost_usd"] == pytest.approx(sum(c[3] for c in calls), rel=1e-12)
    trajectory = detail["trajectory"]
    assert detail["trajectory_reason"] is None and trajectory["trajectory_format"] == "leaf-function-calling"
    assert [m["role"] for m in trajectory["messages"]][:2] == ["system", "user"]
    assert trajectory["trajectory_id"] == episode_id
    # the id without its run prefix names the same attempt
    short = client.get(f"/runs/{run_id}/episodes/hosted/calc-a/s0/a1").json()
    assert short["episode"]["episode_id"] == episode_id


def test_trajectory_files_are_read_only_from_the_ledgers_folder(tmp_path):
    db = tmp_path / "ledger.duckdb"
    folder = tmp_path / "trajectories" / "run" / "arm"
    folder.mkdir(parents=True)
    (folder / "t.s0.a1.json").write_text('{"messages": [{"role": "user", "content": "hi"}]}')
    (folder / "broken.json").write_text("{not json")
    outside = tmp_path / "secret.json"
    outside.write_text("{}")
    assert read_trajectory(db, "trajectories/run/arm/t.s0.a1.json")[0]["messages"][0]["content"] == "hi"
    assert read_trajectory(db, str(folder / "t.s0.a1.json"))[1] is None
    for stored, reason in ((None, "no trajectory recorded"), (str(folder / "gone.json"), "missing"),
                           (str(folder / "broken.json"), "cannot be read as JSON"),
                           (str(outside), "not under the ledger's trajectories folder"),
                           ("trajectories/../secret.json", "not under the ledger's trajectories folder")):
        document, why = read_trajectory(db, stored)
        assert document is None and reason in why, (stored, why)


def test_scenarios_need_the_token_and_are_served_back(run):
    db, run_id = run
    sheet = {"name": "api-double", "sandbox_usd_per_vcpu_hour": 0.09,
             "arms": {"hosted": {"prices": {"input": 2.5, "output": 20.0, "cached_input": 0.25}},
                      "frognano": {"usd_per_hour": 1.75}}}
    path = f"/runs/{run_id}/scenarios"
    closed = TestClient(create_app(db)).post(path, json=sheet)
    assert closed.status_code == 403 and "LEAFCOST_API_TOKEN" in closed.json()["detail"]
    client = TestClient(create_app(db, api_token=TOKEN))
    assert client.post(path, json=sheet).status_code == 401
    assert client.post(path, json=sheet, headers={"Authorization": "Bearer wrong"}).status_code == 401
    assert client.post(path, json=sheet, headers={"Authorization": f"Basic {TOKEN}"}).status_code == 401
    auth = {"Authorization": f"Bearer {TOKEN}"}
    stored = client.post(path, json=sheet, headers=auth)
    assert stored.status_code == 200, stored.text
    document = stored.json()
    assert document["scenario"] == "api-double"
    assert {a["arm"]: a["price_source"] for a in document["arms"]}["hosted"] == "scenario api-double"
    again = client.get(f"/runs/{run_id}/summary", params={"scenario": "api-double"})
    assert again.content == stored.content
    assert again.content == cli("summary", run_id, "--db", str(db), "--scenario", "api-double", "--json")
    # named by the query instead of the sheet; wrong sheets are 422 naming the field
    renamed = client.post(path, params={"name": "api-renamed"}, json={"arms": {}}, headers=auth)
    assert renamed.status_code == 200 and renamed.json()["scenario"] == "api-renamed"
    for body, message in (({"arms": {}}, "name the scenario"),
                          ({"name": "x", "arms": {"hosted": {"usd_per_hour": 2.0}}},
                           "a hosted arm is priced per token"),
                          ({"name": "x", "arms": {"nosuch": {"usd_per_hour": 2.0}}}, "has no such arm"),
                          ({"name": "x", "arms": {"hosted": {}}}, "give exactly one of"),
                          ({"name": "x", "surprise": 1}, "Extra inputs are not permitted")):
        answer = client.post(path, json=body, headers=auth)
        assert answer.status_code == 422 and message in json.dumps(answer.json()), (body, answer.text)
    assert client.post("/runs/nope/scenarios", json=sheet, headers=auth).status_code == 404


def test_prices_of_a_run_and_the_map_revision(client, run):
    _, run_id = run
    bare = client.get("/prices").json()
    assert bare["litellm"].startswith("litellm 1.110.2") and bare["arms"] == [] and bare["run_id"] is None
    sheets = {a["arm"]: a for a in client.get("/prices", params={"run_id": run_id}).json()["arms"]}
    assert sheets["hosted"]["source"] == "explicit" and sheets["hosted"]["prices"]["output"] == 10.0
    assert sheets["unpriced"]["source"] == "litellm" and sheets["unpriced"]["litellm_model"] == "no-price-anywhere"
    assert (sheets["frognano"]["source"], sheets["frognano"]["usd_per_hour"], sheets["frognano"]["gpus"]) == (
        "lease", 3.5, 1)
    assert sheets["oracle"]["source"] == "none"


@contextmanager
def writer_elsewhere(db: Path) -> Iterator[int]:
    """Another process holding the ledger open for writing, as a running `leafcost run` does; yields its pid."""
    holder = subprocess.Popen([sys.executable, "-c", "import sys; from compare.ledger import Ledger; "
                               f"ledger = Ledger.open({str(db)!r}); print('open', flush=True); sys.stdin.read()"],
                              stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout.readline().strip() == "open"
        yield holder.pid
    finally:
        holder.stdin.close()
        holder.wait(timeout=30)


def test_a_busy_ledger_is_503_except_for_a_finished_runs_cached_figures(run):
    db, run_id = run
    client = TestClient(create_app(db, api_token=TOKEN))  # a fresh app: its own cache
    cached = client.get(f"/runs/{run_id}/summary")
    assert cached.status_code == 200
    with writer_elsewhere(db) as pid:
        for path in ("/health", "/runs", f"/runs/{run_id}/episodes", f"/runs/{run_id}/summary?seed=11"):
            answer = client.get(path)
            assert answer.status_code == 503, path
            assert f"process {pid} has this ledger open for writing" in answer.json()["detail"]
        # a finished run does not change: its figures computed before stay served
        assert client.get(f"/runs/{run_id}/summary").content == cached.content
        write = client.post(f"/runs/{run_id}/scenarios", json={"name": "busy"},
                            headers={"Authorization": f"Bearer {TOKEN}"})
        assert write.status_code == 409 and write.json()["detail"].startswith("the ledger is busy")
    assert client.get("/runs").status_code == 200


def test_an_outdated_ledger_is_upgraded_at_start(tmp_path):
    db = tmp_path / "old.duckdb"
    with duckdb.connect(str(db)) as conn:
        migrate(conn, db, MIGRATIONS[:-1])  # the ledger of the leafcost before scenarios
    client = TestClient(create_app(db))
    assert client.get("/health").json()["schema_version"] == SCHEMA_VERSION
    assert client.get("/runs").json() == []


def test_a_missing_ledger_is_503(tmp_path):
    answer = TestClient(create_app(tmp_path / "none.duckdb")).get("/runs")
    assert answer.status_code == 503 and "no ledger here" in answer.json()["detail"]


def test_the_schema_documents_every_endpoint(client):
    schema = client.get("/openapi.json").json()
    assert sorted(schema["paths"]) == sorted(ENDPOINTS)
    for path, item in schema["paths"].items():
        for method, operation in item.items():
            assert operation["tags"] and operation["summary"], (method, path)
            assert operation["responses"]["200"]["content"]["application/json"]["schema"], (method, path)
    summary = schema["paths"]["/runs/{run_id}/summary"]["get"]
    assert summary["responses"]["200"]["content"]["application/json"]["schema"]["$ref"].endswith("SummaryDocument")
    assert "bearer" in json.dumps(schema["components"]["securitySchemes"]).lower()
    assert client.get("/docs").status_code == 200


def test_leafcost_serve_answers_on_its_port(run, tmp_path):
    db, run_id = run
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    env = {k: v for k, v in os.environ.items() if k != "LEAFCOST_API_TOKEN"}
    server = subprocess.Popen([sys.executable, "-c", "import typer; from compare.serve import main; typer.run(main)",
                               "--db", str(db), "--port", str(port)], env=env, stdout=subprocess.DEVNULL,
                              stderr=subprocess.PIPE, text=True)
    try:
        deadline = time.monotonic() + 60
        while True:
            assert server.poll() is None, server.stderr.read()[-2000:]
            assert time.monotonic() < deadline, "leafcost serve did not answer within 60 s"
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{port}/runs/{run_id}", timeout=2) as answer:
                    assert json.loads(answer.read())["run_id"] == run_id
                break
            except OSError:
                time.sleep(0.2)
    finally:
        server.terminate()
        server.wait(timeout=20)
    assert "writes disabled (set LEAFCOST_API_TOKEN" in server.stderr.read()
    missing = subprocess.run([sys.executable, "-c", "import typer; from compare.serve import main; typer.run(main)",
                              "--db", str(tmp_path / "none.duckdb")], capture_output=True, text=True, timeout=60)
    assert missing.returncode == 2 and "no ledger here" in missing.stderr
