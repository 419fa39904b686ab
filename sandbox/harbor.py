"""Loads Harbor task directories (task.toml, instruction.md, environment/, tests/, solution/) into `Task`s, reading
task.toml as Harbor reads it. A task's problems are reported all at once; what leafcost cannot honour (GPUs,
Windows, multi-step tasks, MCP servers, skills, Compose keys it does not run) is refused naming the field."""

from __future__ import annotations

import os
import re
import tomllib
from datetime import datetime
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from sandbox.compose import load_compose
from sandbox.protocol import BuildError
from sandbox.tasks import Suite, Task, TaskConfig, TaskLoadError, parse_created_at, unknown_keys

HOST_TEMPLATE = re.compile(r"\$\{([A-Za-z_][A-Za-z0-9_]*)(?::-(.*))?\}", re.DOTALL)
# Parts of a pydantic error location that name a member of a union (`str`, `ArtifactConfig`), not a key.
_SCALAR_TAGS = frozenset({"str", "int", "float", "bool"})


class TaskFormatError(ValueError):
    """A task directory that does not follow Harbor's format, or asks what leafcost cannot honour; the message
    names the task and every problem found, each with its field or file."""


def load_harbor_task(path: Path) -> Task:
    path = Path(path).resolve()
    task_id = path.name
    if _readable(task_id) != task_id:  # it would reach the ledger, file names and the terminal: refused alike
        raise TaskFormatError(f"task {_readable(task_id)}: the folder's name is not valid UTF-8; rename it")
    raw, problems = _read_toml(path)
    config, created_at = None, None
    if raw is not None:
        try:
            config = TaskConfig.model_validate(raw)
        except ValidationError as exc:
            problems += [f"task.toml: {problem}" for problem in _validation_problems(exc)]
        created_at = _created_at(raw, problems)
    problems += _unsupported(path, raw or {})
    compose, compose_problems = load_compose(path)
    problems += compose_problems
    problems += _missing_files(path, raw or {})
    instruction = _instruction(path, problems)
    if problems or config is None:
        raise TaskFormatError(f"task {task_id}: " + "; ".join(problems))
    task = _task(path, config, instruction, sorted(unknown_keys(raw))).model_copy(update={"created_at": created_at})
    if compose is None:
        return task
    warnings = task.warnings + ([f"task {task_id}: environment/{compose.file} keys leafcost ignores: "
                                 f"{', '.join(compose.ignored)}"] if compose.ignored else [])
    return task.model_copy(update={"compose": compose, "warnings": warnings})


def load_harbor_suite(root: Path, name: str | None = None) -> Suite:
    """Every subdirectory with a task.toml (or any file at all) is a task; broken ones become load errors."""
    root = Path(root)
    tasks, errors = [], []
    for child in sorted(p for p in root.iterdir() if p.is_dir() and not p.name.startswith(".")):
        try:
            tasks.append(load_harbor_task(child))
        except (TaskFormatError, OSError) as exc:
            errors.append(TaskLoadError(task_id=_readable(child.name), path=_readable(str(child)), error=str(exc)))
    return Suite(name=name or root.name, tasks=tasks, errors=errors)


def _readable(name: str) -> str:
    """A file name as valid text: bytes that are not UTF-8 (which Python holds as lone surrogates) as U+FFFD."""
    return name.encode("utf-8", "surrogateescape").decode("utf-8", "replace")


def _task(path: Path, config: TaskConfig, instruction: str, ignored: list[str]) -> Task:
    solution, dockerfile = path / "solution", path / "environment" / "Dockerfile"
    verifier_dockerfile = path / "tests" / "Dockerfile"
    warning = f"task {path.name}: task.toml keys Harbor does not know, ignored: {', '.join(ignored)}"
    return Task(
        task_id=path.name,
        source="harbor",
        path=path,
        instruction=instruction,
        config=config,
        dockerfile=dockerfile if dockerfile.is_file() else None,
        build_context=path / "environment",
        tests_dir=path / "tests",
        solution_dir=solution if (solution / "solve.sh").is_file() else None,
        verifier_dockerfile=verifier_dockerfile if verifier_dockerfile.is_file() else None,
        warnings=[warning] if ignored else [],
    )


def _created_at(raw: dict[str, Any], problems: list[str]) -> datetime | None:
    """`[metadata] created_at`, which Harbor ignores and leafcost reads as the task's date (compare.freshness)."""
    metadata = raw.get("metadata")
    if not isinstance(metadata, dict):
        return None
    try:
        return parse_created_at(metadata.get("created_at"))
    except ValueError as exc:
        problems.append(f"task.toml: metadata.created_at: {exc} (got {str(metadata['created_at'])[:80]!r})")
        return None


def _read_toml(path: Path) -> tuple[dict[str, Any] | None, list[str]]:
    if not (path / "task.toml").is_file():
        return None, ["missing required file task.toml"]
    try:
        return tomllib.loads((path / "task.toml").read_text(encoding="utf-8")), []
    except (tomllib.TOMLDecodeError, UnicodeDecodeError) as exc:
        return None, [f"task.toml is not valid TOML: {exc}"]


def _instruction(path: Path, problems: list[str]) -> str:
    """instruction.md's text; its absence is reported by `_missing_files` (a multi-step task has none)."""
    if not (path / "instruction.md").is_file():
        return ""
    instruction = (path / "instruction.md").read_text(encoding="utf-8", errors="replace").strip()
    if not instruction:
        problems.append("instruction.md is empty")
    return instruction


def _missing_files(path: Path, raw: dict[str, Any]) -> list[str]:
    """The files Harbor needs: instruction.md and tests/test.sh unless the task is a multi-step or Windows one (those
    are refused elsewhere, with why), and a Dockerfile unless an image replaces it (a Compose file does not: its
    `main` is the task's own container)."""
    environment = _table(raw, "environment")
    missing = []
    if not (path / "instruction.md").is_file() and not raw.get("steps"):
        missing.append("missing required file instruction.md")
    if not (path / "environment" / "Dockerfile").is_file() and not environment.get("docker_image"):
        missing.append("missing required file environment/Dockerfile (or set environment.docker_image)")
    windows = str(environment.get("os", "")).lower() == "windows" or _windows_tests(path)
    if not (path / "tests" / "test.sh").is_file() and not windows and not raw.get("steps"):
        missing.append("missing required file tests/test.sh")
    return missing


def _unsupported(path: Path, raw: dict[str, Any]) -> list[str]:
    """What leafcost cannot honour, each naming its field or file; all of them, so one edit pass fixes a task."""
    reasons = []
    reasons += _unsupported_environment(_table(raw, "environment"), "environment")
    verifier_environment = _table(_table(raw, "verifier"), "environment")
    reasons += _unsupported_environment(verifier_environment, "verifier.environment")
    if _windows_tests(path) and str(_table(raw, "environment").get("os", "")).lower() != "windows":
        reasons.append("tests/test.bat without tests/test.sh is a Windows task (leafcost runs Linux containers only)")
    if raw.get("steps"):
        reasons.append("[[steps]] is not supported (each step gives the agent a new instruction and its own "
                       "verdict, and a Leaf episode is one instruction, five tools and one verdict)")
    return reasons


def _unsupported_environment(environment: dict[str, Any], where: str) -> list[str]:
    reasons = []
    gpus = environment.get("gpus")
    if isinstance(gpus, (int, float)) and not isinstance(gpus, bool) and gpus > 0:
        reasons.append(f"{where}.gpus = {gpus} is not supported (leafcost has no GPU/TPU backend)")
    if environment.get("gpu_types"):
        reasons.append(f"{where}.gpu_types is not supported (leafcost has no GPU/TPU backend)")
    if environment.get("tpu") is not None:
        reasons.append(f"{where}.tpu is not supported (leafcost has no GPU/TPU backend)")
    if str(environment.get("os", "")).lower() == "windows":
        reasons.append(f"{where}.os = \"windows\" is not supported (leafcost runs Linux containers only)")
    if environment.get("mcp_servers"):
        reasons.append(f"{where}.mcp_servers is not supported (the agent would call the server's tools, and Leaf has "
                       "five fixed tools and no MCP client)")
    if environment.get("skills_dir") is not None:
        reasons.append(f"{where}.skills_dir is not supported (skills are instructions an agent loads on demand, "
                       "and Leaf's prompt and five tools have no place for them)")
    env = environment.get("env")
    for key, value in (env.items() if isinstance(env, dict) and where == "environment" else []):
        if isinstance(value, str) and HOST_TEMPLATE.fullmatch(value):
            reasons.append(f"{where}.env.{key} = {value!r} is not supported (it would copy a variable of this "
                           "machine into the agent's sandbox; write the value itself)")
    return reasons


def resolve_host_values(env: dict[str, str], field: str) -> dict[str, str]:
    """Harbor's `${VAR}` and `${VAR:-default}` in verifier.env and solution.env, from this machine's environment
    when the verifier or the oracle starts (never stored with the task); a missing variable is a task error."""
    resolved = {}
    for key, value in env.items():
        match = HOST_TEMPLATE.fullmatch(value)
        if match is None:
            resolved[key] = value
        elif match.group(1) in os.environ:
            resolved[key] = os.environ[match.group(1)]
        elif match.group(2) is not None:
            resolved[key] = match.group(2)
        else:
            raise BuildError(f"{field}.{key} = {value!r}: set {match.group(1)} in leafcost's environment")
    return resolved


def _table(data: dict[str, Any], key: str) -> dict[str, Any]:
    value = data.get(key)
    return value if isinstance(value, dict) else {}


def _windows_tests(path: Path) -> bool:
    return (path / "tests" / "test.bat").is_file() and not (path / "tests" / "test.sh").is_file()


def _validation_problems(exc: ValidationError) -> list[str]:
    """Every error, one line per field: `environment.cpus: <message> (got 'lots')`. The alternatives of a union
    (`agent.user` as a string or an integer) are merged into one line."""
    messages: dict[str, list[str]] = {}
    inputs: dict[str, Any] = {}
    for error in exc.errors():
        where = _where(error["loc"])
        message = error["msg"].removeprefix("Value error, ")
        if message not in messages.setdefault(where, []):
            messages[where].append(message)
        if error["type"] != "missing" and "input" in error and not isinstance(error["input"], dict):
            inputs.setdefault(where, error["input"])
    return [f"{where}: {' or '.join(found)}" + (f" (got {_short(inputs[where])})" if where in inputs else "")
            for where, found in messages.items()]


def _where(loc: tuple[Any, ...]) -> str:
    where = ""
    for part in loc:
        if isinstance(part, int):
            where += f"[{part}]"
        elif part in _SCALAR_TAGS or part[:1].isupper() or "[" in part:
            continue
        else:
            where += f".{part}" if where else part
    return where or "(top level)"


def _short(value: Any, limit: int = 80) -> str:
    text = repr(value)
    return text if len(text) <= limit else text[:limit - 3] + "..."
