"""`leafcost validate` driven as a user drives it: the real console script, real sandboxes, exit codes, JSON."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from sandbox import BUILTIN_SUITE

LEAFCOST = Path(sys.executable).with_name("leafcost")


def leafcost(*args: str, cache: Path, env: dict[str, str] | None = None) -> subprocess.CompletedProcess:
    environment = {**os.environ, "LEAFCOST_CACHE": str(cache), **(env or {})}
    return subprocess.run([str(LEAFCOST), *args], capture_output=True, text=True, env=environment, timeout=900)


@pytest.mark.slow
def test_builtin_suite_is_all_valid_with_exact_json_schema(tmp_path):
    result = leafcost("validate", "builtin", "--json", "--workers", "2", cache=tmp_path / "cache")
    assert result.returncode == 0, result.stdout + result.stderr
    report = json.loads(result.stdout)
    assert set(report) == {"tasks", "valid", "invalid"}
    assert report["invalid"] == 0 and report["valid"] == len(report["tasks"]) >= 12
    for task in report["tasks"]:
        assert set(task) == {"task_id", "oracle_resolved", "empty_resolved", "valid", "error", "seconds"}
        assert task["oracle_resolved"] is True and task["empty_resolved"] is False and task["error"] is None


def test_a_broken_task_is_reported_and_the_rest_still_run(tmp_path):
    suite = tmp_path / "suite"
    shutil.copytree(BUILTIN_SUITE / "url-router-params", suite / "url-router-params")
    shutil.copytree(BUILTIN_SUITE / "ttl-cache-eviction", suite / "broken-toml")
    (suite / "broken-toml" / "task.toml").write_text("[environment\ncpus = 1\n")
    shutil.copytree(BUILTIN_SUITE / "ttl-cache-eviction", suite / "no-test-sh")
    (suite / "no-test-sh" / "tests" / "test.sh").unlink()
    result = leafcost("validate", str(suite), "--json", cache=tmp_path / "cache")
    assert result.returncode == 1
    tasks = {t["task_id"]: t for t in json.loads(result.stdout)["tasks"]}
    assert tasks["url-router-params"]["valid"] is True
    assert "task.toml is not valid TOML" in tasks["broken-toml"]["error"]
    assert "missing required file tests/test.sh" in tasks["no-test-sh"]["error"]


def test_table_output_and_unknown_suite(tmp_path):
    table = leafcost("validate", str(BUILTIN_SUITE / "cron-next-run"), cache=tmp_path / "cache")
    assert table.returncode == 0
    assert "cron-next-run" in table.stdout and "valid: 1  invalid: 0" in table.stdout
    missing = leafcost("validate", str(tmp_path / "nowhere"), cache=tmp_path / "cache")
    assert missing.returncode == 2
    assert missing.stderr.strip().startswith("leafcost: suite") and len(missing.stderr.strip().splitlines()) == 1


def test_without_bubblewrap_validate_refuses_with_the_fix(tmp_path):
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    for tool in ("git", "cp", "python3", "sh", "bash"):
        if shutil.which(tool):
            (bin_dir / tool).symlink_to(shutil.which(tool))
    result = leafcost("validate", "builtin", cache=tmp_path / "cache", env={"PATH": str(bin_dir)})
    assert result.returncode == 2
    assert "apt-get install -y bubblewrap" in result.stderr and "--unsafe-no-isolation" in result.stderr


def test_an_oracle_that_fails_shows_the_verifiers_last_lines(tmp_path):
    suite = tmp_path / "suite"
    shutil.copytree(BUILTIN_SUITE / "url-router-params", suite / "wrong-solution")
    (suite / "wrong-solution" / "solution" / "solve.sh").write_text("true\n")  # changes nothing: the tests fail
    result = leafcost("validate", str(suite), "--json", cache=tmp_path / "cache")
    assert result.returncode == 1
    error = json.loads(result.stdout)["tasks"][0]["error"]
    assert "does not resolve the task (reward 0)" in error
    last_lines = error.split("the verifier's last lines:\n", 1)[1].splitlines()
    # the built-in grader's own report: how many named tests passed, and which failed
    assert 1 <= len(last_lines) <= 8 and "named tests passed; not resolved" in last_lines[0], error
    assert any(line.strip().startswith("failed: test_path_urls.") for line in last_lines), error
