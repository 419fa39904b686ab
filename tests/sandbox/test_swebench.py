"""SWE-bench instances, made from a real git repository, load into Harbor tasks that grade in the real sandbox."""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
import sysconfig
import textwrap
import tomllib
from pathlib import Path

import pytest

from compare.validate import validate_suite
from sandbox import SandboxOptions, Suite, load_suite, open_sandbox, run_oracle, verify
from sandbox.suites import SuiteError
from sandbox.swebench import image_name, patch_files
from sandbox.swebench_grader import grade as grade_statuses
from sandbox.swebench_grader import parse_pytest, parse_unittest

INSTANCE_ID = "acme__calc-7"
F2P = ["test_add (tests.test_ops.TestOps)"]
P2P = ["test_mul (tests.test_ops.TestOps)"]

OPS = "def add(a, b):\n    return a - b\n\n\ndef mul(a, b):\n    return a * b\n"
TESTS = textwrap.dedent("""\
    import unittest

    from calc.ops import add, mul


    class TestOps(unittest.TestCase):
        def test_mul(self):
            self.assertEqual(mul(2, 3), 6)
    """)
NEW_TEST = "\n    def test_add(self):\n        self.assertEqual(add(2, 3), 5)\n"


def run(coro):
    return asyncio.run(coro)


def git(repo: Path, *args: str) -> str:
    return subprocess.run(["git", "-C", str(repo), "-c", "user.name=t", "-c", "user.email=t@t",
                           "-c", "commit.gpgsign=false", *args],
                          check=True, capture_output=True, text=True).stdout


class Upstream:
    """A tiny repository with a bug at base_commit and its fix plus a new test committed after it."""

    def __init__(self, root: Path):
        self.path = root / "calc-repo"
        (self.path / "calc").mkdir(parents=True)
        (self.path / "tests").mkdir()
        (self.path / "calc" / "__init__.py").write_text("")
        (self.path / "calc" / "ops.py").write_text(OPS)
        (self.path / "tests" / "__init__.py").write_text("")
        (self.path / "tests" / "test_ops.py").write_text(TESTS)
        # `git archive` would drop the tests; the export must not (SWE-bench's images hold a real checkout).
        (self.path / ".gitattributes").write_text("tests export-ignore\n")
        git(self.path, "init", "-q", "-b", "main")
        git(self.path, "add", "-A")
        git(self.path, "commit", "-q", "-m", "calc with a bug")
        self.base_commit = git(self.path, "rev-parse", "HEAD").strip()
        (self.path / "calc" / "ops.py").write_text(OPS.replace("a - b", "a + b"))
        (self.path / "tests" / "test_ops.py").write_text(TESTS + NEW_TEST)
        git(self.path, "commit", "-q", "-am", "fix add, test it")
        self.patch = git(self.path, "diff", self.base_commit, "HEAD", "--", "calc")
        self.test_patch = git(self.path, "diff", self.base_commit, "HEAD", "--", "tests")

    def instance(self, **changes) -> dict:
        instance = {
            "instance_id": INSTANCE_ID, "repo": "acme/calc", "base_commit": self.base_commit,
            "problem_statement": "calc.ops.add(2, 3) returns -1 instead of 5.", "patch": self.patch,
            "test_patch": self.test_patch, "FAIL_TO_PASS": F2P, "PASS_TO_PASS": P2P, "version": "1.0",
            "test_cmd": "python3 -m unittest -v tests.test_ops", "log_parser": "unittest",
        }
        instance.update(changes)
        return {k: v for k, v in instance.items() if v is not None}


@pytest.fixture(scope="module")
def upstream(tmp_path_factory) -> Upstream:
    return Upstream(tmp_path_factory.mktemp("upstream"))


@pytest.fixture(scope="module")
def cache(tmp_path_factory) -> Path:
    return tmp_path_factory.mktemp("cache")


@pytest.fixture(scope="module")
def options(cache) -> SandboxOptions:
    return SandboxOptions(cache_dir=cache)


def write_jsonl(path: Path, *instances: dict | str) -> Path:
    path.write_text("".join((i if isinstance(i, str) else json.dumps(i)) + "\n" for i in instances))
    return path


def load_one(tmp_path: Path, upstream: Upstream, cache: Path, **changes):
    suite = load_suite(str(write_jsonl(tmp_path / "one.jsonl", upstream.instance(**changes))),
                       repos=upstream.path, cache_dir=cache)
    assert not suite.errors, suite.errors
    return suite.tasks[0]


async def graded(opened, task):
    """The verdict and SWE-bench's report (reward.json) of one verification."""
    verification = await verify(opened, task, capture=False)
    return verification.grade, verification.reward_document


# --- end to end in the real sandbox ------------------------------------------------------------------------


def test_unchanged_repo_fails_and_gold_patch_resolves(tmp_path, upstream, cache, options):
    task = load_one(tmp_path, upstream, cache)
    assert (task.task_id, task.source) == (INSTANCE_ID, "swebench")

    async def scenario():
        opened = await open_sandbox(task, options, solution=True)
        try:
            # An agent's edit to a file the test patch touches is discarded before the tests run.
            await opened.sandbox.run_tool("Write", {"file_path": "tests/test_ops.py", "content": "junk = ("})
            solved = await run_oracle(opened.sandbox, task)
            oracle, oracle_reward = await graded(opened, task)  # test files reset, the test patch applied
        finally:
            await opened.close()
        opened = await open_sandbox(task, options)
        try:
            empty, empty_reward = await graded(opened, task)
        finally:
            await opened.close()
        return empty, empty_reward, solved, oracle, oracle_reward

    empty, empty_reward, solved, oracle, oracle_reward = run(scenario())
    assert empty.error is None, empty.output_tail
    assert (empty.resolved, empty.reward) == (False, 0.0)
    assert empty_reward["fail_to_pass"]["failed"] == F2P
    assert empty_reward["pass_to_pass"]["passed"] == P2P
    assert solved.ok, solved.stderr
    assert oracle.error is None, oracle.output_tail
    assert (oracle.resolved, oracle.reward) == (True, 1.0)
    assert oracle_reward["fail_to_pass"] == {"passed": F2P, "failed": [], "missing": []}


def test_test_patch_that_does_not_apply_gives_reward_zero_with_a_reason(tmp_path, upstream, cache, options):
    task = load_one(tmp_path, upstream, cache, test_patch=upstream.test_patch.replace("mul(2, 3)", "mul(4, 5)"))

    async def scenario():
        opened = await open_sandbox(task, options)
        try:
            return await graded(opened, task)
        finally:
            await opened.close()

    result, reward = run(scenario())
    assert (result.resolved, result.reward, result.error) == (False, 0.0, None)
    assert "test patch does not apply" in reward["reason"] and "tests/test_ops.py" in reward["detail"]


@pytest.mark.skipif(subprocess.run(["/usr/bin/python3", "-c", "import sys; print(sys.version_info[:2])"],
                                   capture_output=True, text=True).stdout.strip() != str(sys.version_info[:2]),
                    reason="the sandbox's python3 cannot import this interpreter's pytest")
def test_pytest_log_parser_end_to_end(tmp_path, upstream):
    """The sandbox's python3 has no pytest: this interpreter's site-packages is bound read-only for it."""
    site_packages = sysconfig.get_paths()["purelib"]
    options = SandboxOptions(cache_dir=tmp_path / "cache", extra_ro_binds=[site_packages])
    task = load_one(tmp_path, upstream, tmp_path / "cache", instance_id="acme__calc-pytest", log_parser="pytest",
                    test_cmd=f"PYTHONPATH={site_packages} python3 -m pytest -rA -p no:cacheprovider tests/test_ops.py",
                    FAIL_TO_PASS=["tests/test_ops.py::TestOps::test_add"],
                    PASS_TO_PASS=["tests/test_ops.py::TestOps::test_mul"])
    report = run(validate_suite(Suite(name="one", tasks=[task]), options))
    assert report.tasks[0].error is None
    assert (report.tasks[0].oracle_resolved, report.tasks[0].empty_resolved) == (True, False)


def test_validate_reports_the_instance_valid_and_a_broken_one_invalid(tmp_path, upstream, cache, options):
    broken = upstream.instance(instance_id="acme__calc-8", PASS_TO_PASS=None)
    suite = load_suite(str(write_jsonl(tmp_path / "two.jsonl", upstream.instance(), broken)),
                       repos=upstream.path, cache_dir=cache)
    report = run(validate_suite(suite, options))
    by_id = {t.task_id: t for t in report.tasks}
    assert (report.valid, report.invalid) == (1, 1)
    assert by_id[INSTANCE_ID].valid and by_id[INSTANCE_ID].oracle_resolved is True
    assert by_id[INSTANCE_ID].empty_resolved is False
    assert "PASS_TO_PASS" in by_id["acme__calc-8"].error


def test_agent_sees_one_baseline_commit_and_no_patches(tmp_path, upstream, cache, options):
    task = load_one(tmp_path, upstream, cache)

    async def look():
        opened = await open_sandbox(task, options)
        try:
            sandbox = opened.sandbox
            return (await sandbox.exec("git log --all --oneline", timeout=60),
                    await sandbox.exec("pwd; git status --porcelain", timeout=60),
                    await sandbox.exec("find / -xdev -name '*.patch' 2>/dev/null; ls -A /tests /solution",
                                       timeout=60),
                    await sandbox.run_tool("Read", {"file_path": "calc/ops.py"}))
        finally:
            await opened.close()

    log, status, patches, source = run(look())
    assert log.ok and len(log.stdout.strip().splitlines()) == 1, log.stdout
    assert "leafcost baseline" in log.stdout
    assert status.stdout.split() == ["/testbed"]
    assert ".patch" not in patches.stdout and "gold" not in patches.stdout
    assert "return a - b" in source and "a + b" not in source
    assert "test_add" not in (Path(task.build_context) / "repo" / "tests" / "test_ops.py").read_text()


# --- the generated Harbor task -----------------------------------------------------------------------------


def test_generated_task_layout(tmp_path, upstream, cache):
    task = load_one(tmp_path, upstream, cache)
    assert task.path.parent == cache / "swebench"
    assert task.path.name.startswith(f"{INSTANCE_ID}-")
    assert task.instruction == "calc.ops.add(2, 3) returns -1 instead of 5."
    config = tomllib.loads((task.path / "task.toml").read_text())
    assert config["verifier"]["timeout_sec"] == 1800 and config["agent"]["timeout_sec"] == 10800
    assert {"repo": "acme/calc", "instance_id": INSTANCE_ID, "version": "1.0"}.items() <= config["metadata"].items()
    dockerfile = task.dockerfile.read_text()
    assert "FROM swebench/sweb.eval.x86_64.acme_1776_calc-7:latest" in dockerfile
    assert "WORKDIR /testbed" in dockerfile and "COPY repo/ /testbed/" in dockerfile
    assert not (task.build_context / "repo" / ".git").exists()
    assert (task.build_context / "repo" / "tests" / "test_ops.py").read_text() == TESTS
    assert sorted(p.name for p in task.tests_dir.iterdir()) == [
        "spec.json", "swebench_grader.py", "test.patch", "test.sh"]
    assert (task.tests_dir / "test.patch").read_text() == upstream.test_patch
    assert (task.solution_dir / "gold.patch").read_text() == upstream.patch
    assert "git apply" in (task.solution_dir / "solve.sh").read_text()
    spec = json.loads((task.tests_dir / "spec.json").read_text())
    assert (spec["fail_to_pass"], spec["pass_to_pass"], spec["log_parser"]) == (F2P, P2P, "unittest")


def test_materialized_once_and_rebuilt_when_the_instance_changes(tmp_path, upstream):
    cache = tmp_path / "cache"
    first = load_one(tmp_path, upstream, cache)
    marker = first.path / "instruction.md"
    marker.write_text(marker.read_text() + "\n(reused)")
    again = load_one(tmp_path, upstream, cache)
    changed = load_one(tmp_path, upstream, cache, problem_statement="add() is wrong")
    assert again.path == first.path and again.instruction.endswith("(reused)")
    assert changed.path != first.path and changed.instruction == "add() is wrong"
    assert not [p for p in (cache / "swebench").iterdir() if p.name.startswith(".building")]


def test_fail_to_pass_as_json_string_like_the_public_dataset(tmp_path, upstream, cache):
    task = load_one(tmp_path, upstream, cache, FAIL_TO_PASS=json.dumps(F2P), PASS_TO_PASS="[]")
    spec = json.loads((task.tests_dir / "spec.json").read_text())
    assert (spec["fail_to_pass"], spec["pass_to_pass"]) == (F2P, [])


def test_default_test_command_is_pytest_on_the_touched_test_files(tmp_path, upstream, cache):
    task = load_one(tmp_path, upstream, cache, test_cmd=None, log_parser=None,
                    FAIL_TO_PASS=["tests/test_ops.py::TestOps::test_add"])
    spec = json.loads((task.tests_dir / "spec.json").read_text())
    assert spec["test_cmd"] == "python3 -m pytest -rA -p no:cacheprovider tests/test_ops.py"
    assert spec["log_parser"] == "pytest"
    assert spec["test_cmd"] in (task.tests_dir / "test.sh").read_text()


def test_json_file_with_a_list_and_with_a_single_object(tmp_path, upstream, cache):
    as_list = tmp_path / "list.json"
    as_list.write_text(json.dumps([upstream.instance(), upstream.instance(instance_id="acme__calc-9")], indent=2))
    single = tmp_path / "single.json"
    single.write_text(json.dumps(upstream.instance(), indent=2))
    listed = load_suite(str(as_list), repos=upstream.path, cache_dir=cache)
    assert [t.task_id for t in listed.tasks] == [INSTANCE_ID, "acme__calc-9"] and not listed.errors
    assert [t.task_id for t in load_suite(str(single), repos=upstream.path, cache_dir=cache).tasks] == [INSTANCE_ID]


# --- errors: one bad instance never stops the others --------------------------------------------------------


def test_missing_field_names_instance_and_field(tmp_path, upstream, cache):
    suite = load_suite(str(write_jsonl(tmp_path / "s.jsonl", upstream.instance(base_commit=None),
                                       upstream.instance(instance_id="acme__calc-9"))),
                       repos=upstream.path, cache_dir=cache)
    assert [t.task_id for t in suite.tasks] == ["acme__calc-9"]
    [error] = suite.errors
    assert error.task_id == INSTANCE_ID
    assert INSTANCE_ID in error.error and "base_commit: missing required field" in error.error


def test_wrong_type_names_the_field(tmp_path, upstream, cache):
    suite = load_suite(str(write_jsonl(tmp_path / "s.jsonl", upstream.instance(FAIL_TO_PASS=5))),
                       repos=upstream.path, cache_dir=cache)
    assert not suite.tasks
    assert "FAIL_TO_PASS" in suite.errors[0].error and INSTANCE_ID in suite.errors[0].error


def test_bad_jsonl_line_names_the_line(tmp_path, upstream, cache):
    path = write_jsonl(tmp_path / "s.jsonl", upstream.instance(), '{"instance_id": "acme__calc-9", oops',
                       upstream.instance(instance_id="acme__calc-10"))
    suite = load_suite(str(path), repos=upstream.path, cache_dir=cache)
    assert [t.task_id for t in suite.tasks] == [INSTANCE_ID, "acme__calc-10"]
    [error] = suite.errors
    assert "line 2" in error.error and "not valid JSON" in error.error
    assert error.path.endswith("s.jsonl:line 2")


def test_a_file_that_is_not_json_is_a_suite_error(tmp_path):
    path = tmp_path / "notes.json"
    path.write_text("these are not\nSWE-bench instances\n")
    with pytest.raises(SuiteError, match="not JSON"):
        load_suite(str(path))


def test_unknown_repo_names_the_paths_tried(tmp_path, upstream, cache):
    mirrors = tmp_path / "mirrors"
    mirrors.mkdir()
    suite = load_suite(str(write_jsonl(tmp_path / "s.jsonl", upstream.instance())), repos=mirrors, cache_dir=cache)
    [error] = suite.errors
    for tried in ("acme__calc", "acme__calc.git", "acme/calc", "calc.git"):
        assert str(mirrors / tried) in error.error
    assert "--repos" in error.error


def test_no_repos_at_all_says_to_pass_repos(tmp_path, upstream, cache):
    suite = load_suite(str(write_jsonl(tmp_path / "s.jsonl", upstream.instance())), cache_dir=cache)
    assert "pass --repos" in suite.errors[0].error


@pytest.mark.parametrize("layout", ["acme__calc", "acme/calc.git", "calc"])
def test_mirror_directory_layouts(tmp_path, upstream, cache, layout):
    mirrors = tmp_path / "mirrors"
    (mirrors / layout).parent.mkdir(parents=True)
    bare = ["--bare"] if layout.endswith(".git") else []
    subprocess.run(["git", "clone", "-q", *bare, str(upstream.path), str(mirrors / layout)], check=True)
    suite = load_suite(str(write_jsonl(tmp_path / "s.jsonl", upstream.instance())), repos=mirrors, cache_dir=cache)
    assert not suite.errors, suite.errors
    assert (suite.tasks[0].build_context / "repo" / "calc" / "ops.py").read_text() == OPS


def test_unknown_base_commit_is_an_error(tmp_path, upstream, cache):
    missing = "0123456789abcdef0123456789abcdef01234567"
    suite = load_suite(str(write_jsonl(tmp_path / "s.jsonl", upstream.instance(base_commit=missing))),
                       repos=upstream.path, cache_dir=cache)
    assert not suite.tasks
    assert missing in suite.errors[0].error and "not in" in suite.errors[0].error


# --- parsers and grading ----------------------------------------------------------------------------------


PYTEST_MODULE = textwrap.dedent("""\
    import pytest

    def test_pass():
        pass

    def test_fail():
        assert 1 == 2, "one is not two - really"

    @pytest.fixture
    def broken():
        raise RuntimeError("fixture")

    def test_error(broken):
        pass

    @pytest.mark.skip(reason="not here")
    def test_skip():
        pass

    @pytest.mark.xfail
    def test_xfail():
        assert False

    @pytest.mark.parametrize("text", ["a b", "c - d"])
    def test_param(text):
        assert text != "c - d"

    class TestGroup:
        def test_method(self):
            pass
    """)


def test_pytest_parser_on_real_rA_output(tmp_path):
    (tmp_path / "test_sample.py").write_text(PYTEST_MODULE)
    log = subprocess.run([sys.executable, "-m", "pytest", "-rA", "-p", "no:cacheprovider", "test_sample.py"],
                         cwd=tmp_path, capture_output=True, text=True).stdout
    statuses = parse_pytest(log)
    assert statuses["test_sample.py::test_pass"] == "PASSED"
    assert statuses["test_sample.py::test_fail"] == "FAILED"
    assert statuses["test_sample.py::test_error"] == "ERROR"
    assert statuses["test_sample.py::test_xfail"] == "XFAIL"
    assert statuses["test_sample.py::TestGroup::test_method"] == "PASSED"
    assert statuses["test_sample.py::test_param[a b]"] == "PASSED"
    assert statuses["test_sample.py::test_param[c - d]"] == "FAILED"
    assert "test_sample.py::test_skip" not in statuses  # -rA reports skips by location, as SWE-bench sees them


def test_pytest_parser_on_captured_summary():
    log = textwrap.dedent("""\
        ============================= test session starts ==============================
        collected 4 items

        tests/test_a.py .F.x                                                     [100%]
        =========================== short test summary info ============================
        PASSED tests/test_a.py::test_one
        PASSED tests/test_a.py::test_three
        XFAIL tests/test_a.py::test_four - reason: flaky
        FAILED tests/test_a.py::test_two - AssertionError: assert 1 == 2
        ========================= 1 failed, 2 passed, 1 xfailed in 0.03s =========================
        """)
    assert parse_pytest(log) == {"tests/test_a.py::test_one": "PASSED", "tests/test_a.py::test_three": "PASSED",
                                 "tests/test_a.py::test_four": "XFAIL", "tests/test_a.py::test_two": "FAILED"}


UNITTEST_MODULE = textwrap.dedent("""\
    import unittest

    class C(unittest.TestCase):
        def test_ok(self):
            pass

        def test_doc(self):
            \"\"\"A docstring shown on its own line.\"\"\"
            print("noise")

        def test_fail(self):
            self.assertEqual(1, 2)

        def test_err(self):
            raise RuntimeError("x")

        @unittest.skip("nope")
        def test_skip(self):
            pass

        @unittest.expectedFailure
        def test_xf(self):
            self.assertEqual(1, 2)

        def test_sub(self):
            for i in range(2):
                with self.subTest(i=i):
                    self.assertEqual(i, 0)
    """)


def test_unittest_parser_on_real_verbose_output(tmp_path):
    (tmp_path / "sample.py").write_text(UNITTEST_MODULE)
    result = subprocess.run([sys.executable, "-m", "unittest", "-v", "sample"], cwd=tmp_path,
                            capture_output=True, text=True)
    statuses = parse_unittest(result.stdout + result.stderr)
    expected = {"test_ok": "PASSED", "test_doc": "PASSED", "test_fail": "FAILED", "test_err": "ERROR",
                "test_skip": "SKIPPED", "test_xf": "XFAIL", "test_sub": "FAILED"}
    for name, status in expected.items():
        assert statuses[f"{name} (sample.C)"] == status, name
        assert statuses[f"{name} (sample.C.{name})"] == status, name


def test_unittest_parser_on_pre_311_and_django_style_lines():
    log = textwrap.dedent("""\
        test_a (app.tests.T) ... ok
        test_b (app.tests.T) ... FAIL
        test_c (app.tests.T)
        Docstring of c ... skipped 'no db'
        test_d (app.tests.T) ... printed by the test
        ok
        """)
    assert parse_unittest(log) == {
        "test_a (app.tests.T)": "PASSED", "test_a (app.tests.T.test_a)": "PASSED",
        "test_b (app.tests.T)": "FAILED", "test_b (app.tests.T.test_b)": "FAILED",
        "test_c (app.tests.T)": "SKIPPED", "test_c (app.tests.T.test_c)": "SKIPPED",
        "test_d (app.tests.T)": "PASSED", "test_d (app.tests.T.test_d)": "PASSED"}


def test_resolved_only_when_every_listed_test_passed():
    statuses = {"a": "PASSED", "b": "XFAIL", "c": "FAILED", "s": "SKIPPED"}
    assert grade_statuses(statuses, ["a"], ["b"])["reward"] == 1.0
    assert grade_statuses(statuses, ["a"], ["c"])["reward"] == 0.0
    missing = grade_statuses(statuses, ["gone"], ["a"])
    assert missing["reward"] == 0.0 and missing["fail_to_pass"]["missing"] == ["gone"]
    assert grade_statuses(statuses, ["a"], ["s"])["pass_to_pass"]["failed"] == ["s"]


def test_helpers():
    assert image_name("django__django-11099") == "swebench/sweb.eval.x86_64.django_1776_django-11099:latest"
    patch = ("diff --git a/tests/old.py b/tests/new.py\nsimilarity index 90%\n"
             "diff --git a/tests/data.json b/tests/data.json\n")
    assert patch_files(patch) == ["tests/new.py", "tests/old.py", "tests/data.json"]
