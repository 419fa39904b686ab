"""`leafcost mine` end to end on the podman backend, over a repository with real history: a bug fix with its test
(kept), then one commit for each way a candidate is dropped (no parent, a refactor without tests, tests only, a
thin message, too many files, a binary file, no test module, a message quoting the fix, a test that already
passes, an install that fails, nothing to install from, a merge). The kept tasks validate with `leafcost
validate` (oracle resolved, empty not), their images hold no later history and no solution, and bad input is one
line with the report still written.
A flaky test goes through the same command in-process, with each attempt's sandbox numbered (identical sandboxes
give a test nothing that differs from run to run)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from support.git_repos import CommitSpec, make_repo, run_git

from container_images import ULIMITS, ensure_mining_base_image, podman_argv

LEAFCOST = Path(sys.executable).with_name("leafcost")

PYPROJECT = """[build-system]
requires = ["setuptools>=61"]
build-backend = "setuptools.build_meta"

[project]
name = "slugkit"
version = "0.1"
requires-python = ">=3.9"

[tool.setuptools]
packages = ["slugkit"]
"""
BUGGY = "def slugify(text):\n    return text.lower().replace(' ', '-')\n"
FIXED = "def slugify(text):\n    return '-'.join(text.lower().split())\n"
FIRST_TEST = "from slugkit import slugify\n\n\ndef test_lowercase():\n    assert slugify('Ab') == 'ab'\n"
FIX_TEST = FIRST_TEST + "\n\ndef test_collapses_spaces():\n    assert slugify('a  b') == 'a-b'\n"
LEAKED_LINE = "    return '-'.join(part for part in text.strip().lower().split() if part)"
SEPARATED_LINE = LEAKED_LINE.replace("'-'", "separator")
BROKEN_SETUP = "from setuptools import setup\nraise SystemExit('slugkit cannot be installed at this commit')\nsetup()\n"


def _day(n: int) -> str:
    return f"2023-02-{n:02d}T10:00:00Z"


def history() -> list[CommitSpec]:
    """Oldest first: the root, the fix that is kept, then one commit per drop reason up to the broken install."""
    many = {f"slugkit/extra_{i}.py": f"X = {i}\n" for i in range(15)}
    return [
        CommitSpec({"pyproject.toml": PYPROJECT, "slugkit/__init__.py": BUGGY, "tests/test_slug.py": FIRST_TEST},
                   "Start slugkit with slugify and a first test", _day(1)),
        CommitSpec({"slugkit/__init__.py": FIXED, "tests/test_slug.py": FIX_TEST},
                   "slugify leaves repeated dashes for repeated spaces\n\nslugify('a  b') gives 'a--b' where one dash "
                   "is expected.\n\nSigned-off-by: A Developer <dev@example.invalid>", _day(2)),
        CommitSpec({"slugkit/__init__.py": FIXED + "\n\n# Joining words is all slugify does.\n"},
                   "Explain in a comment what slugify does to words", _day(3)),
        CommitSpec({"tests/test_more.py": "from slugkit import slugify\n\n\ndef test_digits():\n"
                                          "    assert slugify('Route 66') == 'route-66'\n"},
                   "Cover digits in slugify with a test of their own", _day(4)),
        CommitSpec({"slugkit/__init__.py": FIXED + "\n\n# Joining the words is all slugify does.\n",
                    "tests/test_more.py": "from slugkit import slugify\n\n\ndef test_digits():\n"
                                          "    assert slugify('Route 66') == 'route-66'  # digits\n"},
                   "fix typo", _day(5)),
        CommitSpec({**many, "tests/test_extra.py": "import slugkit.extra_0\n\n\ndef test_extra():\n"
                                                   "    assert slugkit.extra_0.X == 0\n"},
                   "Add fifteen extra modules that nobody asked for", _day(6)),
        CommitSpec({"slugkit/logo.png": b"\x89PNG\r\n\x1a\n\x00\x00\x00binary",
                    "tests/test_logo.py": "def test_logo():\n    assert True\n"},
                   "Ship the project's logo inside the package", _day(7)),
        CommitSpec({"slugkit/__init__.py": FIXED + "\nSEPARATOR = '-'\n",
                    "tests/conftest.py": "import pytest\n\n\n@pytest.fixture\ndef separator():\n    return '-'\n"},
                   "Name the separator slugify joins words with", _day(8)),
        CommitSpec({"slugkit/__init__.py": f"def slugify(text):\n{LEAKED_LINE}\n",
                    "tests/test_slug.py": FIX_TEST + "\n\ndef test_strips():\n    assert slugify(' a ') == 'a'\n"},
                   f"slugify keeps surrounding spaces\n\nIt should read:\n\n{LEAKED_LINE}\n", _day(9)),
        CommitSpec({"slugkit/__init__.py": f"def slugify(text):\n{LEAKED_LINE}\n\n\n# words only\n",
                    "tests/test_more.py": "from slugkit import slugify\n\n\ndef test_digits():\n"
                                          "    assert slugify('Route 66') == 'route-66'\n\n\ndef test_empty():\n"
                                          "    assert slugify('') == ''\n"},
                   "Check that an empty title gives an empty slug", _day(10)),
        CommitSpec({"setup.py": BROKEN_SETUP}, "Add a setup script for older installers", _day(11)),
        CommitSpec({"slugkit/__init__.py": f"def slugify(text, separator='-'):\n{SEPARATED_LINE}\n",
                    "tests/test_slug.py": FIX_TEST + "\n\ndef test_separator():\n"
                                          "    assert slugify('a b', separator='_') == 'a_b'\n"},
                   "slugify cannot join words with anything but a dash", _day(12)),
        CommitSpec({"pyproject.toml": None, "setup.py": None}, "Stop packaging slugkit: it is vendored now", _day(13)),
        CommitSpec({"slugkit/__init__.py": FIXED + "\n\n# vendored\n",
                    "tests/test_more.py": "import slugkit\n\n\ndef test_vendored():\n"
                                          "    assert slugkit.slugify('A')\n"},
                   "Check that the vendored slugkit still imports", _day(14)),
    ]


EXPECTED_DROPS = {"no_parent": 1, "no_tests": 4, "tests_only": 1, "thin_message": 1, "too_many_files": 1,
                  "binary_only": 1, "tests_not_found": 1, "leaky_instruction": 1, "no_fail_to_pass": 1,
                  "install_failed": 1, "no_project": 1, "merge": 1}


@pytest.fixture(scope="module")
def repository(tmp_path_factory) -> Path:
    """The history above, then a side branch (a docs-only commit) merged back without fast-forward."""
    repo = make_repo(tmp_path_factory.mktemp("mine-cli") / "slugkit", history())
    run_git(repo, "checkout", "-q", "-b", "docs")
    (repo / "README.md").write_text("slugkit makes slugs.\n")
    run_git(repo, "add", "README.md", date=_day(15))
    run_git(repo, "commit", "-q", "-m", "Describe slugkit in a README for new users", date=_day(15))
    run_git(repo, "checkout", "-q", "main")
    run_git(repo, "merge", "-q", "--no-ff", "-m", "Merge the README branch into main", "docs", date=_day(16))
    return repo


@pytest.fixture(scope="module")
def mined(repository, container_images, tmp_path_factory) -> dict:
    ensure_mining_base_image()
    out = tmp_path_factory.mktemp("mined") / "out"
    done = subprocess.run([str(LEAFCOST), "mine", str(repository), "--out", str(out), "--repo-name", "acme/slugkit",
                           "--harbor", "--json"], capture_output=True, text=True, timeout=1800)
    assert done.returncode == 0, done.stderr[-3000:]
    rows = [json.loads(line) for line in (out / "tasks.jsonl").read_text().splitlines()]
    return {"summary": json.loads(done.stdout), "report": json.loads((out / "report.json").read_text()),
            "rows": rows, "out": out}


def _sha_of(repository: Path, subject: str) -> str:
    return run_git(repository, "log", "--all", "--format=%H", f"--grep=^{subject}").split()[0]


def test_every_keep_and_drop_reason_is_counted(mined):
    summary = mined["summary"]
    assert summary["kept"] == 1 and summary["dropped"] == EXPECTED_DROPS, summary
    assert summary["commits_seen"] == 16 and summary["candidates"] == 6
    by_reason = {result["reason"]: result for result in mined["report"]["candidates"] if not result["kept"]}
    install_log = (mined["out"] / by_reason["install_failed"]["log"]).read_text()
    assert "slugkit cannot be installed at this commit" in install_log  # the failing step's own output
    assert "pip install" in by_reason["install_failed"]["detail"]  # the line names the step
    assert LEAKED_LINE.strip() in by_reason["leaky_instruction"]["detail"]
    assert mined["report"]["finished"] is True and mined["report"]["error"] is None


def test_the_kept_task_is_the_fix_with_its_tests(mined, repository):
    [row] = mined["rows"]
    fix = _sha_of(repository, "slugify leaves repeated dashes")
    assert row["mined_from"] == fix and row["instance_id"] == f"acme__slugkit-{fix[:12]}"
    assert row["base_commit"] == run_git(repository, "rev-parse", f"{fix}^").strip()
    assert json.loads(row["FAIL_TO_PASS"]) == ["tests/test_slug.py::test_collapses_spaces"]
    assert json.loads(row["PASS_TO_PASS"]) == ["tests/test_slug.py::test_lowercase"]
    assert row["created_at"] == "2023-02-02T10:00:00Z" and row["instruction_source"] == "commit-message"
    assert row["problem_statement"].startswith("slugify leaves repeated dashes")
    assert "Signed-off-by" not in row["problem_statement"]  # trailers are not the problem
    assert "slugkit/__init__.py" in row["patch"] and "tests/" not in row["patch"]
    assert "tests/test_slug.py" in row["test_patch"] and "slugkit/" not in row["test_patch"]


def test_kept_tasks_validate_as_swebench_rows_and_as_harbor_tasks(mined):
    for suite in (mined["out"] / "tasks.jsonl", mined["out"] / "harbor"):
        done = subprocess.run([str(LEAFCOST), "validate", str(suite), "--backend", "podman", "--json"],
                              capture_output=True, text=True, timeout=900)
        report = json.loads(done.stdout)
        assert done.returncode == 0 and report["valid"] == 1 and report["invalid"] == 0, done.stdout + done.stderr
        [task] = report["tasks"]
        assert (task["oracle_resolved"], task["empty_resolved"]) == (True, False)


def test_a_task_image_holds_no_later_history_and_no_solution(mined, repository):
    [row] = mined["rows"]
    later = [_sha_of(repository, "slugify leaves repeated dashes"), _sha_of(repository, "Merge the README")]
    script = ("cd /testbed && git log --all --format=commit-%H && for c in " + " ".join(later)
              + "; do git cat-file -e $c 2>/dev/null && echo later-$c; done; "
              + "grep -rqF \"'-'.join\" . && echo solution-present || echo solution-absent")
    shown = subprocess.run([*podman_argv(), "run", "--rm", *ULIMITS, "--network", "none", row["image"], "sh", "-c",
                            script], capture_output=True, text=True, timeout=300)
    assert shown.returncode == 0, shown.stderr
    words = shown.stdout.split()
    commits = {word.removeprefix("commit-") for word in words if word.startswith("commit-")}
    ancestry = set(run_git(repository, "rev-list", row["base_commit"]).split())
    assert not [word for word in words if word.startswith("later-")]
    # the base commit's ancestry plus the image's one environment set-up commit on top, nothing else
    assert ancestry <= commits and len(commits - ancestry) == 1
    assert "solution-absent" in words  # the fixed line is nowhere in the task's tree


@pytest.mark.parametrize(("argv", "said"), [
    (["{tmp}/not-a-repo"], "not a git repository"),
    (["{shallow}"], "shallow"),
    (["{repo}", "--since", "2030-01-01"], "no commits"),
    (["{repo}", "--env-hint", "{hint}"], "unknown key(s) instal"),
    (["{repo}", "--since", "yesterday"], "--since 'yesterday': expected a date"),
])
def test_bad_input_is_one_line_and_the_report_is_written(argv, said, repository, tmp_path):
    (tmp_path / "not-a-repo").mkdir()
    shallow = tmp_path / "shallow"
    subprocess.run(["git", "clone", "-q", "--depth", "2", f"file://{repository}", str(shallow)], check=True)
    hint = tmp_path / "hint.yaml"
    hint.write_text("instal: [make]\n")
    values = {"tmp": tmp_path, "shallow": shallow, "repo": repository, "hint": hint}
    out = tmp_path / "out"
    done = subprocess.run([str(LEAFCOST), "mine", *(a.format(**values) for a in argv), "--out", str(out)],
                          capture_output=True, text=True, timeout=300)
    lines = done.stderr.strip().splitlines()
    assert done.returncode in (1, 2) and len(lines) == 1 and said in lines[0], done.stderr
    if done.returncode == 1:  # mining began: its report says what stopped it
        report = json.loads((out / "report.json").read_text())
        assert report["error"] and said in report["error"] and report["finished"] is False


RUN_FILE = ".leafcost-run-number"
FLAKY_TEST = (f"\n\ndef test_flaky():\n    with open('{RUN_FILE}') as numbered:\n"
              "        assert int(numbered.read()) % 2 == 0\n")


def test_flaky_tests_are_dropped_and_counted_through_the_cli(container_images, tmp_path, monkeypatch):
    """In-process, so each attempt's sandbox can be numbered (a file the flaky test reads: odd runs fail). The newer
    fix changes only a flaky test (dropped: flaky); the older one also has a real failing test (kept, the flaky test
    left out of both lists and counted)."""
    from typer.testing import CliRunner

    from compare.cli import app
    from sandbox import write_file
    from sandbox.mining import validation

    ensure_mining_base_image()
    repo = make_repo(tmp_path / "flaky", [
        CommitSpec({"pyproject.toml": PYPROJECT, "slugkit/__init__.py": BUGGY, "tests/test_slug.py": FIRST_TEST},
                   "Start slugkit with slugify and a first test", _day(1)),
        CommitSpec({"slugkit/__init__.py": FIXED, "tests/test_slug.py": FIX_TEST + FLAKY_TEST},
                   "slugify leaves repeated dashes for repeated spaces", _day(2)),
        CommitSpec({"slugkit/__init__.py": FIXED + "\n\n# words only\n",
                    "tests/test_more.py": "import os\n" + FLAKY_TEST},
                   "Check slugify against the run number for no good reason", _day(3))])
    opened = []
    real_open = validation.open_sandbox

    async def numbered_open(task, options, **kwargs):
        sandbox = await real_open(task, options, **kwargs)
        opened.append(task.task_id)
        await write_file(sandbox.sandbox, f"/testbed/{RUN_FILE}", f"{len(opened)}\n".encode(), user="root")
        return sandbox

    monkeypatch.setattr(validation, "open_sandbox", numbered_open)
    out = tmp_path / "out"
    done = CliRunner().invoke(app, ["mine", str(repo), "--out", str(out), "--json"])
    assert done.exit_code == 0, done.output
    report = json.loads((out / "report.json").read_text())
    results = {result["subject"]: result for result in report["candidates"]}
    dropped = results["Check slugify against the run number for no good reason"]
    kept = results["slugify leaves repeated dashes for repeated spaces"]
    assert (dropped["kept"], dropped["reason"], dropped["flaky_tests"]) == (False, "flaky", 1)
    assert (kept["kept"], kept["fail_to_pass"], kept["flaky_tests"]) == (True, 1, 1)
    [row] = [json.loads(line) for line in (out / "tasks.jsonl").read_text().splitlines()]
    assert json.loads(row["FAIL_TO_PASS"]) == ["tests/test_slug.py::test_collapses_spaces"]
    assert "tests/test_slug.py::test_flaky" not in row["PASS_TO_PASS"]
    assert len(opened) == 12  # 3 before and 3 after, for each of the two candidates


def test_describe_with_an_arm_writes_the_statement_through_the_cli(container_images, tmp_path, monkeypatch):
    """--describe-with ARM --spec SPEC: the arm (a router arm against the scripted OpenAI-protocol server) writes the
    kept task's statement, which the row records with its source; the solution never reaches the server."""
    from support.sglang_fake import ScriptedServer

    ensure_mining_base_image()
    repo = make_repo(tmp_path / "describe", history()[:2])
    statement = "slugify gives two dashes for two spaces\n\n`slugify('a  b')` returns 'a--b'; I expected 'a-b'."
    monkeypatch.setenv("LEAFCOST_TEST_MINE_KEY", "sk-mine-test-0123456789")
    script = {"model": "writer-model", "auth": "Bearer sk-mine-test-0123456789",
              "turns": [{"content": statement, "usage": {"prompt_tokens": 900, "completion_tokens": 60}}]}
    with ScriptedServer(script) as server:
        spec = tmp_path / "spec.yaml"
        spec.write_text(json.dumps({"name": "mine", "suite": "unused", "arms": [
            {"name": "writer", "adapter": "router", "model": "writer-model", "base_url": server.base_url,
             "api_key_env": "LEAFCOST_TEST_MINE_KEY", "max_retries": 0, "prices": {"input": 1.0, "output": 4.0}}]}))
        out = tmp_path / "out"
        done = subprocess.run([str(LEAFCOST), "mine", str(repo), "--out", str(out), "--describe-with", "writer",
                               "--spec", str(spec), "--json"], capture_output=True, text=True, timeout=900)
        sent = json.dumps(server.chat_bodies)
    assert done.returncode == 0, done.stderr[-2000:]
    [row] = [json.loads(line) for line in (out / "tasks.jsonl").read_text().splitlines()]
    assert row["problem_statement"] == statement and row["instruction_source"] == "model:writer"
    [kept] = [result for result in json.loads((out / "report.json").read_text())["candidates"] if result["kept"]]
    assert kept["describe_spent"] == {"prompt_tokens": 900, "completion_tokens": 60,
                                      "cost_usd": pytest.approx(900 * 1.0 / 1e6 + 60 * 4.0 / 1e6)}
    assert json.loads(done.stdout)["describe_usd"] == pytest.approx(900 * 1.0 / 1e6 + 60 * 4.0 / 1e6)
    assert "'-'.join" not in sent and "test_collapses_spaces" in sent  # the failing test was shown, not the fix
    assert "sk-mine-test" not in (out / "report.json").read_text() + (out / "tasks.jsonl").read_text()


def test_a_dependency_set_that_fails_to_install_is_built_once(container_images, tmp_path):
    """Two fixes over the same broken requirements file: the first builds the env image and fails with pip's own
    words in its log; the second is dropped with that failure, not built again."""
    ensure_mining_base_image()
    requirements = "not a requirement!!\n"
    repo = make_repo(tmp_path / "broken", [
        CommitSpec({"requirements.txt": requirements, "slugkit/__init__.py": BUGGY, "tests/test_slug.py": FIRST_TEST},
                   "Start slugkit with slugify and a first test", _day(1)),
        CommitSpec({"slugkit/__init__.py": FIXED, "tests/test_slug.py": FIX_TEST},
                   "slugify leaves repeated dashes for repeated spaces", _day(2)),
        CommitSpec({"slugkit/__init__.py": FIXED + "\n\n# words only\n", "tests/test_more.py": "import slugkit\n\n\n"
                    "def test_module():\n    assert slugkit.slugify('A') == 'a'\n"},
                   "Keep slugify's module importable on its own", _day(3))])
    out = tmp_path / "out"
    done = subprocess.run([str(LEAFCOST), "mine", str(repo), "--out", str(out), "--json"], capture_output=True,
                          text=True, timeout=900)
    assert done.returncode == 0, done.stderr[-2000:]
    newer, older = json.loads((out / "report.json").read_text())["candidates"]  # newest first
    assert (newer["reason"], older["reason"]) == ("install_failed", "install_failed")
    assert "pip install -r requirements.txt" in newer["detail"] and "not retried" in older["detail"]
    for result in (newer, older):
        assert "not a requirement!!" in (out / result["log"]).read_text()  # pip's own words on the line it refused


def test_a_test_run_past_the_limit_drops_the_candidate(container_images, tmp_path):
    """--test-timeout bounds each test run (SWE-bench's 1800 s would cost half an hour per run of a hanging suite)."""
    ensure_mining_base_image()
    hanging = FIX_TEST + "\n\ndef test_waits_forever():\n    import threading\n    threading.Event().wait()\n"
    repo = make_repo(tmp_path / "hangs", [
        CommitSpec({"pyproject.toml": PYPROJECT, "slugkit/__init__.py": BUGGY, "tests/test_slug.py": FIRST_TEST},
                   "Start slugkit with slugify and a first test", _day(1)),
        CommitSpec({"slugkit/__init__.py": FIXED, "tests/test_slug.py": hanging},
                   "slugify leaves repeated dashes for repeated spaces", _day(2))])
    out = tmp_path / "out"
    done = subprocess.run([str(LEAFCOST), "mine", str(repo), "--out", str(out), "--test-timeout", "5", "--json"],
                          capture_output=True, text=True, timeout=900)
    assert done.returncode == 0, done.stderr[-2000:]
    [result] = json.loads((out / "report.json").read_text())["candidates"]
    assert (result["kept"], result["reason"]) == (False, "harness_error")
    assert "before run 1" in result["detail"] and "timeout" in result["detail"], result["detail"]
