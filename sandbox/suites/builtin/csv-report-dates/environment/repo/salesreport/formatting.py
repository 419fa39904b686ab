"""Rendering report rows as an aligned text table or as CSV."""

import csv
import io
from typing import List, Sequence

from .aggregate import Row, grand_total


def render_table(rows: Sequence[Row], with_region: bool = False) -> str:
    header = ["period"] + (["region"] if with_region else []) + ["orders", "units", "revenue"]
    body = [_cells(row, with_region) for row in rows]
    if rows:
        body.append(_cells(grand_total(rows), with_region))
    widths = [max(len(line[i]) for line in [header] + body) for i in range(len(header))]
    numeric_from = 2 if with_region else 1
    lines = []
    for index, line in enumerate([header] + body):
        if rows and index == len(body):
            lines.append("-" * (sum(widths) + 2 * (len(widths) - 1)))
        cells = [
            cell.ljust(width) if column < numeric_from else cell.rjust(width)
            for column, (cell, width) in enumerate(zip(line, widths))
        ]
        lines.append("  ".join(cells).rstrip())
    return "\n".join(lines) + "\n"


def render_csv(rows: Sequence[Row], with_region: bool = False) -> str:
    out = io.StringIO()
    writer = csv.writer(out, lineterminator="\n")
    writer.writerow(["period"] + (["region"] if with_region else []) + ["orders", "units", "revenue"])
    for row in rows:
        writer.writerow(_cells(row, with_region))
    return out.getvalue()


def _cells(row: Row, with_region: bool) -> List[str]:
    cells = [row.period]
    if with_region:
        cells.append("" if row.region is None else row.region)
    cells += [str(row.orders), str(row.units), f"{row.revenue:.2f}"]
    return cells
