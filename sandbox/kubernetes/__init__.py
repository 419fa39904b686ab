"""The `kubernetes` backend: one pod per attempt, from the image digests `sandbox.container.images` locks.
`pods` makes, watches and deletes them through the official client, `manifests` writes each pod and its
network policies, `exec_stream` is the websocket exec every command goes through, and `pod_files` copies
files in and out as tar, checked on both sides."""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from sandbox.protocol import OpenedSandbox, SandboxOptions
    from sandbox.tasks import Task


class KubernetesBackend:
    names = ("kubernetes",)

    async def open(self, task: Task, options: SandboxOptions, *, solution: bool = False,
                   labels: dict[str, str] | None = None) -> OpenedSandbox:
        from sandbox.kubernetes.pods import open_kube_sandbox

        return await open_kube_sandbox(task, options, solution=solution, labels=labels)

    def require(self, options: SandboxOptions) -> None:
        from sandbox.kubernetes.pods import require_cluster

        require_cluster(options)

    def remove_leftovers(self, options: SandboxOptions, run_id: str | None = None) -> list[str]:
        from sandbox.kubernetes.pods import remove_run_pods

        return remove_run_pods(options, run_id)

    async def close(self, options: SandboxOptions) -> None:
        from sandbox.kubernetes.pods import close_clusters

        await close_clusters()  # the API sessions every pod of the run shared


BACKEND = KubernetesBackend()
