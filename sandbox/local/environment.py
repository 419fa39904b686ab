"""The local backend's environments: builds a task's environment by replaying its Dockerfile over the base root,
caches it by content hash, and opens fresh bubblewrap sandboxes on private copies of it."""

from __future__ import annotations

import asyncio
import base64
import errno
import fcntl
import glob
import hashlib
import json
import os
import shutil
import stat
import tempfile
import time
import uuid
from pathlib import Path
from typing import ClassVar

from pydantic import BaseModel

from sandbox.shared import confined
from sandbox.shared.digests import update_with_tree
from sandbox.shared.dockerfile import (
    CONTAINER_BACKENDS,
    IGNORED,
    DockerfileError,
    Instruction,
    parse_dockerfile,
    substitute,
)
from sandbox.shared.git_safe import RECORD, baseline_from_facts, baseline_index_command
from sandbox.leaf_tools import LEAF_TOOLS_SHA256, RUNNER_VERSION
from sandbox.local.limits import Limits, remove_orphan_cgroups
from sandbox.local.commands import CommandSandbox
from sandbox.local.bwrap import HARBOR_TOP_DIRS, RESERVED_DIRS, LocalSandbox, Mount, bwrap_version, private_dir_source
from sandbox.shared.owner import owner_gone, write_owner
from sandbox.protocol import BuildError, GitBaseline, SandboxError, SandboxOptions, SandboxSpec
from sandbox.tasks import Task

# Bump when the way environments are built changes, so old cache entries are not reused.
BUILD_FORMAT = "4"
WORKSPACE_PREFIX = "leafcost-ws-"
BASELINE_INDEX_FILE = "baseline.index"  # beside an environment's root/: the git index of its baseline commit
BASELINE_COMMIT = ("git init -q 2>/dev/null; git add -A && git -c user.name=leafcost -c user.email=leafcost@localhost "
                   "-c commit.gpgsign=false commit -q --allow-empty --no-verify -m 'leafcost baseline'")


class BuiltEnvironment(BaseModel):
    key: str
    root: Path
    workdir: str
    env: dict[str, str]
    from_image: str
    ignored_instructions: list[str]
    git: GitBaseline | None = None  # the repository as built: what capture diffs against, what grading restores
    cache_hit: bool = False
    build_seconds: float


class LocalOpened(BaseModel, arbitrary_types_allowed=True):
    """One attempt's workspace and the bubblewrap sandbox currently running over it (the `OpenedSandbox` of the
    local backend): first the agent's, then fresh ones over the same files once every agent process is killed."""

    sandbox: LocalSandbox | CommandSandbox  # the agent's, then the verifier's
    task: Task
    options: SandboxOptions
    built: BuiltEnvironment
    spec: SandboxSpec
    spec_hash: str
    start_seconds: float
    workspace: Path
    verifier_user: str | None = None  # everything runs as the one sandbox user
    verifier_dir: Path | None = None
    finished_cpu_seconds: float | None = 0.0  # of the sandboxes already stopped; None once one could not tell
    _verifier_ready: bool = False  # the current sandbox is a fresh verifier's in which only patch capture ran
    # Patch capture runs in the verifier's own sandbox, as the one user: grading may capture, restore and stage in
    # one exec (sandbox/grading.py, `prepare_repository`).
    capture_in_verifier: ClassVar[bool] = True

    @property
    def git_baseline(self) -> GitBaseline | None:
        """Recorded by the build, in the environment cache, where no agent ever was."""
        return self.built.git

    def cpu_seconds(self) -> float | None:
        """CPU time of every sandbox of this episode so far (cgroups only)."""
        current = self.sandbox.cpu_seconds()
        if self.finished_cpu_seconds is None or (current is None and self.sandbox.alive):
            return None
        return self.finished_cpu_seconds + (current or 0.0)

    async def stop(self) -> None:
        """Kills every process of the current sandbox (its PID namespace and cgroup), not asks them."""
        if not self.sandbox.closed:
            used = self.sandbox.cpu_seconds()
            await self.sandbox.close()
            self.finished_cpu_seconds = (None if used is None or self.finished_cpu_seconds is None
                                         else self.finished_cpu_seconds + used)

    async def quiesce(self) -> None:
        """The fresh sandbox over the agent's files is already the verifier's: patch capture (the harness's own git,
        which runs nothing the agent wrote) is all that runs in it before `start_verifier` keeps it, so an episode
        starts two sandboxes, not three."""
        await self._start_verifier_sandbox()
        self._verifier_ready = True

    def prepare_capture(self) -> str | None:
        """Patch capture's git directory (git_safe's `_CAPTURE` $P), made by the host in the verifier's own /tmp
        before any of its commands ran (a host directory no agent ever had), with the build's baseline index where
        there is one: its path inside, or None where capture makes its own."""
        git = self.built.git
        if git is None or not self._verifier_ready or not isinstance(self.sandbox, CommandSandbox):
            return None
        name = f"leafcost-git.{uuid.uuid4().hex}"
        made = private_dir_source(self.sandbox.scratch, "/tmp") / name / "git"
        (made / "objects" / "info").mkdir(parents=True)
        (made / "refs").mkdir()
        (made / "HEAD").write_text("ref: refs/heads/leafcost\n")
        (made / "objects" / "info" / "alternates").write_text(f"{git.git_dir}/objects\n")
        index = self.built.root.parent / BASELINE_INDEX_FILE
        if index.is_file():
            shutil.copyfile(index, made / "index")
        return f"/tmp/{name}"

    async def start_verifier(self) -> None:
        """A fresh /tests (a copy of the task's tests) and a fresh /logs/verifier, both made by the host where no
        agent process ever was, in a new sandbox over the same workspace (the one `quiesce` started, if it runs)."""
        ready, self._verifier_ready = self._verifier_ready, False
        if ready and self.sandbox.alive:
            return
        await self._start_verifier_sandbox()

    async def _start_verifier_sandbox(self) -> None:
        await self.stop()
        fresh = Path(tempfile.mkdtemp(prefix="verify-", dir=self.workspace))
        tests, verifier = fresh / "tests", fresh / "verifier"
        await asyncio.to_thread(shutil.copytree, self.task.tests_dir, tests, symlinks=True)
        verifier.mkdir()
        self.verifier_dir = verifier
        mounts = [Mount(source=tests, target="/tests"), Mount(source=verifier, target="/logs/verifier"),
                  *self._agent_logs()]
        if self.options.unsafe_no_isolation:
            self.sandbox = await _start(self.task, self.options, self.workspace, self.built, mounts)
            return
        # No tool runs in the verifier: each of its commands is a bubblewrap of its own (sandbox/local/commands.py).
        env = {**self.built.env, **self.task.environment.env}
        self.sandbox = CommandSandbox(self.workspace / "root", workdir=self.built.workdir, env=env,
                                      limits=task_limits(self.task), network=self.task.environment.allow_internet,
                                      options=self.options, mounts=mounts, scratch=fresh / "scratch")

    async def read_verifier_file(self, name: str, limit: int) -> bytes | None:
        if self.verifier_dir is None or not confined.lexists(self.verifier_dir, name):
            return None
        data = confined.read_capped(self.verifier_dir, name, limit + 1)
        if len(data) > limit:
            raise OSError(f"{name} is larger than {limit} bytes")
        return data

    async def close(self) -> None:
        await self.stop()
        await asyncio.to_thread(shutil.rmtree, self.workspace, True)

    def _agent_logs(self) -> list[Mount]:
        return [Mount(source=self.workspace / "agent-logs", target="/logs/agent")]


def task_limits(task: Task) -> Limits:
    env = task.environment
    return Limits(cpus=env.cpus, memory_mb=env.memory_mb, pids=env.pids)


def environment_key(task: Task, options: SandboxOptions) -> str:
    """Content hash of what the environment is built from: Dockerfile, build context, base root, build format."""
    digest = hashlib.sha256()
    for part in (BUILD_FORMAT, options.base_root, json.dumps(sorted(options.extra_ro_binds)),
                 str(options.unsafe_no_isolation), str(task.environment.allow_internet),
                 str(task.environment.workdir)):
        digest.update(part.encode() + b"\0")
    digest.update(task.dockerfile.read_bytes())
    update_with_tree(digest, task.build_context)
    return digest.hexdigest()[:32]


async def build_environment(task: Task, options: SandboxOptions) -> BuiltEnvironment:
    """The cached environment for a task, building it first if no finished build with its key exists."""
    key = await asyncio.to_thread(environment_key, task, options)  # reads the build context: off the event loop
    envs = Path(options.cache_dir) / "envs"
    envs.mkdir(parents=True, exist_ok=True)
    if (cached := _cached(envs / key)) is not None:
        return cached
    lock = await asyncio.to_thread(_lock_file, envs / f"{key}.lock")
    try:
        if (cached := _cached(envs / key)) is not None:  # another worker built it while we waited
            return cached
        staging = envs / f".building-{key}-{uuid.uuid4().hex[:8]}"
        try:
            staging.mkdir()
            write_owner(staging)
            built = await asyncio.wait_for(_build(task, options, key, staging / "root"),
                                           task.environment.build_timeout_sec)
            (staging / "manifest.json").write_text(built.model_dump_json(indent=2))
            os.rename(staging, envs / key)  # atomic: a half-built environment is never visible under its key
        except asyncio.TimeoutError:
            raise BuildError(f"task {task.task_id}: environment build exceeded build_timeout_sec="
                             f"{task.environment.build_timeout_sec:g}") from None
        finally:
            shutil.rmtree(staging, ignore_errors=True)  # gone after the rename unless the build failed
        return built.model_copy(update={"root": envs / key / "root"})
    finally:
        lock.close()


def _cached(directory: Path) -> BuiltEnvironment | None:
    manifest = directory / "manifest.json"
    if not manifest.exists():
        return None
    built = BuiltEnvironment.model_validate_json(manifest.read_text())
    return built.model_copy(update={"cache_hit": True, "root": directory / "root"})


async def open_local_sandbox(task: Task, options: SandboxOptions, *, solution: bool = False) -> LocalOpened:
    """A fresh sandbox for one episode on a private copy of the task's built environment; `solution` binds the
    task's solution/ read-only at /solution (the oracle)."""
    started = time.monotonic()
    if reasons := unsupported_locally(task):
        raise BuildError(f"task {task.task_id}: the local backend cannot honour " + "; ".join(reasons)
                         + f": {CONTAINER_BACKENDS}")
    if solution and task.solution_dir is None:  # known before anything is built
        raise FileNotFoundError(f"task {task.task_id} has no solution/solve.sh")
    built = await build_environment(task, options)
    base = Path(options.work_dir) if options.work_dir else None
    if base:
        base.mkdir(parents=True, exist_ok=True)
    workspace = Path(tempfile.mkdtemp(prefix=f"{WORKSPACE_PREFIX}{_safe(task.task_id)}-", dir=base))
    try:
        write_owner(workspace)
        await _copy_tree(built.root, workspace / "root")
        agent_logs = workspace / "agent-logs"
        agent_logs.mkdir()
        mounts = [Mount(source=agent_logs, target="/logs/agent")]
        if solution and task.solution_dir is not None:
            mounts.append(Mount(source=task.solution_dir, target="/solution", writable=False))
        sandbox = await _start(task, options, workspace, built, mounts)
    except BaseException:
        shutil.rmtree(workspace, ignore_errors=True)
        raise
    spec = sandbox_spec(task, options, built.key, sandbox.limits.via)
    return LocalOpened(sandbox=sandbox, task=task, options=options, built=built, spec=spec,
                       spec_hash=spec.digest(), start_seconds=time.monotonic() - started, workspace=workspace)


def unsupported_locally(task: Task) -> list[str]:
    """What a task asks that a bubblewrap replay over the host cannot give, each naming its field."""
    config, env = task.config, task.environment
    if task.swebench is not None:  # one reason says it all: the rest follows from the image
        return [f"SWE-bench's instance image {task.swebench.image} (the Python version and the installed repository "
                "of its conda env testbed, which the eval script activates; this host has neither)"]
    if task.compose is not None:  # one reason says it all: the services are containers
        return [f"environment/{task.compose.file} (its services are containers beside the task's; --backend "
                "kubernetes runs them too)"]
    reasons = []
    if config.agent.user is not None:
        reasons.append("agent.user (everything runs as one unprivileged user)")
    if config.verifier.user is not None:
        reasons.append("verifier.user (everything runs as one unprivileged user)")
    if config.verifier_mode == "separate":
        reasons.append("verifier.environment_mode = \"separate\" (one workspace per attempt)")
    if env.healthcheck is not None:
        reasons.append("environment.healthcheck (no ENTRYPOINT runs)")
    if task.dockerfile is None:
        reasons.append(f"environment.docker_image = {env.docker_image!r} without a Dockerfile (images are not "
                       "replayed)")
    return reasons


def remove_local_leftovers(options: SandboxOptions) -> list[str]:
    """Workspaces, build directories and cgroups of leafcost processes that were killed: removed by the owner
    record each carries (never by name alone). Called when a run or a validation starts."""
    removed = []
    places = [(Path(options.work_dir or tempfile.gettempdir()), f"{WORKSPACE_PREFIX}*"),
              (Path(options.cache_dir) / "envs", ".building-*")]
    for directory, pattern in places:
        for candidate in sorted(directory.glob(pattern)) if directory.is_dir() else []:
            if candidate.is_dir() and not candidate.is_symlink() and owner_gone(candidate):
                shutil.rmtree(candidate, ignore_errors=True)
                removed.append(str(candidate))
    return removed + remove_orphan_cgroups()


async def _start(task: Task, options: SandboxOptions, workspace: Path, built: BuiltEnvironment,
                 mounts: list[Mount]) -> LocalSandbox:
    env = {**built.env, **task.environment.env}  # Harbor's environment.env: the agent's
    return await LocalSandbox.start(workspace / "root", workdir=built.workdir, env=env, limits=task_limits(task),
                                    network=task.environment.allow_internet, options=options, mounts=mounts)


def sandbox_spec(task: Task, options: SandboxOptions, key: str, limits_via: str) -> SandboxSpec:
    env = task.environment
    return SandboxSpec(
        backend="local", isolation="none" if options.unsafe_no_isolation else "bwrap",
        engine_version=None if options.unsafe_no_isolation else bwrap_version(),
        base_root=options.base_root, extra_ro_binds=sorted(options.extra_ro_binds), image=key,
        network=env.allow_internet, cpus=env.cpus, memory_mb=env.memory_mb, pids=env.pids,
        limits_via=limits_via, tool_runner_version=RUNNER_VERSION,
        leaf_tools_sha256=LEAF_TOOLS_SHA256)


async def _build(task: Task, options: SandboxOptions, key: str, root: Path) -> BuiltEnvironment:
    started = time.monotonic()
    try:
        instructions = parse_dockerfile(task.dockerfile)
    except DockerfileError as exc:
        raise BuildError(f"task {task.task_id}: {exc}") from None
    plan = _Plan(task, root)
    for instruction in instructions:
        plan.prepare(instruction)  # create every bound directory before the build sandbox starts
    override = task.environment.workdir  # Harbor: task.toml's workdir overrides the Dockerfile's WORKDIR
    if override is not None:
        override = os.path.normpath(os.path.join("/", override))
        plan.check_writable(override, Instruction(line=0, keyword="WORKDIR", args=[override], text=override))
        plan.host(override).mkdir(parents=True, exist_ok=True)
        plan.workdir = override
    if plan.workdir == "/":
        raise BuildError(f"task {task.task_id}: the Dockerfile sets no WORKDIR, which the local backend needs (it "
                         f"is the repository the agent works in): {CONTAINER_BACKENDS}")
    root.mkdir(parents=True, exist_ok=True)
    env = task.environment
    sandbox = await LocalSandbox.start(root, workdir=plan.first_workdir, env={},
                                       limits=task_limits(task), network=env.allow_internet, options=options)
    try:
        for instruction in instructions:
            await plan.replay(instruction, sandbox)
        if override is not None:  # the replay's WORKDIR lines moved it again
            plan.workdir = override
        has_git = confined.lexists(root, f"{plan.workdir}/.git")
        result = await sandbox.exec(BASELINE_COMMIT if not has_git
                                    else "git rev-parse HEAD >/dev/null", timeout=300, cwd=plan.workdir,
                                    env=plan.env)
        if not result.ok:
            raise BuildError(f"task {task.task_id}: could not record the git baseline in {plan.workdir}: "
                             f"{(result.stderr or result.stdout)[-500:]}")
        recorded = await sandbox.exec(RECORD, timeout=60, cwd=plan.workdir, env=plan.env)
        git = baseline_from_facts(recorded.facts(), restore_as=None)  # one sandbox user does everything here
        index = await _baseline_index(sandbox, git) if git is not None else None
    finally:
        await sandbox.close()
    if index is not None:  # beside root/, never in it: no sandbox sees it
        (root.parent / BASELINE_INDEX_FILE).write_bytes(index)
    for name in ("tests", "solution", "logs"):  # Harbor's dirs start empty in every episode
        shutil.rmtree(root / name, ignore_errors=True)
    return BuiltEnvironment(key=key, root=root, workdir=plan.workdir, env=plan.env, from_image=plan.from_image,
                            ignored_instructions=plan.ignored, git=git,
                            build_seconds=time.monotonic() - started)


async def _baseline_index(sandbox: LocalSandbox, git: GitBaseline) -> bytes | None:
    """The baseline commit's git index, which every episode's patch capture starts from (git_safe.BASELINE_INDEX);
    None where it cannot be made (capture then makes it itself, as before)."""
    made = await sandbox.exec(baseline_index_command(git.git_dir, git.commit), timeout=120)
    if not made.ok or made.truncated_bytes:
        return None
    try:
        return base64.b64decode(made.stdout, validate=False) or None
    except ValueError:  # binascii.Error is one
        return None


class _Plan:
    """The state of a Dockerfile replay: variables, working directory, and the directories it writes."""

    def __init__(self, task: Task, root: Path):
        self.task, self.root = task, root
        self.env: dict[str, str] = {}
        self.args: dict[str, str] = {}
        self.workdir = "/"
        self.first_workdir = "/"
        self.from_image = ""
        self.ignored: list[str] = []
        self.copied_early: set[int] = set()

    def where(self, instruction: Instruction) -> str:
        return f"task {self.task.task_id}: Dockerfile:{instruction.line}"

    def host(self, container_path: str) -> Path:
        return self.root / container_path.lstrip("/")

    def check_writable(self, container_path: str, instruction: Instruction) -> None:
        parts = Path(container_path).parts
        if len(parts) < 2 or parts[1] in RESERVED_DIRS | HARBOR_TOP_DIRS:
            raise BuildError(f"{self.where(instruction)}: {instruction.keyword} into {container_path} is not "
                             "supported by the local backend (it writes only the task's own directories over a "
                             f"read-only base root): {CONTAINER_BACKENDS}")

    def prepare(self, instruction: Instruction) -> None:
        """First pass: resolve paths so every directory the build writes exists before the sandbox starts."""
        self._track(instruction)
        if instruction.keyword == "WORKDIR":
            self.check_writable(self.workdir, instruction)
            self.host(self.workdir).mkdir(parents=True, exist_ok=True)
            if self.first_workdir == "/":
                self.first_workdir = self.workdir
        elif instruction.keyword in {"COPY", "ADD"}:
            variables = {**self.args, **self.env}
            destination = self._destination(instruction, variables)
            self.check_writable(destination, instruction)
            top = Path(destination).parts[1]
            if len(Path(destination).parts) == 2 and self._single_file(instruction, variables):
                # A file at the top level, as Docker makes it: copied now, so the build sandbox binds it as a file.
                self.root.mkdir(parents=True, exist_ok=True)
                self._copy(instruction, variables)
                self.copied_early.add(instruction.line)
            else:
                (self.root / top).mkdir(parents=True, exist_ok=True)
        if self.first_workdir == "/" and instruction.keyword == "RUN":
            raise BuildError(f"{self.where(instruction)}: RUN before any WORKDIR is not supported by the local "
                             f"backend (it would run in the read-only base root): {CONTAINER_BACKENDS}")

    async def replay(self, instruction: Instruction, sandbox: LocalSandbox) -> None:
        """Second pass, in the build sandbox: FROM recorded, files copied, RUN executed."""
        keyword = instruction.keyword
        if keyword == "FROM" and not self.from_image:
            self.from_image = instruction.args[0]
            self.env, self.args, self.workdir = {}, {}, "/"
        elif keyword == "FROM":
            raise BuildError(f"{self.where(instruction)}: a second FROM (a multi-stage build) is not supported by "
                             f"the local backend: {CONTAINER_BACKENDS}")
        elif keyword in IGNORED:
            self.ignored.append(f"{instruction.line}: {instruction.text}")
        elif keyword in {"COPY", "ADD"} and instruction.line not in self.copied_early:
            self._copy(instruction, {**self.args, **self.env})
        elif keyword == "RUN":
            result = await sandbox.exec(instruction.args[0], timeout=self.task.environment.build_timeout_sec,
                                        cwd=self.workdir, env={**self.args, **self.env})
            if not result.ok:
                status = "timed out" if result.timed_out else f"failed with exit code {result.exit_code}"
                output = (result.stdout + result.stderr).strip()[-1500:]
                raise BuildError(f"{self.where(instruction)}: RUN {instruction.args[0]!r} {status}:\n{output}")
        else:
            self._track(instruction)  # WORKDIR (its directory exists since the first pass), ENV, ARG

    def _track(self, instruction: Instruction) -> None:
        """The state both passes follow: the working directory and the ENV and ARG values."""
        if instruction.keyword == "WORKDIR":
            target = substitute(instruction.args[0], {**self.args, **self.env})
            self.workdir = os.path.normpath(os.path.join(self.workdir, target))
        elif instruction.keyword == "ENV":
            self._set_env(instruction)
        elif instruction.keyword == "ARG":
            self.args.setdefault(instruction.args[0], instruction.args[1])

    def _set_env(self, instruction: Instruction) -> None:
        pairs = instruction.args
        for name, value in zip(pairs[::2], pairs[1::2], strict=True):
            self.env[name] = substitute(value, {**self.args, **self.env})

    def _destination(self, instruction: Instruction, variables: dict[str, str]) -> str:
        destination = substitute(instruction.args[-1], variables)
        return os.path.normpath(os.path.join(self.workdir, destination)) + ("/" if destination.endswith("/") else "")

    def _single_file(self, instruction: Instruction, variables: dict[str, str]) -> bool:
        destination = self._destination(instruction, variables)
        sources = self._sources(instruction, variables)
        return not destination.endswith("/") and len(sources) == 1 and not sources[0].is_dir()

    def _copy(self, instruction: Instruction, variables: dict[str, str]) -> None:
        destination = self._destination(instruction, variables)
        sources = self._sources(instruction, variables)
        # Everything below the root may have been planted by an earlier RUN: resolved without following links.
        into_dir = destination.endswith("/") or len(sources) > 1 or confined.is_dir(self.root, destination)
        try:
            for source in sources:
                target = Path(destination, source.name) if into_dir and not source.is_dir() else Path(destination)
                confined.copy_in(source, self.root, target.as_posix())
        except OSError as exc:  # ConfinementError included: a planted link is refused, never followed
            raise BuildError(f"{self.where(instruction)}: {instruction.keyword} to {destination}: {exc}") from None

    def _sources(self, instruction: Instruction, variables: dict[str, str]) -> list[Path]:
        context = self.task.build_context.resolve()
        sources: list[Path] = []
        for pattern in instruction.args[:-1]:
            pattern = substitute(pattern, variables)
            if "://" in pattern:
                raise BuildError(f"{self.where(instruction)}: ADD from a URL is not supported by the local backend "
                                 f"(it builds offline): {CONTAINER_BACKENDS}")
            # the pattern is matched below the context, whose own path may hold `[` (a task folder's name)
            matches = sorted(str(context / match) for match in glob.glob(pattern.lstrip("/"), root_dir=context,
                                                                         recursive=True))
            if not matches:
                raise BuildError(f"{self.where(instruction)}: {pattern!r} not found in the build context")
            for match in matches:
                resolved = Path(match).resolve()
                if resolved != context and context not in resolved.parents:
                    raise BuildError(f"{self.where(instruction)}: {pattern!r} points outside the build context")
                sources.append(Path(match))
        return sources


# Trees up to these sizes are copied by the harness itself: spawning `cp` from this (large) process costs more than
# copying a few hundred files. Larger trees go to `cp`, which also reflinks where the file system can.
COPY_IN_PROCESS_ENTRIES = 2000
COPY_IN_PROCESS_BYTES = 32 << 20
_LARGE_TREES: set[Path] = set()  # built roots never change: too large once, too large for good


async def _copy_tree(source: Path, destination: Path) -> None:
    """`cp -a source destination`: modes, owners, times, extended attributes and hard links kept, links copied as
    links (never followed)."""
    if source not in _LARGE_TREES:
        try:
            if await asyncio.to_thread(_copy_small_tree, source, destination):
                return
        except OSError as exc:
            raise SandboxError(f"could not copy the environment: {exc}") from None
        _LARGE_TREES.add(source)
    process = await asyncio.create_subprocess_exec("cp", "-a", "--reflink=auto", str(source), str(destination),
                                                   stderr=asyncio.subprocess.PIPE)
    _, err = await process.communicate()
    if process.returncode != 0:
        raise SandboxError(f"could not copy the environment: {err.decode(errors='replace').strip()}")


def _copy_small_tree(source: Path, destination: Path) -> bool:
    """The copy `cp -a` makes, done here; False (nothing written) when the tree is larger than the limits. The
    source is a built root (made by the host, never changed after its build): read without following links."""
    top = os.lstat(source)
    if not stat.S_ISDIR(top.st_mode):
        return False  # cp -a's own business
    entries: list[tuple[str, os.stat_result]] = []
    size = 0
    pending = [""]
    while pending:
        relative = pending.pop()
        with os.scandir(os.path.join(source, relative)) as listing:
            for entry in listing:
                facts = entry.stat(follow_symlinks=False)
                entries.append((os.path.join(relative, entry.name), facts))
                size += facts.st_size if stat.S_ISREG(facts.st_mode) else 0
                if stat.S_ISDIR(facts.st_mode):
                    pending.append(entries[-1][0])
                if len(entries) > COPY_IN_PROCESS_ENTRIES or size > COPY_IN_PROCESS_BYTES:
                    return False  # known before anything is written
    entries.sort(key=lambda item: item[0])  # parents before their children
    os.mkdir(destination, 0o700)
    directories = [(str(destination), str(source), top)]
    linked: dict[tuple[int, int], str] = {}
    for relative, facts in entries:
        origin, target = os.path.join(source, relative), os.path.join(destination, relative)
        mode = facts.st_mode
        if stat.S_ISDIR(mode):
            os.mkdir(target, 0o700)  # its own mode once its entries are in
            directories.append((target, origin, facts))
            continue
        if facts.st_nlink > 1:  # hard links stay hard links, as cp -a keeps them
            first = linked.setdefault((facts.st_dev, facts.st_ino), target)
            if first != target:
                os.link(first, target, follow_symlinks=False)
                continue
        if stat.S_ISREG(mode):
            _copy_file(origin, target, facts)
            continue
        if stat.S_ISLNK(mode):
            os.symlink(os.readlink(origin), target)
        elif stat.S_ISFIFO(mode):
            os.mkfifo(target, 0o600)
        else:  # sockets and device nodes, as cp -a makes them
            os.mknod(target, 0o600 | stat.S_IFMT(mode), facts.st_rdev)
        _keep_attributes(target, origin, facts)
    for target, origin, facts in directories:  # once every entry is in: creating one moves its directory's time
        _keep_attributes(target, origin, facts)
    return True


def _copy_file(origin: str, target: str, facts: os.stat_result) -> None:
    source = os.open(origin, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC)
    try:
        copy = os.open(target, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600)
        try:
            left = facts.st_size
            while left > 0 and (sent := os.sendfile(copy, source, None, min(left, 1 << 30))):
                left -= sent
            _keep_attributes(copy, origin, facts)
        finally:
            os.close(copy)
    finally:
        os.close(source)


def _keep_attributes(target: str | int, origin: str, facts: os.stat_result) -> None:
    """Owner, extended attributes, mode and times of `origin` on `target` (a path, never followed, or an open
    file), in cp -a's order: the owner before the mode (a chown clears set-id bits)."""
    follow = isinstance(target, int)  # an open file: nothing to follow
    try:
        os.chown(target, facts.st_uid, facts.st_gid, follow_symlinks=follow)
    except OSError as exc:
        if os.geteuid() == 0 or exc.errno not in (errno.EPERM, errno.EINVAL):
            raise  # as cp -a: only an unprivileged user may fail to keep the owner, silently
    for name in os.listxattr(origin, follow_symlinks=False):
        try:  # as cp -a (not --preserve=all): an attribute that cannot be kept is not an error
            os.setxattr(target, name, os.getxattr(origin, name, follow_symlinks=False), follow_symlinks=follow)
        except OSError:
            pass
    if not stat.S_ISLNK(facts.st_mode):  # made here, not a link: nothing to follow
        os.chmod(target, stat.S_IMODE(facts.st_mode))
    os.utime(target, ns=(facts.st_atime_ns, facts.st_mtime_ns), follow_symlinks=follow)


def _lock_file(path: Path):
    handle = open(path, "a+")
    fcntl.flock(handle, fcntl.LOCK_EX)
    return handle


def _safe(name: str) -> str:
    return "".join(c if c.isalnum() or c in "-_." else "_" for c in name)[:40]
