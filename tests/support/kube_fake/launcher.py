"""Running the stand-in for a test: `with KubeFake(mode="instant") as kube:` serves on 127.0.0.1 at a free port,
in a daemon thread with its own event loop, so sync tests and async ones (whose loop it never shares) both use
it. `kube.kubeconfig` is a kubeconfig file for `config.load_kube_config`, `kube.configuration()` a ready
`kubernetes.client.Configuration`; hooks and reads are plain methods, safe from any thread."""

from __future__ import annotations

import asyncio
import json
import tempfile
import threading
from collections.abc import Coroutine
from pathlib import Path
from typing import Any, Literal, TypeVar

from aiohttp import web

from support.kube_fake import status
from support.kube_fake.apiserver import FakeApiServer
from support.kube_fake.exec_ws import ExecHandler, scripted_exec
from support.kube_fake.hub import BACKLOG, EventHub
from support.kube_fake.kubelets import ContainerKubelet, Faults, InstantKubelet
from support.kube_fake.recording import Seen

__all__ = ["KubeFake"]

T = TypeVar("T")
_MAX_HEAD_FIELD = 64 * 1024  # an exec URL carries the whole command line


class KubeFake:
    """A running stand-in API server (and kubelet) on a real loopback socket.

    `mode="instant"`: pods are Running and Ready as soon as they are created and exec answers from
    `exec_handler` (default `scripted_exec`). `mode="container"`: each pod is a real container of the
    container backend's engine (`engine`, default podman), exec runs in it. `faults` are the failure hooks
    (also settable while running: `kube.faults.creation_delay = 0.5`); `seen` records what clients did.
    """

    def __init__(self, mode: Literal["instant", "container"] = "instant", *, namespace: str = "leafcost-test",
                 exec_handler: ExecHandler = scripted_exec, engine: str = "podman", faults: Faults | None = None,
                 host: str = "127.0.0.1", port: int = 0, startup_timeout: float = 30.0,
                 watch_backlog: int = BACKLOG) -> None:
        self.mode, self.namespace, self.host, self.port = mode, namespace, host, port
        self.watch_backlog = watch_backlog  # events per resource a watch can resume from (older: 410 Expired)
        self.faults = faults or Faults()
        self.exec_handler, self.engine_name = exec_handler, engine
        self.startup_timeout = startup_timeout
        self.server: FakeApiServer | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._thread: threading.Thread | None = None
        self._stopping: asyncio.Event | None = None
        self._tmpdir: tempfile.TemporaryDirectory[str] | None = None

    # --- addresses -------------------------------------------------------------------------------------------

    @property
    def url(self) -> str:
        return f"http://{self.host}:{self.port}"

    @property
    def kubeconfig(self) -> Path:
        """A kubeconfig file whose current context points at the stand-in, in `namespace`."""
        assert self._tmpdir is not None, "start the stand-in first"
        return Path(self._tmpdir.name) / "kubeconfig"

    def configuration(self) -> Any:
        from kubernetes import client

        configuration = client.Configuration(host=self.url)
        configuration.api_key = {"authorization": "Bearer kube-fake"}
        return configuration

    @property
    def seen(self) -> Seen:
        assert self.server is not None
        return self.server.seen

    # --- hooks and reads (any thread) ------------------------------------------------------------------------

    def fail_image(self, pattern: str, message: str = "manifest unknown: the stand-in cannot pull it") -> None:
        """Pods whose image matches `pattern` (fnmatch) show ErrImagePull, then ImagePullBackOff, with `message`."""
        self.faults.image_failures[pattern] = message

    def pod(self, name: str, namespace: str | None = None) -> dict[str, Any] | None:
        return self._call(self._async_pod(name, namespace))

    def pods(self, namespace: str | None = None) -> list[dict[str, Any]]:
        """The pods stored now (terminating ones included)."""
        return self._call(self._async_pods(namespace))

    def evict(self, name: str, *, reason: str = "Evicted", message: str = "The node was low on resource: memory.",
              namespace: str | None = None) -> None:
        """The kubelet evicts the pod: its container is killed, the pod stays Failed with `reason`."""
        self._call(self._end(name, namespace, lambda pod: status.evicted(pod, reason=reason, message=message)))

    def oom_kill(self, name: str, namespace: str | None = None) -> None:
        """The container is OOM-killed: terminated reason OOMKilled, exit code 137, the pod Failed."""
        self._call(self._end(name, namespace, lambda pod: status.terminated(pod, exit_code=137, reason="OOMKilled")))

    def vanish(self, name: str, namespace: str | None = None) -> None:
        """The pod disappears without a deletion request (a lost node, someone else's force delete)."""
        assert self.server is not None
        self._call(self.server.vanish((namespace or self.namespace, name)))

    def container_of(self, name: str, namespace: str | None = None) -> str | None:
        """The engine's container name for a pod (container mode), None when it has none (yet, or any more)."""
        kubelet = self.server.kubelet if self.server is not None else None
        if not isinstance(kubelet, ContainerKubelet):
            return None
        return kubelet.containers.get((namespace or self.namespace, name))

    @property
    def container_label(self) -> str:
        """`label=value` every container of this stand-in carries (for `podman ps --filter label=...`)."""
        from support.kube_fake.containers import SERVER_LABEL

        kubelet = self.server.kubelet if self.server is not None else None
        assert isinstance(kubelet, ContainerKubelet), "only container mode starts containers"
        return f"{SERVER_LABEL}={kubelet.server_id}"

    # --- lifecycle -------------------------------------------------------------------------------------------

    def start(self) -> KubeFake:
        ready = threading.Event()
        failure: list[BaseException] = []

        def run() -> None:
            loop = asyncio.new_event_loop()
            self._loop = loop
            try:
                loop.run_until_complete(self._serve(ready))
            except BaseException as exc:  # noqa: BLE001 - reported to the starting thread
                failure.append(exc)
                ready.set()
            finally:
                loop.close()

        self._tmpdir = tempfile.TemporaryDirectory(prefix="kube-fake-")
        self._thread = threading.Thread(target=run, name="kube-fake", daemon=True)
        self._thread.start()
        if not ready.wait(self.startup_timeout):
            raise RuntimeError(f"the Kubernetes stand-in did not start within {self.startup_timeout:g}s")
        if failure:
            raise RuntimeError(f"the Kubernetes stand-in failed to start: {failure[0]!r}") from failure[0]
        self._write_kubeconfig()
        return self

    def stop(self) -> None:
        if self._loop is not None and self._stopping is not None and self._thread is not None:
            self._loop.call_soon_threadsafe(self._stopping.set)
            self._thread.join(120)
        self._loop = self._thread = None
        if self._tmpdir is not None:
            self._tmpdir.cleanup()
            self._tmpdir = None

    def __enter__(self) -> KubeFake:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    async def _serve(self, ready: threading.Event) -> None:
        self._stopping = asyncio.Event()
        server = self.server = FakeApiServer(faults=self.faults, hub=EventHub(self.watch_backlog))
        if self.mode == "container":
            from sandbox.container.engine import require_engine

            server.kubelet = ContainerKubelet(server, self.faults, require_engine(self.engine_name))
        else:
            server.kubelet = InstantKubelet(server, self.faults, self.exec_handler)
        async with server:  # kmock's handler must be entered to serve
            http = web.Server(server, handler_cancellation=True, access_log=None, max_line_size=_MAX_HEAD_FIELD,
                              max_field_size=_MAX_HEAD_FIELD)
            runner = web.ServerRunner(http, shutdown_timeout=1.0)
            await runner.setup()
            site = web.TCPSite(runner, self.host, self.port, reuse_address=True, backlog=1024)
            await site.start()
            self.port = runner.addresses[0][1]
            ready.set()
            try:
                await self._stopping.wait()
            finally:
                await runner.cleanup()
                await server.close()

    def _write_kubeconfig(self) -> None:
        config = {
            "apiVersion": "v1", "kind": "Config", "current-context": "kube-fake", "preferences": {},
            "clusters": [{"name": "kube-fake", "cluster": {"server": self.url}}],
            "users": [{"name": "kube-fake", "user": {"token": "kube-fake"}}],
            "contexts": [{"name": "kube-fake", "context": {"cluster": "kube-fake", "user": "kube-fake",
                                                           "namespace": self.namespace}}],
        }
        self.kubeconfig.write_text(json.dumps(config, indent=2))  # JSON is YAML

    def _call(self, coroutine: Coroutine[Any, Any, T]) -> T:
        assert self._loop is not None, "start the stand-in first"
        return asyncio.run_coroutine_threadsafe(coroutine, self._loop).result(300)

    async def _async_pod(self, name: str, namespace: str | None) -> dict[str, Any] | None:
        assert self.server is not None
        return self.server.pod((namespace or self.namespace, name))

    async def _async_pods(self, namespace: str | None) -> list[dict[str, Any]]:
        from support.kube_fake.apiserver import PODS

        assert self.server is not None
        return self.server.items(PODS, namespace)

    async def _end(self, name: str, namespace: str | None, new_status: Any) -> None:
        assert self.server is not None and self.server.kubelet is not None
        key = (namespace or self.namespace, name)
        pod = self.server.pod(key)
        if pod is None:
            raise KeyError(f"no pod {key[0]}/{name}")
        await self.server.kubelet.end(key, new_status(pod))
