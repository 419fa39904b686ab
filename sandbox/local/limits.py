"""Resource limits for one sandbox: a cgroup when we may create one (as root), else `prlimit`; either way recorded."""

from __future__ import annotations

import asyncio
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
        for directory in self.cgroups:
            usage = Path(directory) / "cpuacct.usage"
            if usage.exists():
                return int(usage.read_text()) / 1e9
            stat = Path(directory) / "cpu.stat"
            if stat.exists() and "cpuacct" not in directory and self.via == "cgroup-v2":
                for line in stat.read_text().splitlines():
                    if line.startswith("usage_usec "):
                        return int(line.split()[1]) / 1e6
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


def _cgroup_v1(limits: Limits, name: str) -> AppliedLimits | None:
    needed = ("memory", "pids", "cpu", "cpuacct")
    if not all((CGROUP_ROOT / c / "cgroup.procs").exists() for c in needed):
        return None
    made: list[str] = []
    try:
        for controller in needed:
            real = (CGROUP_ROOT / controller).resolve()  # cpu and cpuacct are often one hierarchy
            directory = real / "leafcost" / name
            if str(directory) in made:
                continue
            directory.mkdir(parents=True, exist_ok=True)
            made.append(str(directory))
            if controller == "memory":
                (directory / "memory.limit_in_bytes").write_text(str(limits.memory_mb * 1024 * 1024))
                _try_write(directory / "memory.memsw.limit_in_bytes", str(limits.memory_mb * 1024 * 1024))
            elif controller == "pids":
                (directory / "pids.max").write_text(str(limits.pids))
            elif controller == "cpu":
                (directory / "cpu.cfs_period_us").write_text("100000")
                (directory / "cpu.cfs_quota_us").write_text(str(max(1000, int(limits.cpus * 100000))))
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
        (directory / "memory.max").write_text(str(limits.memory_mb * 1024 * 1024))
        _try_write(directory / "memory.swap.max", "0")
        (directory / "pids.max").write_text(str(limits.pids))
        (directory / "cpu.max").write_text(f"{max(1000, int(limits.cpus * 100000))} 100000")
    except OSError:
        _remove_cgroup(directory)
        raise
    return AppliedLimits(via="cgroup-v2", limits=limits, cgroups=[str(directory)], cpu_enforced=True)


def _members(directory: Path) -> list[int]:
    try:
        return [int(line) for line in (directory / "cgroup.procs").read_text().split()]
    except OSError:
        return []


def _try_write(path: Path, value: str) -> None:
    try:
        path.write_text(value)
    except OSError:
        pass  # swap accounting is optional in the kernel


def _remove_cgroup(directory: Path) -> None:
    try:
        directory.rmdir()
    except OSError:
        pass  # still busy or already gone; the kernel keeps an empty cgroup harmlessly
