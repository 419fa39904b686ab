"""The embedded default comparison (`leafcost demo`, what `make demo` runs): the built-in suite in local
sandboxes with three arms: `oracle` (the reference solutions, proving the harness), `local-smol` (a real
135M model served on this CPU, the self-hosted arm) and `hosted` (a router model, when a key is set).
With `--with-router`, a fourth arm `router-smol` goes through a real router on this machine: litellm's proxy
in front of a second local model server, priced at a hosted model's list prices, so the router's reported cost
can be reconciled with ours without any account anywhere."""

from __future__ import annotations

import os
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from typing import Any

from compare.pricing import PER_MILLION, litellm_prices, litellm_revision
from compare.spec import RunSpec, parse_run_spec

ROUTER_KEY_ENV = "ROUTER_API_KEY"
ROUTER_URL_ENV = "ROUTER_BASE_URL"
ROUTER_MODEL_ENV = "ROUTER_MODEL"
DEFAULT_ROUTER_URL = "https://openrouter.ai/api/v1"
DEFAULT_ROUTER_MODEL = "openai/gpt-5-mini"

# The local router: a fixed port, so that an interrupted run resumes against the same arm spec.
LOCAL_ROUTER_PORT_ENV = "LEAFCOST_DEMO_ROUTER_PORT"
DEFAULT_LOCAL_ROUTER_PORT = 41730
LOCAL_ROUTER_KEY_ENV = "LEAFCOST_DEMO_ROUTER_KEY"  # set in this process only, for the adapter to read
LOCAL_ROUTER_MODEL = "hosted-smol"
LOCAL_ROUTER_PRICED_AS = "gpt-5-mini"  # its list prices, from litellm's pinned map, on both sides


def demo_spec(environ: Mapping[str, str] = os.environ, *, with_router: bool = False
              ) -> tuple[RunSpec, dict[str, str]]:
    """The demo's run spec and the arms it skips, each with the reason (the exact variable to set)."""
    hosted = {"name": "hosted", "adapter": "router", "model": environ.get(ROUTER_MODEL_ENV, DEFAULT_ROUTER_MODEL),
              "base_url": environ.get(ROUTER_URL_ENV, DEFAULT_ROUTER_URL), "api_key_env": ROUTER_KEY_ENV,
              "request_timeout_sec": 120}
    arms = [{"name": "oracle", "adapter": "oracle"},
            {"name": "local-smol", "adapter": "local", "machine_usd_per_hour": 0.10, "parallel": 4,
             "request_timeout_sec": 120},
            hosted]
    if with_router:
        arms.append(local_router_arm(environ))
    spec = parse_run_spec({
        "name": "demo", "suite": "builtin", "seeds": 1, "workers": 4, "max_attempts": 2,
        # Small budgets: the point is a real comparison on a laptop-class CPU in minutes, not a leaderboard.
        "budgets": {"max_steps": 8, "max_tokens_per_turn": 256, "time_budget_sec": 240},
        "arms": arms}, source="the built-in demo")
    skipped = {}
    if not environ.get(ROUTER_KEY_ENV):
        skipped["hosted"] = (f"no router key: set {ROUTER_KEY_ENV} (and optionally {ROUTER_URL_ENV}, default "
                             f"{DEFAULT_ROUTER_URL}, and {ROUTER_MODEL_ENV}, default {DEFAULT_ROUTER_MODEL})")
    return spec, skipped


def local_router_port(environ: Mapping[str, str]) -> int:
    raw = environ.get(LOCAL_ROUTER_PORT_ENV, str(DEFAULT_LOCAL_ROUTER_PORT))
    if not raw.isdigit() or not 0 < int(raw) < 65536:
        raise ValueError(f"{LOCAL_ROUTER_PORT_ENV}={raw!r} is not a TCP port number")
    return int(raw)


def local_router_arm(environ: Mapping[str, str]) -> dict[str, Any]:
    """The `router-smol` arm: the router adapter, exactly as for a remote router, pointed at the local proxy."""
    prices = _priced_as()
    return {"name": "router-smol", "adapter": "router", "model": LOCAL_ROUTER_MODEL,
            "base_url": f"http://127.0.0.1:{local_router_port(environ)}/v1", "api_key_env": LOCAL_ROUTER_KEY_ENV,
            "request_timeout_sec": 120,
            "prices": {"input": prices.input, "output": prices.output, "cached_input": prices.cached_input}}


def _priced_as():
    prices = litellm_prices(LOCAL_ROUTER_PRICED_AS)
    if prices is None:
        raise ValueError(f"{litellm_revision()} has no price for {LOCAL_ROUTER_PRICED_AS}")
    return prices


@contextmanager
def local_router(environ: Mapping[str, str] = os.environ) -> Iterator[str]:
    """Runs a local model server and litellm's proxy in front of it for the `router-smol` arm; yields the proxy's
    log path. The proxy's random master key is put in this process's environment (LOCAL_ROUTER_KEY_ENV) for
    the adapter, and removed afterwards; the sandboxes never see this process's environment."""
    from adapters.litellm_proxy import Deployment, LitellmProxy
    from adapters.local_server import SERVED_MODEL, LocalModelServer

    prices = _priced_as()
    with LocalModelServer(parallel=4) as backend:
        deployment = Deployment(
            model_name=LOCAL_ROUTER_MODEL, backend_url=backend.base_url, backend_model=SERVED_MODEL,
            deployment_id=f"{LOCAL_ROUTER_MODEL}-local", input_cost_per_token=prices.input / PER_MILLION,
            output_cost_per_token=prices.output / PER_MILLION,
            cache_read_input_token_cost=None if prices.cached_input is None else prices.cached_input / PER_MILLION)
        with LitellmProxy([deployment], port=local_router_port(environ), request_timeout_sec=120) as proxy:
            os.environ[LOCAL_ROUTER_KEY_ENV] = proxy.master_key
            try:
                yield str(proxy.log_path)
            finally:
                os.environ.pop(LOCAL_ROUTER_KEY_ENV, None)
