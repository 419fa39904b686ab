"""Candidates from a repository's history: SWE-bench's patch/test_patch split, every drop rule, the filters, the bad
inputs, and git on a hostile repository running none of the programs its configuration names."""

from __future__ import annotations

import os
import shutil
import subprocess
from datetime import UTC, date, datetime
from pathlib import Path

import pytest
from support.git_repos import CommitSpec, commit_files, make_repo, run_git

from sandbox.mining.candidates import MAX_FILES, Scan, is_test_file, scan
from sandbox.mining.errors import DROP_REASONS, MiningError
from sandbox.mining.export import export_at

BASE = CommitSpec({"src/calc.py": "def add(a, b):\n    return a - b\n", "src/old.py": "OLD = 1\n",
                   "tests/test_old.py": "def test_old():\n    assert True\n", "logo.png": b"\x89PNG\0\1\2"},
                  "Initial import of the calculator", "2024-01-01T09:00:00Z")
FIX = CommitSpec({"src/calc.py": "def add(a, b):\n    return a + b\n",
                  "tests/test_calc.py": "from src.calc import add\n\ndef test_add():\n    assert add(1, 2) == 3\n"},
                 "Fix add() subtracting instead of adding\n\nadd(1, 2) returned -1.\n\nSigned-off-by: A <a@b.c>",
                 "2024-01-02T09:00:00Z")


def fixture_repo(tmp_path: Path, *later: CommitSpec) -> Path:
    """BASE, then `later` commits."""
    return make_repo(tmp_path / "repo", [BASE, *later])


def head(repo: Path) -> str:
    return run_git(repo, "rev-parse", "HEAD").strip()


def reasons(result: Scan) -> dict[str, str]:
    """sha → drop reason."""
    return {sha: reason for sha, reason, _ in result.dropped}


def test_a_bug_fix_with_its_test_is_a_candidate_split_as_swebench_splits_it(tmp_path):
    repo = fixture_repo(tmp_path, FIX)
    result = scan(repo)
    assert result.repository == str(repo.resolve()) and result.head == head(repo) and result.seen == 2
    [candidate] = result.candidates
    assert candidate.sha == head(repo) and candidate.parent == run_git(repo, "rev-parse", "HEAD~1").strip()
    assert candidate.committed_at == datetime(2024, 1, 2, 9, tzinfo=UTC)
    assert candidate.subject == "Fix add() subtracting instead of adding"
    assert candidate.message.rstrip().endswith("Signed-off-by: A <a@b.c>")
    assert (candidate.solution_files, candidate.test_files) == (["src/calc.py"], ["tests/test_calc.py"])
    assert candidate.patch.startswith("diff --git a/src/calc.py b/src/calc.py\nindex ")
    assert "+    return a + b" in candidate.patch and "test_add" not in candidate.patch
    assert "+def test_add():" in candidate.test_patch and "a + b" not in candidate.test_patch
    full_index = [line for line in candidate.patch.splitlines() if line.startswith("index ")]
    assert len(full_index[0].split()[1].split("..")[0]) == 40
    assert reasons(result) == {run_git(repo, "rev-parse", "HEAD~1").strip(): "no_parent"}


@pytest.mark.parametrize(("path", "is_test"), [
    ("tests/test_calc.py", True), ("pkg/testing/util.py", True), ("e2e/login.spec.js", True),
    ("conftest.py", True), ("src/calc_test.py", True), ("app/tests.py", True), ("web/button.test.tsx", True),
    ("src/__tests__/a.js", True), ("tests/data/fixture.json", True), ("pkg/handler_test.go", True),
    ("src/contest.py", False), ("src/calc.py", False), ("docs/Tests.md", False),
    # SWE-bench's substring rule takes these, hiding library code and CI files from the agent in the test patch
    ("src/flask/testing.py", False), (".github/workflows/tests.yaml", False), ("requirements/tests.txt", False),
    ("src/latest.py", False),
])
def test_a_test_file_is_under_a_test_directory_or_named_as_a_test(path, is_test):
    assert is_test_file(path) is is_test


def test_patch_and_test_patch_apply_at_the_parent_and_give_the_commits_tree(tmp_path):
    change = CommitSpec({"src/calc.py": "def add(a, b):\n    return a + b\n", "src/old.py": None,
                         "src/new.py": "OLD = 1\n", "tests/test_old.py": None,
                         "tests/test_new.py": "def test_new():\n    assert 1\n", "src/ünïcode name.py": "U = 1\n"},
                        "Move the old module and fix add() sign error", "2024-01-02T09:00:00Z")
    repo = fixture_repo(tmp_path, change)
    [candidate] = scan(repo).candidates
    assert sorted(candidate.solution_files) == ["src/calc.py", "src/new.py", "src/old.py", "src/ünïcode name.py"]
    assert sorted(candidate.test_files) == ["tests/test_new.py", "tests/test_old.py"]  # a deletion is a change
    tree = tmp_path / "tree"
    export_at(repo, candidate.parent, tree)
    for patch in (candidate.patch, candidate.test_patch):
        subprocess.run(["git", "apply", "-"], cwd=tree, input=patch, text=True, check=True)
    run_git(tree, "add", "-A")
    assert run_git(tree, "write-tree").strip() == run_git(repo, "rev-parse", f"{candidate.sha}^{{tree}}").strip()


def test_every_commit_failing_a_rule_is_dropped_with_its_reason(tmp_path):
    many = {f"src/m{i}.py": f"M = {i}\n" for i in range(MAX_FILES)} | {"tests/test_m.py": "def test_m(): pass\n"}
    specs = {
        "no_tests": CommitSpec({"src/calc.py": "def add(a, b):\n    return b + a\n"}, "Refactor add to commute",
                               "2024-01-03T09:00:00Z"),
        "tests_only": CommitSpec({"tests/test_calc.py": "def test_more():\n    pass\n"}, "Add more calculator tests",
                                 "2024-01-04T09:00:00Z"),
        "too_many_files": CommitSpec(many, "Split the calculator into many modules", "2024-01-05T09:00:00Z"),
        "binary_only": CommitSpec({"logo.png": b"\x89PNG\0\x09\x09"}, "Refresh the project logo image",
                                  "2024-01-06T09:00:00Z"),
        "thin_message": CommitSpec({"src/calc.py": "def add(a, b):\n    return a + b  # ok\n",
                                    "tests/test_c.py": "def test_c(): pass\n"}, "fix", "2024-01-07T09:00:00Z"),
    }
    repo = fixture_repo(tmp_path)
    shas = {reason: commit_files(repo, spec) for reason, spec in specs.items()}
    result = scan(repo)
    assert result.candidates == [] and result.seen == len(specs) + 1
    by_sha = reasons(result)
    assert {reason: by_sha[sha] for reason, sha in shas.items()} == {reason: reason for reason in specs}
    assert set(by_sha.values()) <= DROP_REASONS
    details = {sha: detail for sha, _, detail in result.dropped}
    assert "16 files changed" in details[shas["too_many_files"]]


def test_an_empty_commit_changes_too_few_files(tmp_path):
    repo = fixture_repo(tmp_path, CommitSpec({}, "An empty commit that marks a release point", "2024-01-02T09:00:00Z"))
    assert reasons(scan(repo))[head(repo)] == "too_many_files"


def test_a_binary_file_beside_code_and_tests_drops_the_commit_as_binary(tmp_path):
    repo = fixture_repo(tmp_path, CommitSpec(FIX.files | {"logo.png": b"\x89PNG\0\7"}, FIX.message, FIX.date))
    result = scan(repo)
    assert result.candidates == [] and reasons(result)[head(repo)] == "binary_only"
    assert "logo.png beside text changes" in dict((s, d) for s, _, d in result.dropped)[head(repo)]


@pytest.mark.parametrize("message", [
    "WIP: calculator", "Fix typo in add", "bump version to 1.2", "Merge branch 'dev' into main",
    "Update README.md with usage", "Fix add\n\nSigned-off-by: A <a@b.c>\nChange-Id: I1234",
])
def test_a_message_without_substance_is_thin(tmp_path, message):
    repo = fixture_repo(tmp_path, CommitSpec(FIX.files, message, FIX.date))
    assert reasons(scan(repo))[head(repo)] == "thin_message"


def test_a_merge_commit_is_dropped_and_its_branch_commit_judged_on_its_own(tmp_path):
    repo = fixture_repo(tmp_path)
    run_git(repo, "checkout", "-q", "-b", "topic")
    branch_fix = commit_files(repo, FIX)
    run_git(repo, "checkout", "-q", "main")
    readme = CommitSpec({"README": "calculator\n"}, "Describe the calculator project", "2024-01-03T09:00:00Z")
    commit_files(repo, readme)
    run_git(repo, "merge", "-q", "--no-ff", "-m", "Merge the add() fix from topic", "topic",
            date="2024-01-04T09:00:00Z")
    result = scan(repo)
    assert reasons(result)[head(repo)] == "merge"
    assert [candidate.sha for candidate in result.candidates] == [branch_fix]


def test_dates_are_inclusive_utc_days_and_limit_counts_candidates(tmp_path):
    fixes = [CommitSpec({"src/calc.py": f"V = {day}\n", f"tests/test_{day}.py": "def test(): pass\n"},
                        f"Fix the value for day {day}", f"2024-02-{day:02d}T{hour}:00:00Z")
             for day, hour in ((1, "00"), (2, "23"), (3, "12"), (4, "12"))]
    repo = fixture_repo(tmp_path, *fixes)
    result = scan(repo, since=date(2024, 2, 1), until=date(2024, 2, 3))
    assert [c.subject for c in result.candidates] == [f"Fix the value for day {d}" for d in (3, 2, 1)]
    assert result.seen == 3 and result.dropped == []
    limited = scan(repo, limit=2)
    assert [c.subject for c in limited.candidates] == ["Fix the value for day 4", "Fix the value for day 3"]
    assert scan(repo, rev="HEAD~2").head == run_git(repo, "rev-parse", "HEAD~2").strip()
    assert [c.subject for c in scan(repo, rev="HEAD~2").candidates] == ["Fix the value for day 2",
                                                                       "Fix the value for day 1"]


def test_paths_keep_commits_touching_a_prefix(tmp_path):
    docs = CommitSpec({"docs/guide.md": "guide\n", "docs/tests/test_guide.py": "def test(): pass\n"},
                      "Explain the calculator in the guide", "2024-01-03T09:00:00Z")
    repo = fixture_repo(tmp_path, FIX, docs)
    result = scan(repo, paths=["./src/"])
    assert [c.sha for c in result.candidates] == [run_git(repo, "rev-parse", "HEAD~1").strip()]
    assert result.seen == 2  # the fix and the root commit, which has no parent to diff against
    assert [c.subject for c in scan(repo, paths=["docs"]).candidates] == [docs.message]
    assert scan(repo, paths=["sr"]).candidates == []


def test_a_date_range_without_commits_names_the_repositorys_span(tmp_path):
    repo = fixture_repo(tmp_path, FIX)
    with pytest.raises(MiningError, match=r"no commits in that range; the repository's commits span "
                                          r"2024-01-01\.\.2024-01-02"):
        scan(repo, since=date(2025, 1, 1))


def test_not_a_repository_and_a_subdirectory_are_refused_naming_the_path(tmp_path):
    plain = tmp_path / "plain"
    plain.mkdir()
    with pytest.raises(MiningError, match=f"REPO {plain}: not a git repository"):
        scan(plain)
    repo = fixture_repo(tmp_path, FIX)
    with pytest.raises(MiningError, match="inside the git repository"):
        scan(repo / "src")
    with pytest.raises(MiningError, match="--rev nope: no such commit"):
        scan(repo, rev="nope")


def test_a_bare_repository_is_scanned(tmp_path):
    bare = make_repo(tmp_path / "bare.git", [BASE, FIX], bare=True)
    [candidate] = scan(bare).candidates
    assert candidate.test_files == ["tests/test_calc.py"] and "a + b" in candidate.patch


def test_a_shallow_clone_drops_its_boundary_and_refuses_when_nothing_is_left(tmp_path):
    repo = fixture_repo(tmp_path, CommitSpec({"README": "x\n"}, "Describe the calculator project",
                                             "2024-01-02T00:00:00Z"), FIX)
    deep = tmp_path / "deep"
    run_git(tmp_path, "clone", "-q", "--depth", "2", f"file://{repo}", str(deep))
    result = scan(deep)
    assert [c.sha for c in result.candidates] == [head(repo)]
    assert reasons(result)[run_git(repo, "rev-parse", "HEAD~1").strip()] == "no_parent"
    shallow = tmp_path / "shallow"
    run_git(tmp_path, "clone", "-q", "--depth", "1", f"file://{repo}", str(shallow))
    with pytest.raises(MiningError, match="a shallow clone.*git fetch --unshallow"):
        scan(shallow)


def test_a_commit_whose_objects_are_missing_is_dropped_and_a_partial_clone_refused(tmp_path):
    other = CommitSpec({"src/other.py": "O = 1\n", "tests/test_other.py": "def test_o(): pass\n"},
                       "Add the other module with its test", "2024-01-03T09:00:00Z")
    bare = make_repo(tmp_path / "bare.git", [BASE, FIX, other], bare=True)  # bare: git cannot borrow a work tree file
    blob = run_git(bare, "rev-parse", "HEAD~1:tests/test_calc.py").strip()
    (bare / "objects" / blob[:2] / blob[2:]).unlink()
    result = scan(bare)
    assert [c.sha for c in result.candidates] == [head(bare)]
    assert reasons(result)[run_git(bare, "rev-parse", "HEAD~1").strip()] == "harness_error"
    run_git(bare, "config", "core.repositoryformatversion", "1")
    run_git(bare, "config", "extensions.partialClone", "origin")
    with pytest.raises(MiningError, match="a partial clone"):
        scan(bare)


def test_a_repository_owned_by_another_user_is_read(tmp_path):
    repo = fixture_repo(tmp_path, FIX)
    fix = head(repo)
    assert os.geteuid() == 0, "this test makes a repository another user owns, which needs root"
    for root, dirs, files in os.walk(repo):
        for name in [root, *(os.path.join(root, entry) for entry in dirs + files)]:
            os.chown(name, 65534, 65534)
    control = subprocess.run(["git", "-C", str(repo), "log"], capture_output=True, text=True,
                             env={"PATH": os.environ["PATH"], "HOME": str(tmp_path), "GIT_CONFIG_NOSYSTEM": "1"})
    assert "dubious ownership" in control.stderr
    assert [c.sha for c in scan(repo).candidates] == [fix]
    export_at(repo, fix, tmp_path / "task")
    assert (tmp_path / "task" / "src" / "calc.py").read_text() == FIX.files["src/calc.py"]


HOSTILE_HOOKS = ("pre-commit", "post-checkout", "reference-transaction", "post-index-change", "pre-auto-gc",
                 "post-rewrite", "fsmonitor-watchman", "push-to-checkout")


def hostile_repo(tmp_path: Path) -> tuple[Path, Path]:
    """A repository whose config and attributes name a program for every driver git has, and hooks for every
    event; each writes a file named after itself into the returned marker directory."""
    markers = tmp_path / "markers"
    markers.mkdir()
    program = tmp_path / "evil.sh"
    program.write_text(f'#!/bin/sh\ntouch "{markers}/$1"\nshift\n[ -f "$1" ] && cat "$1" || cat\nexit 0\n')
    program.chmod(0o755)
    files = FIX.files | {".gitattributes": "*.py diff=spy filter=spy\n"}
    repo = fixture_repo(tmp_path, CommitSpec(files, FIX.message, FIX.date))
    hooks = tmp_path / "hooks"
    for directory in (hooks, repo / ".git" / "hooks"):
        directory.mkdir(exist_ok=True)
        for name in HOSTILE_HOOKS:
            (directory / name).write_text(f'#!/bin/sh\ntouch "{markers}/hook-{name}"\n')
            (directory / name).chmod(0o755)
    settings = {"diff.external": f"{program} external", "diff.spy.textconv": f"{program} textconv",
                "diff.spy.command": f"{program} command", "filter.spy.clean": f"{program} clean",
                "filter.spy.smudge": f"{program} smudge", "core.fsmonitor": f"{program} fsmonitor",
                "core.hooksPath": str(hooks), "log.showSignature": "true", "gpg.program": f"{program} gpg",
                "core.pager": f"{program} pager", "uploadpack.packObjectsHook": f"{program} packobjects",
                "core.alternateRefsCommand": f"{program} alternaterefs"}
    for key, value in settings.items():
        run_git(repo, "config", key, value)
    (repo / "src" / "calc.py").write_text("# dirty work tree, so an index refresh has work to do\n")
    return repo, markers


def test_the_hostile_repositorys_programs_run_under_plain_git(tmp_path):
    """The control for the next test: the same repository's config is live when git is used without care."""
    repo, markers = hostile_repo(tmp_path)
    copy = tmp_path / "copy"
    shutil.copytree(repo, copy, symlinks=True)
    env = {"PATH": os.environ["PATH"], "HOME": str(tmp_path), "GIT_CONFIG_NOSYSTEM": "1", "GIT_AUTHOR_NAME": "a",
           "GIT_AUTHOR_EMAIL": "a@b.c", "GIT_COMMITTER_NAME": "a", "GIT_COMMITTER_EMAIL": "a@b.c"}
    for args in (["diff", "HEAD~1", "HEAD"], ["diff", "--no-ext-diff", "HEAD~1", "HEAD"], ["status"],
                 ["add", "-A"], ["commit", "-q", "-m", "x"]):
        subprocess.run(["git", "-C", str(copy), *args], env=env, capture_output=True)
    ran = {marker.name for marker in markers.iterdir()}
    assert {"external", "textconv", "fsmonitor", "clean", "hook-pre-commit"} <= ran


def test_scan_and_export_run_nothing_the_hostile_repository_configures(tmp_path):
    repo, markers = hostile_repo(tmp_path)
    before = sorted(p.relative_to(repo).as_posix() for p in (repo / ".git").rglob("*"))
    [candidate] = scan(repo).candidates
    assert "+    return a + b" in candidate.patch  # the real diff, not a driver's output
    export_at(repo, candidate.sha, tmp_path / "task")
    export_at(repo, candidate.parent, tmp_path / "base")
    assert (tmp_path / "task" / "src" / "calc.py").read_text() == FIX.files["src/calc.py"]
    assert sorted(markers.iterdir()) == []
    assert sorted(p.relative_to(repo).as_posix() for p in (repo / ".git").rglob("*")) == before  # nothing written
