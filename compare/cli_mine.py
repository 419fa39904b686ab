"""`leafcost mine REPO`: tasks mined from a repository's own history (sandbox.mining), with an optional model writing
each task's problem statement (compare.mine_describe, through an arm of a run spec)."""

from __future__ import annotations

import json
import sys
from datetime import date
from pathlib import Path
from typing import Annotated

import typer

from compare.cli_common import JsonOption, fail


def mine(
    repository: Annotated[Path, typer.Argument(metavar="REPO", help="a local git repository (a work tree or a bare "
                                               "mirror); it is read, never written")],
    out: Annotated[Path, typer.Option("--out", "-o", help="where tasks.jsonl, report.json, logs/ (and harbor/) go")
                   ] = Path("mined"),
    since: Annotated[str | None, typer.Option("--since", metavar="YYYY-MM-DD",
                                              help="only commits on or after this date")] = None,
    until: Annotated[str | None, typer.Option("--until", metavar="YYYY-MM-DD",
                                              help="only commits on or before this date")] = None,
    paths: Annotated[list[str] | None, typer.Option("--path", help="only commits touching this path (repeatable)")
                     ] = None,
    limit: Annotated[int | None, typer.Option("--limit", min=1, help="at most this many candidates built and tested "
                                              "(newest first)")] = None,
    rev: Annotated[str, typer.Option("--rev", help="the commit history is read from")] = "HEAD",
    repo_name: Annotated[str | None, typer.Option("--repo-name", metavar="OWNER/NAME",
                                                  help="the rows' repo (default local/<directory name>)")] = None,
    env_hint: Annotated[Path | None, typer.Option("--env-hint", help="a YAML/TOML file with the install and test "
                                                  "commands, Python version or base image for this repository")
                        ] = None,
    ca_bundle: Annotated[Path | None, typer.Option("--ca-bundle", help="a CA bundle the image builds trust for pip "
                                                   "(a TLS-intercepting proxy)")] = None,
    runs: Annotated[int, typer.Option("--runs", min=1, max=10, help="test runs before and after the fix that must "
                                      "agree")] = 3,
    test_timeout: Annotated[float, typer.Option("--test-timeout", min=1, metavar="SECONDS",
                                                help="one test run's limit; a run past it drops the candidate")] = 900,
    harbor: Annotated[bool, typer.Option("--harbor", help="also write a Harbor task directory per task")] = False,
    backend: Annotated[str, typer.Option("--backend", help="the container engine: podman or docker")] = "podman",
    describe_with: Annotated[str | None, typer.Option("--describe-with", metavar="ARM",
                                                      help="an arm of --spec writes each problem statement")] = None,
    spec_path: Annotated[Path | None, typer.Option("--spec", metavar="SPEC.yaml",
                                                   help="the run spec --describe-with's arm is in")] = None,
    as_json: JsonOption = False,
) -> None:
    """Mine validated tasks (SWE-bench rows) from a repository's commits that fix code and change its tests."""
    import asyncio

    from sandbox import SandboxError, SandboxOptions, require_backend
    from sandbox.mining.errors import MiningError
    from sandbox.mining.pipeline import MineOptions

    if backend not in ("podman", "docker"):
        fail(f"--backend {backend}: mining builds images, so it needs podman or docker", 2)
    if (describe_with is None) != (spec_path is None):
        fail("--describe-with ARM and --spec SPEC.yaml go together: the arm is defined in the spec", 2)
    options = MineOptions(repository=repository, out=out, since=_date("--since", since), until=_date("--until", until),
                          paths=list(paths or []), limit=limit, rev=rev, repo_name=repo_name, env_hint=env_hint,
                          ca_bundle=ca_bundle, runs=runs, test_timeout=test_timeout, harbor=harbor)
    if ca_bundle is not None and not ca_bundle.is_file():
        fail(f"--ca-bundle {ca_bundle}: no such file", 2)
    sandbox = SandboxOptions(backend=backend)
    try:
        require_backend(sandbox)
    except SandboxError as exc:
        fail(str(exc), 2)
    describe_spec = _spec(spec_path) if spec_path is not None else None
    try:
        report = asyncio.run(_with_progress(options, sandbox, describe_spec, describe_with))
    except MiningError as exc:
        report_path = out / "report.json"
        fail(f"{exc}" + (f" (report of what was mined: {report_path})" if report_path.is_file() else ""), 1)
    if as_json:
        sys.stdout.write(json.dumps({**report.summary(), "report": str(out / "report.json"),
                                     "tasks": str(out / "tasks.jsonl")}, indent=2) + "\n")
    else:
        _print_summary(report, out)
    raise typer.Exit(0)


def _date(option: str, value: str | None) -> date | None:
    if value is None:
        return None
    try:
        return date.fromisoformat(value)
    except ValueError:
        fail(f"{option} {value!r}: expected a date as YYYY-MM-DD", 2)


def _spec(spec_path: Path):
    from compare.spec import SpecError, load_run_spec

    try:
        return load_run_spec(spec_path)
    except SpecError as exc:
        fail(str(exc), 2)


async def _with_progress(options, sandbox, describe_spec, describe_arm: str | None):
    """The mining run under a progress bar on stderr; with --describe-with, the arm's adapter started once for it."""
    from contextlib import AsyncExitStack

    from rich.console import Console
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

    from compare.display import clean
    from sandbox.mining.pipeline import mine as run_mining

    columns = (TextColumn("mining {task.fields[repo]}", markup=False), BarColumn(), MofNCompleteColumn(),
               TextColumn("{task.fields[last]}", markup=False), TimeElapsedColumn())
    async with AsyncExitStack() as stack:
        describe = None
        if describe_arm is not None:
            from compare.mine_describe import Describer

            describer = await stack.enter_async_context(Describer(describe_spec, describe_arm))

            async def describe(candidate, fail_to_pass):
                from compare.mine_describe import NoStatement

                try:
                    written = await describer.describe(message=candidate.message, fail_to_pass=fail_to_pass,
                                                       test_patch=candidate.test_patch, patch=candidate.patch)
                except NoStatement as refused:  # the report keeps what the refused call cost
                    refused.spent = _spent(refused.usage, refused.cost_usd)
                    raise
                return written.text, written.source, _spent(written.usage, written.cost_usd)

        with Progress(*columns, console=Console(stderr=True), transient=True) as progress:  # the summary follows
            bar = progress.add_task("mine", total=None, repo=clean(str(options.repository)), last="scanning")

            def scanned(count: int | None) -> None:  # None: --limit decides how many are built
                progress.update(bar, total=count, last="scanned")

            def done(result) -> None:
                said = "kept" if result.kept else result.reason
                progress.update(bar, advance=1, last=f"{result.sha[:12]}: {said}")

            return await run_mining(options, sandbox, describe=describe, on_result=done, on_scanned=scanned)


def _spent(usage, cost_usd: float | None) -> dict:
    return {"prompt_tokens": usage.prompt_tokens, "completion_tokens": usage.completion_tokens, "cost_usd": cost_usd}


def _print_summary(report, out: Path) -> None:
    from compare.display import shown

    summary = report.summary()
    typer.echo(f"commits seen: {summary['commits_seen']}  candidates: {summary['candidates']}  "
               f"kept: {summary['kept']}  flaky tests dropped: {summary['flaky_tests']}")
    if summary["dropped"]:
        typer.echo("dropped: " + ", ".join(f"{reason} {count}" for reason, count in
                                           sorted(summary["dropped"].items(), key=lambda item: -item[1])))
    for result in report.candidates:
        if result.kept:
            typer.echo(f"  kept {result.instance_id}: {result.fail_to_pass} FAIL_TO_PASS, {result.pass_to_pass} "
                       f"PASS_TO_PASS ({shown(result.subject[:60])})")
        else:
            typer.echo(f"  dropped {result.sha[:12]} ({result.reason}): {shown((result.detail or '')[:100])}")
    if summary["describe_usd"] is not None:
        typer.echo(f"--describe-with's calls cost ${summary['describe_usd']:.4f}")
    if report.limit_reached:
        typer.echo(f"stopped at --limit: {summary['built']} candidates built and tested; older ones not looked at")
    typer.echo(f"tasks: {out / 'tasks.jsonl'}  report: {out / 'report.json'}")
    typer.echo(f"next: leafcost validate {out / 'tasks.jsonl'} --backend podman")
