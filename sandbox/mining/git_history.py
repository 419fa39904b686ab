"""Git on the buyer's repository that runs nothing the repository configures and writes nothing into it.

The repository is untrusted input: its `.git/config` may name hooks, an external diff, textconv drivers, filters or
an fsmonitor program. Every call here therefore runs in a clean environment (no inherited GIT_* variable, no system
config, HOME and XDG_CONFIG_HOME a temporary directory whose only file is leafcost's own global config), with hooks
and fsmonitor switched off on the command line too, and only read-only plumbing (rev-parse, log, diff-tree,
cat-file): no checkout, no ref, no index, no optional lock. Diffs add `--no-ext-diff --no-textconv`, `log` adds
`--no-show-signature` (no gpg program); filters run only on checkout and `add`, which never happen here."""

from __future__ import annotations

import subprocess
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from sandbox.mining.errors import MiningError

SAFE_PATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
# On every call: no hook and no fsmonitor program; a repository owned by another user is read anyway (safe.directory
# is honoured only from the command line or protected config, so the repository cannot grant it to itself).
SAFE_CONFIG = ("-c", "core.hooksPath=/dev/null", "-c", "core.fsmonitor=false", "-c", "safe.directory=*",
               "-c", "protocol.version=2", "-c", "gc.auto=0", "-c", "maintenance.auto=false")
NO_DRIVERS = ("--no-ext-diff", "--no-textconv")


# The same settings as the global config of every call: a local fetch starts upload-pack in the buyer's repository
# with the command line's `-c` settings cleared, and global config is what it still reads (and trusts).
GLOBAL_CONFIG = """[core]
	hooksPath = /dev/null
	fsmonitor = false
[safe]
	directory = *
[protocol]
	version = 2
[gc]
	auto = 0
[maintenance]
	auto = false
"""


@dataclass(frozen=True)
class GitCommand:
    """Runs git safely; `home` is an empty directory used as HOME and XDG_CONFIG_HOME, holding GLOBAL_CONFIG."""

    home: Path

    def env(self) -> dict[str, str]:
        """The whole environment of a git call: nothing inherited but a fixed PATH."""
        return {"PATH": SAFE_PATH, "LC_ALL": "C", "HOME": str(self.home), "XDG_CONFIG_HOME": str(self.home),
                "GIT_CONFIG_NOSYSTEM": "1", "GIT_CONFIG_GLOBAL": str(self.home / "gitconfig"),
                "GIT_TERMINAL_PROMPT": "0", "GIT_NO_REPLACE_OBJECTS": "1", "GIT_LITERAL_PATHSPECS": "1",
                "GIT_OPTIONAL_LOCKS": "0"}

    def run(self, directory: Path, *args: str, config: tuple[str, ...] = (),
            check: bool = True) -> subprocess.CompletedProcess[str]:
        """`git -C directory SAFE_CONFIG config args` (`config`: more `-c` pairs); a failure raises GitFailed (when
        `check`) with git's stderr."""
        done = subprocess.run(["git", "-C", str(directory), *SAFE_CONFIG, *config, *args], env=self.env(), text=True,
                              capture_output=True, stdin=subprocess.DEVNULL, errors="surrogateescape")
        if check and done.returncode != 0:
            raise GitFailed(args[0] if args else "git", done.stderr.strip())
        return done

    def out(self, directory: Path, *args: str) -> str:
        """The standard output of a successful call."""
        return self.run(directory, *args).stdout


class GitFailed(RuntimeError):
    """A git call failed: str(self) is the subcommand and git's first line of error."""

    def __init__(self, subcommand: str, stderr: str):
        first = stderr.splitlines()[0] if stderr else "no error output"
        super().__init__(f"git {subcommand} failed: {first}")
        self.stderr = stderr


@contextmanager
def safe_git() -> Iterator[GitCommand]:
    """A GitCommand whose HOME is a temporary directory (with GLOBAL_CONFIG) removed afterwards."""
    with tempfile.TemporaryDirectory(prefix="leafcost-git-home-") as home:
        (Path(home) / "gitconfig").write_text(GLOBAL_CONFIG)
        yield GitCommand(Path(home))


def open_repository(path: Path) -> Path:
    """The resolved repository directory of `path` (a work tree or a bare repository, not a subdirectory of one);
    MiningError naming the path when it is not a git repository."""
    resolved = Path(path).expanduser().resolve()
    if not resolved.is_dir():
        raise MiningError(f"REPO {path}: not a directory; pass the path of a git repository (a clone or a bare mirror)")
    with safe_git() as git:
        done = git.run(resolved, "rev-parse", "--is-bare-repository", "--absolute-git-dir", check=False)
        if done.returncode != 0:
            raise MiningError(f"REPO {path}: not a git repository; pass the path of a clone or a bare mirror")
        bare, git_dir = done.stdout.splitlines()[:2]
        if bare == "true":
            top = Path(git_dir).resolve()
        else:
            shown = git.run(resolved, "rev-parse", "--show-toplevel", check=False)
            top = Path(shown.stdout.strip()).resolve() if shown.returncode == 0 else Path(git_dir).resolve()
        if top != resolved:
            raise MiningError(f"REPO {path}: inside the git repository {top}; pass that directory")
        if git.run(resolved, "config", "--get", "extensions.partialClone", check=False).stdout.strip():
            # git would fetch a missing object from the promisor remote: network, and a write into the repository
            raise MiningError(f"REPO {path}: a partial clone (objects left out by --filter); mine a full clone")
    return resolved


@dataclass(frozen=True)
class CommitInfo:
    """One commit as `git log` lists it: `parents` as recorded in the object; `boundary` when it lies at a shallow
    clone's edge, where those parents' objects may be absent."""

    sha: str
    parents: tuple[str, ...]
    committer_time: int
    message: str
    boundary: bool = False


def list_commits(git: GitCommand, repository: Path, rev: str) -> tuple[str, list[CommitInfo]]:
    """The resolved `rev` and every commit reachable from it, newest committer date first."""
    head = resolve_commit(git, repository, rev)
    log = git.out(repository, "log", "-z", "--date-order", "--no-show-signature", "--format=%H%x01%P%x01%ct%x01%B",
                  head, "--")
    shallow = shallow_commits(git, repository)
    commits = []
    for record in filter(None, log.split("\0")):
        sha, parents, when, message = record.split("\x01", 3)
        recorded = tuple(parents.split()) or (_recorded_parents(git, repository, sha) if sha in shallow else ())
        commits.append(CommitInfo(sha, recorded, int(when), message, boundary=sha in shallow))
    return head, commits


def resolve_commit(git: GitCommand, repository: Path, rev: str, label: str = "--rev") -> str:
    """`rev` as a 40-hex commit id; MiningError naming `label` and `rev` when it names no commit."""
    if rev.startswith("-"):
        raise MiningError(f"{label} {rev}: not a revision; pass a branch, tag or commit")
    done = git.run(repository, "rev-parse", "--verify", "--quiet", "--end-of-options", f"{rev}^{{commit}}",
                   check=False)
    if done.returncode != 0:
        raise MiningError(f"{label} {rev}: no such commit in {repository}; pass a branch, tag or commit it has")
    return done.stdout.strip()


def shallow_commits(git: GitCommand, repository: Path) -> frozenset[str]:
    """The commits at a shallow clone's boundary (their parents were not fetched); empty for a full repository."""
    shallow_file = Path(git.out(repository, "rev-parse", "--path-format=absolute", "--git-path", "shallow").strip())
    if not shallow_file.is_file():
        return frozenset()
    return frozenset(shallow_file.read_text().split())


def has_object(git: GitCommand, repository: Path, sha: str) -> bool:
    """Whether the repository holds the object `sha`."""
    return git.run(repository, "cat-file", "-e", f"{sha}^{{commit}}", check=False).returncode == 0


def changed_files(git: GitCommand, repository: Path, parent: str, sha: str) -> list[tuple[str, bool]]:
    """Each path the commit changes against `parent`, with whether git sees it as binary; no rename detection, so
    a rename is its old path deleted and its new path added."""
    out = git.out(repository, "diff-tree", "-r", "-z", "--numstat", "--no-renames", *NO_DRIVERS, parent, sha, "--")
    files = []
    for entry in filter(None, out.split("\0")):
        added, deleted, path = entry.split("\t", 2)
        files.append((path, added == "-" and deleted == "-"))
    return files


def diff_text(git: GitCommand, repository: Path, parent: str, sha: str, paths: list[str]) -> str:
    """`git diff parent sha -- paths` as plumbing (no porcelain config such as diff.noprefix or color applies), full
    index lines, a/ and b/ prefixes: the text `git apply` takes at `parent`. Empty for no paths."""
    if not paths:
        return ""
    return git.out(repository, "diff-tree", "-p", "-r", "--full-index", "--no-renames", "--no-color", *NO_DRIVERS,
                   "--src-prefix=a/", "--dst-prefix=b/", parent, sha, "--", *paths)


def _recorded_parents(git: GitCommand, repository: Path, sha: str) -> tuple[str, ...]:
    """The parent ids written in the commit object itself (a shallow clone's graft hides them from `git log`)."""
    raw = git.out(repository, "cat-file", "commit", sha)
    header = raw.split("\n\n", 1)[0]
    return tuple(line.split()[1] for line in header.splitlines() if line.startswith("parent "))
