"""Leaf's patch capture and Harbor's grading, run only after every process the agent started is gone: the verifier
gets a fresh sandbox (same files, or its own environment in Harbor's separate mode) with a fresh /tests and an
empty /logs/verifier, and the verdict comes only from what it wrote there, read through the backend. Also the
oracle run that proves a task solvable. Written against the sandbox protocol only."""

from __future__ import annotations

import asyncio
import base64
import json
import math
import re
import shlex
import time
import uuid
from collections.abc import Awaitable, Callable

from pydantic import BaseModel

from sandbox import swebench_grading
from sandbox.shared import git_safe
from sandbox.harbor import resolve_host_values
from sandbox.protocol import ExecResult, GitBaseline, OpenedSandbox, Sandbox, SandboxOptions, write_file
from sandbox.tasks import SWEBenchFacts, Task
from sandbox.shared.tool_runner import STREAM_CAP_BYTES

PATCH_TIMEOUT_SEC = 120.0
PATCH_CAP_BYTES = STREAM_CAP_BYTES
REWARD_CAP_BYTES = 1 << 20
TEST_SH = "bash /tests/test.sh"  # how the verifier runs the task's tests, as Harbor runs them


class GradeResult(BaseModel):
    """`error` is set when the verifier could not give a verdict; such an episode is not a miss but an error."""

    resolved: bool
    reward: float | None
    error: str | None = None
    detail: str | None = None
    seconds: float
    exit_code: int | None = None
    output_tail: str = ""
    # What the verifier could reach (`verifier_network`): "none", "internet" (what the task's environment allows,
    # as Harbor gives it) or "outside" (the internet, never this host's or a private address: SWE-bench's grading).
    verifier_network: str | None = None


class GradeErrorKind:
    VERIFIER_TIMEOUT = "verifier_timeout"
    REWARD_MISSING = "reward_missing"
    REWARD_INVALID = "reward_invalid"
    PATCH_UNAVAILABLE = "patch_unavailable"  # SWE-bench grades the patch alone, and there is none to grade
    GIT_RESTORE_FAILED = "git_restore_failed"  # the repository's git config could not be put back: test.sh not run
    VERIFIER_KILLED = "verifier_killed"  # test.sh ended by a signal: whatever reward is there, it did not write last


class Verification(BaseModel):
    """What the host learns after the agent: the patch (Leaf's way, capped) and the verifier's verdict."""

    patch: str = ""
    patch_error: str | None = None
    grade: GradeResult
    reward_document: dict | None = None  # reward.json as the verifier wrote it, or SWE-bench's report


def verifier_network(task: Task, options: SandboxOptions | None) -> str:
    """The network a task's verifier gets. A SWE-bench instance is graded as SWE-bench's harness grades it, with
    network ("outside": never this host's or a private address), unless the options say "none"; its agent keeps
    the task's none. Every other task's verifier has what its environment allows, as in Harbor: the agent's in
    shared mode, the verifier environment's in separate mode."""
    if task.swebench is not None and options is not None:
        return "outside" if options.verifier_network == "swebench" else "none"
    config = task.config
    environment = (config.verifier_environment or task.environment) if config.verifier_mode == "separate" \
        else task.environment
    return "internet" if environment.allow_internet else "none"


async def verify(opened: OpenedSandbox, task: Task, *, capture: bool = True) -> Verification:
    """Kills every agent process; patch capture in a fresh sandbox over the agent's files; then the verifier in
    its own fresh sandbox. The verifier's own leftovers are killed too before its reward is read. A SWE-bench
    instance is graded on the patch alone (its verifier is a fresh container that gets only the patch), so its
    patch is always captured."""
    swebench = task.swebench
    baseline = opened.git_baseline if swebench is None and task.config.verifier_mode != "separate" else None
    prepared = (False, False)  # (restored, staged) by the one-exec path
    tested: ExecResult | None = None  # test.sh's result, where it ran in that same exec
    try:
        if capture or swebench is not None:
            await opened.quiesce()
            if _one_exec(opened, baseline):
                assert baseline is not None
                made = getattr(opened, "prepare_capture", None)  # the local backend's host-made git directory
                patch, patch_error, prepared, tested = await prepare_repository(
                    opened.sandbox, baseline, task, capture_dir=made() if made is not None else None)
            else:
                patch, patch_error = await capture_patch(opened.sandbox, opened.git_baseline)
        else:
            patch, patch_error = "", None
        if swebench is not None and patch_error is not None:  # nothing to grade: no verifier is worth starting
            grade = GradeResult(resolved=False, reward=None, error=GradeErrorKind.PATCH_UNAVAILABLE,
                                detail=f"no patch to grade: {patch_error}", seconds=0.0)
            return Verification(patch=patch, patch_error=patch_error, grade=grade)
        if tested is not None:  # test.sh ran in that same exec, in the verifier's sandbox capture ran in
            result = tested
        else:
            await opened.start_verifier()
            if swebench is not None and patch:
                await write_file(opened.sandbox, swebench_grading.PATCH_PATH, patch.encode(), user="root")
            restored, staged = prepared
            if baseline is not None and not restored and (
                    failed := await restore_repository(opened.sandbox, baseline)):
                grade = GradeResult(resolved=False, reward=None, error=GradeErrorKind.GIT_RESTORE_FAILED,
                                    detail=failed, seconds=0.0)
                return Verification(patch=patch, patch_error=patch_error, grade=grade)
            result = await _run_verifier(opened.sandbox, task, opened.verifier_user, None if staged else baseline)
    finally:
        await opened.stop()
    return await _verdict(opened, task, result, patch, patch_error)


async def _verdict(opened: OpenedSandbox, task: Task, result: ExecResult, patch: str,
                   patch_error: str | None) -> Verification:
    """The grade from test.sh's result and what it wrote, read once its sandbox is stopped."""
    swebench = task.swebench
    tail = (result.stdout + "\n" + result.stderr).strip()[-2000:]
    if result.timed_out:
        reward, error, document = None, GradeErrorKind.VERIFIER_TIMEOUT, None
        detail = f"test.sh ran longer than verifier timeout_sec={task.config.verifier.timeout_sec:g}"
    elif killed_by := _signal_of(result.exit_code):
        # The code under test runs as the verifier's user: it can write a reward, then kill test.sh before test.sh
        # writes its own. A test.sh that did not end by itself gave no verdict.
        reward, error, document = None, GradeErrorKind.VERIFIER_KILLED, None
        detail = f"test.sh was killed by signal {killed_by}: its reward is not trusted"
    elif swebench is not None:
        reward, error, detail, document, log_tail = await read_swebench_report(opened.read_verifier_file, swebench,
                                                                               patch)
        tail = tail or log_tail
    else:
        reward, error, detail, document = await read_reward(opened.read_verifier_file)
    # A backend that gives a verifier other than the task's network says which (container, kubernetes).
    network = getattr(opened, "verifier_network", None) or verifier_network(task, None)
    grade = GradeResult(resolved=reward is not None and reward >= 1, reward=reward, error=error, detail=detail,
                        seconds=result.seconds, exit_code=result.exit_code, output_tail=tail,
                        verifier_network=network)
    return Verification(patch=patch, patch_error=patch_error, grade=grade, reward_document=document)


async def capture_patch(sandbox: Sandbox, baseline: GitBaseline | None) -> tuple[str, str | None]:
    """Leaf's way (stage everything, diff the index, binary-safe), but against the baseline recorded before the
    agent and in a git directory of the harness's own, so nothing the agent wrote in its repository runs and its
    index is left as it was (sandbox/shared/git_safe.py). A patch over PATCH_CAP_BYTES is not kept (the episode is still
    graded on its workspace): (patch, why it is missing)."""
    if baseline is None:
        return "", "no git baseline was recorded before the agent (no repository, or no git in the image)"
    result = await sandbox.exec(git_safe.capture_command(baseline), timeout=PATCH_TIMEOUT_SEC)
    if result.timed_out:
        return "", f"patch capture ran longer than {PATCH_TIMEOUT_SEC:g}s"
    if not result.ok:
        return "", f"patch capture failed (exit {result.exit_code}): {result.stderr.strip()[-500:]}"
    if result.truncated_bytes:
        return "", f"the patch exceeds {PATCH_CAP_BYTES} bytes; not kept"
    return result.stdout, None


async def prepare_repository(sandbox: Sandbox, baseline: GitBaseline, task: Task, *, capture_dir: str | None = None
                             ) -> tuple[str, str | None, tuple[bool, bool], ExecResult | None]:
    """`capture_patch`, `restore_repository` and the stage before test.sh in one exec (`git_safe.prepare_command`),
    where the capture sandbox is already the verifier's and one user runs everything; on a sandbox that runs two
    commands in one (`exec_then`: the local backend), `task`'s test.sh too: (patch, why it is missing, (restored,
    staged), test.sh's result or None). A part that did not finish is left to the separate calls, which `verify`
    then makes. `capture_dir`: capture's git directory, already made by the host (git_safe.prepare_command)."""
    marker = f"leafcost-{uuid.uuid4().hex}"
    exec_then = getattr(sandbox, "exec_then", None)
    tested = None
    if exec_then is not None:
        result, tested = await exec_then(git_safe.prepare_command(baseline, marker, then=_test_command(task),
                                                                  capture_dir=capture_dir),
                                         timeout=3 * PATCH_TIMEOUT_SEC, marker=marker,
                                         then_timeout=task.config.verifier.timeout_sec)
    else:
        result = await sandbox.exec(git_safe.prepare_command(baseline, marker, capture_dir=capture_dir),
                                    timeout=3 * PATCH_TIMEOUT_SEC)
    capture_errors, captured, restore_output, restored = git_safe.prepared_parts(result.stderr, marker)
    if captured is None:
        why = (f"patch capture ran longer than {3 * PATCH_TIMEOUT_SEC:g}s" if result.timed_out
               else f"patch capture failed (exit {result.exit_code}): {capture_errors.strip()[-500:]}")
        return "", why, (False, False), None
    if captured != 0:
        patch, patch_error = "", f"patch capture failed (exit {captured}): {capture_errors.strip()[-500:]}"
    elif result.truncated_bytes:
        patch, patch_error = "", f"the patch exceeds {PATCH_CAP_BYTES} bytes; not kept"
    else:
        patch, patch_error = result.stdout, None
    if restored != 0:  # not finished, or failed: the separate restore says why (or does it)
        return patch, patch_error, (False, False), None
    return patch, patch_error, (True, tested is not None or result.ok), tested


def _one_exec(opened: OpenedSandbox, baseline: GitBaseline | None) -> bool:
    """Whether capture, restore and stage can run as one exec: the backend says its capture sandbox already is the
    verifier's (`capture_in_verifier`), one user runs everything, and the config fits the command line."""
    return (baseline is not None and getattr(opened, "capture_in_verifier", False) and opened.verifier_user is None
            and baseline.restore_as is None and git_safe.config_inline(baseline))


async def run_oracle(sandbox: Sandbox, task: Task) -> ExecResult:
    """Harbor's oracle: the task's own solution/solve.sh (bound read-only at /solution) instead of an agent."""
    return await sandbox.exec("bash /solution/solve.sh", timeout=task.config.agent.timeout_sec,
                              env=resolve_host_values(task.config.solution.env, "solution.env"))


async def restore_repository(sandbox: Sandbox, baseline: GitBaseline) -> str | None:
    """Harbor's shared mode: the repository's config, hooks and attributes as they were before the agent, once no
    agent process is left, so neither Leaf's `git add -A` nor test.sh's own git commands (SWE-bench-style tasks
    check out and apply) run a program the agent configured. None, or why it could not be done."""
    config_path = None  # the usual config travels inside the restore command: one exec, no file in /tmp
    if baseline.config_b64 and not git_safe.config_inline(baseline):
        config_path = f"/tmp/leafcost-gitconfig-{uuid.uuid4().hex}"  # a name nobody could plant a link at beforehand
        await write_file(sandbox, config_path, base64.b64decode(baseline.config_b64), user=baseline.restore_as)
    result = await sandbox.exec(git_safe.restore_command(baseline, config_path), timeout=PATCH_TIMEOUT_SEC,
                                user=baseline.restore_as)
    if not result.ok:
        return (f"the repository's git config could not be put back (exit {result.exit_code}): "
                f"{(result.stderr or result.stdout).strip()[-300:]}")
    return None


async def _run_verifier(sandbox: Sandbox, task: Task, user: str | None,
                        baseline: GitBaseline | None) -> ExecResult:
    started = time.monotonic()
    if task.swebench is None and baseline is not None:
        await sandbox.exec(git_safe.stage_command(baseline), timeout=PATCH_TIMEOUT_SEC, user=user)
    result = await sandbox.exec(TEST_SH, timeout=task.config.verifier.timeout_sec,
                                env=verifier_env(task), user=user)
    return result.model_copy(update={"seconds": time.monotonic() - started})


def verifier_env(task: Task) -> dict[str, str]:
    """test.sh's environment on top of the sandbox's: the task's verifier.env, and outside SWE-bench a bytecode
    cache of the verifier's own. Python validates .pyc files by mtime (whole seconds) and size: an edit made within
    the second of an earlier import, keeping the size, would be graded on stale bytecode. (SWE-bench's verifier is a
    fresh container, run exactly as SWE-bench's harness runs it.)"""
    env = resolve_host_values(task.config.verifier.env, "verifier.env")
    if task.swebench is None:
        env = {"PYTHONPYCACHEPREFIX": f"/tmp/leafcost-verifier-{uuid.uuid4().hex}", **env}
    return env


def _test_command(task: Task) -> str:
    """test.sh as `_run_verifier` runs it, as the last command of the one exec, its environment exported just
    before (the stage before it keeps the sandbox's, as the separate stage does); `env` where a name is not one
    the shell can export."""
    env = verifier_env(task)
    assignments = " ".join(shlex.quote(f"{key}={value}") for key, value in env.items())
    if all(_SHELL_NAME.fullmatch(key) for key in env):
        return f"export {assignments}\nexec {TEST_SH}" if env else f"exec {TEST_SH}"
    return f"exec env -- {assignments} {TEST_SH}"


_SHELL_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")


async def read_reward(read: Callable[[str, int], Awaitable[bytes | None]]
                      ) -> tuple[float | None, str | None, str | None, dict | None]:
    """Harbor's rewards: reward.json (a JSON object of one or more numbers), else reward.txt (one number). The task
    counts as resolved on the `reward` key, or, without one, on the lowest of all keys (every key at its maximum).
    Anything else is an error with its reason. Also reward.json itself (all keys are kept; SWE-bench's report
    lives there)."""
    try:
        data = await read("reward.json", REWARD_CAP_BYTES)
    except OSError as exc:
        return None, GradeErrorKind.REWARD_INVALID, f"reward.json unreadable: {exc}", None
    if data is not None:
        try:
            document = json.loads(data.decode("utf-8"))
        except (ValueError, RecursionError) as exc:
            return None, GradeErrorKind.REWARD_INVALID, f"reward.json unreadable: {type(exc).__name__}: {exc}", None
        if not isinstance(document, dict) or not document:
            return None, GradeErrorKind.REWARD_INVALID, "reward.json is not a JSON object of rewards", None
        if "reward" in document:
            return (*_as_reward(document["reward"], "reward.json"), document)
        rewards = [_as_reward(value, f"reward.json key {key!r}") for key, value in document.items()]
        if failed := next((r for r in rewards if r[1] is not None), None):
            return (*failed, document)
        return min(r[0] for r in rewards), None, None, document
    try:
        data = await read("reward.txt", REWARD_CAP_BYTES)
    except OSError as exc:
        return None, GradeErrorKind.REWARD_INVALID, f"reward.txt unreadable: {exc}", None
    if data is not None:
        try:
            text = data.decode("utf-8").strip()
        except ValueError as exc:
            return None, GradeErrorKind.REWARD_INVALID, f"reward.txt unreadable: {exc}", None
        return (*_as_reward(text, "reward.txt"), None)
    return None, GradeErrorKind.REWARD_MISSING, "the verifier wrote neither reward.json nor reward.txt", None


async def read_swebench_report(read: Callable[[str, int], Awaitable[bytes | None]], facts: SWEBenchFacts,
                               patch: str) -> tuple[float | None, str | None, str | None, dict | None, str]:
    """SWE-bench's verdict on the eval script's log: (reward 1 or 0, error, detail, SWE-bench's report, the log's
    last lines). No log to read gives no verdict."""
    name = swebench_grading.TEST_OUTPUT
    try:
        log = await read(name, swebench_grading.LOG_CAP_BYTES)
    except OSError as exc:
        return None, GradeErrorKind.REWARD_INVALID, f"{name} unreadable: {exc}", None, ""
    if log is None:
        return None, GradeErrorKind.REWARD_MISSING, f"the verifier wrote no {name}", None, ""
    report = await asyncio.to_thread(swebench_grading.grade_log, facts, log, patch)
    tail = log[-2000:].decode("utf-8", "replace").strip()
    return (1.0 if report.get("resolved") else 0.0), None, swebench_grading.why_unresolved(report), report, tail


def _signal_of(exit_code: int | None) -> int | None:
    """The signal that ended test.sh: a negative exit code where the runner saw it die, 128 + N through a container
    engine's or a pod's shell."""
    if exit_code is None:
        return None
    if exit_code < 0:
        return -exit_code
    return exit_code - 128 if 128 < exit_code <= 128 + 64 else None


def _as_reward(value: object, source: str) -> tuple[float | None, str | None, str | None]:
    try:
        reward = float(value)  # type: ignore[arg-type]
    except (TypeError, ValueError, OverflowError):
        return None, GradeErrorKind.REWARD_INVALID, f"{source} holds {str(value)[:80]!r}, not a number"
    if isinstance(value, bool) or not math.isfinite(reward):
        return None, GradeErrorKind.REWARD_INVALID, f"{source} holds {value!r}, not a finite number"
    return reward, None, None
