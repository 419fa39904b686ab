"""Turns what a user names on the command line (`builtin`, a directory, a SWE-bench file) into a `Suite`."""

from __future__ import annotations

from pathlib import Path

from sandbox.harbor import TaskFormatError, load_harbor_suite, load_harbor_task
from sandbox.tasks import Suite, TaskLoadError

BUILTIN_SUITE = Path(__file__).parent / "suites" / "builtin"


class SuiteError(ValueError):
    """The suite as a whole could not be read (as opposed to one broken task in it)."""


def load_suite(name: str, *, repos: Path | None = None, cache_dir: Path | None = None) -> Suite:
    if name == "builtin":
        return load_harbor_suite(BUILTIN_SUITE, name="builtin")
    path = Path(name)
    if not path.exists():
        raise SuiteError(f"suite {name!r}: no such directory or file (use 'builtin', a directory of Harbor "
                         "tasks, or a SWE-bench .json/.jsonl file)")
    if path.is_dir() and (path / "task.toml").exists():
        try:
            return Suite(name=path.name, tasks=[load_harbor_task(path)])
        except TaskFormatError as exc:
            return Suite(name=path.name, tasks=[], errors=[TaskLoadError(task_id=path.name, path=str(path),
                                                                         error=str(exc))])
    if path.is_dir():
        return load_harbor_suite(path)
    if path.suffix in {".json", ".jsonl"}:
        from sandbox.swebench import load_swebench_suite

        return load_swebench_suite(path, repos=repos, cache_dir=cache_dir)
    raise SuiteError(f"suite {name!r}: a file suite must be SWE-bench .json or .jsonl")
