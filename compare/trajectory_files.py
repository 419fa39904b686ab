"""An attempt's trajectory file: written by the runner beside the ledger (`trajectories/RUN/ARM/TASK.sSEED.aN.json`,
TASK escaped and bounded by `file_stem`, atomically, always valid UTF-8), and read back for the API and the web
page: only a regular file beneath the ledger's own `trajectories/` folder, reached without following any symlink,
and at most TRAJECTORY_MAX_BYTES of it, so neither a crafted ledger row nor a link planted in that folder can make
the server read anything else."""

from __future__ import annotations

import hashlib
import json
import os
import string
from pathlib import Path
from typing import Any

from adapters.answers import valid_text
from sandbox.shared import confined

TRAJECTORY_MAX_BYTES = 64 * 2**20
TRAJECTORIES_FOLDER = "trajectories"
STEM_MAX_CHARS = 160  # leaves room for `.sSEED.aN.json` and a temporary file's prefix and suffix within 255 bytes
_PLAIN = frozenset(string.ascii_letters + string.digits + "_.-")


def trajectories_root(db_path: Path | str) -> Path:
    """Where the runner writes a ledger's trajectories: `trajectories/` beside the (resolved) ledger file."""
    return Path(db_path).resolve().parent / TRAJECTORIES_FOLDER


def trajectory_path(run_dir: Path, arm: str, task_id: str, seed: int, attempt: int) -> Path:
    """Where one attempt's trajectory goes under its run's folder (`trajectories_root(db) / run_id`). The task id
    reaches the file system only through `file_stem` (arm names are short and plain by the spec's pattern)."""
    return run_dir / arm / f"{file_stem(task_id)}.s{seed}.a{attempt}.json"


def file_stem(name: str) -> str:
    """`name` as one plain, bounded file-name component: [A-Za-z0-9_.-] kept, every other character as `%XX` of
    its UTF-8 bytes (so distinct names stay distinct, and `/`, `..`, control characters never reach a path);
    past STEM_MAX_CHARS the escaped name is cut and `~` plus 16 hex digits of its SHA-256 added (a Harbor task
    folder may be 255 bytes long, the file system's whole limit for one name)."""
    escaped = "".join(c if c in _PLAIN else "".join(f"%{b:02X}" for b in c.encode("utf-8", "surrogatepass"))
                      for c in name)
    if escaped.startswith("."):  # never a hidden file, never `.` or `..`
        escaped = "%2E" + escaped[1:]
    if len(escaped) <= STEM_MAX_CHARS and escaped:
        return escaped
    digest = hashlib.sha256(name.encode("utf-8", "surrogatepass")).hexdigest()[:16]
    return f"{escaped[:STEM_MAX_CHARS - 17]}~{digest}"


def write_trajectory(path: Path, document: dict[str, Any]) -> None:
    """Whole or not at all: a reader (or a killed run) never sees half a file. The file is valid UTF-8 JSON
    whatever the document holds: a lone surrogate (from an answer, a log or an error) is written as U+FFFD,
    as the adapters store answers (adapters.answers)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    temporary = path.with_name(f".{path.name[:STEM_MAX_CHARS]}.tmp-{os.getpid()}")  # a name as bounded as path's
    text = valid_text(json.dumps(document, ensure_ascii=False, default=str))  # surrogates sit only inside strings
    temporary.write_bytes(text.encode("utf-8"))
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
