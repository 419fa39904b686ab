"""Leaf's patch capture and Harbor's grading, plus the oracle run that proves a task solvable."""

from __future__ import annotations

import json
import math
import os
import shutil
import stat
import time
import uuid
from pathlib import Path

from pydantic import BaseModel

from sandbox.local import ExecResult, LocalSandbox
from sandbox.tasks import Task

PATCH_TIMEOUT_SEC = 120.0


class GradeResult(BaseModel):
    """`error` is set when the verifier could not give a verdict; such an episode is not a miss but an error."""

    resolved: bool
    reward: float | None
    error: str | None = None
    detail: str | None = None
    seconds: float
    exit_code: int | None = None
    output_tail: str = ""


class GradeErrorKind:
    VERIFIER_TIMEOUT = "verifier_timeout"
    REWARD_MISSING = "reward_missing"
    REWARD_INVALID = "reward_invalid"


async def capture_patch(sandbox: LocalSandbox) -> str:
    """Leaf's way: stage everything, diff the index against HEAD (binary-safe), then unstage again."""
    result = await sandbox.exec("git add -A && git diff --cached --binary", timeout=PATCH_TIMEOUT_SEC)
    await sandbox.exec("git reset -q --mixed HEAD", timeout=PATCH_TIMEOUT_SEC)
    if not result.ok:
        raise RuntimeError(f"patch capture failed: {result.stderr.strip()[-500:]}")
    return result.stdout


async def run_oracle(sandbox: LocalSandbox, task: Task) -> ExecResult:
    """Harbor's oracle: the task's own solution/solve.sh instead of an agent."""
    if task.solution_dir is None:
        raise FileNotFoundError(f"task {task.task_id} has no solution/solve.sh")
    _replace_dir(task.solution_dir, sandbox, "/solution")
    return await sandbox.exec("bash /solution/solve.sh", timeout=task.config.agent.timeout_sec,
                              env=task.config.solution.env)


async def grade(sandbox: LocalSandbox, task: Task) -> GradeResult:
    """Harbor's verifier, run after the agent stops: hidden tests copied in only now, reward read from /logs."""
    started = time.monotonic()
    verifier_dir = _replace_dir(None, sandbox, "/logs/verifier")
    await sandbox.exec("git add -A", timeout=PATCH_TIMEOUT_SEC)
    _replace_dir(task.tests_dir, sandbox, "/tests")
    timeout = task.config.verifier.timeout_sec
    # Python validates .pyc files by mtime (whole seconds) and size: an edit made within the second of an earlier
    # import, keeping the size, would be graded on stale bytecode. The verifier gets a bytecode cache of its own.
    env = {"PYTHONPYCACHEPREFIX": f"/tmp/leafcost-verifier-{uuid.uuid4().hex}", **task.config.verifier.env}
    result = await sandbox.exec("bash /tests/test.sh", timeout=timeout, env=env)
    tail = (result.stdout + "\n" + result.stderr).strip()[-2000:]
    common = {"seconds": time.monotonic() - started, "exit_code": result.exit_code, "output_tail": tail}
    if result.timed_out:
        return GradeResult(resolved=False, reward=None, error=GradeErrorKind.VERIFIER_TIMEOUT,
                           detail=f"test.sh ran longer than verifier timeout_sec={timeout:g}", **common)
    reward, error, detail = read_reward(verifier_dir)
    return GradeResult(resolved=reward is not None and reward >= 1, reward=reward, error=error, detail=detail,
                       **common)


def read_reward(verifier_dir: Path) -> tuple[float | None, str | None, str | None]:
    """reward.json's `reward` key, else reward.txt; anything else is an error with its reason."""
    json_path, text_path = verifier_dir / "reward.json", verifier_dir / "reward.txt"
    if json_path.exists() or json_path.is_symlink():
        try:
            value = json.loads(_read_regular(json_path))["reward"]
        except (OSError, ValueError, KeyError, TypeError) as exc:
            return None, GradeErrorKind.REWARD_INVALID, f"reward.json unreadable: {type(exc).__name__}: {exc}"
        return _as_reward(value, "reward.json")
    if text_path.exists() or text_path.is_symlink():
        try:
            text = _read_regular(text_path).strip()
        except (OSError, ValueError) as exc:
            return None, GradeErrorKind.REWARD_INVALID, f"reward.txt unreadable: {exc}"
        return _as_reward(text, "reward.txt")
    return None, GradeErrorKind.REWARD_MISSING, "the verifier wrote neither reward.json nor reward.txt"


def _as_reward(value: object, source: str) -> tuple[float | None, str | None, str | None]:
    try:
        reward = float(value)  # type: ignore[arg-type]
    except (TypeError, ValueError):
        return None, GradeErrorKind.REWARD_INVALID, f"{source} holds {str(value)[:80]!r}, not a number"
    if isinstance(value, bool) or not math.isfinite(reward):
        return None, GradeErrorKind.REWARD_INVALID, f"{source} holds {value!r}, not a finite number"
    return reward, None, None


def _replace_dir(source: Path | None, sandbox: LocalSandbox, container_path: str) -> Path:
    """Empties a directory of the sandbox in place (a bind mount must stay) and fills it from `source`.

    The agent controls everything under the sandbox root, so no component of the path is trusted: a symlink
    there would point the host at its own files."""
    destination = sandbox.root
    for part in Path(container_path.lstrip("/")).parts:
        destination = destination / part
        if destination.is_symlink() or (destination.exists() and not destination.is_dir()):
            destination.unlink()
        destination.mkdir(exist_ok=True)
    for child in destination.iterdir():
        if child.is_dir() and not child.is_symlink():
            shutil.rmtree(child)
        else:
            child.unlink()
    if source is not None:
        shutil.copytree(source, destination, symlinks=True, dirs_exist_ok=True)
    return destination


def _read_regular(path: Path, limit: int = 1 << 20) -> str:
    """A reward file written by code we do not trust: a regular file only (no symlink, FIFO or device), capped."""
    fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)  # fstat, not lstat: no race to win
    with os.fdopen(fd, "rb") as handle:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            raise OSError(f"{path.name} is not a regular file")
        return handle.read(limit).decode("utf-8")
