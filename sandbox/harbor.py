"""Loads Harbor task directories (task.toml, instruction.md, environment/, tests/, solution/) into `Task`s."""

from __future__ import annotations

import tomllib
from pathlib import Path

from pydantic import ValidationError

from sandbox.tasks import Suite, Task, TaskConfig, TaskLoadError

REQUIRED_FILES = ("task.toml", "instruction.md", "environment/Dockerfile", "tests/test.sh")


class TaskFormatError(ValueError):
    """A task directory that does not follow Harbor's format; the message names the task and the field."""


def load_harbor_task(path: Path) -> Task:
    path = Path(path).resolve()
    task_id = path.name
    for name in REQUIRED_FILES:
        if not (path / name).is_file():
            raise TaskFormatError(f"task {task_id}: missing required file {name}")
    try:
        raw = tomllib.loads((path / "task.toml").read_text(encoding="utf-8"))
    except (tomllib.TOMLDecodeError, UnicodeDecodeError) as exc:
        raise TaskFormatError(f"task {task_id}: task.toml is not valid TOML: {exc}") from None
    try:
        config = TaskConfig.model_validate(raw)
    except ValidationError as exc:
        raise TaskFormatError(f"task {task_id}: task.toml: {_first_error(exc)}") from None
    instruction = (path / "instruction.md").read_text(encoding="utf-8", errors="replace").strip()
    if not instruction:
        raise TaskFormatError(f"task {task_id}: instruction.md is empty")
    solution = path / "solution"
    return Task(
        task_id=task_id,
        source="harbor",
        path=path,
        instruction=instruction,
        config=config,
        dockerfile=path / "environment" / "Dockerfile",
        build_context=path / "environment",
        tests_dir=path / "tests",
        solution_dir=solution if (solution / "solve.sh").is_file() else None,
    )


def load_harbor_suite(root: Path, name: str | None = None) -> Suite:
    """Every subdirectory with a task.toml (or any file at all) is a task; broken ones become load errors."""
    root = Path(root)
    tasks, errors = [], []
    for child in sorted(p for p in root.iterdir() if p.is_dir() and not p.name.startswith(".")):
        try:
            tasks.append(load_harbor_task(child))
        except (TaskFormatError, OSError) as exc:
            errors.append(TaskLoadError(task_id=child.name, path=str(child), error=str(exc)))
    return Suite(name=name or root.name, tasks=tasks, errors=errors)


def _first_error(exc: ValidationError) -> str:
    err = exc.errors()[0]
    where = ".".join(str(part) for part in err["loc"]) or "(top level)"
    message = err["msg"]
    if "input" in err and err["type"] != "missing":
        return f"{where}: {message} (got {err['input']!r})"
    return f"{where}: {message}"
