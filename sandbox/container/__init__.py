"""The container backend: each task's own image, run by a container engine; `podman` and `docker` are its two names
(the name is the engine's binary). `api` speaks the engine's REST API over its socket (an attempt's containers and
exec streams), `engine` drives the CLI (the fallback, and images), `images` pulls, builds and locks
task images (a build runs in `build_network`'s network), `containers` opens an attempt's containers,
`processes` sees and kills what the agent started from outside, and `watchdog` removes the containers of a
leafcost process that died."""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from sandbox.protocol import OpenedSandbox, SandboxOptions
    from sandbox.tasks import Task


class ContainerBackend:
    names = ("podman", "docker")

    async def open(self, task: Task, options: SandboxOptions, *, solution: bool = False,
                   labels: dict[str, str] | None = None) -> OpenedSandbox:
        from sandbox.container.containers import open_container_sandbox

        return await open_container_sandbox(task, options, solution=solution, labels=labels)

    def require(self, options: SandboxOptions) -> None:
        from sandbox.container.engine import require_engine

        require_engine(options.backend)

    def remove_leftovers(self, options: SandboxOptions, run_id: str | None = None) -> list[str]:
        from sandbox.container.containers import remove_container_leftovers

        return remove_container_leftovers(options)

    async def close(self, options: SandboxOptions) -> None:
        """Each container is removed with its sandbox; the engine holds nothing for the run."""


BACKEND = ContainerBackend()
