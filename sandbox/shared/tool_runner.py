"""The process that runs inside every sandbox: it executes Leaf's five tools and the harness's shell commands.

Standard library only, a single file, for whatever python3 the sandbox image has (3.6 or newer; it imports
nothing from leafcost). Started as `python3 -u tool_runner.py --workdir /app [--request-fd R --answer-fd A]`,
it serves newline-delimited JSON requests on stdin (or fd R), one at a time and in order, and answers each
with exactly one JSON line on its ORIGINAL stdout (or fd A). Its own fd 0 is then /dev/null and fds 1 and 2
both point at stderr, so a stray print can never corrupt the protocol, and it makes itself non-dumpable, so
the commands it runs cannot open its fds through /proc.

    start                                            -> {"ready": true, "pid", "python", "runner_version"}
    {"id", "op": "tool", "name", "arguments"}        -> {"id", "output"}
    {"id", "op": "exec", "command", "timeout", "cwd"?, "env"?, "login"?}
        -> {"id", "exit_code" (null on timeout), "stdout", "stderr", "timed_out", "seconds", "truncated_bytes"}
    {"id", "op": "ping"}                             -> {"id", "ok": true}
    {"id", "op": "shutdown"}                         -> {"id", "ok": true}, then exit 0 (so does EOF on stdin)
    a malformed or overlong request, or a command that cannot start -> {"id" (or null), "error"}

Every answer line is at most ANSWER_CAP_BYTES once encoded (text is trimmed to fit, and the cut is counted);
a request line longer than REQUEST_CAP_BYTES is skipped and answered with an error.

Tool observations reproduce Leaf's (the published FrogNano harness) exactly, quirks included, because the
model performs as published only on what it was trained with; where Leaf would hang or exhaust memory (FIFOs,
huge files and outputs, symlink loops under Glob, orphaned processes), this one stops and says so.
"""

import codecs
import errno
import fcntl
import fnmatch
import heapq
import json
import os
import re
import selectors
import signal
import stat
import subprocess
import sys
import time

# Every sandbox start pays for the runner's imports: typing is for type checkers only (annotations are strings).
TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any, Dict, Iterable, Iterator, List, Optional, Tuple


def _import_pathlib() -> "Any":
    """pathlib's Path. pathlib imports urllib.parse (and ipaddress with it), 1.7 ms of every sandbox start, for
    Path.as_uri alone, which the runner never calls: while pathlib is imported, urllib.parse is a stand-in that
    imports the real module when called, and it is gone from sys.modules before anything else could import it."""
    if "urllib.parse" in sys.modules:
        from pathlib import Path
        return Path
    stand_in = type(sys)("urllib.parse")

    def quote_from_bytes(*args: "Any", **kwargs: "Any") -> str:
        import importlib

        return importlib.import_module("urllib.parse").quote_from_bytes(*args, **kwargs)

    stand_in.quote_from_bytes = quote_from_bytes  # type: ignore[attr-defined]
    sys.modules["urllib.parse"] = stand_in
    try:
        from pathlib import Path
    finally:
        if sys.modules.get("urllib.parse") is stand_in:
            del sys.modules["urllib.parse"]
    return Path


Path = _import_pathlib()

RUNNER_VERSION = "3"
READ_OUTPUT_CHARS = 20000
BASH_OUTPUT_CHARS = 30000
BASH_DEFAULT_TIMEOUT = 120.0
GLOB_LIMIT = 1000
GLOB_SECONDS = 10.0  # a Glob stops after this much wall time and says so
GLOB_MAX_ENTRIES = 2000000  # ... or after listing this many directory entries
EDIT_CAP_BYTES = 32 * 1024 * 1024  # Edit holds the whole file in memory, as Leaf does; larger files are refused
STREAM_CAP_BYTES = 8 * 1024 * 1024
ANSWER_CAP_BYTES = 32 * 1024 * 1024  # one answer line, JSON-encoded, newline included
REQUEST_CAP_BYTES = 64 * 1024 * 1024  # one request line, newline excluded

_READ_CHUNK_BYTES = 256 * 1024
_READ_SCAN_BYTES = 64 * 1024 * 1024  # read this much past the cut at most; the rest is estimated from the size
_PIPE_READ_BYTES = 64 * 1024
_DRAIN_SECONDS = 1.0
_KILL_SECONDS = 5.0
_LINE_BREAKS = frozenset("\n\r\x0b\x0c\x1c\x1d\x1e\x85\u2028\u2029")  # what str.splitlines splits on
_GLOB_CLOCK_EVERY = 4096  # entries between two looks at the clock inside one huge directory
_ANSWER_OVERHEAD = 4096  # bytes of an answer that are not its trimmable text (keys, numbers, the note)
_FIT_CHUNK = 64 * 1024
_MAX_ESCAPED_BYTES = 6  # the most one character costs in an answer line ("\u0001", or "\udcff" for a surrogate)
_PR_SET_DUMPABLE = 4

_protocol_fds = ()  # type: Tuple[int, ...]  # request and answer channels, closed in a child before it is dumpable
_prctl_function = None  # type: Any
_oom_score = None  # type: Optional[Tuple[int, bytes]]  # /proc/self/oom_score_adj kept open, the runner's value


# ---------------------------------------------------------------------------------------------- tools


def run_tool(name: str, arguments: "Any", workdir: Path) -> str:
    """One tool call as Leaf runs it: the observation text, never an exception."""
    tool = TOOLS.get(name)
    if tool is None:
        return "Unknown tool: {}".format(name)
    try:
        output = tool(parse_arguments(arguments), workdir)
    except Exception as exc:
        output = "{}: {}".format(type(exc).__name__, exc)
    return _without_surrogates(output)  # undecodable file names must not reach the host as lone surrogates


def _without_surrogates(text: str) -> str:
    """`text` with U+FFFD for each lone surrogate; strict UTF-8 refuses exactly those, so most texts skip the
    regular expression (and the runner's start skips compiling it)."""
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return re.sub("[\ud800-\udfff]", "\ufffd", text)
    return text


def parse_arguments(raw: "Any") -> "Dict[str, Any]":
    """Leaf's rule: arguments that are not a JSON object are `{}`, so the tool answers "... is required"."""
    if isinstance(raw, str):
        try:
            raw = json.loads(raw)
        except (ValueError, RecursionError):
            return {}
    return raw if isinstance(raw, dict) else {}


def tool_read(args: "Dict[str, Any]", workdir: Path) -> str:
    path = _file_path(args, workdir)
    with _open_unblocked(path, "rb") as handle:
        # Leaf reads the file before it looks at offset and limit, so a missing file wins over a bad offset.
        first = max(1, _leaf_int(args.get("offset"), 1))
        limit = _leaf_int(args.get("limit"), 0)
        head = _Head(READ_OUTPUT_CHARS)
        head.add(_display(path, workdir) + "\n")
        _NumberedLines(head, first, first - 1 + limit if limit > 0 else None).feed(handle)
    return head.text()


def tool_write(args: "Dict[str, Any]", workdir: Path) -> str:
    path = _file_path(args, workdir)
    content = str(args.get("content", ""))  # Leaf's rule: absent is "", null is "None", an object its repr
    path.parent.mkdir(parents=True, exist_ok=True)
    data = content.encode("utf-8")  # before opening: a lone surrogate must not leave the file emptied
    with _open_unblocked(path, "wb") as handle:
        handle.write(data)
    return "Wrote {} ({} bytes).".format(_display(path, workdir), len(content))  # Leaf counts characters


def tool_edit(args: "Dict[str, Any]", workdir: Path) -> str:
    path = _file_path(args, workdir)
    old, new = str(args.get("old_string") or ""), str(args.get("new_string") or "")  # absent new: delete
    if not old:
        raise ValueError("old_string must be non-empty")
    text = _read_for_edit(path)
    count, replace_all = text.count(old), _truthy(args.get("replace_all"))
    if count == 0:
        raise ValueError("old_string was not found")
    if count != 1 and not replace_all:
        raise ValueError(
            "old_string matched {} times; set replace_all=true or use a more specific old_string".format(count)
        )
    changed = count if replace_all else 1
    data = text.replace(old, new, -1 if replace_all else 1).encode("utf-8")
    with _open_unblocked(path, "wb") as handle:
        handle.write(data)
    return "Edited {} ({} replacement{}).".format(_display(path, workdir), changed, "" if changed == 1 else "s")


def tool_glob(args: "Dict[str, Any]", workdir: Path) -> str:
    pattern = _required_text(args, "pattern")
    root = _resolve(args.get("path") or ".", workdir)  # not escaped: Leaf reads magic in `path` too
    search = BoundedGlob(GLOB_SECONDS, GLOB_MAX_ENTRIES)
    found = _Counted(search.files(str(root / pattern), workdir))
    shown = heapq.nsmallest(GLOB_LIMIT, found)  # Leaf sorts every match; only the first GLOB_LIMIT are kept
    more = found.count - len(shown)
    text = "\n".join(shown) + ("\n... {} more files".format(more) if more > 0 else "")
    return (text or "No files matched.") + ("\n" + search.stopped if search.stopped else "")


def tool_bash(args: "Dict[str, Any]", workdir: Path) -> str:
    command = _required_text(args, "command")
    timeout = _leaf_timeout(args)
    result = run_command(["/bin/bash", "-lc", command], timeout, str(workdir))
    if result.timed_out:  # Leaf shows the raw partial bytes, decoded with replacement, newlines untouched
        status = "Timed out after {:.1f}s".format(timeout)
        out, err = result.stdout.decode("utf-8", "replace"), result.stderr.decode("utf-8", "replace")
    else:  # Leaf's text-mode subprocess: strict UTF-8, stdout first, then universal newlines
        status = "Exit code: {}".format(result.exit_code)
        out = _strict_text(result.stdout, complete=not result.stdout_dropped)
        err = _strict_text(result.stderr, complete=not result.stderr_dropped)
    text = "{}\nSTDOUT:\n{}\nSTDERR:\n{}".format(status, out, err)
    return truncate(text, BASH_OUTPUT_CHARS, uncounted=result.truncated_bytes)


TOOLS = {
    "Read": tool_read,
    "Write": tool_write,
    "Edit": tool_edit,
    "Glob": tool_glob,
    "Bash": tool_bash,
}  # name -> function(arguments, workdir) -> observation


def truncate(text: str, limit: int, uncounted: int = 0) -> str:
    """Leaf's cut: the first `limit` characters, then `[truncated K chars]` (K includes `uncounted`)."""
    head = _Head(limit)
    head.add(text)
    head.count(uncounted)
    return head.text()


def bash_timeout(args: "Dict[str, Any]") -> float:
    """A Bash call's timeout in seconds by Leaf's rule (for the host); ValueError when it is not a number."""
    try:
        return _leaf_timeout(args)
    except (TypeError, OverflowError) as exc:
        raise ValueError(str(exc)) from None


class _Head:
    """Leaf's truncation rule fed in pieces: keep the first `limit` characters and count the rest."""

    def __init__(self, limit: int) -> None:
        self.limit = limit
        self.pieces = []  # type: list
        self.kept = 0
        self.total = 0

    @property
    def full(self) -> bool:
        return self.kept >= self.limit

    def add(self, text: str) -> None:
        self.total += len(text)
        room = self.limit - self.kept
        if room > 0 and text:
            piece = text[:room]
            self.pieces.append(piece)
            self.kept += len(piece)

    def count(self, chars: int) -> None:
        self.total += chars

    def text(self) -> str:
        body = "".join(self.pieces)
        if self.kept == self.total:
            return body
        return "{}\n[truncated {} chars]".format(body, self.total - self.kept)


class _NumberedLines:
    """Streams a file into a _Head as Leaf's `N. text` lines joined by newlines (str.splitlines semantics),
    holding one chunk at a time: lines before `first` are only counted, and once the head is full the rest
    is counted in bulk, so a huge file costs time proportional to its size but no more memory."""

    def __init__(self, head: _Head, first: int, last: "Optional[int]") -> None:
        self.head, self.first, self.last = head, first, last
        self.number = 1  # the line the next piece of text belongs to
        self.open = False  # its "N. " prefix is already out
        self.started = False  # a line is out, so the next one needs a "\n" before it

    def feed(self, handle: "Any") -> None:
        regular = stat.S_ISREG(os.fstat(handle.fileno()).st_mode)
        decoder = codecs.getincrementaldecoder("utf-8")("replace")
        carry, scanned = "", 0
        while True:
            raw = handle.read(_READ_CHUNK_BYTES)
            text = carry + decoder.decode(raw, final=not raw)
            carry = ""
            if raw and text.endswith("\r"):  # may be the first half of a "\r\n"
                text, carry = text[:-1], "\r"
            if (text and not self._take(text)) or not raw:
                return
            if self.head.full or not regular:  # /dev/zero and friends never end
                scanned += len(raw)
                if scanned > _READ_SCAN_BYTES:
                    if regular:
                        self.head.count(max(0, os.fstat(handle.fileno()).st_size - handle.tell()))
                    return

    def _take(self, text: str) -> bool:
        lines = text.splitlines()
        complete = len(lines) - (0 if text[-1] in _LINE_BREAKS else 1)
        index = self._skip(complete, len(lines))
        while index < len(lines):
            if self.last is not None and self.number > self.last:
                return False
            if self.head.full and index < complete:
                index = self._count(lines, index, complete)
                continue
            self._emit(lines[index], ended=index < complete)
            index += 1
        return self.last is None or self.number <= self.last

    def _skip(self, complete: int, available: int) -> int:
        skipped = min(max(0, self.first - self.number), complete)
        self.number += skipped
        return skipped if self.number >= self.first else available

    def _emit(self, piece: str, ended: bool) -> None:
        if not self.open:
            self.head.add("{}{}. ".format("\n" if self.started else "", self.number))
            self.open = self.started = True
        self.head.add(piece)
        if ended:
            self.number += 1
            self.open = False

    def _count(self, lines: list, index: int, complete: int) -> int:
        end = complete if self.last is None else min(complete, index + self.last - self.number + 1)
        count = end - index
        fresh = count - (1 if self.open else 0)  # lines whose "\nN. " is not out yet
        chars = sum(map(len, lines[index:end]))
        if fresh > 0:
            top = self.number + count - 1
            chars += _digits_between(top - fresh + 1, top) + 3 * fresh - (0 if self.started else 1)
            self.started = True
        self.head.count(chars)
        self.number += count
        self.open = False
        return end


def _digits_between(low: int, high: int) -> int:
    """Total number of decimal digits of all the integers low..high."""
    total, digits = 0, len(str(low))
    while low <= high:
        top = min(high, 10 ** digits - 1)
        total += (top - low + 1) * digits
        low, digits = top + 1, digits + 1
    return total


def _file_path(args: "Dict[str, Any]", workdir: Path) -> Path:
    value = args.get("file_path") or args.get("path")  # Leaf accepts `path` too
    if not value:
        raise ValueError("file_path is required")
    return _resolve(value, workdir)


def _resolve(value: "Any", workdir: Path) -> Path:
    path = Path(str(value)).expanduser()
    return path if path.is_absolute() else workdir / path


def _display(path: Path, workdir: Path) -> str:
    """Leaf's path display: relative to the working directory when inside it, else as given."""
    try:
        return path.resolve().relative_to(workdir).as_posix()
    except (ValueError, OSError, RuntimeError):
        return str(path)


def _open_unblocked(path: Path, mode: str, **kwargs: "Any") -> "Any":
    """open() with Leaf's errors, except that a FIFO is refused instead of blocking the runner forever: the
    open itself never waits (O_NONBLOCK), so a FIFO planted after any check cannot hang it either."""
    try:
        handle = open(str(path), mode, opener=_nonblocking_open, **kwargs)
    except OSError as exc:
        if exc.errno == errno.ENXIO and _is_fifo(path):  # opened for writing, nobody reading
            raise _fifo_refusal(path) from None
        raise
    try:
        fd = handle.fileno()
        if stat.S_ISFIFO(os.fstat(fd).st_mode):
            raise _fifo_refusal(path)
        fcntl.fcntl(fd, fcntl.F_SETFL, fcntl.fcntl(fd, fcntl.F_GETFL) & ~os.O_NONBLOCK)
    except BaseException:
        handle.close()
        raise
    return handle


def _nonblocking_open(name: str, flags: int) -> int:
    return os.open(name, flags | os.O_NONBLOCK, 0o666)  # open()'s own mode: 0o666 less the umask


def _is_fifo(path: Path) -> bool:
    try:
        return stat.S_ISFIFO(os.stat(str(path)).st_mode)
    except (OSError, ValueError):
        return False


def _fifo_refusal(path: Path) -> OSError:
    return OSError("{} is a FIFO; opening it could block forever (use Bash)".format(path))


def _read_for_edit(path: Path) -> str:
    """The file as Leaf's Edit reads it: UTF-8 with U+FFFD for bad bytes, universal newlines (so CRLF
    becomes LF when it is written back), but never more than EDIT_CAP_BYTES in memory."""
    with _open_unblocked(path, "r", encoding="utf-8", errors="replace") as handle:
        info = os.fstat(handle.fileno())
        too_big = stat.S_ISREG(info.st_mode) and info.st_size > EDIT_CAP_BYTES
        text = "" if too_big else handle.read(EDIT_CAP_BYTES + 1)  # a device has no size: read one past the cap
    if too_big or len(text) > EDIT_CAP_BYTES:
        raise ValueError("{} is larger than {} MiB; Edit refuses it (use Bash)".format(path, EDIT_CAP_BYTES >> 20))
    return text


def _required_text(args: "Dict[str, Any]", key: str) -> str:
    value = args.get(key)
    if not value:
        raise ValueError("{} is required".format(key))
    return str(value)


def _leaf_int(value: "Any", default: int) -> int:
    """Leaf's optional integers: absent or "" is the default, anything else goes through int() and its errors."""
    if value in (None, ""):
        return default
    return int(value)


def _truthy(value: "Any") -> bool:
    if isinstance(value, bool):
        return value
    return str(value or "").strip().lower() in ("1", "true", "yes", "on")


def _leaf_timeout(args: "Dict[str, Any]") -> float:
    """Seconds: `timeout_ms` wins, `timeout` above 1000 is milliseconds, at least 0.1; float() errors as Leaf's."""
    if args.get("timeout_ms") is not None:
        return max(0.1, float(args["timeout_ms"]) / 1000.0)
    raw = args.get("timeout")
    if raw is None:
        return BASH_DEFAULT_TIMEOUT
    value = float(raw)
    return max(0.1, value / 1000.0 if value > 1000 else value)


def _strict_text(data: bytes, complete: bool) -> str:
    """A finished command's stream as Leaf's text-mode subprocess shows it: strict UTF-8 (a bad byte raises
    Leaf's UnicodeDecodeError observation), then universal newlines. A stream cut at STREAM_CAP_BYTES may
    end inside a character; that cut is ours, not an error."""
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        if complete or exc.reason != "unexpected end of data":
            raise
        text = data[: exc.start].decode("utf-8")
    return text.replace("\r\n", "\n").replace("\r", "\n")


class _Counted:
    """An iterator that counts what it yields."""

    def __init__(self, items: "Iterable[str]") -> None:
        self.items = iter(items)
        self.count = 0

    def __iter__(self) -> "_Counted":
        return self

    def __next__(self) -> str:
        item = next(self.items)
        self.count += 1
        return item


# ---------------------------------------------------------------------------------------------- Glob


class BoundedGlob:
    """Python's `glob.iglob(pattern, recursive=True)` as Leaf uses it, same matches and same duplicates (`*`,
    `?`, `[..]`, `**` as zero or more directories, names starting with "." only when the pattern component
    does, literal components taken as they are, `..` included), with three bounds: `**` never enters a
    symlinked directory whose real path leaves the directory `**` started from or is one of its own ancestors
    (a loop), neither to walk it nor to match a later component in it; the search stops after `seconds` of
    wall time, and after `max_entries` listed directory entries. `stopped` then holds the line that says so."""

    def __init__(self, seconds: float, max_entries: int) -> None:
        self.seconds = seconds
        self.deadline = time.monotonic() + seconds
        self.max_entries = max_entries
        self.entries = 0
        self.stopped = ""

    def files(self, pattern: str, workdir: Path) -> "Iterator[str]":
        """Leaf's Glob listing: every match that is a file (links followed), shown as Leaf shows paths."""
        for match in self.iglob(pattern):
            if self.over():
                return
            path = Path(match)
            if path.is_file():
                yield _display(path, workdir)

    def over(self) -> bool:
        if not self.stopped:
            if time.monotonic() > self.deadline:
                self.stopped = "... search stopped after {:g}s; results may be incomplete".format(self.seconds)
            elif self.entries > self.max_entries:
                self.stopped = "... search stopped after {} entries; results may be incomplete".format(
                    self.max_entries
                )
        return bool(self.stopped)

    def iglob(self, pathname: str, dironly: bool = False) -> "Iterator[str]":
        dirname, basename = os.path.split(pathname)
        if not _has_magic(pathname):
            if (_lexists(pathname) if basename else os.path.isdir(dirname)):
                yield pathname
            return
        if dirname != pathname and _has_magic(dirname):
            parents = self.iglob(dirname, True)  # type: Iterable[str]
        else:
            parents = [dirname]
        if not _has_magic(basename):
            in_dir = self._literal
        elif basename == "**":
            in_dir = self._recursive
        else:
            in_dir = self._matching
        for parent in parents:
            for name in in_dir(parent, basename, dironly):
                yield os.path.join(parent, name)

    def _literal(self, dirname: str, basename: str, dironly: bool) -> "Iterator[str]":
        if basename:
            if _lexists(os.path.join(dirname, basename)):
                yield basename
        elif os.path.isdir(dirname):  # a pattern ending in "/" matches directories only
            yield basename

    def _matching(self, dirname: str, pattern: str, dironly: bool) -> "Iterator[str]":
        names = [entry.name for entry in self._scan(dirname, dironly)]
        if not _hidden(pattern):
            names = [name for name in names if not _hidden(name)]
        for name in fnmatch.filter(names, pattern):
            yield name

    def _recursive(self, dirname: str, pattern: str, dironly: bool) -> "Iterator[str]":
        """`**`: the directory itself (""), then every non-hidden name below it, depth first."""
        yield ""
        top = dirname or os.curdir
        top_id = _directory_id(top)
        if top_id is None:
            return
        top_real = os.path.realpath(top)
        stack = [("", top, _Ancestry(top_id, None))]
        while stack:
            relative, path, ancestry = stack.pop()
            for entry in self._scan(path, dironly):
                if _hidden(entry.name):
                    continue
                below = self._descend(entry, os.path.join(path, entry.name), top_real, ancestry)
                if below is None and dironly:  # a link not walked is not looked into by a later component either
                    continue
                name = os.path.join(relative, entry.name) if relative else entry.name
                yield name
                if below is not None:
                    stack.append((name, os.path.join(path, entry.name), below))

    def _descend(self, entry: "Any", path: str, top_real: str, ancestry: "_Ancestry") -> "Optional[_Ancestry]":
        """The ancestry to walk `path` with, or None when it is not a directory, or is a directory symlink
        that leaves the top or loops back to one of its ancestors."""
        try:
            if not entry.is_dir():
                return None
            is_link = entry.is_symlink()
        except OSError:
            return None
        identity = _directory_id(path)
        if identity is None:
            return None
        if is_link and (ancestry.contains(identity) or not _within(os.path.realpath(path), top_real)):
            return None
        return _Ancestry(identity, ancestry)

    def _scan(self, dirname: str, dironly: bool) -> "List[Any]":
        """The entries of a directory (only directories when `dironly`), [] when it cannot be listed."""
        entries = []  # type: List[Any]
        if self.over():
            return entries
        try:
            with os.scandir(dirname or os.curdir) as iterator:
                for entry in iterator:
                    self.entries += 1
                    if self.entries % _GLOB_CLOCK_EVERY == 0 and self.over():
                        break
                    try:
                        if not dironly or entry.is_dir():
                            entries.append(entry)
                    except OSError:
                        pass
        except OSError:
            pass
        self.over()
        return entries


class _Ancestry:
    """The (st_dev, st_ino) of each directory on the way down from a `**` walk's top."""

    def __init__(self, identity: "Tuple[int, int]", parent: "Optional[_Ancestry]") -> None:
        self.identity = identity
        self.parent = parent

    def contains(self, identity: "Tuple[int, int]") -> bool:
        node = self  # type: Optional[_Ancestry]
        while node is not None:
            if node.identity == identity:
                return True
            node = node.parent
        return False


def _directory_id(path: str) -> "Optional[Tuple[int, int]]":
    try:
        info = os.stat(path)
    except (OSError, ValueError):
        return None
    return (info.st_dev, info.st_ino) if stat.S_ISDIR(info.st_mode) else None


def _within(path: str, top: str) -> bool:
    return path == top or path.startswith(top.rstrip("/") + "/")


def _lexists(path: str) -> bool:
    try:
        os.lstat(path)
    except (OSError, ValueError):
        return False
    return True


def _has_magic(text: str) -> bool:
    """glob's `has_magic`, without a regular expression compiled at start-up."""
    return "*" in text or "?" in text or "[" in text


def _hidden(name: str) -> bool:
    return name[:1] == "."


# ------------------------------------------------------------------------------------------- commands


class CommandResult:
    """A finished command: exit code (None when it timed out), output capped per stream, wall seconds."""

    def __init__(
        self, exit_code: "Optional[int]", stdout: bytes, stderr: bytes, timed_out: bool, seconds: float,
        stdout_dropped: int = 0, stderr_dropped: int = 0,
    ) -> None:
        self.exit_code = exit_code
        self.stdout = stdout
        self.stderr = stderr
        self.timed_out = timed_out
        self.seconds = seconds
        self.stdout_dropped = stdout_dropped
        self.stderr_dropped = stderr_dropped

    @property
    def truncated_bytes(self) -> int:
        return self.stdout_dropped + self.stderr_dropped


def run_command(argv: list, timeout: float, cwd: str, env: "Optional[Dict[str, str]]" = None) -> CommandResult:
    """Run in a new session with no stdin, read both pipes until EOF or the deadline, kill the whole process
    group on timeout, and never wait more than ~1 s for a pipe that a surviving grandchild holds open."""
    started = time.monotonic()
    proc = _spawn(argv, cwd, env)
    pipes = _Pipes(proc)
    finished = False
    try:
        finished = _pump(proc, pipes, started + timeout)
        if not finished:
            _kill_group(proc)
        pipes.drain(time.monotonic() + _DRAIN_SECONDS)
    finally:
        if not finished and proc.poll() is None:
            _kill_group(proc)
        pipes.close()
    out, err = pipes.captures
    return CommandResult(
        exit_code=proc.returncode if finished else None,
        stdout=bytes(out.data),
        stderr=bytes(err.data),
        timed_out=not finished,
        seconds=time.monotonic() - started,
        stdout_dropped=out.dropped,
        stderr_dropped=err.dropped,
    )


def _spawn(argv: list, cwd: str, env: "Optional[Dict[str, str]]") -> subprocess.Popen:
    """The command in a new session, no stdin, both outputs piped, oom_score_adj 1000. Without a preexec
    function Popen uses vfork and exec (about 1.5 ms less CPU per command than a fork of this interpreter): the
    runner raises its own oom_score_adj for the instant of the spawn, the child inherits it, the runner goes back
    to its own value (allowed without privilege: never below the floor it started with). While raised, the
    runner ties with the commands and the OOM killer picks the larger, never this small process. The child is
    never dumpable before exec (it shares the runner's memory map until then) and inherits only fds 0-2."""
    options = dict(stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE, cwd=cwd, env=env,
                   start_new_session=True)
    if _oom_score is None:  # no /proc/self/oom_score_adj kept open: the child sets its own, after a full fork
        _prctl()  # resolved here, not in the child between fork and exec
        return subprocess.Popen(argv, preexec_fn=_child_setup, **options)
    fd, own = _oom_score
    os.write(fd, b"1000")
    try:
        return subprocess.Popen(argv, **options)
    finally:
        os.write(fd, own)


def _keep_oom_score() -> "Optional[Tuple[int, bytes]]":
    """/proc/self/oom_score_adj open for writing, and the runner's own value; taken while the runner is still
    dumpable (afterwards its /proc files belong to root). None where /proc does not offer it."""
    try:
        fd = os.open("/proc/self/oom_score_adj", os.O_RDWR | os.O_CLOEXEC)
    except OSError:
        return None
    try:
        own = os.read(fd, 32).strip() or b"0"
        os.write(fd, own)  # writable here, not just openable
    except OSError:
        os.close(fd)
        return None
    return fd, own


def _child_setup() -> None:
    """In a command's process, between fork and exec. The runner is non-dumpable (its /proc files belong to
    root); a command need not be, but dumpable again it could expose the protocol fds: close them first. Every
    command is the OOM killer's first choice (oom_score_adj 1000; raising needs no privilege), so when the
    sandbox runs out of memory a command dies, never the runner."""
    try:
        for fd in _protocol_fds:
            os.close(fd)
        _set_dumpable(True)
        fd = os.open("/proc/self/oom_score_adj", os.O_WRONLY)
        try:
            os.write(fd, b"1000")
        finally:
            os.close(fd)
    except BaseException:  # best effort: an exception here would fail the command with a useless message
        pass


def _prctl() -> "Any":
    """libc's prctl through ctypes, or None where ctypes or prctl is missing (then protection is off)."""
    global _prctl_function
    if _prctl_function is None:
        try:
            import ctypes

            _prctl_function = ctypes.CDLL(None, use_errno=True).prctl
        except (ImportError, OSError, AttributeError):
            _prctl_function = False
    return _prctl_function or None


def _set_dumpable(dumpable: bool) -> bool:
    prctl = _prctl()
    return prctl is not None and prctl(_PR_SET_DUMPABLE, int(dumpable), 0, 0, 0) == 0


class _Capture:
    """The first STREAM_CAP_BYTES of a stream; the rest only counted."""

    def __init__(self) -> None:
        self.data = bytearray()
        self.dropped = 0

    def take(self, chunk: bytes) -> None:
        room = max(0, STREAM_CAP_BYTES - len(self.data))
        self.data += chunk[:room]
        self.dropped += max(0, len(chunk) - room)


class _Pipes:
    """stdout and stderr of one process, read concurrently."""

    def __init__(self, proc: subprocess.Popen) -> None:
        self.selector = selectors.DefaultSelector()
        self.captures = (_Capture(), _Capture())
        self.selector.register(proc.stdout, selectors.EVENT_READ, self.captures[0])
        self.selector.register(proc.stderr, selectors.EVENT_READ, self.captures[1])

    @property
    def open(self) -> bool:
        return bool(self.selector.get_map())

    def read(self, wait: float) -> None:
        for key, _ in self.selector.select(wait):
            chunk = os.read(key.fd, _PIPE_READ_BYTES)
            if chunk:
                key.data.take(chunk)
            else:
                self.selector.unregister(key.fileobj)
                key.fileobj.close()

    def drain(self, until: float) -> None:
        while self.open and time.monotonic() < until:
            self.read(max(0.0, until - time.monotonic()))

    def close(self) -> None:
        for key in list(self.selector.get_map().values()):
            self.selector.unregister(key.fileobj)
            key.fileobj.close()
        self.selector.close()


def _pump(proc: subprocess.Popen, pipes: _Pipes, deadline: float) -> bool:
    """Read until both pipes close and the process exits (True), or the deadline passes (False). Once the
    process itself has exited, stop: whatever a background child still writes is left to the drain."""
    while pipes.open:
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            return False
        if proc.poll() is not None:
            return True
        pipes.read(min(remaining, 0.1))
    try:
        proc.wait(timeout=max(0.0, deadline - time.monotonic()))
        return True
    except subprocess.TimeoutExpired:
        return False


def _kill_group(proc: subprocess.Popen) -> None:
    """SIGKILL the process group again and again (a fork bomb keeps forking) until no member is left."""
    give_up = time.monotonic() + _KILL_SECONDS
    while time.monotonic() < give_up:
        try:
            os.killpg(proc.pid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            return
        if proc.poll() is not None:
            _reap_group(proc.pid)
            if not _group_alive(proc.pid):  # zombies nobody reaps keep killpg succeeding forever
                return
        time.sleep(0.005)


def _reap_group(pgid: int) -> None:
    """Reap members that became our children (when this runner is PID 1 of the container)."""
    while True:
        try:
            pid, _ = os.waitpid(-pgid, os.WNOHANG)
        except ChildProcessError:
            return
        if pid == 0:
            return


def _group_alive(pgid: int) -> bool:
    """Whether any process of the group is still running (not a zombie); True when /proc cannot tell."""
    try:
        names = os.listdir("/proc")
    except OSError:
        return True
    for name in names:
        if not name.isdigit():
            continue
        try:
            with open("/proc/{}/stat".format(name), "rb") as handle:
                line = handle.read()
        except OSError:
            continue
        fields = line[line.rfind(b")") + 2 :].split()  # state, ppid, pgrp, ...
        if len(fields) > 2 and int(fields[2]) == pgid and fields[0] != b"Z":
            return True
    return False


# ------------------------------------------------------------------------------------------- protocol


class _BadRequest(Exception):
    pass


def handle_request(line: bytes, workdir: Path) -> "Tuple[Dict[str, Any], bool]":
    """The answer to one request line, and whether the runner should stop after sending it. The answer's
    text is trimmed so that its encoded line fits ANSWER_CAP_BYTES."""
    request_id = None
    try:
        request = _decode_request(line)
        room = ANSWER_CAP_BYTES - _ANSWER_OVERHEAD - _encoded_size(request["id"])
        if room < ANSWER_CAP_BYTES // 2:
            raise _BadRequest("field 'id' is too large to echo back ({} bytes)".format(_encoded_size(request["id"])))
        request_id = request["id"]
        op = _field(request, "op", str, "a string")
        handler = _OPS.get(op)
        if handler is None:
            raise _BadRequest("unknown op {}; expected one of: {}".format(_short(op), ", ".join(sorted(_OPS))))
        answer = {"id": request_id}
        answer.update(handler(request, workdir, room))
        return answer, op == "shutdown"
    except _BadRequest as exc:
        return {"id": request_id, "error": str(exc)}, False
    except Exception as exc:  # e.g. an exec whose cwd does not exist; the runner keeps serving
        return {"id": request_id, "error": _short("{}: {}".format(type(exc).__name__, exc), 2000)}, False


def _decode_request(line: bytes) -> "Dict[str, Any]":
    try:
        request = json.loads(line.decode("utf-8"))
    except (ValueError, RecursionError) as exc:
        raise _BadRequest("request is not valid JSON: {}".format(_short(str(exc), 500))) from None
    if not isinstance(request, dict):
        raise _BadRequest("request must be a JSON object, got {}".format(type(request).__name__))
    if "id" not in request:
        raise _BadRequest("missing field 'id'")
    return request


def _field(request: "Dict[str, Any]", name: str, kinds: "Any", expected: str, required: bool = True) -> "Any":
    value = request.get(name)
    if value is None:
        if required:
            raise _BadRequest("missing field {!r} ({})".format(name, expected))
        return None
    if not isinstance(value, kinds) or (isinstance(value, bool) and kinds is not bool):
        raise _BadRequest("field {!r} must be {}, got {}".format(name, expected, _short(json.dumps(value))))
    return value


def _short(text: str, limit: int = 200) -> str:
    return text if len(text) <= limit else text[:limit] + "..."


def _op_tool(request: "Dict[str, Any]", workdir: Path, room: int) -> "Dict[str, Any]":
    name = _field(request, "name", str, "a string")
    return {"output": _fit_text(run_tool(name, request.get("arguments"), workdir), room)}


def _op_exec(request: "Dict[str, Any]", workdir: Path, room: int) -> "Dict[str, Any]":
    command = _field(request, "command", str, "a string")
    timeout = _field(request, "timeout", (int, float), "a number of seconds")
    if not timeout > 0:
        raise _BadRequest("field 'timeout' must be positive, got {}".format(timeout))
    cwd = _field(request, "cwd", str, "a string or null", required=False) or str(workdir)
    extra = _field(request, "env", dict, "an object of strings or null", required=False) or {}
    if not all(isinstance(k, str) and isinstance(v, str) for k, v in extra.items()):
        raise _BadRequest("field 'env' must map strings to strings")
    login = _field(request, "login", bool, "a boolean", required=False)
    env = dict(os.environ)
    env.update(extra)
    result = run_command(["/bin/bash", "-lc" if login else "-c", command], timeout, cwd, env)
    stdout, stderr, cut = _fit_streams(result.stdout, result.stderr, room)
    return {
        "exit_code": result.exit_code,
        "stdout": stdout,
        "stderr": stderr,
        "timed_out": result.timed_out,
        "seconds": round(result.seconds, 3),
        "truncated_bytes": result.truncated_bytes + cut,
    }


def _op_ok(request: "Dict[str, Any]", workdir: Path, room: int) -> "Dict[str, Any]":
    return {"ok": True}


_OPS = {"tool": _op_tool, "exec": _op_exec, "ping": _op_ok, "shutdown": _op_ok}


def _fit_text(text: str, room: int) -> str:
    """`text` when its encoding fits `room` bytes, else its longest head that does plus Leaf's cut note."""
    if _fitting_chars(text, room)[0] == len(text):
        return text
    kept = _fitting_chars(text, room - 100)[0]
    return "{}\n[truncated {} chars]".format(text[:kept], len(text) - kept)


def _fit_streams(stdout: bytes, stderr: bytes, room: int) -> "Tuple[str, str, int]":
    """Both streams decoded (U+FFFD for bad bytes), each cut to a byte-aligned head so that the two fit
    `room` encoded bytes together (a stream that needs less than half leaves the rest to the other), and the
    number of bytes cut."""
    if _MAX_ESCAPED_BYTES * (len(stdout) + len(stderr)) <= room:
        return stdout.decode("utf-8", "replace"), stderr.decode("utf-8", "replace"), 0
    # Decoded with surrogateescape, a character maps back to its own bytes; a bad byte is costed as a
    # six-byte "\udcxx", more than the U+FFFD it becomes, so the head chosen always fits.
    texts = [data.decode("utf-8", "surrogateescape") for data in (stdout, stderr)]
    (out_kept, out_cost), (err_kept, err_cost) = [_fitting_chars(text, room) for text in texts]
    out_whole, err_whole = out_kept == len(texts[0]), err_kept == len(texts[1])
    if not (out_whole and err_whole and out_cost + err_cost <= room):
        half = room // 2
        if out_whole and out_cost <= half:
            rooms = (out_cost, room - out_cost)
        elif err_whole and err_cost <= half:
            rooms = (room - err_cost, err_cost)
        else:
            rooms = (half, room - half)
        out_kept, err_kept = [_fitting_chars(text, part)[0] for text, part in zip(texts, rooms)]
    heads = [text[:kept].encode("utf-8", "surrogateescape") for text, kept in zip(texts, (out_kept, err_kept))]
    cut = len(stdout) + len(stderr) - len(heads[0]) - len(heads[1])
    return heads[0].decode("utf-8", "replace"), heads[1].decode("utf-8", "replace"), cut


def _fitting_chars(text: str, room: int) -> "Tuple[int, int]":
    """How many leading characters of `text` fit in `room` bytes once in an answer line, and their cost.
    JSON escapes each character on its own, so costs add up piece by piece; memory stays one piece."""
    if _MAX_ESCAPED_BYTES * len(text) <= room:
        return len(text), _text_cost(text)
    used = 0
    for start in range(0, len(text), _FIT_CHUNK):
        piece = text[start : start + _FIT_CHUNK]
        cost = _text_cost(piece)
        if used + cost > room:
            low, high = 0, len(piece)
            while low < high:  # the longest head of this piece that still fits
                middle = (low + high + 1) // 2
                if used + _text_cost(piece[:middle]) <= room:
                    low = middle
                else:
                    high = middle - 1
            return start + low, used + _text_cost(piece[:low])
        used += cost
    return len(text), used


def _text_cost(text: str) -> int:
    return len(json.dumps(text, ensure_ascii=False).encode("utf-8", "backslashreplace")) - 2


def _encoded_size(value: "Any") -> int:
    return len(json.dumps(value, ensure_ascii=False).encode("utf-8", "backslashreplace"))


def _send(stream: "Any", message: "Dict[str, Any]") -> None:
    """Write one answer line, never longer than ANSWER_CAP_BYTES: an answer that would be (only an error
    echoing a huge value can be, once the ops have trimmed their text) becomes an error answer."""
    line = _encode_line(message)
    if line is None or len(line) > ANSWER_CAP_BYTES:
        size = "an unencodable" if line is None else "a {}-byte".format(len(line))
        error = "the runner's answer was {} line, over the {}-byte cap".format(size, ANSWER_CAP_BYTES)
        line = _encode_line({"id": message.get("id"), "error": error})
        if line is None or len(line) > ANSWER_CAP_BYTES:
            line = _encode_line({"id": None, "error": error})
    stream.write(line)
    stream.flush()


def _encode_line(message: "Dict[str, Any]") -> "Optional[bytes]":
    try:
        # Lone surrogates can only sit inside JSON strings, where "\udcxx" is a valid escape.
        return json.dumps(message, ensure_ascii=False).encode("utf-8", "backslashreplace") + b"\n"
    except (ValueError, TypeError, RecursionError):
        return None


def _request_lines(stream: "Any") -> "Iterator[Optional[bytes]]":
    """Request lines until EOF; None stands for a line over REQUEST_CAP_BYTES, which is skipped unread."""
    while True:
        line = stream.readline(REQUEST_CAP_BYTES + 1)
        if not line:
            return
        if len(line) > REQUEST_CAP_BYTES and not line.endswith(b"\n"):
            while line and not line.endswith(b"\n"):
                line = stream.readline(_READ_CHUNK_BYTES)
            yield None
        else:
            yield line


def main(argv: "Optional[list]" = None) -> int:
    global _protocol_fds, _oom_score
    _oom_score = _keep_oom_score()
    # Non-dumpable first (but for the line above): /proc/<runner>/fd/* (the protocol pipes) and /proc/<runner>/mem
    # then belong to root, so the commands it runs, same uid, can neither forge answers nor read or inject requests.
    _set_dumpable(False)
    options = _options(sys.argv[1:] if argv is None else argv)
    requests, protocol = _take_protocol(options["request_fd"], options["answer_fd"])
    _protocol_fds = (requests.fileno(), protocol.fileno())
    try:
        os.chdir(options["workdir"])
    except OSError as exc:
        _send(protocol, {"ready": False, "error": "cannot enter --workdir: {}: {}".format(type(exc).__name__, exc)})
        return 2
    workdir = Path(os.getcwd())
    ready = {"ready": True, "pid": os.getpid(), "python": sys.version.split()[0], "runner_version": RUNNER_VERSION}
    _send(protocol, ready)
    for line in _request_lines(requests):
        if line is None:
            _send(protocol, {"id": None, "error": "request line longer than {} bytes".format(REQUEST_CAP_BYTES)})
            continue
        if not line.strip():
            continue
        answer, stop = handle_request(line, workdir)
        _send(protocol, answer)
        if stop:
            break
    return 0


def _options(argv: list) -> "Dict[str, Any]":
    """The command line as the host writes it (`--name value` pairs), read without argparse, whose import is a good
    part of the runner's start-up; anything else goes to argparse for its usage message and exit code 2."""
    options = {"workdir": None, "request_fd": 0, "answer_fd": 1}  # type: Dict[str, Any]
    names = {"--workdir": "workdir", "--request-fd": "request_fd", "--answer-fd": "answer_fd"}
    pairs = dict(zip(argv[::2], argv[1::2]))
    if len(argv) % 2 == 0 and len(pairs) == len(argv) // 2 and set(pairs) <= set(names) and "--workdir" in pairs:
        try:
            for flag, value in pairs.items():
                options[names[flag]] = value if flag == "--workdir" else int(value)
            return options
        except ValueError:
            pass
    import argparse

    parser = argparse.ArgumentParser(description="Serve Leaf's tools over newline-delimited JSON.")
    parser.add_argument("--workdir", required=True, help="repository working directory inside the sandbox")
    parser.add_argument("--request-fd", type=int, default=0, help="fd to read requests from (default: stdin)")
    parser.add_argument("--answer-fd", type=int, default=1, help="fd to write answers to (default: stdout)")
    return vars(parser.parse_args(argv))


def _take_protocol(request_fd: int, answer_fd: int) -> "Tuple[Any, Any]":
    """Private, non-inheritable copies of the protocol fds; fd 0 becomes /dev/null and fd 1 a copy of stderr,
    so nothing this process or its children print or read can touch the protocol. A host can pass the pipes
    as fds 3 and up: a sandbox's PID-1 reaper (bubblewrap's) keeps only fds 0-2, and it is not non-dumpable."""
    requests = os.fdopen(os.dup(request_fd), "rb")
    answers = os.fdopen(os.dup(answer_fd), "wb", buffering=0)
    for fd in {request_fd, answer_fd} - {0, 1, 2}:
        os.close(fd)
    devnull = os.open(os.devnull, os.O_RDONLY)
    os.dup2(devnull, 0)
    os.close(devnull)
    os.dup2(2, 1)
    return requests, answers


if __name__ == "__main__":
    sys.exit(main())
