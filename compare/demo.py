"""The embedded default comparison (`leafcost demo`, what `make demo` runs): the built-in suite in local
sandboxes with three arms: `oracle` (the reference solutions, proving the harness), `local-smol` (a real
135M model served on this CPU, the self-hosted arm) and `hosted` (a router model, when a key is set).
With `--with-router`, a fourth arm `router-smol` goes through a real router on this machine: litellm's proxy
in front of a second local model server, priced at a hosted model's list prices, so the router's reported cost
can be reconciled with ours without any account anywhere. And the next steps the demo prints, typed as they run
on this machine (`.venv/bin/leafcost` until `make install` puts `leafcost` on PATH)."""

from __future__ import annotations

import os
import shutil
import sys
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path
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


def leafcost_program(environ: Mapping[str, str] = os.environ, *, this: Path | None = None,
                     cwd: Path | None = None) -> tuple[str, str | None]:
    """How to type this leafcost in the demo's next steps, and advice when plain `leafcost` would not run it:
    `make demo` installs the command in .venv/bin/, which is on no one's PATH until `make install`. `this` is
    the running command (default: the `leafcost` beside this Python)."""
    this = this or Path(sys.executable).with_name("leafcost")
    if not this.is_file():  # not run from an installed command (python -m ...): nothing better to show
        return "leafcost", None
    found = shutil.which("leafcost", path=environ.get("PATH", os.defpath))
    if found is not None and Path(found).resolve() == this.resolve():
        return "leafcost", None
    shown = _as_typed(this, cwd or Path.cwd())
    if found is None:
        return shown, f"leafcost is not on your PATH: run `make install` or use {shown}"
    return shown, f"the leafcost on your PATH is {found}, not this one: run `make install` or use {shown}"


def next_steps(run_id: str, db: str, program: str = "leafcost", pair: tuple[str, str] = ("oracle", "local-smol")
               ) -> list[str]:
    """What to type after the demo to look at its run, with `program` as `leafcost_program` gives it and `pair`
    the two arms to compare: one command a line, never wrapped, so each can be copied as it is; what they do in
    shell comments above them."""
    return ["# every figure, and two arms paired:",
            f"{program} summary {run_id} --db {db} --wide",
            f"{program} compare {run_id} --arms {','.join(pair)} --db {db}",
            "# the run's page (then open http://127.0.0.1:8000/), and its report files:",
            f"{program} serve --db {db}",
            f"{program} report {run_id} --db {db} --out report"]


def arms_to_compare(ran: list[str]) -> tuple[str, str]:
    """The pair the demo suggests comparing: the self-hosted arm against a hosted one when one ran (the question
    leafcost answers), else against the oracle, the reference."""
    models = [arm for arm in ran if arm != "oracle"]
    return (models[0], models[1]) if len(models) > 1 else ("oracle", models[0] if models else "local-smol")


def _as_typed(path: Path, cwd: Path) -> str:
    """A path to type in `cwd`: relative when inside it (.venv/bin/leafcost), else absolute."""
    absolute = path.absolute()
    if not absolute.is_relative_to(cwd):
        return str(absolute)
    relative = str(absolute.relative_to(cwd))
    return relative if os.sep in relative else f".{os.sep}{relative}"  # a bare name would be looked up on PATH


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
