"""The local backend's cgroups (root only): set as asked, counting what runs in them, and gone after release with
every process in them killed."""

from __future__ import annotations

import asyncio
import os
import subprocess
from pathlib import Path

import pytest

from sandbox.local.limits import Limits, apply_limits

LIMITS = Limits(cpus=0.5, memory_mb=256, pids=64)


def _applied_or_skip():
    if os.geteuid() != 0:
        pytest.skip("cgroups need root")
    applied = apply_limits(LIMITS)
    if not applied.cgroups:
        pytest.skip("no cgroup hierarchy with memory, pids and cpu here")
    return applied


def _settings(applied) -> dict[str, str]:
    found = {}
    for directory in map(Path, applied.cgroups):
        for name in ("memory.limit_in_bytes", "pids.max", "cpu.cfs_quota_us", "memory.max", "cpu.max"):
            if (directory / name).exists():
                found[name] = (directory / name).read_text().strip()
    return found


def test_the_cgroups_hold_the_limits_and_go_away_empty():
    applied = _applied_or_skip()
    settings = _settings(applied)
    if applied.via == "cgroup-v1":
        assert settings == {"memory.limit_in_bytes": str(256 << 20), "pids.max": "64", "cpu.cfs_quota_us": "50000"}
    else:
        assert settings == {"memory.max": str(256 << 20), "pids.max": "64", "cpu.max": "50000 100000"}
    assert applied.cpu_seconds() == 0.0
    asyncio.run(applied.release())
    assert not any(Path(d).exists() for d in applied.cgroups)


def test_release_kills_what_is_still_inside_then_removes_the_cgroups():
    applied = _applied_or_skip()
    process = subprocess.Popen(applied.wrap(["/bin/sh", "-c", "sleep 60 & while :; do :; done"]),
                               start_new_session=True)
    try:
        for _ in range(500):  # the wrapper joins every cgroup, then its loop uses CPU
            if (used := applied.cpu_seconds()) and used > 0.01:
                break
            asyncio.run(asyncio.sleep(0.01))
        assert applied.cpu_seconds() > 0.0
        members = [int(p) for p in (Path(applied.cgroups[0]) / "cgroup.procs").read_text().split()]
        assert process.pid in members and len(members) == 2  # the shell and its sleep
        asyncio.run(applied.release())
        assert process.wait(timeout=10) < 0  # killed, not asked
        assert not any(Path(d).exists() for d in applied.cgroups)
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()
