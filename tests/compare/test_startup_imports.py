"""What `leafcost --help` and `leafcost run`, up to its first model request, do not import: the heavy libraries and
the modules only the figures after a run need are loaded where they are used, so the start stays fast
(bench/startup.py times it; this pins the structure, never a time). Each case is a fresh `leafcost` process whose
`sys.modules` is read at exit (`--help`) or, for a run, when its first chat request reaches a real local endpoint
(the endpoint signals the process and waits for the list before it answers)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]

# Runs the CLI from this checkout; writes sys.modules to argv[1] on SIGUSR1 or, if it never came, at exit.
WRAPPER = """
import atexit, json, os, signal, sys

def dump(*_):
    if not os.path.exists(sys.argv[1]):
        with open(sys.argv[1] + ".tmp", "w") as f:
            json.dump(sorted(sys.modules), f)
        os.rename(sys.argv[1] + ".tmp", sys.argv[1])

signal.signal(signal.SIGUSR1, dump)
atexit.register(dump)
from compare.cli import app
app(sys.argv[2:], prog_name="leafcost")
"""

NEVER_FOR_HELP = {"numpy", "duckdb", "aiohttp", "litellm", "kubernetes", "fastapi", "uvicorn", "starlette",
                  "pydantic", "yaml", "asyncio", "prometheus_client", "xllamacpp",
                  "compare.spec", "compare.runner", "compare.ledger", "sandbox", "adapters.openai_http",
                  "reports.report", "reports.charts"}
# Before the first request: what prices a call after its answer, the figures and statistics of a finished run,
# the API, the other sandbox backends and the local model server.
NEVER_BEFORE_FIRST_REQUEST = {"numpy", "litellm", "kubernetes", "fastapi", "uvicorn", "starlette", "xllamacpp",
                              "datasets", "compare.summary", "compare.planning", "compare.plan_simulation",
                              "compare.stats", "compare.costs", "compare.decision", "compare.decision_rounds",
                              "compare.claim", "compare.comparison", "compare.api", "reports.report",
                              "reports.charts", "sandbox.kubernetes", "sandbox.container"}
ARMS = {
    "router": {"name": "hosted", "adapter": "router", "model": "m", "max_retries": 0, "api_key_env": "STARTUP_KEY",
               "prices": {"input": 1.0, "output": 2.0}},
    # priced from litellm's map: read from the JSON litellm ships, litellm itself never imported by the run
    "router-map": {"name": "hosted", "adapter": "router", "model": "gpt-5-mini", "max_retries": 0,
                   "api_key_env": "STARTUP_KEY"},
    "sglang": {"name": "self-hosted", "adapter": "sglang", "model": "m", "max_retries": 0,
               "gpu": {"type": "H200", "count": 1, "usd_per_hour": 3.5}, "metrics_interval_sec": 3600},
}


def loaded(names: list[str], forbidden: set[str]) -> list[str]:
    """The forbidden modules among `names`: a name, or any of its submodules."""
    return sorted({f for f in forbidden for name in names if name == f or name.startswith(f + ".")})


def leafcost(dump: Path, *args: str, cwd: Path, env: dict | None = None) -> subprocess.Popen:
    environment = {**os.environ, "PYTHONPATH": str(ROOT), **(env or {})}
    return subprocess.Popen([sys.executable, "-c", WRAPPER, str(dump), *args], cwd=cwd, env=environment,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


class FirstRequestEndpoint:
    """An OpenAI-compatible endpoint that answers every chat request with a final answer; at the first one it asks
    the watched process for its module list (SIGUSR1) and waits for the file before answering."""

    def __init__(self, dump: Path):
        self.dump, self.pid, self.chat_requests = dump, None, 0
        owner = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:  # noqa: N802 - http.server's name
                if self.path == "/v1/models":
                    return self.send({"object": "list", "data": [{"id": model, "object": "model"}
                                                                  for model in ("m", "gpt-5-mini")]})
                self.send({"error": {"message": "not found"}}, 404)

            def do_POST(self) -> None:  # noqa: N802
                self.rfile.read(int(self.headers.get("content-length") or 0))
                owner.first_request()
                self.send({"id": "c", "object": "chat.completion", "created": 0, "model": "m",
                           "choices": [{"index": 0, "message": {"role": "assistant", "content": "Done."},
                                        "finish_reason": "stop"}],
                           "usage": {"prompt_tokens": 10, "completion_tokens": 2, "total_tokens": 12}})

            def send(self, document: dict, status: int = 200) -> None:
                payload = json.dumps(document).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(payload)))
                self.end_headers()
                self.wfile.write(payload)

            def log_message(self, *args: object) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.base_url = f"http://127.0.0.1:{self.server.server_address[1]}/v1"

    def first_request(self) -> None:
        self.chat_requests += 1
        if self.chat_requests == 1:
            os.kill(self.pid, signal.SIGUSR1)
            deadline = time.monotonic() + 60  # a deadline, not a timing: the list is written before the answer
            while not self.dump.exists() and time.monotonic() < deadline:
                time.sleep(0.02)

    def __enter__(self) -> FirstRequestEndpoint:
        threading.Thread(target=self.server.serve_forever, daemon=True).start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.server.shutdown()
        self.server.server_close()


def test_help_loads_no_heavy_library_and_no_run_machinery(tmp_path):
    dump = tmp_path / "modules.json"
    process = leafcost(dump, "--help", cwd=tmp_path)
    out, err = process.communicate(timeout=120)
    assert process.returncode == 0, err
    assert "run" in out and "report" in out  # every command is listed
    assert loaded(json.loads(dump.read_text()), NEVER_FOR_HELP) == []


@pytest.mark.parametrize("arm", ["router", "router-map", "sglang"])
def test_a_run_reaches_its_first_request_without_the_figures_modules(arm, make_task, tmp_path):
    suite = Path(make_task("calc").path).parent
    dump = tmp_path / "modules.json"
    with FirstRequestEndpoint(dump) as endpoint:
        spec = {"name": "startup", "suite": str(suite), "seeds": 1, "workers": 1, "max_attempts": 1,
                "arms": [{**ARMS[arm], "base_url": endpoint.base_url}]}
        (tmp_path / "spec.yaml").write_text(json.dumps(spec))
        process = leafcost(dump, "run", "spec.yaml", "--db", str(tmp_path / "ledger.duckdb"), "--json",
                           cwd=tmp_path, env={"LEAFCOST_CACHE": str(tmp_path / "cache"), "STARTUP_KEY": "k"})
        endpoint.pid = process.pid
        out, err = process.communicate(timeout=300)
    assert process.returncode == 0, err
    assert endpoint.chat_requests == 1 and json.loads(out)["status"] == "finished"
    modules = json.loads(dump.read_text())
    assert {"aiohttp", "duckdb", "compare.runner"} <= set(modules)  # the list is the running process's
    assert loaded(modules, NEVER_BEFORE_FIRST_REQUEST) == []
    if arm == "router-map":  # the call was still priced from the map, with its provenance
        import duckdb

        from compare.pricing import litellm_revision

        with duckdb.connect(str(tmp_path / "ledger.duckdb"), read_only=True) as ledger:
            rows = ledger.execute("SELECT cost_usd > 0, price_source, price_revision FROM model_calls").fetchall()
        assert rows == [(True, "litellm", litellm_revision())]
