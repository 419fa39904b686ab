"""Chooses the sandbox backend a run asked for (`sandbox.backend`): the only place that knows them all."""

from __future__ import annotations

from sandbox.protocol import OpenedSandbox, SandboxOptions
from sandbox.tasks import Task


async def open_sandbox(task: Task, options: SandboxOptions, *, solution: bool = False,
                       labels: dict[str, str] | None = None) -> OpenedSandbox:
    """A fresh sandbox for one attempt of `task`; `solution` makes the task's solution/ available at /solution (the
    oracle). `labels` name the attempt (run, arm, task, seed, attempt) where the backend can carry them."""
    if options.backend == "local":
        from sandbox.environment import open_local_sandbox

        return await open_local_sandbox(task, options, solution=solution)
    if options.backend == "kubernetes":
        from sandbox.kubernetes import open_kube_sandbox

        return await open_kube_sandbox(task, options, solution=solution, labels=labels)
    from sandbox.container import open_container_sandbox

    return await open_container_sandbox(task, options, solution=solution, labels=labels)


def require_backend(options: SandboxOptions) -> None:
    """Refuses, with what to install, a backend this machine cannot run."""
    if options.backend == "local":
        from sandbox.local import require_isolation

        require_isolation(options)
        return
    if options.backend == "kubernetes":
        from sandbox.kubernetes import require_cluster

        require_cluster(options)
        return
    from sandbox.engine import require_engine

    require_engine(options.backend)


def remove_leftovers(options: SandboxOptions, run_id: str | None = None) -> list[str]:
    """What killed leafcost processes left behind (workspaces, builds, cgroups, containers): removed by the owner
    record each carries, never by name alone; in a cluster, the pods labelled with this run. Called when a run or
    a validation starts."""
    if options.backend == "kubernetes":
        from sandbox.kubernetes import remove_run_pods

        return remove_run_pods(options, run_id)
    if options.backend == "local":
        from sandbox.environment import remove_local_leftovers

        return remove_local_leftovers(options)
    from sandbox.container import remove_container_leftovers

    return remove_container_leftovers(options)


async def close_backend(options: SandboxOptions) -> None:
    """Releases what the backend holds for the whole run (a cluster's API sessions); sandboxes are closed each."""
    if options.backend == "kubernetes":
        from sandbox.kubernetes import close_clusters

        await close_clusters()
