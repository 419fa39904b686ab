"""`leafcost report RUN_ID`: the run's report files (see reports.report). Registered on the app by compare.cli."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated

import typer

from compare.cli_common import DbOption, JsonOption, fail


def report(
    run_id: Annotated[str, typer.Argument(help="the run id (leafcost run prints it)")],
    out: Annotated[Path, typer.Option("--out", "-o", help="the directory to write the report into")] = Path("report"),
    db: DbOption = None,
    strict_grading: Annotated[bool, typer.Option(
        "--strict-grading", help="count flagged attempts (a patch touching the test harness) as not resolved, "
                                 "whether or not the run was started with --strict-grading")] = False,
    as_json: JsonOption = False,
) -> None:
    """Write the run's report: report.html (self-contained, charts inline), summary.md, summary.json, episodes
    and calls as CSV and Parquet, and SWE-bench-style predictions per model arm."""
    from compare.ledger import LedgerAccess, LedgerError, default_db_path
    from compare.summary import SummaryError
    from reports.report import ReportError, write_report

    path = db or default_db_path()
    try:  # a ledger from an older leafcost is upgraded in place, as `summary` does
        written = write_report(path, run_id, out, access=LedgerAccess(path), strict=strict_grading or None)
    except (LedgerError, SummaryError) as exc:
        fail(str(exc), 2)
    except ReportError as exc:
        fail(str(exc), 1)
    if as_json:
        typer.echo(json.dumps({name: str(file) for name, file in written.items()}, indent=2))
        return
    typer.echo(f"report of {run_id}: {written['report.html']}")
    width = max(len(name) for name in written)
    for name, file in written.items():
        typer.echo(f"  {name:<{width}}  {file}")
