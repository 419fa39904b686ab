"""Leaf's patch capture and Harbor's grading, run only after every process the agent started is gone: the verifier
gets a fresh sandbox over the same workspace, its /tests and /logs/verifier are new host directories, and the
verdict comes only from what it wrote there. Also the oracle run that proves a task solvable."""

from __future__ import annotations

import json
import math
import time
import uuid
from pathlib import Path

from pydantic import BaseModel

from sandbox import confined
from sandbox.environment import OpenedSandbox
from sandbox.local import ExecResult, LocalSandbox
from sandbox.tasks import Task
from sandbox.tool_runner import STREAM_CAP_BYTES

PATCH_TIMEOUT_SEC = 120.0
PATCH_CAP_BYTES = STREAM_CAP_BYTES
# Leaf's `git add -A && git diff --cached --binary`, with what the agent's repository config could bend turned
# off: an external diff or textconv program (output of any size, any content) and an fsmonitor hook.
_GIT = "git -c core.fsmonitor=false"
PATCH_COMMAND = f"{_GIT} add -A && {_GIT} diff --cached --binary --no-ext-diff --no-textconv"


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


class Verification(BaseModel):
    """What the host learns after the agent: the patch (Leaf's way, capped) and the verifier's verdict."""

    patch: str = ""
    patch_error: str | None = None
    grade: GradeResult
    reward_document: dict | None = None  # reward.json as the verifier wrote it, when it is a JSON object


async def verify(opened: OpenedSandbox, task: Task, *, capture: bool = True) -> Verification:
    """Kills every agent process, then, in a fresh sandbox over the workspace: patch capture and the verifier.
    The verifier's own leftovers are killed too before its reward is read."""
    verifier_dir = await opened.restart_for_verifier()
    try:
        patch, patch_error = await capture_patch(opened.sandbox) if capture else ("", None)
        result = await _run_verifier(opened.sandbox, task)
    finally:
        await opened.stop()
    if not result.timed_out:
        reward, error, detail, document = read_reward(verifier_dir)
    else:
        reward, error, document = None, GradeErrorKind.VERIFIER_TIMEOUT, None
        detail = f"test.sh ran longer than verifier timeout_sec={task.config.verifier.timeout_sec:g}"
    tail = (result.stdout + "\n" + result.stderr).strip()[-2000:]
    grade = GradeResult(resolved=reward is not None and reward >= 1, reward=reward, error=error, detail=detail,
                        seconds=result.seconds, exit_code=result.exit_code, output_tail=tail)
    return Verification(patch=patch, patch_error=patch_error, grade=grade, reward_document=document)


async def capture_patch(sandbox: LocalSandbox) -> tuple[str, str | None]:
    """Leaf's way: stage everything, diff the index against HEAD (binary-safe), then unstage again. A patch over
    PATCH_CAP_BYTES is not kept (the episode is still graded on its workspace): (patch, why it is missing)."""
    result = await sandbox.exec(PATCH_COMMAND, timeout=PATCH_TIMEOUT_SEC)
    await sandbox.exec("git reset -q --mixed HEAD", timeout=PATCH_TIMEOUT_SEC)
    if result.timed_out:
        return "", f"patch capture ran longer than {PATCH_TIMEOUT_SEC:g}s"
    if not result.ok:
        return "", f"patch capture failed (exit {result.exit_code}): {result.stderr.strip()[-500:]}"
    if result.truncated_bytes:
        return "", f"the patch exceeds {PATCH_CAP_BYTES} bytes; not kept"
    return result.stdout, None


async def run_oracle(sandbox: LocalSandbox, task: Task) -> ExecResult:
    """Harbor's oracle: the task's own solution/solve.sh (bound read-only at /solution) instead of an agent."""
    return await sandbox.exec("bash /solution/solve.sh", timeout=task.config.agent.timeout_sec,
                              env=task.config.solution.env)


async def _run_verifier(sandbox: LocalSandbox, task: Task) -> ExecResult:
    started = time.monotonic()
    await sandbox.exec(f"{_GIT} add -A", timeout=PATCH_TIMEOUT_SEC)
    # Python validates .pyc files by mtime (whole seconds) and size: an edit made within the second of an earlier
    # import, keeping the size, would be graded on stale bytecode. The verifier gets a bytecode cache of its own.
    env = {"PYTHONPYCACHEPREFIX": f"/tmp/leafcost-verifier-{uuid.uuid4().hex}", **task.config.verifier.env}
    result = await sandbox.exec("bash /tests/test.sh", timeout=task.config.verifier.timeout_sec, env=env)
    return result.model_copy(update={"seconds": time.monotonic() - started})


def read_reward(verifier_dir: Path) -> tuple[float | None, str | None, str | None, dict | None]:
    """reward.json's `reward` key, else reward.txt; anything else is an error with its reason. Also reward.json
    itself when it is a JSON object (SWE-bench's report lives there), read in the same pass."""
    names = set(_listing(verifier_dir))
    if "reward.json" in names:
        kept = None
        try:
            document = json.loads(confined.read_capped(verifier_dir, "reward.json").decode("utf-8"))
            kept = document if isinstance(document, dict) else None
            value = document["reward"]
        except (OSError, ValueError, KeyError, TypeError, RecursionError) as exc:
            detail = f"reward.json unreadable: {type(exc).__name__}: {exc}"
            return None, GradeErrorKind.REWARD_INVALID, detail, kept
        return (*_as_reward(value, "reward.json"), kept)
    if "reward.txt" in names:
        try:
            text = confined.read_capped(verifier_dir, "reward.txt").decode("utf-8").strip()
        except (OSError, ValueError) as exc:
            return None, GradeErrorKind.REWARD_INVALID, f"reward.txt unreadable: {exc}", None
        return (*_as_reward(text, "reward.txt"), None)
    return None, GradeErrorKind.REWARD_MISSING, "the verifier wrote neither reward.json nor reward.txt", None


def _as_reward(value: object, source: str) -> tuple[float | None, str | None, str | None]:
    try:
        reward = float(value)  # type: ignore[arg-type]
    except (TypeError, ValueError, OverflowError):
        return None, GradeErrorKind.REWARD_INVALID, f"{source} holds {str(value)[:80]!r}, not a number"
    if isinstance(value, bool) or not math.isfinite(reward):
        return None, GradeErrorKind.REWARD_INVALID, f"{source} holds {value!r}, not a finite number"
    return reward, None, None


def _listing(directory: Path) -> list[str]:
    try:
        return [entry.name for entry in directory.iterdir()]
    except OSError:
        return []
