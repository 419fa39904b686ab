"""The `local` backend, the embedded default: bubblewrap over this host's system directories. `environment`
replays a task's Dockerfile over the base root into a cached root and opens each attempt on a private copy,
`bwrap` is the sandbox (the tool runner in a fresh bubblewrap), `limits` holds it to the task's resources
(a cgroup, else prlimit)."""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from sandbox.protocol import OpenedSandbox, SandboxOptions
    from sandbox.tasks import Task


class LocalBackend:
    names = ("local",)

    async def open(self, task: Task, options: SandboxOptions, *, solution: bool = False,
                   labels: dict[str, str] | None = None) -> OpenedSandbox:
        from sandbox.local.environment import open_local_sandbox

        return await open_local_sandbox(task, options, solution=solution)  # a workspace carries no labels

    def require(self, options: SandboxOptions) -> None:
        from sandbox.local.bwrap import require_isolation

        require_isolation(options)

    def remove_leftovers(self, options: SandboxOptions, run_id: str | None = None) -> list[str]:
        from sandbox.local.environment import remove_local_leftovers

        return remove_local_leftovers(options)

    async def close(self, options: SandboxOptions) -> None:
        """Nothing outlives a sandbox here."""


BACKEND = LocalBackend()
