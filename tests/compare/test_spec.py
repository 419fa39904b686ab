"""Run specs: the README's example works as written; every mistake is named by its field path."""

from __future__ import annotations

import asyncio
import os
import shutil
import subprocess
from pathlib import Path

import pytest

from compare.spec import LEAF_SAMPLING, RunSpec, SpecError, load_run_spec, parse_run_spec

REPO = Path(__file__).resolve().parents[2]

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
    (("adapter: router", "adapter: routr"), "arms.1.adapter: unknown adapter 'routr': choose one of local, oracle,"),
    (("api_key_env: ROUTER_API_KEY", "api_key: sk-live-123"), "arms.1.api_key: unknown field (never put a key"),
    (("name: hosted", "name: frognano"), "arm names must be unique; repeated: frognano"),
    (("max_steps: 20", "max_steps: -1"), "budgets.max_steps: Input should be greater than 0"),
    (("seeds: 2", "seeds: 2\nrepos: /srv/mirrors"), "repos: no longer read: SWE-bench instances run in their own"),
    (("seeds: 2", "seeds: 2\nswebench: {tag: 'bad tag'}"), "swebench.tag: String should match pattern"),
    (("seeds: 2", "seeds: 2\nswebench: {registry: x}"), "swebench.registry: unknown field"),
    (("sandbox: {backend: local}", "sandbox: {backend: kubernetes}"),
     "spec.yaml: sandbox: images: the kubernetes backend runs each task's image by digest"),  # no "Value error, "
    # decide: (docs/decisions.md); its own checks are in test_decision.py, these are the spec-wide ones
    (("seeds: 2", "seeds: 2\ndecide: {cheaper: {arms: [frognano, hosteed]}}"),
     "spec.yaml: decide.cheaper.arms.1: no arm named 'hosteed' (arms: frognano, hosted)"),
    (("seeds: 2", "seeds: 2\ndecide: {cheaper: {arms: [frognano, hosted], margin: .nan}}"),
     "spec.yaml: decide.cheaper.margin: "),
    (("seeds: 2", "seeds: 2\ntask_order_seed: null\ndecide: {reaches: {arm: hosted, avg_at_k: 0.5}}"),
     "spec.yaml: task_order_seed: a run with decide: may stop after a sample of the tasks, which must be a random"),
    (("seeds: 2", "seeds: 2\nplan: {priors: {gpt: {resolve_rate: 0.5, prompt_tokens: 1, completion_tokens: 1}}}"),
     "spec.yaml: plan.priors.gpt: no arm named 'gpt'"),
])
def test_mistakes_are_named_by_field_path(tmp_path, change, message):
    with pytest.raises(SpecError) as caught:
        load_run_spec(write(tmp_path, ISSUE_SPEC.replace(*change)))
    assert message in str(caught.value)


def test_a_key_given_twice_is_refused_with_both_lines(tmp_path):
    text = ISSUE_SPEC.replace("sandbox: {backend: local}", "sandbox: {backend: local}\nseeds: 5")
    with pytest.raises(SpecError) as caught:
        load_run_spec(write(tmp_path, text))
    lines = ISSUE_SPEC.splitlines()
    first = 1 + lines.index(next(line for line in lines if line.startswith("seeds:")))
    second = 2 + lines.index("sandbox: {backend: local}")
    assert str(caught.value).endswith(f"spec.yaml line {second}, column 1: 'seeds' is given twice (first on line "
                                      f"{first}): fix the YAML")
    nested = "name: n\nsuite: builtin\narms:\n  - {name: a, adapter: oracle, name: b}\n"
    with pytest.raises(SpecError, match=r"line 4, column 32: 'name' is given twice \(first on line 4\)"):
        load_run_spec(write(tmp_path, nested))
    merged = "name: n\nsuite: builtin\narms:\n  - &o {name: a, adapter: oracle}\n  - {<<: *o, name: b}\n"
    assert [arm.name for arm in load_run_spec(write(tmp_path, merged)).arms] == ["a", "b"]  # a merge key overrides


def test_invalid_yaml_and_missing_file(tmp_path):
    with pytest.raises(SpecError, match=r"spec.yaml line 2, column 1: expected ',' or '\]', but got '<stream end>' "
                       r"\(while parsing a flow sequence opened at line 1, column 7\): fix the YAML$"):
        load_run_spec(write(tmp_path, "name: [unclosed\n"))
    with pytest.raises(SpecError, match="absent.yaml: no such file: check the path$"):
        load_run_spec(tmp_path / "absent.yaml")
    with pytest.raises(SpecError, match=": a directory, not a file: name the YAML file$"):
        load_run_spec(tmp_path)
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


# bad input: one line naming the field, before anything runs --------------------------------------------------

HUGE = "100000000000000000000000"
ROUTER_ARM = "  - {name: hosted, adapter: router, model: m, prices: {input: 1.0, output: 2.0}}\n"
SGLANG_ARM = ("  - {name: frognano, adapter: sglang, model: f, base_url: 'http://x/v1', "
              "gpu: {type: H200, usd_per_hour: 3.5}}\n")


def spec_text(top: str = "", arm: str = ROUTER_ARM) -> str:
    return f"name: edge\nsuite: builtin\n{top}arms:\n{arm}"


@pytest.mark.parametrize("top, arm, message", [
    (f"seeds: {HUGE}\n", ROUTER_ARM, "seeds: Input should be less than or equal to 10000"),
    (f"workers: {HUGE}\n", ROUTER_ARM, "workers: Input should be less than or equal to 10000"),
    (f"limit: {HUGE}\n", ROUTER_ARM, "limit: Input should be less than or equal to 10000000"),
    (f"max_attempts: {HUGE}\n", ROUTER_ARM, "max_attempts: Input should be less than or equal to 100"),
    (f"task_order_seed: -{HUGE}\n", ROUTER_ARM, "task_order_seed: Input should be greater than or equal to"),
    (f"budgets: {{max_steps: {HUGE}}}\n", ROUTER_ARM, "budgets.max_steps: Input should be less than or equal"),
    (f"budgets: {{max_context_tokens: {HUGE}}}\n", ROUTER_ARM, "budgets.max_context_tokens: Input should be less"),
    (f"budgets: {{max_tokens_per_turn: {HUGE}}}\n", ROUTER_ARM, "budgets.max_tokens_per_turn: Input should be less"),
    ("budgets: {time_budget_sec: 1e308}\n", ROUTER_ARM, "budgets.time_budget_sec: Input should be less"),
    ("", ROUTER_ARM.replace("model: m,", f"model: m, max_retries: {HUGE},"), "arms.0.max_retries: Input should be"),
    ("", ROUTER_ARM.replace("model: m,", "model: m, request_timeout_sec: .inf,"),
     "arms.0.request_timeout_sec: Input should be a finite number"),
    ("", ROUTER_ARM.replace("model: m,", f"model: m, sampling: {{top_k: {HUGE}}},"), "arms.0.sampling.top_k: Input"),
    ("", ROUTER_ARM.replace("model: m,", "model: m, sampling: {temperature: .nan},"),
     "arms.0.sampling.temperature: Input should be a finite number"),
    ("", ROUTER_ARM.replace("model: m,", f"model: m, sampling: {{chat_template_kwargs: {{budget: [1, {HUGE}]}}}},"),
     f"arms.0.sampling.chat_template_kwargs.budget.1: {HUGE} is out of range"),
    ("", SGLANG_ARM.replace("type: H200,", f"type: H200, count: {HUGE},"), "arms.0.gpu.count: Input should be less"),
    ("", f"  - {{name: cpu, adapter: local, parallel: {HUGE}}}\n", "arms.0.parallel: Input should be less"),
])
def test_huge_or_non_finite_numbers_are_refused_naming_the_field_and_the_bound(tmp_path, top, arm, message):
    with pytest.raises(SpecError) as caught:
        load_run_spec(write(tmp_path, spec_text(top, arm)))
    assert f"spec.yaml: {message}" in str(caught.value) and "\n" not in str(caught.value)


@pytest.mark.parametrize("value", [".nan", ".inf", "-.inf", "1e308", "'NaN'", "'Infinity'", "-1"])
@pytest.mark.parametrize("where, top, arm", [
    ("arms.0.prices.input", "", ROUTER_ARM.replace("input: 1.0", "input: VALUE")),
    ("arms.0.prices.above_200k.output", "",
     ROUTER_ARM.replace("output: 2.0", "output: 2.0, above_200k: {input: 1, output: VALUE}")),
    ("arms.0.fallback_prices.other.cached_input", "",
     ROUTER_ARM.replace("}}", "}, fallback_prices: {other: {input: 1, output: 1, cached_input: VALUE}}}")),
    ("arms.0.prices.markup_pct", "", ROUTER_ARM.replace("output: 2.0", "output: 2.0, markup_pct: VALUE")),
    ("arms.0.gpu.usd_per_hour", "", SGLANG_ARM.replace("usd_per_hour: 3.5", "usd_per_hour: VALUE")),
    ("arms.0.machine_usd_per_hour", "", "  - {name: cpu, adapter: local, machine_usd_per_hour: VALUE}\n"),
    ("costs.sandbox_usd_per_vcpu_hour", "costs: {sandbox_usd_per_vcpu_hour: VALUE}\n", ROUTER_ARM),
])
def test_every_price_must_be_finite_non_negative_and_sane(tmp_path, value, where, top, arm):
    with pytest.raises(SpecError) as caught:
        load_run_spec(write(tmp_path, spec_text(top, arm).replace("VALUE", value)))
    assert f"spec.yaml: {where}: Input should be " in str(caught.value)


def test_prices_at_their_bounds_are_accepted_and_fit_the_ledger(tmp_path):
    from compare.ledger import Ledger

    text = spec_text("seeds: 10000\nworkers: 10000\nlimit: 10000000\nmax_attempts: 100\n"
                     f"task_order_seed: {2**63 - 1}\ncosts: {{sandbox_usd_per_vcpu_hour: 100}}\n",
                     ROUTER_ARM.replace("input: 1.0", "input: 10000, cached_input: 0") + SGLANG_ARM.replace(
                         "usd_per_hour: 3.5", "usd_per_hour: 10000, count: 4096"))
    spec = load_run_spec(write(tmp_path, text))

    async def record():
        async with Ledger.open(tmp_path / "l.duckdb") as ledger:
            await ledger.create_run("edge-1", spec, task_ids=["t"])
            return (await ledger.get_run("edge-1")).spec()

    assert asyncio.run(record()) == spec


def test_sandbox_paths_must_exist_before_anything_runs(tmp_path):
    root = tmp_path / "root"
    (root / "usr/bin").mkdir(parents=True)
    toolchain = tmp_path / "toolchain"
    toolchain.mkdir()

    def problem(sandbox: str) -> str | None:
        try:
            load_run_spec(write(tmp_path, spec_text(f"sandbox: {sandbox}\n")))
        except SpecError as exc:
            return str(exc)
        return None

    missing = tmp_path / "nonexistent-root"
    assert problem(f"{{base_root: {missing}}}") == \
        f"{tmp_path / 'spec.yaml'}: sandbox.base_root: {missing} does not exist"
    (tmp_path / "a-file").write_text("")
    assert problem(f"{{base_root: {tmp_path / 'a-file'}}}").endswith(
        f"sandbox.base_root: {tmp_path / 'a-file'} does not exist as a directory")
    assert problem(f"{{base_root: {root}}}").endswith(f"sandbox.base_root: {root} has no usr/bin/python3 (give a "
                                                      "root directory with Python 3 in it, or \"host\")")
    (root / "usr/bin/python3").write_text("")
    assert problem(f"{{base_root: {root}, bind_ro: [{toolchain}]}}") is None
    assert problem(f"{{bind_ro: [{toolchain}, /nonexistent-dir]}}").endswith(
        "sandbox.bind_ro.1: /nonexistent-dir does not exist")
    assert problem("{bind_ro: [relative/dir]}").endswith(
        "sandbox.bind_ro.0: relative/dir is not an absolute path (it is bound at the same path inside)")


def test_a_stored_spec_reads_back_on_a_machine_without_its_paths(tmp_path):
    (tmp_path / "root/usr/bin").mkdir(parents=True)
    (tmp_path / "root/usr/bin/python3").write_text("")
    spec = load_run_spec(write(tmp_path, spec_text(f"sandbox: {{base_root: {tmp_path / 'root'}}}\n")))
    shutil.rmtree(tmp_path / "root")
    assert RunSpec.model_validate_json(spec.model_dump_json()) == spec  # summaries of the run still work


@pytest.mark.parametrize("top, field", [
    (f"seeds: {HUGE}\n", "seeds: Input should be less than or equal to 10000"),
    ("sandbox: {base_root: /nonexistent-root}\n", "sandbox.base_root: /nonexistent-root does not exist"),
    ("sandbox: {bind_ro: [/nonexistent-dir]}\n", "sandbox.bind_ro.0: /nonexistent-dir does not exist"),
    ("costs: {sandbox_usd_per_vcpu_hour: .nan}\n", "costs.sandbox_usd_per_vcpu_hour: Input should be a finite"),
])
def test_leafcost_run_refuses_a_bad_spec_with_exit_2_and_one_line_before_anything_runs(tmp_path, top, field):
    path = write(tmp_path, spec_text(top, "  - {name: oracle, adapter: oracle}\n"))
    done = subprocess.run([str(REPO / ".venv/bin/leafcost"), "run", str(path), "--db", str(tmp_path / "l.duckdb")],
                          capture_output=True, text=True, timeout=120, cwd=tmp_path,
                          env={**os.environ, "LEAFCOST_CACHE": str(tmp_path / "cache")})
    assert done.returncode == 2, done.stderr
    lines = done.stderr.splitlines()
    assert len(lines) == 1 and lines[0].startswith(f"leafcost: {path}: {field}") and done.stdout == ""
    assert not (tmp_path / "l.duckdb").exists() and not (tmp_path / "trajectories").exists()


def test_resource_overrides_are_harbors_and_a_bad_one_is_named():
    spec = parse_run_spec({"name": "o", "suite": "builtin", "arms": [{"name": "oracle", "adapter": "oracle"}],
                           "sandbox": {"override_cpus": 0.5, "override_memory_mb": 1024}})
    assert spec.sandbox.resources() == {"cpus": 0.5, "memory_mb": 1024}
    with pytest.raises(SpecError, match=r"sandbox\.override_memory_mb"):
        parse_run_spec({"name": "o", "suite": "builtin", "arms": [{"name": "oracle", "adapter": "oracle"}],
                        "sandbox": {"override_memory_mb": 0}})


CLAIM = {"title": "t", "source": "s", "arm": "frog", "benchmark": "b", "avg_at_k": 0.615, "pass_at_k": 0.71, "k": 3}


def claim_spec(**claim) -> dict:
    return {"name": "c", "suite": "builtin", "seeds": 3, "claim": {**CLAIM, **claim},
            "arms": [{"name": "frog", "adapter": "local"}, {"name": "oracle", "adapter": "oracle"}]}


def test_a_claim_is_checked_against_the_arms_and_seeds_and_left_out_of_the_hash():
    spec = parse_run_spec(claim_spec())
    assert spec.claim.avg_at_k == 0.615 and spec.claim.tolerance == 0.05 and spec.claim.max_harness_error_rate == 0.02
    unclaimed = parse_run_spec({key: value for key, value in claim_spec().items() if key != "claim"})
    assert spec.digest() == unclaimed.digest()  # the question, not the episodes: a resume may add it
    for change, message in [({"arm": "gone"}, "claim.arm: no arm named 'gone' (arms: frog, oracle)"),
                            ({"arm": "oracle"}, "claim.arm: 'oracle' is the oracle arm"),
                            ({"k": 2}, "claim.k: the claim averages over 2 seeds, the spec runs seeds: 3"),
                            ({"pass_at_k": 0.5}, "pass_at_k (0.5) is below avg_at_k (0.615)"),
                            ({"avg_at_k": 1.2}, "claim.avg_at_k: Input should be less than 1"),
                            ({"tolerance": -0.1}, "claim.tolerance: Input should be greater than or equal to 0")]:
        with pytest.raises(SpecError) as caught:
            parse_run_spec(claim_spec(**change))
        assert message in str(caught.value), (change, str(caught.value))
