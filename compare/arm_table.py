"""The arm table, defined once: which figures of an arm's summary entry (compare.documents.ArmSummary) are shown,
under what label and in what format, how dollars are written (fmt_usd), counts worded (counted) and figures named
in notes (figure_label). `leafcost summary` prints CLI_COLUMNS of it (CLI_WIDE_COLUMNS with --wide), the report
(reports.report) and the web page (reports.web) render every column; each renderer only adds its markup, so a
figure added here appears in all three. A column's meaning is its field's description in compare.documents."""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, Literal

# text: as is; count: an integer, or "n/of" / "n×of" with `of`; share and usd: a number; *_ci: an Estimate
Format = Literal["text", "count", "share", "usd", "share_ci", "usd_ci"]


@dataclass(frozen=True)
class Cell:
    """One shown figure: its text, and the document's exact number behind it (HTML keeps it as data-value)."""

    key: str
    label: str
    text: str  # the figure without its interval
    value: Any = None
    ci: list[float | None] | None = None  # a None bound: that side is unbounded
    ci_text: str | None = None  # "[low, high]", "[low, ∞)" when one-sided, or None without an interval
    reason: str | None = None  # why an estimate has no number or no interval

    @property
    def full_text(self) -> str:
        return f"{self.text} {self.ci_text}" if self.ci_text else self.text


@dataclass(frozen=True)
class Column:
    """A figure of the arm table: `path` is the field's dotted path in an ArmSummary (`cost_usd.total`)."""

    key: str
    label: str
    path: str
    format: Format
    of: str | None = None  # a second field shown beside a count: "resolved/attempts"
    join: str = "/"
    short: str | None = None  # the label in a terminal, where columns are narrow
    note: str | None = None  # a count shown after the figure when it is not 0: "5/10, 2 flagged"

    @property
    def description(self) -> str:
        from compare.documents import ArmSummary, description  # pydantic and numpy: not for `leafcost --help`

        return description(ArmSummary, self.path)

    @property
    def numeric(self) -> bool:
        return self.format != "text"

    def cell(self, arm: dict[str, Any]) -> Cell:
        value = _dig(arm, self.path)
        if self.format in ("share_ci", "usd_ci"):
            return _estimate_cell(self, value or {})
        if self.format == "text":
            text = "" if value is None else str(value)
        elif self.format == "count":
            text = str(value) if self.of is None else f"{value}{self.join}{_dig(arm, self.of)}"
            text += _note(arm, self.note)
        else:
            text = FORMATS[self.format](value)
        return Cell(self.key, self.label, text, value)


# The figures the tables spell their own way; every other field reads with its underscores as spaces.
FIGURE_NAMES = {"avg_at_k": "Avg@k", "pass_at_k": "pass@k", "pass_hat_k": "pass^k"}


def figure_label(path: str) -> str:
    """A figure's field path as the tables name it in notes: "avg_at_k" is "Avg@k", "cost_per_resolved_task" is
    "cost per resolved task", "pass_at_k.2" is "pass@k 2"."""
    return " ".join(FIGURE_NAMES.get(part, part.replace("_", " ")) for part in path.split("."))


def counted(n: int, noun: str) -> str:
    """"1 seed", "3 seeds", "0 seeds": a count with its noun, plural unless it is one."""
    return f"{n:,} {noun}" if n == 1 else f"{n:,} {noun}s"


def fmt_usd(value: float | None, signed: bool = False) -> str:
    """Dollars, the one rule of every surface (the terminal's tables and lines, the report, the web page): "n/a"
    for no number, "$0" for zero; below $1, three significant digits ($0.000123, $0.0125: a cost per call is often
    a fraction of a cent); from $1, cents ($12.34); from $100, whole dollars ($1,235), thousands separated. The
    band is chosen after rounding ($0.9996 is $1.00); a negative amount reads -$0.0125, and `signed` gives a
    positive one its "+" (a difference, +$0.0125)."""
    if value is None or not math.isfinite(value):
        return "n/a"
    sign = "-" if value < 0 else "+" if signed and value > 0 else ""
    amount = abs(value)
    if amount < 1:
        amount = float(f"{amount:.3g}")  # three significant digits; the rounding may reach $1
    if amount == 0:
        return "$0"
    if amount < 1:
        return f"{sign}${amount:.{2 - math.floor(math.log10(amount))}f}"
    amount = round(amount, 2)
    return f"{sign}${amount:,.0f}" if amount >= 100 else f"{sign}${amount:,.2f}"


def fmt_pct(value: float | None) -> str:
    return "n/a" if value is None else f"{value:.1%}"


FORMATS = {"share": fmt_pct, "usd": fmt_usd, "share_ci": fmt_pct, "usd_ci": fmt_usd}

ARM_COLUMNS: tuple[Column, ...] = (
    Column("arm", "arm", "arm", "text"),
    Column("kind", "kind", "kind", "text"),
    Column("model", "model", "model", "text"),
    Column("status", "status", "status", "text"),
    Column("tasks_seeds", "tasks×seeds", "tasks", "count", of="seeds", join="×"),
    Column("resolved_attempts", "resolved attempts", "resolved_attempts", "count", of="attempts", short="resolved",
           note="flagged_attempts"),
    Column("flagged_attempts", "flagged (patch touches the tests)", "flagged_attempts", "count", short="flagged"),
    Column("resolved_tasks", "resolved tasks", "resolved_tasks", "count", of="tasks"),
    Column("avg_at_k", "resolve rate Avg@k [95% CI]", "avg_at_k", "share_ci", short="Avg@k [95% CI]"),
    Column("cost_per_resolved_attempt", "per resolved attempt [95% CI]", "cost_per_resolved_attempt", "usd_ci",
           short="per resolved attempt"),
    Column("cost_per_resolved_task", "per resolved task [95% CI]", "cost_per_resolved_task", "usd_ci",
           short="per resolved task"),
    Column("cost_total", "total cost", "cost_usd.total", "usd", short="cost total"),
    Column("cost_tokens", "tokens", "cost_usd.tokens", "usd"),
    Column("cost_gpu", "GPU or machine lease", "cost_usd.gpu", "usd", short="lease"),
    Column("cost_sandbox", "sandbox", "cost_usd.sandbox", "usd"),
    Column("utilization", "utilization", "utilization", "share", short="util."),
    Column("harness_error_rate", "harness errors", "harness_error_rate", "share"),
    Column("infra_error_rate", "infra errors", "infra_error_rate", "share"),
    Column("grading_error_rate", "grading errors", "grading_error_rate", "share"),
    Column("price_source", "prices", "price_source", "text"),
    Column("unpriced_calls", "unpriced calls", "unpriced_calls", "count"),
    Column("impossible_usage_calls", "impossible usage calls", "impossible_usage_calls", "count"),
    Column("unrecorded_calls", "unrecorded calls", "unrecorded_spend.calls", "count"),
    Column("unrecorded_bound", "unrecorded spend, at most", "unrecorded_spend.bound_usd", "usd"),
)

# What `leafcost summary` and `compare` print, in this order: by default what a reader needs first, in 80 columns
# (flagged attempts and errors are notes below the table); with --wide more, a tuple sharing one column ("tokens /
# lease / sandbox"). Every other renderer shows ARM_COLUMNS.
CLI_COLUMNS: tuple[str | tuple[str, ...], ...] = (
    "arm", "resolved_attempts", "avg_at_k", "cost_per_resolved_attempt", "cost_total")
CLI_WIDE_COLUMNS: tuple[str | tuple[str, ...], ...] = (
    "arm", "kind", "tasks_seeds", "resolved_attempts", "avg_at_k", "cost_total",
    ("cost_tokens", "cost_gpu", "cost_sandbox"), "cost_per_resolved_attempt", "cost_per_resolved_task",
    "utilization", "price_source")


def columns(keys: tuple[str, ...] | None = None) -> list[Column]:
    """The registry's columns, in its order (only `keys`, when given); read at call time, so renderers always
    show the registry as it stands."""
    if keys is None:
        return list(ARM_COLUMNS)
    unknown = set(keys) - {column.key for column in ARM_COLUMNS}
    if unknown:
        raise KeyError(f"no arm table column {', '.join(sorted(unknown))}")
    return [column for column in ARM_COLUMNS if column.key in keys]


def terminal_columns(wide: bool = False) -> list[tuple[str, list[Column]]]:
    """CLI_COLUMNS (CLI_WIDE_COLUMNS when `wide`) as (header, columns) in their order: the columns of a tuple share
    one header, " / " between."""
    by_key = {column.key: column for column in ARM_COLUMNS}
    shown = []
    for entry in CLI_WIDE_COLUMNS if wide else CLI_COLUMNS:
        group = [by_key[key] for key in ((entry,) if isinstance(entry, str) else entry)]
        shown.append((" / ".join(column.short or column.label for column in group), group))
    return shown


def arm_cells(arm: dict[str, Any], keys: tuple[str, ...] | None = None) -> list[Cell]:
    """The cells of one arm's row."""
    return [column.cell(arm) for column in columns(keys)]


def _estimate_cell(column: Column, entry: dict[str, Any]) -> Cell:
    value, ci = entry.get("value"), entry.get("ci95")
    reason = entry.get("reason")
    if value is None:
        return Cell(column.key, column.label, "n/a", reason=reason or "no number")
    fmt = FORMATS[column.format]
    return Cell(column.key, column.label, fmt(value), value, ci, interval_text(ci, fmt), reason)


def interval_text(ci: list[float | None] | tuple[float | None, float | None] | None, fmt) -> str:
    """"[low, high]"; a one-sided interval with its open side as infinity, "[low, ∞)" or "(−∞, high]" (the bound
    that exists, never a null); "[no CI]" without an interval."""
    if not ci:
        return "[no CI]"
    low, high = ci
    return (("(−∞" if low is None else f"[{fmt(low)}") + ", "
            + ("∞)" if high is None else f"{fmt(high)}]"))


def flagged_notes(arm: dict[str, Any]) -> list[str]:
    """One line per flagged attempt of an arm's summary entry: reward hacking shown, not hidden."""
    counted = " (not counted: strict grading)" if arm.get("strict_grading") else ""
    return [f"{arm['arm']}: {flag['task_id']} seed {flag['seed']} resolved with a patch touching the test "
            f"harness{counted}: " + (", ".join(flag["paths"]) if flag["paths"] is not None
                                     else "no patch was captured to check")
            for flag in arm.get("flagged") or []]


def _note(arm: dict[str, Any], path: str | None) -> str:
    """", 3 flagged" (", 3 flagged, not counted" when strict) beside a count, or nothing."""
    count = _dig(arm, path) if path else None
    if not count:
        return ""
    return f", {count} flagged" + (", not counted" if arm.get("strict_grading") else "")


def _dig(document: dict[str, Any], path: str) -> Any:
    value: Any = document
    for part in path.split("."):
        value = (value or {}).get(part)
    return value
