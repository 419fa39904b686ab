"""The tests before and after a mined fix: the eval script a mined row carries (run here in a copy of the repository,
and through podman in an instance image built by hand from the SWE-bench test base image), the row as the SWE-bench
loader reads it, and the classification of every test into FAIL_TO_PASS, PASS_TO_PASS or flaky."""

from __future__ import annotations

import asyncio
import hashlib
import json
import os
import shutil
import subprocess
import sys
from dataclasses import dataclass
from datetime import datetime, timedelta, timezone
from pathlib import Path

import pytest

from sandbox.mining import validation
from sandbox.mining.errors import Dropped
from sandbox.protocol import write_file
from sandbox.swebench import load_swebench_suite
from sandbox.swebench_grading import eval_script as harness_eval_script
from sandbox.tasks import SWEBenchFacts

IMAGE_REPOSITORY = "localhost/leafcost-test/mine-validation"
ACTIVATE = "source /opt/miniconda3/bin/activate\nconda activate testbed"
RUN_FILE = ".leafcost-run"  # where the flaky test reads its run number (written by the counting open below)
BASE_FILES = {
    "pytest.ini": "[pytest]\npythonpath = .\n",
    "calc.py": "def add(a, b):\n    return a + b\n\n\ndef subtract(a, b):\n    return a + b\n",
    "tests/test_calc.py": "from calc import add\n\n\ndef test_add():\n    assert add(2, 3) == 5\n",
    "tests/test_old.py": "def test_legacy():\n    assert True\n",
}
FIX_FILES = {
    "calc.py": "def add(a, b):\n    return a + b\n\n\ndef subtract(a, b):\n    return a - b\n",
    "tests/test_calc.py": ("from calc import add, subtract\n\n\ndef test_add():\n    assert add(2, 3) == 5\n\n\n"
                           "def test_subtract():\n    assert subtract(5, 3) == 2\n"),
    "tests/test_more.py": (
        "from pathlib import Path\n\nfrom calc import subtract\n\n"
        f"RUN = Path(__file__).resolve().parents[1] / {RUN_FILE!r}\n\n\n"
        "def test_negative():\n    assert subtract(1, 4) == -3\n\n\n"
        "def test_zero():\n    assert subtract(0, 0) == 0\n\n\n"
        "def test_run_parity():\n    assert not RUN.exists() or int(RUN.read_text()) % 2 == 0\n"),
    "tests/test_old.py": None,
}
TEST_FILES = ["tests/test_calc.py", "tests/test_more.py", "tests/test_old.py"]
FAIL_TO_PASS = ["tests/test_calc.py::test_subtract", "tests/test_more.py::test_negative"]
PASS_TO_PASS = ["tests/test_calc.py::test_add", "tests/test_more.py::test_zero"]
FLAKY = "tests/test_more.py::test_run_parity"


@dataclass(frozen=True)
class Mined:
    """The fixture repository's candidate: its base and fix commits, the two patches, the image build context."""

    base: str
    fix: str
    patch: str
    test_patch: str
    context: Path


def run(coro):
    return asyncio.run(coro)


def git(repo: Path, *args: str) -> str:
    """git with a fixed identity and date and no host configuration: the same commits on every machine."""
    home = repo.parent / "git-home"
    home.mkdir(exist_ok=True)
    env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "HOME": str(home), "GIT_CONFIG_NOSYSTEM": "1",
           "GIT_CONFIG_GLOBAL": str(home / "gitconfig"), "LC_ALL": "C",
           "GIT_AUTHOR_NAME": "Mine Tests", "GIT_AUTHOR_EMAIL": "mine@leafcost.invalid",
           "GIT_COMMITTER_NAME": "Mine Tests", "GIT_COMMITTER_EMAIL": "mine@leafcost.invalid",
           "GIT_AUTHOR_DATE": "2024-03-01T12:00:00Z", "GIT_COMMITTER_DATE": "2024-03-01T12:00:00Z"}
    done = subprocess.run(["git", "-C", str(repo), "-c", "core.hooksPath=/dev/null", *args], env=env, text=True,
                          capture_output=True)
    assert done.returncode == 0, done.stderr
    return done.stdout


def write_files(repo: Path, files: dict[str, str | None]) -> None:
    for relative, text in files.items():
        if text is None:
            (repo / relative).unlink()
        else:
            (repo / relative).parent.mkdir(parents=True, exist_ok=True)
            (repo / relative).write_text(text)


@pytest.fixture(scope="module")
def mined(tmp_path_factory) -> Mined:
    """A repository whose fix commit corrects subtract() and changes tests (one modified, one created, one
    deleted); the build context holds the repository at the base commit only."""
    work = tmp_path_factory.mktemp("mined")
    repo = work / "repo"
    repo.mkdir()
    git(repo, "init", "--quiet", "--template=", "--initial-branch=main")
    write_files(repo, BASE_FILES)
    git(repo, "add", "--all")
    git(repo, "commit", "--quiet", "-m", "calc: add and subtract")
    base = git(repo, "rev-parse", "HEAD").strip()
    context = work / "context"
    shutil.copytree(repo, context / "repo")
    (context / "Dockerfile").write_text("FROM localhost/leafcost-test/swebench-base:bookworm\nCOPY repo/ /testbed/\n")
    write_files(repo, FIX_FILES)
    git(repo, "add", "--all")
    git(repo, "commit", "--quiet", "-m", "subtract() added its arguments")
    fix = git(repo, "rev-parse", "HEAD").strip()
    return Mined(base=base, fix=fix, patch=git(repo, "diff", base, fix, "--", "calc.py"),
                 test_patch=git(repo, "diff", base, fix, "--", "tests"), context=context)


def row_fields(mined: Mined, image: str, test_files: list[str] = TEST_FILES) -> dict:
    script = validation.eval_script(mined.base, test_files, mined.test_patch, "pytest -rA", activate=ACTIVATE)
    return dict(instance_id="leafcost-mine__calc-1", repo="leafcost-mine/calc", base_commit=mined.base,
                patch=mined.patch, test_patch=mined.test_patch, problem_statement="subtract(5, 3) gives 8, not 2",
                created_at=datetime(2024, 3, 1, 14, tzinfo=timezone(timedelta(hours=2))), version="3.11",
                image=image, eval_script=script, mined_from=mined.fix, instruction_source="commit-message")


# --- the eval script -------------------------------------------------------------------------------------------


def test_the_eval_script_resets_the_test_files_around_the_marked_run(mined):
    script = validation.eval_script(mined.base, TEST_FILES, mined.test_patch, "pytest -rA", activate=ACTIVATE)
    lines = script.splitlines()
    assert lines[:4] == ["#!/bin/bash", "set -uxo pipefail", *ACTIVATE.splitlines()]
    checkout = f"git checkout {mined.base} -- tests/test_calc.py tests/test_old.py"  # they exist at the base
    remove = "rm -f -- tests/test_more.py"  # the test patch creates it: git would refuse to check it out
    start, end = lines.index(": '>>>>> Start Test Output'"), lines.index(": '>>>>> End Test Output'")
    apply = next(i for i, line in enumerate(lines) if line.startswith("git apply -v - <<'EOF_"))
    assert [i for i, line in enumerate(lines) if line == checkout] == [apply - 2, end + 1]
    assert [i for i, line in enumerate(lines) if line == remove] == [apply - 1, end + 2]
    assert not any("test_more" in line for line in lines if line.startswith("git checkout"))
    assert lines[start + 1:end] == ["pytest -rA tests/test_calc.py tests/test_more.py"]  # the deleted file not run
    delimiter = lines[apply].split("'")[1]
    assert "\n".join(lines[apply + 1:lines.index(delimiter)]) + "\n" == mined.test_patch
    # The harness's wrapping finds the end marker and records the test command's exit status there.
    assert "SWEBENCH_TEST_EXIT_CODE=$?\n: '>>>>> End Test Output'" in harness_eval_script(script)


def test_the_eval_script_run_in_a_copy_leaves_the_repository_as_it_was(mined, tmp_path):
    """The script itself (its /testbed pointed at a copy of the repository at the base commit), run with this
    machine's pytest: the log parses to the tests' real statuses before the fix, and afterwards the working tree is
    clean again (modified files checked out, the created one removed, the deleted one back)."""
    copy = tmp_path / "testbed"
    shutil.copytree(mined.context / "repo", copy)
    command = f"{sys.executable} -m pytest -rA -p no:cacheprovider"
    script = validation.eval_script(mined.base, TEST_FILES, mined.test_patch, command)
    script = script.replace("cd /testbed", f"cd {copy}").replace("safe.directory /testbed", f"safe.directory {copy}")
    home = tmp_path / "home"
    home.mkdir()
    env = {"PATH": os.environ["PATH"], "HOME": str(home), "GIT_CONFIG_GLOBAL": str(home / "gitconfig"),
           "GIT_CONFIG_NOSYSTEM": "1", "PYTHONDONTWRITEBYTECODE": "1", "PYTEST_DISABLE_PLUGIN_AUTOLOAD": "1"}
    done = subprocess.run(["bash", "-c", harness_eval_script(script)], env=env, capture_output=True, text=True,
                          timeout=300)
    log = done.stdout + done.stderr
    facts = SWEBenchFacts(instance_id="x", repo="leafcost-mine/calc", version="3.11", image="x",
                          log_parser="parse_log_pytest", eval_type="pass_and_fail", fail_to_pass=["x"],
                          pass_to_pass=[])
    statuses = validation.parse_test_log(facts, log)
    assert statuses == {**dict.fromkeys(FAIL_TO_PASS, "FAILED"), **dict.fromkeys(PASS_TO_PASS, "PASSED"),
                        FLAKY: "PASSED"}, log[-3000:]
    assert git(copy, "status", "--porcelain") == ""


def test_the_eval_script_takes_the_files_where_the_command_says():
    patch = ("diff --git a/t/test_a.py b/t/test_a.py\nindex 1..2 100644\n--- a/t/test_a.py\n+++ b/t/test_a.py\n"
             "@@ -1 +1 @@\n-x\n+y\n")
    script = validation.eval_script("abc1234", ["t/test_a.py"], patch, "python runtests.py {files} --verbose")
    assert "python runtests.py t/test_a.py --verbose" in script.splitlines()
    with pytest.raises(ValueError, match="test_files"):
        validation.eval_script("abc1234", [], patch, "pytest -rA")


def test_test_patch_paths_read_renames_deletions_and_quoted_names():
    patch = ("diff --git a/tests/old_name.py b/tests/new_name.py\nsimilarity index 90%\n"
             "rename from tests/old_name.py\nrename to tests/new_name.py\n"
             "diff --git \"a/tests/caf\\303\\251.py\" \"b/tests/caf\\303\\251.py\"\nnew file mode 100644\n"
             "--- /dev/null\n+++ \"b/tests/caf\\303\\251.py\"\n@@ -0,0 +1 @@\n+--- a/not/a/header.py\n"
             "diff --git a/tests/gone.py b/tests/gone.py\ndeleted file mode 100644\n--- a/tests/gone.py\n"
             "+++ /dev/null\n@@ -1 +0,0 @@\n-x\n")
    existing, created, deleted = validation._test_patch_paths(patch)
    assert existing == ["tests/old_name.py", "tests/gone.py"]
    assert created == ["tests/new_name.py", "tests/café.py"]
    assert deleted == {"tests/gone.py"}


# --- the row -----------------------------------------------------------------------------------------------------


def test_a_mined_row_loads_as_a_swebench_task(mined, tmp_path):
    row = validation.mined_row(**row_fields(mined, f"{IMAGE_REPOSITORY}:test"), fail_to_pass=FAIL_TO_PASS,
                               pass_to_pass=PASS_TO_PASS)
    assert row["created_at"] == "2024-03-01T12:00:00Z"  # 14:00 at +02:00, in UTC
    assert json.loads(row["FAIL_TO_PASS"]) == FAIL_TO_PASS and json.loads(row["PASS_TO_PASS"]) == PASS_TO_PASS
    assert (row["eval_type"], row["log_parser"], row["hints_text"]) == ("pass_and_fail", "parse_log_pytest", "")
    assert row["mined_from"] == mined.fix and row["environment_setup_commit"] == mined.base
    (tmp_path / "rows.jsonl").write_text(json.dumps(row) + "\n")
    suite = load_swebench_suite(tmp_path / "rows.jsonl", cache_dir=tmp_path / "cache")
    assert not suite.errors, suite.errors
    facts = suite.tasks[0].swebench
    assert (facts.fail_to_pass, facts.pass_to_pass) == (FAIL_TO_PASS, PASS_TO_PASS)
    assert facts.test_files == sorted(TEST_FILES)


def test_a_row_without_fail_to_pass_or_a_time_zone_is_refused(mined):
    fields = row_fields(mined, f"{IMAGE_REPOSITORY}:test")
    with pytest.raises(ValueError, match="FAIL_TO_PASS is empty"):
        validation.mined_row(**fields, fail_to_pass=[], pass_to_pass=PASS_TO_PASS)
    with pytest.raises(ValueError, match="created_at has no time zone"):
        validation.mined_row(**{**fields, "created_at": datetime(2024, 3, 1)}, fail_to_pass=FAIL_TO_PASS,
                             pass_to_pass=[])
    with pytest.raises(ValueError, match="log_parser"):
        validation.mined_row(**fields, log_parser="parse_log_nothing", fail_to_pass=FAIL_TO_PASS, pass_to_pass=[])
    probe = validation.probe_row(**{**fields, "problem_statement": ""})
    assert json.loads(probe["FAIL_TO_PASS"]) == [validation.PROBE_TEST] and probe["problem_statement"]


# --- the classification ------------------------------------------------------------------------------------------


def test_the_lists_come_from_every_run_agreeing():
    before = [{"a": "FAILED", "b": "PASSED", "c": "ERROR", "d": "PASSED"}, {"a": "FAILED", "b": "PASSED",
                                                                            "d": "PASSED"}]
    after = [{"a": "PASSED", "b": "PASSED", "c": "PASSED", "d": "FAILED"}] * 2
    outcome = validation.outcome_of(before, after)
    # c errored in one run and was absent from the other: both are "did not pass"
    assert (outcome.fail_to_pass, outcome.pass_to_pass, outcome.flaky) == (["a", "c"], ["b"], [])


def test_a_flaky_test_is_left_out_and_named_as_the_cause_when_nothing_else_fails_to_pass():
    before = [{"a": "FAILED", "b": "PASSED"}, {"a": "PASSED", "b": "PASSED"}]
    after = [{"a": "PASSED", "b": "PASSED"}] * 2
    with pytest.raises(Dropped) as dropped:
        validation.outcome_of(before, after)
    assert dropped.value.reason == "flaky" and "a" in str(dropped.value)
    # A flaky test that could never have been FAIL_TO_PASS (it passed in every run before) is not the cause.
    after = [{"a": "FAILED", "b": "PASSED"}, {"a": "ERROR", "b": "FAILED"}]
    with pytest.raises(Dropped) as dropped:
        validation.outcome_of([{"a": "FAILED", "b": "PASSED"}] * 2, after)
    assert dropped.value.reason == "no_fail_to_pass"
    with pytest.raises(Dropped) as dropped:
        validation.outcome_of([{}, {}], [{}, {}])
    assert dropped.value.reason == "tests_not_found"


# --- through podman ----------------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def instance_image(container_images, mined) -> str:
    """The candidate's instance image: the SWE-bench test base image with the repository at /testbed at the base
    commit, tagged by the hash of what it is built from (built once per content)."""
    from container_images import ULIMITS, ensure_swebench_base_image, podman_argv

    base = ensure_swebench_base_image()
    base_id = subprocess.run([*podman_argv(), "image", "inspect", "--format", "{{.Id}}", base], capture_output=True,
                             text=True, check=True).stdout.strip()
    digest = hashlib.sha256(f"{base_id}\n{mined.base}\n".encode())
    digest.update((mined.context / "Dockerfile").read_bytes())
    tag = f"{IMAGE_REPOSITORY}:{digest.hexdigest()[:16]}"
    present = subprocess.run([*podman_argv(), "image", "exists", tag], capture_output=True)
    if present.returncode != 0:
        built = subprocess.run([*podman_argv(), "build", *ULIMITS, "--pull=never", "-t", tag, str(mined.context)],
                               capture_output=True, text=True, timeout=900)
        assert built.returncode == 0, built.stderr[-3000:]
    return tag


@pytest.fixture(scope="module")
def podman(sandbox_options):
    return sandbox_options.model_copy(update={"backend": "podman"})


def test_classify_finds_the_lists_and_leaves_out_a_flaky_test(mined, instance_image, podman, monkeypatch):
    """Six runs (three before, three after the oracle's gold patch); each attempt's sandbox gets its number in a file
    the flaky test reads (it fails in odd runs), which reaches the verifier as part of the attempt's patch."""
    opened_runs = []
    real_open = validation.open_sandbox

    async def numbered_open(task, options, **kwargs):
        opened = await real_open(task, options, **kwargs)
        opened_runs.append(kwargs.get("solution", False))
        await write_file(opened.sandbox, f"/testbed/{RUN_FILE}", f"{len(opened_runs)}\n".encode(), user="root")
        return opened

    monkeypatch.setattr(validation, "open_sandbox", numbered_open)
    row = validation.probe_row(**row_fields(mined, instance_image))
    outcome = run(validation.classify(row, podman, runs=3))
    assert opened_runs == [False] * 3 + [True] * 3
    assert (outcome.fail_to_pass, outcome.pass_to_pass, outcome.flaky) == (FAIL_TO_PASS, PASS_TO_PASS, [FLAKY])
    assert [statuses[FLAKY] for statuses in outcome.before + outcome.after] == ["FAILED", "PASSED"] * 3
    assert all(statuses["tests/test_calc.py::test_subtract"] == "FAILED" for statuses in outcome.before)
    assert "tests/test_old.py::test_legacy" not in outcome.before[0]  # the test patch deletes it: never run


def test_tests_that_do_not_exist_drop_the_candidate(mined, instance_image, podman):
    row = validation.probe_row(**row_fields(mined, instance_image, test_files=["tests/test_missing.py"]))
    with pytest.raises(Dropped) as dropped:
        run(validation.classify(row, podman, runs=1))
    assert dropped.value.reason == "tests_not_found"
    assert "tests/test_missing.py" in dropped.value.log  # pytest's own words on the missing file


def test_an_image_that_cannot_be_had_is_a_harness_error(mined, container_images, podman):
    row = validation.probe_row(**row_fields(mined, f"{IMAGE_REPOSITORY}:absent"))
    with pytest.raises(Dropped) as dropped:
        run(validation.classify(row, podman, runs=1))
    assert dropped.value.reason == "harness_error" and "before run 1" in str(dropped.value)
