"""Charts of a summary document as server-rendered SVG: no JavaScript, no fonts or scripts from elsewhere, so a
report opened offline shows exactly what was measured. Pure functions (document in, markup out): the HTML report
and the web page embed the same markup. Nothing here computes a statistic: every number drawn is read from the
document `compare.summary.summarize` returns.

Stable hooks for tests and styling: every arm drawn is a `<g class="arm-point" data-arm="...">` (scatter;
`data-cost="null"` on the strip of arms without a cost, `data-reference="true"` for the oracle) or
`<g class="arm-bar" data-arm="..." data-total="...">` (breakdown); the Pareto frontier is
`<polyline class="pareto-frontier" data-arms="a b">` whose points are the frontier arms' circle centres, by
resolve rate. Standalone output carries the SVG namespace; `standalone=False` leaves it out for inline HTML,
whose parser supplies it (so a report holds no URL at all)."""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from html import escape
from typing import Any

from compare.arm_table import counted, fmt_pct, fmt_usd, interval_text

__all__ = ["cost_breakdown_svg", "cost_vs_resolve_svg", "esc", "fit", "fmt_pct", "fmt_usd", "text_width"]

SVG_NS = "http://www.w3.org/2000/svg"
WIDTH = 720
FONT = "font-family:system-ui,-apple-system,'Segoe UI',sans-serif;font-size:12px"
PART_COLOURS = {"tokens": "#4e79a7", "gpu": "#f28e2b", "sandbox": "#59a14f"}
PART_LABELS = {"tokens": "tokens", "gpu": "GPU / machine lease", "sandbox": "sandbox"}
STRIP_ROW = 36  # a null-cost arm: its marker and name, then its reason
LOG_SPAN = 100.0  # costs spanning more than two decades get a log axis
EDGE = 4.0  # the least space between a label and the chart's edge


def esc(text: Any) -> str:
    """Text and attribute values alike: `&`, `<`, `>` and both quotes become entities (valid in XML and HTML)."""
    return escape(str(text), quote=True)


def _tick_usd(value: float) -> str:
    """Axis ticks are round numbers: no trailing zeros ($0.1, $1, $10)."""
    text = fmt_usd(value)
    return text.rstrip("0").rstrip(".") if "." in text else text


def _num(value: float) -> str:
    """Coordinates with two decimals: stable text for tests, small markup."""
    return f"{value:.2f}"


# Each character's advance as a share of the font size, rounded up from DejaVu Sans (what Debian's browsers draw
# system-ui with, and among the widest sans fonts): a label measured with it fits in narrower fonts too.
_EM = {**dict.fromkeys("ijlIJ'", 0.28), **dict.fromkeys("f.,:;|!/\\ ", 0.34), **dict.fromkeys("rt()[]-\"", 0.40),
       **dict.fromkeys("+<=>^~#×−∞", 0.85), **dict.fromkeys("mwMW@%…", 1.0)}


def text_width(text: str, size: float = 12.0) -> float:
    """An upper estimate of `text`'s width in pixels at `size` px: the server draws labels without the browser's
    font metrics, and a label must never run past the chart's edge."""
    def em(ch: str) -> float:
        if ch in _EM:
            return _EM[ch]
        if ch.isascii():
            return 0.80 if ch.isupper() else 0.64
        return 1.0  # accented capitals, CJK, symbols: at most an em
    return size * sum(em(ch) for ch in text)


def fit(text: str, room: float, size: float = 12.0) -> str:
    """`text` if it fits in `room` pixels, else its longest beginning that fits with an ellipsis after it."""
    if text_width(text, size) <= room:
        return text
    cut = len(text)
    while cut > 0 and text_width(text[:cut] + "…", size) > room:
        cut -= 1
    return text[:cut].rstrip() + "…"


def _open_svg(kind: str, height: float, label: str, standalone: bool) -> list[str]:
    # xmlns only for standalone files: inline in HTML the parser puts <svg> in the SVG namespace itself, and the
    # report then carries no URL at all.
    ns = f' xmlns="{SVG_NS}"' if standalone else ""
    return [f'<svg{ns} class="leafcost-chart {kind}" id="{kind}" role="img" aria-label="{esc(label)}" '
            f'viewBox="0 0 {WIDTH} {_num(height)}" width="{WIDTH}" height="{_num(height)}" style="{FONT}">',
            f"<title>{esc(label)}</title>"]


def _text(x: float, y: float, text: str, *, anchor: str = "start", cls: str = "", extra: str = "",
          room: float | None = None) -> str:
    """A label; with `room` (pixels), cut to fit it with an ellipsis, the whole text then its tooltip."""
    klass = f' class="{cls}"' if cls else ""
    shown = text if room is None else fit(text, room)
    tip = f"<title>{esc(text)}</title>" if shown != text else ""
    return f'<text x="{_num(x)}" y="{_num(y)}" text-anchor="{anchor}"{klass}{extra}>{esc(shown)}{tip}</text>'


def _side_label(cx: float, y: float, text: str, gap: float, cls: str) -> tuple[float, float, str]:
    """A point's label beside it, on the right when it fits there, else on the left when it fits there, else cut
    to the wider side: (left edge, right edge, markup), never past the chart's edges."""
    width = text_width(text)
    right_room, left_room = WIDTH - EDGE - (cx + gap), cx - gap - EDGE
    if width <= right_room or (width > left_room and right_room >= left_room):
        x0 = cx + gap
        return x0, x0 + min(width, right_room), _text(x0, y, text, cls=cls, room=right_room)
    x1 = cx - gap
    return x1 - min(width, left_room), x1, _text(x1, y, text, anchor="end", cls=cls, room=left_room)


# ---------------------------------------------------------------------------------------------------------
# Cost per resolved attempt against resolve rate


@dataclass
class _Point:
    arm: str
    rate: float
    rate_ci: tuple[float, float] | None
    cost: float | None
    cost_ci: tuple[float, float | None] | None  # high None: one-sided, [low, ∞) (some resamples resolve nothing)
    reason: str
    reference: bool = False  # the oracle: a harness check, not something one can buy


def _points(summary: dict[str, Any]) -> list[_Point]:
    """Arms with a finished episode (their Avg@k has a value); cost may be null with its reason."""
    points = []
    for arm in summary.get("arms", []):
        rate = (arm.get("avg_at_k") or {})
        if rate.get("value") is None:
            continue
        cost = arm.get("cost_per_resolved_attempt") or {}
        points.append(_Point(arm=str(arm["arm"]), rate=float(rate["value"]), rate_ci=_ci(rate),
                             cost=None if cost.get("value") is None else float(cost["value"]),
                             cost_ci=_cost_ci(cost), reason=cost.get("reason") or "no cost per resolved attempt",
                             reference=arm.get("kind") == "oracle"))
    return points


def _ci(entry: dict[str, Any]) -> tuple[float, float] | None:
    ci = entry.get("ci95")
    return (float(ci[0]), float(ci[1])) if ci and ci[0] is not None and ci[1] is not None else None


def _cost_ci(entry: dict[str, Any]) -> tuple[float, float | None] | None:
    """A cost's interval, the one-sided [low, ∞) kept (a cost per resolved is never unbounded below)."""
    ci = entry.get("ci95")
    if not ci or ci[0] is None:
        return None
    return float(ci[0]), None if ci[1] is None else float(ci[1])


def pareto_frontier(points: Iterable[tuple[str, float, float]]) -> list[str]:
    """Names of the (name, resolve rate, cost) points no other point beats on both (at least as high a rate and
    at least as low a cost, better on one), by increasing rate. A drawing rule, not a statistic."""
    items = list(points)
    frontier = [p for p in items
                if not any(q[1] >= p[1] and q[2] <= p[2] and (q[1] > p[1] or q[2] < p[2]) for q in items)]
    return [p[0] for p in sorted(frontier, key=lambda p: (p[1], p[2]))]


@dataclass
class _Axis:
    """Maps a value range onto pixels, linear or log10."""

    lo: float
    hi: float
    start: float  # pixel of lo
    end: float  # pixel of hi
    log: bool = False

    def __call__(self, value: float) -> float:
        lo, hi, v = self.lo, self.hi, value
        if self.log:
            lo, hi, v = math.log10(lo), math.log10(hi), math.log10(max(value, self.lo))
        share = 0.0 if hi == lo else (v - lo) / (hi - lo)
        return self.start + share * (self.end - self.start)


def _cost_axis(values: list[float], start: float, end: float) -> tuple[_Axis, list[float]]:
    """A y axis for costs (and their CIs) with its ticks: log when the positive values span > 2 decades."""
    positive = [v for v in values if v > 0]
    top = max(values, default=0.0)
    if len(positive) >= 2 and max(positive) / min(positive) > LOG_SPAN:
        lo = 10 ** math.floor(math.log10(min(positive)))
        hi = 10 ** math.ceil(math.log10(max(positive)))
        ticks = [10 ** e for e in range(round(math.log10(lo)), round(math.log10(hi)) + 1)]
        return _Axis(lo, hi, start, end, log=True), ticks
    step = _nice_step(top / 4) if top > 0 else 1.0
    hi = step * math.ceil(top / step) if top > 0 else 1.0
    ticks = [i * step for i in range(int(round(hi / step)) + 1)]
    return _Axis(0.0, hi, start, end), ticks


def _nice_step(raw: float) -> float:
    """1, 2 or 5 times a power of ten, at least `raw`."""
    power = 10 ** math.floor(math.log10(raw))
    return next(m * power for m in (1, 2, 5, 10) if m * power >= raw)


def cost_vs_resolve_svg(summary: dict[str, Any], *, standalone: bool = True) -> str:
    """Each arm with a finished episode: x = Avg@k with its 95 % CI, y = cost per resolved attempt with its CI.
    Arms without a cost number sit on a strip below the plot with their reason (never drawn at $0). The line
    joins the arms no other arm beats on both axes (the Pareto frontier); the oracle is drawn hollow as a
    reference and kept off the frontier (it replays the reference solutions: it would dominate every model and
    is no option to buy). `standalone=False` leaves out the xmlns attribute, for markup inlined in HTML."""
    points = _points(summary)
    priced = [p for p in points if p.cost is not None]
    unpriced = [p for p in points if p.cost is None]
    left, right, top, plot_h = 90.0, WIDTH - 110.0, 36.0, 300.0
    bottom = top + plot_h
    strip_top = bottom + 50
    height = strip_top + (STRIP_ROW * len(unpriced) + 16 if unpriced else 0) + 10
    label = (f"Cost per resolved attempt against resolve rate (Avg@k), run {summary.get('run_id', '')}: "
             + ("; ".join(f"{p.arm} {fmt_pct(p.rate)}, {fmt_usd(p.cost) if p.cost is not None else p.reason}"
                          for p in points) or "no arm has a finished episode"))
    out = _open_svg("cost-vs-resolve", height, label, standalone)
    x = _Axis(0.0, 1.0, left, right)
    costs = [v for p in priced for v in ((p.cost,) + (p.cost_ci or ())) if v is not None]
    y, y_ticks = _cost_axis(costs, bottom, top)
    out += _frame(left, right, top, bottom)
    out += _x_ticks(x, bottom, top, [i / 5 for i in range(6)], fmt_pct)
    out += _y_ticks(y, left, right, y_ticks)
    out.append(_text((left + right) / 2, bottom + 34, "resolve rate (Avg@k), 95% CI", anchor="middle",
                     cls="axis-label"))
    middle = (top + bottom) / 2
    out.append(_text(16, middle, "cost per resolved attempt (USD)" + (", log scale" if y.log else ""),
                     anchor="middle", cls="axis-label", extra=f' transform="rotate(-90 16 {_num(middle)})"'))
    if not points:
        out.append(_text((left + right) / 2, (top + bottom) / 2, "no arm has a finished episode", anchor="middle",
                         cls="empty"))
    centres = {p.arm: (x(p.rate), y(p.cost)) for p in priced}
    frontier = pareto_frontier((p.arm, p.rate, p.cost) for p in priced if not p.reference)
    if frontier:
        coords = " ".join(f"{_num(centres[a][0])},{_num(centres[a][1])}" for a in frontier)
        out.append(f'<polyline class="pareto-frontier" data-arms="{esc(" ".join(frontier))}" points="{coords}" '
                   'fill="none" stroke="#888" stroke-width="1.5" stroke-dasharray="5 3"/>')
    labels = _point_labels([(p.arm, p.arm + (" (reference)" if p.reference else ""), *centres[p.arm])
                            for p in priced])
    for p in priced:
        out += _priced_point(p, x, y, labels[p.arm], on_frontier=p.arm in frontier)
    if unpriced:
        out.append(_text(left, strip_top, "no cost per resolved attempt:", cls="strip-title",
                         extra=' font-weight="bold"'))
    for i, p in enumerate(unpriced):
        out += _strip_point(p, x, strip_top + 20 + STRIP_ROW * i)
    if frontier:
        out.append(_text(right, top - 12, "filled, joined by - - -: the Pareto frontier (no other arm resolves more "
                         "for less)", anchor="end", cls="legend", room=right - EDGE))
    out.append("</svg>")
    return "\n".join(out)


def _frame(left: float, right: float, top: float, bottom: float) -> list[str]:
    return [f'<rect class="plot-area" x="{_num(left)}" y="{_num(top)}" width="{_num(right - left)}" '
            f'height="{_num(bottom - top)}" fill="#fafafa" stroke="#999"/>']


def _x_ticks(x: _Axis, bottom: float, top: float, ticks: list[float], fmt: Callable[[float], str]) -> list[str]:
    out = []
    for t in ticks:
        px = x(t)
        out.append(f'<line class="grid" x1="{_num(px)}" y1="{_num(top)}" x2="{_num(px)}" y2="{_num(bottom)}" '
                   'stroke="#e3e3e3"/>')
        out.append(_text(px, bottom + 16, fmt(t), anchor="middle", cls="tick x-tick"))
    return out


def _y_ticks(y: _Axis, left: float, right: float, ticks: list[float]) -> list[str]:
    out = []
    for t in ticks:
        py = y(t)
        out.append(f'<line class="grid" x1="{_num(left)}" y1="{_num(py)}" x2="{_num(right)}" y2="{_num(py)}" '
                   'stroke="#e3e3e3"/>')
        out.append(_text(left - 6, py + 4, _tick_usd(t), anchor="end", cls="tick y-tick"))
    return out


def _point_labels(points: list[tuple[str, str, float, float]]) -> dict[str, str]:
    """Each (name, label, cx, cy) point's label above it on the side with room (_side_label), moved down a line
    while it would overlap a label already placed (arms with close figures are common: the same tasks resolved
    at similar cost)."""
    placed: list[tuple[float, float, float]] = []  # left, right, baseline
    labels = {}
    for name, text, cx, cy in sorted(points, key=lambda p: (p[3], p[2])):
        x0, x1, _ = _side_label(cx, 0.0, text, 8, "arm-label")
        ly = cy - 8
        while any(x0 < right + 4 and left - 4 < x1 and abs(ly - base) < 13 for left, right, base in placed):
            ly += 13
        placed.append((x0, x1, ly))
        labels[name] = _side_label(cx, ly, text, 8, "arm-label")[2]
    return labels


def _priced_point(p: _Point, x: _Axis, y: _Axis, label: str, *, on_frontier: bool) -> list[str]:
    cx, cy = x(p.rate), y(p.cost)
    tip = (f"{p.arm}: resolve rate {fmt_pct(p.rate)}{_ci_text(p.rate_ci, fmt_pct)}; cost per resolved attempt "
           f"{fmt_usd(p.cost)}{_ci_text(p.cost_ci, fmt_usd)}" + (" (reference: not a model)" if p.reference else ""))
    reference = ' data-reference="true"' if p.reference else ""
    out = [f'<g class="arm-point" data-arm="{esc(p.arm)}" data-frontier="{str(on_frontier).lower()}"{reference}>',
           f"<title>{esc(tip)}</title>"]
    if p.rate_ci:
        x1, x2 = x(p.rate_ci[0]), x(p.rate_ci[1])
        out.append(f'<path class="ci ci-rate" d="M{_num(x1)},{_num(cy)}H{_num(x2)}M{_num(x1)},{_num(cy - 4)}'
                   f'V{_num(cy + 4)}M{_num(x2)},{_num(cy - 4)}V{_num(cy + 4)}" stroke="#555" fill="none"/>')
    if p.cost_ci and p.cost_ci[1] is None:  # one-sided: from the lower bound up out of the plot, no cap above
        y1, y2 = y(p.cost_ci[0]), min(y.start, y.end)
        out.append(f'<path class="ci ci-cost ci-open" d="M{_num(cx)},{_num(y1)}V{_num(y2)}M{_num(cx - 4)},'
                   f'{_num(y1)}H{_num(cx + 4)}" stroke="#555" stroke-dasharray="3 2" fill="none"/>')
    elif p.cost_ci:
        y1, y2 = y(p.cost_ci[0]), y(p.cost_ci[1])
        out.append(f'<path class="ci ci-cost" d="M{_num(cx)},{_num(y1)}V{_num(y2)}M{_num(cx - 4)},{_num(y1)}'
                   f'H{_num(cx + 4)}M{_num(cx - 4)},{_num(y2)}H{_num(cx + 4)}" stroke="#555" fill="none"/>')
    fill = "#4e79a7" if on_frontier else "#fff" if p.reference else "#bab0ac"
    dash = ' stroke-dasharray="2 1.5"' if p.reference else ""
    out.append(f'<circle cx="{_num(cx)}" cy="{_num(cy)}" r="5" fill="{fill}" stroke="#333"{dash}/>')
    out.append(label)
    out.append("</g>")
    return out


def _strip_point(p: _Point, x: _Axis, row_y: float) -> list[str]:
    """A hollow marker at the arm's resolve rate with its name on the side with room, and the reason on the line
    below from the plot's left edge (cut to the chart's width: the full text is in the tooltip and the notes)."""
    cx = x(p.rate)
    label = _side_label(cx, row_y, f"{p.arm} ({fmt_pct(p.rate)})", 10, "arm-label")[2]
    label += "\n" + _text(x.start, row_y + 15, p.reason, cls="strip-reason", room=WIDTH - EDGE - x.start)
    return [f'<g class="arm-point" data-arm="{esc(p.arm)}" data-cost="null">',
            f"<title>{esc(f'{p.arm}: resolve rate {fmt_pct(p.rate)}; no cost per resolved attempt: {p.reason}')}"
            "</title>",
            f'<rect x="{_num(cx - 4.5)}" y="{_num(row_y - 9)}" width="9" height="9" fill="none" stroke="#b07aa1" '
            'stroke-width="1.5"/>',
            label, "</g>"]


def _ci_text(ci: tuple[float | None, float | None] | None, fmt: Callable[[float], str]) -> str:
    return f" {interval_text(ci, fmt)}" if ci else ""


# ---------------------------------------------------------------------------------------------------------
# Where each arm's dollars went


def cost_breakdown_svg(summary: dict[str, Any], *, standalone: bool = True) -> str:
    """One horizontal bar per arm, stacked tokens / lease / sandbox dollars, with the total at its end. An arm
    whose total is unknown (unpriced calls) gets a dashed, labelled gap instead of a bar that would look
    cheap."""
    arms = list(summary.get("arms", []))
    # room for the longest name, within a third of the chart (a longer one is cut, whole in its tooltip)
    names = max((text_width(str(a["arm"])) for a in arms), default=0.0)
    left, right, top, row_h = min(max(110.0, names + 16), WIDTH / 3), WIDTH - 130.0, 40.0, 30.0
    height = top + row_h * max(len(arms), 1) + 20
    totals = [a["cost_usd"]["total"] for a in arms if a.get("cost_usd", {}).get("total") is not None]
    scale = _Axis(0.0, max(totals, default=0.0) or 1.0, left, right)
    label = (f"Total cost per arm split into tokens, lease and sandbox, run {summary.get('run_id', '')}: "
             + ("; ".join(f"{a['arm']} {fmt_usd(a['cost_usd']['total'])}" for a in arms) or "no arms"))
    out = _open_svg("cost-breakdown", height, label, standalone)
    out += _legend(left, 18)
    for i, arm in enumerate(arms):
        out += _bar(arm, scale, top + row_h * i, row_h - 10)
    if not arms:
        out.append(_text(left, top + 15, "no arms", cls="empty"))
    out.append("</svg>")
    return "\n".join(out)


def _legend(x: float, y: float) -> list[str]:
    out = ['<g class="legend">']
    for part, colour in PART_COLOURS.items():
        out.append(f'<rect class="swatch" data-part="{part}" x="{_num(x)}" y="{_num(y - 10)}" width="12" '
                   f'height="12" fill="{colour}"/>')
        out.append(_text(x + 16, y, PART_LABELS[part]))
        x += 30 + 7 * len(PART_LABELS[part])
    out.append("</g>")
    return out


def _bar(arm: dict[str, Any], scale: _Axis, y: float, h: float) -> list[str]:
    name, cost = str(arm["arm"]), arm.get("cost_usd") or {}
    total = cost.get("total")
    out = [f'<g class="arm-bar" data-arm="{esc(name)}" data-total="{"null" if total is None else repr(total)}">',
           _text(scale.start - 8, y + h / 2 + 4, name, anchor="end", cls="arm-label", room=scale.start - 8 - EDGE)]
    if total is None:
        reason = _no_total_reason(arm)
        out += [f"<title>{esc(f'{name}: no total: {reason}')}</title>",
                f'<rect class="gap" x="{_num(scale.start)}" y="{_num(y)}" width="{_num(scale.end - scale.start)}" '
                f'height="{_num(h)}" fill="none" stroke="#b07aa1" stroke-dasharray="4 3"/>',
                _text(scale.start + 6, y + h / 2 + 4, f"no total: {reason}", cls="gap-label",
                      room=WIDTH - EDGE - scale.start - 6), "</g>"]
        return out
    parts = "; ".join(f"{PART_LABELS[p]} {fmt_usd(cost.get(p))}" for p in PART_COLOURS)
    out.append(f"<title>{esc(f'{name}: {fmt_usd(total)} ({parts})')}</title>")
    x = scale.start
    for part, colour in PART_COLOURS.items():
        value = float(cost.get(part) or 0.0)
        width = scale(value) - scale.start
        out.append(f'<rect class="segment" data-part="{part}" data-usd="{value!r}" x="{_num(x)}" y="{_num(y)}" '
                   f'width="{_num(width)}" height="{_num(h)}" fill="{colour}"/>')
        x += width
    out.append(_text(x + 6, y + h / 2 + 4, fmt_usd(total), cls="total"))
    out.append("</g>")
    return out


def _no_total_reason(arm: dict[str, Any]) -> str:
    unpriced = arm.get("unpriced_calls") or 0
    if unpriced:
        return f"{counted(unpriced, 'hosted call')} {'is' if unpriced == 1 else 'are'} unpriced"
    return (arm.get("cost_per_resolved_attempt") or {}).get("reason") or "unpriced"
