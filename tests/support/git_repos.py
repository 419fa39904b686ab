"""Small git repositories with real, reproducible history for the mining tests.

`make_repo(path, [CommitSpec(...), ...])` makes one commit per spec on branch `main`, each with the fixed identity
below and the spec's date as both author and committer date, with no system or global git config involved, so the
same specs give the same commit ids on every machine. `run_git` runs git the same way for what a spec cannot say
(a branch, a merge, a clone)."""

from __future__ import annotations

import os
import subprocess
import tempfile
from dataclasses import dataclass
from pathlib import Path

NAME, EMAIL = "Leafcost Tests", "tests@leafcost.invalid"


@dataclass(frozen=True)
class CommitSpec:
    """One commit: `files` maps a path to its new content (str written as UTF-8, bytes as is) or None to delete it;
    `date` is any date git reads, e.g. "2024-03-01T12:00:00Z", used as author and committer date."""

    files: dict[str, str | bytes | None]
    message: str
    date: str


def run_git(repo: Path, *args: str, date: str = "2024-01-01T00:00:00Z") -> str:
    """git in `repo` (a work tree or a bare repository) with the fixed identity and `date`, no host config; its
    stdout. RuntimeError with git's stderr when it fails."""
    with tempfile.TemporaryDirectory(prefix="git-repos-home-") as home:
        env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "HOME": home, "XDG_CONFIG_HOME": home,
               "GIT_CONFIG_NOSYSTEM": "1", "GIT_CONFIG_GLOBAL": "/dev/null", "LC_ALL": "C",
               "GIT_AUTHOR_NAME": NAME, "GIT_AUTHOR_EMAIL": EMAIL, "GIT_COMMITTER_NAME": NAME,
               "GIT_COMMITTER_EMAIL": EMAIL, "GIT_AUTHOR_DATE": date, "GIT_COMMITTER_DATE": date}
        done = subprocess.run(["git", "-C", str(repo), "-c", "core.hooksPath=/dev/null", *args], env=env, text=True,
                              capture_output=True)
    if done.returncode != 0:
        raise RuntimeError(f"git {' '.join(args)} failed in {repo}: {done.stderr.strip()}")
    return done.stdout


def make_repo(path: Path, commits: list[CommitSpec], *, bare: bool = False) -> Path:
    """A repository at `path` (a work tree, or a bare repository when `bare`) with `commits` in order on `main`;
    returns `path`."""
    path.mkdir(parents=True, exist_ok=True)
    if bare:
        run_git(path, "init", "-q", "--bare", "--template=", "--initial-branch=main")
        with tempfile.TemporaryDirectory(prefix="git-repos-tree-") as tree:
            for spec in commits:
                _commit(Path(tree), spec, ["--git-dir", str(path), "--work-tree", tree])
    else:
        run_git(path, "init", "-q", "--template=", "--initial-branch=main")
        for spec in commits:
            _commit(path, spec, [])
    return path


def commit_files(repo: Path, spec: CommitSpec) -> str:
    """One more commit in the work tree `repo`, on whatever branch is checked out; returns its id."""
    _commit(repo, spec, [])
    return run_git(repo, "rev-parse", "HEAD").strip()


def _commit(tree: Path, spec: CommitSpec, git_dir: list[str]) -> None:
    """Writes and deletes the spec's files under `tree`, stages everything and commits."""
    for name, content in spec.files.items():
        target = tree / name
        if content is None:
            target.unlink()
            continue
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_bytes(content if isinstance(content, bytes) else content.encode())
    run_git(tree, *git_dir, "add", "-A", date=spec.date)
    run_git(tree, *git_dir, "commit", "-q", "--allow-empty", "--allow-empty-message", "--no-verify", "-m", spec.message,
            date=spec.date)
