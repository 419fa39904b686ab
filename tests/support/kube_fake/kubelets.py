"""The node side of the stand-in: what happens to a pod after the API server stored it. `InstantKubelet` makes
every pod Running and Ready at once and answers exec from a scripted handler (cheap enough for hundreds of
pods); `ContainerKubelet` starts a real container per pod with the container backend's engine, reports it
Running and Ready once started, Succeeded or Failed when it exits, and removes it when the pod is deleted.

Both honour `Faults`, the tests' hooks: images that fail to pull, a slow start, and (by call) eviction, an OOM
kill, a pod that vanishes. `activeDeadlineSeconds` ends a pod as the kubelet does (Failed, DeadlineExceeded).
"""

from __future__ import annotations

import asyncio
import contextlib
import fnmatch
import uuid
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from support.kube_fake import status
from support.kube_fake.containers import SERVER_LABEL, run_args
from support.kube_fake.exec_ws import ExecHandler, engine_exec, scripted_exec

if TYPE_CHECKING:
    from support.kube_fake.apiserver import FakeApiServer

__all__ = ["ContainerKubelet", "Faults", "InstantKubelet", "Kubelet"]

Key = tuple[str, str]  # namespace, name
BACKOFF_AFTER = 0.5  # seconds an image failure shows ErrImagePull before ImagePullBackOff


@dataclass
class Faults:
    """What tests make go wrong. `image_failures` maps an image pattern (fnmatch) to its waiting message;
    delays are seconds."""

    image_failures: dict[str, str] = field(default_factory=dict)
    start_delay: float = 0.0  # Pending (ContainerCreating) this long before the container starts
    creation_delay: float = 0.0  # each pod creation request takes this long before the pod is stored
    deletion_delay: float = 0.0  # each pod deletion request takes this long before the pod is marked
    throttled: int = 0  # the next this many pod requests (exec too) are answered 429 TooManyRequests, Retry-After 1
    failing_after_create: int = 0  # the next this many pod creations store the pod, then answer 500

    def take(self, name: str) -> bool:
        """Spends one of the faults counted in `name`: whether one was left."""
        left = getattr(self, name)
        if left > 0:
            setattr(self, name, left - 1)
        return left > 0

    def image_failure(self, image: str) -> str | None:
        return next((message for pattern, message in self.image_failures.items()
                     if fnmatch.fnmatchcase(image, pattern)), None)


class Kubelet:
    """What both kubelets share: deadlines, image-pull failures, and ending a pod by a test's hook."""

    def __init__(self, server: FakeApiServer, faults: Faults):
        self.server, self.faults = server, faults
        self.ended: set[Key] = set()  # pods whose status is final: a late container exit must not overwrite it
        self._tasks: dict[Key, asyncio.Task[None]] = {}
        self._deadlines: dict[Key, asyncio.TimerHandle] = {}

    def created(self, key: Key) -> None:
        self._tasks[key] = asyncio.create_task(self._start(key))

    async def stop(self, key: Key) -> None:
        """Ends whatever runs for the pod; returns once it is gone."""
        self.ended.add(key)
        self.server.kill_execs(key)
        if (handle := self._deadlines.pop(key, None)) is not None:
            handle.cancel()
        task = self._tasks.pop(key, None)
        if task is not None:
            await self._cancel_start(task)
        await self._kill(key)

    def exec_handler(self, key: Key) -> ExecHandler:
        raise NotImplementedError

    async def logs(self, key: Key) -> bytes:
        """The container's stdout and stderr so far (`pods/{name}/log`); instant pods have none."""
        return b""

    async def end(self, key: Key, new_status: dict[str, Any]) -> None:
        """A test's eviction or OOM kill: the container goes, the pod stays with `new_status`."""
        self.ended.add(key)
        self.server.kill_execs(key)
        await self._kill(key)
        self.server.set_pod_status(key, new_status)

    async def close(self) -> None:
        for key in list(self._tasks):
            await self.stop(key)

    async def _start(self, key: Key) -> None:
        """Pending (ContainerCreating) for the start delay, then an image failure or the kubelet's launch."""
        pod = self.server.pod(key)
        if pod is None:
            return
        self.server.set_pod_status(key, status.pending(pod))
        await asyncio.sleep(self.faults.start_delay)
        if not await self._pull_fails(key, pod):
            await self._launch(key, pod)

    async def _launch(self, key: Key, pod: dict[str, Any]) -> None:
        raise NotImplementedError

    async def _cancel_start(self, task: asyncio.Task[None]) -> None:
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError, Exception):
            await task

    async def _kill(self, key: Key) -> None:
        pass

    async def _pull_fails(self, key: Key, pod: dict[str, Any]) -> bool:
        """The first image of the pod (sidecars first, as the kubelet starts them) that a test made unpullable."""
        spec = pod.get("spec") or {}
        for container in [*(spec.get("initContainers") or []), *(spec.get("containers") or [{}])[:1]]:
            image = container.get("image", "")
            if (message := self.faults.image_failure(image)) is not None:
                await self._show_pull_failure(key, pod, message, image)
                return True
        return False

    async def _show_pull_failure(self, key: Key, pod: dict[str, Any], message: str, image: str) -> None:
        self.server.set_pod_status(key, status.image_failure(pod, "ErrImagePull", message, image))
        await asyncio.sleep(BACKOFF_AFTER)
        if key not in self.ended and (pod := self.server.pod(key)) is not None:
            self.server.set_pod_status(key, status.image_failure(
                pod, "ImagePullBackOff", f'Back-off pulling image "{image}": {message}', image))

    def _running(self, key: Key, container_id: str) -> None:
        pod = self.server.pod(key)
        if pod is None or key in self.ended:
            return
        self.server.set_pod_status(key, status.running(pod, container_id=container_id))
        deadline = (pod.get("spec") or {}).get("activeDeadlineSeconds")
        if deadline:
            self._deadlines[key] = asyncio.get_running_loop().call_later(
                float(deadline), lambda: asyncio.ensure_future(self._past_deadline(key)))

    async def _past_deadline(self, key: Key) -> None:
        pod = self.server.pod(key)
        if pod is not None and key not in self.ended:
            seconds = pod["spec"]["activeDeadlineSeconds"]
            await self.end(key, status.evicted(pod, reason="DeadlineExceeded", container_reason="Error",
                                               message=f"Pod was active on the node longer than the specified "
                                                       f"deadline of {seconds}s"))


class InstantKubelet(Kubelet):
    """Pods Running and Ready as soon as they are stored; exec answered by `handler` (default: scripted_exec)."""

    def __init__(self, server: FakeApiServer, faults: Faults, handler: ExecHandler = scripted_exec):
        super().__init__(server, faults)
        self.handler = handler

    def created(self, key: Key) -> None:
        pod = self.server.pod(key)
        if pod is None:
            return
        image = pod["spec"]["containers"][0].get("image", "")
        if self.faults.start_delay or self.faults.image_failure(image) is not None:
            super().created(key)  # those need time: a task
        else:
            self.server.set_pod_status(key, status.pending(pod))
            self._running(key, f"kube-fake://{uuid.uuid4().hex}")

    def exec_handler(self, key: Key) -> ExecHandler:
        return self.handler

    async def _launch(self, key: Key, pod: dict[str, Any]) -> None:
        self._running(key, f"kube-fake://{uuid.uuid4().hex}")


class ContainerKubelet(Kubelet):
    """One real container per pod, started from `spec.containers[0].image` by the container backend's engine."""

    def __init__(self, server: FakeApiServer, faults: Faults, engine: Any):
        super().__init__(server, faults)
        self.engine = engine
        self.server_id = uuid.uuid4().hex[:12]
        self.containers: dict[Key, str] = {}  # pod → the engine's container name
        self._starting: dict[Key, asyncio.Task[Any]] = {}  # `run -d` in flight: awaited, never cancelled

    def exec_handler(self, key: Key) -> ExecHandler:
        return engine_exec(self.engine, self.containers[key])

    async def logs(self, key: Key) -> bytes:
        name = self.containers.get(key)
        if name is None:
            return b""
        done = await self.engine.run("logs", name, check=False)
        return done.stdout + done.stderr.encode()

    async def close(self) -> None:
        await super().close()
        listed = await self.engine.run("ps", "-a", "-q", "--filter", f"label={SERVER_LABEL}={self.server_id}",
                                       check=False)
        leftovers = listed.text.split()
        if leftovers:
            await self.engine.run(*self.engine.remove_args(*leftovers), check=False, timeout=120)

    async def _launch(self, key: Key, pod: dict[str, Any]) -> None:
        name = f"kube-fake-{self.server_id}-{uuid.uuid4().hex[:8]}"
        argv, env = run_args(pod, name=name, server_id=self.server_id)
        self.containers[key] = name
        # A cancelled `run` could still leave its container: let it finish, shielded, and remove it after.
        starting = self._starting[key] = asyncio.ensure_future(
            self.engine.run("run", *argv, check=False, timeout=300, env=env))
        done = await asyncio.shield(starting)
        self._starting.pop(key, None)
        if done.code != 0:
            await self._failed_to_start(key, pod, done.stderr)
            return
        self._running(key, f"podman://{done.text.strip()}")
        code = await self._wait_exit(name)
        if key in self.ended or self.server.pod(key) is None:
            return
        self.ended.add(key)
        inspected = await self.engine.run("inspect", "--format", "{{.State.OOMKilled}}", name, check=False)
        oom = inspected.text.strip() == "true"
        self.server.set_pod_status(key, status.terminated(self.server.pod(key) or pod, exit_code=code,
                                                          reason="OOMKilled" if oom else None))

    async def _wait_exit(self, name: str) -> int:
        """`<engine> wait`: the container's exit code once it ends (-1 if the engine cannot say). Cancelled, the
        waiting process is ended too, so nothing outlives the stand-in's loop."""
        from sandbox.container.engine import client_env

        process = await asyncio.create_subprocess_exec(*self.engine.command("wait", name), env=client_env(),
                                                       stdin=asyncio.subprocess.DEVNULL,
                                                       stdout=asyncio.subprocess.PIPE,
                                                       stderr=asyncio.subprocess.DEVNULL)
        try:
            out, _ = await process.communicate()
        finally:
            if process.returncode is None:
                process.kill()
                await process.wait()
        text = out.decode().strip()
        return int(text) if text.lstrip("-").isdigit() else -1

    async def _failed_to_start(self, key: Key, pod: dict[str, Any], stderr: str) -> None:
        await self.engine.run(*self.engine.remove_args(self.containers[key]), check=False)
        message = (stderr.strip().splitlines() or ["the engine could not start the container"])[-1][:500]
        if "image not known" in message or "pull" in message or "manifest unknown" in message:
            await self._show_pull_failure(key, pod, message, pod["spec"]["containers"][0].get("image", ""))
        else:
            self.server.set_pod_status(key, status.pending(pod, waiting_reason="RunContainerError", message=message))

    async def _kill(self, key: Key) -> None:
        starting = self._starting.pop(key, None)
        if starting is not None:
            with contextlib.suppress(Exception):
                await starting
        name = self.containers.pop(key, None)
        if name is not None:
            await self.engine.run(*self.engine.remove_args(name), check=False, timeout=120)
