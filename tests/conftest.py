"""Shared fixtures: small real Harbor tasks written to disk, and sandbox options with a per-session cache."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import textwrap
import time
import urllib.request
from contextlib import contextmanager
from pathlib import Path

import pytest
from hypothesis import settings

from sandbox import SandboxOptions, load_harbor_task
from support.kube_fake.fixtures import kube_containers, kube_instant  # noqa: F401 - the stand-in, for every module

# The SWE-bench fixture repositories' own tests run only inside their instance images (their packages are installed
# there), never in leafcost's test run.
collect_ignore_glob = ["fixtures/swebench/*/repo"]

# Tests that need the container images (built from Debian's packages on a fresh machine) or litellm's proxy take
# tens of seconds each: `make test` runs them, `make test-fast` (-m "not slow") leaves them out.
SLOW_FIXTURES = frozenset({"container_images", "litellm_proxy"})


def pytest_collection_modifyitems(items):
    for item in items:
        if SLOW_FIXTURES.intersection(getattr(item, "fixturenames", ())):
            item.add_marker(pytest.mark.slow)


# Tests never assert timings: hypothesis's per-example deadline (200 ms) would fail a property on a loaded machine.
settings.register_profile("leafcost", deadline=None)
settings.load_profile("leafcost")

TASK_TOML = """version = "1.0"
[verifier]
timeout_sec = {verifier_timeout}
[agent]
timeout_sec = 120.0
[environment]
cpus = 1
memory_mb = {memory_mb}
pids = {pids}
allow_internet = {network}
"""

PASSING_TEST = """#!/bin/bash
mkdir -p /logs/verifier
if python3 -c 'import calc; assert calc.add(2, 3) == 5'; then echo 1 > /logs/verifier/reward.txt
else echo 0 > /logs/verifier/reward.txt; fi
"""


# A scripted model that fixes the calculator tasks below in two turns (an Edit, then a closing answer).
SOLVE_SCRIPT = {"turns": [
    {"reasoning": "The sign is wrong.", "tool_calls": [
        {"name": "Edit", "arguments": {"file_path": "calc.py", "old_string": "a - b", "new_string": "a + b"}}],
     "usage": {"prompt_tokens": 300, "completion_tokens": 40, "cached_tokens": 0, "reasoning_tokens": 12}},
    {"content": "Fixed add().", "usage": {"prompt_tokens": 380, "completion_tokens": 6, "cached_tokens": 300}}]}


@pytest.fixture(scope="session")
def sandbox_options(tmp_path_factory) -> SandboxOptions:
    return SandboxOptions(cache_dir=tmp_path_factory.mktemp("leafcost-cache"))


@pytest.fixture
def make_task(tmp_path):
    """Writes a small Harbor task (a calculator whose add() subtracts) with any file replaced or removed."""

    def make(name: str = "calc", *, files: dict[str, str | None] | None = None, verifier_timeout: float = 60,
             memory_mb: int = 512, pids: int = 256, network: bool = False):
        task = tmp_path / "tasks" / name
        content: dict[str, str | None] = {
            "task.toml": TASK_TOML.format(verifier_timeout=verifier_timeout, memory_mb=memory_mb, pids=pids,
                                          network=str(network).lower()),
            "instruction.md": "# calc.add subtracts\n\n`calc.add(2, 3)` returns -1, expected 5.\n",
            "environment/Dockerfile": "FROM python:3.11-slim\nWORKDIR /app\nCOPY repo/ /app/\n",
            "environment/repo/calc.py": "def add(a, b):\n    return a - b\n",
            "tests/test.sh": PASSING_TEST,
            "solution/solve.sh": "sed -i 's/a - b/a + b/' calc.py\n",
        }
        content.update(files or {})
        for relative, text in content.items():
            if text is None:
                continue
            path = task / relative
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(textwrap.dedent(text))
        return load_harbor_task(task)

    return make


async def exec_once(task, options, command: str):
    """Opens a fresh sandbox for `task`, runs one harness command in it, and closes it."""
    from sandbox import open_sandbox

    opened = await open_sandbox(task, options)
    try:
        return await opened.sandbox.exec(command, timeout=60)
    finally:
        await opened.close()


def task_dir(task) -> Path:
    return Path(task.path)


@pytest.fixture(scope="session")
def litellm_proxy():
    """Starts litellm's real proxy server (`litellm --config`) in front of an OpenAI-compatible backend, model
    name `hosted-gpt` at the given prices (USD per token); with `fallback=(url, input_cost, output_cost)` a second
    model `hosted-gpt-backup` takes over when the first fails. Returns the running LitellmProxy (base_url,
    master_key). Every proxy started is stopped at the end of the session."""
    from adapters.litellm_proxy import Deployment, LitellmProxy

    started = []

    def start(backend_url: str, *, input_cost: float, output_cost: float, cache_read_cost: float | None = None,
              fallback: tuple[str, float, float] | None = None) -> LitellmProxy:
        deployments = [Deployment(model_name="hosted-gpt", backend_url=backend_url, deployment_id="hosted-gpt-primary",
                                  input_cost_per_token=input_cost, output_cost_per_token=output_cost,
                                  cache_read_input_token_cost=cache_read_cost)]
        fallbacks = None
        if fallback is not None:
            url, fallback_input, fallback_output = fallback
            deployments.append(Deployment(model_name="hosted-gpt-backup", backend_url=url,
                                          deployment_id="hosted-gpt-backup-1", input_cost_per_token=fallback_input,
                                          output_cost_per_token=fallback_output))
            fallbacks = {"hosted-gpt": ["hosted-gpt-backup"]}
        proxy = LitellmProxy(deployments, fallbacks=fallbacks)
        started.append(proxy)
        return proxy.start()

    yield start
    for proxy in started:
        proxy.stop()


@pytest.fixture(scope="session")
def four_arm_run(tmp_path_factory):
    """A finished run in a real ledger: `frognano` (SGLang, scripted, an H200 lease and metrics), `hosted` (litellm
    to a scripted OpenAI server, explicit prices), `unpriced` (a hosted model without a price, temperature 0) and
    `oracle`, over calc-a and calc-b (solvable) and calc-c (not), two seeds. Returns (db, run_id)."""
    import asyncio

    from support.sglang_fake import ScriptedServer

    from compare.ledger import Ledger
    from compare.runner import Runner
    from compare.spec import parse_run_spec

    root = tmp_path_factory.mktemp("four-arm-run")
    tasks = root / "tasks"
    _write_calc_task(tasks / "calc-a", "a - b")
    _write_calc_task(tasks / "calc-b", "a - b")
    _write_calc_task(tasks / "calc-c", "b - a")  # the model's edit (and the oracle's sed) cannot fix this one
    db = root / "ledger.duckdb"
    with pytest.MonkeyPatch.context() as env, ScriptedServer(SOLVE_SCRIPT) as sglang, ScriptedServer(SOLVE_SCRIPT) as openai:
        env.setenv("LEAFCOST_TEST_SUMMARY_KEY", "sk-test-summary-key-0001")
        spec = parse_run_spec({
            "name": "sum", "suite": str(tasks), "seeds": 2, "workers": 4, "max_attempts": 1,
            "budgets": {"max_steps": 4, "time_budget_sec": 120},
            "arms": [{"name": "frognano", "adapter": "sglang", "model": "frognano-4b", "base_url": sglang.base_url,
                      "max_retries": 0, "gpu": {"type": "H200", "usd_per_hour": 3.5}, "metrics_interval_sec": 0.2},
                     {"name": "hosted", "adapter": "router", "model": "hosted-gpt", "base_url": openai.base_url,
                      "api_key_env": "LEAFCOST_TEST_SUMMARY_KEY", "max_retries": 0, "allow_unlisted_model": True,
                      "prices": {"input": 1.25, "output": 10.0, "cached_input": 0.125}},
                     {"name": "unpriced", "adapter": "router", "model": "no-price-anywhere", "base_url":
                      openai.base_url, "api_key_env": "LEAFCOST_TEST_SUMMARY_KEY", "max_retries": 0,
                      "allow_unpriced": True, "allow_unlisted_model": True, "sampling": {"temperature": 0.0}},
                     {"name": "oracle", "adapter": "oracle"}]})
        ledger = Ledger.open(db)
        try:
            summary = asyncio.run(Runner(spec, ledger, db_path=db).run())
        finally:
            ledger.close()
    assert summary.status == "finished"
    return db, summary.run_id


def _write_calc_task(path: Path, body: str) -> None:
    """A calculator task whose add() returns `body`."""
    files = {
        "task.toml": 'version = "1.0"\n[verifier]\ntimeout_sec = 60\n[agent]\ntimeout_sec = 120\n'
                     "[environment]\ncpus = 1\nmemory_mb = 512\nallow_internet = false\n",
        "instruction.md": "calc.add(2, 3) should return 5.\n",
        "environment/Dockerfile": "FROM python:3.11-slim\nWORKDIR /app\nCOPY repo/ /app/\n",
        "environment/repo/calc.py": f"def add(a, b):\n    return {body}\n",
        "tests/test.sh": "#!/bin/bash\nmkdir -p /logs/verifier\nif python3 -c 'import calc; assert calc.add(2, 3) "
                         "== 5'; then echo 1 > /logs/verifier/reward.txt\n"
                         "else echo 0 > /logs/verifier/reward.txt; fi\n",
        "solution/solve.sh": "sed -i 's/a - b/a + b/' calc.py\n",
    }
    for name, text in files.items():
        (path / name).parent.mkdir(parents=True, exist_ok=True)
        (path / name).write_text(text)


@contextmanager
def leafcost_serve(db: Path, log: Path, env: dict[str, str] | None = None, cwd: Path | None = None):
    """`leafcost serve` on the ledger `db` at a free loopback port, its output in `log`; yields the base URL once
    /health answers, and stops the server after."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    leafcost = Path(sys.executable).with_name("leafcost")
    with open(log, "wb") as out:
        server = subprocess.Popen([str(leafcost), "serve", "--db", str(db), "--port", str(port)],
                                  env={**os.environ, **(env or {})}, stdout=out, stderr=subprocess.STDOUT, cwd=cwd)
    base = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 60
        while True:
            assert server.poll() is None, log.read_text()[-2000:]
            assert time.monotonic() < deadline, "leafcost serve did not answer within 60 s"
            try:
                with urllib.request.urlopen(base + "/health", timeout=2):
                    break
            except OSError:
                time.sleep(0.2)
        yield base
    finally:
        server.terminate()
        server.wait(timeout=20)


@pytest.fixture(scope="session")
def container_images():
    """The base images the container tests' tasks name (built from Debian's packages: no registry here)."""
    from container_images import ensure_base_image, ensure_toolchain_images

    ensure_base_image()
    return ensure_toolchain_images()
