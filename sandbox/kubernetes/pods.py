"""The kubernetes backend: one pod per attempt from the task's image by digest (the image lock), driven with the
official client for objects and one websocket per exec (sandbox.kubernetes.exec_stream).

The agent's tools go to the same standard-library tool runner as in the other backends: copied into the pod and
checked by its SHA-256 before every start, then started once per attempt over one exec stream, so the model sees
byte-for-byte the same observations and pays no exec round trip per tool call. Harness commands (prepare, oracle,
patch capture, verifier) send their script, environment and working directory on stdin, so no value is ever in
an exec URL (which API servers log). Files go in and out as tar over exec, each checked by its SHA-256.

A pod cannot be stopped and started again as a container can, so "every agent process is gone" is made true by
killing every process but the pod's init, as root, until none is left; the verifier runs after that. Pods carry
the run's labels: a run removes its own leftovers by label selector when it starts (and so after --resume)."""

from __future__ import annotations

import asyncio
import functools
import json
import os
import posixpath
import shlex
import time
import uuid
import weakref
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import IO, Any

from sandbox.kubernetes.exec_stream import API_RETRIES, RETRY_STATUSES, ExecError, ExecStream, retry_pause, session_for
from sandbox.kubernetes.pod_files import copy_artifact, get_file, put_file, put_tree
from sandbox.kubernetes.manifests import CONTAINER, PREFIX, attempt_pod, label_key, label_value, network_policies
from sandbox.container.containers import ARTIFACTS_DIR, ENV_NAME, PREPARE, RESET_VERIFIER
from sandbox.container.images import LockedImage, locked_entry
from sandbox.shared.git_safe import baseline_from_facts
from sandbox.grading import verifier_network
from sandbox.leaf_tools import LEAF_TOOLS_SHA256, RUNNER_VERSION, TOOL_RUNNER_PATH
from sandbox.protocol import (BuildError, ExecResult, GitBaseline, SandboxError, SandboxOptions, SandboxSpec,
                              verifier_file)
from sandbox.shared.runner_client import RUNNER_IN_SANDBOX, RunnerClient, StreamStdin
from sandbox.shared.runner_sandbox import RunnerSandbox
from sandbox.tasks import ComposeService, EnvironmentConfig, Task
from sandbox.shared.tool_runner import STREAM_CAP_BYTES

API_THREADS = 16  # the official client is synchronous: its calls run here, never on the event loop
# A pod not yet ready is read again after 0.25 s, then 1.5 times longer each time up to 2 s: 150 pods pulling their
# images for minutes must not ask the API server hundreds of times a second.
POLL_SEC, POLL_GROWTH, POLL_MAX_SEC = 0.25, 1.5, 2.0
# Waiting reasons of a container that mean its image cannot be had: a task error naming the image, not retried.
IMAGE_ERRORS = frozenset({"ErrImagePull", "ImagePullBackOff", "InvalidImageName", "ErrImageNeverPull",
                          "CreateContainerConfigError"})
# Drops from root to the user named (or numbered) in argv[1], then runs argv[2:]: no su or setpriv needed.
_AS_USER = ("import os,pwd,sys\nu=sys.argv[1]\n"
            "e=pwd.getpwuid(int(u)) if u.isdigit() else pwd.getpwnam(u)\n"
            "os.initgroups(e.pw_name,e.pw_gid);os.setgid(e.pw_gid);os.setuid(e.pw_uid)\n"
            "os.environ.update(HOME=e.pw_dir,USER=e.pw_name)\nos.execvp(sys.argv[2],sys.argv[2:])")
# What lives in the pod before the agent does (its init, the keep-alive, services the image's ENTRYPOINT started)
# is spared, each by pid and start time (a reused pid is not spared); everything else is killed, again until no
# live process is left (a zombie, state Z, is dead). A pod cannot be restarted as a container is, so this is how
# "every agent process is gone" before the verifier runs. $SPARE: " pid:start pid:start ".
_PROCESSES = r"""for d in /proc/[0-9]*; do
  p=${d#/proc/}
  [ "$p" = $$ ] && continue
  read -r s < "$d/stat" 2>/dev/null || continue
  rest=${s##*) }
  set -- $rest
  state=$1
  shift 19
  process "$p" "$1" "$state"
done"""
_LIST = "process() { printf ' %s:%s' \"$1\" \"$2\"; }\nprintf 'spare='\n" + _PROCESSES + "\necho"
_KILL_ALL = """process() {
  case "$3" in Z|X) return ;; esac
  case "$SPARE" in *" $1:$2 "*) return ;; esac
  kill -KILL "$1" 2>/dev/null
  left=1
}
i=0
while [ $i -lt 100 ]; do
  left=0
""" + _PROCESSES + """
  [ $left = 0 ] && exit 0
  i=$((i+1)); sleep 0.05
done
echo "processes survived 100 rounds of kill -KILL" >&2; exit 1"""
# Exec cannot choose its user: the set-up runs as the pod's, root, or the task's own non-root user where the task
# runs everything as that user ($RUN_AS; see pod_user).
_AS_ROOT = """[ "$(id -u)" = 0 ] || [ "$(id -u)" = "$RUN_AS" ] || { echo "the image runs as user $(id -u), not \
root: the kubernetes backend needs root for Harbor's set-up (the agent can still run as the task's agent.user)" >&2
exit 1; }
echo "workdir=$(pwd)"
""" + _LIST + "\n"
# The agent's pod: the container backend's set-up (log directories, python3, the git baseline).
_PREPARE = _AS_ROOT + """set -- "$(pwd)"
""" + PREPARE
# A separate verifier's pod: only Harbor's verifier directories.
_VERIFIER_PREPARE = _AS_ROOT + RESET_VERIFIER
_CPU = "cat /sys/fs/cgroup/cpu.stat 2>/dev/null || cat /sys/fs/cgroup/cpuacct/cpuacct.usage 2>/dev/null"


class KubeCluster:
    """The API server as the run's options name it: the official client, one aiohttp session for exec streams,
    and the run's limits on concurrent pod creations and deletions. One per event loop and options."""

    def __init__(self, options: SandboxOptions):
        from kubernetes import client

        configuration = client_configuration(options)
        self.configuration, self.namespace = configuration, options.kube_namespace
        api = client.ApiClient(configuration)
        self.core, self.networking = client.CoreV1Api(api), client.NetworkingV1Api(api)
        self.creating = asyncio.Semaphore(options.kube_create_limit)
        self.deleting = asyncio.Semaphore(options.kube_delete_limit)
        self.session = session_for(configuration)
        self._threads = ThreadPoolExecutor(API_THREADS, thread_name_prefix="leafcost-kube")
        self._policy: asyncio.Task | None = None

    async def call(self, method, *args, **kwargs):
        """One request through the official client, on its threads; asked again on RETRY_STATUSES. A create asked
        again may find its object made by the first try: the caller takes 409 on its own name as done."""
        from kubernetes.client.exceptions import ApiException

        request = functools.partial(method, *args, _request_timeout=60, **kwargs)
        for attempt in range(API_RETRIES + 1):
            try:
                return await asyncio.get_running_loop().run_in_executor(self._threads, request)
            except ApiException as exc:
                if exc.status not in RETRY_STATUSES or attempt == API_RETRIES:
                    raise
                await asyncio.sleep(retry_pause(exc.headers, attempt))

    async def ensure_no_network_policy(self) -> None:
        """The namespace's deny-all NetworkPolicy, created once if missing."""
        if self._policy is None:
            self._policy = asyncio.create_task(self._create_policy())
        await asyncio.shield(self._policy)

    async def _create_policy(self) -> None:
        from kubernetes.client.exceptions import ApiException

        for policy in network_policies(self.namespace):
            try:
                await self.call(self.networking.create_namespaced_network_policy, self.namespace, policy)
            except ApiException as exc:
                if exc.status != 409:  # 409: it is there already
                    raise SandboxError(f"cannot create NetworkPolicy {policy['metadata']['name']} in namespace "
                                       f"{self.namespace}: HTTP {exc.status} {exc.reason}") from None

    async def exec(self, pod: str, command: list[str], *, stdin: bool) -> ExecStream:
        return await ExecStream.open(self.session, self.configuration, self.namespace, pod, CONTAINER, command,
                                     stdin=stdin)

    async def run(self, pod: str, script: str, *, timeout: float, data: bytes | IO[bytes] | None = None,
                  cap: int = STREAM_CAP_BYTES) -> ExecResult:
        """`script` as the container's user (root): read by `sh -s` from stdin, so nothing of it (directories,
        environment values) is in the exec URL; or, with `data` (bytes, or a file read to its end) for its stdin,
        as `sh -c` (then it must hold no secret). stdout kept up to `cap`."""
        started = time.monotonic()
        if data is None:  # the trailing exit: where stdin cannot be closed alone (v4), the shell ends anyway
            command, data = ["sh", "-s"], script.encode() + b"\nexit\n"
        else:
            command = ["sh", "-c", script]
        stream = await self.exec(pod, command, stdin=True)
        out, dropped, timed_out = bytearray(), 0, False
        try:
            if isinstance(data, bytes):
                await stream.write(data)
            else:
                while chunk := data.read(1 << 20):
                    await stream.write(chunk)
            await stream.close_stdin()

            async def drain() -> None:
                nonlocal dropped
                while chunk := await stream.stdout.read(65536):
                    room = max(cap - len(out), 0)
                    out.extend(chunk[:room])
                    dropped += len(chunk) - min(len(chunk), room)
            await asyncio.wait_for(asyncio.gather(drain(), stream.wait()), timeout)
        except asyncio.TimeoutError:
            timed_out = True
        finally:
            await stream.close()
        if not timed_out and stream.exit_code is None:
            raise ExecError(stream.failure or f"exec into pod {pod} ended without an exit status")
        return ExecResult(exit_code=None if timed_out else stream.exit_code, stdout=out.decode("utf-8", "replace"),
                          stderr=bytes(stream.stderr).decode("utf-8", "replace"), timed_out=timed_out,
                          seconds=time.monotonic() - started, truncated_bytes=dropped)

    async def close(self) -> None:
        await self.session.close()
        self._threads.shutdown(wait=False)


def client_configuration(options: SandboxOptions):
    """The official client's configuration: the kubeconfig (and context) named, else the default kubeconfig, else
    the service account of the pod this runs in."""
    from kubernetes import client, config

    configuration = client.Configuration()
    if options.kubeconfig is None and options.kube_context is None and _in_cluster():
        config.load_incluster_config(client_configuration=configuration)
        return configuration
    files = kubeconfig_files(options)
    if not any(Path(name).expanduser().is_file() for name in files):
        raise SandboxError(_no_kubeconfig(options, files))
    try:
        config.load_kube_config(config_file=os.pathsep.join(files), context=options.kube_context,
                                client_configuration=configuration)
    except Exception as exc:  # noqa: BLE001 - not YAML, not a kubeconfig, or without the context asked for
        raise SandboxError(f"kubeconfig {os.pathsep.join(files)}: {_first_line(exc)}: fix it, or point KUBECONFIG "
                           "at another") from None
    return configuration


def kubeconfig_files(options: SandboxOptions) -> list[str]:
    """Where the kubeconfig is looked for, as kubectl looks: the one the spec names, else every file $KUBECONFIG
    lists, else ~/.kube/config (read now: the client's own default was read when it was imported)."""
    if options.kubeconfig is not None:
        return [str(options.kubeconfig)]
    listed = [name for name in os.environ.get("KUBECONFIG", "").split(os.pathsep) if name]
    return listed or ["~/.kube/config"]


def _first_line(exc: Exception) -> str:
    """A loader's error in one line: YAML's problem and where, or the message's first line."""
    mark = getattr(exc, "problem_mark", None)
    if getattr(exc, "problem", None) and mark is not None:
        return f"line {mark.line + 1}, column {mark.column + 1}: {exc.problem}"  # type: ignore[attr-defined]
    return (str(exc).strip().splitlines() or [type(exc).__name__])[0]


def _unreachable(exc: Exception) -> bool:
    """The API server never answered (urllib3 gave up connecting), as opposed to answering with a refusal."""
    from urllib3.exceptions import MaxRetryError, NewConnectionError

    return isinstance(exc, (MaxRetryError, NewConnectionError, ConnectionError, TimeoutError))


def _no_kubeconfig(options: SandboxOptions, files: list[str]) -> str:
    if options.kubeconfig is not None:
        return f"no kubeconfig at {options.kubeconfig}: fix the spec's sandbox.kubernetes.kubeconfig"
    if os.environ.get("KUBECONFIG", "").strip(os.pathsep):
        return (f"no kubeconfig: $KUBECONFIG names {', '.join(files)}, and none exists: point KUBECONFIG at your "
                "cluster's kubeconfig")
    return ("no kubeconfig: set KUBECONFIG to your cluster's kubeconfig, or put it at ~/.kube/config (or run "
            "leafcost inside a cluster)")


# By event loop object, not its id: a later loop can reuse a dead one's id, and its session and semaphores belong to
# the loop that made them.
_clusters: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, dict[str, KubeCluster]] = weakref.WeakKeyDictionary()


def cluster_for(options: SandboxOptions) -> KubeCluster:
    mine = _clusters.setdefault(asyncio.get_running_loop(), {})
    key = options.model_dump_json(include={"kubeconfig", "kube_context", "kube_namespace"})
    if key not in mine:
        mine[key] = KubeCluster(options)
    return mine[key]


async def close_clusters() -> None:
    """Closes this event loop's API sessions (the end of a run or a validation)."""
    for cluster in _clusters.pop(asyncio.get_running_loop(), {}).values():
        await cluster.close()


class PodSandbox(RunnerSandbox):
    """The running pod as the `Sandbox` protocol: tools through the runner, harness commands by exec."""

    def __init__(self, cluster: KubeCluster, pod: str, *, user: str | None, workdir: str, has_python: bool,
                 image: str, spare: str, run_as: int | None = None):
        self.cluster, self.pod, self.user, self.workdir = cluster, pod, user, workdir
        self.has_python, self.image, self.spare, self.run_as = has_python, image, spare, run_as
        self._runner: RunnerClient | None = None
        self._stream: ExecStream | None = None
        self._closed = False

    async def exec(self, command: str, *, timeout: float, cwd: str | None = None,
                   env: dict[str, str] | None = None, user: str | None = None) -> ExecResult:
        if self._closed:
            raise SandboxError("sandbox is not running")
        return await self.cluster.run(self.pod, harness_script(command, cwd or self.workdir, env or {},
                                                               self._switch_to(user or self.user)), timeout=timeout)

    def _switch_to(self, user: str | None) -> str | None:
        """The user a command must switch to, None when it runs as the pod's own (root, or the task's non-root
        user the whole pod runs as, which cannot become anyone else)."""
        if self.run_as is None or user is None or user == str(self.run_as):
            return None if self.run_as is not None else user
        raise SandboxError(f"pod {self.pod} runs as user {self.run_as}: a command cannot run as {user}")

    def cpu_seconds(self) -> float | None:
        """Not known between reads: the cgroup is read inside the pod (PodOpened.stop), whose node is elsewhere."""
        return None

    async def measure(self) -> float | None:
        """The pod's cgroup CPU over its whole life so far."""
        try:
            result = await self.cluster.run(self.pod, _CPU, timeout=30)
        except SandboxError:
            return None
        return parse_cpu(result.stdout)

    async def close(self) -> None:
        """Kills the runner and every process of the pod but its init (the pod stays, for its files)."""
        if self._closed:
            return
        self._closed = True
        await self._stop_runner()
        result = await self.cluster.run(self.pod, f"SPARE={shlex.quote(f' {self.spare} ')}\n{_KILL_ALL}",
                                        timeout=60)
        if not result.ok:
            raise SandboxError(f"pod {self.pod}: the agent's processes could not all be killed: "
                               f"{result.stderr.strip()[-300:]}")

    async def _start_runner(self) -> None:
        runner = TOOL_RUNNER_PATH.read_bytes()
        # Copied afresh before every start, when no agent process is left to have replaced it.
        await put_file(self.cluster, self.pod, RUNNER_IN_SANDBOX, runner)
        command = ["python3", "-u", "-I", RUNNER_IN_SANDBOX, "--workdir", self.workdir]
        if (user := self._switch_to(self.user)) is not None:
            command = ["python3", "-I", "-c", _AS_USER, user, *command]
        self._stream = stream = await self.cluster.exec(self.pod, command, stdin=True)
        stdin = StreamStdin(functools.partial(_send_stdin, stream), stream.close)
        self._runner = RunnerClient(stream.stdout, stdin, kill=self.close,  # type: ignore[arg-type]
                                    exit_reason=self._exit_reason)
        await self._runner.hello()

    async def _exit_reason(self) -> str:
        stream = self._stream
        tail = bytes(stream.stderr).decode("utf-8", "replace").strip()[-500:] if stream else ""
        why = await pod_failure(self.cluster, self.pod)
        return "".join(f" ({part})" for part in (why, tail) if part)

    async def _stop_runner(self) -> None:
        if self._runner is not None:
            self._runner.close()
        if self._stream is not None:
            await self._stream.close()


async def _send_stdin(stream: ExecStream, data: bytes) -> None:
    """One drain of the runner's requests over the exec stream's stdin channel (runner_client.StreamStdin)."""
    try:
        await stream.write(data)
    except RuntimeError as exc:  # aiohttp's write to a socket it is closing
        raise BrokenPipeError(str(exc)) from None
    if stream.stdin_dropped:
        raise BrokenPipeError("the tool runner's stream is closed")


class PodOpened:
    """One attempt's pods as the `OpenedSandbox` protocol: the agent's, then, in Harbor's separate mode, the
    verifier's own pod from its locked image with only the task's artifacts copied over."""

    def __init__(self, cluster: KubeCluster, task: Task, options: SandboxOptions, image: str, pull_policy: str,
                 labels: dict[str, str], spec: SandboxSpec):
        self.cluster, self.task, self.options, self.image, self.pull_policy = cluster, task, options, image, pull_policy
        self.labels, self.spec, self.spec_hash = labels, spec, spec.digest()
        self.start_seconds = 0.0
        verifier_user = task.config.verifier.user
        self.verifier_user: str | None = "root" if verifier_user is None else str(verifier_user)  # as Harbor's
        self.verifier_network = verifier_network(task, options)
        self.agent_user = None if task.config.agent.user is None else str(task.config.agent.user)
        self.run_as = pod_user(task)
        self.pod = f"leafcost-{uuid.uuid4().hex[:16]}"  # the agent's
        self.pods: list[str] = []  # every pod created for the attempt, removed at close
        self.services: list[tuple[ComposeService, str, str]] = []  # a Compose task's sidecars: image, pull policy
        self.sandbox: PodSandbox
        self.workdir = "/"
        self.has_python = False
        self.git_baseline: GitBaseline | None = None
        self.spare = ""  # the processes the pod had before the agent: never killed
        self._cpu: dict[str, float | None] = {}  # each pod's cgroup CPU at its last stop (every sandbox of it)
        self._closed = False

    def cpu_seconds(self) -> float | None:
        used = list(self._cpu.values())
        return None if not used or None in used else sum(used)  # type: ignore[arg-type]

    async def open(self, solution: bool) -> None:
        if solution and self.task.solution_dir is None:
            raise FileNotFoundError(f"task {self.task.task_id} has no solution/solve.sh")
        environment = self.task.environment
        if self.task.compose is not None:  # the Compose file's environment of `main`; task.toml's env wins
            env = {**self.task.compose.main_environment, **environment.env}
            environment = environment.model_copy(update={"env": env})
        await self._make_pod(self.pod, self.image, self.pull_policy, environment, role="agent")
        prepared = await self._root(self.pod, _PREPARE, timeout=300)
        facts = prepared.facts()
        self.has_python, self.spare = facts.get("python3") == "yes", facts.get("spare", "").strip()
        # Restored as root, or as the one non-root user a pod of this task runs everything as.
        self.git_baseline = baseline_from_facts(facts, restore_as=str(self.run_as) if self.run_as else "root")
        self.workdir = _workdir(environment) if environment.workdir else facts.get("workdir") or "/"
        if solution:
            await put_tree(self.cluster, self.pod, self.task.solution_dir, "/solution")
        self.sandbox = await self._attach(self.pod, self.agent_user, self.workdir, self.spare)

    async def quiesce(self) -> None:
        await self.stop()
        self.sandbox = await self._attach(self.pod, self.agent_user, self.workdir, self.spare)

    async def start_verifier(self) -> None:
        await self.stop()
        if self.task.config.verifier_mode == "separate":
            pod, workdir, spare = await self._open_verifier_pod()
        else:
            pod, workdir, spare = self.pod, self.workdir, self.spare
            await self._root(pod, RESET_VERIFIER, timeout=120)
        await put_tree(self.cluster, pod, self.task.tests_dir, "/tests")
        self.sandbox = await self._attach(pod, self.agent_user, workdir, spare)

    async def stop(self) -> None:
        if not self.sandbox.closed:
            self._cpu[self.sandbox.pod] = await self.sandbox.measure()
            await self.sandbox.close()

    async def read_verifier_file(self, name: str, limit: int) -> bytes | None:
        return await get_file(self.cluster, self.sandbox.pod, verifier_file(name), limit)

    async def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        if (sandbox := getattr(self, "sandbox", None)) is not None:
            await sandbox._stop_runner()
        await asyncio.gather(*(delete_pod(self.cluster, pod) for pod in self.pods))

    async def _open_verifier_pod(self) -> tuple[str, str, str]:
        """Harbor's separate mode: a fresh pod from the verifier's locked image, its directories made, then the
        artifacts (/logs/artifacts and the task's `artifacts`) copied from the agent's pod, whose processes are
        gone. Returns the pod, its working directory and the processes it started with."""
        environment = self.task.config.verifier_environment or self.task.environment
        image, pull_policy = locked_image(self.task, self.options, kind="verifiers")
        pod = f"{self.pod}-verifier"
        await self._make_pod(pod, image, pull_policy, environment, role="verifier")
        facts = (await self._root(pod, _VERIFIER_PREPARE, timeout=300)).facts()
        paths = [ARTIFACTS_DIR] + [a if isinstance(a, str) else a.source for a in self.task.config.artifacts]
        for path in dict.fromkeys(posixpath.normpath(p) for p in paths):
            await copy_artifact(self.cluster, self.pod, pod, path)
        workdir = _workdir(environment) if environment.workdir else facts.get("workdir") or "/"
        return pod, workdir, facts.get("spare", "").strip()

    async def _make_pod(self, name: str, image: str, pull_policy: str, environment: EnvironmentConfig, *,
                        role: str) -> None:
        """One pod of the attempt, created and waited for until its container is ready."""
        network = self.verifier_network if role == "verifier" else None
        if not environment.allow_internet or network == "outside":  # the namespace's policies, both kinds
            await self.cluster.ensure_no_network_policy()
        manifest = attempt_pod(name=name, namespace=self.cluster.namespace, image=image, environment=environment,
                               workdir=_workdir(environment), labels={**self.labels, "leafcost.role": role},
                               spec_hash=self.spec_hash, deadline_sec=_deadline(self.task), run_as=self.run_as,
                               network=network, services=self.services if role == "agent" else ())
        manifest["spec"]["containers"][0]["imagePullPolicy"] = pull_policy
        if not environment.workdir:
            del manifest["spec"]["containers"][0]["workingDir"]  # the image's own WORKDIR
        async with self.cluster.creating:  # held until the pod is scheduled, not until it runs
            await self._create(name, manifest)
            await self._wait(name, image, scheduled_only=True)
        await self._wait(name, image, scheduled_only=False)

    async def _create(self, name: str, manifest: dict[str, Any]) -> None:
        from kubernetes.client.exceptions import ApiException

        try:
            await self.cluster.call(self.cluster.core.create_namespaced_pod, self.cluster.namespace, manifest)
        except ApiException as exc:
            if exc.status == 409:  # our name is random: an earlier try of this same request made it
                self.pods.append(name)
                return
            if exc.status in (400, 403, 404, 422):  # the request itself is refused: retrying cannot help
                raise BuildError(f"task {self.task.task_id}: the API server refused its pod: HTTP {exc.status} "
                                 f"{_api_message(exc)}") from None
            raise SandboxError(f"creating pod {name}: HTTP {exc.status} {_api_message(exc)}") from None
        self.pods.append(name)

    async def _wait(self, name: str, image: str, *, scheduled_only: bool) -> None:
        """Until the pod is scheduled (or its container ready); an image that cannot be pulled is a task error
        naming the image, a pod that failed or vanished an infrastructure error with its reason."""
        deadline = time.monotonic() + self.task.environment.build_timeout_sec
        pause = POLL_SEC
        while True:
            pod = await read_pod(self.cluster, name)
            if pod is None:
                raise SandboxError(f"pod {name} vanished before it was ready")
            status = pod.get("status") or {}
            if (pulled := _image_failure(status)) is not None:  # the task's container's, or a Compose service's
                container, waiting = pulled
                which = "" if container.get("name") == CONTAINER else f" (sidecar {container.get('name')})"
                raise BuildError(f"task {self.task.task_id}: image {container.get('image') or image} cannot be had: "
                                 f"{waiting.get('reason')}: {(waiting.get('message') or '').strip()[:300]}{which}")
            if status.get("phase") in ("Failed", "Succeeded"):
                raise SandboxError(f"pod {name} ended before it was ready: {describe_failure(pod)}")
            if scheduled_only and (_condition(status, "PodScheduled") or (pod.get("spec") or {}).get("nodeName")):
                return
            if not scheduled_only and status.get("phase") == "Running" and _container_ready(status):
                return
            if time.monotonic() > deadline:
                raise SandboxError(f"pod {name} not ready after {self.task.environment.build_timeout_sec:.0f}s "
                                   f"(phase {status.get('phase')})")
            await asyncio.sleep(pause)
            pause = min(pause * POLL_GROWTH, POLL_MAX_SEC)

    async def _root(self, pod: str, script: str, *, timeout: float) -> ExecResult:
        """A set-up script as the pod's user: root, or the task's own (RUN_AS)."""
        result = await self.cluster.run(pod, f"RUN_AS={self.run_as or 0}\n{script}", timeout=timeout)
        if not result.ok:
            raise SandboxError(f"task {self.task.task_id}: preparing the pod failed (exit {result.exit_code}): "
                               f"{(result.stderr or result.stdout).strip()[-500:]}")
        return result

    async def _attach(self, pod: str, user: str | None, workdir: str, spare: str) -> PodSandbox:
        return PodSandbox(self.cluster, pod, user=user, workdir=workdir, has_python=self.has_python,
                          image=self.image, spare=spare, run_as=self.run_as)


async def open_kube_sandbox(task: Task, options: SandboxOptions, *, solution: bool = False,
                            labels: dict[str, str] | None = None) -> PodOpened:
    started = time.monotonic()
    cluster = cluster_for(options)
    image, pull_policy = locked_image(task, options)
    services = locked_services(task, options)
    env = task.environment
    identity = " ".join([image, *(f"{service.name}={reference}" for service, reference, _ in services)])
    spec = SandboxSpec(backend="kubernetes", isolation="kubernetes", image=identity, network=env.allow_internet,
                       cpus=env.cpus, memory_mb=env.memory_mb, pids=env.pids, limits_via="kubernetes",
                       tool_runner_version=RUNNER_VERSION, leaf_tools_sha256=LEAF_TOOLS_SHA256)
    opened = PodOpened(cluster, task, options, image, pull_policy, labels or {}, spec)
    opened.services = services
    try:
        await opened.open(solution)
    except BaseException:
        await asyncio.shield(opened.close())
        raise
    opened.start_seconds = time.monotonic() - started
    return opened


def pod_user(task: Task) -> int | None:
    """The non-root user a task's pods run as, when the task allows it: its agent and its verifier are the same
    numeric non-root user, so no command of the attempt needs anyone else. Otherwise None (root, as Harbor runs its
    harness commands)."""
    agent, verifier = task.config.agent.user, task.config.verifier.user
    if agent is None or str(agent) != str(verifier) or not str(agent).isdigit() or int(agent) == 0:
        return None
    return int(agent)


def locked_image(task: Task, options: SandboxOptions, kind: str = "tasks") -> tuple[str, str]:
    """The task's image (`kind` "tasks") or its separate verifier's ("verifiers") by digest from the image lock,
    and the pull policy: a registry digest is pulled when missing; an image only built locally (no registry
    digest) must already be on the nodes, by its ID."""
    if options.images_lock is None:
        raise BuildError("the kubernetes backend runs images by digest only: lock them first (`leafcost images "
                         "lock SUITE`) and name the lock in the spec's sandbox.images")
    return _by_digest(locked_entry(options.images_lock, task, kind))


def locked_services(task: Task, options: SandboxOptions) -> list[tuple[ComposeService, str, str]]:
    """A Compose task's services, each with its image from the lock's `services` entry (as `locked_image`) and its
    pull policy, in start order: the pod's sidecars."""
    if task.compose is None or not task.compose.services or options.images_lock is None:
        return []
    return [(service, *_by_digest(locked_entry(options.images_lock, task, "services", service.name)))
            for service in task.compose.services]


def _by_digest(entry: LockedImage) -> tuple[str, str]:
    """A locked image as a pod names it, with its pull policy: a registry digest is pulled when missing; an image
    only built locally (no registry digest) must already be on the nodes, by its ID."""
    return (entry.repo_digest, "IfNotPresent") if entry.repo_digest else (entry.id, "Never")


def remove_run_pods(options: SandboxOptions, run_id: str | None) -> list[str]:
    """The pods (and only those) a killed process of this run left: deleted by label selector."""
    if run_id is None:
        return []

    async def sweep() -> list[str]:
        cluster = KubeCluster(options)
        try:
            selector = f"{PREFIX}=1,{label_key('leafcost.run')}={label_value(run_id)}"
            listed = await cluster.call(cluster.core.list_namespaced_pod, cluster.namespace, label_selector=selector)
            names = [pod.metadata.name for pod in listed.items]
            if names:
                await cluster.call(cluster.core.delete_collection_namespaced_pod, cluster.namespace,
                                   label_selector=selector, grace_period_seconds=0)
            return [f"pod {name}" for name in names]
        finally:
            await cluster.close()
    return asyncio.run(sweep())


def require_cluster(options: SandboxOptions) -> None:
    """Refuses a run whose cluster cannot be reached or whose namespace cannot be listed, saying which."""
    configuration = client_configuration(options)  # a SandboxError of its own when there is no kubeconfig
    try:
        from kubernetes import client

        client.CoreV1Api(client.ApiClient(configuration)).list_namespaced_pod(options.kube_namespace, limit=1,
                                                                              _request_timeout=30)
    except Exception as exc:  # noqa: BLE001 - any failure here means the run cannot use this cluster
        if _unreachable(exc):
            raise SandboxError(f"cannot reach the cluster at {configuration.host}: is it running? check the "
                               "kubeconfig's current context (or name another in sandbox.kubernetes.context)") from None
        raise SandboxError(f"the kubernetes backend cannot use namespace {options.kube_namespace!r}: "
                           f"{type(exc).__name__}: {str(exc).strip()[:300]}") from None
    if options.images_lock is None:
        raise SandboxError("the kubernetes backend runs images by digest only: lock them first (`leafcost images "
                           "lock SUITE`) and name the lock in the spec's sandbox.images")


async def read_pod(cluster: KubeCluster, name: str) -> dict[str, Any] | None:
    from kubernetes.client.exceptions import ApiException

    try:
        pod = await cluster.call(cluster.core.read_namespaced_pod, name, cluster.namespace)
    except ApiException as exc:
        if exc.status == 404:
            return None
        raise SandboxError(f"reading pod {name}: HTTP {exc.status} {_api_message(exc)}") from None
    return cluster.core.api_client.sanitize_for_serialization(pod)


async def pod_failure(cluster: KubeCluster, name: str) -> str:
    """Why a pod stopped answering (evicted, OOM-killed, vanished), or '' while it looks healthy."""
    try:
        pod = await read_pod(cluster, name)
    except SandboxError as exc:
        return str(exc)
    return "the pod vanished" if pod is None else describe_failure(pod)


def _image_failure(status: dict[str, Any]) -> tuple[dict[str, Any], dict[str, Any]] | None:
    """The first container (sidecars included: a Compose service's image is pulled first) whose image cannot be
    pulled, with its waiting state."""
    for container in [*(status.get("initContainerStatuses") or []), *(status.get("containerStatuses") or [])]:
        waiting = (container.get("state") or {}).get("waiting") or {}
        if waiting.get("reason") in IMAGE_ERRORS:
            return container, waiting
    return None


def describe_failure(pod: dict[str, Any]) -> str:
    status = pod.get("status") or {}
    parts = [status.get("reason"), status.get("message")]
    for container in status.get("containerStatuses") or []:
        terminated = (container.get("state") or {}).get("terminated") or {}
        if terminated:
            parts.append(f"container {container.get('name')} {terminated.get('reason') or 'terminated'} "
                         f"(exit {terminated.get('exitCode')})")
    return "; ".join(str(p) for p in parts if p)


async def delete_pod(cluster: KubeCluster, name: str) -> None:
    from kubernetes.client.exceptions import ApiException

    async with cluster.deleting:
        try:
            await cluster.call(cluster.core.delete_namespaced_pod, name, cluster.namespace, grace_period_seconds=0)
        except ApiException as exc:
            if exc.status != 404:
                raise SandboxError(f"deleting pod {name}: HTTP {exc.status} {_api_message(exc)}") from None


def harness_script(command: str, cwd: str, env: dict[str, str], user: str | None) -> str:
    """A harness command as the script `sh -s` reads from stdin: its directory, its environment, then the command
    with stdin from /dev/null (the rest of our stream is never its input), as `user` when one is named."""
    bad = [name for name in env if not ENV_NAME.fullmatch(name)]
    if bad:
        raise BuildError(f"environment variable name {bad[0]!r} is not a valid name")
    lines = [f"cd -- {shlex.quote(cwd)} || exit 1"]
    lines += [f"export {shlex.quote(f'{name}={value}')}" for name, value in env.items()]
    run = ["sh", "-c", command]
    if user is not None and user not in ("root", "0"):
        run = ["python3", "-I", "-c", _AS_USER, user, *run]
    lines.append(f"exec {shlex.join(run)} </dev/null")
    return "\n".join(lines)


def parse_cpu(text: str) -> float | None:
    """cgroup v2 cpu.stat (usage_usec) or v1 cpuacct.usage (nanoseconds), in seconds."""
    for line in text.splitlines():
        if line.startswith("usage_usec "):
            return int(line.split()[1]) / 1e6
    stripped = text.strip()
    return int(stripped) / 1e9 if stripped.isdigit() else None


def _deadline(task: Task) -> float:
    """The most an attempt's pod can live: building, the agent, the verifier, and slack for set-up and copies."""
    config = task.config
    return task.environment.build_timeout_sec + config.agent.timeout_sec + config.verifier.timeout_sec + 600


def _workdir(environment: EnvironmentConfig) -> str:
    return posixpath.normpath(posixpath.join("/", environment.workdir)) if environment.workdir else "/"


def _condition(status: dict[str, Any], kind: str) -> bool:
    return any(c.get("type") == kind and c.get("status") == "True" for c in status.get("conditions") or [])


def _container_ready(status: dict[str, Any]) -> bool:
    return any(c.get("name") == CONTAINER and c.get("ready") for c in status.get("containerStatuses") or [])


def _api_message(exc) -> str:
    try:
        return str(json.loads(exc.body).get("message"))[:300]
    except (TypeError, ValueError, AttributeError):
        return str(exc.reason)


def _in_cluster() -> bool:
    return Path("/var/run/secrets/kubernetes.io/serviceaccount/token").exists()
