"""A task's repository: one commit checked out with its own history and no trace of anything later."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest
from support.git_repos import CommitSpec, commit_files, make_repo, run_git

from sandbox.mining.errors import MiningError
from sandbox.mining.export import BRANCH, export_at

HISTORY = [
    CommitSpec({"app.py": "VERSION = 1\n"}, "Start the app", "2024-01-01T09:00:00Z"),
    CommitSpec({"app.py": "VERSION = 2\n", "tests/test_app.py": "def test(): pass\n"}, "Version two of the app",
               "2024-01-02T09:00:00Z"),
    CommitSpec({"app.py": "VERSION = 3  # the solution, later\n", "secret_fix.py": "FIX = 'later only'\n"},
               "Version three, the later fix", "2024-01-03T09:00:00Z"),
]


def source_repo(tmp_path: Path) -> tuple[Path, str, str]:
    """HISTORY plus a tag and a side branch on the later commit; (repository, middle commit, later commit)."""
    repo = make_repo(tmp_path / "source", HISTORY)
    middle, later = run_git(repo, "rev-parse", "HEAD~1", "HEAD").split()
    run_git(repo, "tag", "-a", "-m", "the later release", "v3", later)
    run_git(repo, "checkout", "-q", "-b", "side")
    commit_files(repo, CommitSpec({"side.py": "S = 1\n"}, "Work on a side branch", "2024-01-04T09:00:00Z"))
    run_git(repo, "checkout", "-q", "main")
    return repo, middle, later


def object_exists(repo: Path, name: str) -> bool:
    return subprocess.run(["git", "-C", str(repo), "cat-file", "-e", name], capture_output=True).returncode == 0


def test_the_export_holds_the_commit_checked_out_and_nothing_later(tmp_path):
    repo, middle, later = source_repo(tmp_path)
    task = tmp_path / "task"
    export_at(repo, middle, task)
    assert run_git(task, "rev-parse", "HEAD").strip() == middle
    assert run_git(task, "symbolic-ref", "HEAD").strip() == f"refs/heads/{BRANCH}"
    assert (task / "app.py").read_text() == "VERSION = 2\n" and not (task / "secret_fix.py").exists()
    assert run_git(task, "status", "--porcelain") == ""
    assert run_git(task, "log", "--all", "--format=%H").split() == run_git(repo, "rev-list", middle).split()
    later_blob = run_git(repo, "rev-parse", f"{later}:secret_fix.py").strip()
    assert not object_exists(task, later) and not object_exists(task, later_blob)
    assert not object_exists(task, run_git(repo, "rev-parse", "side").strip())
    assert run_git(task, "tag") == "" and run_git(task, "remote") == ""
    assert run_git(task, "for-each-ref", "--format=%(refname)").split() == [f"refs/heads/{BRANCH}"]
    git_dir = task / ".git"
    leftovers = {"FETCH_HEAD", "ORIG_HEAD", "logs", "packed-refs"} & {p.name for p in git_dir.iterdir()}
    assert leftovers == set()
    assert later not in (git_dir / "config").read_text()


def test_a_plain_clone_would_have_kept_the_later_history(tmp_path):
    """The control for the test above: what the export must not do."""
    repo, middle, later = source_repo(tmp_path)
    clone = tmp_path / "clone"
    run_git(tmp_path, "clone", "-q", str(repo), str(clone))
    run_git(clone, "reset", "-q", "--hard", middle)
    assert object_exists(clone, later)


def test_a_bare_repository_exports_its_root_commit(tmp_path):
    bare = make_repo(tmp_path / "bare.git", HISTORY, bare=True)
    root = run_git(bare, "rev-list", "--max-parents=0", "HEAD").strip()
    export_at(bare, root, tmp_path / "task")
    assert run_git(tmp_path / "task", "log", "--all", "--format=%H").split() == [root]
    assert (tmp_path / "task" / "app.py").read_text() == "VERSION = 1\n"


def test_an_unknown_commit_or_a_used_destination_is_refused(tmp_path):
    repo, middle, _ = source_repo(tmp_path)
    with pytest.raises(MiningError, match="no such commit"):
        export_at(repo, "0" * 40, tmp_path / "task")
    used = tmp_path / "used"
    used.mkdir()
    (used / "file").write_text("x")
    with pytest.raises(FileExistsError, match="absent or empty directory"):
        export_at(repo, middle, used)
    with pytest.raises(MiningError, match="not a git repository"):
        export_at(used, middle, tmp_path / "other")
