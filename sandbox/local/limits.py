"""Resource limits for one sandbox: a cgroup when we may create one (as root), else `prlimit`; either way recorded."""

from __future__ import annotations

import asyncio
import functools
import os
import signal
import shutil
import uuid
from pathlib import Path

from pydantic import BaseModel

from sandbox.shared.owner import alive, identity

CGROUP_ROOT = Path("/sys/fs/cgroup")


class Limits(BaseModel):
    cpus: float
    memory_mb: int
    pids: int


class AppliedLimits(BaseModel):
    """How the limits were enforced, kept with every episode: `cgroup-v1`, `cgroup-v2` or `prlimit`."""

    via: str
    limits: Limits
    cgroups: list[str] = []
    cpu_enforced: bool

    def wrap(self, argv: list[str]) -> list[str]:
        """The command line that starts `argv` already inside the limits (children inherit them)."""
        if self.cgroups:
            procs = " ".join(f"'{d}/cgroup.procs'" for d in self.cgroups)
            # One write of our own pid per cgroup, then exec: nothing runs outside the limits.
            script = f'for f in {procs}; do echo $$ > "$f" || exit 97; done; exec "$@"'
            return ["/bin/sh", "-c", script, "leafcost-sandbox", *argv]
        prlimit = shutil.which("prlimit") or "prlimit"
        return [prlimit, f"--as={self.limits.memory_mb * 1024 * 1024}", f"--nproc={self.limits.pids}", "--", *argv]

    def cpu_seconds(self) -> float | None:
        """CPU time used so far by everything in the sandbox (cgroups only)."""
        if self.via == "cgroup-v2":
            stat = _read(Path(self.cgroups[0]) / "cpu.stat")
            for line in (stat or "").splitlines():
                if line.startswith("usage_usec "):
                    return int(line.split()[1]) / 1e6
            return None
        for directory in sorted(self.cgroups, key=lambda d: "cpuacct" not in d):  # the cpuacct hierarchy first
            if (usage := _read(Path(directory) / "cpuacct.usage")) is not None:
                return int(usage) / 1e9
        return None

    def oom_killed(self) -> bool:
        for directory in self.cgroups:
            for name in ("memory.oom_control", "memory.events"):
                path = Path(directory) / name
                if path.exists():
                    for line in path.read_text().splitlines():
                        key, _, value = line.partition(" ")
                        if key == "oom_kill" and int(value or 0) > 0:
                            return True
        return False

    async def release(self) -> None:
        """Kills whatever is still in the cgroups, waits for them to empty, then removes them."""
        for directory in map(Path, self.cgroups):
            if _remove_cgroup(directory):  # the kernel removes only an empty cgroup: nothing was left to kill
                continue
            # Processes of a killed PID namespace leave asynchronously, most within a millisecond or two: looked at
            # again after 1, 2, 4 ... ms (20 ms at most between looks), for 2 s in all.
            delay, waited = 0.001, 0.0
            while (pids := _members(directory)) and waited < 2.0:
                for pid in pids:
                    _kill(pid)
                await asyncio.sleep(delay)
                waited += delay
                delay = min(delay * 2, 0.02)
            _remove_cgroup(directory)


def apply_limits(limits: Limits) -> AppliedLimits:
    name = f"leafcost-{identity()}-{uuid.uuid4().hex[:8]}"  # the owner in the name: see remove_orphan_cgroups
    if os.geteuid() == 0:
        for attempt in (_cgroup_v2, _cgroup_v1):
            try:
                applied = attempt(limits, name)
            except OSError:
                continue
            if applied is not None:
                return applied
    return AppliedLimits(via="prlimit", limits=limits, cpu_enforced=False)


def remove_orphan_cgroups() -> list[str]:
    """Cgroups of leafcost processes that died without releasing them: their members killed, then removed."""
    removed = []
    for parent in {*(CGROUP_ROOT / c / "leafcost" for c in ("memory", "pids", "cpu", "cpuacct")), CGROUP_ROOT}:
        try:
            candidates = [d for d in parent.resolve().iterdir() if d.is_dir() and d.name.startswith("leafcost-")]
        except OSError:
            continue
        for directory in candidates:
            owner = directory.name.removeprefix("leafcost-").rpartition("-")[0]
            if owner.count("-") == 1 and not alive(owner):
                for pid in _members(directory):
                    _kill(pid)
                _remove_cgroup(directory)
                removed.append(str(directory))
    return removed


def _kill(pid: int) -> None:
    try:
        os.kill(pid, signal.SIGKILL)
    except ProcessLookupError:
        pass


_V1_CONTROLLERS = ("memory", "pids", "cpu", "cpuacct")


@functools.cache
def _v1_hierarchies() -> tuple[tuple[str, Path], ...] | None:
    """Each controller's hierarchy (cpu and cpuacct are often one), looked up once per process."""
    if not all((CGROUP_ROOT / c / "cgroup.procs").exists() for c in _V1_CONTROLLERS):
        return None
    return tuple((c, (CGROUP_ROOT / c).resolve()) for c in _V1_CONTROLLERS)


def _cgroup_v1(limits: Limits, name: str) -> AppliedLimits | None:
    if (hierarchies := _v1_hierarchies()) is None:
        return None
    made: list[str] = []
    try:
        for controller, real in hierarchies:
            directory = real / "leafcost" / name
            if str(directory) in made:
                continue
            directory.mkdir(parents=True, exist_ok=True)
            made.append(str(directory))
            if controller == "memory":
                _write(directory / "memory.limit_in_bytes", str(limits.memory_mb * 1024 * 1024))
                _try_write(directory / "memory.memsw.limit_in_bytes", str(limits.memory_mb * 1024 * 1024))
            elif controller == "pids":
                _write(directory / "pids.max", str(limits.pids))
            elif controller == "cpu":
                _write(directory / "cpu.cfs_period_us", "100000")
                _write(directory / "cpu.cfs_quota_us", str(max(1000, int(limits.cpus * 100000))))
    except OSError:
        for directory in made:
            _remove_cgroup(Path(directory))
        raise
    return AppliedLimits(via="cgroup-v1", limits=limits, cgroups=made, cpu_enforced=True)


def _cgroup_v2(limits: Limits, name: str) -> AppliedLimits | None:
    controllers = CGROUP_ROOT / "cgroup.controllers"
    if not controllers.exists() or not {"memory", "pids", "cpu"} <= set(controllers.read_text().split()):
        return None
    directory = CGROUP_ROOT / name
    directory.mkdir()
    try:
        _write(directory / "memory.max", str(limits.memory_mb * 1024 * 1024))
        _try_write(directory / "memory.swap.max", "0")
        _write(directory / "pids.max", str(limits.pids))
        _write(directory / "cpu.max", f"{max(1000, int(limits.cpus * 100000))} 100000")
    except OSError:
        _remove_cgroup(directory)
        raise
    return AppliedLimits(via="cgroup-v2", limits=limits, cgroups=[str(directory)], cpu_enforced=True)


def _members(directory: Path) -> list[int]:
    return [int(line) for line in (_read(directory / "cgroup.procs") or "").split()]


def _read(path: Path) -> str | None:
    """A cgroup file's text (one open, one read, one close), None where it is not."""
    try:
        descriptor = os.open(path, os.O_RDONLY | os.O_CLOEXEC)
    except OSError:
        return None
    try:
        return os.read(descriptor, 1 << 16).decode()
    except OSError:
        return None
    finally:
        os.close(descriptor)


def _write(path: Path, value: str) -> None:
    """A cgroup setting: one open, one write, one close (a short write raises, as the kernel refuses values whole)."""
    descriptor = os.open(path, os.O_WRONLY | os.O_CLOEXEC)
    try:
        os.write(descriptor, value.encode())
    finally:
        os.close(descriptor)


def _try_write(path: Path, value: str) -> None:
    try:
        _write(path, value)
    except OSError:
        pass  # swap accounting is optional in the kernel


def _remove_cgroup(directory: Path) -> bool:
    """True once it is gone (the kernel refuses to remove a cgroup with a process in it)."""
    try:
        directory.rmdir()
    except FileNotFoundError:
        return True
    except OSError:
        return False  # still busy; the kernel keeps an empty cgroup harmlessly
    return True
