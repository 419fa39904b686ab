"""The typed task every loader produces and every sandbox consumes, whatever format it came from."""

from __future__ import annotations

from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator


class EnvironmentConfig(BaseModel):
    """Harbor's `[environment]` table, with the deprecated spellings Harbor still reads."""

    model_config = ConfigDict(extra="forbid")

    build_timeout_sec: float = Field(600.0, gt=0)
    docker_image: str | None = None
    cpus: float = Field(1.0, gt=0)
    memory_mb: int = Field(2048, gt=0)
    storage_mb: int = Field(10240, gt=0)
    pids: int = Field(1024, gt=0)
    # No network unless a task asks for it; Harbor says `allow_internet`, Leaf says `network`.
    allow_internet: bool = False

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
                data.setdefault(new, _megabytes(data.pop(old), old))
        return data


class TimeoutConfig(BaseModel):
    model_config = ConfigDict(extra="forbid")

    timeout_sec: float = Field(600.0, gt=0)
    env: dict[str, str] = Field(default_factory=dict)


class AgentConfig(TimeoutConfig):
    timeout_sec: float = Field(10800.0, gt=0)


class SolutionConfig(BaseModel):
    model_config = ConfigDict(extra="forbid")

    env: dict[str, str] = Field(default_factory=dict)


class TaskConfig(BaseModel):
    """`task.toml` as Harbor defines it; unknown top-level tables are refused so typos surface."""

    model_config = ConfigDict(extra="forbid")

    version: str = "1.0"
    metadata: dict[str, Any] = Field(default_factory=dict)
    verifier: TimeoutConfig = Field(default_factory=TimeoutConfig)
    agent: AgentConfig = Field(default_factory=AgentConfig)
    environment: EnvironmentConfig = Field(default_factory=EnvironmentConfig)
    solution: SolutionConfig = Field(default_factory=SolutionConfig)
    source: str | None = None


class Task(BaseModel):
    """One task, ready to run: where its environment is built from, what the agent is told, how it is graded."""

    task_id: str
    source: Literal["harbor", "swebench"]
    path: Path
    instruction: str
    config: TaskConfig
    dockerfile: Path
    build_context: Path
    tests_dir: Path
    solution_dir: Path | None

    @property
    def environment(self) -> EnvironmentConfig:
        return self.config.environment


class TaskLoadError(BaseModel):
    """A task that could not be loaded: the suite goes on without it, and this says why."""

    task_id: str
    path: str
    error: str


class Suite(BaseModel):
    name: str
    tasks: list[Task]
    errors: list[TaskLoadError] = Field(default_factory=list)


def _megabytes(value: Any, field: str) -> int:
    """'4G', '512M' or a number of megabytes, as Harbor's older `memory`/`storage` keys allowed."""
    if isinstance(value, (int, float)):
        return int(value)
    text = str(value).strip().upper().removesuffix("B")
    units = {"K": 1 / 1024, "M": 1, "G": 1024, "T": 1024 * 1024}
    try:
        if text and text[-1] in units:
            return int(float(text[:-1]) * units[text[-1]])
        return int(float(text))
    except ValueError:
        raise ValueError(f"{field}: {value!r} is not a size like '4G' or '512M'") from None
