"""`leafcost summary`, `compare`, `reprice` and `breakeven`: a finished (or running) run's figures, printed as
tables or as the JSON documents the API serves. Registered on the app by compare.cli."""

from __future__ import annotations

import json
import sys
from contextlib import ExitStack
from pathlib import Path
from typing import Annotated, Any

import typer

from compare.arm_table import counted, figure_label
from compare.cli_common import DbOption, JsonOption, WideOption, fail

ResamplesOption = Annotated[int, typer.Option("--resamples", min=100, help="bootstrap resamples over tasks")]
SeedOption = Annotated[int, typer.Option("--seed", help="bootstrap seed (same seed, same intervals)")]
StrictOption = Annotated[bool, typer.Option(
    "--strict-grading", help="count flagged attempts (a patch touching the test harness) as not resolved, whether "
                             "or not the run was started with --strict-grading")]
ScenarioOption = Annotated[str | None, typer.Option(
    "--scenario", help="show a stored what-if repricing (leafcost reprice) instead of the recorded prices")]


def summary(
    run_id: Annotated[str, typer.Argument(help="the run id (leafcost run prints it)")],
    db: DbOption = None,
    scenario: ScenarioOption = None,
    resamples: ResamplesOption = 2000,
    seed: SeedOption = 20261202,
    strict_grading: StrictOption = False,
    wide: WideOption = False,
    as_json: JsonOption = False,
) -> None:
    """Per arm: resolve rates (Avg@k, pass@k, pass^k) with 95 % CIs, the full cost split into tokens, GPU and
    sandbox, and cost per resolved attempt and per resolved task with CIs."""
    from compare.summary import summarize

    if scenario is not None:
        document = _stored_scenario(db, run_id, scenario)
    else:
        document = _with_connection(db, lambda conn: summarize(conn, run_id, resamples=resamples, seed=seed,
                                                               strict=strict_grading or None))
    _emit(document, as_json, lambda shown: _print_summary(shown, wide=wide))


def compare(
    run_id: Annotated[str, typer.Argument(help="the run id")],
    arms: Annotated[str, typer.Option("--arms", help="two arms, A,B (differences are A minus B)")],
    db: DbOption = None,
    allow_mismatch: Annotated[bool, typer.Option(
        "--allow-mismatch", help="compare arms that differ in tasks, seeds, temperature or sandbox")] = False,
    resamples: ResamplesOption = 2000,
    seed: SeedOption = 20261202,
    wide: WideOption = False,
    as_json: JsonOption = False,
) -> None:
    """Two arms on their shared tasks: the fairness verdict, paired bootstrap differences of resolve rate and
    cost per resolved, McNemar's test with one seed, and the break-even when one arm is self-hosted."""
    from compare.comparison import compare_arms

    names = [a.strip() for a in arms.split(",") if a.strip()]
    if len(names) != 2:
        fail(f"--arms takes two arm names separated by a comma, got {arms!r}", 2)
    document = _with_connection(db, lambda conn: compare_arms(conn, run_id, names[0], names[1],
                                                              allow_mismatch=allow_mismatch, resamples=resamples,
                                                              seed=seed))
    _emit(document, as_json, lambda shown: _print_compare(shown, wide=wide))


def breakeven(
    run_id: Annotated[str, typer.Argument(help="the run id")],
    self_hosted: Annotated[str, typer.Option("--self-hosted", help="the self-hosted arm")],
    hosted: Annotated[str, typer.Option("--hosted", help="the hosted arm")],
    gpu_usd_per_hour: Annotated[float | None, typer.Option(help="price per GPU-hour to evaluate at")] = None,
    utilization: Annotated[float | None, typer.Option(min=0.001, max=1.0, help="assumed utilization")] = None,
    db: DbOption = None,
    as_json: JsonOption = False,
) -> None:
    """The GPU price, utilization and monthly volume at which the self-hosted arm's cost per resolved attempt
    equals the hosted arm's, and its sensitivity over the public GPU price grid."""
    from compare.breakeven import breakeven_document
    from compare.summary import summarize

    document = _with_connection(db, lambda conn: summarize(conn, run_id, arms=[self_hosted, hosted]))
    s, h = document["arms"]
    _emit(breakeven_document(run_id, s, h, gpu_usd_per_hour=gpu_usd_per_hour, utilization=utilization),
          as_json, _print_breakeven)


def reprice(
    run_id: Annotated[str, typer.Argument(help="the run id")],
    prices: Annotated[Path, typer.Option("--prices", exists=True, dir_okay=False, help="a price sheet (YAML)")],
    name: Annotated[str | None, typer.Option("--name", help="the scenario's name (default: the sheet's)")] = None,
    db: DbOption = None,
    resamples: ResamplesOption = 2000,
    seed: SeedOption = 20261202,
    wide: WideOption = False,
    as_json: JsonOption = False,
) -> None:
    """Recompute every cost of a run under other prices (the recorded facts stay as they are) and store the
    result as a named scenario: `leafcost summary RUN_ID --scenario NAME` shows it again."""
    import asyncio

    from compare.ledger import Ledger, LedgerError, default_db_path
    from compare.reprice import check_scenario_name, load_price_sheet, overrides_for, sheet_summary
    from compare.summary import SummaryError, load_run, summarize

    try:  # every price is checked before the ledger is opened: a refused sheet stores nothing
        sheet = load_price_sheet(prices)
        scenario = check_scenario_name(name or sheet.name or prices.stem)
    except SummaryError as exc:
        fail(str(exc), 2)
    try:
        ledger = Ledger.open(db or default_db_path())
    except LedgerError as exc:
        fail(str(exc), 2)
    try:
        conn = ledger.reader()
        run = load_run(conn, run_id)
        overrides = overrides_for(conn, run_id, run.spec(), sheet, scenario)
        document = summarize(conn, run_id, resamples=resamples, seed=seed, overrides=overrides)
        asyncio.run(ledger.save_scenario(run_id, scenario, sheet_summary(sheet), document))
    except (SummaryError, LedgerError) as exc:  # LedgerError: a key in the sheet, or a run writing the file
        fail(str(exc), 2)
    finally:
        ledger.close()
    _emit(document, as_json, lambda shown: _print_summary(shown, wide=wide))


def print_run_figures(db: Path | str, run_id: str, wide: bool = False) -> list[str]:
    """The summary table of a run that just finished, below its run table (what `leafcost demo` ends with);
    returns the arms that ran (not skipped), in the run's order."""
    from compare.summary import summarize

    document = _with_connection(Path(db), lambda conn: summarize(conn, run_id))
    _print_summary(document, wide=wide, skip_reasons=False)
    return [arm["arm"] for arm in document["arms"] if arm["status"] != "skipped"]


def run_freshness_of(db: Path | str, run_id: str) -> list[dict[str, Any]] | None:
    """The fresh vs seen split of a run that just finished (compare.freshness), for `leafcost run`'s summary: the
    summary's own, of the arms with released: (None when none has)."""
    from compare.summary import load_run, summarize

    def split(conn) -> list[dict[str, Any]] | None:
        arms = [arm.name for arm in load_run(conn, run_id).spec().arms if arm.released is not None]
        return summarize(conn, run_id, arms=arms)["freshness"] if arms else None
    return _with_connection(Path(db), split)


def _with_connection(db: Path | None, compute) -> dict[str, Any]:
    from compare.ledger import LedgerAccess, LedgerError, default_db_path
    from compare.summary import SummaryError

    with ExitStack() as stack:
        try:  # a ledger from an older leafcost is upgraded in place (migrations), then read
            conn = stack.enter_context(LedgerAccess(Path(db) if db is not None else default_db_path()).reading())
        except LedgerError as exc:
            fail(str(exc), 2)
        try:
            return compute(conn)
        except SummaryError as exc:
            fail(str(exc), 2)


def _stored_scenario(db: Path | None, run_id: str, scenario: str) -> dict[str, Any]:
    def read(conn) -> dict[str, Any]:
        from compare.summary import SummaryError

        rows = conn.execute("SELECT summary FROM scenarios WHERE run_id = ? AND name = ?", [run_id, scenario]
                            ).fetchall()
        if not rows:
            known = [r[0] for r in conn.execute("SELECT name FROM scenarios WHERE run_id = ?", [run_id]).fetchall()]
            raise SummaryError(f"run {run_id} has no scenario {scenario!r} (stored: {', '.join(known) or 'none'}; "
                               "make one with leafcost reprice)")
        return json.loads(rows[0][0])
    return _with_connection(db, read)


def _emit(document: dict[str, Any], as_json: bool, printer) -> None:
    from compare.summary import dumps

    if as_json:
        sys.stdout.write(dumps(document))
    else:
        printer(document)


def _print_summary(document: dict[str, Any], wide: bool = False, title: str | None = None,
                   skip_reasons: bool = True) -> None:
    """The arm table and its notes; `skip_reasons` False leaves out why skipped arms were skipped (the run table
    printed just above it says so already)."""
    from rich.table import Table

    from compare.arm_table import flagged_notes, terminal_columns
    from compare.freshness import print_freshness
    from compare.display import shown as safe  # notes quote endpoints' errors, task ids and patch paths
    from compare.display import terminal
    from compare.reconcile import unrecorded_note

    title = title or f"leafcost summary {document['run_id']}"
    title += f" (scenario {document['scenario']})" if document.get("scenario") else ""
    verdict = _verdict_line(document)
    # with a decision, the title is printed above its verdict line (a table's own title sits on the table)
    table = Table(title=safe(title) if verdict is None else None)
    shown = terminal_columns(wide)
    keys = {column.key for _, group in shown for column in group}
    for header, _ in shown:
        table.add_column(header, overflow="fold")
    for arm in document["arms"]:
        # escaped: an interval "[no CI]" is text, not a Rich style (which printed nothing), as are arm names
        table.add_row(*[safe(" / ".join(_terminal_text(column.cell(arm)) for column in group)) for _, group in shown])
    reasons: dict[str, list[str]] = {}  # one line per reason, naming every arm it applies to
    for arm in document["arms"]:
        for key in ("cost_per_resolved_attempt", "cost_per_resolved_task", "avg_at_k"):
            # the reason of a figure the table shows; a skipped arm's one reason says why it has none
            if key in keys and arm[key].get("reason") and arm["status"] != "skipped":
                reasons.setdefault(f"{figure_label(key)}: {arm[key]['reason']}", []).append(arm["arm"])
    notes = [f"{', '.join(arms)}: {reason}" for reason, arms in reasons.items()]
    for arm in document["arms"]:
        if arm["status"] == "skipped" and skip_reasons:
            notes.append(f"{arm['arm']}: skipped: {arm['status_reason']}")
        notes += flagged_notes(arm)
        if (errors := _error_note(arm)) is not None:
            notes.append(errors)
        if (lost := unrecorded_note(arm["arm"], arm.get("unrecorded_spend") or {})) is not None:
            notes.append(lost)
    console = terminal()
    if verdict is not None:
        console.print(f"[italic]{safe(title)}[/italic]")
        console.print(f"[bold]{safe(verdict)}[/bold]")  # one line, wrapped to the terminal as the notes are
    console.print(table)
    for note in notes:
        console.print(f"[dim]{safe(note)}[/dim]")
    print_freshness(document.get("freshness"))


def _verdict_line(document: dict[str, Any]) -> str | None:
    """The run's decision in one line (compare.decision_record), None for a run without a decision question;
    under a what-if's prices it says the decision was taken at the recorded ones."""
    from compare.decision_record import headline

    decision = document.get("decision")
    if not decision:
        return None
    return headline(decision) + (" (at the run's recorded prices)" if document.get("scenario") else "")


def _error_note(arm: dict[str, Any]) -> str | None:
    """The shares of an arm's final attempts lost to errors, when any were (no column shows them)."""
    from compare.arm_table import fmt_pct

    parts = [f"{fmt_pct(arm.get(key))} {label}" for key, label in (
        ("harness_error_rate", "harness errors"), ("infra_error_rate", "infra errors"),
        ("grading_error_rate", "without a verdict (grading errors, left out of the resolve rates)")) if arm.get(key)]
    return f"{arm['arm']}: of its final attempts, " + ", ".join(parts) if parts else None


def _terminal_text(cell) -> str:
    """A figure with its interval on the line below (a terminal is narrow)."""
    return f"{cell.text}\n{cell.ci_text}" if cell.ci_text else cell.text


def _print_compare(document: dict[str, Any], wide: bool = False) -> None:
    from compare.display import shown, terminal

    a, b = document["arms"]
    _print_summary({"run_id": document["run_id"], "scenario": document.get("scenario"),
                    "arms": document["summaries"], "decision": document.get("decision"),
                    "freshness": document.get("freshness")}, wide=wide,
                   title=f"leafcost compare {document['run_id']}: {a} vs {b}")
    lines = [f"{a} vs {b} on {counted(document['shared_tasks'], 'shared task')}: "
             + ("comparable" if document["comparable"] else "NOT comparable: " + "; ".join(document["differences"])),
             f"  resolve rate, {a} − {b}: {_signed(document['resolve_rate_difference'], pct=True)}"]
    for key, label in (("cost_per_resolved_attempt_difference", "cost per resolved attempt"),
                       ("cost_per_resolved_task_difference", "cost per resolved task")):
        lines.append(f"  {label}, {a} − {b}: {_signed(document[key])}")
    if document.get("mcnemar"):
        m = document["mcnemar"]
        lines.append(f"  McNemar (one seed): {a} only {m['a_only']}, {b} only {m['b_only']}, p = {m['p_value']:.3g}")
    console = terminal()
    for line in lines:  # they quote arm names and reasons ("[lower, ∞)"): text, not markup
        console.print(shown(line))
    if document.get("breakeven"):
        _print_breakeven(document["breakeven"])


def _signed(entry: dict[str, Any], pct: bool = False) -> str:
    """A difference with its interval, and its reason on the line below (a terminal is narrow)."""
    reason = f"\n    ({entry['reason']})" if entry.get("reason") else ""
    if entry.get("value") is None:
        return "n/a" + reason
    from compare.arm_table import fmt_usd, interval_text

    fmt = (lambda v: f"{v:+.1%}") if pct else (lambda v: fmt_usd(v, signed=True))
    ci = entry.get("ci95")
    # a one-sided interval shows its open side as infinity, and the reason says why
    return fmt(entry["value"]) + (f" {interval_text(ci, fmt)}" if ci else "") + reason


def _print_breakeven(document: dict[str, Any]) -> None:
    from rich.table import Table

    from compare.arm_table import fmt_usd
    from compare.display import shown, terminal

    console = terminal()
    head = f"break-even {document['self_hosted']} (self-hosted) vs {document['hosted']} (hosted)"
    if document.get("reason") and document.get("gpu_usd_per_hour") is None and not document.get("grid"):
        console.print(shown(f"{head}: {document['reason']}"))
        return
    console.print(shown(head))
    for key, label in (("gpu_usd_per_hour", "GPU price ($/GPU-hour) at the measured utilization"),
                       ("utilization", "utilization needed at the lease's price"),
                       ("monthly_attempts", "attempts per month for an always-on lease")):
        value = document.get(key)
        figure = ("n/a" if value is None else f"{value:.1%}" if key == "utilization"
                  else fmt_usd(value) if key == "gpu_usd_per_hour" else f"{value:,.2f}")
        reason = document.get(key + "_reason")
        console.print(shown(f"  {label}: {figure}" + (f" ({reason})" if reason else "")))
    if not document.get("grid"):
        return
    grid = Table("GPU", "$/GPU-hour", "self-hosted cost per resolved attempt", "break-even utilization")
    for row in document["grid"]:
        grid.add_row(shown(f"{row['gpu']} {row['level']}"), fmt_usd(row["gpu_usd_per_hour"]),
                     fmt_usd(row["self_hosted_cost_per_resolved_attempt"]), f"{row['breakeven_utilization']:.1%}")
    console.print(grid)
