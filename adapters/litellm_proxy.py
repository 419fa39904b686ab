"""A real router on this machine: litellm's own proxy server (`litellm --config`), started as a child process in
front of OpenAI-compatible backends, with a master key and explicit per-deployment prices. Tests and
`leafcost demo --with-router` use it; the router adapter talks to it exactly as to a remote router."""

from __future__ import annotations

import os
import secrets
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any

import yaml
from pydantic import BaseModel, Field

from adapters.children import child_env, end_leftovers, forget, spawn
from adapters.scrubbing import scrub

START_TIMEOUT_SEC = 120.0  # it imports for ~10 s on two cores; more on a loaded machine


class Deployment(BaseModel):
    """One backend the proxy may send a model name to. Prices are USD per token, as litellm's config takes them."""

    model_name: str  # the name clients ask for (a model group: several deployments may share it)
    backend_url: str  # an OpenAI-compatible base URL ending in /v1
    backend_model: str = "served-model"  # the name the backend is asked for
    deployment_id: str  # returned by the proxy in `x-litellm-model-id`
    input_cost_per_token: float = Field(ge=0)
    output_cost_per_token: float = Field(ge=0)
    cache_read_input_token_cost: float | None = Field(None, ge=0)


class ProxyError(RuntimeError):
    """The proxy could not be started; the message carries the tail of its log."""


class LitellmProxy:
    """`with LitellmProxy(deployments, fallbacks={"a": ["b"]}) as proxy:` → `proxy.base_url`, `proxy.master_key`.
    The master key is random per start, lives only in a 0600 config file that is removed at stop (and on every
    failed start), and reaches clients through an environment variable the caller sets; the proxy never reads
    our environment's keys, and dies with us (a parent-death signal; a later start ends it and deletes its
    config if it survived anyway, by the record `adapters.children` keeps)."""

    def __init__(self, deployments: list[Deployment], *, fallbacks: dict[str, list[str]] | None = None,
                 num_retries: int = 0, request_timeout_sec: float = 60.0, port: int | None = None,
                 log_path: Path | None = None):
        self.deployments = deployments
        self.fallbacks = fallbacks or {}
        self.num_retries = num_retries
        self.request_timeout_sec = request_timeout_sec
        self.master_key = "sk-leafcost-" + secrets.token_urlsafe(24)
        self.port = port
        self.log_path = log_path
        self.base_url = ""
        self._folder: Path | None = None
        self._process: subprocess.Popen | None = None

    def config(self) -> dict[str, Any]:
        model_list = []
        for d in self.deployments:
            info: dict[str, Any] = {"id": d.deployment_id, "input_cost_per_token": d.input_cost_per_token,
                                    "output_cost_per_token": d.output_cost_per_token}
            if d.cache_read_input_token_cost is not None:
                info["cache_read_input_token_cost"] = d.cache_read_input_token_cost
            model_list.append({"model_name": d.model_name, "model_info": info, "litellm_params": {
                "model": f"openai/{d.backend_model}", "api_base": d.backend_url, "api_key": "unused-by-backend"}})
        router_settings: dict[str, Any] = {"num_retries": self.num_retries, "timeout": self.request_timeout_sec}
        if self.fallbacks:
            router_settings["fallbacks"] = [{name: list(to)} for name, to in self.fallbacks.items()]
        return {"model_list": model_list, "router_settings": router_settings,
                "litellm_settings": {"telemetry": False},
                "general_settings": {"master_key": self.master_key}}

    def start(self) -> LitellmProxy:
        """Starts the proxy and waits until it is live. On any failure the proxy is stopped and the config file
        with the master key is gone before the error propagates."""
        self._folder = Path(tempfile.mkdtemp(prefix="leafcost-litellm-proxy-"))
        try:
            self._start()
        except BaseException:
            self.stop()
            raise
        return self

    def _start(self) -> None:
        end_leftovers()  # a proxy a killed run left on this fixed port is ended before the port is checked
        port = self.port or free_port()
        if self.port and not _port_free(port):
            raise ProxyError(f"port {port} on 127.0.0.1 is taken: stop what listens there or pick another port")
        executable = shutil.which("litellm", path=str(Path(sys.executable).parent)) or shutil.which("litellm")
        if executable is None:
            raise ProxyError("litellm's `litellm` command is not installed in this environment (make deps)")
        config_path = self._folder / "config.yaml"
        config_path.touch(mode=0o600)
        config_path.write_text(yaml.safe_dump(self.config()))
        log_path = self.log_path or self._folder / "proxy.log"
        # Only what it needs from our environment: never a router key or anything else secret of ours.
        env = child_env({"LITELLM_LOCAL_MODEL_COST_MAP": "True", "LITELLM_LOG": "ERROR", "PYTHONUNBUFFERED": "1"})
        with open(log_path, "wb") as log:
            self._process = spawn(
                [executable, "--config", str(config_path), "--host", "127.0.0.1", "--port", str(port)],
                what="litellm proxy", cleanup=[self._folder], env=env, stdout=log, stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL)
        self.log_path = log_path
        self._wait_live(port)
        self.base_url = f"http://127.0.0.1:{port}/v1"

    def _wait_live(self, port: int) -> None:
        deadline = time.monotonic() + START_TIMEOUT_SEC
        while True:
            if self._process.poll() is not None:
                raise ProxyError(f"the litellm proxy exited with code {self._process.returncode}:\n"
                                 f"{self.log_tail()}")
            if time.monotonic() > deadline:
                raise ProxyError(f"the litellm proxy did not answer within {START_TIMEOUT_SEC:.0f} s:\n"
                                 f"{self.log_tail()}")
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{port}/health/liveliness", timeout=2) as answer:
                    if answer.status == 200:
                        return
            except (OSError, urllib.error.URLError):
                time.sleep(0.3)

    def log_tail(self, chars: int = 3000) -> str:
        try:
            text = Path(self.log_path).read_text(errors="replace") if self.log_path else ""
        except OSError:
            return ""
        return scrub(text[-chars:], [self.master_key])

    def stop(self) -> None:
        if self._process is not None and self._process.poll() is None:
            try:
                os.killpg(self._process.pid, signal.SIGTERM)
                self._process.wait(timeout=10)
            except subprocess.TimeoutExpired:
                os.killpg(self._process.pid, signal.SIGKILL)
                self._process.wait()
            except ProcessLookupError:
                pass
        if self._process is not None:
            forget(self._process)
        if self._folder is not None:
            (self._folder / "config.yaml").unlink(missing_ok=True)  # the master key goes with it

    def __enter__(self) -> LitellmProxy:
        return self.start()

    def __exit__(self, *exc_info: object) -> None:
        self.stop()


def _port_free(port: int) -> bool:
    """Nothing listens on the port. SO_REUSEADDR, as the proxy's own server binds: a port whose last connection
    is in TIME_WAIT is free, only a listener makes it taken."""
    with socket.socket() as sock:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            sock.bind(("127.0.0.1", port))
        except OSError:
            return False
        return True


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]
