"""A mined row exported as a Harbor task directory that stands alone: the files it holds (loaded as Harbor reads
them), the verdict its tests/test.sh gives on pytest logs (run here with bash and awk over a stand-in eval script,
checked against swebench's own parser), the rules for writing over a directory, and one task validated end to end
through podman as `leafcost validate` runs a Harbor suite."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from sandbox import swebench_grading
from sandbox.harbor import load_harbor_task
from sandbox.mining import harbor_export
from sandbox.mining.harbor_export import write_harbor_task

ROWS = Path(__file__).parents[2] / "fixtures" / "swebench" / "instances.jsonl"
LEAFCOST = Path(sys.executable).with_name("leafcost")
SRCLAYOUT = "leafcost-fixtures__srclayout-1"
F2P = "tests/test_punctuation.py::test_collapses_runs_of_punctuation"
P2P = "tests/test_punctuation.py::test_keeps_digits"
HEADER = "=" * 20 + " short test summary info " + "=" * 20


def fixture_rows() -> dict[str, dict]:
    return {row["instance_id"]: row for row in map(json.loads, ROWS.read_text().splitlines())}


def mined(**changes) -> dict:
    """The srclayout fixture row as `mine` writes a row: with its commit and the source of its instruction."""
    return {**fixture_rows()[SRCLAYOUT], "mined_from": "c" * 40, "instruction_source": "commit", **changes}


def pytest_log(summary: list[str], *, body: list[str] = (), exit_code: int | None = None) -> str:
    """An eval script's log as SWE-bench's harness prints it: trace, markers, pytest's -rA report."""
    constants = swebench_grading.swebench().constants
    failed = any(line.startswith(("FAILED", "ERROR")) for line in summary)
    code = (1 if failed else 0) if exit_code is None else exit_code
    return "\n".join([
        "+ cd /testbed", "+ git status", f"+ : '{constants.START_TEST_OUTPUT}'", "+ pytest -rA tests/test_x.py",
        "============================= test session starts ==============================",
        "collected 4 items", "", "tests/test_x.py ..F.                                                   [100%]",
        *body, HEADER, *summary, "========================= 1 failed, 3 passed in 0.05s =========================",
        f"+ SWEBENCH_TEST_EXIT_CODE={code}", f"+ : '{constants.END_TEST_OUTPUT}'",
        f"+ echo '{constants.TEST_EXIT_CODE}: {code}'", f"{constants.TEST_EXIT_CODE}: {code}", ""])


def run_test_sh(task: Path, log: str, scratch: Path) -> tuple[int, str, str]:
    """Runs the task's tests/test.sh with /tests and /logs/verifier moved under `scratch` and eval.sh replaced by
    one that prints `log`: (reward, required_tests.txt, test.sh's stderr)."""
    tests, logs = scratch / "tests", scratch / "logs"
    tests.mkdir(parents=True)
    (scratch / "log.txt").write_bytes(log.encode("utf-8"))
    (tests / "eval.sh").write_text(f"cat {scratch / 'log.txt'}\n")
    script = (task / "tests" / "test.sh").read_text()
    assert "\nTESTS=/tests\n" in script and "\nLOGS=/logs/verifier\n" in script
    script = script.replace("\nTESTS=/tests\n", f"\nTESTS={tests}\n").replace("\nLOGS=/logs/verifier\n",
                                                                              f"\nLOGS={logs}\n")
    (tests / "test.sh").write_text(script)
    done = subprocess.run(["bash", str(tests / "test.sh")], capture_output=True, text=True, cwd=scratch, timeout=60)
    assert done.returncode == 0, done.stderr
    return (int((logs / "reward.txt").read_text()), (logs / "required_tests.txt").read_text(), done.stderr)


@pytest.fixture
def exported(tmp_path) -> Path:
    return write_harbor_task(mined(), tmp_path / "harbor" / SRCLAYOUT)


# --- the files ---------------------------------------------------------------------------------------------------

def test_the_export_loads_as_a_harbor_task_with_the_row_s_facts(exported):
    row = mined()
    task = load_harbor_task(exported)
    assert task.source == "harbor" and task.task_id == SRCLAYOUT and task.warnings == []
    assert task.instruction == row["problem_statement"].strip()
    environment = task.config.environment
    assert (environment.docker_image, environment.workdir, environment.allow_internet) == \
        (row["image"], "/testbed", False)
    assert task.config.verifier_mode == "shared" and task.config.verifier.timeout_sec == 1800.0
    assert task.config.metadata == {
        "benchmark": "leafcost-mined", "instance_id": SRCLAYOUT, "repo": row["repo"],
        "base_commit": row["base_commit"], "created_at": "2024-02-01T09:00:00Z", "mined_from": "c" * 40,
        "instruction_source": "commit", "version": "1.0", "log_parser": "parse_log_pytest",
        "eval_type": "pass_and_fail"}
    assert task.solution_dir == exported / "solution" and task.dockerfile is None
    assert (exported / "solution" / "gold.patch").read_text() == row["patch"]
    assert "git apply -v /solution/gold.patch" in (exported / "solution" / "solve.sh").read_text()
    # The row's eval script as SWE-bench's harness runs it: with the test command's exit status after the end marker.
    assert (exported / "tests" / "eval.sh").read_text() == swebench_grading.eval_script(row["eval_script"])
    for script in ("tests/test.sh", "tests/eval.sh", "solution/solve.sh"):
        assert os.access(exported / script, os.X_OK), script
    assert sorted(p.name for p in exported.parent.iterdir()) == [SRCLAYOUT]  # no staging directory left


def test_created_at_is_written_in_utc_and_a_date_without_a_zone_is_read_as_utc(tmp_path):
    task = write_harbor_task(mined(created_at="2024-02-01T10:30:00+01:00"), tmp_path / "a")
    assert load_harbor_task(task).config.metadata["created_at"] == "2024-02-01T09:30:00Z"
    # as the SWE-bench loader reads the published datasets' created_at (sandbox.tasks.parse_created_at)
    task = write_harbor_task(mined(created_at="2024-02-01T10:30:00"), tmp_path / "b")
    assert load_harbor_task(task).config.metadata["created_at"] == "2024-02-01T10:30:00Z"
    with pytest.raises(ValueError, match="created_at"):
        write_harbor_task(mined(created_at="the second of February"), tmp_path / "c")


@pytest.mark.parametrize(("changes", "named"), [
    ({"log_parser": "parse_log_django"}, "log_parser 'parse_log_django' cannot be exported"),
    ({"eval_type": "fail_only"}, "eval_type 'fail_only'"),
    ({"mined_from": ""}, "mined_from"),
    ({"instruction_source": None}, "instruction_source"),
    ({"problem_statement": " \n"}, "problem_statement is blank"),
    ({"PASS_TO_PASS": json.dumps(["tests/t.py::test_a[x y]"])}, r"PASS_TO_PASS test 'tests/t.py::test_a\[x y\]'"),
    ({"FAIL_TO_PASS": json.dumps(["tests/t.py::test_a\n"])}, "FAIL_TO_PASS test"),
])
def test_a_row_that_cannot_be_exported_is_refused_naming_why(changes, named, tmp_path):
    with pytest.raises(ValueError, match=named):
        write_harbor_task(mined(**changes), tmp_path / "task")
    assert not (tmp_path / "task").exists()


def test_the_other_fixture_parsers_are_refused_by_name(tmp_path):
    others = {row["log_parser"] for row in fixture_rows().values()} - {"parse_log_pytest"}
    assert others == {"parse_log_pytest_options", "parse_log_django", "parse_log_sympy"}
    for row in fixture_rows().values():
        if row["log_parser"] in others:
            with pytest.raises(ValueError, match=row["log_parser"]):
                write_harbor_task({**row, "mined_from": "c" * 40, "instruction_source": "commit"}, tmp_path / "x")


def test_the_whitespace_list_is_python_s():
    """test.sh splits summary lines on exactly the characters Python's str.split() does (newline aside)."""
    python = "".join(c for c in map(chr, range(sys.maxunicode + 1)) if c.isspace() and c != "\n")
    assert harbor_export.PYTHON_WHITESPACE == python


# --- the verdict of test.sh --------------------------------------------------------------------------------------

def test_every_listed_test_passed_gives_reward_1_and_one_failure_gives_0(exported, tmp_path):
    passing = [f"PASSED {F2P}", "PASSED tests/test_punctuation.py::test_strips_leading_and_trailing_separators",
               f"PASSED {P2P}", "XFAIL tests/test_punctuation.py::test_single_word_unchanged - known"]
    reward, required, _ = run_test_sh(exported, pytest_log(passing), tmp_path / "pass")
    assert reward == 1
    row = mined()
    assert required.splitlines() == json.loads(row["FAIL_TO_PASS"]) + json.loads(row["PASS_TO_PASS"])
    failing = [line.replace("PASSED", "FAILED", 1) + " - AssertionError: x" if P2P in line else line
               for line in passing]
    reward, _, stderr = run_test_sh(exported, pytest_log(failing), tmp_path / "fail")
    assert reward == 0 and f"FAILED: {P2P}" in stderr


def test_a_passed_line_printed_before_the_summary_does_not_count(exported, tmp_path):
    """A test's output (shown by -rA, or printed with -s) can hold `PASSED <id>` lines, even a fake summary header:
    only the lines after the last header count. swebench's own parser reads the whole marked output and is fooled."""
    spoof = [HEADER, f"PASSED {F2P}", "PASSED tests/test_punctuation.py::test_strips_leading_and_trailing_separators",
             "------------------------------ Captured stdout call ------------------------------"]
    summary = [f"PASSED {P2P}", "PASSED tests/test_punctuation.py::test_single_word_unchanged"]
    log = pytest_log(summary, body=spoof)
    reward, _, stderr = run_test_sh(exported, log, tmp_path / "run")
    assert reward == 0 and f"not in the summary: {F2P}" in stderr
    assert swebench_statuses(log)[F2P] == "PASSED"  # what reading every line of the marked output would give


@pytest.mark.parametrize("broken", ["no end marker", "patch failed", "exit code lies", "after the closing line"])
def test_logs_swebench_would_not_trust_give_reward_0(broken, exported, tmp_path):
    constants = swebench_grading.swebench().constants
    summary = [f"PASSED {F2P}", "PASSED tests/test_punctuation.py::test_strips_leading_and_trailing_separators",
               f"PASSED {P2P}", "PASSED tests/test_punctuation.py::test_single_word_unchanged"]
    assert run_test_sh(exported, pytest_log(summary), tmp_path / "good")[0] == 1
    if broken == "no end marker":
        log = pytest_log(summary).replace(constants.END_TEST_OUTPUT, "end")
    elif broken == "patch failed":
        log = constants.APPLY_PATCH_FAIL + "\n" + pytest_log(summary)
    elif broken == "exit code lies":  # everything reported passed, but pytest exited 1
        log = pytest_log(summary, exit_code=1)
    else:  # the F2P line comes after pytest's closing line (printed by the code at exit, say)
        log = pytest_log(summary[1:]).replace("+ SWEBENCH_TEST_EXIT_CODE", f"{summary[0]}\n+ SWEBENCH_TEST_EXIT_CODE")
    assert run_test_sh(exported, log, tmp_path / "bad")[0] == 0


IDS_TO_QUOTE = ["tests/t.py::test_a[1-'x']", 'tests/t.py::test_b["q"]', "tests/t.py::test_c[$(touch$IFS./pwned)]",
                "tests/t.py::test_d[`id`]", "tests/t.py::test_e[\\n;rm]", "LEAFCOST_TESTS_0", "tests/t.py::test_f[]]",
                "tests/t.py::test_g[%s*?{a,b}]", "tests/t.py::Cls::test_h[é\u00e9-1.5]"]


def test_test_ids_are_embedded_verbatim_and_run_nothing(tmp_path):
    row = mined(FAIL_TO_PASS=json.dumps(IDS_TO_QUOTE[:3]), PASS_TO_PASS=json.dumps(IDS_TO_QUOTE[3:]))
    task = write_harbor_task(row, tmp_path / "task")
    summary = [f"PASSED {test}" for test in IDS_TO_QUOTE]
    reward, required, _ = run_test_sh(task, pytest_log(summary), tmp_path / "pass")
    assert reward == 1 and required.splitlines() == IDS_TO_QUOTE
    assert not (tmp_path / "pass" / "pwned").exists()  # test.sh runs with the scratch directory as its cwd
    reward, _, stderr = run_test_sh(task, pytest_log(summary[:-1]), tmp_path / "one-missing")
    assert reward == 0 and f"not in the summary: {IDS_TO_QUOTE[-1]}" in stderr


# Summary lines from pieces that exercise parse_log_pytest's rules: status words (and near misses), " - " in FAILED
# lines, Python whitespace awk does not know, `SKIPPED [N]`, repeated ids (the later line wins), \r line ends.
STATUSES = st.sampled_from(["PASSED", "FAILED", "ERROR", "XFAIL", "SKIPPED", "XPASS", "PASSEDX", "passed"])
TEST_IDS = st.sampled_from(["t.py::a", "t.py::b[1]", "t.py::c[-]", "[1]", "t.py::d\u00e9"])
SEPARATORS = st.sampled_from([" ", "  ", "\t", "\xa0", "\u3000", " - ", "\x0b"])
REASONS = st.sampled_from(["", " - boom", " - a - b", "\r", " x", "\rPASSED t.py::a"])


@settings(max_examples=60)
# A FAILED line with " - " before the id overrides an earlier PASSED; `SKIPPED [1] ...` does not override test "[1]".
@example(lines=[("PASSED", " ", "t.py::a", ""), ("FAILED", " - ", "t.py::a", "")], required=["t.py::a"], exit_code=None)
@example(lines=[("PASSED", " ", "[1]", ""), ("SKIPPED", " ", "[1]", " t.py:3: no")], required=["[1]"], exit_code=0)
@given(st.lists(st.tuples(STATUSES, SEPARATORS, TEST_IDS, REASONS), max_size=8),
       st.lists(TEST_IDS, min_size=1, max_size=3, unique=True), st.sampled_from([0, 1, None]))
def test_the_verdict_is_swebench_s_on_a_plain_report(tmp_path_factory, lines, required, exit_code):
    """On a log whose only status lines are the summary, test.sh says 1 exactly when swebench's get_logs_eval reads
    every required test as PASSED or XFAIL."""
    scratch = tmp_path_factory.mktemp("verdict")
    task = write_harbor_task(mined(FAIL_TO_PASS=json.dumps(required), PASS_TO_PASS="[]"), scratch / "task")
    log = pytest_log([f"{status}{separator}{test}{reason}" for status, separator, test, reason in lines],
                     exit_code=exit_code)
    statuses, trusted = swebench_logs_eval(log)
    expected = int(trusted and all(statuses.get(test) in ("PASSED", "XFAIL") for test in required))
    assert run_test_sh(task, log, scratch / "run")[0] == expected


def swebench_statuses(log: str) -> dict[str, str]:
    """parse_log_pytest over the marked output, as swebench's grading calls it."""
    constants = swebench_grading.swebench().constants
    marked = log.split(constants.START_TEST_OUTPUT)[1].split(constants.END_TEST_OUTPUT)[0]
    return swebench_grading.swebench().log_parsers.parse_log_pytest(marked, None)


def swebench_logs_eval(log: str) -> tuple[dict[str, str], bool]:
    modules = swebench_grading.swebench()
    spec = modules.types.TestSpec(instance_id="x", image="x", eval_script_list=[], repo="o/r", version="1",
                                  FAIL_TO_PASS=[], PASS_TO_PASS=[], log_parser="parse_log_pytest",
                                  eval_type="pass_and_fail")
    path = Path(f"/tmp/leafcost-test-harbor-export-{os.getpid()}.log")
    path.write_text(log, encoding="utf-8")
    try:
        return modules.grading.get_logs_eval(spec, str(path))
    finally:
        path.unlink()


# --- writing over a directory ------------------------------------------------------------------------------------

def test_an_earlier_export_of_the_same_instance_is_replaced_whole(exported):
    (exported / "tests" / "stale.txt").write_text("from an earlier export")
    again = write_harbor_task(mined(problem_statement="Slugs keep runs of punctuation."), exported)
    assert again == exported and not (exported / "tests" / "stale.txt").exists()
    assert load_harbor_task(exported).instruction == "Slugs keep runs of punctuation."
    assert sorted(p.name for p in exported.parent.iterdir()) == [SRCLAYOUT]


def test_an_empty_directory_is_used_and_anything_else_is_left_alone(tmp_path):
    (tmp_path / "empty").mkdir()
    assert load_harbor_task(write_harbor_task(mined(), tmp_path / "empty")).task_id == "empty"
    (tmp_path / "mine").mkdir()
    (tmp_path / "mine" / "notes.txt").write_text("keep me")
    other = write_harbor_task(mined(instance_id="leafcost-fixtures__other-9"), tmp_path / "other")
    (tmp_path / "a-file").write_text("x")
    for target in (tmp_path / "mine", other, tmp_path / "a-file"):
        with pytest.raises(FileExistsError, match=f"{target.name}: "):
            write_harbor_task(mined(), target)
    assert (tmp_path / "mine" / "notes.txt").read_text() == "keep me"
    assert load_harbor_task(other).config.metadata["instance_id"] == "leafcost-fixtures__other-9"


def test_a_write_that_fails_midway_leaves_the_earlier_export_and_no_staging(exported, monkeypatch):
    before = (exported / "tests" / "test.sh").read_text()
    written = []

    def failing_write(self, data):
        written.append(self)
        if len(written) == 3:
            raise OSError("disk full")
        return Path.write_text(self, data.decode())

    monkeypatch.setattr(Path, "write_bytes", failing_write)
    with pytest.raises(OSError, match="disk full"):
        write_harbor_task(mined(problem_statement="Something else."), exported)
    monkeypatch.undo()
    assert (exported / "tests" / "test.sh").read_text() == before
    assert load_harbor_task(exported).instruction == mined()["problem_statement"].strip()
    assert sorted(p.name for p in exported.parent.iterdir()) == [SRCLAYOUT]


def test_a_failed_rename_into_place_puts_the_earlier_export_back(exported, monkeypatch):
    real_rename = os.rename

    def rename(source, destination):
        if Path(source).name.startswith(".exporting-"):
            raise OSError("rename refused")
        return real_rename(source, destination)

    monkeypatch.setattr(harbor_export.os, "rename", rename)
    with pytest.raises(OSError, match="rename refused"):
        write_harbor_task(mined(problem_statement="Something else."), exported)
    monkeypatch.undo()
    assert load_harbor_task(exported).instruction == mined()["problem_statement"].strip()
    assert sorted(p.name for p in exported.parent.iterdir()) == [SRCLAYOUT]


# --- end to end through podman -----------------------------------------------------------------------------------

@pytest.fixture(scope="module")
def instance_images(container_images):
    from swebench_images import ensure_swebench_instance_images

    return ensure_swebench_instance_images(ROWS)


def test_the_exported_task_validates_through_podman(instance_images, tmp_path):
    """`leafcost validate` on the Harbor directory alone: the gold patch resolves, no patch does not; the verdict
    comes from the task's own test.sh (no SWE-bench grading on the host)."""
    assert SRCLAYOUT in instance_images
    write_harbor_task(mined(), tmp_path / "harbor" / SRCLAYOUT)
    result = subprocess.run([str(LEAFCOST), "validate", str(tmp_path / "harbor"), "--backend", "podman", "--json"],
                            capture_output=True, text=True, timeout=1800, cwd=tmp_path,
                            env={"PATH": "/usr/sbin:/usr/bin:/bin", "HOME": str(tmp_path),
                                 "LEAFCOST_CACHE": str(tmp_path / "cache")})
    report = json.loads(result.stdout)
    assert result.returncode == 0, report
    assert report["valid"] == 1 and report["invalid"] == 0
    [task] = report["tasks"]
    assert task["task_id"] == SRCLAYOUT and task["oracle_resolved"] is True and task["empty_resolved"] is False
