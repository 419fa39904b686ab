"""What every `leafcost` command module shares (options, the one way to fail), apart from compare.cli, which
imports those modules to register their commands."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Annotated, NoReturn

import typer
from typer.core import TyperGroup

JsonOption = Annotated[bool, typer.Option("--json", help="print machine-readable JSON on stdout")]
WideOption = Annotated[bool, typer.Option(
    "--wide", help="more columns (by default a table shows what fits 80 columns; --json has every figure)")]
DbOption = Annotated[Path | None, typer.Option(
    "--db", help="the ledger file (default $LEAFCOST_DB or ./leafcost.duckdb)")]
NamespaceOption = Annotated[str | None, typer.Option(
    "--swebench-namespace", help="SWE-bench: the registry namespace of the instance images (default: each row's "
    "`image`, else swebench); 'none' names images built locally by SWE-bench's tools")]
TagOption = Annotated[str | None, typer.Option("--swebench-tag", help="SWE-bench: the instance images' tag "
                                                                      "(default: each row's, else latest)")]


def fail(message: str, code: int = 1) -> NoReturn:
    _say(message)
    raise typer.Exit(code)


def _say(message: str) -> None:
    from compare.display import clean  # messages quote tasks, specs, endpoints: no escape sequence goes through

    typer.echo(f"leafcost: {clean(message)}", err=True)


class OneLineUsageErrors(TyperGroup):
    """The app's group: a usage mistake (a missing argument or option, a bad value, an unknown command) is the one
    `leafcost:` line every other mistake gets, naming the command's --help, not click's usage text in a box."""

    def main(self, args=None, prog_name=None, complete_var=None, standalone_mode=True, **extra):
        # typer vendors click: its exceptions are typer's own classes, not the `click` package's
        from typer._click.exceptions import ClickException, UsageError

        if not standalone_mode:
            return super().main(args, prog_name, complete_var, standalone_mode, **extra)
        try:
            code = super().main(args, prog_name, complete_var, False, **extra)
        except UsageError as exc:
            if type(exc).__name__ != "NoArgsIsHelpError":  # `leafcost` alone: its help is printed already
                _say(usage_problem(exc))
            code = exc.exit_code
        except ClickException as exc:
            _say(exc.format_message())
            code = exc.exit_code
        except typer.Abort:
            _say("aborted")
            code = 1
        sys.exit(code if isinstance(code, int) else 0)  # what click's standalone mode does: no Exit escapes main


def usage_problem(exc) -> str:
    """click's message about a command line, with the command it is about and where its usage is told."""
    command = exc.ctx.command_path if exc.ctx is not None else "leafcost"
    where = command.removeprefix("leafcost").strip()
    return f"{where + ': ' if where else ''}{exc.format_message().rstrip('.')}: see `{command} --help`"


def progress_bars(*columns, console, transient: bool):
    """rich's Progress, less the empty line it prints on stopping when it drew nothing (off a terminal it prints one
    whatever it drew): a command that fails before its first bar prints its one `leafcost:` line and no other."""
    from rich.progress import Progress

    class Bars(Progress):
        def stop(self) -> None:
            if self.tasks and not self.live.transient:
                super().stop()  # its closing newline ends the last bar drawn
            elif not self.disable:
                self.live.stop()

    return Bars(*columns, console=console, transient=transient)
