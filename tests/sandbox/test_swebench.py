"""SWE-bench rows as swebench 5 reads them become tasks that run in the instance's own image and grade on the host
with swebench's own parsers and report. Loading, naming, refusals and the grading glue; the container end to end is
in test_swebench_container.py."""

from __future__ import annotations

import asyncio
import json
import tomllib
from datetime import datetime, timezone
from pathlib import Path

import pytest

from sandbox import BuildError, SandboxOptions, SWEBenchImages, load_suite, open_sandbox
from sandbox.swebench import image_name
from sandbox.swebench_grading import eval_script, grade_log, swebench, why_unresolved
from sandbox.tasks import SuiteError, SWEBenchFacts

BASE = "0123456789abcdef0123456789abcdef01234567"
TEST_PATCH = ("diff --git a/tests/test_calc.py b/tests/test_calc.py\n--- a/tests/test_calc.py\n"
              "+++ b/tests/test_calc.py\n@@ -1 +1,2 @@\n import calc\n+def test_add(): assert calc.add(2, 3) == 5\n")
EVAL_SCRIPT = "\n".join([
    "#!/bin/bash", "set -uxo pipefail", "source /opt/miniconda3/bin/activate", "conda activate testbed",
    "cd /testbed", f"git checkout {BASE} tests/test_calc.py", "git apply -v - <<'EOF_114329324912'", TEST_PATCH,
    "EOF_114329324912", ": '>>>>> Start Test Output'", "pytest -rA tests/test_calc.py", ": '>>>>> End Test Output'",
    f"git checkout {BASE} tests/test_calc.py"]) + "\n"


def row(**changes) -> dict:
    """One row with every column the published swebench 5 datasets have (the lists as JSON text, as there)."""
    data = {"repo": "acme/calc", "instance_id": "acme__calc-7", "base_commit": BASE,
            "patch": "diff --git a/calc.py b/calc.py\n", "test_patch": TEST_PATCH,
            "problem_statement": "calc.add(2, 3) returns -1.", "hints_text": "", "created_at": "2024-01-01T00:00:00Z",
            "version": "1.0", "FAIL_TO_PASS": json.dumps(["tests/test_calc.py::test_add"]),
            "PASS_TO_PASS": json.dumps(["tests/test_calc.py::test_sub"]), "environment_setup_commit": BASE,
            "image": "swebench/sweb.eval.x86_64.acme_1776_calc-7:latest", "eval_script": EVAL_SCRIPT,
            "log_parser": "parse_log_pytest", "eval_type": "pass_and_fail", "difficulty": "<15 min fix"}
    data.update(changes)
    return {key: value for key, value in data.items() if value is not None}


def load_rows(tmp_path: Path, *rows: dict | str, images: SWEBenchImages | None = None):
    path = tmp_path / "rows.jsonl"
    path.write_text("".join((r if isinstance(r, str) else json.dumps(r)) + "\n" for r in rows))
    return load_suite(str(path), cache_dir=tmp_path / "cache", swebench_images=images)


def error_of(tmp_path: Path, **changes) -> str:
    suite = load_rows(tmp_path, row(**changes))
    assert not suite.tasks and len(suite.errors) == 1
    return suite.errors[0].error


def test_a_row_becomes_a_task_in_its_own_image_with_a_separate_verifier(tmp_path):
    suite = load_rows(tmp_path, row())
    assert not suite.errors
    task = suite.tasks[0]
    assert (task.task_id, task.source, task.instruction) == ("acme__calc-7", "swebench", "calc.add(2, 3) returns -1.")
    assert task.environment.docker_image == "swebench/sweb.eval.x86_64.acme_1776_calc-7:latest"
    assert task.dockerfile is None and task.environment.workdir == "/testbed"
    assert not task.environment.allow_internet
    assert task.config.verifier_mode == "separate" and task.config.verifier.user == "root"
    assert task.swebench == SWEBenchFacts(instance_id="acme__calc-7", repo="acme/calc", version="1.0",
                                          image=task.environment.docker_image, log_parser="parse_log_pytest",
                                          eval_type="pass_and_fail", fail_to_pass=["tests/test_calc.py::test_add"],
                                          pass_to_pass=["tests/test_calc.py::test_sub"],
                                          test_files=["tests/test_calc.py"],  # the test_patch's files
                                          created_at=datetime(2024, 1, 1, tzinfo=timezone.utc))
    assert task.created_at == task.swebench.created_at
    metadata = tomllib.loads((task.path / "task.toml").read_text())["metadata"]
    assert metadata["swebench"] == "5.0.2" and metadata["base_commit"] == BASE
    script = (task.tests_dir / "eval.sh").read_text()
    # The dataset's script with the test command's exit status recorded, as swebench's harness runs it.
    assert "pytest -rA tests/test_calc.py\nSWEBENCH_TEST_EXIT_CODE=$?\n: '>>>>> End Test Output'\n" \
           'echo ">>>>> Test Exit Code: $SWEBENCH_TEST_EXIT_CODE"\n' in script
    assert script.count("#!/bin/bash") == 1
    assert (task.solution_dir / "gold.patch").read_text() == row()["patch"]
    assert not (task.path / "environment").exists()  # the image holds the repository: nothing is built


def test_a_row_from_before_swebench_5_is_refused_with_what_to_do(tmp_path):
    error = error_of(tmp_path, eval_script=None, log_parser=None, image=None, eval_type=None)
    assert "acme__calc-7" in error and "no eval_script and no log_parser" in error
    assert "before swebench 5.0" in error and "leafcost swebench export verified --out" in error


@pytest.mark.parametrize("written, read", [
    ("2023-04-12T13:45:02Z", datetime(2023, 4, 12, 13, 45, 2, tzinfo=timezone.utc)),  # the published datasets
    ("2023-04-12T15:45:02+02:00", datetime(2023, 4, 12, 13, 45, 2, tzinfo=timezone.utc)),
    ("2023-04-12 13:45:02", datetime(2023, 4, 12, 13, 45, 2, tzinfo=timezone.utc)),  # no offset: UTC
    ("2023-04-12", datetime(2023, 4, 12, tzinfo=timezone.utc)),
    (1681307102000, datetime(2023, 4, 12, 13, 45, 2, tzinfo=timezone.utc)),  # pandas' epoch milliseconds
    (None, None), ("", None)])
def test_a_row_keeps_its_created_at_as_utc_read_leniently(tmp_path, written, read):
    task = load_rows(tmp_path, row(created_at=written) if written is not None else
                     {k: v for k, v in row().items() if k != "created_at"}).tasks[0]
    assert task.created_at == read and task.swebench.created_at == read


def test_a_malformed_created_at_is_that_rows_load_error_naming_the_field(tmp_path):
    suite = load_rows(tmp_path, row(instance_id="acme__calc-8", created_at="sometime in april"), row())
    assert [task.task_id for task in suite.tasks] == ["acme__calc-7"]
    (error,) = suite.errors
    assert error.task_id == "acme__calc-8"
    assert "acme__calc-8 (line 1): created_at: not a date: give ISO 8601" in error.error
    assert "'sometime in april'" in error.error


def test_an_unknown_log_parser_names_the_field(tmp_path):
    error = error_of(tmp_path, log_parser="parse_log_mystery")
    assert "log_parser: is not one of swebench 5.0.2's" in error and "parse_log_mystery" in error


def test_an_eval_script_without_swebench_markers_is_refused(tmp_path):
    error = error_of(tmp_path, eval_script="#!/bin/bash\npytest\n")
    assert "eval_script: has no '>>>>> Start Test Output' and no '>>>>> End Test Output' marker" in error


def test_multimodal_assets_and_unknown_eval_types_are_refused(tmp_path):
    assert "binary test assets" in error_of(tmp_path, image_assets={"test_patch": [{"path": "a.png"}]})
    assert "eval_type: must be one of fail_only, pass_and_fail" in error_of(tmp_path, eval_type="sometimes")
    assert load_rows(tmp_path, row(image_assets="{}")).tasks  # the text datasets carry an empty one


def test_every_problem_of_a_row_is_named_at_once(tmp_path):
    error = error_of(tmp_path, base_commit="not-a-commit", FAIL_TO_PASS="[oops", PASS_TO_PASS=None)
    assert "base_commit:" in error and "FAIL_TO_PASS: a string here must be a JSON list" in error
    assert "PASS_TO_PASS: missing required field" in error


@pytest.mark.parametrize("missing", [("image",), ("eval_type",), ("image", "eval_type")])
@pytest.mark.parametrize("absent", [None, ""])
def test_a_row_without_image_or_eval_type_is_refused_as_swebench_refuses_it(tmp_path, missing, absent):
    """swebench's make_test_spec reads row["image"] and row["eval_type"]: a row without either stops its harness.
    leafcost refuses that row alone, in one line naming the row and the field; the others load."""
    suite = load_rows(tmp_path, row(**dict.fromkeys(missing, absent)), row(instance_id="acme__calc-8"))
    assert [t.task_id for t in suite.tasks] == ["acme__calc-8"]
    (error,) = [e.error for e in suite.errors]
    assert error.startswith(f"instance acme__calc-7 (line 1): no {' and no '.join(missing)}: swebench 5.0.2's "
                            "harness refuses a row without it") and "\n" not in error
    fail_only = load_rows(tmp_path, row(eval_type="fail_only", repo="eslint/eslint")).tasks[0].swebench
    assert fail_only.eval_type == "fail_only"  # the row's own word, never a guess by repository


def test_image_names_follow_swebench_naming(tmp_path):
    from swebench.task.checks import expected_image  # SWE-bench's own derivation, for comparison

    swebench()
    for instance_id in ("django__django-11099", "psf__requests-1142", "Sympy__sympy-20590"):
        assert image_name(instance_id) == expected_image(instance_id)
    assert image_name("django__django-11099", None) == "sweb.eval.x86_64.django__django-11099:latest"
    derived = load_rows(tmp_path, row(image="elsewhere/calc:7"), images=SWEBenchImages(tag="latest")).tasks[0]
    assert derived.environment.docker_image == "swebench/sweb.eval.x86_64.acme_1776_calc-7:latest"
    mirrored = load_rows(tmp_path, row(), images=SWEBenchImages(namespace="ghcr.io/acme", tag="v2")).tasks[0]
    assert mirrored.environment.docker_image == "ghcr.io/acme/sweb.eval.x86_64.acme_1776_calc-7:v2"
    local = load_rows(tmp_path, row(), images=SWEBenchImages(namespace="none")).tasks[0]
    assert local.environment.docker_image == "sweb.eval.x86_64.acme__calc-7:latest"


def test_a_broken_row_never_stops_the_others(tmp_path):
    suite = load_rows(tmp_path, row(), "{not json", row(instance_id="acme__calc-7"), [1, 2],
                      row(instance_id="acme__calc-8"))
    assert [t.task_id for t in suite.tasks] == ["acme__calc-7", "acme__calc-8"]
    errors = {e.path.rsplit(":", 1)[1]: e.error for e in suite.errors}
    assert "not valid JSON" in errors["line 2"] and "duplicate instance_id" in errors["line 3"]
    assert "expected an instance object, got a JSON list" in errors["line 4"]


def test_files_that_are_not_swebench_rows_are_suite_errors(tmp_path):
    (tmp_path / "empty.jsonl").write_text("\n")
    (tmp_path / "number.json").write_text("3")
    (tmp_path / "prose.jsonl").write_text("hello\nworld\n")
    for name, message in (("empty.jsonl", "the file is empty"), ("number.json", "got a JSON int"),
                          ("prose.jsonl", "not JSON or JSON Lines")):
        with pytest.raises(SuiteError, match=message):
            load_suite(str(tmp_path / name), cache_dir=tmp_path / "cache")


def test_materialized_once_and_again_when_the_row_or_its_image_changes(tmp_path):
    first = load_rows(tmp_path, row()).tasks[0].path
    assert load_rows(tmp_path, row()).tasks[0].path == first
    assert load_rows(tmp_path, row(problem_statement="other")).tasks[0].path != first
    assert load_rows(tmp_path, row(), images=SWEBenchImages(tag="v2")).tasks[0].path != first
    assert not list((tmp_path / "cache" / "swebench").glob(".building-*"))


def test_the_local_backend_refuses_an_instance_naming_its_image(tmp_path):
    task = load_rows(tmp_path, row()).tasks[0]
    with pytest.raises(BuildError, match=r"local backend cannot honour SWE-bench's instance image "
                                         r"swebench/sweb\.eval\.x86_64\.acme_1776_calc-7:latest \(the Python"):
        asyncio.run(open_sandbox(task, SandboxOptions(cache_dir=tmp_path / "cache")))


# --- the grading glue, on logs as the eval script prints them -------------------------------------------------

def facts(parser: str, f2p: list[str], p2p: list[str]) -> SWEBenchFacts:
    return SWEBenchFacts(instance_id="acme__calc-7", repo="acme/calc", version="1.0", image="img", log_parser=parser,
                         eval_type="pass_and_fail", fail_to_pass=f2p, pass_to_pass=p2p)


def log(body: str, exit_code: int | None = 0) -> bytes:
    lines = ["+ git apply -v -", ">>>>> Start Test Output", body, ">>>>> End Test Output"]
    if exit_code is not None:
        lines.append(f">>>>> Test Exit Code: {exit_code}")
    return "\n".join(lines).encode()


def test_grading_is_swebench_own_report():
    spec = facts("parse_log_pytest", ["t.py::test_a"], ["t.py::test_b"])
    report = grade_log(spec, log("PASSED t.py::test_a\nPASSED t.py::test_b"), "diff")
    assert report["resolved"] and report["patch_successfully_applied"]
    assert report["tests_status"]["FAIL_TO_PASS"] == {"success": ["t.py::test_a"], "failure": []}
    missing = grade_log(spec, log("FAILED t.py::test_a - boom", exit_code=1), "diff")
    assert not missing["resolved"]
    assert why_unresolved(missing) == ("FAIL_TO_PASS failed or missing from the log: t.py::test_a; "
                                       "PASS_TO_PASS failed or missing from the log: t.py::test_b")


def test_pytest_option_ids_are_normalised_as_swebench_does_for_requests():
    spec = facts("parse_log_pytest_options", ["t.py::test_paths[/location]"], [])
    report = grade_log(spec, log("PASSED t.py::test_paths[/etc/invalid/location]"), "diff")
    assert report["resolved"]
    plain = grade_log(facts("parse_log_pytest", ["t.py::test_paths[/location]"], []),
                      log("PASSED t.py::test_paths[/etc/invalid/location]"), "diff")
    assert not plain["resolved"]  # the same log under the plain parser: the id does not match


def test_forged_passes_with_a_failing_exit_code_are_not_graded():
    """A patch whose conftest prints its own PASSED lines: swebench cross-checks the recorded exit code."""
    spec = facts("parse_log_pytest", ["t.py::test_a"], [])
    forged = grade_log(spec, log("PASSED t.py::test_a", exit_code=1), "diff")
    assert not forged["resolved"] and not forged["patch_successfully_applied"]
    assert why_unresolved(forged).startswith("the patch did not apply, or the log holds no test results")


def test_a_log_that_is_not_utf8_is_still_graded():
    spec = facts("parse_log_pytest", ["t.py::test_a"], [])
    assert grade_log(spec, log("PASSED t.py::test_a") + b"\n\xff\xfe garbage", "diff")["resolved"]


def test_eval_script_records_the_exit_code_only_once_and_keeps_the_rest():
    script = eval_script("#!/bin/bash\nset -uxo pipefail\necho a\n: '>>>>> End Test Output'\necho b\n"
                         ": '>>>>> End Test Output'\n")
    assert script.startswith("#!/bin/bash\nset -uxo pipefail\necho a\nSWEBENCH_TEST_EXIT_CODE=$?\n")
    assert script.count("SWEBENCH_TEST_EXIT_CODE=$?") == 1 and script.endswith("echo b\n: '>>>>> End Test Output'\n")


def test_the_verifier_fence_covers_private_ranges_and_every_address_of_this_host():
    """The routes a SWE-bench verifier's namespace gets (sandbox/container/build_network.py): the private and link-local
    ranges, each host address and its network; a host network over slirp4netns's own link (a VirtualBox NAT) keeps
    only the host's address, since the link's route cannot be replaced."""
    from sandbox.container.build_network import fenced_networks

    listing = ("1: lo    inet 127.0.0.1/8 scope host lo\\       valid_lft forever\n"
               "2: eth0    inet 203.0.113.7/24 brd 203.0.113.255 scope global eth0\\       valid_lft forever\n"
               "3: eth1    inet 10.0.2.15/24 brd 10.0.2.255 scope global eth1\\       valid_lft forever\n")
    fenced = fenced_networks(listing)
    assert fenced[:5] == ["10.0.0.0/8", "172.16.0.0/12", "192.168.0.0/16", "169.254.0.0/16", "100.64.0.0/10"]
    assert fenced[5:] == ["203.0.113.7/32", "203.0.113.0/24", "10.0.2.15/32"]
    assert not [n for n in fenced if n.startswith("127.")]
