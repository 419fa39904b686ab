"""mini-swe-agent episodes for bench/step_path.py, run with the interpreter of mini-swe-agent's own venv (never
leafcost's): DefaultAgent + LitellmModel + LocalEnvironment with every setting of the package's config/mini.yaml,
`--episodes` of them on `--workers` threads (one agent, model and environment per episode, as mini-extra's batch
runs do), against the endpoint at `--base-url`. Prints one JSON line: model calls and exit statuses.

    MINI_VENV/bin/python bench/step_mini_driver.py --base-url URL --episodes 20 --workers 8
"""

from __future__ import annotations

import argparse
import json
from collections import Counter
from concurrent.futures import ThreadPoolExecutor

import yaml
from minisweagent.agents.default import DefaultAgent
from minisweagent.config import get_config_path
from minisweagent.environments.local import LocalEnvironment
from minisweagent.models import get_model

MODEL = "openai/gpt-4o-mini"  # priced in litellm's local map, so mini's cost tracking accepts every call


def run_episode(config: dict, base_url: str) -> tuple[int, str]:
    model_config = dict(config["model"])
    model_config["model_kwargs"] = {**model_config.get("model_kwargs", {}), "api_base": base_url,
                                    "api_key": "bench-key"}
    agent = DefaultAgent(get_model(MODEL, model_config), LocalEnvironment(**config.get("environment", {})),
                         **config["agent"])
    result = agent.run("Say hi, then submit.")
    return agent.n_calls, str(result.get("exit_status"))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--base-url", required=True)
    parser.add_argument("--episodes", type=int, required=True)
    parser.add_argument("--workers", type=int, required=True)
    args = parser.parse_args()
    config = yaml.safe_load(get_config_path("mini").read_text())
    with ThreadPoolExecutor(args.workers) as pool:
        results = list(pool.map(lambda _: run_episode(config, args.base_url), range(args.episodes)))
    print(json.dumps({"model_calls": sum(calls for calls, _ in results),
                      "exits": dict(Counter(status for _, status in results))}))


if __name__ == "__main__":
    main()
