"""Rendering of a run from ledger queries: SVG charts, the HTML and Markdown report, CSV/Parquet exports and
SWE-bench-style predictions. Every figure comes from `compare` (reports compute no statistic of their own)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from reports.charts import cost_breakdown_svg, cost_vs_resolve_svg
    from reports.report import ReportError, write_report

__all__ = ["ReportError", "cost_breakdown_svg", "cost_vs_resolve_svg", "write_report"]


def __getattr__(name: str) -> Any:
    # Loaded on first use: write_report pulls in numpy and the ledger (~0.7 s), the charts html; `leafcost --help`
    # and `leafcost run` register `leafcost report` through reports.cli and need none of them.
    if name in {"cost_breakdown_svg", "cost_vs_resolve_svg"}:
        from reports import charts

        return getattr(charts, name)
    if name in {"write_report", "ReportError"}:
        from reports import report

        return getattr(report, name)
    raise AttributeError(f"module 'reports' has no attribute {name!r}")
