"""The local backend: one bubblewrap sandbox per episode, with a long-lived tool runner inside.

The sandbox's root is a fresh tmpfs holding read-only binds of the base root's system directories (never home
directories or /root), the task's built environment bound writable, Harbor's /tests, /logs and /solution, and
the tool runner. Everything the harness and the agent do inside goes through the runner's JSON protocol.
"""

from __future__ import annotations

import asyncio
import functools
import hashlib
import os
import shutil
import signal
import stat
import subprocess
import threading
import uuid
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from pydantic import BaseModel

from sandbox.leaf_tools import TOOL_RUNNER_PATH
from sandbox.local.limits import AppliedLimits, Limits, apply_limits
from sandbox.protocol import ExecResult, SandboxError, SandboxOptions
from sandbox.shared.runner_client import ANSWER_LIMIT_BYTES, RUNNER_IN_SANDBOX, RunnerClient

SYSTEM_DIRS = ("usr", "bin", "sbin", "lib", "lib32", "lib64", "libx32", "etc")
# Never bindable from an environment: they belong to the base root or to the sandbox itself.
RESERVED_DIRS = set(SYSTEM_DIRS) | {"proc", "dev", "sys", "tmp", "run", "var", ".leafcost"}
# Harbor's directories are never part of the agent's tree: each sandbox gets fresh host directories bound there,
# so nothing the agent leaves behind can stand where the verifier writes or where the host reads the reward.
HARBOR_TOP_DIRS = frozenset({"tests", "logs", "solution"})
# Places under /etc where credentials live; hidden even though /etc is bound.
MASKED_FILES = ("etc/shadow", "etc/gshadow", "etc/shadow-", "etc/gshadow-")
MASKED_DIRS = ("etc/ssh", "etc/ssl/private", "etc/sudoers.d")
SANDBOX_UID = 1000
DEFAULT_PATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
PROFILE = Path(__file__).with_name("profile.sh")
EMPTY_FILE = Path(__file__).with_name("empty")


class Mount(BaseModel):
    """A host directory the host made and owns, bound at `target` inside the sandbox."""

    source: Path
    target: str
    writable: bool = True


def bwrap_path() -> str | None:
    """Looked up on PATH until found, then kept for that PATH: every sandbox start asks."""
    search = os.environ.get("PATH", os.defpath)
    if (found := _BWRAP.get(search)) is None and (found := shutil.which("bwrap", path=search)) is not None:
        _BWRAP[search] = found
    return found


_BWRAP: dict[str, str] = {}


@functools.cache
def bwrap_version() -> str | None:
    """Asked once per process: it goes into every sandbox spec."""
    path = bwrap_path()
    if path is None:
        return None
    return subprocess.run([path, "--version"], capture_output=True, text=True).stdout.strip() or None


def require_isolation(options: SandboxOptions) -> None:
    """Refuse to run tools without isolation unless the user said so explicitly."""
    if options.unsafe_no_isolation:
        return
    if bwrap_path() is None:
        raise SandboxError("bubblewrap (bwrap) is not installed: run `apt-get install -y bubblewrap` "
                           "(or `make deps` as root), or pass --unsafe-no-isolation to run tools unsandboxed")


class LocalSandbox:
    """A running sandbox over a root directory whose top-level entries become /<entry> inside."""

    def __init__(self, root: Path, workdir: str, process: asyncio.subprocess.Process, limits: AppliedLimits,
                 isolated: bool, stderr_path: Path):
        self.root = root
        self.workdir = workdir
        self.isolated = isolated
        self.limits = limits
        self._process = process
        self._stderr_path = stderr_path
        self._closed = False
        self._release_root: Any = None
        self._runner: RunnerClient | None = None

    @classmethod
    async def start(cls, root: Path, *, workdir: str, env: dict[str, str], limits: Limits, network: bool,
                    options: SandboxOptions, mounts: Sequence[Mount] = ()) -> LocalSandbox:
        require_isolation(options)
        root = Path(root)
        isolated = not options.unsafe_no_isolation
        if isolated:
            if not Path(options.base_root if options.base_root != "host" else "/", "usr/bin/python3").exists():
                raise SandboxError(f"the base root {options.base_root!r} has no /usr/bin/python3, "
                                   "which the tool runner needs")
            argv = bwrap_command(root, workdir=workdir, env=env, network=network, options=options, mounts=mounts,
                                 memory_mb=limits.memory_mb, runner=await runner_bytecode(options))
        else:
            await _claim_host_root(root, mounts)
            argv = ["/usr/bin/python3", "-u", "-I", str(TOOL_RUNNER_PATH), "--workdir", workdir]
        applied = apply_limits(limits)
        stderr_path = root.parent / "runner.stderr"
        # The protocol travels on two pipes passed as extra fds: bubblewrap's PID 1 inside the sandbox closes every
        # fd above 2, so no process in there but the (non-dumpable) runner holds them; its stdin and stdout are
        # /dev/null and the stderr file, which are worth nothing to forge through /proc/1/fd.
        request_read, request_write = os.pipe()
        answer_read, answer_write = os.pipe()
        argv += ["--request-fd", str(request_read), "--answer-fd", str(answer_write)]
        try:
            with open(stderr_path, "wb") as stderr:
                process = await asyncio.create_subprocess_exec(
                    *applied.wrap(argv), stdin=subprocess.DEVNULL, stdout=stderr, stderr=stderr,
                    pass_fds=(request_read, answer_write),
                    env=_runner_env(env) if not isolated else {"PATH": DEFAULT_PATH},
                    cwd=workdir if not isolated else "/", start_new_session=True)
        except BaseException:
            for fd in (request_write, answer_read):
                os.close(fd)
            raise
        finally:
            os.close(request_read)
            os.close(answer_write)
        sandbox = cls(root, workdir, process, applied, isolated, stderr_path)
        reader, writer = await _pipe_streams(request_write, answer_read)
        sandbox._runner = RunnerClient(reader, writer, kill=sandbox.close, exit_reason=sandbox._exit_reason)
        sandbox._release_root = None if isolated else _release_host_root
        try:
            await sandbox._runner.hello()
        except SandboxError:
            await sandbox.close()
            raise
        return sandbox

    async def run_tool(self, name: str, arguments: str | dict[str, Any]) -> str:
        """One Leaf tool call; the observation text exactly as the model will see it."""
        return await self._client().tool(name, arguments)

    async def exec(self, command: str, *, timeout: float, cwd: str | None = None,
                   env: dict[str, str] | None = None, user: str | None = None, login: bool = False) -> ExecResult:
        """A harness command (build step, patch capture, grading) with its own timeout. Everything here runs as
        the one sandbox user: another `user` cannot be honoured (tasks that ask for one are refused at open)."""
        if user is not None:
            raise SandboxError(f"the local backend runs every command as uid {SANDBOX_UID}; cannot run as {user!r}")
        return await self._client().exec(command, timeout=timeout, cwd=cwd, env=env, login=login)

    def cpu_seconds(self) -> float | None:
        return self.limits.cpu_seconds()

    @property
    def alive(self) -> bool:
        return self._process.returncode is None and not self._closed

    @property
    def closed(self) -> bool:
        return self._closed

    async def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        if self._process.returncode is None:
            try:
                os.killpg(self._process.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        await self._process.wait()
        if self._runner is not None:
            self._runner.close()
        await self.limits.release()
        if self._release_root is not None:
            self._release_root(self.root)

    def _client(self) -> RunnerClient:
        if self._runner is None or self._closed or self._process.returncode is not None:
            raise SandboxError(f"sandbox is not running{self._stderr_tail()}")
        return self._runner

    async def _exit_reason(self) -> str:
        """Why the runner's stream ended, for the error the episode records."""
        if self._process.returncode is None:
            try:
                await asyncio.wait_for(self._process.wait(), 5)
            except asyncio.TimeoutError:
                return self._stderr_tail()
        reason = "killed (out of memory?)" if self.limits.oom_killed() else f"exit {self._process.returncode}"
        return f" ({reason}){self._stderr_tail()}"

    def _stderr_tail(self) -> str:
        try:
            tail = self._stderr_path.read_text(errors="replace")[-500:].strip()
        except OSError:
            return ""
        return f": {tail}" if tail else ""


async def _pipe_streams(request_write: int, answer_read: int) -> tuple[asyncio.StreamReader, asyncio.StreamWriter]:
    """The host's ends of the two protocol pipes, as asyncio streams."""
    loop = asyncio.get_running_loop()
    reader = asyncio.StreamReader(limit=ANSWER_LIMIT_BYTES)
    await loop.connect_read_pipe(lambda: asyncio.StreamReaderProtocol(reader), os.fdopen(answer_read, "rb", 0))
    transport, protocol = await loop.connect_write_pipe(lambda: asyncio.StreamReaderProtocol(
        asyncio.StreamReader()), os.fdopen(request_write, "wb", 0))
    return reader, asyncio.StreamWriter(transport, protocol, None, loop)


def bwrap_command(root: Path, *, workdir: str, env: dict[str, str], network: bool, options: SandboxOptions,
                  mounts: Sequence[Mount] = (), memory_mb: int = 1024, runner: Path | None = None,
                  command: Sequence[str] | None = None, scratch: Path | None = None) -> list[str]:
    """`runner`: the tool runner compiled by the sandbox's python3 (`runner_bytecode`), else its source is run.
    `command`: run that instead of the tool runner (none is bound). `scratch`: a host directory the host made,
    whose subdirectories (made here) stand at /tmp, /var/tmp, /run and /root instead of fresh tmpfs, so that
    the sandboxes one after another over the same files see the same ones (`CommandSandbox`)."""
    base = Path("/") if options.base_root == "host" else Path(options.base_root)
    argv = [bwrap_path() or "bwrap", "--unshare-all", *(["--share-net"] if network else []),
            "--uid", str(SANDBOX_UID), "--gid", str(SANDBOX_UID), "--cap-drop", "ALL",
            "--die-with-parent", "--new-session", "--hostname", "leafcost", "--proc", "/proc", "--dev", "/dev"]
    # Sized tmpfs: a process filling /tmp gets ENOSPC long before the memory limit, so the OOM killer is never asked
    # to choose among processes while unkillable tmpfs pages hold the memory (it would pick the tool runner).
    for path, size in tmpfs_sizes(memory_mb).items():
        if path != "/root":
            argv += _private_dir(path, size, scratch)
    for name in SYSTEM_DIRS:
        source = os.path.join(base, name)
        kind = _kind(source)
        if stat.S_ISLNK(kind):
            argv += ["--symlink", os.readlink(source), f"/{name}"]
        elif stat.S_ISDIR(kind):
            argv += ["--ro-bind", source, f"/{name}"]
    argv += ["--ro-bind", str(PROFILE), "/etc/profile"]
    for name in MASKED_FILES:
        if os.path.exists(os.path.join(base, name)):
            argv += ["--ro-bind", str(EMPTY_FILE), f"/{name}"]
    for name in MASKED_DIRS:
        if os.path.isdir(os.path.join(base, name)):
            argv += ["--tmpfs", f"/{name}"]
    # Before the extra binds: a toolchain under /root must stay visible.
    argv += _private_dir("/root", tmpfs_sizes(memory_mb)["/root"], scratch)
    for path in options.extra_ro_binds:
        argv += ["--ro-bind", path, path]
    for entry in _top_level(root):
        argv += ["--bind", str(entry), f"/{entry.name}"]
    for mount in mounts:  # mount points on the sandbox's own tmpfs root, never inside the agent's tree
        argv += ["--bind" if mount.writable else "--ro-bind", str(mount.source), mount.target]
    # The tmpfs that holds the mount points goes read-only last: writing to / fails as in a real root.
    inside = RUNNER_IN_SANDBOX if runner is None else RUNNER_IN_SANDBOX + "c"
    if command is None:
        argv += ["--ro-bind", str(runner or TOOL_RUNNER_PATH), inside]
    argv += ["--remount-ro", "/", "--chdir", workdir, "--clearenv"]
    for key, value in _runner_env(env).items():
        argv += ["--setenv", key, value]
    if command is not None:
        return argv + ["--", *command]
    # -S: the runner is standard-library only, so site's scan of site-packages is start-up time for nothing.
    return argv + ["/usr/bin/python3", "-u", "-I", "-S", inside, "--workdir", workdir]


def _kind(path: str) -> int:
    """The file type bits of `path` itself (a link is not followed), 0 where there is nothing."""
    try:
        return stat.S_IFMT(os.lstat(path).st_mode)
    except OSError:
        return 0


def _private_dir(path: str, size: int, scratch: Path | None) -> list[str]:
    if scratch is None:
        return ["--size", str(size), "--tmpfs", path]
    source = private_dir_source(scratch, path)
    source.mkdir(exist_ok=True)  # the host's user is the sandbox's: it owns it inside, as a tmpfs of its own
    return ["--bind", str(source), path]


def private_dir_source(scratch: Path, path: str) -> Path:
    """The host directory that stands at `path` (/tmp, /var/tmp, /run or /root) in sandboxes over `scratch`."""
    return scratch / path.strip("/").replace("/", "-")


async def runner_bytecode(options: SandboxOptions) -> Path | None:
    """The tool runner compiled once by the base root's own python3, kept in the cache (made by the host, bound
    read-only): every sandbox start then skips compiling its 1,000 lines. None where it cannot be made here (a base
    root other than the host's, whose python3 does not run on the host): the source is run, as before."""
    if options.base_root != "host":
        return None
    cache_dir = Path(options.cache_dir).resolve()
    known = _COMPILED.get(cache_dir, False)
    if known is None or (known and known.is_file()):
        return known
    return await asyncio.to_thread(_compile_once, cache_dir)


_COMPILED: dict[Path, Path | None] = {}
_COMPILE_LOCK = threading.Lock()


def _compile_once(cache_dir: Path) -> Path | None:
    with _COMPILE_LOCK:  # sandboxes start together: one compiles, the others wait for its answer
        known = _COMPILED.get(cache_dir, False)
        if known is None or (known and known.is_file()):
            return known
        _COMPILED[cache_dir] = _compile_runner(cache_dir)
        return _COMPILED[cache_dir]


def _compile_runner(cache_dir: Path) -> Path | None:
    interpreter = Path("/usr/bin/python3")
    try:
        facts = interpreter.stat()
        source = TOOL_RUNNER_PATH.read_bytes()
    except OSError:
        return None
    # The interpreter's identity is in the name: an upgraded python3 (another bytecode format) compiles anew.
    key = hashlib.sha256(source + f"\0{os.path.realpath(interpreter)}\0{facts.st_size}\0{facts.st_mtime_ns}"
                         .encode()).hexdigest()[:32]
    target = cache_dir / "runner" / f"tool_runner-{key}.pyc"
    if target.is_file():
        return target
    target.parent.mkdir(parents=True, exist_ok=True)
    staging = target.with_name(f".{target.name}.{uuid.uuid4().hex}")
    compiled = subprocess.run([str(interpreter), "-I", "-S", "-c", "import py_compile, sys; "
                               "py_compile.compile(sys.argv[1], cfile=sys.argv[2], doraise=True)",
                               str(TOOL_RUNNER_PATH), str(staging)], capture_output=True)
    if compiled.returncode != 0:
        staging.unlink(missing_ok=True)
        return None
    staging.chmod(0o644)
    os.rename(staging, target)  # atomic: a half-written file is never run
    return target


def tmpfs_sizes(memory_mb: int) -> dict[str, int]:
    """Bytes per private tmpfs: half the memory limit in all, so files alone can never exhaust it."""
    memory = memory_mb * 1024 * 1024
    return {"/tmp": memory // 4, "/var/tmp": memory // 16, "/run": min(16 << 20, memory // 16),
            "/root": memory // 8}


# Without isolation this machine's own root plays the container (Harbor's paths are real): one sandbox at a time.
_HOST_ROOT_LOCK = asyncio.Lock()
_HOST_ROOT_OWNER = ".leafcost-unsafe-root"
_UNSAFE_VIEW = "unsafe-view"


def _ours(link_target: Path) -> bool:
    return Path(link_target, _HOST_ROOT_OWNER).exists() or link_target.parent.name == _UNSAFE_VIEW


async def _claim_host_root(root: Path, mounts: Sequence[Mount]) -> None:
    """Links the environment's top-level directories (and a view of the mounts) at /<name>, refusing any path that
    is not ours."""
    await _HOST_ROOT_LOCK.acquire()
    try:
        if os.geteuid() != 0:
            raise SandboxError("--unsafe-no-isolation puts the task's directories (/app, /tests, /logs...) at the "
                               "root of this machine, which needs root; use it only inside a disposable container")
        entries = _top_level(root) + _mount_view(root, mounts)
        for entry in entries:
            target = Path("/") / entry.name
            if target.is_symlink() and _ours(Path(os.readlink(target))):
                target.unlink()  # left behind by a killed leafcost run
            if target.exists() or target.is_symlink():
                raise SandboxError(f"--unsafe-no-isolation: {target} already exists on this machine and is not "
                                   "leafcost's; refusing to replace it")
        for entry in entries:
            if not entry.is_symlink():
                (entry / _HOST_ROOT_OWNER).touch()
            (Path("/") / entry.name).symlink_to(entry)
    except BaseException:
        _release_host_root(root)
        raise


def _mount_view(root: Path, mounts: Sequence[Mount]) -> list[Path]:
    """Without a mount namespace, mounts become symlinks in a host directory beside the root: /logs/verifier is
    view/logs/verifier -> its source."""
    view = root.parent / _UNSAFE_VIEW
    shutil.rmtree(view, ignore_errors=True)
    for mount in mounts:
        link = view / mount.target.lstrip("/")
        link.parent.mkdir(parents=True, exist_ok=True)
        link.symlink_to(mount.source)
    return sorted(view.iterdir()) if view.exists() else []


def _release_host_root(root: Path) -> None:
    try:
        view = root.parent / _UNSAFE_VIEW
        for entry in _top_level(root) + (sorted(view.iterdir()) if view.is_dir() else []):
            target = Path("/") / entry.name
            if target.is_symlink() and Path(os.readlink(target)) == entry:
                target.unlink()
    finally:
        _HOST_ROOT_LOCK.release()


def _top_level(root: Path) -> list[Path]:
    """The environment's own top-level directories and files (`COPY f /f`), never links. Only the host's build
    makes entries there: inside, the root is read-only."""
    try:
        with os.scandir(root) as listing:  # the types come with the names: no stat per entry
            entries = [e.name for e in listing if (e.is_dir(follow_symlinks=False) or e.is_file(follow_symlinks=False))
                       and e.name not in RESERVED_DIRS | HARBOR_TOP_DIRS]
    except (FileNotFoundError, NotADirectoryError):
        return []
    return [root / name for name in sorted(entries)]


def _runner_env(env: dict[str, str]) -> dict[str, str]:
    """The sandbox's whole environment: a clean base plus the Dockerfile's ENV; nothing from the host leaks in."""
    return {"PATH": DEFAULT_PATH, "HOME": "/root", "LANG": "C.UTF-8", "LC_ALL": "C.UTF-8", "TERM": "dumb",
            "USER": "leafcost", **env}
