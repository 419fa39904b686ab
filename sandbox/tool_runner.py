"""The process that runs inside every sandbox: it executes Leaf's five tools and the harness's shell commands.

Standard library only, a single file, for whatever python3 the sandbox image has (3.6 or newer; it imports
nothing from leafcost). Started as `python3 -u tool_runner.py --workdir /app`, it serves newline-delimited
JSON requests on stdin, one at a time and in order, and answers each with exactly one JSON line on its
ORIGINAL stdout. Its own fds 1 and 2 both point at stderr, so a stray print can never corrupt the protocol.

    start                                            -> {"ready": true, "pid", "python", "runner_version"}
    {"id", "op": "tool", "name", "arguments"}        -> {"id", "output"}
    {"id", "op": "exec", "command", "timeout", "cwd"?, "env"?, "login"?}
        -> {"id", "exit_code" (null on timeout), "stdout", "stderr", "timed_out", "seconds", "truncated_bytes"}
    {"id", "op": "ping"}                             -> {"id", "ok": true}
    {"id", "op": "shutdown"}                         -> {"id", "ok": true}, then exit 0 (so does EOF on stdin)
    a malformed request, or a command that cannot start -> {"id" (or null), "error"}

Tool observations reproduce Leaf's formats (the published FrogNano harness), because the model performs as
published only on what it was trained with; where Leaf could hang, blow memory or destroy data, this does better.
"""

import argparse
import codecs
import glob
import json
import os
import re
import selectors
import signal
import stat
import subprocess
import sys
import time
from pathlib import Path
from typing import Any, Dict, Optional, Tuple

RUNNER_VERSION = "1"
READ_OUTPUT_CHARS = 20000
BASH_OUTPUT_CHARS = 30000
BASH_DEFAULT_TIMEOUT = 120.0
GLOB_LIMIT = 1000
STREAM_CAP_BYTES = 8 * 1024 * 1024

_READ_CHUNK_BYTES = 256 * 1024
_READ_SCAN_BYTES = 64 * 1024 * 1024  # read this much past the cut at most; the rest is estimated from the size
_PIPE_READ_BYTES = 64 * 1024
_DRAIN_SECONDS = 1.0
_KILL_SECONDS = 5.0
_LINE_BREAKS = frozenset("\n\r\x0b\x0c\x1c\x1d\x1e\x85\u2028\u2029")  # what str.splitlines splits on
_SURROGATES = re.compile("[\ud800-\udfff]")


# ---------------------------------------------------------------------------------------------- tools


def run_tool(name: str, arguments: Any, workdir: Path) -> str:
    """One tool call as Leaf runs it: the observation text, never an exception."""
    tool = TOOLS.get(name)
    if tool is None:
        return "Unknown tool: {}".format(name)
    try:
        output = tool(parse_arguments(arguments), workdir)
    except Exception as exc:
        output = "{}: {}".format(type(exc).__name__, exc)
    return _SURROGATES.sub("\ufffd", output)  # undecodable file names must not reach the host as lone surrogates


def parse_arguments(raw: Any) -> Dict[str, Any]:
    """Leaf's rule: arguments that are not a JSON object are `{}`, so the tool answers "... is required"."""
    if isinstance(raw, str):
        try:
            raw = json.loads(raw)
        except (ValueError, RecursionError):
            return {}
    return raw if isinstance(raw, dict) else {}


def tool_read(args: Dict[str, Any], workdir: Path) -> str:
    path = _file_path(args, workdir)
    first = max(1, _int_arg(args, "offset", 1))
    limit = _int_arg(args, "limit", 0)
    head = _Head(READ_OUTPUT_CHARS)
    head.add(_display(path, workdir) + "\n")
    with open(str(path), "rb") as handle:
        _NumberedLines(head, first, first - 1 + limit if limit > 0 else None).feed(handle)
    return head.text()


def tool_write(args: Dict[str, Any], workdir: Path) -> str:
    path = _file_path(args, workdir)
    content = args.get("content")
    if content is None:
        raise ValueError("content is required")
    if not isinstance(content, str):  # a JSON file sent as an object: write JSON, not a Python repr
        content = json.dumps(content, indent=2, ensure_ascii=False)
    data = content.encode("utf-8")
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(data)
    return "Wrote {} ({} bytes).".format(_display(path, workdir), len(data))


def tool_edit(args: Dict[str, Any], workdir: Path) -> str:
    path = _file_path(args, workdir)
    old, new = _required_value(args, "old_string"), _required_value(args, "new_string")
    if not old:
        raise ValueError("old_string must be non-empty")
    text = path.read_bytes().decode("utf-8", "surrogateescape")  # bytes that are not UTF-8 survive the edit
    count, replace_all = text.count(old), _truthy(args.get("replace_all"))
    if count == 0:
        raise ValueError("old_string was not found")
    if count > 1 and not replace_all:
        raise ValueError(
            "old_string matched {} times; set replace_all=true or use a more specific old_string".format(count)
        )
    changed = count if replace_all else 1
    path.write_bytes(text.replace(old, new, changed).encode("utf-8", "surrogateescape"))
    return "Edited {} ({} replacement{}).".format(_display(path, workdir), changed, "" if changed == 1 else "s")


def tool_glob(args: Dict[str, Any], workdir: Path) -> str:
    pattern = _required_text(args, "pattern")
    root = _resolve(args.get("path") or ".", workdir)
    found = glob.iglob(os.path.join(glob.escape(str(root)), pattern), recursive=True)
    matches = sorted(_display(Path(m), workdir) for m in found if os.path.isfile(m) and not _in_git(m, root))
    if not matches:
        return "No files matched."
    more = len(matches) - GLOB_LIMIT
    return "\n".join(matches[:GLOB_LIMIT]) + ("\n... {} more files".format(more) if more > 0 else "")


def tool_bash(args: Dict[str, Any], workdir: Path) -> str:
    command = _required_text(args, "command")
    timeout = bash_timeout(args)
    result = run_command(["/bin/bash", "-lc", command], timeout, str(workdir))
    status = "Timed out after {:.1f}s".format(timeout) if result.timed_out else "Exit code: {}".format(result.exit_code)
    text = "{}\nSTDOUT:\n{}\nSTDERR:\n{}".format(status, _shell_text(result.stdout), _shell_text(result.stderr))
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

    def __init__(self, head: _Head, first: int, last: Optional[int]) -> None:
        self.head, self.first, self.last = head, first, last
        self.number = 1  # the line the next piece of text belongs to
        self.open = False  # its "N. " prefix is already out
        self.started = False  # a line is out, so the next one needs a "\n" before it

    def feed(self, handle: Any) -> None:
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


def _file_path(args: Dict[str, Any], workdir: Path) -> Path:
    value = args.get("file_path") or args.get("path")  # Leaf accepts `path` too
    if not value:
        raise ValueError("file_path is required")
    path = _resolve(value, workdir)
    if path.is_fifo():
        raise OSError("{} is a FIFO; opening it could block forever (use Bash)".format(path))
    return path


def _resolve(value: Any, workdir: Path) -> Path:
    path = Path(str(value)).expanduser()
    return path if path.is_absolute() else workdir / path


def _display(path: Path, workdir: Path) -> str:
    """Leaf's path display: relative to the working directory when inside it, else as given."""
    try:
        return path.resolve().relative_to(workdir).as_posix()
    except (ValueError, OSError, RuntimeError):
        return str(path)


def _in_git(match: str, root: Path) -> bool:
    return ".git" in os.path.relpath(match, str(root)).split(os.sep)


def _required_text(args: Dict[str, Any], key: str) -> str:
    value = args.get(key)
    if not value:
        raise ValueError("{} is required".format(key))
    return str(value)


def _required_value(args: Dict[str, Any], key: str) -> str:
    value = args.get(key)
    if value is None:
        raise ValueError("{} is required".format(key))
    return str(value)


def _int_arg(args: Dict[str, Any], key: str, default: int) -> int:
    value = args.get(key)
    if value is None or value == "":
        return default
    try:
        return int(value)
    except (TypeError, ValueError):
        raise ValueError("{} must be an integer, got {!r}".format(key, value)) from None


def _truthy(value: Any) -> bool:
    if isinstance(value, bool):
        return value
    return str(value or "").strip().lower() in ("1", "true", "yes", "on")


def bash_timeout(args: Dict[str, Any]) -> float:
    """Seconds; Leaf reads a `timeout` above 1000 as milliseconds and also accepts `timeout_ms`."""
    try:
        if args.get("timeout_ms") is not None:
            return max(0.1, float(args["timeout_ms"]) / 1000.0)
        raw = args.get("timeout")
        value = BASH_DEFAULT_TIMEOUT if raw is None else float(raw)
    except (TypeError, ValueError):
        raise ValueError("timeout must be a number of seconds, got {!r}".format(args.get("timeout"))) from None
    return max(0.1, value / 1000.0 if value > 1000 else value)


def _shell_text(data: bytes) -> str:
    """What Leaf's text-mode subprocess showed: UTF-8 (with replacement here) and universal newlines."""
    return data.decode("utf-8", "replace").replace("\r\n", "\n").replace("\r", "\n")


# ------------------------------------------------------------------------------------------- commands


class CommandResult:
    """A finished command: exit code (None when it timed out), output capped per stream, wall seconds."""

    def __init__(
        self, exit_code: Optional[int], stdout: bytes, stderr: bytes, timed_out: bool, seconds: float,
        truncated_bytes: int,
    ) -> None:
        self.exit_code = exit_code
        self.stdout = stdout
        self.stderr = stderr
        self.timed_out = timed_out
        self.seconds = seconds
        self.truncated_bytes = truncated_bytes


def run_command(argv: list, timeout: float, cwd: str, env: Optional[Dict[str, str]] = None) -> CommandResult:
    """Run in a new session with no stdin, read both pipes until EOF or the deadline, kill the whole process
    group on timeout, and never wait more than ~1 s for a pipe that a surviving grandchild holds open."""
    started = time.monotonic()
    proc = subprocess.Popen(
        argv,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        cwd=cwd,
        env=env,
        start_new_session=True,
    )
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
        truncated_bytes=out.dropped + err.dropped,
    )


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


def handle_request(line: bytes, workdir: Path) -> Tuple[Dict[str, Any], bool]:
    """The answer to one request line, and whether the runner should stop after sending it."""
    request_id = None
    try:
        request = _decode_request(line)
        request_id = request["id"]
        op = _field(request, "op", str, "a string")
        handler = _OPS.get(op)
        if handler is None:
            raise _BadRequest("unknown op {!r}; expected one of: {}".format(op, ", ".join(sorted(_OPS))))
        answer = {"id": request_id}
        answer.update(handler(request, workdir))
        return answer, op == "shutdown"
    except _BadRequest as exc:
        return {"id": request_id, "error": str(exc)}, False
    except Exception as exc:  # e.g. an exec whose cwd does not exist; the runner keeps serving
        return {"id": request_id, "error": "{}: {}".format(type(exc).__name__, exc)}, False


def _decode_request(line: bytes) -> Dict[str, Any]:
    try:
        request = json.loads(line.decode("utf-8"))
    except (ValueError, RecursionError) as exc:
        raise _BadRequest("request is not valid JSON: {}".format(exc)) from None
    if not isinstance(request, dict):
        raise _BadRequest("request must be a JSON object, got {}".format(type(request).__name__))
    if "id" not in request:
        raise _BadRequest("missing field 'id'")
    return request


def _field(request: Dict[str, Any], name: str, kinds: Any, expected: str, required: bool = True) -> Any:
    value = request.get(name)
    if value is None:
        if required:
            raise _BadRequest("missing field {!r} ({})".format(name, expected))
        return None
    if not isinstance(value, kinds) or (isinstance(value, bool) and kinds is not bool):
        raise _BadRequest("field {!r} must be {}, got {}".format(name, expected, json.dumps(value)[:200]))
    return value


def _op_tool(request: Dict[str, Any], workdir: Path) -> Dict[str, Any]:
    name = _field(request, "name", str, "a string")
    return {"output": run_tool(name, request.get("arguments"), workdir)}


def _op_exec(request: Dict[str, Any], workdir: Path) -> Dict[str, Any]:
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
    return {
        "exit_code": result.exit_code,
        "stdout": result.stdout.decode("utf-8", "replace"),
        "stderr": result.stderr.decode("utf-8", "replace"),
        "timed_out": result.timed_out,
        "seconds": round(result.seconds, 3),
        "truncated_bytes": result.truncated_bytes,
    }


def _op_ok(request: Dict[str, Any], workdir: Path) -> Dict[str, Any]:
    return {"ok": True}


_OPS = {"tool": _op_tool, "exec": _op_exec, "ping": _op_ok, "shutdown": _op_ok}


def _send(stream: Any, message: Dict[str, Any]) -> None:
    # Lone surrogates can only sit inside JSON strings, where "\udcxx" is a valid escape.
    stream.write(json.dumps(message, ensure_ascii=False).encode("utf-8", "backslashreplace") + b"\n")
    stream.flush()


def main(argv: Optional[list] = None) -> int:
    parser = argparse.ArgumentParser(description="Serve Leaf's tools over newline-delimited JSON.")
    parser.add_argument("--workdir", required=True, help="repository working directory inside the sandbox")
    options = parser.parse_args(argv)
    protocol = os.fdopen(os.dup(1), "wb", buffering=0)
    os.dup2(2, 1)  # from here on, anything printed to fd 1 goes to stderr
    try:
        os.chdir(options.workdir)
    except OSError as exc:
        _send(protocol, {"ready": False, "error": "cannot enter --workdir: {}: {}".format(type(exc).__name__, exc)})
        return 2
    workdir = Path(os.getcwd())
    ready = {"ready": True, "pid": os.getpid(), "python": sys.version.split()[0], "runner_version": RUNNER_VERSION}
    _send(protocol, ready)
    for line in iter(sys.stdin.buffer.readline, b""):
        if not line.strip():
            continue
        answer, stop = handle_request(line, workdir)
        _send(protocol, answer)
        if stop:
            break
    return 0


if __name__ == "__main__":
    sys.exit(main())
