"""Shared fixtures: small real Harbor tasks written to disk, and sandbox options with a per-session cache."""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest

from sandbox import SandboxOptions, load_harbor_task

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


def task_dir(task) -> Path:
    return Path(task.path)


LITELLM_MASTER_KEY = "sk-leafcost-proxy-master"


@pytest.fixture(scope="session")
def litellm_proxy(tmp_path_factory):
    """Starts litellm's real proxy server (`litellm --config`) in front of an OpenAI-compatible backend:
    `start(backend_url, prices_per_token) -> base_url`, model name `hosted-gpt`, master key
    LITELLM_MASTER_KEY, the pinned local price map. Every proxy started is killed at the end of the session."""
    import os
    import shutil
    import socket
    import subprocess
    import sys
    import time
    import urllib.request

    import yaml

    started = []

    def start(backend_url: str, *, input_cost: float, output_cost: float, cache_read_cost: float | None = None) -> str:
        folder = tmp_path_factory.mktemp("litellm-proxy")
        model_info = {"id": "hosted-gpt-primary", "input_cost_per_token": input_cost,
                      "output_cost_per_token": output_cost}
        if cache_read_cost is not None:
            model_info["cache_read_input_token_cost"] = cache_read_cost
        config = {"model_list": [{"model_name": "hosted-gpt", "model_info": model_info,
                                  "litellm_params": {"model": "openai/frognano-4b", "api_base": backend_url,
                                                     "api_key": "unused-by-the-backend"}}],
                  "general_settings": {"master_key": LITELLM_MASTER_KEY}}
        (folder / "config.yaml").write_text(yaml.safe_dump(config))
        with socket.socket() as sock:
            sock.bind(("127.0.0.1", 0))
            port = sock.getsockname()[1]
        log = open(folder / "proxy.log", "wb")
        litellm = shutil.which("litellm", path=str(Path(sys.executable).parent))
        process = subprocess.Popen([litellm, "--config", str(folder / "config.yaml"), "--host", "127.0.0.1",
                                    "--port", str(port)], stdout=log, stderr=subprocess.STDOUT,
                                   start_new_session=True, env={**os.environ, "LITELLM_LOCAL_MODEL_COST_MAP": "True"})
        started.append((process, log))
        deadline = time.monotonic() + 120
        while True:
            assert process.poll() is None, (folder / "proxy.log").read_text()[-3000:]
            assert time.monotonic() < deadline, "the litellm proxy did not start within 120 s"
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{port}/health/liveliness", timeout=2) as answer:
                    if answer.status == 200:
                        return f"http://127.0.0.1:{port}/v1"
            except OSError:
                time.sleep(0.3)

    yield start
    for process, log in started:
        try:
            os.killpg(process.pid, 9)
        except ProcessLookupError:
            pass
        process.wait()
        log.close()
