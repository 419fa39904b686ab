"""A task's environment as a real container image: the image `environment.docker_image` names (pulled when
missing), else one the engine builds from `environment/` (every Dockerfile instruction works). The image lock pins
each task's image to its ID, so "identical sandboxes" means the same image everywhere; the ID goes into the
sandbox spec hash."""

from __future__ import annotations

import asyncio
import hashlib
import json
import os
import re
import shlex
import tempfile
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Literal

from pydantic import BaseModel, Field, ValidationError, field_validator

from sandbox.container.build_network import build_network
from sandbox.shared.digests import update_with_tree
from sandbox.shared.dockerfile import base_images, replace_base_images
from sandbox.container.engine import ULIMITS, Completed, Engine, EngineError
from sandbox.image_names import is_reference, local_names, qualified
from sandbox.protocol import BuildError, SandboxOptions
from sandbox.tasks import ComposeService, EnvironmentConfig, HealthcheckConfig, Task

BUILD_FORMAT = "2"  # bump when the way images are built changes, so old tags are not reused



class ResolvedImage(BaseModel):
    reference: str  # the name the task gave, or the tag leafcost built
    id: str  # sha256:<hex>: what containers are created from
    repo_digest: str | None = None
    user: str = ""  # the image's USER; "" is root
    workdir: str = "/"
    healthcheck: HealthcheckConfig | None = None


class LockedImage(BaseModel):
    image: str
    id: str
    repo_digest: str | None = None

    @field_validator("image", "id", "repo_digest")
    @classmethod
    def _a_reference(cls, value: str | None) -> str | None:
        if value is not None and not is_reference(value):
            raise ValueError(f"{value[:200]!r} is not an image reference")
        return value


class ImageLock(BaseModel):
    """`leafcost images lock`'s file: every task's image (and separate verifier's, and Compose services') by ID."""

    format: Literal[1] = 1
    engine: str
    tasks: dict[str, LockedImage] = Field(default_factory=dict)
    verifiers: dict[str, LockedImage] = Field(default_factory=dict)
    services: dict[str, dict[str, LockedImage]] = Field(default_factory=dict)  # a Compose task's, by service name


async def task_image(engine: Engine, task: Task, options: SandboxOptions) -> ResolvedImage:
    """The agent's image of `task`, held to the image lock when the run has one."""
    return await _locked(engine, task, options, "tasks", lambda: _agent_image(engine, task))


async def verifier_image(engine: Engine, task: Task, options: SandboxOptions) -> ResolvedImage:
    """The image a separate verifier runs in: built from tests/Dockerfile, else the verifier environment's
    `docker_image`, else the agent's own."""
    return await _locked(engine, task, options, "verifiers", lambda: _verifier_image(engine, task))


async def service_image(engine: Engine, task: Task, service: ComposeService,
                        options: SandboxOptions) -> ResolvedImage:
    """A service of the task's Compose file: built from its `build` context, else its `image` (pulled when
    missing); held to the image lock's `services` entry when the run has a lock. Its ID joins the sandbox spec."""
    return await _locked(engine, task, options, "services", lambda: _service_image(engine, task, service),
                         service=service.name)


async def _service_image(engine: Engine, task: Task, service: ComposeService) -> ResolvedImage:
    if service.dockerfile is not None and service.build_context is not None:
        return await _built(engine, task, service.dockerfile, service.build_context, "leafcost-service",
                            task.environment)
    assert service.image is not None  # sandbox.compose refuses a service with neither
    return await _named(engine, task, service.image, task.environment)


async def lock_images(engine: Engine, tasks: Sequence[Task], path: Path,
                      on_task: Callable[[Task, ResolvedImage | None, str | None], None] | None = None) -> ImageLock:
    """Resolves (builds or pulls) every task's image and writes the lock; a task whose image cannot be had is
    left out and reported through `on_task` with its one-line reason."""
    lock = ImageLock(engine=engine.name)
    for task in tasks:
        try:
            image = await _agent_image(engine, task)
            services = {service.name: await _service_image(engine, task, service)
                        for service in (task.compose.services if task.compose else [])}
            lock.tasks[task.task_id] = LockedImage(image=image.reference, id=image.id, repo_digest=image.repo_digest)
            if services:
                lock.services[task.task_id] = {name: LockedImage(image=found.reference, id=found.id,
                                                                 repo_digest=found.repo_digest)
                                               for name, found in services.items()}
            if task.config.verifier_mode == "separate":
                verifier = await _verifier_image(engine, task)
                lock.verifiers[task.task_id] = LockedImage(image=verifier.reference, id=verifier.id,
                                                           repo_digest=verifier.repo_digest)
        except BuildError as exc:
            if on_task:
                on_task(task, None, str(exc))
            continue
        if on_task:
            on_task(task, image, None)
    temporary = path.with_name(f".{path.name}.tmp")
    temporary.write_text(lock.model_dump_json(indent=2) + "\n")
    os.replace(temporary, path)
    return lock


def read_lock(path: Path) -> ImageLock:
    try:
        return ImageLock.model_validate_json(Path(path).read_bytes())
    except OSError as exc:
        raise BuildError(f"image lock {path}: cannot be read: {exc.strerror}") from None
    except ValidationError as exc:
        first = exc.errors()[0]
        where = ".".join(str(part) for part in first["loc"]) or "(top level)"
        raise BuildError(f"image lock {path}: {where}: {first['msg']} (write it with `leafcost images lock`)") \
            from None


def locked_entry(path: Path, task: Task, kind: str, service: str | None = None) -> LockedImage:
    """`task`'s entry in the image lock at `path`: its image (`kind` "tasks"), its separate verifier's
    ("verifiers") or one Compose service's ("services", named by `service`); missing, a BuildError saying to lock
    again. Both image backends hold a run to its lock through this."""
    lock = read_lock(path)
    if kind == "services":
        entry, what = lock.services.get(task.task_id, {}).get(service or ""), f": service {service} is"
    else:
        entry, what = getattr(lock, kind).get(task.task_id), ":" if kind == "tasks" else "'s verifier:"
    if entry is None:
        raise BuildError(f"task {task.task_id}{what} not in the image lock {path}; run `leafcost images lock` on "
                         "this suite again")
    return entry


async def _locked(engine: Engine, task: Task, options: SandboxOptions, kind: str, resolve,
                  service: str | None = None) -> ResolvedImage:
    if options.images_lock is None:
        return await resolve()
    entry = locked_entry(options.images_lock, task, kind, service)
    if await _exists(engine, entry.id):
        return (await _inspect(engine, entry.id)).model_copy(update={"reference": entry.image})
    if entry.repo_digest:
        await _pull(engine, task, qualified(entry.repo_digest), task.environment.build_timeout_sec)
        image = await _inspect(engine, qualified(entry.repo_digest))
    else:
        image = await resolve()
    if image.id != entry.id:
        whose = f"service {service}'s " if service else ""
        raise BuildError(f"task {task.task_id}: {whose}image {entry.image} is {image.id[:19]}, but the image lock "
                         f"{options.images_lock} says {entry.id[:19]}; it was rebuilt or re-pulled since the lock: "
                         "restore that image or lock again")
    return image


async def _agent_image(engine: Engine, task: Task) -> ResolvedImage:
    env = task.environment
    if env.docker_image:  # as Harbor: a named image is used as it is, even beside a Dockerfile
        return await _named(engine, task, env.docker_image, env)
    if task.dockerfile is None:
        raise BuildError(f"task {task.task_id}: neither environment.docker_image nor environment/Dockerfile")
    return await _built(engine, task, task.dockerfile, task.build_context, "leafcost-env", env)


async def _verifier_image(engine: Engine, task: Task) -> ResolvedImage:
    env = task.config.verifier_environment or task.environment
    if task.verifier_dockerfile is not None:
        return await _built(engine, task, task.verifier_dockerfile, task.tests_dir, "leafcost-verifier", env)
    if env.docker_image:
        return await _named(engine, task, env.docker_image, env)
    return await _agent_image(engine, task)


# One build or pull of a reference at a time in this process; what was resolved once is not asked again.
_GUARDS: dict[str, asyncio.Lock] = {}
_RESOLVED: dict[tuple[str, str], ResolvedImage] = {}


async def _named(engine: Engine, task: Task, reference: str, env: EnvironmentConfig) -> ResolvedImage:
    if not is_reference(reference):
        raise BuildError(f"task {task.task_id}: environment.docker_image {reference[:200]!r} is not an image reference "
                         "([registry/]name[:tag][@sha256:digest], lowercase name); correct it in task.toml")
    async with _GUARDS.setdefault(reference, asyncio.Lock()):
        if (engine.name, reference) not in _RESOLVED:
            local = await _present(engine, task, reference, env.build_timeout_sec)
            found = await _inspect(engine, local)  # the lock keeps the task's own name beside the ID found
            _RESOLVED[engine.name, reference] = found.model_copy(update={"reference": reference})
    return _RESOLVED[engine.name, reference]


async def _present(engine: Engine, task: Task | None, reference: str, timeout: float,
                   prefix: Sequence[str] = ()) -> str:
    """The name under which `reference` is on this machine (see `local_names`), pulling Docker's name for it when
    it is not: never the bare short name, which Podman resolves through registries only it is configured with."""
    for name in local_names(reference):
        if await _exists(engine, name):
            return name
    await _pull(engine, task, qualified(reference), timeout, prefix)
    return qualified(reference)


async def _built(engine: Engine, task: Task, dockerfile: Path, context: Path, prefix: str,
                 env: EnvironmentConfig) -> ResolvedImage:
    tag = f"{prefix}/{repository_name(task.task_id)}:{await asyncio.to_thread(_build_key, dockerfile, context)}"
    async with _GUARDS.setdefault(tag, asyncio.Lock()):
        if (engine.name, tag) not in _RESOLVED:
            if not await _exists(engine, tag):
                await _build(engine, task, dockerfile, context, tag, env.build_timeout_sec)
            built = await _inspect(engine, tag)  # a local build has no registry digest to pull it by
            _RESOLVED[engine.name, tag] = built.model_copy(update={"repo_digest": None})
    return _RESOLVED[engine.name, tag]


async def _build(engine: Engine, task: Task, dockerfile: Path, context: Path, tag: str, timeout: float) -> None:
    try:
        done = await build_image(engine, dockerfile, context, tag, timeout=timeout, task=task)
    except EngineError:
        raise BuildError(f"task {task.task_id}: the image build exceeded build_timeout_sec={timeout:g}") from None
    if done.code != 0:
        raise BuildError(f"task {task.task_id}: {build_failure(done.text, done.code)}")


async def build_image(engine: Engine, dockerfile: Path, context: Path, tag: str, *, timeout: float,
                      task: Task | None = None) -> Completed:
    """Builds `tag` from `dockerfile` and `context` as a task's image is built (the build's own network namespace,
    each base image under its name here, pulled when missing) and returns the engine's result, a failed build's
    included, its output merged; EngineError when it runs past `timeout`, BuildError when a base cannot be had."""
    # Podman's own image format drops HEALTHCHECK; Docker's keeps it.
    format_flags = ["--format", "docker"] if engine.name == "podman" else []
    source = dockerfile.read_text(encoding="utf-8", errors="surrogateescape")
    async with build_network(engine) as network:  # its own namespace: never the host's loopback
        # Each base under the name it has here (pulled now if missing): the engine never reads a short name.
        names = {base: await _present(engine, task, base, timeout, network.prefix)
                 for base in dict.fromkeys(base_images(source)) if is_reference(base)}
        with _as_built(dockerfile, source, replace_base_images(source, names)) as built_from:
            return await engine.run("build", *format_flags, *network.flags, *ULIMITS, "--label", "leafcost=1",
                                    "-t", tag, "-f", str(built_from), str(context), timeout=timeout, check=False,
                                    prefix=network.prefix, merged=True)


BUILD_TAIL_LINES = 20
# Where a builder's output says which instruction runs: Podman/Buildah, Docker's classic builder, BuildKit (plain).
_STEP = re.compile(r"^(?:(?:\[\d+/\d+\] )?STEP \d+/\d+: |Step \d+/\d+ : |#\d+ \[)")  # Podman: [stage/stages]


def build_failure(output: str, code: int) -> str:
    """A failed build in a line (the failing step, its last line of output, the engine's verdict) and then the last
    BUILD_TAIL_LINES lines of the build's output, the failing step's STEP line always among them."""
    lines = [line.rstrip()[:300] for line in output.splitlines() if line.strip()]
    steps = [index for index, line in enumerate(lines) if _STEP.match(line)]
    verdict = next((line for line in reversed(lines) if line.startswith(("Error:", "ERROR:", "error:"))),
                   f"exit code {code}")
    summary = "the image build failed"
    if steps:
        step = steps[-1]
        said = [line for line in lines[step + 1:] if line != verdict and not line.startswith("--> ")]
        summary += f" at {lines[step][:200]}" + (f": {said[-1][:200]}" if said else "")
    summary += f" ({verdict.rsplit(': ', 1)[-1][:200]})"
    tail = lines[-BUILD_TAIL_LINES:]
    if steps and steps[-1] < len(lines) - BUILD_TAIL_LINES:
        tail = [lines[steps[-1]], "...", *tail[2:]]
    return "\n".join([summary, *tail])


@contextmanager
def _as_built(dockerfile: Path, source: str, text: str) -> Iterator[Path]:
    """The Dockerfile the engine reads: the task's own, or a copy with its base images renamed (beside no build
    context, so it is never part of one)."""
    if text == source:
        yield dockerfile
        return
    with tempfile.TemporaryDirectory(prefix="leafcost-dockerfile-") as directory:
        copy = Path(directory, "Dockerfile")
        copy.write_text(text, encoding="utf-8", errors="surrogateescape")
        yield copy


# What engines say when a registry cannot be reached at all (as opposed to one that answers "not found").
_UNREACHABLE = ("pinging container registry", "dial tcp", "no such host", "connection refused", "i/o timeout",
                "network is unreachable", "tls handshake timeout", "x509:", "context deadline exceeded")


async def _pull(engine: Engine, task: Task | None, reference: str, timeout: float,
                prefix: Sequence[str] = ()) -> None:
    whose = f"task {task.task_id}: " if task is not None else ""
    try:
        await engine.run("pull", "--", reference, timeout=timeout, prefix=prefix)
    except EngineError as exc:
        said = exc.stderr.strip()
        if not said or any(sign in said.lower() for sign in _UNREACHABLE):
            mirror = ("point podman at a mirror (CONTAINERS_REGISTRIES_CONF)" if engine.name == "podman"
                      else "give the Docker daemon a registry mirror")
            if task is not None and task.swebench is not None:
                mirror += ", or name a mirror's instance images with --swebench-namespace"
            raise BuildError(f"{whose}image {reference}: not on this machine and the registry is "
                             f"unreachable: build or load it (`{engine.name} load`), or {mirror}") from None
        raise BuildError(f"{whose}image {reference} cannot be pulled: "
                         f"{said.splitlines()[-1][:300]}") from None


async def _exists(engine: Engine, reference: str) -> bool:
    found = await engine.run("image", "inspect", "--format", "{{.Id}}", "--", reference, check=False)
    return found.code == 0


async def _inspect(engine: Engine, reference: str) -> ResolvedImage:
    data = json.loads((await engine.run("image", "inspect", "--", reference)).stdout)[0]
    config = data.get("Config") or {}
    image_id = data["Id"] if data["Id"].startswith("sha256:") else f"sha256:{data['Id']}"
    return ResolvedImage(reference=reference, id=image_id, repo_digest=(data.get("RepoDigests") or [None])[0],
                         user=config.get("User") or "", workdir=config.get("WorkingDir") or "/",
                         healthcheck=image_healthcheck(data.get("Healthcheck") or config.get("Healthcheck")))


def image_healthcheck(check: dict | None) -> HealthcheckConfig | None:
    """Docker's HEALTHCHECK (durations in nanoseconds) as task.toml's healthcheck: a shell command."""
    test = (check or {}).get("Test") or []
    if len(test) < 2 or test[0] not in ("CMD-SHELL", "CMD"):
        return None  # NONE, or nothing to run
    command = test[1] if test[0] == "CMD-SHELL" else shlex.join(test[1:])
    seconds = {key: check[key] / 1e9 for key in ("Interval", "Timeout", "StartPeriod", "StartInterval")
               if check.get(key)}
    return HealthcheckConfig(command=command, interval_sec=seconds.get("Interval", 30.0),
                             timeout_sec=seconds.get("Timeout", 30.0), start_period_sec=seconds.get("StartPeriod", 0.0),
                             start_interval_sec=seconds.get("StartInterval", 5.0), retries=check.get("Retries") or 3)


def _build_key(dockerfile: Path, context: Path) -> str:
    digest = hashlib.sha256(BUILD_FORMAT.encode() + b"\0" + dockerfile.read_bytes() + b"\0")
    update_with_tree(digest, context)
    return digest.hexdigest()[:24]


REPOSITORY_NAME_MAX = 100


def repository_name(task_id: str) -> str:
    """A task id as the path of the image tag leafcost builds: components of the reference grammar (lowercase
    letters and digits, joined by one `.`, `_` or runs of `-`), at most REPOSITORY_NAME_MAX characters; a longer
    id is cut and ends in a hash of the whole, so two ids never share a name."""
    components = []
    for part in task_id.lower().split("/"):
        part = re.sub(r"[^a-z0-9._-]+", "-", part)
        part = re.sub(r"[._-]{2,}", lambda run: run.group() if set(run.group()) == {"-"} else "-", part)
        if part := part.strip("._-"):
            components.append(part)
    name = "/".join(components) or "task"
    if len(name) > REPOSITORY_NAME_MAX:
        digest = hashlib.sha256(task_id.encode("utf-8", "surrogateescape")).hexdigest()[:16]
        name = f"{name[:REPOSITORY_NAME_MAX - 17].rstrip('/._-')}-{digest}"
    return name
