"""`leafcost demo` as `make demo` runs it: the real local model server, real sandboxes, a real ledger."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import duckdb

LEAFCOST = Path(sys.executable).with_name("leafcost")


def test_demo_runs_oracle_and_local_model_and_names_the_missing_router_key(tmp_path):
    environment = {k: v for k, v in os.environ.items() if k != "ROUTER_API_KEY"}
    db = tmp_path / "demo.duckdb"
    result = subprocess.run([str(LEAFCOST), "demo", "--json", "--db", str(db)], capture_output=True, text=True,
                            env=environment, timeout=1500, cwd=tmp_path)
    assert result.returncode == 0, result.stderr[-2000:]
    arms = {arm["arm"]: arm for arm in json.loads(result.stdout)["arms"]}
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
