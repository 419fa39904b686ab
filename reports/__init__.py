"""Rendering of a run from ledger queries: SVG charts, the HTML and Markdown report, CSV/Parquet exports and
SWE-bench-style predictions. Every figure comes from `compare` (reports compute no statistic of their own)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from reports.charts import cost_breakdown_svg, cost_vs_resolve_svg

if TYPE_CHECKING:
    from reports.report import ReportError, write_report

__all__ = ["ReportError", "cost_breakdown_svg", "cost_vs_resolve_svg", "write_report"]


def __getattr__(name: str) -> Any:
    # write_report pulls in numpy and the ledger (~0.7 s): loaded on first use so `leafcost --help` stays instant
    if name in {"write_report", "ReportError"}:
        from reports import report

        return getattr(report, name)
    raise AttributeError(f"module 'reports' has no attribute {name!r}")
