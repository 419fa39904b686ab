"""Child servers die with leafcost and a start ends what a dead run left: real processes throughout. A launcher
process started here spawns a child through `adapters.children` (from its main thread, and from a worker thread
that has ended), is SIGKILLed, and the child must be gone; a record left by a dead owner is ended by the next
start, by pid and start time, never by name."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from adapters.children import ChildRecord, child_env, end_leftovers, forget, records_dir, spawn, start_time

ROOT = Path(__file__).resolve().parents[2]

LAUNCHER = textwrap.dedent("""
    import asyncio, json, subprocess, sys, time
    from adapters.children import spawn

    def start():
        return spawn([sys.executable, "-c", "import time; time.sleep(600)"], what="test sleeper",
                     stdin=subprocess.DEVNULL)

    if sys.argv[1] == "thread":
        # asyncio.to_thread's worker thread may end; the child must not die with it, only with this process.
        async def main():
            return await asyncio.to_thread(start)
        child = asyncio.run(main())  # ends the loop's executor: its worker threads are gone after this
    else:
        child = start()
    print(json.dumps({"pid": child.pid}), flush=True)
    time.sleep(600)
""")


@pytest.fixture(autouse=True)
def cache(tmp_path, monkeypatch) -> Path:
    monkeypatch.setenv("LEAFCOST_CACHE", str(tmp_path / "cache"))
    return tmp_path / "cache"


def gone(pid: int) -> bool:
    """No such process, or a zombie waiting for its (new) parent to reap it."""
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rpartition(")")[2].split()[0]
    except OSError:
        return True
    return state == "Z"


def wait_until(condition, seconds: float = 30.0) -> bool:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if condition():
            return True
        time.sleep(0.05)
    return condition()


def sleeper() -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "-c", "import time; time.sleep(600)"], start_new_session=True)


@pytest.mark.parametrize("spawned_from", ["main", "thread"])
def test_a_child_dies_when_the_process_that_started_it_is_killed(spawned_from, cache):
    launcher = subprocess.Popen([sys.executable, "-c", LAUNCHER, spawned_from], cwd=ROOT, stdout=subprocess.PIPE,
                                env={**os.environ, "LEAFCOST_CACHE": str(cache)})
    try:
        child = json.loads(launcher.stdout.readline())["pid"]
        assert not gone(child), "the child runs while its launcher does (a thread that ended did not kill it)"
        records = list(records_dir().glob("*.json"))
        assert [ChildRecord.from_json(p.read_text()).pid for p in records] == [child]
        launcher.send_signal(signal.SIGKILL)
        launcher.wait()
        assert wait_until(lambda: gone(child)), "the child outlived the launcher's kill -9"
    finally:
        launcher.kill()
        launcher.wait()
        if not gone(child):
            os.kill(child, signal.SIGKILL)


def test_a_record_left_by_a_dead_owner_is_ended_by_the_next_start(tmp_path):
    survivor = sleeper()  # stands in for a proxy that outlived its leafcost
    owner = subprocess.Popen([sys.executable, "-c", "pass"])
    owner_start = start_time(owner.pid)
    owner.wait()  # the owner is dead and reaped
    leftover = tmp_path / "leafcost-litellm-proxy-x"
    leftover.mkdir()
    (leftover / "config.yaml").write_text("master_key: sk-leafcost-left-behind")
    records_dir().mkdir(parents=True)
    record = ChildRecord(what="litellm proxy", pid=survivor.pid, start_time=start_time(survivor.pid),
                         owner_pid=owner.pid, owner_start_time=owner_start, cleanup=(str(leftover),))
    (records_dir() / f"{survivor.pid}.json").write_text(record.to_json())
    try:
        fresh = spawn([sys.executable, "-c", "pass"], what="the next start")  # ends the leftover first
        fresh.wait()
        forget(fresh)
        assert survivor.wait(timeout=30) == -signal.SIGKILL
        assert not leftover.exists()
        assert not (records_dir() / f"{survivor.pid}.json").exists()
    finally:
        survivor.kill()
        survivor.wait()


def test_a_recycled_pid_is_never_killed_and_a_live_owners_child_is_left_alone():
    stranger = sleeper()  # a process that got the recorded pid: its start time differs
    ours = sleeper()  # a child whose owner (this test process) still runs
    me = os.getpid()
    records_dir().mkdir(parents=True)
    records = {
        "recycled.json": ChildRecord(what="x", pid=stranger.pid, start_time=start_time(stranger.pid) - 1,
                                     owner_pid=2 ** 22 + 7, owner_start_time=1),
        "live.json": ChildRecord(what="y", pid=ours.pid, start_time=start_time(ours.pid), owner_pid=me,
                                 owner_start_time=start_time(me)),
    }
    for name, record in records.items():
        (records_dir() / name).write_text(record.to_json())
    try:
        ended = end_leftovers()
        assert [r.pid for r in ended] == [stranger.pid]  # its record goes: its owner is gone
        assert stranger.poll() is None and ours.poll() is None  # but nobody was killed
        assert (records_dir() / "live.json").exists() and not (records_dir() / "recycled.json").exists()
    finally:
        for process in (stranger, ours):
            process.kill()
            process.wait()


def test_children_get_a_clean_environment(monkeypatch):
    monkeypatch.setenv("ROUTER_API_KEY", "sk-router-key-never-inherited")
    monkeypatch.setenv("LEAFCOST_DEMO_ROUTER_KEY", "sk-leafcost-master")
    child = spawn([sys.executable, "-c", "import os, json; print(json.dumps(dict(os.environ)))"], what="env probe",
                  stdout=subprocess.PIPE, cwd=ROOT)
    seen = json.loads(child.communicate()[0])
    assert "ROUTER_API_KEY" not in seen and "LEAFCOST_DEMO_ROUTER_KEY" not in seen
    assert seen["PATH"] == os.environ["PATH"]
    assert child_env({"EXTRA": "1"})["EXTRA"] == "1"
