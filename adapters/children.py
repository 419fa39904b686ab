"""Server processes leafcost starts (litellm's proxy, local model servers): each gets a clean environment and
dies with leafcost (a parent-death signal), and each start is recorded in the cache directory so that the next
start ends what a killed run left behind: by recorded pid and start time, never by name.

    process = spawn(argv, what="litellm proxy", env=child_env({...}), cleanup=[config_dir], stdout=log)
    ...
    forget(process)   # after stopping it yourself: its record goes, its cleanup paths are yours
"""

from __future__ import annotations

import concurrent.futures
import ctypes
import ctypes.util
import dataclasses
import json
import os
import shutil
import signal
import subprocess
import tempfile
import threading
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

CACHE_ENV = "LEAFCOST_CACHE"
RECORDS_FOLDER = "children"
# What a child server may read from our environment: never a key (ROUTER_API_KEY, OPENAI_API_KEY, a proxy's
# master key). Locale and library paths keep the server's behaviour the same as from a shell.
INHERITED_ENV = ("PATH", "HOME", "USER", "LANG", "LC_ALL", "LC_CTYPE", "TZ", "TMPDIR", "LD_LIBRARY_PATH",
                 "PYTHONPATH", "VIRTUAL_ENV")
PR_SET_PDEATHSIG = 1
CLEANUP_PREFIX = "leafcost-"  # a recorded path is only deleted when its name says leafcost made it


@dataclasses.dataclass(frozen=True)
class ChildRecord:
    """What one start launched, and who launched it: enough to end it safely after its owner is gone.
    (A dataclass, not pydantic: the local model server's process imports this module with the standard library.)"""

    what: str
    pid: int
    start_time: int  # /proc/<pid>/stat field 22: with the pid, names this process and no later one
    owner_pid: int
    owner_start_time: int
    cleanup: tuple[str, ...] = ()  # files and leafcost-made folders to delete once the child is gone

    def to_json(self) -> str:
        return json.dumps(dataclasses.asdict(self))

    @classmethod
    def from_json(cls, text: str | bytes) -> ChildRecord:
        """The record, or ValueError when the text is not one (half-written, edited by hand)."""
        data = json.loads(text)
        if not isinstance(data, dict):
            raise ValueError("a child record is a JSON object")
        fields = {f.name: f.type for f in dataclasses.fields(cls)}
        if set(data) - set(fields) or not {"what", "pid", "start_time", "owner_pid", "owner_start_time"} <= set(data):
            raise ValueError("not a child record")
        record = cls(**{**data, "cleanup": tuple(data.get("cleanup") or ())})
        ints = (record.pid, record.start_time, record.owner_pid, record.owner_start_time)
        if not all(type(n) is int and n > 0 for n in ints) or not all(isinstance(p, str) for p in record.cleanup):
            raise ValueError("a child record's pids and start times are positive integers, its cleanup paths text")
        return record


def records_dir() -> Path:
    """`$LEAFCOST_CACHE/children`, else `$XDG_CACHE_HOME/leafcost/children` or `~/.cache/leafcost/children`."""
    cache = os.environ.get(CACHE_ENV)
    root = Path(cache) if cache else Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "leafcost"
    return root / RECORDS_FOLDER


def child_env(extra: Mapping[str, str] | None = None) -> dict[str, str]:
    """A child server's whole environment: INHERITED_ENV from ours, plus `extra`."""
    env = {name: os.environ[name] for name in INHERITED_ENV if name in os.environ}
    env.update(extra or {})
    return env


def spawn(argv: Sequence[str], *, what: str, cleanup: Sequence[Path | str] = (), env: Mapping[str, str] | None = None,
          **popen: Any) -> subprocess.Popen:
    """Starts a child server in its own session with SIGKILL as its parent-death signal, after ending what dead
    owners left behind, and records it. `env` defaults to `child_env()`; other keywords go to Popen.

    The parent-death signal fires when the *thread* that forked the child exits, so children are forked from
    one thread that lives as long as the process (worker threads of `asyncio.to_thread` may come and go)."""
    end_leftovers()
    env = dict(env) if env is not None else child_env()
    if threading.current_thread() is threading.main_thread():
        process = _popen(list(argv), env, popen)
    else:
        process = _spawner().submit(_popen, list(argv), env, popen).result()
    _record(process.pid, what, cleanup)
    return process


def forget(process: subprocess.Popen | int) -> None:
    """Removes the record of a child this process has stopped itself (its cleanup is the caller's)."""
    pid = process if isinstance(process, int) else process.pid
    for path in _record_paths():
        record = _read(path)
        if record is not None and record.pid == pid and _is_us(record.owner_pid, record.owner_start_time):
            path.unlink(missing_ok=True)


def end_leftovers() -> list[ChildRecord]:
    """Ends every recorded child whose owner is gone: SIGKILL to its process group only if its pid and start
    time still match the record, then its cleanup paths are deleted and the record removed. Returns them."""
    ended = []
    for path in _record_paths():
        record = _read(path)
        if record is None:
            path.unlink(missing_ok=True)  # half-written or foreign: nothing in it can be trusted to act on
            continue
        if _alive(record.owner_pid, record.owner_start_time):
            continue
        if _alive(record.pid, record.start_time):
            _kill_group(record.pid)
        for name in record.cleanup:
            _delete(Path(name))
        path.unlink(missing_ok=True)
        ended.append(record)
    return ended


def start_time(pid: int) -> int | None:
    """The process's start time in clock ticks since boot (/proc/<pid>/stat field 22), None if it is gone."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    fields = stat.rpartition(")")[2].split()  # the command name (field 2) may hold spaces and parentheses
    return int(fields[19]) if len(fields) > 19 else None


def _alive(pid: int, expected_start: int) -> bool:
    """The very process recorded (same pid, same start time) still runs; a zombie counts as gone."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False
    fields = stat.rpartition(")")[2].split()
    return len(fields) > 19 and fields[0] != "Z" and int(fields[19]) == expected_start


def _is_us(pid: int, started: int) -> bool:
    return pid == os.getpid() and started == start_time(os.getpid())


def _popen(argv: list[str], env: dict[str, str], popen: dict[str, Any]) -> subprocess.Popen:
    parent = os.getpid()
    prctl = _prctl()

    def die_with_parent() -> None:  # runs in the child between fork and exec: no allocation-heavy work here
        if prctl is not None:
            prctl(PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
        if os.getppid() != parent:  # the parent died before the signal was armed
            os._exit(1)

    return subprocess.Popen(argv, env=env, start_new_session=True, preexec_fn=die_with_parent, **popen)


_SPAWNER: concurrent.futures.ThreadPoolExecutor | None = None
_SPAWNER_LOCK = threading.Lock()


def _spawner() -> concurrent.futures.ThreadPoolExecutor:
    """One worker thread that lives until the interpreter exits (idle pool threads never end before that)."""
    global _SPAWNER
    with _SPAWNER_LOCK:
        if _SPAWNER is None:
            _SPAWNER = concurrent.futures.ThreadPoolExecutor(max_workers=1, thread_name_prefix="leafcost-spawner")
        return _SPAWNER


def _prctl() -> Any:
    """libc's prctl, looked up before the fork (the child must not load libraries); None off Linux."""
    try:
        libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6", use_errno=True)
        return libc.prctl
    except (OSError, AttributeError):
        return None


def _record(pid: int, what: str, cleanup: Sequence[Path | str]) -> None:
    child_start, own_start = start_time(pid), start_time(os.getpid())
    if child_start is None or own_start is None:
        return  # already gone (it failed at once): nothing to end later
    record = ChildRecord(what=what, pid=pid, start_time=child_start, owner_pid=os.getpid(),
                         owner_start_time=own_start, cleanup=tuple(str(Path(p).absolute()) for p in cleanup))
    folder = records_dir()
    folder.mkdir(parents=True, exist_ok=True, mode=0o700)
    handle, temporary = tempfile.mkstemp(dir=folder, prefix=".writing-", suffix=".json")
    with os.fdopen(handle, "w") as out:  # mkstemp makes it 0600
        out.write(record.to_json())
    os.replace(temporary, folder / f"{pid}-{child_start}.json")


def _record_paths() -> list[Path]:
    folder = records_dir()
    try:
        return sorted(p for p in folder.iterdir() if p.suffix == ".json" and not p.name.startswith(".writing-"))
    except OSError:
        return []


def _read(path: Path) -> ChildRecord | None:
    try:
        return ChildRecord.from_json(path.read_bytes())
    except (OSError, ValueError, TypeError):
        return None


def _kill_group(pid: int) -> None:
    """The child leads its own session and group (start_new_session): its group id is its pid."""
    try:
        os.killpg(pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        try:
            os.kill(pid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            pass


def _delete(path: Path) -> None:
    """A recorded leftover: a file, or a folder leafcost made (its name starts with CLEANUP_PREFIX)."""
    try:
        if path.is_symlink() or path.is_file():
            path.unlink()
        elif path.is_dir() and path.name.startswith(CLEANUP_PREFIX):
            shutil.rmtree(path, ignore_errors=True)
    except OSError:
        pass
