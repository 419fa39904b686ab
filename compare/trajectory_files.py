"""An attempt's trajectory file: written by the runner beside the ledger (`trajectories/RUN/ARM/TASK.sSEED.aN.json`,
atomically), and read back for the API and the web page: only a regular file beneath the ledger's own
`trajectories/` folder, reached without following any symlink, and at most TRAJECTORY_MAX_BYTES of it, so
neither a crafted ledger row nor a link planted in that folder can make the server read anything else."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

from sandbox import confined

TRAJECTORY_MAX_BYTES = 64 * 2**20
TRAJECTORIES_FOLDER = "trajectories"


def trajectories_root(db_path: Path | str) -> Path:
    """Where the runner writes a ledger's trajectories: `trajectories/` beside the (resolved) ledger file."""
    return Path(db_path).resolve().parent / TRAJECTORIES_FOLDER


def trajectory_path(run_dir: Path, arm: str, task_id: str, seed: int, attempt: int) -> Path:
    """Where one attempt's trajectory goes under its run's folder (`trajectories_root(db) / run_id`)."""
    return run_dir / arm / f"{task_id}.s{seed}.a{attempt}.json"


def write_trajectory(path: Path, document: dict[str, Any]) -> None:
    """Whole or not at all: a reader (or a killed run) never sees half a file."""
    path.parent.mkdir(parents=True, exist_ok=True)
    temporary = path.with_suffix(f".tmp-{os.getpid()}")
    temporary.write_text(json.dumps(document, ensure_ascii=False, default=str))
    os.replace(temporary, path)


def read_trajectory(db_path: Path | str, stored: str | None) -> tuple[dict[str, Any] | None, str | None]:
    """The attempt's trajectory JSON, or None and why (a relative `stored` path is relative to the ledger's
    folder). The one reader the API and the web page share."""
    if not stored:
        return None, "no trajectory recorded for this attempt"
    root = trajectories_root(db_path)
    path = (root.parent / stored).resolve()  # an absolute `stored` replaces root.parent
    if path == root or not path.is_relative_to(root):
        return None, f"{stored}: not under the ledger's trajectories folder ({root}); not served"
    too_large = f"{path}: larger than {TRAJECTORY_MAX_BYTES // 2**20} MB; read the file directly"
    try:
        if path.stat().st_size > TRAJECTORY_MAX_BYTES:  # refused before 64 MB is read; the read below still caps
            return None, too_large
        # the sandbox's rule for files a run could have planted links among: nothing followed, FIFOs refused
        raw = confined.read_capped(root, path.relative_to(root).as_posix(), TRAJECTORY_MAX_BYTES + 1)
    except FileNotFoundError:
        return None, f"{path}: the trajectory file is missing"
    except confined.ConfinementError as exc:
        return None, f"{path}: {exc}; not served"
    except OSError as exc:
        return None, f"{path}: cannot be read: {exc.strerror or exc}"
    if len(raw) > TRAJECTORY_MAX_BYTES:  # grew after the stat
        return None, too_large
    try:
        document = json.loads(raw)
    except ValueError as exc:
        return None, f"{path}: cannot be read as JSON: {exc}"
    if not isinstance(document, dict):
        return None, f"{path}: not a trajectory (a JSON {type(document).__name__})"
    return document, None
