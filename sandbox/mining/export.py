"""A task's repository: a new git repository holding one commit's history and nothing later, checked out.

Built as `git init` + `git fetch --no-tags REPOSITORY SHA` (protocol v2 serves any object it is asked for, so no ref
of the buyer's is needed): the fetch sends exactly the objects reachable from SHA, so no later commit, tag or
branch can be reached or even found in the object store. No remote is configured, no reflog is kept, FETCH_HEAD and
ORIG_HEAD are removed; the buyer's repository is only read (its upload-pack side runs under the same safe global
configuration, and a repository's own config cannot name a pack-objects hook). The checkout happens in the new
repository, whose config is leafcost's own, so filters a `.gitattributes` names are undefined there and inert."""

from __future__ import annotations

from pathlib import Path

from sandbox.mining.git_history import GitCommand, open_repository, resolve_commit, safe_git

BRANCH = "main"
# The new repository's own settings for every call: no reflog of any update.
NO_REFLOG = ("-c", "core.logAllRefUpdates=false")


def export_at(repository: Path, sha: str, destination: Path) -> None:
    """A new repository at `destination` (absent or an empty directory) with `sha` checked out on branch BRANCH and
    its history up to `sha` only. Raises FileExistsError for a non-empty destination, MiningError when
    `repository` is not a repository or lacks `sha`, GitFailed when git fails."""
    source = open_repository(repository)
    target = Path(destination)
    if target.exists() and (not target.is_dir() or any(target.iterdir())):
        raise FileExistsError(f"{target}: export needs an absent or empty directory")
    target.mkdir(parents=True, exist_ok=True)
    with safe_git() as git:
        commit = resolve_commit(git, source, sha, label="commit")
        _init(git, target)
        _fetch(git, source, commit, target)
        git.run(target, "update-ref", f"refs/heads/{BRANCH}", commit, config=NO_REFLOG)
        git.run(target, "symbolic-ref", "HEAD", f"refs/heads/{BRANCH}", config=NO_REFLOG)
        git.run(target, "reset", "-q", "--hard", commit, config=NO_REFLOG)
    for leftover in ("FETCH_HEAD", "ORIG_HEAD"):  # both name only `commit`, but a task's .git keeps nothing extra
        (target / ".git" / leftover).unlink(missing_ok=True)


def _init(git: GitCommand, target: Path) -> None:
    """An empty repository without template hooks or description."""
    git.run(target, "init", "-q", "--template=", f"--initial-branch={BRANCH}", ".")
    git.run(target, "config", "core.logAllRefUpdates", "false")


def _fetch(git: GitCommand, source: Path, commit: str, target: Path) -> None:
    """The objects reachable from `commit`, fetched by id."""
    git.run(target, "fetch", "-q", "--no-tags", "--no-write-fetch-head", "--no-recurse-submodules",
            "--no-auto-gc", "--no-auto-maintenance", str(source), commit, config=NO_REFLOG)
