"""What every `leafcost` command module shares (options, the one way to fail), apart from compare.cli, which
imports those modules to register their commands."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, NoReturn

import typer

JsonOption = Annotated[bool, typer.Option("--json", help="print machine-readable JSON on stdout")]
DbOption = Annotated[Path | None, typer.Option(
    "--db", help="the ledger file (default $LEAFCOST_DB or ./leafcost.duckdb)")]


def fail(message: str, code: int = 1) -> NoReturn:
    from compare.display import clean  # messages quote tasks, specs, endpoints: no escape sequence goes through

    typer.echo(f"leafcost: {clean(message)}", err=True)
    raise typer.Exit(code)
