"""The typed task every loader produces and every sandbox consumes, whatever format it came from.

`TaskConfig` is Harbor's `task.toml` schema (1.2) field for field, so a task Harbor accepts loads here too. Keys
Harbor does not know are ignored, as Harbor ignores them; the loader lists them (`unknown_keys`) so a typo is seen.
Where Harbor leaves a resource unset (None: "the backend decides"), leafcost keeps its own defaults, because every
attempt of every arm must run under the same stated limits: cpus 1, memory_mb 2048, storage_mb 10240, pids 1024,
agent timeout_sec 10800 and verifier timeout_sec 600.
"""

from __future__ import annotations

import re
from datetime import date, datetime, time, timezone
from pathlib import Path
from types import UnionType
from typing import Any, ClassVar, Literal, Union, get_args, get_origin

from pydantic import BaseModel, Field, ValidationInfo, field_validator, model_validator

# Harbor's package names: "org/name", each part starting alphanumeric, no "..".
PACKAGE_NAME = re.compile(r"^[a-zA-Z0-9][a-zA-Z0-9._-]*/[a-zA-Z0-9][a-zA-Z0-9._-]*$")
TPU_TOPOLOGY = re.compile(r"^[1-9]\d*(x[1-9]\d*)+$")


class HarborModel(BaseModel):
    """Extra keys are ignored, as in Harbor. `old_names` are older spellings a before-validator renames; they are
    not reported as unknown."""

    old_names: ClassVar[frozenset[str]] = frozenset()


class Author(HarborModel):
    name: str
    email: str | None = None


class PackageInfo(HarborModel):
    """`[task]`: the task's registry identity."""

    name: str
    description: str = ""
    authors: list[Author] = Field(default_factory=list)
    keywords: list[str] = Field(default_factory=list)

    @field_validator("name")
    @classmethod
    def _org_slash_name(cls, value: str) -> str:
        if not PACKAGE_NAME.match(value) or ".." in value:
            raise ValueError("must be 'org/name' (letters, digits, '.', '_' and '-', not starting with a dot, "
                             "without '..')")
        return value


class HealthcheckConfig(HarborModel):
    """Docker HEALTHCHECK's options: the command must pass before the agent starts."""

    command: str
    interval_sec: float = 5.0
    timeout_sec: float = 30.0
    start_period_sec: float = 0.0
    start_interval_sec: float = 5.0
    retries: int = 3


class TpuSpec(HarborModel):
    type: str = Field(min_length=1)
    topology: str

    @field_validator("topology")
    @classmethod
    def _dimensions(cls, value: str) -> str:
        if not TPU_TOPOLOGY.match(value.strip()):
            raise ValueError("must be dimensions joined by 'x', such as '2x4' or '2x2x1'")
        return value.strip()


class MCPServerConfig(HarborModel):
    name: str
    transport: Literal["stdio", "sse", "streamable-http"] = "sse"
    url: str | None = None
    command: str | None = None
    args: list[str] = Field(default_factory=list)

    @field_validator("transport", mode="before")
    @classmethod
    def _http_alias(cls, value: Any) -> Any:
        return "streamable-http" if value == "http" else value

    @model_validator(mode="after")
    def _transport_fields(self) -> MCPServerConfig:
        if self.transport != "stdio" and not self.url:
            raise ValueError(f"'url' is required for transport '{self.transport}'")
        if self.transport == "stdio" and not self.command:
            raise ValueError("'command' is required for transport 'stdio'")
        return self


class EnvironmentConfig(HarborModel):
    """`[environment]` (and `[verifier.environment]`), with the older spellings Harbor still reads."""

    old_names: ClassVar[frozenset[str]] = frozenset({"network"})

    build_timeout_sec: float = Field(600.0, gt=0)
    docker_image: str | None = None
    os: Literal["linux", "windows"] = "linux"
    # leafcost's defaults where Harbor has None (see the module docstring); pids is leafcost's own.
    cpus: float = Field(1.0, gt=0)
    memory_mb: int = Field(2048, gt=0)
    storage_mb: int = Field(10240, gt=0)
    pids: int = Field(1024, gt=0)
    gpus: int | None = Field(None, ge=0)
    gpu_types: list[str] | None = None
    tpu: TpuSpec | None = None
    # Harbor's default: a task has the network unless it says `allow_internet = false` (older leafcost: `network`).
    allow_internet: bool = True
    mcp_servers: list[MCPServerConfig] = Field(default_factory=list)
    env: dict[str, str] = Field(default_factory=dict)
    skills_dir: str | None = None
    healthcheck: HealthcheckConfig | None = None
    workdir: str | None = None
    # Older spellings ('4G', '512M' or megabytes), folded into memory_mb/storage_mb before validation. Left here
    # only when they cannot be: then their validator names the problem alongside every other error.
    memory: Any = Field(None, exclude=True, repr=False)
    storage: Any = Field(None, exclude=True, repr=False)

    @field_validator("os", mode="before")
    @classmethod
    def _lower_os(cls, value: Any) -> Any:
        return value.lower() if isinstance(value, str) else value

    @model_validator(mode="before")
    @classmethod
    def _old_spellings(cls, data: Any) -> Any:
        if not isinstance(data, dict):
            return data
        data = dict(data)
        if "network" in data:
            data.setdefault("allow_internet", data.pop("network"))
        for old, new in (("memory", "memory_mb"), ("storage", "storage_mb")):
            if old in data:
                try:
                    value = _megabytes(data[old])
                except ValueError:
                    continue
                if data.setdefault(new, value) == value:
                    del data[old]
        return data

    @field_validator("memory", "storage", mode="before")
    @classmethod
    def _old_size_left_over(cls, value: Any, info: ValidationInfo) -> Any:
        megabytes = _megabytes(value)
        new = f"{info.field_name}_mb"
        raise ValueError(f"{megabytes} MB conflicts with {new} = {info.data.get(new)!r}, keep only {new}")


class AgentConfig(HarborModel):
    timeout_sec: float = Field(10800.0, gt=0)
    user: str | int | None = None  # None: the image's USER


class VerifierConfig(HarborModel):
    timeout_sec: float = Field(600.0, gt=0)
    env: dict[str, str] = Field(default_factory=dict)
    user: str | int | None = None
    environment_mode: Literal["shared", "separate"] | None = None
    environment: EnvironmentConfig | None = None  # the separate verifier's own environment

    @model_validator(mode="after")
    def _shared_has_no_environment(self) -> VerifierConfig:
        if self.environment_mode == "shared" and self.environment is not None:
            raise ValueError("environment_mode = 'shared' conflicts with [verifier.environment]: remove the table "
                             "or set environment_mode = 'separate'")
        return self


class SolutionConfig(HarborModel):
    env: dict[str, str] = Field(default_factory=dict)


class ArtifactConfig(HarborModel):
    source: str
    destination: str | None = None
    exclude: list[str] = Field(default_factory=list)


class StepConfig(HarborModel):
    name: str
    agent: AgentConfig = Field(default_factory=AgentConfig)
    verifier: VerifierConfig = Field(default_factory=VerifierConfig)
    min_reward: float | dict[str, float] | None = None
    healthcheck: HealthcheckConfig | None = None
    artifacts: list[str | ArtifactConfig] = Field(default_factory=list)


class TaskConfig(HarborModel):
    """`task.toml`."""

    old_names: ClassVar[frozenset[str]] = frozenset({"version"})

    schema_version: str = "1.2"
    task: PackageInfo | None = None
    metadata: dict[str, Any] = Field(default_factory=dict)
    verifier: VerifierConfig = Field(default_factory=VerifierConfig)
    agent: AgentConfig = Field(default_factory=AgentConfig)
    environment: EnvironmentConfig = Field(default_factory=EnvironmentConfig)
    solution: SolutionConfig = Field(default_factory=SolutionConfig)
    source: str | None = None
    multi_step_reward_strategy: Literal["mean", "final"] | None = None
    steps: list[StepConfig] | None = None
    artifacts: list[str | ArtifactConfig] = Field(default_factory=list)

    @model_validator(mode="before")
    @classmethod
    def _version_renamed(cls, data: Any) -> Any:
        if isinstance(data, dict) and "version" in data:
            data = dict(data)
            data.setdefault("schema_version", data.pop("version"))
        return data

    @property
    def verifier_mode(self) -> Literal["shared", "separate"]:
        """Harbor's resolution: the explicit mode, else separate when a verifier environment is given, else shared."""
        if self.verifier.environment_mode is not None:
            return self.verifier.environment_mode
        return "separate" if self.verifier.environment is not None else "shared"

    @property
    def verifier_environment(self) -> EnvironmentConfig | None:
        """The environment a separate verifier runs in (its own, else a copy of the agent's); None when shared."""
        if self.verifier_mode == "shared":
            return None
        return self.verifier.environment or self.environment.model_copy(deep=True)


class ComposeService(BaseModel):
    """One service of a task's environment/docker-compose.yaml beside the main container, as leafcost runs it: only
    the Compose keys below are honoured (sandbox/compose.py refuses the others that change behaviour)."""

    name: str  # its Compose name: the host name the other containers reach it by
    image: str | None = None  # run as it is (pulled when missing) ...
    build_context: Path | None = None  # ... or built from this directory, inside the task's folder
    dockerfile: Path | None = None
    environment: dict[str, str] = Field(default_factory=dict)
    entrypoint: list[str] | None = None  # [] resets the image's ENTRYPOINT
    command: list[str] | None = None
    user: str | None = None
    working_dir: str | None = None
    depends_on: list[str] = Field(default_factory=list)
    healthcheck: HealthcheckConfig | None = None  # must pass before the next service (and the agent) starts
    cpus: float | None = None  # bounded by the task's [environment] cpus and memory_mb
    memory_mb: int | None = None

    def limits(self, environment: EnvironmentConfig) -> tuple[float, int]:
        """Its CPUs and memory: what the Compose file asks, never more than the task's own container gets."""
        cpus = min(self.cpus or environment.cpus, environment.cpus)
        return cpus, min(self.memory_mb or environment.memory_mb, environment.memory_mb)


class ComposeEnvironment(BaseModel):
    """A task's Compose environment: the services started before the main container, in start order (each after
    what it depends on), and what the file asks of the main container itself."""

    file: str  # docker-compose.yaml or .yml, under environment/
    services: list[ComposeService]
    main_environment: dict[str, str] = Field(default_factory=dict)  # services.main.environment
    ignored: list[str] = Field(default_factory=list)  # harmless keys read and ignored (services.db.restart, ...)

    @property
    def host_names(self) -> list[str]:
        """Every name a container of the attempt resolves to the attempt's own loopback: the services and main."""
        return ["main", *(service.name for service in self.services)]


class SWEBenchFacts(BaseModel):
    """What SWE-bench's grading needs of an instance (its TestSpec without the script): with these, the verifier's
    log is graded on the host by swebench's own parser and report instead of a reward file."""

    instance_id: str
    repo: str
    version: str
    image: str
    log_parser: str
    eval_type: str
    fail_to_pass: list[str]
    pass_to_pass: list[str]
    # the files the instance's test_patch touches: a model's patch that changes them is flagged (reward_hacking)
    test_files: list[str] = Field(default_factory=list)
    created_at: datetime | None = None  # the row's created_at (UTC): when the task's problem was posted


class Task(BaseModel):
    """One task, ready to run: where its environment is built from, what the agent is told, how it is graded."""

    task_id: str
    source: Literal["harbor", "swebench"]
    path: Path
    instruction: str
    config: TaskConfig
    dockerfile: Path | None  # None: the task runs `environment.docker_image` as it is
    build_context: Path
    tests_dir: Path
    solution_dir: Path | None
    verifier_dockerfile: Path | None = None  # tests/Dockerfile, built for a separate verifier
    warnings: list[str] = Field(default_factory=list)  # task.toml keys Harbor does not know; Compose keys ignored
    compose: ComposeEnvironment | None = None  # environment/docker-compose.yaml: services beside the main container
    swebench: SWEBenchFacts | None = None  # a SWE-bench instance: graded on the patch alone, as SWE-bench grades it
    # When the task was created (UTC): a SWE-bench row's created_at, a Harbor task's [metadata] created_at; None when
    # it does not say. A model released before it cannot have seen it (compare.freshness).
    created_at: datetime | None = None

    @property
    def environment(self) -> EnvironmentConfig:
        return self.config.environment

    def with_resources(self, resources: dict[str, float | int]) -> Task:
        """This task with some [environment] fields (cpus, memory_mb, storage_mb) replaced: a run's overrides, as
        Harbor's job config applies them. A separate verifier without an environment of its own gets them too."""
        if not resources:
            return self
        environment = self.config.environment.model_copy(update=resources)
        return self.model_copy(update={"config": self.config.model_copy(update={"environment": environment})})


class SuiteError(ValueError):
    """The suite as a whole could not be read (as opposed to one broken task in it)."""


class TaskLoadError(BaseModel):
    """A task that could not be loaded: the suite goes on without it, and this says why."""

    task_id: str
    path: str
    error: str


class Suite(BaseModel):
    name: str
    tasks: list[Task]
    errors: list[TaskLoadError] = Field(default_factory=list)


def parse_created_at(value: Any) -> datetime | None:
    """A task's creation time as UTC, read leniently: ISO 8601 text ("2023-04-12T13:45:02Z", "2023-04-12 13:45",
    "2023-04-12", with or without an offset; no offset means UTC), a TOML date or date-time, or a number of seconds
    (milliseconds above 10^11, as pandas writes timestamps) since 1970. None or "" is no date; anything else is a
    ValueError saying what is expected."""
    if value is None or (isinstance(value, str) and not value.strip()):
        return None
    if isinstance(value, datetime):
        return _as_utc(value)
    if isinstance(value, date):
        return datetime.combine(value, time(), tzinfo=timezone.utc)
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        seconds = value / 1000 if abs(value) >= 1e11 else value
        try:
            return datetime.fromtimestamp(seconds, tz=timezone.utc)
        except (OverflowError, OSError, ValueError):
            raise ValueError("out of range as seconds since 1970") from None
    if isinstance(value, str):
        try:
            return _as_utc(datetime.fromisoformat(value.strip().replace("z", "Z")))
        except ValueError:
            pass
    raise ValueError("not a date: give ISO 8601, e.g. 2023-04-12T13:45:02Z or 2023-04-12")


def unknown_keys(data: Any, model: type[BaseModel] = TaskConfig, prefix: str = "") -> list[str]:
    """Dotted paths of the keys in `data` (parsed task.toml) that `model` does not declare, through every nested
    table and array of tables (`steps[0].colour`); free-form tables (metadata, env) are not looked into."""
    if not isinstance(data, dict):
        return []
    fields = model.model_fields
    old_names = getattr(model, "old_names", frozenset())
    found = []
    for key, value in data.items():
        path = f"{prefix}{key}"
        if key not in fields:
            if key not in old_names:
                found.append(path)
            continue
        nested = _model_in(fields[key].annotation)
        if nested is None:
            continue
        if isinstance(value, list):
            for index, item in enumerate(value):
                found += unknown_keys(item, nested, f"{path}[{index}].")
        else:
            found += unknown_keys(value, nested, f"{path}.")
    return found


def _as_utc(moment: datetime) -> datetime:
    """A time with no offset is taken as UTC (GitHub's and git's dates are)."""
    return moment.replace(tzinfo=timezone.utc) if moment.tzinfo is None else moment.astimezone(timezone.utc)


def _model_in(annotation: Any) -> type[BaseModel] | None:
    """The pydantic model inside a field's type (`X | None`, `list[X]`, `list[str | X]`), if there is one."""
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return annotation
    if get_origin(annotation) in (list, Union, UnionType):
        for argument in get_args(annotation):
            if (found := _model_in(argument)) is not None:
                return found
    return None


def _megabytes(value: Any) -> int:
    """'4G', '512M' or a number of megabytes, as Harbor's older `memory`/`storage` keys allowed."""
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        return int(value)
    text = str(value).strip().upper().removesuffix("B")
    units = {"K": 1 / 1024, "M": 1, "G": 1024, "T": 1024 * 1024}
    try:
        if text and text[-1] in units:
            return int(float(text[:-1]) * units[text[-1]])
        return int(float(text))
    except ValueError:
        raise ValueError("not a size like '4G' or '512M'") from None
