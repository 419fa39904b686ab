"""`leafcost demo --with-router` (`make demo` without the router arm): the real local model server, real
sandboxes, a real ledger, and litellm's real proxy server in front of a second local model server. And the next
steps the demo prints, typed as they run on this machine."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import urllib.request
from pathlib import Path

import duckdb
import pytest

from adapters.litellm_proxy import free_port
from compare.demo import arms_to_compare, leafcost_program, next_steps
from conftest import leafcost_serve
from test_docs import check_command_line

LEAFCOST = Path(sys.executable).with_name("leafcost")


@pytest.mark.slow  # end to end: make test-fast leaves it out
def test_demo_runs_oracle_local_model_and_a_real_router_and_names_the_missing_router_key(tmp_path):
    environment = {k: v for k, v in os.environ.items() if k != "ROUTER_API_KEY"}
    environment["LEAFCOST_DEMO_ROUTER_PORT"] = str(free_port())
    db = tmp_path / "demo.duckdb"
    result = subprocess.run([str(LEAFCOST), "demo", "--with-router", "--json", "--db", str(db)],
                            capture_output=True, text=True, env=environment, timeout=1500, cwd=tmp_path)
    assert result.returncode == 0, result.stderr[-2000:]
    summary = json.loads(result.stdout)
    arms = {arm["arm"]: arm for arm in summary["arms"]}
    assert (arms["oracle"]["done"], arms["oracle"]["resolved"]) == (12, 12)
    assert arms["local-smol"]["done"] == 12 and arms["local-smol"]["errors"] == 0
    assert arms["hosted"]["status"] == "skipped" and "ROUTER_API_KEY" in arms["hosted"]["status_reason"]
    with duckdb.connect(str(db), read_only=True) as ledger:
        calls = ledger.execute("select count(*), sum(prompt_tokens), sum(cached_tokens), sum(completion_tokens), "
                           "count(distinct episode_id) from model_calls where arm = 'local-smol'").fetchone()
        steps = ledger.execute("select sum(n_steps) from episodes where arm = 'local-smol' and final").fetchone()[0]
        lease = ledger.execute("select kind, usd_per_hour, ended_at is not null from gpu_leases").fetchall()
        config = json.loads(ledger.execute("select config from arms where arm = 'local-smol'").fetchone()[0])
    assert calls[0] >= steps >= 12 and calls[4] == 12  # every step's call is in the ledger
    assert calls[1] > 0 and calls[2] > 0 and calls[3] > 0  # the server's prompt, cached and output tokens
    assert lease == [("cpu", 0.10, True)]
    assert config["request_policy"]["forced_turns"] == 1 and "launch_command" in config["server"]

    # The router arm: every answered call priced by us and by the router, at the same list prices.
    assert arms["router-smol"]["done"] == 12 and arms["router-smol"]["errors"] == 0
    with duckdb.connect(str(db), read_only=True) as ledger:
        answered, priced, router_priced, spend = ledger.execute(
            "select count(*), count(cost_usd), count(router_cost_usd), sum(cost_usd) from model_calls "
            "where arm = 'router-smol' and status = 'ok'").fetchone()
        router_config = json.loads(ledger.execute("select config from arms where arm = 'router-smol'").fetchone()[0])
        dumps = [str(ledger.execute(f"select * from {table}").fetchall()) for (table,) in
                 ledger.execute("select table_name from duckdb_tables()").fetchall()]
    reconciliation, = summary["reconciliation"]
    assert reconciliation["arm"] == "router-smol" and answered >= 12 and priced == router_priced == answered
    assert reconciliation["calls_compared"] == answered and reconciliation["max_relative_difference"] < 1e-9
    assert not reconciliation["flagged"] and spend > 0
    assert router_config["api_key_env"] == "LEAFCOST_DEMO_ROUTER_KEY"
    # The proxy's master key (always sk-leafcost-...) appears in no table, trajectory or output.
    trajectories = "".join(p.read_text() for p in Path(summary["trajectories"]).rglob("*.json"))
    assert not any("sk-leafcost-" in text for text in [*dumps, trajectories, result.stdout, result.stderr])
    # The figures of the demo's run: every arm summarised, the self-hosted and the router arm compared.
    run_id = summary["run_id"]
    figures = subprocess.run([str(LEAFCOST), "summary", run_id, "--db", str(db), "--json"], capture_output=True,
                             text=True, timeout=300, cwd=tmp_path)
    assert figures.returncode == 0, figures.stderr[-2000:]
    by_arm = {arm["arm"]: arm for arm in json.loads(figures.stdout)["arms"]}
    assert by_arm["oracle"]["avg_at_k"]["value"] == 1.0 and by_arm["oracle"]["resolved_tasks"] == 12
    assert by_arm["local-smol"]["cost_usd"]["gpu"] > 0 and by_arm["local-smol"]["lease"]["kind"] == "cpu"
    assert by_arm["router-smol"]["cost_usd"]["tokens"] == pytest.approx(spend, rel=1e-9)
    assert by_arm["hosted"]["status"] == "skipped" and by_arm["hosted"]["attempts"] == 0
    compared = subprocess.run([str(LEAFCOST), "compare", run_id, "--arms", "local-smol,router-smol", "--db", str(db),
                               "--json"], capture_output=True, text=True, timeout=300, cwd=tmp_path)
    assert compared.returncode == 0, compared.stderr[-2000:]
    document = json.loads(compared.stdout)
    assert document["comparable"] and document["shared_tasks"] == 12 and document["mcnemar"] is not None
    # `leafcost serve` after the demo shows the demo run on the page.
    with leafcost_serve(db, tmp_path / "serve.log", cwd=tmp_path) as base:
        with urllib.request.urlopen(f"{base}/", timeout=60) as answer:
            page = answer.read().decode()
        assert f'href="/run/{run_id}"' in page
        with urllib.request.urlopen(f"{base}/run/{run_id}", timeout=60) as answer:
            run_page = answer.read().decode()
        assert all(f'data-arm="{arm}"' in run_page for arm in ("oracle", "local-smol", "router-smol"))
    # Printed (not --json), the demo ends with its next steps, typed as they run here: leafcost is not on PATH.
    path = os.pathsep.join(d for d in os.environ["PATH"].split(os.pathsep) if not (Path(d) / "leafcost").exists())
    again = subprocess.run([str(LEAFCOST), "demo", "--with-router", "--resume", run_id, "--db", str(db)],
                           capture_output=True, text=True, env={**environment, "PATH": path}, timeout=600, cwd=tmp_path)
    assert again.returncode == 0, again.stderr[-2000:]
    steps = next_steps(run_id, str(db), str(LEAFCOST), ("local-smol", "router-smol"))
    assert again.stdout.splitlines()[-len(steps) - 1:] == [
        *steps,
        f"leafcost is not on your PATH: run `make install` or use {LEAFCOST}"]


def _command(path: Path) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("#!/bin/sh\n")
    path.chmod(0o755)
    return path


def test_the_next_steps_name_the_venvs_leafcost_until_it_is_on_path(tmp_path):
    this = _command(tmp_path / ".venv" / "bin" / "leafcost")
    assert leafcost_program({"PATH": str(tmp_path / "empty")}, this=this, cwd=tmp_path) == (
        ".venv/bin/leafcost", "leafcost is not on your PATH: run `make install` or use .venv/bin/leafcost")
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    assert leafcost_program({"PATH": ""}, this=this, cwd=elsewhere)[0] == str(this)  # outside cwd: absolute
    assert leafcost_program({"PATH": ""}, this=this, cwd=this.parent)[0] == "./leafcost"  # never a bare name

    bindir = tmp_path / "bin"  # what make install makes: a link to the venv's command
    bindir.mkdir()
    (bindir / "leafcost").symlink_to(this)
    assert leafcost_program({"PATH": f"{tmp_path / 'empty'}:{bindir}"}, this=this, cwd=tmp_path) == ("leafcost", None)

    other = _command(tmp_path / "other" / "leafcost")  # first on PATH: another install
    assert leafcost_program({"PATH": f"{other.parent}:{bindir}"}, this=this, cwd=tmp_path) == (
        ".venv/bin/leafcost", f"the leafcost on your PATH is {other}, not this one: run `make install` or use "
                              ".venv/bin/leafcost")
    # Not started as an installed command (python -m ...): plain leafcost, no advice to give.
    assert leafcost_program({"PATH": ""}, this=tmp_path / "none" / "leafcost") == ("leafcost", None)


@pytest.mark.parametrize("program", ["leafcost", ".venv/bin/leafcost"])
def test_the_next_steps_are_real_commands(program):
    lines = next_steps("demo-20261202-155805-213b", "leafcost.duckdb", program, ("local-smol", "router-smol"))
    commands = [line for line in lines if not line.startswith("# ")]
    assert all(command.startswith(f"{program} ") for command in commands)
    assert [check_command_line(command, "next steps") for command in commands] == [[]] * 4
    assert [command.split()[1] for command in commands] == ["summary", "compare", "serve", "report"]
    assert "--arms local-smol,router-smol" in commands[1]


def test_the_demo_suggests_comparing_self_hosted_with_hosted_else_with_the_oracle():
    assert arms_to_compare(["oracle", "local-smol", "router-smol"]) == ("local-smol", "router-smol")
    assert arms_to_compare(["oracle", "local-smol"]) == ("oracle", "local-smol")
