"""The sandbox backends a run can name (`sandbox.backend`), in one registry: each name maps to the module whose
`BACKEND` object (a `Backend`) makes that kind of sandbox. A module is imported only when its backend is used, so
importing this one never loads a container engine's or a cluster's code. Nothing else in leafcost needs to know
which backends exist: a new backend is its package (a folder whose __init__ defines BACKEND) plus its line in
BACKEND_MODULES."""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Annotated, Literal, Protocol

from pydantic import BeforeValidator
from pydantic_core import PydanticCustomError

if TYPE_CHECKING:
    from sandbox.protocol import OpenedSandbox, SandboxOptions
    from sandbox.tasks import Task

# Name -> the module holding its BACKEND. Podman and Docker are one backend: the engine's CLI is the name.
BACKEND_MODULES: dict[str, str] = {
    "local": "sandbox.local",
    "podman": "sandbox.container",
    "docker": "sandbox.container",
    "kubernetes": "sandbox.kubernetes",
}
BACKENDS: tuple[str, ...] = tuple(BACKEND_MODULES)


def unknown_backend(name: object) -> str:
    """The one-line refusal of a backend name that is not registered."""
    return f"unknown backend {name!r}: choose one of {', '.join(BACKENDS)}"


def _known(name: object) -> object:
    if name not in BACKENDS:  # a tuple, so an unhashable value is refused too, not a TypeError
        raise PydanticCustomError("unknown_backend", "{problem}", {"problem": unknown_backend(name)})
    return name


# The type of every `backend` field (run spec, SandboxOptions): the registry's names, listed in the JSON schema.
BackendName = Annotated[Literal[BACKENDS], BeforeValidator(_known)]


class Backend(Protocol):
    """One kind of sandbox, as the runner, `validate` and the oracle use it."""

    names: tuple[str, ...]  # the `sandbox.backend` values it answers to

    async def open(self, task: Task, options: SandboxOptions, *, solution: bool = False,
                   labels: dict[str, str] | None = None) -> OpenedSandbox:
        """A fresh sandbox for one attempt of `task`."""

    def require(self, options: SandboxOptions) -> None:
        """Refuses, with what to install, when this machine cannot run the backend."""

    def remove_leftovers(self, options: SandboxOptions, run_id: str | None = None) -> list[str]:
        """What killed leafcost processes left behind, removed by the owner record each carries."""

    async def close(self, options: SandboxOptions) -> None:
        """Releases what the backend holds for the whole run."""


def backend_for(name: str) -> Backend:
    """The registered backend called `name`, its module imported now; ValueError names the choices."""
    if name not in BACKENDS:
        raise ValueError(unknown_backend(name))
    backend: Backend = importlib.import_module(BACKEND_MODULES[name]).BACKEND
    if name not in backend.names:
        raise ValueError(f"{BACKEND_MODULES[name]}.BACKEND answers to {', '.join(backend.names)}, not {name}")
    return backend


async def open_sandbox(task: Task, options: SandboxOptions, *, solution: bool = False,
                       labels: dict[str, str] | None = None) -> OpenedSandbox:
    """A fresh sandbox for one attempt of `task`; `solution` makes the task's solution/ available at /solution (the
    oracle). `labels` name the attempt (run, arm, task, seed, attempt) where the backend can carry them."""
    return await backend_for(options.backend).open(task, options, solution=solution, labels=labels)


def require_backend(options: SandboxOptions) -> None:
    """Refuses, with what to install, a backend this machine cannot run."""
    backend_for(options.backend).require(options)


def remove_leftovers(options: SandboxOptions, run_id: str | None = None) -> list[str]:
    """What killed leafcost processes left behind (workspaces, builds, cgroups, containers): removed by the owner
    record each carries, never by name alone; in a cluster, the pods labelled with this run. Called when a run or
    a validation starts."""
    return backend_for(options.backend).remove_leftovers(options, run_id)


async def close_backend(options: SandboxOptions) -> None:
    """Releases what the backend holds for the whole run (a cluster's API sessions); sandboxes are closed each."""
    await backend_for(options.backend).close(options)
