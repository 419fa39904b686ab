"""`leafcost claim RUN_ID`: the verdict on the claim a run's spec carries (compare.claim), as a terminal page or as
the ClaimDocument. Registered on the app by compare.cli."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Annotated

import typer

from compare.cli_common import DbOption, JsonOption, fail

StrictOption = Annotated[bool, typer.Option(
    "--strict-grading", help="count flagged attempts (a patch touching the test harness) as not resolved, whether "
                             "or not the run was started with --strict-grading")]


def claim(
    run_id: Annotated[str, typer.Argument(help="the run id (leafcost run prints it)")],
    db: DbOption = None,
    strict_grading: StrictOption = False,
    as_json: JsonOption = False,
) -> None:
    """The verdict on the run's claim (its spec's `claim:`): Avg@k and Pass@k with intervals beside the claimed
    figures, "consistent with the claim", "below the claim" or "undecided: N more instances would decide", the
    harness's health ("harness unhealthy" withholds any verdict) and the contamination gap."""
    from compare.claim import claim_document, print_claim
    from compare.ledger import LedgerAccess, LedgerError, default_db_path
    from compare.summary import SummaryError

    try:
        with LedgerAccess(Path(db) if db is not None else default_db_path()).reading() as conn:
            document = claim_document(conn, run_id, strict=strict_grading or None)
    except (LedgerError, SummaryError) as exc:
        fail(str(exc), 2)
    if document is None:
        fail(f"run {run_id} has no claim: its spec has no `claim:` section; add one (docs/claims.md) or make the "
             "spec with `leafcost reproduce PRESET`", 2)
    if as_json:
        sys.stdout.write(document.model_dump_json(indent=2) + "\n")
    else:
        print_claim(document)
