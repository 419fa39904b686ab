"""The container backend: one container per attempt from the task's real image, driven through the engine's REST API
over its socket (sandbox.container.api), else through its command line.

The agent's tools go to the same standard-library tool runner as in the local backend (bound read-only into the
container, started once per attempt over one exec stream: the API's, else `exec -i`), so the model sees
byte-for-byte the same observations.
Harness commands (oracle, patch capture, verifier) are plain `exec`s, which also works in images without
python3. The harness's own processes never come from the agent's files: the container's init and keep-alive are
the host's static catatonit, and before grading every process the agent started is killed from the host while the
container is frozen (sandbox.container.processes); the container is never restarted, so the image's ENTRYPOINT
services keep running as Harbor keeps them. Then /tests is copied in and test.sh runs as the verifier's user; in
separate mode it runs in a fresh container from the verifier's image, with only the declared artifacts copied
over. Files leave a container only as a tar stream (the API's archive, else `cp`'s), parsed in memory: the host
never opens a path inside a container. A watchdog per process removes its containers within seconds if it dies
(sandbox.container.watchdog).
"""

from __future__ import annotations

import asyncio
import os
import posixpath
import re
import subprocess
import tarfile
import time
import uuid
from pathlib import Path

from sandbox.container.api import EngineApi, RunnerStream, connect, container_config, directory_member
from sandbox.container.build_network import OUTSIDE_ONLY_FLAGS, fences_host, start_outside_only
from sandbox.compose import hosts_file, service_run_args
from sandbox.container.processes import (KEEP_ALIVE_ARGS, KEEP_ALIVE_IN_CONTAINER, cgroup_directory, cgroup_of,
                                         keep_alive_binary, kill_all_but, live_processes)
from sandbox.container.engine import ULIMITS, Engine, EngineError, client_env, require_engine
from sandbox.shared.git_safe import RECORD, baseline_from_facts
from sandbox.grading import verifier_network
from sandbox.container.images import ResolvedImage, service_image, task_image, verifier_image
from sandbox.leaf_tools import LEAF_TOOLS_SHA256, RUNNER_VERSION, TOOL_RUNNER_PATH
from sandbox.shared.owner import alive as owner_alive
from sandbox.shared.owner import identity
from sandbox.protocol import (BuildError, ExecResult, GitBaseline, SandboxError, SandboxOptions, SandboxSpec,
                              verifier_file)
from sandbox.shared.runner_client import ANSWER_LIMIT_BYTES, RUNNER_IN_SANDBOX, RunnerClient
from sandbox.shared.runner_sandbox import RunnerSandbox
from sandbox.tasks import ComposeService, EnvironmentConfig, HealthcheckConfig, Task
from sandbox.shared.tool_runner import STREAM_CAP_BYTES
from sandbox.container.watchdog import ensure_watchdog

LABEL = "leafcost"
OWNER_LABEL = "leafcost.owner"
# Harbor keeps a task's container alive with its ENTRYPOINT and a command; leafcost's command is the host's static
# catatonit in pause mode (never a program of the image, which the agent may replace); --init reaps orphans.
KEEP_ALIVE = [KEEP_ALIVE_IN_CONTAINER, *KEEP_ALIVE_ARGS]
ENV_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
_BASELINE = ("git -c safe.directory='*' init -q && git -c safe.directory='*' add -A && "
             "git -c safe.directory='*' -c user.name=leafcost -c user.email=leafcost@localhost -c commit.gpgsign=false "
             "commit -q --allow-empty --no-verify -m 'leafcost baseline' && chown -R \"$(stat -c %u:%g .)\" .git")
# Run as root once the container (or pod) is up, with its working directory as $1: Harbor's log directories,
# what the image offers, the git baseline and what grading needs of the repository before the agent
# (git_safe.RECORD: its HEAD, directories and config).
PREPARE = """mkdir -p /logs/agent /logs/verifier /logs/artifacts && chmod 777 /logs/agent /logs/artifacts
command -v python3 >/dev/null 2>&1 && echo python3=yes
if command -v git >/dev/null 2>&1; then
  cd "$1" || exit 1
  [ -e .git ] || ({baseline}) >&2 || exit 1
{record}
fi
""".replace("{baseline}", _BASELINE).replace("{record}", RECORD)
# Harbor's verifier directories, made again as root once no agent process is left.
RESET_VERIFIER = ("rm -rf /tests /logs/verifier; if [ -L /logs ] || [ ! -d /logs ]; then rm -rf /logs; fi; "
                  "mkdir -p /logs/verifier /logs/artifacts && chmod 777 /logs/verifier")
ARTIFACTS_DIR = "/logs/artifacts"
# A Compose service that stops within this long of its start "exited as it started". Its exit is waited for until
# then (the engine's wait, which answers as soon as the exit lands, at once for one that already stopped) and its
# state read after: a snapshot taken just after `run -d` could still say "running" for a command that fails at once.
SERVICE_SETTLE_SEC = 1.0
ARTIFACT_CAP_BYTES = 1 << 30


class ContainerSandbox(RunnerSandbox):
    """One running container as the `Sandbox` protocol: tools through the runner, harness commands by `exec`."""

    def __init__(self, engine: Engine, container: str, *, user: str | None, workdir: str, image: str = "",
                 has_python: bool = True, api: EngineApi | None = None):
        self.engine, self.container, self.user, self.workdir = engine, container, user, workdir
        self.image, self.has_python, self.api = image, has_python, api
        self._runner: RunnerClient | None = None
        self._runner_process: asyncio.subprocess.Process | None = None
        self._runner_stream: RunnerStream | None = None  # the runner's exec stream through the API
        self._runner_stderr = b""
        self._cpu_file: tuple[Path, str] | None = None
        self._cgroup: Path | None = None
        self.spare: frozenset[str] = frozenset()  # "pid:start" of what the container started with
        self._closed = False

    async def exec(self, command: str, *, timeout: float, cwd: str | None = None,
                   env: dict[str, str] | None = None, user: str | None = None) -> ExecResult:
        if self._closed:
            raise SandboxError("sandbox is not running")
        flags = _user_flags(user or self.user) + ["--workdir", cwd or self.workdir] + _env_flags(env or {})
        if self.api is not None:
            return await _api_exec(self.api, self.container, ["sh", "-c", command], user=user or self.user,
                                   workdir=cwd or self.workdir, env=env, timeout=timeout)
        argv = self.engine.command("exec", *flags, self.container, "sh", "-c", command)
        result = await _run_capped(argv, env or {}, timeout)
        if result.exit_code in (125, 126) and not await _running(self.engine, self.container):
            raise SandboxError(f"the container stopped: {result.stderr.strip()[-300:]}")
        return result

    def cpu_seconds(self) -> float | None:
        """From the container's cgroup, read on this host; None where the engine runs elsewhere."""
        if self._cpu_file is None:
            return None
        path, kind = self._cpu_file
        try:
            text = path.read_text()
        except OSError:
            return None
        if kind == "cpuacct":
            return int(text) / 1e9
        usage = next((line.split()[1] for line in text.splitlines() if line.startswith("usage_usec ")), None)
        return int(usage) / 1e6 if usage else None

    async def measure_from(self) -> None:
        """Finds the container's CPU accounting file and its cgroup (once it runs)."""
        if self.api is not None:
            pid = str((await self.api.state(self.container)).get("Pid", ""))
        else:
            found = await self.engine.run("inspect", "--format", "{{.State.Pid}}", self.container, check=False)
            pid = found.text.strip()
        running = pid.isdigit() and pid != "0"
        self._cpu_file = _cgroup_cpu_file(int(pid)) if running else None
        self._cgroup = cgroup_directory(int(pid)) if running else None

    def record_spare(self) -> None:
        """What runs now (init, keep-alive, the ENTRYPOINT's services) is spared by `end_processes`."""
        self.spare = frozenset(p.key for p in live_processes(self._cgroup)) if self._cgroup else frozenset()

    async def end_processes(self) -> None:
        """Kills the runner and every process of the container but those it started with; the container keeps
        running (it is never restarted through the agent's files) and a fresh runner can start."""
        await self._stop_runner()
        self._runner, self._runner_process, self._runner_stderr = None, None, b""
        self._runner_stream = None
        if not await _running(self.engine, self.container, self.api):
            raise SandboxError(f"the container {self.container} stopped before grading (its keep-alive was killed): "
                               "nothing is left to grade")
        if self._cgroup is None:
            raise SandboxError(f"the processes of container {self.container} are not visible from this host: the "
                               f"{self.engine.name} backend needs the engine on this machine")
        await kill_all_but(self.engine, self.container, self._cgroup, self.spare, self.api)

    async def close(self) -> None:
        """Kills the runner and every process of the container (the container stays, for its files)."""
        if self._closed:
            return
        self._closed = True
        await self._stop_runner()
        if self.api is not None:
            await self.api.stop(self.container)
        else:
            await self.engine.run("stop", "-t", "0", self.container, check=False, timeout=60)

    async def _start_runner(self) -> None:
        if self.api is not None:
            command = ["python3", "-u", "-I", RUNNER_IN_SANDBOX, "--workdir", self.workdir]
            try:
                self._runner_stream = stream = await self.api.open_stream(self.container, command, user=self.user,
                                                                          workdir=self.workdir)
            except self.api.errors as exc:
                raise await _exec_failure(self.api, self.container, exc) from None
            assert stream.writer is not None
            self._runner = RunnerClient(stream.stdout, stream.writer, kill=self.close,  # type: ignore[arg-type]
                                        exit_reason=self._exit_reason)
            await self._runner.hello()
            return
        argv = self.engine.command("exec", "-i", *_user_flags(self.user), "--workdir", self.workdir, self.container,
                                   "python3", "-u", "-I", RUNNER_IN_SANDBOX, "--workdir", self.workdir)
        self._runner_process = process = await asyncio.create_subprocess_exec(
            *argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=client_env(),
            limit=ANSWER_LIMIT_BYTES)
        asyncio.get_running_loop().create_task(self._collect_stderr(process))
        assert process.stdout is not None and process.stdin is not None
        self._runner = RunnerClient(process.stdout, process.stdin, kill=self.close, exit_reason=self._exit_reason)
        await self._runner.hello()

    async def _collect_stderr(self, process: asyncio.subprocess.Process) -> None:
        assert process.stderr is not None
        while chunk := await process.stderr.read(65536):
            self._runner_stderr = (self._runner_stderr + chunk)[-4096:]

    async def _exit_reason(self) -> str:
        process, stream = self._runner_process, self._runner_stream
        if stream is not None:
            code = await stream.exit_code()
            if code is None:
                return ""
            tail = bytes(stream.stderr).decode("utf-8", "replace").strip()[-500:]
        else:
            if process is not None and process.returncode is None:
                try:
                    await asyncio.wait_for(process.wait(), 5)
                except asyncio.TimeoutError:
                    return ""
            code = process.returncode if process else None
            tail = self._runner_stderr.decode("utf-8", "replace").strip()[-500:]
        if code == 127 or "python3" in tail and "not found" in tail:
            return " (the image has no python3, which leafcost's tool runner needs)"
        reason = "killed (out of memory?)" if code in (137, -9) else f"exit {code}"
        return f" ({reason})" + (f": {tail}" if tail else "")

    async def _stop_runner(self) -> None:
        process = self._runner_process
        if self._runner is not None:
            self._runner.close()
        if self._runner_stream is not None:
            await self._runner_stream.close()
        if process is not None and process.returncode is None:
            process.kill()
            await process.wait()


class ContainerOpened:
    """One attempt's containers (the agent's, then a separate verifier's if the task has one) as the
    `OpenedSandbox` protocol."""

    def __init__(self, engine: Engine, task: Task, options: SandboxOptions, image: ResolvedImage,
                 labels: dict[str, str], spec: SandboxSpec):
        self.engine, self.task, self.options, self.image, self.labels = engine, task, options, image, labels
        self.spec, self.spec_hash = spec, spec.digest()
        self.start_seconds = 0.0
        verifier_user = task.config.verifier.user
        self.verifier_user: str | None = "root" if verifier_user is None else str(verifier_user)
        self.verifier_network = verifier_network(task, options)  # a separate verifier's container may say otherwise
        self.agent_user = None if task.config.agent.user is None else str(task.config.agent.user)
        self.workdir = _workdir(task.environment, image)
        self.containers: list[str] = []
        # A Compose task's services and the holder of the network namespace they share with the main container.
        self.services: list[tuple[ComposeService, ResolvedImage]] = []
        self.network_holder: str | None = None
        self.hosts: Path | None = None  # the hosts file naming the services, bound at /etc/hosts in each
        self.sandbox: ContainerSandbox
        self.git_baseline: GitBaseline | None = None
        self.has_python = False
        self._finished_cpu: float | None = 0.0
        self._closed = False
        self.api: EngineApi | None = None  # the engine's API, when it has one here; else its command line

    def cpu_seconds(self) -> float | None:
        current = None if self.sandbox.closed else self.sandbox.cpu_seconds()
        if self._finished_cpu is None or (current is None and not self.sandbox.closed):
            return None
        return self._finished_cpu + (current or 0.0)

    async def quiesce(self) -> None:
        await self.sandbox.end_processes()

    async def start_verifier(self) -> None:
        agent = self.sandbox.container
        if self.task.config.verifier_mode == "separate":
            await self.stop()
            image = await verifier_image(self.engine, self.task, self.options)
            environment = self.task.config.verifier_environment or self.task.environment
            container = await self._create(image, environment, role="verifier", solution=False)
            workdir = _workdir(environment, image)
            await self._root(container, RESET_VERIFIER, workdir)
            await self._copy_artifacts(agent, container)
            await self._copy_tests(container)
            self.sandbox = await self._attach(container, self.agent_user, workdir)
        else:
            await self.sandbox.end_processes()
            await self._root(agent, RESET_VERIFIER, self.workdir)
            await self._copy_tests(agent)

    async def _copy_tests(self, container: str) -> None:
        if self.api is None:
            await self.engine.run("cp", str(self.task.tests_dir), f"{container}:/tests", timeout=300)
            return
        try:
            await self.api.put_directory(container, self.task.tests_dir, "/tests")
        except self.api.errors as exc:
            raise SandboxError(f"task {self.task.task_id}: copying the tests into the container failed: "
                               f"{getattr(exc, 'message', exc)}") from None

    async def stop(self) -> None:
        if not self.sandbox.closed:
            used = self.sandbox.cpu_seconds()
            await self.sandbox.close()
            self._finished_cpu = None if used is None or self._finished_cpu is None else self._finished_cpu + used

    async def read_verifier_file(self, name: str, limit: int) -> bytes | None:
        return await read_file(self.engine, self.sandbox.container, verifier_file(name), limit, self.api)

    async def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        if (sandbox := getattr(self, "sandbox", None)) is not None:
            await sandbox._stop_runner()
        if self.api is not None:
            await self.api.remove(*self.containers)
            if self.network_holder:
                await self.api.remove(self.network_holder)
            await self.api.close()
            return
        if self.containers:
            await self.engine.run(*self.engine.remove_args(*self.containers), check=False, timeout=120)
        if self.network_holder:  # last: the engine refuses to remove it while a container joins its namespace
            await self.engine.run(*self.engine.remove_args(self.network_holder), check=False, timeout=120)

    async def open(self, solution: bool) -> None:
        """The agent's container, ready: healthy, Harbor's directories made, the git baseline recorded (after the
        Compose services, when the task has them)."""
        environment = self.task.environment
        if self.task.compose is not None:
            await self._start_services()
            env = {**self.task.compose.main_environment, **environment.env}  # task.toml's env wins
            environment = environment.model_copy(update={"env": env})
        container = await self._create(self.image, environment, role="agent", solution=solution)
        healthcheck = self.task.environment.healthcheck or self.image.healthcheck
        if healthcheck is not None:
            await self._wait_healthy(container, healthcheck)
        prepared = await self._root(container, PREPARE, "/", "sh", self.workdir)
        facts = prepared.facts()
        self.has_python = facts.get("python3") == "yes"
        self.git_baseline = baseline_from_facts(facts, restore_as="root")
        self.sandbox = await self._attach(container, self.agent_user, self.workdir)
        self.sandbox.record_spare()  # before the agent: everything the container started with

    async def _create(self, image: ResolvedImage, environment: EnvironmentConfig, *, role: str,
                      solution: bool) -> str:
        name, label_flags = self._named(role)
        flags = ["--init", "--name", name, *ULIMITS, "--cpus", f"{environment.cpus:g}",
                 "--memory", f"{environment.memory_mb}m", "--memory-swap", f"{environment.memory_mb}m",
                 "--pids-limit", str(environment.pids), *label_flags]
        network = verifier_network(self.task, self.options) if role == "verifier" else None
        if network == "outside" and not fences_host(self.engine):
            network = "none"  # only rootful podman on this host can keep the host's addresses out: none, then
        if network == "outside":
            flags += OUTSIDE_ONLY_FLAGS
        elif network == "none" or not environment.allow_internet:
            flags += ["--network", "none"]
        if role == "verifier":
            self.verifier_network = network
        if environment.workdir:
            flags += ["--workdir", _workdir(environment, image)]
        flags += _env_flags(environment.env)
        flags += _mount(TOOL_RUNNER_PATH, RUNNER_IN_SANDBOX) + _mount(keep_alive_binary(), KEEP_ALIVE_IN_CONTAINER)
        if solution:  # open_container_sandbox refused a task without one before anything was built
            assert self.task.solution_dir is not None
            flags += _mount(self.task.solution_dir, "/solution")
        if role == "agent" and self.network_holder:  # the Compose services' network namespace, not one of its own
            flags = _without_network(flags) + self._joined_network()
        self.containers.append(name)
        ensure_watchdog(self.engine.argv, identity())  # removes this container if this process dies
        try:
            outside = network == "outside"  # created, fenced, then started: nothing of it runs unfenced
            config = None if outside else self._api_config(flags, image, KEEP_ALIVE, environment.env)
            if config is not None:
                await self._api_run(config, image, role)
                return name
            await self.engine.run(*(["create"] if outside else ["run", "-d"]), *flags, "--", image.id, *KEEP_ALIVE,
                                  env=environment.env, timeout=300)
            if outside:
                await start_outside_only(self.engine, name)
        except EngineError as exc:
            raise BuildError(f"task {self.task.task_id}: the container did not start from {image.reference}: "
                             f"{str(exc).split(': ', 1)[-1]}") from None
        return name

    async def _start_services(self) -> None:
        """Harbor's Compose services, before the main container, in one network namespace as Compose's one network
        (and a pod) give them: a holder of the namespace (the host's catatonit, as a pod's infra container; Podman
        4.3's `pod create` cannot set the limits this host needs), then each service in start order, healthy when it
        declares a healthcheck and still running before the next starts. Every service name resolves to 127.0.0.1.
        The freeze-and-kill before grading applies to the main container only: the services live on, as Harbor's."""
        assert self.task.compose is not None
        if not self.services:  # a file that only sets main's environment: nothing to start beside it
            return
        environment = self.task.environment
        self.hosts = hosts_file(self.options.cache_dir, self.task.compose.host_names)
        holder = ["--cpus", "0.1", "--memory", "32m", "--pids-limit", "16", "--entrypoint", KEEP_ALIVE_IN_CONTAINER,
                  *_mount(keep_alive_binary(), KEEP_ALIVE_IN_CONTAINER)]
        holder += [] if environment.allow_internet else ["--network", "none"]
        self.network_holder = await self._run_part("network", holder, self.image, KEEP_ALIVE_ARGS, {})
        for service, image in self.services:
            cpus, memory_mb = service.limits(environment)
            flags, arguments = service_run_args(service, cpus, memory_mb, environment.pids)
            flags += _env_flags(service.environment) + self._joined_network()
            container = await self._run_part("service", flags, image, arguments, service.environment, service.name)
            settled = time.monotonic() + SERVICE_SETTLE_SEC
            if service.healthcheck is not None:
                await self._wait_healthy(container, service.healthcheck, service)
            if await service_exit(self.engine, container, settled - time.monotonic(), self.api) is not None:
                raise await self._exited_as_started(service, container)

    async def _exited_as_started(self, service: ComposeService, container: str) -> BuildError:
        logs = await self.engine.run("logs", "--tail", "5", container, check=False)
        said = " | ".join((logs.text + logs.stderr).strip().splitlines()[-5:])[-400:]
        return BuildError(f"task {self.task.task_id}: service {service.name} exited as it started: "
                          f"{said or 'no output'}")

    async def _run_part(self, role: str, flags: list[str], image: ResolvedImage, arguments: list[str],
                        env: dict[str, str], service: str = "") -> str:
        """One container of a Compose attempt beside the main one, labelled (and removed) as the attempt's are."""
        name, label_flags = self._named(role, **({"leafcost.service": service} if service else {}))
        flags = ["--name", name, *ULIMITS, *flags, *label_flags]
        if role != "network":
            self.containers.append(name)
        ensure_watchdog(self.engine.argv, identity())
        try:  # the command line, for the services (see _start_services)
            await self.engine.run("run", "-d", *flags, "--", image.id, *arguments, env=env, timeout=300)
        except EngineError as exc:
            raise BuildError(f"task {self.task.task_id}: {role} {service or 'holder'} did not start from "
                             f"{image.reference}: {str(exc).split(': ', 1)[-1]}") from None
        return name

    def _api_config(self, flags: list[str], image: ResolvedImage, command: list[str],
                    env: dict[str, str]) -> dict | None:
        return None if self.api is None else container_config(flags, image.id, command, env)

    async def _api_run(self, config: dict, image: ResolvedImage, role: str) -> None:
        assert self.api is not None
        try:
            await self.api.run(config)
        except self.api.errors as exc:
            raise BuildError(f"task {self.task.task_id}: the {role} container did not start from {image.reference}: "
                             f"{getattr(exc, 'message', exc)}") from None

    def _named(self, role: str, **extra: str) -> tuple[str, list[str]]:
        """A fresh container name, and as flags the labels every container of the attempt carries: the attempt's,
        leafcost's and its owner's (what leftover removal and the watchdog find it by), and its role."""
        labels = {**self.labels, LABEL: "1", OWNER_LABEL: identity(), "leafcost.role": role, **extra}
        return f"leafcost-{uuid.uuid4().hex[:16]}", [f for key, value in labels.items()
                                                    for f in ("--label", f"{key}={value}")]

    def _joined_network(self) -> list[str]:
        """The holder's network namespace, and the hosts file naming every service (a container joining another's
        namespace cannot take `--add-host` entries of its own)."""
        assert self.hosts is not None
        return ["--network", f"container:{self.network_holder}", *_mount(self.hosts, "/etc/hosts")]

    async def _attach(self, container: str, user: str | None, workdir: str) -> ContainerSandbox:
        sandbox = ContainerSandbox(self.engine, container, user=user, workdir=workdir, image=self.image.reference,
                                   has_python=self.has_python, api=self.api)
        await sandbox.measure_from()
        return sandbox

    async def _root(self, container: str, script: str, workdir: str, *args: str) -> ExecResult:
        if self.api is not None:
            result = await _api_exec(self.api, container, ["sh", "-c", script, *args], user="root", workdir=workdir,
                                     env=None, timeout=300)
        else:
            argv = self.engine.command("exec", "--user", "root", "--workdir", workdir, container, "sh", "-c",
                                       script, *args)
            result = await _run_capped(argv, {}, 300)
        if not result.ok:
            raise SandboxError(f"task {self.task.task_id}: preparing the container failed (exit "
                               f"{result.exit_code}): {(result.stderr or result.stdout).strip()[-500:]}")
        return result

    async def _wait_healthy(self, container: str, check: HealthcheckConfig,
                            service: ComposeService | None = None) -> None:
        """Docker's rules: failures within the start period do not count; `retries` failures in a row after it
        mean the environment never became ready, a task error. A Compose `service` that stopped fails at once: it
        exited as it started."""
        started, failures, last = time.monotonic(), 0, ""
        while True:
            try:
                if self.api is not None:
                    result = await _api_exec(self.api, container, ["sh", "-c", check.command], user=None,
                                             workdir="", env=None, timeout=check.timeout_sec)
                else:
                    argv = self.engine.command("exec", container, "sh", "-c", check.command)
                    result = await _run_capped(argv, {}, check.timeout_sec)
            except SandboxError:  # the engine refused the exec: the container stopped
                if service is None or await service_exit(self.engine, container, 0.0, self.api) is None:
                    raise
                raise await self._exited_as_started(service, container) from None
            if result.ok:
                return
            if service is not None and await service_exit(self.engine, container, 0.0, self.api) is not None:
                raise await self._exited_as_started(service, container)
            last = (result.stderr or result.stdout).strip()[-200:] or f"exit {result.exit_code}"
            in_start = time.monotonic() - started < check.start_period_sec
            if not in_start:
                failures += 1
                if failures >= check.retries:
                    raise BuildError(f"task {self.task.task_id}: the healthcheck {check.command!r} never "
                                     f"passed ({failures} failures after the start period): {last}"
                                     + (f" (service {service.name})" if service is not None else ""))
            await asyncio.sleep(check.start_interval_sec if in_start else check.interval_sec)

    async def _copy_artifacts(self, source: str, target: str) -> None:
        """Harbor's separate mode: /logs/artifacts and the task's `artifacts` paths, from the agent's (stopped)
        container into the verifier's at the same paths; the tar stream never touches the host's disk."""
        paths = [ARTIFACTS_DIR] + [a if isinstance(a, str) else a.source for a in self.task.config.artifacts]
        for path in dict.fromkeys(posixpath.normpath(p) for p in paths):
            parent = posixpath.dirname(path) or "/"
            await self._root(target, 'mkdir -p "$1"', "/", "sh", parent)
            await _stream_copy(self.engine, f"{source}:{path}", f"{target}:{parent}")


async def open_container_sandbox(task: Task, options: SandboxOptions, *, solution: bool = False,
                                 labels: dict[str, str] | None = None) -> ContainerOpened:
    started = time.monotonic()
    engine = require_engine(options.backend)
    if solution and task.solution_dir is None:  # known since the task loaded: no image is built for it
        raise FileNotFoundError(f"task {task.task_id} has no solution/solve.sh")
    image = await task_image(engine, task, options)
    services = [(service, await service_image(engine, task, service, options))
                for service in (task.compose.services if task.compose else [])]
    env = task.environment
    # The services' images are part of the environment's identity: their IDs join the main image's.
    environment_id = " ".join([image.id, *(f"{service.name}={found.id}" for service, found in services)])
    spec = SandboxSpec(backend=engine.name, isolation=engine.name, engine_version=engine.version, image=environment_id,
                       network=env.allow_internet, cpus=env.cpus, memory_mb=env.memory_mb, pids=env.pids,
                       limits_via=engine.name, tool_runner_version=RUNNER_VERSION,
                       leaf_tools_sha256=LEAF_TOOLS_SHA256)
    opened = ContainerOpened(engine, task, options, image, labels or {}, spec)
    opened.services = services
    try:
        opened.api = await connect(engine.name, engine.argv)
        await opened.open(solution)
    except BaseException:
        await opened.close()
        raise
    opened.start_seconds = time.monotonic() - started
    return opened


def remove_container_leftovers(options: SandboxOptions) -> list[str]:
    """Containers of leafcost processes that were killed, found by label and removed when their owner is gone."""
    removed = _remove_leftovers_once(options)
    # A Compose attempt's network holder can only go once the containers joining its namespace are gone.
    return removed + _remove_leftovers_once(options) if removed else removed


def _remove_leftovers_once(options: SandboxOptions) -> list[str]:
    engine = require_engine(options.backend)
    listed = subprocess.run(engine.command("ps", "-a", "-q", "--no-trunc", "--filter", f"label={LABEL}=1"),
                            capture_output=True, text=True, env=client_env())
    ids = listed.stdout.split()
    if listed.returncode != 0 or not ids:
        return []
    owners = subprocess.run(engine.command("inspect", "--format", f'{{{{.Id}}}} {{{{index .Config.Labels '
                                           f'"{OWNER_LABEL}"}}}}', *ids), capture_output=True, text=True,
                            env=client_env())
    gone = [line.split()[0] for line in owners.stdout.splitlines()
            if len(line.split()) == 2 and not owner_alive(line.split()[1])]
    if gone:
        subprocess.run(engine.command(*engine.remove_args(*gone)), capture_output=True, env=client_env())
    return [f"container {cid[:12]}" for cid in gone]


async def read_file(engine: Engine, container: str, path: str, limit: int,
                    api: EngineApi | None = None) -> bytes | None:
    """A regular file of a (running or stopped) container, at most `limit` bytes; None when it does not exist. A
    link, a directory or anything larger raises OSError. `cp` of the file itself would follow a final link (and
    name the member after its target), so its directory is what is copied: the file is its member of that name,
    read from the tar stream as it comes, and a link stays a link."""
    directory, name = posixpath.split(path)
    if api is not None:
        return await api.read_member(container, directory, name, limit)
    argv = engine.command("cp", f"{container}:{directory}", "-")
    return await asyncio.to_thread(_member_of_directory, argv, name, limit)


def _member_of_directory(argv: list[str], name: str, limit: int) -> bytes | None:
    process = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                               env=client_env())
    assert process.stdout is not None and process.stderr is not None
    try:
        try:
            if (data := directory_member(process.stdout, name, limit)) is not None:
                return data
        except tarfile.TarError as exc:
            unreadable = exc
        else:
            unreadable = None
        process.stdout.close()
        stderr = process.stderr.read().decode("utf-8", "replace")
        process.wait()
        if process.returncode != 0 and not re.search(r"no such file|could not (?:be )?found", stderr, re.IGNORECASE):
            raise OSError(f"cannot copy {name}'s directory out of the container: {stderr.strip()[-300:]}")
        if unreadable is not None and process.returncode == 0:
            raise OSError(f"the tar stream of {name}'s directory is unreadable: {unreadable}")
        return None
    finally:
        if process.poll() is None:
            process.kill()
        process.wait()
        process.stdout.close()
        process.stderr.close()


async def _stream_copy(engine: Engine, source: str, target: str) -> None:
    """`cp SOURCE -` piped into `cp - TARGET`, capped; a missing source is skipped, as Harbor skips it."""
    read_end, write_end = os.pipe()
    try:
        out = await asyncio.create_subprocess_exec(*engine.command("cp", source, "-"), stdout=write_end,
                                                   stderr=subprocess.PIPE, env=client_env())
        into = await asyncio.create_subprocess_exec(*engine.command("cp", "-", target), stdin=read_end,
                                                    stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                                                    env=client_env())
    finally:
        os.close(read_end)
        os.close(write_end)
    _, out_error = await out.communicate()
    _, into_error = await into.communicate()
    if out.returncode != 0:
        return  # the agent left nothing there
    if into.returncode != 0:
        raise SandboxError(f"copying artifact {source.split(':', 1)[1]} to the verifier failed: "
                           f"{into_error.decode('utf-8', 'replace').strip()[-300:]}")


async def _run_capped(argv: list[str], env: dict[str, str], timeout: float) -> ExecResult:
    """An engine `exec` to completion, stdout and stderr each kept up to STREAM_CAP_BYTES. On timeout the
    client is killed; what runs in the container is the caller's to stop (every grading step ends in a stop)."""
    started = time.monotonic()
    process = await asyncio.create_subprocess_exec(*argv, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                                                   stderr=subprocess.PIPE, env=client_env(env))
    kept: dict[str, bytearray] = {"stdout": bytearray(), "stderr": bytearray()}
    dropped = 0

    async def drain(stream: asyncio.StreamReader, into: bytearray) -> None:
        nonlocal dropped
        while chunk := await stream.read(65536):
            room = STREAM_CAP_BYTES - len(into)
            into += chunk[:max(room, 0)]
            dropped += max(len(chunk) - max(room, 0), 0)

    assert process.stdout is not None and process.stderr is not None
    timed_out = False
    try:
        await asyncio.wait_for(asyncio.gather(drain(process.stdout, kept["stdout"]),
                                              drain(process.stderr, kept["stderr"]), process.wait()), timeout)
    except asyncio.TimeoutError:
        timed_out = True
        process.kill()
        await process.wait()
    text = {name: data.decode("utf-8", "replace") for name, data in kept.items()}
    return ExecResult(exit_code=None if timed_out else process.returncode, stdout=text["stdout"],
                      stderr=text["stderr"], timed_out=timed_out, seconds=time.monotonic() - started,
                      truncated_bytes=dropped)


async def _api_exec(api: EngineApi, container: str, argv: list[str], *, user: str | None, workdir: str,
                    env: dict[str, str] | None, timeout: float) -> ExecResult:
    """An exec through the API; a container that stopped (or an engine that refused) is a SandboxError."""
    try:
        return await api.exec(container, argv, user=user, workdir=workdir, env=env, timeout=timeout)
    except api.errors as exc:
        raise await _exec_failure(api, container, exc) from None


async def _exec_failure(api: EngineApi, container: str, error: BaseException) -> SandboxError:
    said = str(getattr(error, "message", error)).strip()[-300:]
    if not (await api.state(container)).get("Running"):
        return SandboxError(f"the container stopped: {said}")
    return SandboxError(f"exec in container {container} failed: {said}")


async def service_exit(engine: Engine, container: str, wait: float, api: EngineApi | None = None) -> int | None:
    """The container's exit code if it stopped, waiting up to `wait` seconds for it to stop; None if it runs then.
    The wait ends as soon as the engine sees the exit; its state is read after the wait either way, so what the
    answer depends on is whether the container stopped within the bound, never on when its state was sampled."""
    if api is not None:
        if (code := await api.wait_exit(container, wait)) is not None:
            return code
        state = await api.state(container)
        if not state:  # the engine does not know it: not running
            return -1
        return None if state.get("Running") else int(state.get("ExitCode") or 0)
    if wait > 0:
        conditions = ["--condition", "exited", "--condition", "stopped"] if engine.name == "podman" else []
        try:
            waited = await engine.run("wait", *conditions, container, check=False, timeout=wait)
        except EngineError:  # still running at the bound: the client was stopped
            waited = None
        if waited is not None and waited.code == 0 and waited.text.strip().lstrip("-").isdigit():
            return int(waited.text.strip())
    state = await engine.run("inspect", "--format", "{{.State.Running}} {{.State.ExitCode}}", container, check=False)
    running, _, code = state.text.strip().partition(" ")
    if state.code != 0 or running != "true":
        return int(code) if code.lstrip("-").isdigit() else -1
    return None


async def _running(engine: Engine, container: str, api: EngineApi | None = None) -> bool:
    if api is not None:
        return bool((await api.state(container)).get("Running"))
    state = await engine.run("inspect", "--format", "{{.State.Running}}", container, check=False)
    return state.text.strip() == "true"


def _workdir(environment: EnvironmentConfig, image: ResolvedImage) -> str:
    if environment.workdir:
        return posixpath.normpath(posixpath.join("/", environment.workdir))
    return image.workdir or "/"


def _without_network(flags: list[str]) -> list[str]:
    kept: list[str] = []
    for index, flag in enumerate(flags):
        if flag.startswith("--network=") or flag == "--network" or (index and flags[index - 1] == "--network"):
            continue
        kept.append(flag)
    return kept


def _user_flags(user: str | None) -> list[str]:
    return ["--user", user] if user is not None else []


def _env_flags(env: dict[str, str]) -> list[str]:
    """`--env NAME` only: the engine takes the value from its own environment, so no value is ever on a command
    line (where `ps` would show it)."""
    flags = []
    for name in env:
        if not ENV_NAME.fullmatch(name):
            raise BuildError(f"environment variable name {name!r} is not a valid name")
        flags += ["--env", name]
    return flags


def _mount(source: Path, target: str) -> list[str]:
    return ["--mount", f"type=bind,src={Path(source).resolve()},dst={target},ro=true"]


def _cgroup_cpu_file(pid: int) -> tuple[Path, str] | None:
    """The container's CPU accounting file from its init process's cgroup (v1 cpuacct, else v2 cpu.stat)."""
    found = cgroup_of(pid, "cpuacct")
    if found is None:
        return None
    directory, unified = found
    candidate, kind = (directory / "cpu.stat", "cpu.stat") if unified else (directory / "cpuacct.usage", "cpuacct")
    return (candidate, kind) if candidate.exists() else None
