"""Which live process owns a leftover: a pid together with that process's start time, so a reused pid never
passes for the owner. Workspaces, build directories and cgroups carry this record; a start removes those whose
owner is gone."""

from __future__ import annotations

import json
import os
from pathlib import Path

OWNER_FILE = "owner.json"


def process_start(pid: int) -> str | None:
    """The kernel's start time of `pid` (clock ticks since boot), or None when no such process runs."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_bytes()
    except OSError:
        return None
    fields = stat[stat.rfind(b")") + 2:].split()  # state is field 3; starttime is field 22
    return fields[19].decode() if len(fields) > 19 else None


def identity() -> str:
    """This process as `<pid>-<start>`: short enough for a directory or cgroup name."""
    return f"{os.getpid()}-{process_start(os.getpid())}"


def alive(ident: str) -> bool:
    pid, _, start = ident.partition("-")
    return pid.isdigit() and process_start(int(pid)) == start


def write_owner(directory: Path) -> None:
    (directory / OWNER_FILE).write_text(json.dumps({"owner": identity()}))


def owner_gone(directory: Path) -> bool:
    """True only when the directory names an owner and that owner is dead; unknown directories are left alone."""
    try:
        ident = json.loads((directory / OWNER_FILE).read_text())["owner"]
    except (OSError, ValueError, KeyError, TypeError):
        return False
    return isinstance(ident, str) and not alive(ident)
