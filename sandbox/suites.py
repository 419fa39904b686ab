"""Turns what a user names on the command line (`builtin`, a directory, a SWE-bench file) into a `Suite`."""

from __future__ import annotations

from pathlib import Path

from sandbox.harbor import TaskFormatError, load_harbor_suite, load_harbor_task
from sandbox.tasks import Suite, SuiteError, TaskLoadError

BUILTIN_SUITE = Path(__file__).parent / "suites" / "builtin"


def load_suite(name: str, *, cache_dir: Path | None = None, swebench_images=None) -> Suite:
    """`swebench_images` (a `SWEBenchImages`) names SWE-bench's instance images another way than the rows do."""
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

        return load_swebench_suite(path, cache_dir=cache_dir, images=swebench_images)
    raise SuiteError(f"suite {name!r}: a file suite must be SWE-bench .json or .jsonl")
