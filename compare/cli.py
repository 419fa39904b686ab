"""The `leafcost` command line. Heavy libraries are imported inside commands, so `--help` stays instant."""

from __future__ import annotations

import asyncio
import json
import os
import sys
from pathlib import Path
from typing import Annotated, NoReturn

import typer

app = typer.Typer(add_completion=False, no_args_is_help=True, pretty_exceptions_enable=False,
                  help="Cost per resolved coding task: self-hosted vs hosted models on the same Leaf episodes.")

WorkersOption = Annotated[int, typer.Option("--workers", "-w", min=1, help="tasks run in parallel")]
JsonOption = Annotated[bool, typer.Option("--json", help="print machine-readable JSON on stdout")]
UnsafeOption = Annotated[bool, typer.Option(
    "--unsafe-no-isolation", help="run tools in a plain subprocess without bubblewrap (results are marked)")]
BaseRootOption = Annotated[str, typer.Option(
    "--base-root", help="'host' (the host's /usr, /etc, ...) or a root directory, bound read-only")]
BindOption = Annotated[list[str] | None, typer.Option(
    "--bind-ro", help="extra directory bound read-only at the same path (e.g. a toolchain under a home dir)")]


def fail(message: str, code: int = 1) -> NoReturn:
    typer.echo(f"leafcost: {message}", err=True)
    raise typer.Exit(code)


def sandbox_options(base_root: str, bind_ro: list[str] | None, unsafe: bool):
    from sandbox import SandboxError, SandboxOptions, require_isolation

    if base_root != "host" and not Path(base_root, "usr").is_dir():
        fail(f"--base-root {base_root}: not a root directory (no usr/ in it)", 2)
    for path in bind_ro or []:
        if not os.path.isabs(path) or not os.path.isdir(path):
            fail(f"--bind-ro {path}: must be an existing absolute directory", 2)
    options = SandboxOptions(base_root=base_root, extra_ro_binds=list(bind_ro or []), unsafe_no_isolation=unsafe)
    try:
        require_isolation(options)
    except SandboxError as exc:
        fail(str(exc), 2)
    if unsafe:
        typer.echo("leafcost: WARNING --unsafe-no-isolation: tools run unsandboxed on this host; every result "
                   "is marked isolation=none", err=True)
    return options


@app.command()
def validate(
    suite: Annotated[str, typer.Argument(help="'builtin', a directory of Harbor tasks, or a SWE-bench .json/.jsonl")],
    workers: WorkersOption = 2,
    as_json: JsonOption = False,
    repos: Annotated[Path | None, typer.Option(help="SWE-bench: a git repository or a directory of mirrors")] = None,
    base_root: BaseRootOption = "host",
    bind_ro: BindOption = None,
    unsafe_no_isolation: UnsafeOption = False,
) -> None:
    """Prove every task solvable (oracle resolves) and not solved by doing nothing (empty run fails)."""
    report = _validate(suite, workers, repos, sandbox_options(base_root, bind_ro, unsafe_no_isolation), as_json)
    raise typer.Exit(0 if report.invalid == 0 else 1)


@app.command()
def demo(
    workers: WorkersOption = 2,
    as_json: JsonOption = False,
    unsafe_no_isolation: UnsafeOption = False,
) -> None:
    """The embedded default: validates the built-in suite in real sandboxes (the model comparison joins it next)."""
    report = _validate("builtin", workers, None, sandbox_options("host", None, unsafe_no_isolation), as_json)
    if not as_json:
        typer.echo(f"\nbuilt-in suite: {report.valid} of {len(report.tasks)} tasks valid "
                   f"(environments cached under {_cache_dir()})", err=True)
    raise typer.Exit(0 if report.invalid == 0 else 1)


def _validate(suite_name: str, workers: int, repos: Path | None, options, as_json: bool):
    from rich.console import Console
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

    from compare.validate import validate_suite
    from sandbox import SuiteError, load_suite

    try:
        suite = load_suite(suite_name, repos=repos, cache_dir=options.cache_dir)
    except SuiteError as exc:
        fail(str(exc), 2)
    if not suite.tasks and not suite.errors:
        fail(f"suite {suite_name!r} has no tasks", 2)
    err = Console(stderr=True)
    columns = (TextColumn("validating {task.fields[suite]}"), BarColumn(), MofNCompleteColumn(),
               TextColumn("{task.fields[last]}"), TimeElapsedColumn())
    with Progress(*columns, console=err, transient=as_json) as progress:
        bar = progress.add_task("validate", total=len(suite.tasks) + len(suite.errors), suite=suite.name, last="")

        def done(result) -> None:
            mark = "ok" if result.valid else "INVALID"
            progress.update(bar, advance=1, last=f"{result.task_id}: {mark}")

        report = asyncio.run(validate_suite(suite, options, workers=workers, on_result=done))
    if as_json:
        sys.stdout.write(json.dumps(report.model_dump(), indent=2) + "\n")
    else:
        _print_table(report, unsafe=options.unsafe_no_isolation)
    return report


def _print_table(report, unsafe: bool) -> None:
    from rich.console import Console
    from rich.table import Table

    def verdict(value: bool | None) -> str:
        return {True: "resolved", False: "not resolved", None: "-"}[value]

    title = "leafcost validate" + (" [UNSAFE: no isolation]" if unsafe else "")
    table = Table(title=title)
    for column in ("task", "oracle", "empty run", "valid", "seconds", "error"):
        table.add_column(column, overflow="fold")
    for task in report.tasks:
        table.add_row(task.task_id, verdict(task.oracle_resolved), verdict(task.empty_resolved),
                      "yes" if task.valid else "NO", f"{task.seconds:.1f}", task.error or "")
    console = Console(width=max(120, Console().width))
    console.print(table)
    console.print(f"valid: {report.valid}  invalid: {report.invalid}")


def _cache_dir() -> Path:
    from sandbox import SandboxOptions

    return SandboxOptions().cache_dir


if __name__ == "__main__":
    app()
