"""The processes of a container on this host, as the harness controls them without running anything the agent can
have replaced: the keep-alive is the host's static `catatonit` (bound read-only into the container), and "every
agent process is gone" is made true from outside, by listing the container's cgroup, freezing the container and
killing every process but those it started with (its init, the keep-alive, the services of the image's
ENTRYPOINT), each spared by pid and start time, until none is left. The container is never restarted, so nothing
of the agent-modified filesystem runs again as root."""

from __future__ import annotations

import asyncio
import os
import shutil
import signal
from dataclasses import dataclass
from pathlib import Path

from sandbox.container.api import EngineApi
from sandbox.container.engine import Engine
from sandbox.shared.owner import process_start
from sandbox.protocol import SandboxError

KEEP_ALIVE_IN_CONTAINER = "/.leafcost/keep-alive"
KEEP_ALIVE_ARGS = ["-P"]  # catatonit's pause mode: runs nothing, waits for a signal
_CANDIDATES = ("/usr/libexec/podman/catatonit", "/usr/bin/catatonit", "/usr/local/bin/catatonit")
_ROUNDS = 50
_EXIT_WAIT_SEC = 10.0


@dataclass(frozen=True)
class Process:
    pid: int
    start: str
    state: str

    @property
    def key(self) -> str:
        return f"{self.pid}:{self.start}"


def keep_alive_binary() -> Path:
    """The host's catatonit, a static binary (it runs in the container without the container's libraries)."""
    found = [Path(p) for p in (shutil.which("catatonit"), *_CANDIDATES) if p and Path(p).is_file()]
    for path in found:
        if _static(path.resolve()):
            return path.resolve()
    raise SandboxError("the container backend keeps containers alive with the host's static `catatonit`, which is "
                       "not installed: apt-get install -y catatonit (Podman depends on it)")


def cgroup_of(pid: int, controller: str) -> tuple[Path, bool] | None:
    """A process's cgroup directory: cgroup v1's `controller` hierarchy, else the unified one (then True). None
    when this host cannot see it."""
    try:
        lines = Path(f"/proc/{pid}/cgroup").read_text().splitlines()
    except OSError:
        return None
    for line in lines:
        _, controllers, path = line.split(":", 2)
        if controller in controllers.split(","):
            return Path("/sys/fs/cgroup") / controller / path.lstrip("/"), False
    unified = next((line.split(":", 2)[2] for line in lines if line.startswith("0::")), None)
    if unified is not None and Path("/sys/fs/cgroup/cgroup.controllers").exists():
        return Path("/sys/fs/cgroup") / unified.lstrip("/"), True
    return None


def cgroup_directory(pid: int) -> Path | None:
    """The cgroup directory of a container, from its init process: cgroup v1's freezer (what pause freezes), else
    the unified hierarchy. None when this host cannot see it."""
    found = cgroup_of(pid, "freezer")
    return found[0] if found is not None and (found[0] / "cgroup.procs").exists() else None


def live_processes(directory: Path) -> list[Process]:
    """Every live process of the cgroup and the cgroups below it (a zombie is dead)."""
    found = []
    for procs in [directory / "cgroup.procs", *sorted(directory.rglob("*/cgroup.procs"))]:
        try:
            pids = procs.read_text().split()
        except OSError:
            continue
        for text in pids:
            process = _process(int(text))
            if process is not None and process.state not in ("Z", "X"):
                found.append(process)
    return found


async def kill_all_but(engine: Engine, container: str, directory: Path, spare: frozenset[str],
                       api: EngineApi | None = None) -> None:
    """Kills every process of the container not in `spare` ("pid:start"), with the container frozen while the
    victims are listed and signalled (nothing can fork meanwhile), again until none is left."""
    for _ in range(_ROUNDS):
        if api is not None:
            paused = await api.pause(container)
        else:
            paused = (await engine.run("pause", container, check=False, timeout=60)).code == 0
        try:
            victims = [p for p in live_processes(directory) if p.key not in spare]
            for victim in victims:
                _kill(victim)
        finally:
            if paused and api is not None:
                await api.unpause(container)
            elif paused:
                await engine.run("unpause", container, check=False, timeout=60)
        if not victims:
            return
        await _exited(victims)
    raise SandboxError(f"container {container}: the agent's processes survived {_ROUNDS} rounds of SIGKILL")


def _kill(process: Process) -> None:
    """SIGKILL through a pidfd opened while the process is the one listed (same start time): a pid reused by
    another process on this host is never signalled."""
    try:
        descriptor = os.pidfd_open(process.pid)
    except ProcessLookupError:
        return
    try:
        if process_start(process.pid) == process.start:
            signal.pidfd_send_signal(descriptor, signal.SIGKILL)
    except ProcessLookupError:
        pass
    except PermissionError:
        raise SandboxError(f"process {process.pid} of the container cannot be signalled from this host: the "
                           "container backend needs the engine on this machine and the right to signal its "
                           "containers (rootful, or rootless with every process as the container's root)") from None
    finally:
        os.close(descriptor)


async def _exited(victims: list[Process]) -> None:
    loop = asyncio.get_running_loop()
    deadline = loop.time() + _EXIT_WAIT_SEC
    while loop.time() < deadline:
        if all((current := _process(v.pid)) is None or current.start != v.start or current.state in ("Z", "X")
               for v in victims):
            return
        await asyncio.sleep(0.02)


def _process(pid: int) -> Process | None:
    try:
        stat = Path(f"/proc/{pid}/stat").read_bytes()
    except OSError:
        return None
    fields = stat[stat.rfind(b")") + 2:].split()
    if len(fields) <= 19:
        return None
    return Process(pid=pid, start=fields[19].decode(), state=fields[0].decode())


def _static(path: Path) -> bool:
    """An ELF executable without a program interpreter (PT_INTERP): it needs no libraries of the container."""
    try:
        with open(path, "rb") as handle:
            header = handle.read(64)
            if header[:4] != b"\x7fELF" or header[4] != 2:  # 64-bit only
                return False
            order = "little" if header[5] == 1 else "big"
            offset = int.from_bytes(header[32:40], order)
            size, count = int.from_bytes(header[54:56], order), int.from_bytes(header[56:58], order)
            handle.seek(offset)
            table = handle.read(size * count)
    except OSError:
        return False
    return all(int.from_bytes(table[i * size:i * size + 4], order) != 3 for i in range(count))
