"""`leafcost reproduce`: a claim preset is data (the shipped one states the vendor's published setting and names what
nothing confirms), the spec it writes carries that setting, and every bad input is one `leafcost:` line, exit 2,
before any episode runs (with --run, no ledger is even created)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import yaml
from leaf_checkouts import write_checkout

from compare.claim_preset import PRESETS_DIR, PresetError, load_preset, preset_names
from compare.spec import LEAF_PRESET, LEAF_SAMPLING, LEAF_TOKENS_PER_TURN, load_run_spec

LEAFCOST = Path(sys.executable).with_name("leafcost")
ROWS = Path(__file__).parents[1] / "fixtures" / "swebench" / "instances.jsonl"
FIXTURE_IDS = [json.loads(line)["instance_id"] for line in ROWS.read_text().splitlines() if line.strip()]
SHIPPED = "frognano-swebench-verified"

FIXTURE_PRESET = {
    "name": "fixture-claim", "model": "frognano-4b",
    "claim": {"title": "the stub resolves 61.5 % of the fixtures", "source": "this test",
              "benchmark": "SWE-bench fixtures", "instances": 4, "avg_at_k": 0.615, "pass_at_k": 0.71, "k": 3},
    "dataset": {"name": "fixtures", "instance_ids": FIXTURE_IDS},
    "settings": {"seeds": 3, "workers": 4, "max_attempts": 2, "task_order_seed": 42,
                 "budgets": {"max_steps": 10, "max_context_tokens": 131072, "time_budget_sec": 600,
                             "max_tokens_per_turn": 8192},
                 "sampling": {"temperature": 0.6, "top_p": 0.95, "top_k": 20, "min_p": 0.0,
                              "chat_template_kwargs": {"enable_thinking": True}}},
    "unconfirmed": ["the stub's release day is made up"],
}
CLAIM_ARM = {"name": "frog", "adapter": "sglang", "model": "frognano-4b", "base_url": "http://127.0.0.1:9/v1",
             "gpu": {"type": "H200", "usd_per_hour": 3.5}, "released": "2024-06-01"}


def leafcost(*args: str, cwd: Path) -> subprocess.CompletedProcess:
    environment = {**os.environ, "LEAFCOST_CACHE": str(cwd / "cache")}
    return subprocess.run([str(LEAFCOST), *args], capture_output=True, text=True, cwd=cwd, env=environment,
                          timeout=900)


def refused(result: subprocess.CompletedProcess) -> str:
    """The one `leafcost:` line of a refused command (after any progress lines), exit 2."""
    ours = [line for line in result.stderr.splitlines() if line.startswith("leafcost: ")]
    assert result.returncode == 2 and len(ours) == 1 and result.stderr.splitlines()[-1] == ours[0], result.stderr
    return ours[0]


def write_yaml(path: Path, data: dict) -> Path:
    path.write_text(yaml.safe_dump(data, sort_keys=False))
    return path


def write_rows(path: Path, rows: list[dict]) -> Path:
    path.write_text("".join(json.dumps(row) + "\n" for row in rows))
    return path


def image_id(found: str) -> str:
    """An image ID as a lock writes it (podman's inspect may leave out the algorithm)."""
    return f"sha256:{found.removeprefix('sha256:')}"


def fixture_rows() -> list[dict]:
    return [json.loads(line) for line in ROWS.read_text().splitlines() if line.strip()]


@pytest.fixture
def inputs(tmp_path):
    """The files a reproduction needs: a fake FrogNano clone, the fixture preset, the claim arm's file."""
    class Inputs:
        checkout = write_checkout(tmp_path / "frognano")
        preset = write_yaml(tmp_path / "fixture-claim.yaml", FIXTURE_PRESET)
        arm = write_yaml(tmp_path / "frog.yaml", CLAIM_ARM)
        db = tmp_path / "ledger.duckdb"

        def args(self, *extra: str, preset: Path | str | None = None, arm: Path | None = None,
                 dataset: Path = ROWS) -> list[str]:
            return ["reproduce", str(preset or self.preset), "--arm", str(arm or self.arm), "--dataset", str(dataset),
                    "--leaf-checkout", str(self.checkout), "--out", str(tmp_path / "out"), *extra]

    return Inputs()


@pytest.fixture(scope="module")
def instance_images(container_images):
    from swebench_images import ensure_swebench_instance_images

    return ensure_swebench_instance_images(ROWS)


# --- the presets ----------------------------------------------------------------------------------------------

def test_the_shipped_preset_states_the_vendors_figures_and_published_settings():
    preset = load_preset(SHIPPED)
    claim, settings = preset.claim, preset.settings
    assert (claim.avg_at_k, claim.pass_at_k, claim.k, claim.instances) == (0.615, 0.71, 3, 500)
    assert claim.benchmark == "SWE-bench Verified"
    assert (preset.dataset.name, preset.dataset.split) == ("SWE-bench/SWE-bench_Verified", "test")
    # The same published settings compare.spec's `leaf` preset applies (shared/reference/leaf.md).
    assert (settings.seeds, settings.workers, settings.max_attempts, settings.task_order_seed) == (
        LEAF_PRESET["seeds"], LEAF_PRESET["workers"], LEAF_PRESET["max_attempts"], LEAF_PRESET["task_order_seed"])
    assert settings.budgets.model_dump() == {**LEAF_PRESET["budgets"],
                                             "max_tokens_per_turn": LEAF_TOKENS_PER_TURN["swe-bench-verified"]}
    assert settings.sampling.model_dump(exclude_none=True) == LEAF_SAMPLING
    said = " ".join(preset.unconfirmed)
    for unconfirmed in ("release day", "dataset revision", "SGLang version", "150 shared workers",
                        "repetition_penalty", "Pass@3", "sampling seeds"):
        assert unconfirmed in said, unconfirmed


def test_the_claim_takes_its_arm_from_the_run_and_its_unconfirmed_list_from_the_preset():
    preset = load_preset(SHIPPED)
    claim = preset.claim_config("frog")
    assert (claim.arm, claim.preset, claim.avg_at_k) == ("frog", SHIPPED, 0.615)
    assert claim.unconfirmed == preset.unconfirmed and len(claim.unconfirmed) >= 6


def test_a_second_claim_is_a_new_file_loaded_by_its_path(tmp_path):
    assert SHIPPED in preset_names() and all((PRESETS_DIR / f"{name}.yaml").is_file() for name in preset_names())
    other = write_yaml(tmp_path / "tb2.yaml", {**FIXTURE_PRESET, "name": "terminal-bench-2"})
    assert load_preset(str(other)).name == "terminal-bench-2"
    with pytest.raises(PresetError, match=f"preset 'nope': no such preset \\(presets: .*{SHIPPED}"):
        load_preset("nope")
    wrong_k = write_yaml(tmp_path / "k.yaml", {**FIXTURE_PRESET, "claim": {**FIXTURE_PRESET["claim"], "k": 2}})
    with pytest.raises(PresetError, match="claim.k: 2, but settings.seeds is 3"):
        load_preset(str(wrong_k))
    with_arm = write_yaml(tmp_path / "a.yaml", {**FIXTURE_PRESET, "claim": {**FIXTURE_PRESET["claim"], "arm": "x"}})
    with pytest.raises(PresetError, match="claim: .*the claim arm is the first --arm"):
        load_preset(str(with_arm))


def test_list_names_each_preset_with_its_claim(tmp_path):
    listed = leafcost("reproduce", "--list", cwd=tmp_path)
    assert listed.returncode == 0 and f"{SHIPPED}:" in listed.stdout and "61.5 % Avg@3, 71.0 % Pass@3" in listed.stdout
    document = json.loads(leafcost("reproduce", "--list", "--json", cwd=tmp_path).stdout)
    entry = next(entry for entry in document["presets"] if entry["name"] == SHIPPED)
    assert (entry["avg_at_k"], entry["pass_at_k"], entry["instances"], entry["dataset"]) == (
        0.615, 0.71, 500, "SWE-bench/SWE-bench_Verified")


# --- the spec it writes -----------------------------------------------------------------------------------------

def test_the_spec_carries_the_published_setting_leafs_prompt_the_claim_and_locked_images(
        inputs, instance_images, tmp_path):
    oracle = write_yaml(tmp_path / "oracle.yaml", {"name": "oracle", "adapter": "oracle"})
    hosted = write_yaml(tmp_path / "hosted.yaml", {"name": "hosted", "adapter": "local", "model": "smol",
                                                   "base_url": "http://127.0.0.1:9/v1"})
    done = leafcost(*inputs.args("--arm", str(oracle), "--arm", str(hosted), "--json"), cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    document = json.loads(done.stdout)
    assert (document["claim_arm"], document["arms"], document["benchmark_tasks"], document["fresh_tasks"]) == (
        "frog", ["frog", "oracle", "hosted"], 4, 0)
    assert document["early_stop"] is True and document["unconfirmed"] == FIXTURE_PRESET["unconfirmed"]

    spec = load_run_spec(document["spec"])
    assert (spec.seeds, spec.workers, spec.max_attempts, spec.task_order_seed, spec.preset) == (3, 4, 2, 42, "leaf")
    assert spec.budgets.max_tokens_per_turn == 8192 and spec.budgets.max_steps == 10
    frog, oracle_arm, hosted_arm = spec.arms
    assert frog.leaf_checkout == str(inputs.checkout.resolve()) and frog.released.isoformat() == "2024-06-01"
    assert frog.sampling.model_dump(exclude_none=True) == FIXTURE_PRESET["settings"]["sampling"]
    assert hosted_arm.leaf_checkout == str(inputs.checkout.resolve()) and oracle_arm.leaf_checkout is None
    assert (spec.claim.arm, spec.claim.preset, spec.claim.avg_at_k, spec.claim.k) == ("frog", "fixture-claim", 0.615, 3)
    reaches = spec.decide.reaches
    assert (reaches.arm, reaches.avg_at_k, reaches.tolerance, reaches.tasks) == ("frog", 0.615, 0.05, "seen")

    suite = [json.loads(line) for line in Path(spec.suite).read_text().splitlines()]
    assert [row["instance_id"] for row in suite] == FIXTURE_IDS and suite == fixture_rows()
    lock = json.loads(Path(spec.sandbox.images).read_text())
    assert spec.sandbox.backend == "podman" and sorted(lock["tasks"]) == sorted(FIXTURE_IDS)
    assert {lock["tasks"][iid]["id"] for iid in FIXTURE_IDS} == {image_id(instance_images[iid]) for iid in FIXTURE_IDS}

    # --full: every instance, no early stop; an --images lock that covers them is copied, not made again.
    kept = tmp_path / "kept.lock.json"
    kept.write_text(Path(spec.sandbox.images).read_text())
    again = leafcost(*inputs.args("--full", "--images", str(kept)), cwd=tmp_path)
    assert again.returncode == 0, again.stderr
    assert "locking images" not in again.stderr and "the stub's release day is made up" in again.stdout
    assert load_run_spec(document["spec"]).decide is None
    assert json.loads(Path(spec.sandbox.images).read_text()) == lock


# --- bad input: one line, exit 2, before any episode ---------------------------------------------------------

def test_an_unknown_preset_lists_the_presets(inputs, tmp_path):
    line = refused(leafcost(*inputs.args("--run", "--db", str(inputs.db), preset="frognano-swebench"), cwd=tmp_path))
    assert line == (f"leafcost: preset 'frognano-swebench': no such preset (presets: {', '.join(preset_names())}); "
                    "or give the path of a preset file")
    assert not inputs.db.exists()


def test_missing_inputs_name_their_option(inputs, tmp_path):
    shipped = ["reproduce", SHIPPED]
    assert "--arm: give the claim arm's file" in refused(leafcost(*shipped, cwd=tmp_path))
    line = refused(leafcost(*shipped, "--arm", str(inputs.arm), cwd=tmp_path))
    assert "--dataset: give the SWE-bench Verified rows (`leafcost swebench export SWE-bench/SWE-bench_Verified " \
           "--split test --out ROWS.jsonl`)" in line
    assert "--leaf-checkout: give a clone of microsoft/FrogNano" in refused(
        leafcost(*shipped, "--arm", str(inputs.arm), "--dataset", str(ROWS), cwd=tmp_path))
    assert "reproduce needs PRESET" in refused(leafcost("reproduce", cwd=tmp_path))


def test_a_bad_arm_file_is_named_with_its_field(inputs, tmp_path):
    no_gpu = write_yaml(tmp_path / "no-gpu.yaml", {k: v for k, v in CLAIM_ARM.items() if k != "gpu"})
    assert refused(leafcost(*inputs.args(arm=no_gpu), cwd=tmp_path)) == f"leafcost: --arm {no_gpu}: gpu: Field required"
    hot = write_yaml(tmp_path / "hot.yaml", {**CLAIM_ARM, "sampling": {"temperature": 1.0}})
    assert refused(leafcost(*inputs.args(arm=hot), cwd=tmp_path)) == (
        f"leafcost: --arm {hot}: sampling.temperature: 1.0, but the published setting is 0.6: remove it (the preset "
        "sets it)")
    no_thinking = write_yaml(tmp_path / "nt.yaml", {**CLAIM_ARM, "sampling": {
        "chat_template_kwargs": {"enable_thinking": False}}})
    assert "sampling.chat_template_kwargs.enable_thinking: False, but the published setting is True" in refused(
        leafcost(*inputs.args(arm=no_thinking), cwd=tmp_path))
    oracle = write_yaml(tmp_path / "oracle.yaml", {"name": "oracle", "adapter": "oracle"})
    assert "the claim's arm (the first --arm) is an oracle arm" in refused(
        leafcost(*inputs.args(arm=oracle), cwd=tmp_path))


def test_a_missing_frognano_checkout_is_refused(inputs, tmp_path):
    args = inputs.args("--run", "--db", str(inputs.db))
    args[args.index("--leaf-checkout") + 1] = str(tmp_path / "absent")
    line = refused(leafcost(*args, cwd=tmp_path))
    assert line.startswith(f"leafcost: --leaf-checkout {tmp_path / 'absent'}: ") and "not a directory" in line
    empty = tmp_path / "empty"
    empty.mkdir()
    args[args.index("--leaf-checkout") + 1] = str(empty)
    assert f"--leaf-checkout {empty}: " in refused(leafcost(*args, cwd=tmp_path))
    assert not inputs.db.exists()


def test_a_dataset_without_the_instances_the_preset_needs_is_refused(inputs, tmp_path):
    listed = write_yaml(tmp_path / "more.yaml", {
        **FIXTURE_PRESET, "claim": {**FIXTURE_PRESET["claim"], "instances": 11},
        "dataset": {"name": "fixtures", "instance_ids": FIXTURE_IDS + [f"absent-{i}" for i in range(7)]}})
    line = refused(leafcost(*inputs.args("--run", "--db", str(inputs.db), preset=listed), cwd=tmp_path))
    assert line == (f"leafcost: --dataset {ROWS}: 7 of the 11 instances SWE-bench fixtures needs are missing: "
                    "absent-0, absent-1, absent-2, absent-3, absent-4 and 2 more: export fixtures split test "
                    "(`leafcost swebench export fixtures --split test --out ROWS.jsonl`)")
    # The shipped preset lists Verified's 500 ids: the four fixture rows are none of them.
    line = refused(leafcost(*inputs.args(preset=SHIPPED), cwd=tmp_path))
    assert line.startswith(f"leafcost: --dataset {ROWS}: 500 of the 500 instances SWE-bench Verified needs are "
                           "missing: astropy__astropy-12907, astropy__astropy-13033, ")
    assert line.endswith("and 495 more: export SWE-bench/SWE-bench_Verified split test (`leafcost swebench export "
                         "SWE-bench/SWE-bench_Verified --split test --out ROWS.jsonl`)")
    # A preset that gives only the count: the count is checked.
    counted = write_yaml(tmp_path / "counted.yaml", {
        **FIXTURE_PRESET, "claim": {**FIXTURE_PRESET["claim"], "instances": 500}, "dataset": {"name": "fixtures"}})
    line = refused(leafcost(*inputs.args(preset=counted), cwd=tmp_path))
    assert line.startswith(f"leafcost: --dataset {ROWS}: 4 instances, but SWE-bench fixtures has 500: export "
                           "fixtures split test")
    broken = tmp_path / "broken.jsonl"
    broken.write_text(ROWS.read_text() + "{not json\n")
    assert f"--dataset {broken} line 5: not JSON" in refused(leafcost(*inputs.args(dataset=broken), cwd=tmp_path))
    assert not inputs.db.exists()


def test_fresh_rows_must_be_created_after_the_release_day(inputs, tmp_path):
    old = [{**row, "instance_id": f"{row['instance_id']}-fresh", "created_at": "2024-06-01T23:00:00Z"}
           for row in fixture_rows()[:2]]
    old[1]["created_at"] = "2024-06-02T00:00:00Z"  # the day after: fresh
    fresh = write_rows(tmp_path / "mined.jsonl", old)
    line = refused(leafcost(*inputs.args("--fresh", str(fresh), "--run", "--db", str(inputs.db)), cwd=tmp_path))
    assert line == (f"leafcost: --fresh {fresh}: 1 of 2 rows are not created after the release day 2024-06-01: "
                    f"{FIXTURE_IDS[0]}-fresh (2024-06-01): fresh tasks must be newer than the model")
    undated = write_yaml(tmp_path / "undated.yaml", {k: v for k, v in CLAIM_ARM.items() if k != "released"})
    line = refused(leafcost(*inputs.args("--fresh", str(fresh), arm=undated), cwd=tmp_path))
    assert line == f"leafcost: --fresh needs the model's release day: add released: YYYY-MM-DD to {undated} (the " \
                   "claim's arm)"
    assert not inputs.db.exists()


def test_images_that_cannot_be_locked_are_refused(inputs, instance_images, tmp_path):
    partial = tmp_path / "partial.lock.json"
    first = {FIXTURE_IDS[0]: {"image": "swebench/x:latest", "id": image_id(instance_images[FIXTURE_IDS[0]])}}
    partial.write_text(json.dumps({"format": 1, "engine": "podman", "tasks": first, "verifiers": first}))
    line = refused(leafcost(*inputs.args("--images", str(partial), "--run", "--db", str(inputs.db)), cwd=tmp_path))
    assert line == (f"leafcost: --images {partial}: 3 of 4 instances are not in the lock: "
                    f"{', '.join(FIXTURE_IDS[1:])}: lock the suite again (`leafcost images lock SUITE`) or leave "
                    "--images out to lock them now")
    unreachable = {**fixture_rows()[0], "instance_id": "leafcost-fixtures__gone-5",
                   "image": "localhost:1/gone/x:latest"}
    rows = write_rows(tmp_path / "rows.jsonl", [*fixture_rows(), unreachable])
    five = write_yaml(tmp_path / "five.yaml", {**FIXTURE_PRESET, "claim": {**FIXTURE_PRESET["claim"], "instances": 5},
                                               "dataset": {"name": "fixtures", "instance_ids": None}})
    line = refused(leafcost(*inputs.args("--run", "--db", str(inputs.db), preset=five, dataset=rows), cwd=tmp_path))
    assert line.startswith("leafcost: images: 1 of 5 instances' images cannot be locked; the first: task "
                           "leafcost-fixtures__gone-5: image localhost:1/gone/x:latest")
    assert "--backend local: SWE-bench instances run in their own images" in refused(
        leafcost(*inputs.args("--backend", "local"), cwd=tmp_path))
    assert "--images: the kubernetes backend runs locked images" in refused(
        leafcost(*inputs.args("--backend", "kubernetes"), cwd=tmp_path))
    assert not inputs.db.exists()


def test_the_presets_ship_with_the_package():
    import fnmatch
    import tomllib

    root = Path(__file__).parents[2]
    shipped = tomllib.loads((root / "pyproject.toml").read_text())["tool"]["setuptools"]["package-data"]["compare"]
    files = [path.relative_to(root / "compare").as_posix() for path in PRESETS_DIR.iterdir()]
    assert files and all(any(fnmatch.fnmatch(name, pattern) for pattern in shipped) for name in files)


def test_run_runs_the_spec_and_prints_the_claims_verdict(inputs, instance_images, tmp_path):
    """One short run on podman: a stub model that answers "Done." at once resolves nothing, so the verdict's
    figures are exact; the end-to-end claim runs at set rates are tests/compare/test_claim_e2e.py's."""
    from support.sglang_fake import ScriptedServer

    one_seed = write_yaml(tmp_path / "one-seed.yaml", {
        **FIXTURE_PRESET, "claim": {**FIXTURE_PRESET["claim"], "k": 1, "pass_at_k": None},
        "settings": {**FIXTURE_PRESET["settings"], "seeds": 1, "max_attempts": 1,
                     "budgets": {**FIXTURE_PRESET["settings"]["budgets"], "max_steps": 4, "time_budget_sec": 300}}})
    with ScriptedServer({"turns": [{"content": "Done."}]}) as server:
        arm = write_yaml(tmp_path / "stub.yaml", {**CLAIM_ARM, "base_url": server.base_url, "max_retries": 0,
                                                  "metrics_interval_sec": 0.5})
        done = leafcost(*inputs.args("--run", "--json", "--db", str(inputs.db), preset=one_seed, arm=arm),
                        cwd=tmp_path)
        requests = server.chat_bodies
    assert done.returncode == 0, done.stderr[-3000:]
    document = json.loads(done.stdout)  # stdout is the verdict's alone
    assert (document["preset"], document["arm"], document["tasks"], document["total_tasks"]) == (
        "fixture-claim", "frog", 4, 4)
    assert sorted(task["task_id"] for task in document["per_task"]) == sorted(FIXTURE_IDS)
    assert all((task["attempts"], task["resolved"]) == (1, 0) for task in document["per_task"])
    assert document["avg_at_k"]["estimate"] == 0.0 and document["harness"]["healthy"] is True
    assert document["test"]["upper"] < 1 and document["verdict"] in {"below", "undecided"}
    assert "the stub's release day is made up" in done.stderr  # the unconfirmed settings, beside the run
    assert len(requests) == 4 and all(body["messages"][0]["content"].startswith("A stand-in for Leaf's prompt")
                                      for body in requests)  # Leaf's prompt, from the checkout
    assert all(body["temperature"] == 0.6 and body["chat_template_kwargs"] == {"enable_thinking": True}
               for body in requests)


def test_instance_images_by_namespace_and_tag_and_the_datasets_export_record(inputs, instance_images, tmp_path):
    """--swebench-namespace/--swebench-tag name every instance's image (locked by those names, kept in the spec as
    `swebench:`); the record `leafcost swebench export` wrote beside --dataset is printed, with whether the rows are
    still the ones it wrote."""
    exported = tmp_path / "verified.jsonl"
    assert leafcost("swebench", "export", str(ROWS), "--out", str(exported), cwd=tmp_path).returncode == 0
    done = leafcost(*inputs.args("--swebench-namespace", "swebench", "--swebench-tag", "latest", "--json",
                                 dataset=exported), cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    document = json.loads(done.stdout)
    spec = load_run_spec(document["spec"])
    assert (spec.swebench.namespace, spec.swebench.tag) == ("swebench", "latest")
    assert sorted(json.loads(Path(spec.sandbox.images).read_text())["tasks"]) == sorted(FIXTURE_IDS)
    source = document["dataset_source"]
    assert (source["dataset"], source["rows"], source["rows_match"]) == (str(ROWS.resolve()), 4, True)
    assert source["record"] == str(exported.with_suffix(".source.json"))

    exported.write_text(exported.read_text().replace("srclayout", "srclayout", 1) + "\n")  # one byte more
    changed = leafcost(*inputs.args("--images", str(spec.sandbox.images), dataset=exported), cwd=tmp_path)
    assert changed.returncode == 0, changed.stderr
    assert "4 rows when exported" in changed.stdout and "the rows differ from the export's" in changed.stdout

    assert refused(leafcost(*inputs.args("--swebench-tag", "bad tag!"), cwd=tmp_path)).startswith(
        "leafcost: --swebench-tag 'bad tag!': String should match pattern")
    line = refused(leafcost(*inputs.args("--swebench-namespace", "localhost:1/mirror"), cwd=tmp_path))
    assert "image localhost:1/mirror/sweb.eval.x86_64.leafcost-fixtures_1776_" in line
