"""The embedded default comparison (`leafcost demo`, what `make demo` runs): the built-in suite in local
sandboxes with three arms: `oracle` (the reference solutions, proving the harness), `local-smol` (a real
135M model served on this CPU, the self-hosted arm) and `hosted` (a router model, when a key is set)."""

from __future__ import annotations

import os
from collections.abc import Mapping

from compare.spec import RunSpec, parse_run_spec

ROUTER_KEY_ENV = "ROUTER_API_KEY"
ROUTER_URL_ENV = "ROUTER_BASE_URL"
ROUTER_MODEL_ENV = "ROUTER_MODEL"
DEFAULT_ROUTER_URL = "https://openrouter.ai/api/v1"
DEFAULT_ROUTER_MODEL = "openai/gpt-5-mini"


def demo_spec(environ: Mapping[str, str] = os.environ) -> tuple[RunSpec, dict[str, str]]:
    """The demo's run spec and the arms it skips, each with the reason (the exact variable to set)."""
    hosted = {"name": "hosted", "adapter": "router", "model": environ.get(ROUTER_MODEL_ENV, DEFAULT_ROUTER_MODEL),
              "base_url": environ.get(ROUTER_URL_ENV, DEFAULT_ROUTER_URL), "api_key_env": ROUTER_KEY_ENV,
              "request_timeout_sec": 120}
    spec = parse_run_spec({
        "name": "demo", "suite": "builtin", "seeds": 1, "workers": 4, "max_attempts": 2,
        # Small budgets: the point is a real comparison on a laptop-class CPU in minutes, not a leaderboard.
        "budgets": {"max_steps": 8, "max_tokens_per_turn": 256, "time_budget_sec": 240},
        "arms": [{"name": "oracle", "adapter": "oracle"},
                 {"name": "local-smol", "adapter": "local", "machine_usd_per_hour": 0.10, "parallel": 4,
                  "request_timeout_sec": 120},
                 hosted]}, source="the built-in demo")
    skipped = {}
    if not environ.get(ROUTER_KEY_ENV):
        skipped["hosted"] = (f"no router key: set {ROUTER_KEY_ENV} (and optionally {ROUTER_URL_ENV}, default "
                             f"{DEFAULT_ROUTER_URL}, and {ROUTER_MODEL_ENV}, default {DEFAULT_ROUTER_MODEL})")
    return spec, skipped
