"""Harbor task directories load into `Task`; broken ones become errors naming the task and field."""

from pathlib import Path

import pytest

from sandbox import TaskFormatError, load_harbor_task, load_suite
from sandbox.suites import SuiteError

GOOD_TOML = """
version = "1.0"
[metadata]
difficulty = "easy"
[verifier]
timeout_sec = 30.0
[agent]
timeout_sec = 60.0
[environment]
cpus = 2
memory = "1G"
allow_internet = true
"""


def make_task(root: Path, name: str, toml: str = GOOD_TOML, skip: tuple[str, ...] = ()) -> Path:
    task = root / name
    files = {
        "task.toml": toml,
        "instruction.md": "# Bug\nadd() subtracts.\n",
        "environment/Dockerfile": "FROM python:3.11\nWORKDIR /app\nCOPY repo/ /app/\n",
        "environment/repo/m.py": "def add(a, b):\n    return a - b\n",
        "tests/test.sh": "echo 1 > /logs/verifier/reward.txt\n",
        "solution/solve.sh": "sed -i 's/a - b/a + b/' m.py\n",
    }
    for relative, text in files.items():
        if relative in skip:
            continue
        (task / relative).parent.mkdir(parents=True, exist_ok=True)
        (task / relative).write_text(text)
    return task


def test_harbor_task_loads_with_old_spellings_normalised(tmp_path):
    task = load_harbor_task(make_task(tmp_path, "adder"))
    assert task.task_id == "adder"
    assert task.instruction.startswith("# Bug")
    assert task.environment.memory_mb == 1024
    assert task.environment.cpus == 2
    assert task.environment.allow_internet is True
    assert task.config.verifier.timeout_sec == 30.0
    assert task.solution_dir == task.path / "solution"


def test_malformed_toml_names_task_and_problem(tmp_path):
    with pytest.raises(TaskFormatError, match=r"task broken: task.toml is not valid TOML"):
        load_harbor_task(make_task(tmp_path, "broken", toml="[verifier\ntimeout_sec = 1"))


def test_wrong_field_type_names_the_field(tmp_path):
    toml = GOOD_TOML.replace("cpus = 2", 'cpus = "lots"')
    with pytest.raises(TaskFormatError, match=r"task bad-cpus: task.toml: environment.cpus"):
        load_harbor_task(make_task(tmp_path, "bad-cpus", toml=toml))


def test_unknown_table_is_refused(tmp_path):
    with pytest.raises(TaskFormatError, match=r"verifer"):
        load_harbor_task(make_task(tmp_path, "typo", toml=GOOD_TOML + "\n[verifer]\ntimeout_sec = 1\n"))


def test_missing_test_sh_is_an_error(tmp_path):
    with pytest.raises(TaskFormatError, match=r"task no-tests: missing required file tests/test.sh"):
        load_harbor_task(make_task(tmp_path, "no-tests", skip=("tests/test.sh",)))


def test_broken_task_never_stops_the_suite(tmp_path):
    make_task(tmp_path, "a-good")
    make_task(tmp_path, "b-broken", toml="not toml at all [")
    make_task(tmp_path, "c-missing", skip=("instruction.md",))
    make_task(tmp_path, "d-good")
    suite = load_suite(str(tmp_path))
    assert [t.task_id for t in suite.tasks] == ["a-good", "d-good"]
    assert {e.task_id: e.error.split(":")[0] for e in suite.errors} == {
        "b-broken": "task b-broken", "c-missing": "task c-missing"}


def test_unknown_suite_is_a_clear_error(tmp_path):
    with pytest.raises(SuiteError, match="no such directory or file"):
        load_suite(str(tmp_path / "nope"))


def test_builtin_suite_has_at_least_twelve_tasks_in_several_languages():
    suite = load_suite("builtin")
    assert not suite.errors
    assert len(suite.tasks) >= 12
    languages = {t.config.metadata["tags"][0] for t in suite.tasks}
    assert len(languages - {"python"}) >= 2
