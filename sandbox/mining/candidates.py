"""Candidate tasks from a repository's history: commits that change code and tests, split into SWE-bench's `patch`
(non-test files) and `test_patch` (test files), and every other commit with the rule it failed.

The split is SWE-bench's (`swebench.collect.utils.extract_patches`: non-test files in `patch`, test files in
`test_patch`), but a file is a test file when it lies under a test directory (tests/, testing/, e2e/, __tests__/,
spec/) or is named as a test (test_*.py, *_test.py, tests.py, conftest.py, *.test.js, *.spec.ts, *_test.go, ...),
not whenever its path contains "test" as there: that rule hides library code (src/flask/testing.py) and CI files
(.github/workflows/tests.yaml) in the test patch, where the agent never sees them. Paths come from a diff
without rename detection, so a renamed file's old and new paths are judged (and listed) each on its own. The rules,
in the order a commit meets them (the first one failed is its drop reason):

- merge: more than one parent (first-parent diffs of merged branches are not taken; the branch's own commits are
  walked and judged one by one);
- no_parent: the root commit, or a shallow clone's boundary whose parent was not fetched;
- too_many_files: 0 or more than MAX_FILES changed paths (without rename detection: a rename is two paths);
- binary_only: a binary change (numstat `-`), whether alone or beside text changes, since SWE-bench applies patches
  as text and a binary hunk cannot be written as one;
- no_tests: no test file changed (a deleted test file counts as changed); tests_only: nothing but test files;
- thin_message: fewer than MIN_WORDS words once trailers are removed, or a subject THIN_SUBJECTS matches;
- harness_error: git cannot read the commit's changes (an object missing from a damaged repository)."""

from __future__ import annotations

import re
from datetime import UTC, date, datetime, time, timedelta
from pathlib import Path, PurePosixPath

from pydantic import BaseModel

from sandbox.mining.errors import Dropped, MiningError
from sandbox.mining.git_history import (CommitInfo, GitCommand, GitFailed, changed_files, diff_text, has_object,
                                        list_commits, open_repository, safe_git)

MAX_FILES = 15
MIN_WORDS = 3
# A test file: under a directory of these names, or named like a test in the languages mined. SWE-bench's own
# collection takes any path containing "test" or "e2e", which puts library code (flask's src/flask/testing.py, click's
# testing.py) and CI files (.github/workflows/tests.yaml) into the test patch, so the agent never sees that code.
TEST_DIRECTORIES = frozenset({"test", "tests", "testing", "e2e", "__tests__", "spec", "specs"})
TEST_NAME = re.compile(r"(test_.*|.*_test|tests?|conftest)\.py|.*\.(test|spec)\.[cm]?[jt]sx?|.*_test\.go|.*_spec\.rb")
# Subjects that say nothing about a problem, matched at the start of the subject, case-insensitive.
THIN_SUBJECTS = re.compile(r"^(wip\b|fix(ed|es)? (a |some )?typos?\b|bump (the )?version\b|merge branch\b"
                           r"|update readme\b)", re.IGNORECASE)
# A trailer line ("Signed-off-by: A <a@b>", "Change-Id: I12"): a token without spaces, a colon, a value.
TRAILER = re.compile(r"^[A-Za-z][A-Za-z0-9-]*: \S")


class Candidate(BaseModel):
    """A commit that may become a task."""

    sha: str                    # the commit (40 hex)
    parent: str                 # its first parent (40 hex): the task's base_commit
    committed_at: datetime      # committer date, tz-aware UTC: the row's created_at
    subject: str                # first line of the message
    message: str                # the whole message, trailers included (instruction.py strips them)
    solution_files: list[str]   # changed non-test files (paths at the commit; a deleted file: its old path)
    test_files: list[str]       # changed test files, the same way
    patch: str                  # `git diff parent sha -- solution_files`, text, as SWE-bench's `patch`
    test_patch: str             # the same for test_files: SWE-bench's `test_patch`


class Scan(BaseModel):
    """What one scan of a repository found."""

    repository: str             # resolved path
    head: str                   # the commit scanning started from (HEAD or --rev)
    seen: int                   # commits looked at (after date/path filters)
    candidates: list[Candidate]
    dropped: list[tuple[str, str, str]]  # (sha, reason, detail) for commits that failed a candidate rule


def is_test_file(path: str) -> bool:
    """Whether `path` goes into the test patch: a file under a test directory, or named as a test."""
    *directories, name = PurePosixPath(path).parts
    return bool(TEST_DIRECTORIES.intersection(directories)) or TEST_NAME.fullmatch(name) is not None


def scan(repository: Path, *, since: date | None = None, until: date | None = None, paths: list[str] | None = None,
         limit: int | None = None, rev: str = "HEAD") -> Scan:
    """The candidates among the commits reachable from `rev` (every parent followed, not only the first), newest
    committer date first.

    `since`/`until` are inclusive UTC dates of the committer date; `paths` keeps commits touching one of these
    path prefixes (whole components: "src/pkg" takes src/pkg/a.py, not src/pkgs/a.py); `limit` stops the walk once
    that many candidates were found (dropped commits do not count). `seen` counts commits that passed the date and
    path filters (a commit without a parent is counted and dropped whatever the paths: there is no diff to filter).

    Raises MiningError when `repository` is not a git repository, `rev` names no commit, the date range holds no
    commit (naming the span the repository's commits cover), or a shallow clone yields no candidate because
    parents are missing (then the fix is `git fetch --unshallow`): a scan that found candidates in a shallow clone
    returns them, its boundary commits dropped as no_parent."""
    resolved = open_repository(repository)
    with safe_git() as git:
        head, commits = list_commits(git, resolved, rev)
        in_range = [commit for commit in commits if _in_dates(commit, since, until)]
        if commits and not in_range:
            raise MiningError(_empty_range(since, until, commits))
        prefixes = [_prefix(path) for path in paths or []]
        result = Scan(repository=str(resolved), head=head, seen=0, candidates=[], dropped=[])
        for commit in in_range:
            if limit is not None and len(result.candidates) >= limit:
                break
            _judge(git, resolved, commit, prefixes, result)
        _refuse_shallow_without_candidates(resolved, result, {commit.sha for commit in in_range if commit.boundary})
    return result


def _judge(git: GitCommand, repository: Path, commit: CommitInfo, prefixes: list[str], result: Scan) -> None:
    """Adds `commit` to the result's candidates or dropped list (or neither, when the path filter leaves it out)."""
    try:
        candidate = _candidate(git, repository, commit, prefixes)
    except Dropped as dropped:
        _record_drop(result, commit.sha, dropped)
        return
    except GitFailed as failed:  # an object missing from a damaged repository or an incomplete mirror
        _record_drop(result, commit.sha, Dropped("harness_error", f"git cannot read this commit's changes ({failed})"))
        return
    if candidate is not None:
        result.seen += 1
        result.candidates.append(candidate)


def _record_drop(result: Scan, sha: str, dropped: Dropped) -> None:
    result.seen += 1
    result.dropped.append((sha, dropped.reason, str(dropped)))


def _candidate(git: GitCommand, repository: Path, commit: CommitInfo, prefixes: list[str]) -> Candidate | None:
    """The candidate `commit` makes; None when it touches none of `prefixes`; Dropped with the first rule failed."""
    if len(commit.parents) > 1:
        if not _touches(git, repository, commit, prefixes):
            return None
        raise Dropped("merge", f"a merge of {len(commit.parents)} parents; its branch's commits are judged one by one")
    if not commit.parents:
        raise Dropped("no_parent", "the root commit: no parent to be the task's base")
    parent = commit.parents[0]
    if commit.boundary and not has_object(git, repository, parent):
        raise Dropped("no_parent", f"parent {parent[:12]} is not in the repository (a shallow clone)")
    files = changed_files(git, repository, parent, commit.sha)
    if prefixes and not any(_under(path, prefixes) for path, _ in files):
        return None  # outside the paths: neither seen nor dropped
    tests = [path for path, _ in files if is_test_file(path)]
    solution = [path for path, _ in files if not is_test_file(path)]
    _check_files(files, tests, solution)
    _check_message(commit.message)
    return Candidate(sha=commit.sha, parent=parent, committed_at=datetime.fromtimestamp(commit.committer_time, UTC),
                     subject=commit.message.split("\n", 1)[0].strip(), message=commit.message,
                     solution_files=solution, test_files=tests,
                     patch=diff_text(git, repository, parent, commit.sha, solution),
                     test_patch=diff_text(git, repository, parent, commit.sha, tests))


def _touches(git: GitCommand, repository: Path, commit: CommitInfo, prefixes: list[str]) -> bool:
    """Whether the path filter lets a merge in: no filter, a first parent it cannot diff against, or a changed path
    under one of `prefixes`."""
    parent = commit.parents[0]
    if not prefixes or (commit.boundary and not has_object(git, repository, parent)):
        return True
    return any(_under(path, prefixes) for path, _ in changed_files(git, repository, parent, commit.sha))


def _check_files(files: list[tuple[str, bool]], tests: list[str], solution: list[str]) -> None:
    """Dropped for the first file rule the change fails."""
    if not files or len(files) > MAX_FILES:
        raise Dropped("too_many_files", f"{len(files)} files changed; a candidate changes 1 to {MAX_FILES}")
    binary = [path for path, is_binary in files if is_binary]
    if binary:
        whole = "only binary files" if len(binary) == len(files) else f"binary file {binary[0]} beside text changes"
        raise Dropped("binary_only", f"{whole}: SWE-bench applies text patches, which cannot carry binary hunks")
    if not tests:
        raise Dropped("no_tests", f"no test file among the {len(files)} changed (a test path contains 'test')")
    if not solution:
        raise Dropped("tests_only", f"only test files changed ({len(tests)}): no code change to be the solution")


def _check_message(message: str) -> None:
    """Dropped("thin_message") for a message that cannot describe a problem."""
    subject = message.split("\n", 1)[0].strip()
    if THIN_SUBJECTS.match(subject):
        raise Dropped("thin_message", f"subject {subject[:60]!r} says nothing about a problem")
    words = len(_without_trailers(message).split())
    if words < MIN_WORDS:
        raise Dropped("thin_message", f"{words} words in the message once trailers are removed; at least {MIN_WORDS}")


def _without_trailers(message: str) -> str:
    """The message without its last paragraph when every line of that paragraph is a trailer."""
    paragraphs = message.strip().split("\n\n")
    if len(paragraphs) > 1 and all(TRAILER.match(line) for line in paragraphs[-1].splitlines()):
        paragraphs = paragraphs[:-1]
    return "\n\n".join(paragraphs)


def _in_dates(commit: CommitInfo, since: date | None, until: date | None) -> bool:
    """Whether the commit's committer date (UTC) lies within the inclusive dates."""
    when = datetime.fromtimestamp(commit.committer_time, UTC)
    if since is not None and when < datetime.combine(since, time(), UTC):
        return False
    return until is None or when < datetime.combine(until + timedelta(days=1), time(), UTC)


def _empty_range(since: date | None, until: date | None, commits: list[CommitInfo]) -> str:
    """The one line for a date range with no commit."""
    times = [commit.committer_time for commit in commits]
    first, last = (datetime.fromtimestamp(t, UTC).date().isoformat() for t in (min(times), max(times)))
    wanted = f"{since.isoformat() if since else '…'}..{until.isoformat() if until else '…'}"
    return f"--since/--until {wanted}: no commits in that range; the repository's commits span {first}..{last}"


def _refuse_shallow_without_candidates(repository: Path, result: Scan, boundary: set[str]) -> None:
    """MiningError when a shallow clone found nothing because its boundary commits' parents were not fetched."""
    missing = [sha for sha, reason, _ in result.dropped if reason == "no_parent" and sha in boundary]
    if not result.candidates and missing:
        raise MiningError(f"REPO {repository}: a shallow clone, {len(missing)} commit(s) lack their parent and no "
                          "candidate is left; run `git fetch --unshallow` in it and mine again")


def _prefix(path: str) -> str:
    """A --path as a prefix of repository paths: no leading ./ or /, no trailing /."""
    cleaned = path.strip()
    while cleaned.startswith("./"):
        cleaned = cleaned[2:]
    return cleaned.strip("/")


def _under(path: str, prefixes: list[str]) -> bool:
    """Whether `path` is one of `prefixes` or lies below one (an empty prefix takes everything)."""
    return any(not prefix or path == prefix or path.startswith(prefix + "/") for prefix in prefixes)
