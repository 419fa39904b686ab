"""A watchdog per leafcost process that makes containers: started detached before the first one, it waits on a
pipe only that process holds open, and when the pipe closes (the process exited, or was killed with SIGKILL) it
removes every container labelled with that process as owner, so an agent's code stops within seconds of its
runner's death instead of at the next run's start. Standard library only: it runs as a script, by path."""

from __future__ import annotations

import os
import subprocess
import sys
import threading
import time

OWNER_LABEL = "leafcost.owner"
_SETTLE_SEC = 10.0  # an engine client of the dead process may still be creating a container
_started: dict[tuple[int, tuple[str, ...]], tuple[int, subprocess.Popen]] = {}
_lock = threading.Lock()


def ensure_watchdog(engine_argv: tuple[str, ...], owner: str) -> None:
    """Starts this process's watchdog for the engine `engine_argv`, once (again after a fork: a new owner)."""
    key = (os.getpid(), engine_argv)
    with _lock:
        if key in _started:
            return
        read_end, write_end = os.pipe()  # both close-on-exec: no other child inherits the write end
        try:
            watchdog = subprocess.Popen([sys.executable, "-I", os.path.abspath(__file__), owner, *engine_argv],
                                        stdin=read_end, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                                        start_new_session=True, close_fds=True)
        finally:
            os.close(read_end)
        # The write end stays open for this process's life; the kernel closes it at its death.
        _started[key] = (write_end, watchdog)


def _containers(engine_argv: list[str], owner: str) -> list[str]:
    listed = subprocess.run([*engine_argv, "ps", "-a", "-q", "--no-trunc", "--filter", f"label={OWNER_LABEL}={owner}"],
                            capture_output=True, text=True)
    return listed.stdout.split() if listed.returncode == 0 else []


def _remove(engine_argv: list[str], ids: list[str]) -> None:
    force = ["-t", "0"] if os.path.basename(engine_argv[0]) == "podman" else []
    subprocess.run([*engine_argv, "rm", "-f", *force, *ids], capture_output=True)


def main(owner: str, engine_argv: list[str]) -> None:
    while os.read(0, 4096):  # nothing is ever written: this returns b"" when the owner's end closes
        pass
    deadline, empty = time.monotonic() + _SETTLE_SEC, 0
    while time.monotonic() < deadline and empty < 2:
        ids = _containers(engine_argv, owner)
        if ids:
            _remove(engine_argv, ids)
            empty = 0
        else:
            empty += 1
        time.sleep(0.5)


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2:])
