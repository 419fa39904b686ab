"""Git that runs nothing the agent wrote: the repository's baseline as the harness records it before the agent starts,
patch capture against that baseline in a git directory of the harness's own, and the repository's program-running
surface (config, hooks, attributes, commondir, a planted `.git` link or file) put back as it was before the verifier.

Git runs programs named by its configuration (clean, smudge and process filters, diff.external, textconv drivers,
hooks in .git/hooks or core.hooksPath, core.fsmonitor, included config files). Capture therefore never opens the
agent's .git as a repository: a fresh git directory made after every agent process is gone, a clean environment (no
system or global config, no inherited GIT_* variables), and the agent's object store read as data only (alternates)
for the baseline commit. Every script here is POSIX sh, run inside the sandbox through the protocol."""

from __future__ import annotations

import shlex

from sandbox.protocol import GitBaseline

SAFE_PATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
INLINE_CONFIG_CHARS = 64 * 1024  # base64 of a config the restore command carries itself; larger ones go in a file
# Run in the repository's working directory by the harness before the agent starts (after leafcost's own baseline
# commit where the image had no repository): prints `name=value` facts for `baseline_from_facts`.
RECORD = r"""leafcost_git() { git -c safe.directory='*' "$@"; }
echo "head=$(leafcost_git rev-parse HEAD)"
echo "git_workdir=$(pwd -P)"
top=$(leafcost_git rev-parse --show-toplevel) && echo "git_top=$(cd "$top" && pwd -P)"
common=$(leafcost_git rev-parse --git-common-dir) && echo "git_dir=$(cd "$common" && pwd -P)"
[ -f "$common/config" ] && echo "git_config=$(base64 < "$common/config" | tr -d '\n')"
[ -f "$top/.git" ] && echo "git_link=$(base64 < "$top/.git" | tr -d '\n')"
true"""

# A git directory of the harness's own at $H for the baseline commit: made by hand, as `git init --bare --template=`
# makes it less its config (each setting it would write is git's default on Linux; core.bare is given): one git
# process fewer; the agent's object store ($C/objects) as an alternate (objects are data, never run).
_FRESH_GIT_DIR = r"""mkdir -p "$H/git/objects/info" "$H/git/refs" || exit 1
echo "ref: refs/heads/leafcost" > "$H/git/HEAD" && echo "$C/objects" > "$H/git/objects/info/alternates" || exit 1
"""

# The patch, Leaf's way (`git add -A && git diff --cached --binary`) but against the recorded baseline commit, in a
# git directory made now ($H), after every agent process is gone. Nothing of the agent's .git/config, hooks or
# info/attributes is read; a `.gitattributes` in the tree names drivers that no configuration defines, so they are
# inert. $1 top directory, $2 the repository's git directory, $3 the baseline. $P, when set: such a git directory
# the host already made where no sandbox process ever was (the local verifier's own /tmp), its index the baseline's
# (`BASELINE_INDEX`, made by the build) where the build could make one: no mktemp, mkdir or read-tree then.
_CAPTURE = r"""T=$1 C=$2 BASE=$3 H=${P:-}
if [ -z "$H" ]; then H=$(mktemp -d /tmp/leafcost-git.XXXXXX) || exit 1; fi
trap 'rm -rf "$H"' EXIT
export HOME="$H" XDG_CONFIG_HOME="$H"
case "$(cd "$H" && pwd -P)/" in "$(cd "$T" && pwd -P)/"*) echo "/tmp lies inside the repository" >&2; exit 1;; esac
[ -d "$H/git" ] || {
""" + _FRESH_GIT_DIR + r"""}
export GIT_DIR="$H/git" GIT_WORK_TREE="$T"
set -- git -c core.hooksPath=/dev/null -c core.fsmonitor=false -c core.bare=false
if [ ! -f "$H/git/index" ]; then
  "$@" read-tree "$BASE" 2>/dev/null || { echo "the baseline commit $BASE is gone from $C/objects" >&2; exit 3; }
fi
"$@" add -A && "$@" diff --cached --binary --no-ext-diff --no-textconv "$BASE" && exit 0
r=$?  # with the build's index no read-tree looked for the baseline: a failure says whether it is gone
"$@" cat-file -e "$BASE^{tree}" 2>/dev/null || { echo "the baseline commit $BASE is gone from $C/objects" >&2; exit 3; }
exit $r
"""

# Run by the local build once the baseline is recorded, where no agent ever was: the baseline commit's index (what
# capture's `read-tree` makes), base64 on stdout, for the episodes' capture to start from. $1 the repository's git
# directory, $2 the baseline.
BASELINE_INDEX = r"""C=$1 BASE=$2
H=$(mktemp -d /tmp/leafcost-index.XXXXXX) || exit 1
trap 'rm -rf "$H"' EXIT
""" + _FRESH_GIT_DIR + r"""export GIT_DIR="$H/git"
git -c core.hooksPath=/dev/null -c core.fsmonitor=false -c core.bare=true read-tree "$BASE" && base64 < "$H/git/index"
"""

# Whether directory $1 still is the path it was recorded as: a directory, no link, resolving to itself.
_SAME = r"""same() { [ -d "$1" ] && [ ! -L "$1" ] && [ "$(cd "$1" && pwd -P)" = "$1" ]; }
"""

# Before the verifier, as root (or the one user everything runs as), once no agent process is left (so nothing
# races it): the repository's git surface back as it was before the agent. Paths were recorded resolved, so a
# directory that no longer resolves to itself has a link planted on the way and is left alone (never followed).
# $1 working directory, $2 top directory, $3 git directory, $4 a file with the config before the agent ("" for
# none), $5 the top's `.git` file before the agent, base64 ("" when the git directory is the top's .git), $6 the
# config before the agent in base64 when no file holds it ("" for none).
_RESTORE = _SAME + r"""W=$1 T=$2 C=$3 CFG=$4 LINK=$5 CFG64=$6
[ -z "$CFG" ] || trap 'rm -f "$CFG"' EXIT
# Removed even where the agent took its own write permission away (the one-user backends are not root): modes are
# touched only when removal failed, and a link is removed itself, never chmod'ed or followed.
writable() { [ -w "$1" ] || chmod u+w "$1"; }
scrub() { rm -rf "$1" 2>/dev/null || { [ -L "$1" ] || chmod -R u+w "$1" 2>/dev/null; rm -rf "$1"; }; }
if same "$T"; then
  writable "$T"
  if [ -n "$LINK" ]; then
    scrub "$T/.git" && printf %s "$LINK" | base64 -d > "$T/.git" || exit 1
  elif [ "$C" = "$T/.git" ] && { [ -L "$T/.git" ] || { [ -e "$T/.git" ] && [ ! -d "$T/.git" ]; }; }; then
    rm -f "$T/.git" || exit 1
  fi
  case "$W/" in "$T/"?*) if same "$W"; then
    d=$W
    while [ "$d" != "$T" ] && [ "$d" != / ]; do writable "$d"; scrub "$d/.git" || exit 1; d=$(dirname "$d"); done
  fi;; esac
fi
same "$C" || exit 0
# What is made here belongs to the git directory's owner already when that is who runs this (the usual case): no
# stat and chown then.
if [ -O "$C" ] && [ -G "$C" ]; then owner=; else owner=$(stat -c %u:%g "$C") || exit 1; fi
writable "$C" || exit 1
# One rm for the usual case; one by one, with modes restored, where that failed.
rm -rf "$C/config" "$C/hooks" "$C/commondir" "$C/config.worktree" 2>/dev/null ||
  for name in config hooks commondir config.worktree; do scrub "$C/$name" || exit 1; done
if [ -n "$CFG" ]; then cat "$CFG" > "$C/config" || exit 1
elif [ -n "$CFG64" ]; then printf %s "$CFG64" | base64 -d > "$C/config" || exit 1; fi
mkdir "$C/hooks" || exit 1
if [ -L "$C/info" ] || [ ! -d "$C/info" ]; then scrub "$C/info"
else writable "$C/info" && scrub "$C/info/attributes"; fi || exit 1
if [ -z "$owner" ]; then :
elif [ -z "$CFG$CFG64" ]; then chown "$owner" "$C/hooks"; else chown "$owner" "$C/hooks" "$C/config"; fi 2>/dev/null
exit 0
"""

# Leaf stages everything before test.sh; here in the restored repository, named explicitly (no discovery of a
# repository the agent planted elsewhere) and only where it still resolves to itself.
_STAGE = _SAME + r"""T=$1 C=$2
same "$T" && same "$C" || exit 0
GIT_DIR=$C GIT_WORK_TREE=$T git -c core.hooksPath=/dev/null -c core.fsmonitor=false -c safe.directory='*' add -A
"""


def baseline_from_facts(facts: dict[str, str], *, restore_as: str | None) -> GitBaseline | None:
    """The baseline from RECORD's output, None where there was no repository (or no git)."""
    commit, top, git_dir = facts.get("head", ""), facts.get("git_top", ""), facts.get("git_dir", "")
    if not commit or not top or not git_dir:
        return None
    return GitBaseline(commit=commit, workdir=facts.get("git_workdir") or top, top=top, git_dir=git_dir,
                       config_b64=facts.get("git_config") or None, link_b64=facts.get("git_link") or None,
                       restore_as=restore_as)


def capture_command(baseline: GitBaseline) -> str:
    """The patch capture (stdout: the patch), in a clean environment: exit 3 when the baseline commit is gone."""
    return _clean(_CAPTURE, baseline.top, baseline.git_dir, baseline.commit)


def restore_command(baseline: GitBaseline, config_path: str | None = None) -> str:
    """The restore, run as `baseline.restore_as`: the pre-agent config read from `config_path` (written there by the
    harness; removed after), or without one carried in the command itself (`config_inline` says when it fits)."""
    inline = "" if config_path else baseline.config_b64 or ""
    return _clean(_RESTORE, baseline.workdir, baseline.top, baseline.git_dir,
                  config_path if config_path and baseline.config_b64 else "", baseline.link_b64 or "", inline)


def config_inline(baseline: GitBaseline) -> bool:
    """Whether the restore command can carry the config itself: one argument of a command line holds 128 KiB."""
    return len(baseline.config_b64 or "") <= INLINE_CONFIG_CHARS


def stage_command(baseline: GitBaseline) -> str:
    """Leaf's `git add -A` before test.sh, in the restored repository (as the verifier's user, its environment)."""
    return f"set -- {shlex.join([baseline.top, baseline.git_dir])}\n{_STAGE}"


def baseline_index_command(git_dir: str, commit: str) -> str:
    """`BASELINE_INDEX` for a repository, in a clean environment."""
    return _clean(BASELINE_INDEX, git_dir, commit)


def prepare_command(baseline: GitBaseline, marker: str, then: str | None = None, capture_dir: str | None = None
                    ) -> str:
    """Capture, restore and stage in one command, for a backend whose capture sandbox is already the verifier's and
    where one user runs everything: stdout is the patch alone; stderr carries capture's errors, then
    `<marker> capture=<exit>`, restore's output, `<marker> restore=<exit>` (`prepared_parts` reads it back).
    Capture and restore run as `capture_command` and `restore_command` do, each in a subshell of one clean `sh`; the
    stage runs only after a restore that worked, in the verifier's environment as `stage_command` does, and its
    output is dropped, as the harness drops it. `then` (test.sh's command, ending with an `exec` of it): after the
    stage, the line `<marker>` on stderr and on stdout, then `then`, so that test.sh is the command's last process
    and its exit status the command's (the local CommandSandbox's `exec_then` splits the two). `capture_dir`:
    capture's git directory, made by the host (`_CAPTURE`'s $P)."""
    script = (f"M=$1 P=$2\nshift 2\n(\n{_CAPTURE})\nprintf '\\n%s capture=%s\\n' \"$M\" $? >&2\n"
              f"shift 3\n(\n{_RESTORE}) >&2\nr=$?\nprintf '%s restore=%s\\n' \"$M\" $r >&2\nexit $r\n")
    stage = f"{{ set -- {shlex.join([baseline.top, baseline.git_dir])}\n{_STAGE}}} >/dev/null 2>&1"
    clean = _clean(script, marker, capture_dir or "", baseline.top, baseline.git_dir, baseline.commit,
                   baseline.workdir, baseline.top,
                   baseline.git_dir, "", baseline.link_b64 or "", baseline.config_b64 or "")
    ending = "exit 0" if then is None else (f"printf '\\n%s\\n' {shlex.quote(marker)} >&2\n"
                                            f"printf '\\n%s\\n' {shlex.quote(marker)}\n{then}")
    return f"{clean.removeprefix('exec ')}\n[ $? = 0 ] || exit 0\n{stage}\n{ending}"


def prepared_parts(stderr: str, marker: str) -> tuple[str, int | None, str, int | None]:
    """`prepare_command`'s stderr split back: (capture's errors, its exit code, restore's output, its exit code);
    an exit code is None where that part never finished (the command was killed or timed out)."""
    capture_errors, found, rest = stderr.partition(f"\n{marker} capture=")
    if not found:
        return stderr, None, "", None
    capture_code, _, rest = rest.partition("\n")
    restore_output, found, restore_code = rest.partition(f"{marker} restore=")
    if not found or not capture_code.isdigit() or not restore_code.strip().isdigit():
        return capture_errors, int(capture_code) if capture_code.isdigit() else None, restore_output, None
    return capture_errors, int(capture_code), restore_output, int(restore_code.strip())


def _clean(script: str, *args: str) -> str:
    """`script` with `args` as $1.., under `env -i`: no inherited variable (GIT_*, HOME, XDG_CONFIG_HOME) and no
    system or global git config reaches it."""
    return (f"exec env -i PATH={SAFE_PATH} LC_ALL=C HOME=/nonexistent GIT_CONFIG_NOSYSTEM=1 "
            f"GIT_CONFIG_GLOBAL=/dev/null sh -c {shlex.quote(script)} leafcost-git {shlex.join(args)}")
