"""The launcher of litellm's proxy (its real start is exercised by the router tests): the config it writes, a
taken port, and a proxy that dies at start."""

from __future__ import annotations

import socket

import pytest

from adapters.litellm_proxy import Deployment, LitellmProxy, ProxyError

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
        with pytest.raises(ProxyError, match=f"port {port} on 127.0.0.1 is taken"):
            LitellmProxy([PRIMARY], port=port).start()


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
