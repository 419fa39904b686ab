"""`leafcost swebench export`: a SWE-bench dataset (an alias, a Hugging Face name, a downloaded folder or a local
file) written as the JSON Lines rows a suite reads, beside where they came from (sandbox.swebench_dataset)."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Annotated

import typer

from compare.cli_common import JsonOption, fail

swebench_app = typer.Typer(help="SWE-bench datasets: export one as the rows `leafcost run` and `validate` read.",
                           no_args_is_help=True)
REFUSED_SHOWN = 5  # refused rows named on the terminal; --json lists them all


@swebench_app.command("export")
def export(
    dataset: Annotated[str, typer.Argument(
        metavar="DATASET", help="verified, lite, full, multilingual or multimodal (swebench's aliases), a Hugging Face "
        "name (OWNER/NAME), a downloaded copy's folder, or a .parquet/.jsonl/.json file")],
    out: Annotated[Path, typer.Option("--out", "-o", metavar="ROWS.jsonl",
                                      help="the rows to write; ROWS.source.json beside it says where they came from")],
    split: Annotated[str | None, typer.Option(
        "--split", help="the split of a Hugging Face dataset or a folder (default test)")] = None,
    revision: Annotated[str | None, typer.Option(
        "--revision", metavar="REV", help="a Hugging Face branch, tag or commit (default main)")] = None,
    as_json: JsonOption = False,
) -> None:
    """Write a SWE-bench dataset's rows as JSON Lines leafcost loads (Hugging Face and parquet need `datasets`)."""
    from sandbox.swebench_dataset import DatasetExportError, export_swebench_dataset

    try:
        result = export_swebench_dataset(dataset, out, split=split, revision=revision)
    except DatasetExportError as exc:
        fail(str(exc), 2)
    if as_json:
        sys.stdout.write(result.model_dump_json(indent=2) + "\n")
        return
    _print_refused(result.refused)
    typer.echo(f"wrote {result.source.rows} rows to {result.out} ({_origin(result.source)}); where they came from: "
               f"{result.source_file}")


def _origin(source) -> str:
    if source.kind == "hub":
        at = f"commit {source.commit}" if source.commit else f"revision {source.revision or 'main'}"
        return f"{source.name}, split {source.split}, {at}"
    if source.kind == "folder":
        return f"{source.name}, split {source.split}"
    return f"{source.name}, sha256 {source.files[0].sha256[:12]}"


def _print_refused(refused) -> None:
    """Rows the loader will refuse, on stderr: they are exported as the dataset has them, and a run skips them."""
    from compare.display import clean

    if not refused:
        return
    typer.echo(f"leafcost: warning: leafcost's loader will refuse {len(refused)} of these rows (a run reports them "
               "as load errors):", err=True)
    for row in refused[:REFUSED_SHOWN]:
        typer.echo(f"  {clean(row.instance_id)}: {clean(row.error)}", err=True)
    if len(refused) > REFUSED_SHOWN:
        typer.echo(f"  ... and {len(refused) - REFUSED_SHOWN} more (--json lists them all)", err=True)
