"""The local backend: one bubblewrap sandbox per episode, with a long-lived tool runner inside.

The sandbox's root is a fresh tmpfs holding read-only binds of the base root's system directories (never home
directories or /root), the task's built environment bound writable, Harbor's /tests, /logs and /solution, and
the tool runner. Everything the harness and the agent do inside goes through the runner's JSON protocol.
"""

from __future__ import annotations

import asyncio
import functools
import json
import os
import shutil
import signal
import subprocess
from pathlib import Path
from typing import Any

from pydantic import BaseModel, Field

from sandbox.leaf_tools import TOOL_RUNNER_PATH, bash_arguments
from sandbox.limits import AppliedLimits, Limits, apply_limits

SYSTEM_DIRS = ("usr", "bin", "sbin", "lib", "lib32", "lib64", "libx32", "etc")
# Never bindable from an environment: they belong to the base root or to the sandbox itself.
RESERVED_DIRS = set(SYSTEM_DIRS) | {"proc", "dev", "sys", "tmp", "run", "var", ".leafcost"}
# Places under /etc where credentials live; hidden even though /etc is bound.
MASKED_FILES = ("etc/shadow", "etc/gshadow", "etc/shadow-", "etc/gshadow-")
MASKED_DIRS = ("etc/ssh", "etc/ssl/private", "etc/sudoers.d")
HARBOR_DIRS = ("tests", "logs/verifier", "logs/agent", "solution")
SANDBOX_UID = 1000
DEFAULT_PATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
RUNNER_IN_SANDBOX = "/.leafcost/tool_runner.py"
PROFILE = Path(__file__).with_name("profile.sh")
EMPTY_FILE = Path(__file__).with_name("empty")
TOOL_GRACE_SEC = 15.0


class SandboxError(RuntimeError):
    """The sandbox itself failed (could not start, died, stopped answering): an infrastructure error."""


class SandboxOptions(BaseModel):
    """How sandboxes are made on this machine; identical for every arm of a run."""

    base_root: str = Field("host", description="'host' (the host's system directories) or a root directory")
    extra_ro_binds: list[str] = Field(default_factory=list,
                                      description="toolchains outside the base root, bound read-only at the same path")
    unsafe_no_isolation: bool = False
    cache_dir: Path = Field(default_factory=lambda: default_cache_dir())
    work_dir: Path | None = None


class ExecResult(BaseModel):
    exit_code: int | None
    stdout: str
    stderr: str
    timed_out: bool
    seconds: float
    truncated_bytes: int = 0

    @property
    def ok(self) -> bool:
        return self.exit_code == 0 and not self.timed_out


def default_cache_dir() -> Path:
    if os.environ.get("LEAFCOST_CACHE"):
        return Path(os.environ["LEAFCOST_CACHE"])
    return Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "leafcost"


def bwrap_path() -> str | None:
    return shutil.which("bwrap")


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

    def __init__(self, root: Path, workdir: str, process: asyncio.subprocess.Process,
                 limits: AppliedLimits, isolated: bool, stderr_path: Path):
        self.root = root
        self.workdir = workdir
        self.isolated = isolated
        self.limits = limits
        self._process = process
        self._stderr_path = stderr_path
        self._lock = asyncio.Lock()
        self._next_id = 0
        self._closed = False
        self._release_root: Any = None

    @classmethod
    async def start(cls, root: Path, *, workdir: str, env: dict[str, str], limits: Limits, network: bool,
                    options: SandboxOptions) -> LocalSandbox:
        require_isolation(options)
        root = Path(root)
        for directory in HARBOR_DIRS:
            (root / directory).mkdir(parents=True, exist_ok=True)
        isolated = not options.unsafe_no_isolation
        if isolated:
            argv = bwrap_command(root, workdir=workdir, env=env, network=network, options=options)
            if not Path(options.base_root if options.base_root != "host" else "/", "usr/bin/python3").exists():
                raise SandboxError(f"the base root {options.base_root!r} has no /usr/bin/python3, "
                                   "which the tool runner needs")
        else:
            await _claim_host_root(root)
            argv = ["/usr/bin/python3", "-u", "-I", str(TOOL_RUNNER_PATH), "--workdir", workdir]
        applied = apply_limits(limits)
        stderr_path = root.parent / "runner.stderr"
        with open(stderr_path, "wb") as stderr:
            process = await asyncio.create_subprocess_exec(
                *applied.wrap(argv), stdin=asyncio.subprocess.PIPE, stdout=asyncio.subprocess.PIPE,
                stderr=stderr, env=_runner_env(env) if not isolated else {"PATH": DEFAULT_PATH},
                cwd=workdir if not isolated else None, start_new_session=True, limit=64 * 1024 * 1024)
        sandbox = cls(root, workdir, process, applied, isolated, stderr_path)
        sandbox._release_root = None if isolated else _release_host_root
        try:
            hello = await sandbox._read_line(timeout=30)
        except SandboxError:
            await sandbox.close()
            raise
        if not hello.get("ready"):
            await sandbox.close()
            raise SandboxError(f"tool runner did not start: {hello}")
        return sandbox

    async def run_tool(self, name: str, arguments: str | dict[str, Any]) -> str:
        """One Leaf tool call; the observation text exactly as the model will see it."""
        answer = await self._request({"op": "tool", "name": name, "arguments": arguments},
                                     timeout=_tool_deadline(name, arguments))
        return answer["output"]

    async def exec(self, command: str, *, timeout: float, cwd: str | None = None,
                   env: dict[str, str] | None = None, login: bool = False) -> ExecResult:
        """A harness command (build step, patch capture, grading) with its own timeout."""
        answer = await self._request({"op": "exec", "command": command, "timeout": timeout, "cwd": cwd,
                                      "env": env, "login": login}, timeout=timeout + TOOL_GRACE_SEC)
        return ExecResult.model_validate(answer)

    def cpu_seconds(self) -> float | None:
        return self.limits.cpu_seconds()

    @property
    def alive(self) -> bool:
        return self._process.returncode is None

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
        if self._process.stdin is not None:
            self._process.stdin.close()
        await self.limits.release()
        if self._release_root is not None:
            self._release_root(self.root)

    async def _request(self, payload: dict[str, Any], timeout: float) -> dict[str, Any]:
        async with self._lock:
            if self._closed or self._process.returncode is not None:
                raise SandboxError(f"sandbox is not running{self._stderr_tail()}")
            self._next_id += 1
            payload = {"id": self._next_id, **payload}
            assert self._process.stdin is not None
            try:
                self._process.stdin.write((json.dumps(payload) + "\n").encode())
                await self._process.stdin.drain()
            except (BrokenPipeError, ConnectionResetError):
                raise SandboxError(f"sandbox died{self._stderr_tail()}") from None
            answer = await self._read_line(timeout)
            if answer.get("id") != self._next_id:
                raise SandboxError(f"tool runner answered out of order: {answer}")
            if "error" in answer:
                raise SandboxError(f"tool runner refused the request: {answer['error']}")
            return answer

    async def _read_line(self, timeout: float) -> dict[str, Any]:
        assert self._process.stdout is not None
        try:
            line = await asyncio.wait_for(self._process.stdout.readline(), timeout)
        except asyncio.TimeoutError:
            await self.close()
            raise SandboxError(f"tool runner gave no answer within {timeout:.0f}s; sandbox killed") from None
        if not line:
            await self._process.wait()
            reason = "killed (out of memory?)" if self.limits.oom_killed() else f"exit {self._process.returncode}"
            raise SandboxError(f"sandbox exited ({reason}){self._stderr_tail()}")
        try:
            return json.loads(line)
        except json.JSONDecodeError:
            raise SandboxError(f"tool runner wrote garbage: {line[:200]!r}") from None

    def _stderr_tail(self) -> str:
        try:
            tail = self._stderr_path.read_text(errors="replace")[-500:].strip()
        except OSError:
            return ""
        return f": {tail}" if tail else ""


def bwrap_command(root: Path, *, workdir: str, env: dict[str, str], network: bool,
                  options: SandboxOptions) -> list[str]:
    base = Path("/") if options.base_root == "host" else Path(options.base_root)
    argv = [bwrap_path() or "bwrap", "--unshare-all", *(["--share-net"] if network else []),
            "--uid", str(SANDBOX_UID), "--gid", str(SANDBOX_UID), "--cap-drop", "ALL",
            "--die-with-parent", "--new-session", "--hostname", "leafcost",
            "--proc", "/proc", "--dev", "/dev", "--tmpfs", "/tmp", "--tmpfs", "/var/tmp", "--tmpfs", "/run"]
    for name in SYSTEM_DIRS:
        source = base / name
        if source.is_symlink():
            argv += ["--symlink", os.readlink(source), f"/{name}"]
        elif source.is_dir():
            argv += ["--ro-bind", str(source), f"/{name}"]
    argv += ["--ro-bind", str(PROFILE), "/etc/profile"]
    for name in MASKED_FILES:
        if (base / name).exists():
            argv += ["--ro-bind", str(EMPTY_FILE), f"/{name}"]
    for name in MASKED_DIRS:
        if (base / name).is_dir():
            argv += ["--tmpfs", f"/{name}"]
    argv += ["--tmpfs", "/root"]  # before the extra binds: a toolchain under /root must stay visible
    for path in options.extra_ro_binds:
        argv += ["--ro-bind", path, path]
    for entry in _top_level(root):
        argv += ["--bind", str(entry), f"/{entry.name}"]
    # The tmpfs that holds the mount points goes read-only last: writing to / fails as in a real root.
    argv += ["--ro-bind", str(TOOL_RUNNER_PATH), RUNNER_IN_SANDBOX, "--remount-ro", "/", "--chdir", workdir,
             "--clearenv"]
    for key, value in _runner_env(env).items():
        argv += ["--setenv", key, value]
    return argv + ["/usr/bin/python3", "-u", "-I", RUNNER_IN_SANDBOX, "--workdir", workdir]


# Without isolation this machine's own root plays the container (Harbor's paths are real): one sandbox at a time.
_HOST_ROOT_LOCK = asyncio.Lock()
_HOST_ROOT_OWNER = ".leafcost-unsafe-root"


async def _claim_host_root(root: Path) -> None:
    """Links the environment's top-level directories at /<name>, refusing any path that is not ours."""
    await _HOST_ROOT_LOCK.acquire()
    try:
        if os.geteuid() != 0:
            raise SandboxError("--unsafe-no-isolation puts the task's directories (/app, /tests, /logs...) at the "
                               "root of this machine, which needs root; use it only inside a disposable container")
        for entry in _top_level(root):
            target = Path("/") / entry.name
            if target.is_symlink() and Path(os.readlink(target), _HOST_ROOT_OWNER).exists():
                target.unlink()  # left behind by a killed leafcost run
            if target.exists() or target.is_symlink():
                raise SandboxError(f"--unsafe-no-isolation: {target} already exists on this machine and is not "
                                   "leafcost's; refusing to replace it")
        for entry in _top_level(root):
            (entry / _HOST_ROOT_OWNER).touch()
            (Path("/") / entry.name).symlink_to(entry)
    except BaseException:
        _release_host_root(root)
        raise


def _release_host_root(root: Path) -> None:
    try:
        for entry in _top_level(root):
            target = Path("/") / entry.name
            if target.is_symlink() and Path(os.readlink(target)) == entry:
                target.unlink()
    finally:
        _HOST_ROOT_LOCK.release()


def _top_level(root: Path) -> list[Path]:
    return [e for e in sorted(root.iterdir()) if e.is_dir() and e.name not in RESERVED_DIRS]


def _runner_env(env: dict[str, str]) -> dict[str, str]:
    """The sandbox's whole environment: a clean base plus the Dockerfile's ENV; nothing from the host leaks in."""
    return {"PATH": DEFAULT_PATH, "HOME": "/root", "LANG": "C.UTF-8", "LC_ALL": "C.UTF-8", "TERM": "dumb",
            "USER": "leafcost", **env}


def _tool_deadline(name: str, arguments: str | dict[str, Any]) -> float:
    """How long the host waits for a tool before declaring the sandbox dead: the tool's own timeout plus grace."""
    bash = bash_arguments(arguments) if name == "Bash" else None
    timeout = bash[1] if bash else 120.0
    return max(timeout, 1.0) + TOOL_GRACE_SEC
