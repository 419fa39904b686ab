"""Run specs: the README's example works as written; every mistake is named by its field path."""

from __future__ import annotations

import pytest

from compare.spec import LEAF_SAMPLING, SpecError, load_run_spec

ISSUE_SPEC = """
name: smoke
suite: ./my-tasks          # a directory of Harbor tasks, a SWE-bench JSON(L) file, or "builtin"
seeds: 2
workers: 4
sandbox: {backend: local}
budgets: {max_steps: 20, max_context_tokens: 131072, time_budget_sec: 600}
arms:
  - name: frognano
    adapter: sglang
    model: frognano-4b
    base_url: http://127.0.0.1:30000/v1
    sampling: {temperature: 0.6, top_p: 0.95, top_k: 20}
    gpu: {type: H200, count: 1, usd_per_hour: 3.50}
  - name: hosted
    adapter: router
    model: openai/gpt-5
    base_url: http://127.0.0.1:4000/v1
    api_key_env: ROUTER_API_KEY
    prices: {input: 1.25, output: 10.0, cached_input: 0.125}   # USD per 1M tokens
"""


def write(tmp_path, text):
    path = tmp_path / "spec.yaml"
    path.write_text(text)
    return path


def test_the_documented_spec_works_as_written(tmp_path):
    spec = load_run_spec(write(tmp_path, ISSUE_SPEC))
    frognano, hosted = spec.arms
    assert (spec.seeds, spec.workers, spec.budgets.max_steps) == (2, 4, 20)
    assert frognano.gpu.usd_per_hour == 3.5 and frognano.sampling.body() == {"temperature": 0.6, "top_p": 0.95,
                                                                              "top_k": 20}
    assert hosted.prices.cached_input == 0.125 and hosted.api_key_env == "ROUTER_API_KEY"
    assert spec.digest() == load_run_spec(write(tmp_path, ISSUE_SPEC)).digest()


@pytest.mark.parametrize("change, message", [
    (("seeds: 2", "seedz: 2"), "spec.yaml: seedz: unknown field"),
    (("usd_per_hour: 3.50", "usd_per_hour: cheap"), "arms.0.gpu.usd_per_hour: Input should be a valid number"),
    (("adapter: router", "adapter: routr"), "arms.1: Input tag 'routr'"),
    (("api_key_env: ROUTER_API_KEY", "api_key: sk-live-123"), "arms.1.api_key: unknown field (never put a key"),
    (("name: hosted", "name: frognano"), "arm names must be unique; repeated: frognano"),
    (("max_steps: 20", "max_steps: -1"), "budgets.max_steps: Input should be greater than 0"),
])
def test_mistakes_are_named_by_field_path(tmp_path, change, message):
    with pytest.raises(SpecError) as caught:
        load_run_spec(write(tmp_path, ISSUE_SPEC.replace(*change)))
    assert message in str(caught.value)


def test_invalid_yaml_and_missing_file(tmp_path):
    with pytest.raises(SpecError, match="not valid YAML"):
        load_run_spec(write(tmp_path, "name: [unclosed\n"))
    with pytest.raises(SpecError, match="cannot read"):
        load_run_spec(tmp_path / "absent.yaml")
    with pytest.raises(SpecError, match="a run spec is a mapping"):
        load_run_spec(write(tmp_path, "- just\n- a list\n"))


def test_leaf_preset_fills_what_the_spec_leaves_out(tmp_path):
    text = ("name: verified\nsuite: swe-bench-verified.jsonl\npreset: leaf\narms:\n"
            "  - {name: frognano, adapter: sglang, model: f, base_url: 'http://x/v1',"
            " gpu: {type: H200, usd_per_hour: 3.5}, sampling: {temperature: 0.7}}\n"
            "  - {name: oracle, adapter: oracle}\n")
    spec = load_run_spec(write(tmp_path, text))
    assert (spec.seeds, spec.workers, spec.max_attempts, spec.task_order_seed) == (3, 150, 2, 42)
    assert spec.budgets.max_steps == 150 and spec.budgets.time_budget_sec == 10800
    assert spec.budgets.max_tokens_per_turn == 8192
    assert spec.arms[0].sampling.body() == {**LEAF_SAMPLING, "temperature": 0.7}
