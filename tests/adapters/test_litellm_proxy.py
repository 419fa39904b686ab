"""The launcher of litellm's proxy (its real start is exercised by the router tests): the config it writes, a
taken port, a port in TIME_WAIT, a proxy that dies at start, and a proxy whose leafcost is killed."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from adapters.children import end_leftovers, records_dir
from adapters.litellm_proxy import Deployment, LitellmProxy, ProxyError, _port_free

pytestmark = pytest.mark.slow  # end to end: make test-fast leaves it out

ROOT = Path(__file__).resolve().parents[2]

PRIMARY = Deployment(model_name="hosted-gpt", backend_url="http://127.0.0.1:9/v1", deployment_id="p",
                     input_cost_per_token=1e-6, output_cost_per_token=1e-5)
BACKUP = Deployment(model_name="backup", backend_url="http://127.0.0.1:9/v1", deployment_id="b",
                    input_cost_per_token=2e-6, output_cost_per_token=2e-5, cache_read_input_token_cost=2e-7)


def test_the_config_routes_names_with_their_prices_and_fallbacks_and_a_fresh_key():
    proxy = LitellmProxy([PRIMARY, BACKUP], fallbacks={"hosted-gpt": ["backup"]})
    config = proxy.config()
    assert [m["model_name"] for m in config["model_list"]] == ["hosted-gpt", "backup"]
    assert config["model_list"][1]["model_info"] == {"id": "b", "input_cost_per_token": 2e-6,
                                                     "output_cost_per_token": 2e-5,
                                                     "cache_read_input_token_cost": 2e-7}
    assert "cache_read_input_token_cost" not in config["model_list"][0]["model_info"]
    assert config["router_settings"]["fallbacks"] == [{"hosted-gpt": ["backup"]}]
    assert config["general_settings"]["master_key"] == proxy.master_key
    assert proxy.master_key != LitellmProxy([PRIMARY]).master_key


def test_a_taken_port_is_a_clear_error():
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        port = busy.getsockname()[1]
        proxy = LitellmProxy([PRIMARY], port=port)
        with pytest.raises(ProxyError, match=f"port {port} on 127.0.0.1 is taken"):
            proxy.start()
    assert not (proxy._folder / "config.yaml").exists()  # no master key left behind on this path either


def test_a_port_in_time_wait_is_free():
    # A listener with SO_REUSEADDR (as the proxy's own server binds) whose side closed a connection first: the
    # port is left in TIME_WAIT with nothing listening, as after a finished demo.
    with socket.socket() as listener:
        listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        listener.bind(("127.0.0.1", 0))
        listener.listen()
        port = listener.getsockname()[1]
        with socket.create_connection(("127.0.0.1", port)) as client:
            accepted, _ = listener.accept()
            accepted.close()  # the server side closes first: its end goes to TIME_WAIT
            assert client.recv(1) == b""
    with socket.socket() as plain, pytest.raises(OSError):
        plain.bind(("127.0.0.1", port))  # the old check's bind: refused while TIME_WAIT lasts
    assert _port_free(port)


class _BrokenCallback(LitellmProxy):
    """A config litellm refuses at start: a logging callback from a module that does not exist."""

    def config(self):
        config = super().config()
        config["litellm_settings"]["callbacks"] = ["no_such_module.handler"]
        return config


def test_a_proxy_that_dies_at_start_reports_its_log_without_the_key(tmp_path):
    proxy = _BrokenCallback([PRIMARY], log_path=tmp_path / "p.log")
    with pytest.raises(ProxyError) as caught:
        proxy.start()
    message = str(caught.value)
    assert "exited with code" in message and "no_such_module" in message
    assert proxy.master_key not in message and proxy.master_key not in (tmp_path / "p.log").read_text()
    assert not (proxy._folder / "config.yaml").exists()  # the key's only file is gone


def test_a_proxy_that_does_not_answer_in_time_is_stopped_and_its_key_file_removed(tmp_path, monkeypatch):
    monkeypatch.setattr("adapters.litellm_proxy.START_TIMEOUT_SEC", 0.2)  # litellm imports for seconds
    proxy = LitellmProxy([PRIMARY], log_path=tmp_path / "p.log")
    with pytest.raises(ProxyError, match="did not answer within"):
        proxy.start()
    assert proxy._process.poll() is not None  # stopped, not left starting
    assert not (proxy._folder / "config.yaml").exists()


PROXY_OWNER = textwrap.dedent("""
    import json, sys, time
    from adapters.litellm_proxy import Deployment, LitellmProxy
    deployment = Deployment(model_name="hosted-gpt", backend_url="http://127.0.0.1:9/v1", deployment_id="p",
                            input_cost_per_token=1e-6, output_cost_per_token=1e-5)
    proxy = LitellmProxy([deployment]).start()
    print(json.dumps({"pid": proxy._process.pid, "folder": str(proxy._folder), "base_url": proxy.base_url}), flush=True)
    time.sleep(600)
""")


def test_kill_9_of_leafcost_ends_the_real_proxy_and_the_next_start_deletes_its_master_key(tmp_path, monkeypatch):
    monkeypatch.setenv("LEAFCOST_CACHE", str(tmp_path / "cache"))
    owner = subprocess.Popen([sys.executable, "-c", PROXY_OWNER], cwd=ROOT, stdout=subprocess.PIPE,
                             env={**os.environ, "LEAFCOST_CACHE": str(tmp_path / "cache")})
    started = None
    try:
        started = json.loads(owner.stdout.readline())
        assert (Path(started["folder"]) / "config.yaml").exists()
        owner.send_signal(signal.SIGKILL)
        owner.wait()
        deadline = time.monotonic() + 30
        while not _gone(started["pid"]) and time.monotonic() < deadline:
            time.sleep(0.05)
        assert _gone(started["pid"]), "the proxy outlived leafcost's kill -9"
        ended = end_leftovers()  # what every later start does first
        assert [r.what for r in ended] == ["litellm proxy"]
        assert not Path(started["folder"]).exists() and not list(records_dir().glob("*.json"))
    finally:
        owner.kill()
        owner.wait()
        if started and not _gone(started["pid"]):
            os.killpg(started["pid"], signal.SIGKILL)


def _gone(pid: int) -> bool:
    try:
        return Path(f"/proc/{pid}/stat").read_text().rpartition(")")[2].split()[0] == "Z"
    except OSError:
        return True
