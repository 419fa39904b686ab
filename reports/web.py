"""The web page `leafcost serve` shows at `/`: the run list, a run's page (one row per arm with its error bars,
the cost-vs-resolve-rate chart with the Pareto frontier, the cost breakdown, the break-even panel and the
episode table) and an episode's trajectory. Rendered on the server from the same documents the API serves
(compare.summary, compare.breakeven) and the trajectory files it serves (compare.trajectory_files: the same
folder, no symlinks, the same size cap): no JavaScript, nothing fetched from elsewhere, so it works offline."""

from __future__ import annotations

import json
from collections.abc import Callable
from html import escape
from itertools import product
from pathlib import Path
from typing import Any

import duckdb
from fastapi import APIRouter, HTTPException, Query
from fastapi.responses import HTMLResponse

from compare.arm_table import Cell, arm_cells, columns, counted, figure_label, flagged_notes, fmt_usd
from compare.breakeven import breakeven
from compare.decision_record import headline, look_table, outcome
from compare.episode_list import EpisodeFilter, count_episodes, find_episode, list_episodes
from compare.ledger import LedgerAccess, LedgerError, fetch_rows
from compare.plan_record import plan_headline, plan_table, run_plan
from compare.summary import SummaryError, summarize
from compare.trajectory_files import read_trajectory
from reports.charts import cost_breakdown_svg, cost_vs_resolve_svg

EPISODES_PER_PAGE = 100
MAX_OFFSET = 2**31 - 1  # as the API's episode listing: the ledger's OFFSET is a 64-bit integer

# Fits a 1280-pixel window without scrolling sideways: long names wrap anywhere, a number never wraps (an
# interval may, between its bounds), headers wrap, and the arm table's other figures stay folded until asked for.
STYLE = """
body{font:14px/1.45 system-ui,sans-serif;margin:24px auto;max-width:1280px;color:#1d2430;padding:0 16px}
h1{font-size:22px;overflow-wrap:anywhere}h2{font-size:17px;margin-top:28px}h3{overflow-wrap:anywhere}a{color:#1a5fb4}
table{border-collapse:collapse;width:100%;margin:8px 0}th,td{border-bottom:1px solid #dde1e6;padding:5px 8px;
text-align:left;vertical-align:top;overflow-wrap:break-word}th{background:#f3f5f7;font-weight:600;
vertical-align:bottom}#arms td[data-key=arm],#episodes td:not(.num){overflow-wrap:anywhere}
#arms td[data-key=arm]{min-width:7em}th.num{text-align:right}td.num{text-align:right;font-variant-numeric:tabular-nums;
white-space:nowrap;overflow-wrap:normal}.ci{color:#5c6773;font-size:12px;white-space:normal}.note{color:#5c6773}
.note,li{overflow-wrap:anywhere}.charts{display:flex;flex-wrap:wrap;gap:24px}.charts svg{max-width:100%;height:auto}
pre{white-space:pre-wrap;word-break:break-word;background:#f6f8fa;padding:8px;border-radius:4px;margin:4px 0}
.wide{overflow-x:auto}#arms{font-size:13px}#arms th,#arms td{padding:5px 6px}
#arms .more{display:none}#all-figures:checked~.wide #arms .more{display:table-cell}
label.more-figures{color:#1a5fb4;cursor:pointer;font-size:13px}#all-figures{margin:0 6px 0 0}
.step{border-left:3px solid #c6cdd5;padding-left:10px;margin:12px 0}
.verdict{font-size:15px;font-weight:600;overflow-wrap:anywhere}#plan-table td:not(.num){overflow-wrap:anywhere}
"""

# The arm table's columns shown at first, the ones a reader compares arms by; the registry's others (and any
# column added to it) are folded behind "all figures", in the registry's order.
PAGE_COLUMNS = ("arm", "kind", "status", "tasks_seeds", "resolved_attempts", "resolved_tasks", "avg_at_k",
                "cost_per_resolved_attempt", "cost_per_resolved_task", "cost_total", "cost_tokens", "cost_gpu",
                "cost_sandbox")


def web_router(db_path: Path | str, *, summaries: Callable[[str], dict[str, Any]] | None = None,
               access: LedgerAccess | None = None) -> APIRouter:
    """The page's routes. `summaries(run_id)` gives a run's summary document (the API passes its cached one, so
    the page and the API show the same numbers); by default it is computed from the ledger. `access` is how the
    ledger is read (the API's own, e.g. through the writing process while a run is served from it)."""
    db_path = Path(db_path)
    access = access or LedgerAccess(db_path)
    router = APIRouter(include_in_schema=False)

    def read(compute: Callable[[Any], Any]) -> Any:
        return _read(access, compute)

    def summary_of(run_id: str) -> dict[str, Any]:
        if summaries is not None:
            return summaries(run_id)
        return read(lambda conn: summarize(conn, run_id))

    @router.get("/", response_class=HTMLResponse)
    def run_list() -> str:
        runs = read(lambda conn: fetch_rows(conn, "SELECT run_id, name, status, created_at, suite, seeds, "
                                                       "json_array_length(task_ids) AS tasks FROM runs "
                                                       "ORDER BY created_at DESC"))
        rows = "".join(
            f"<tr><td><a href=\"/run/{escape(r['run_id'])}\">{escape(r['run_id'])}</a></td>"
            f"<td>{escape(r['status'])}</td><td>{escape(str(r['suite']))}</td>"
            f"<td class=num>{r['tasks']}</td><td class=num>{r['seeds']}</td>"
            f"<td>{escape(str(r['created_at'])[:19])}</td></tr>" for r in runs)
        body = (f"<h1>leafcost runs</h1><p class=note>ledger {escape(str(db_path))}</p>"
                "<table id=runs><tr><th>run</th><th>status</th><th>suite</th><th>tasks</th><th>seeds</th>"
                f"<th>created (UTC)</th></tr>{rows}</table>"
                + ("" if runs else "<p>No runs yet: <code>leafcost demo</code> or <code>leafcost run</code>.</p>"))
        return _page("leafcost runs", body)

    @router.get("/run/{run_id}", response_class=HTMLResponse)
    def run_page(run_id: str, arm: str | None = None, offset: int = Query(0, ge=0, le=MAX_OFFSET)) -> str:
        document = _or_404(lambda: summary_of(run_id))
        episodes, total = read(lambda conn: _episodes(conn, run_id, arm, offset))
        plan = read(lambda conn: run_plan(conn, run_id, summary=document))
        body = (f"<h1>Run {escape(run_id)}</h1><p class=note>status {escape(str(document.get('run_status')))}, "
                f"{counted(len(document['task_order']), 'task')} × {counted(document['seeds'], 'seed')}; "
                "95 % intervals from "
                f"{document['bootstrap']['resamples']:,} bootstrap resamples over tasks; sandbox "
                f"${document['sandbox_usd_per_vcpu_hour']}/vCPU-hour · <a href=\"/runs/{escape(run_id)}/summary\">"
                "JSON</a> · <a href=\"/\">all runs</a></p>"
                + _decision_section(document) + _plan_section(plan) + _arm_table(document) + _notes(document)
                + "<h2>Cost per resolved attempt against resolve rate</h2><div class=charts>"
                + cost_vs_resolve_svg(document) + cost_breakdown_svg(document) + "</div>"
                + _breakeven_panel(document)
                + _episode_table(run_id, episodes, total, arm, offset))
        return _page(f"leafcost {run_id}", body)

    @router.get("/run/{run_id}/episode/{episode_id:path}", response_class=HTMLResponse)
    def episode_page(run_id: str, episode_id: str) -> str:
        row, calls = read(lambda conn: _episode(conn, run_id, episode_id))
        if row is None:
            raise HTTPException(404, f"run {run_id} has no episode {episode_id!r}")
        trajectory, reason = read_trajectory(access.path, row.get("trajectory_path"))
        return _page(f"leafcost {row['episode_id']}", _trajectory(run_id, row, calls, trajectory, reason))

    return router


def _read(access: LedgerAccess, compute: Callable[[Any], Any]) -> Any:
    try:
        with access.reading() as conn:
            return compute(conn)
    except LedgerError as exc:  # busy, missing, corrupt or newer: the server's state, as the API answers it
        raise HTTPException(503, str(exc)) from None
    except duckdb.Error as exc:
        raise HTTPException(503, f"the ledger could not be read: {exc}") from None


def _or_404(compute: Callable[[], dict[str, Any]]) -> dict[str, Any]:
    try:
        return compute()
    except SummaryError as exc:
        raise HTTPException(404, str(exc)) from None




def _page(title: str, body: str) -> str:
    return (f"<!doctype html><html lang=en><head><meta charset=utf-8><title>{escape(title)}</title>"
            f"<meta name=viewport content=\"width=device-width,initial-scale=1\"><style>{STYLE}</style></head>"
            f"<body>{body}</body></html>")


def _decision_section(document: dict[str, Any]) -> str:
    """The run's decision at the top of its page: the verdict line, what the stop left, and a row per look (none
    for a run without a decision question)."""
    decision = document.get("decision")
    if not decision:
        return ""
    headers, rows = look_table(decision)
    numeric = [header != "action" for header in headers]
    head = "".join(f"<th{_classes(n, False)}>{escape(header)}</th>" for header, n in zip(headers, numeric, strict=True))
    body = "".join("<tr>" + "".join(f"<td{_classes(n, False)}>{escape(text)}</td>"
                                    for text, n in zip(row, numeric, strict=True)) + "</tr>" for row in rows)
    left = outcome(decision)
    return (f"<section id=decision data-status={escape(decision['status'])}><h2>Decision</h2>"
            f"<p class=verdict>{escape(headline(decision))}</p>"
            + (f"<p class=outcome>{escape(left)}</p>" if left else "")
            + (f"<div class=wide><table id=looks><tr>{head}</tr>{body}</table></div>" if rows else "")
            + "</section>")


def _plan_section(plan: dict[str, Any] | None) -> str:
    """What was planned before the run against what it did, after the decision (none for a run without a plan)."""
    if not plan:
        return ""
    headers, rows = plan_table(plan)
    numeric = [header in ("planned", "actual") for header in headers]
    head = "".join(f"<th{_classes(n, False)}>{escape(header)}</th>" for header, n in zip(headers, numeric, strict=True))
    body = "".join("<tr>" + "".join(f"<td{_classes(n, False)}>{escape(text)}</td>"
                                    for text, n in zip(row, numeric, strict=True)) + "</tr>" for row in rows)
    return (f"<section id=plan><h2>Plan</h2><p class=note>{escape(plan_headline(plan))}</p>"
            f"<div class=wide><table id=plan-table><tr>{head}</tr>{body}</table></div></section>")


def _arm_table(document: dict[str, Any]) -> str:
    """The registry's columns (compare.arm_table), those not in PAGE_COLUMNS folded (a checkbox unfolds them, no
    script needed); a numeric cell keeps the raw number in `data-value` (what the browser test compares with the
    API), an estimate its interval below it and, when it has no number, the reason as a tooltip."""
    shown = [column.key in PAGE_COLUMNS for column in columns()]
    head = "<tr>" + "".join(f"<th{_classes(column.numeric, not main)}>{escape(column.label)}</th>"
                            for column, main in zip(columns(), shown, strict=True)) + "</tr>"
    rows = []
    for arm in document["arms"]:
        cells = "".join(_cell(column.numeric, cell, folded=not main)
                        for column, cell, main in zip(columns(), arm_cells(arm), shown, strict=True))
        rows.append(f"<tr class=arm data-arm=\"{escape(arm['arm'])}\">{cells}</tr>")
    folded = [column.label for column, main in zip(columns(), shown, strict=True) if not main]
    toggle = ("<input type=checkbox id=all-figures><label class=more-figures for=all-figures>show "
              f"{len(folded)} more figures ({escape(', '.join(folded))})</label>") if folded else ""
    return f"<h2>Arms</h2>{toggle}<div class=wide><table id=arms>{head}{''.join(rows)}</table></div>"


def _classes(numeric: bool, folded: bool) -> str:
    names = " ".join(name for name, on in (("num", numeric), ("more", folded)) if on)
    return f' class="{names}"' if names else ""


def _cell(numeric: bool, cell: Cell, folded: bool = False) -> str:
    if not numeric:
        return f"<td{_classes(False, folded)} data-key={cell.key}>{escape(cell.text)}</td>"
    value = _raw(cell.value)
    # the reason as a tooltip where the number, or a bound of its interval ("[$0.80, ∞)"), is missing
    missing = cell.value is None or (cell.ci is not None and None in cell.ci)
    title = f" title=\"{escape(cell.reason)}\"" if missing and cell.reason else ""
    ci = f"<br><span class=ci>{escape(cell.ci_text)}</span>" if cell.ci else ""
    return (f"<td{_classes(True, folded)} data-key={cell.key} data-value=\"{value}\"{title}>{escape(cell.text)}"
            f"{ci}</td>")


# The estimates whose reasons the notes give (a skipped arm's reason says it all)
NOTE_KEYS = ("avg_at_k", "cost_per_resolved_attempt", "cost_per_resolved_task")


def _notes(document: dict[str, Any]) -> str:
    notes = []
    for arm in document["arms"]:
        if arm["status"] == "skipped":
            notes.append(f"{arm['arm']}: skipped: {arm['status_reason']}")
        for key in NOTE_KEYS if arm["status"] != "skipped" else ():
            if (arm.get(key) or {}).get("reason"):
                notes.append(f"{arm['arm']}: {figure_label(key)}: {arm[key]['reason']}")
        notes += flagged_notes(arm)
    items = "".join(f"<li>{escape(note)}</li>" for note in notes)
    return f"<ul class=note>{items}</ul>" if items else ""


def _breakeven_panel(document: dict[str, Any]) -> str:
    arms = document["arms"]
    pairs = [(s, h) for s, h in product(arms, arms) if s["kind"] == "self-hosted" and h["kind"] == "hosted"]
    if not pairs:
        return ("<h2>Break-even</h2><p class=note>No self-hosted and hosted arm pair in this run.</p>")
    parts = ["<h2>Break-even</h2>"]
    for s, h in pairs:
        result = breakeven(s, h)
        head = f"<h3>{escape(s['arm'])} (self-hosted) against {escape(h['arm'])} (hosted)</h3>"
        if result.get("gpu_usd_per_hour") is None and not result.get("grid"):
            parts.append(head + f"<p class=note>{escape(result.get('reason') or 'no number')}</p>")
            continue
        lines = [("GPU price at the measured utilization", result.get("gpu_usd_per_hour"), "$/GPU-hour"),
                 ("utilization needed at the lease's price", result.get("utilization"), "share"),
                 ("attempts per month for an always-on lease", result.get("monthly_attempts"), "attempts")]
        items = "".join(f"<li>{escape(label)}: " + ("n/a" if v is None else
                        f"{v:.1%}" if unit == "share" else f"{v:,.2f} {unit}") + "</li>" for label, v, unit in lines)
        grid = "".join(f"<tr><td>{g['gpu']} {g['level']}</td><td class=num>${g['gpu_usd_per_hour']:.2f}</td>"
                       f"<td class=num>{fmt_usd(g['self_hosted_cost_per_resolved_attempt'])}</td>"
                       f"<td class=num>{g['breakeven_utilization']:.1%}</td></tr>" for g in result["grid"])
        parts.append(head + f"<ul>{items}</ul><table class=grid><tr><th>GPU</th><th class=num>$/GPU-hour</th>"
                     "<th class=num>self-hosted cost per resolved attempt</th><th class=num>break-even utilization</th>"
                     "</tr>"
                     f"{grid}</table>")
    return "".join(parts)


def _episodes(conn, run_id: str, arm: str | None, offset: int) -> tuple[list[dict[str, Any]], int]:
    chosen = EpisodeFilter(arm=arm or None)
    return (list_episodes(conn, run_id, chosen, limit=EPISODES_PER_PAGE, offset=offset),
            count_episodes(conn, run_id, chosen))


def _episode_table(run_id: str, episodes: list[dict[str, Any]], total: int, arm: str | None, offset: int) -> str:
    base = f"/run/{escape(run_id)}"
    rows = "".join(
        f"<tr data-episode=\"{escape(e['episode_id'])}\"><td><a href=\"{base}/episode/{escape(e['episode_id'])}\">"
        f"{escape(e['task_id'])}</a></td>"
        f"<td>{escape(e['arm'])}</td><td class=num>{e['seed']}</td>"
        f"<td>{'yes' if e['resolved'] else 'no'}</td><td>{escape(str(e['exit_reason']))}</td>"
        f"<td class=num>{e['n_steps'] if e['n_steps'] is not None else ''}</td>"
        f"<td class=num>{_tokens(e):,}</td><td class=num data-key=cost_usd data-value=\"{_raw(e['cost_usd'])}\">"
        f"{fmt_usd(e['cost_usd'])}</td>"
        f"<td class=num>{(e['elapsed_sec'] or 0):.1f}</td></tr>" for e in episodes)
    arm_query = f"&arm={escape(arm)}" if arm else ""
    pager = ""
    if offset + EPISODES_PER_PAGE < total:
        pager = f"<p><a href=\"{base}?offset={offset + EPISODES_PER_PAGE}{arm_query}\">next {EPISODES_PER_PAGE}</a></p>"
    return (f"<h2>Episodes ({total} final{', arm ' + escape(arm) if arm else ''})</h2>"
            "<table id=episodes><tr><th>task</th><th>arm</th><th class=num>seed</th><th>resolved</th><th>exit</th>"
            "<th class=num>steps</th><th class=num>tokens</th><th class=num>token cost</th><th class=num>seconds</th>"
            f"</tr>{rows}</table>{pager}")


def _tokens(episode: dict[str, Any]) -> int:
    return (episode["prompt_tokens"] or 0) + (episode["completion_tokens"] or 0)


def _raw(value: float | None) -> str:
    """A number as `data-value` keeps it: exactly (repr), or empty for none."""
    return "" if value is None else repr(value)


def _episode(conn, run_id: str, episode_id: str) -> tuple[dict[str, Any] | None, dict[int, dict[str, Any]]]:
    row = find_episode(conn, run_id, episode_id)
    if row is None:
        return None, {}
    calls = fetch_rows(conn, "SELECT step, count(*) AS calls, sum(cost_usd) AS cost_usd, sum(prompt_tokens) AS prompt, "
                        "sum(completion_tokens) AS completion FROM model_calls WHERE episode_id = ? GROUP BY step",
                  [row["episode_id"]])
    return row, {c["step"]: c for c in calls}


def _trajectory(run_id: str, row: dict[str, Any], calls: dict[int, dict[str, Any]],
                trajectory: dict[str, Any] | None, reason: str | None) -> str:
    """The attempt's steps. The file is only as trustworthy as whoever wrote it: every field is read as
    optional and of any type, so an odd file renders partly instead of failing the page."""
    head = (f"<h1>{escape(row['task_id'])} · {escape(row['arm'])} · seed {row['seed']} · attempt "
            f"{row['attempt']}</h1><p class=note><a href=\"/run/{escape(run_id)}\">back to the run</a> · "
            f"resolved: {'yes' if row['resolved'] else 'no'} · exit: {escape(str(row['exit_reason']))} · "
            f"{counted(row['n_steps'] or 0, 'step')}</p>")
    if trajectory is None:
        return head + f"<p class=note>No trajectory shown: {escape(str(reason))}</p>"
    parts = [head]
    task = next((m for m in _list(trajectory.get("messages")) if _dict(m).get("role") == "user"), None)
    if task is not None:
        parts.append(f"<h2>Task</h2><pre>{escape(_text(task.get('content')))}</pre>")
    parts += [_step(_dict(step), calls) for step in _list(trajectory.get("steps"))]
    patch = trajectory.get("output_patch")
    if patch:
        parts.append(f"<h2>Patch</h2><pre>{escape(patch if isinstance(patch, str) else _text(patch))}</pre>")
    return "".join(parts)


def _step(step: dict[str, Any], calls: dict[int, dict[str, Any]]) -> str:
    number = step.get("step", 0)
    usage = _dict(step.get("usage"))
    call = calls.get(number, {}) if isinstance(number, int) else {}
    assistant = _dict(step.get("assistant"))
    functions = [_dict(_dict(c).get("function")) for c in _list(assistant.get("tool_calls"))]
    tools = "".join(f"<pre>→ {escape(_text(f.get('name')))} {escape(_text(f.get('arguments')))}</pre>"
                    for f in functions)
    observations = "".join(f"<pre>{escape(_text(o.get('content') if isinstance(o, dict) else o))}</pre>"
                           for o in _list(step.get("observations")))
    return (f"<div class=step><b>step {escape(_text(number))}</b> <span class=note>"
            f"{_count(usage.get('prompt_tokens')):,} prompt ({_count(usage.get('cached_tokens')):,} cached) + "
            f"{_count(usage.get('completion_tokens')):,} output tokens, {counted(call.get('calls', 0), 'call')}, cost "
            f"{fmt_usd(call.get('cost_usd'))}, {_count(step.get('latency_sec')):.1f} s</span>"
            + (f"<pre>{escape(_text(assistant.get('content')))}</pre>" if assistant.get("content") else "")
            + tools + (f"<div class=note>observations</div>{observations}" if observations else "") + "</div>")


def _dict(value: Any) -> dict[str, Any]:
    return value if isinstance(value, dict) else {}


def _list(value: Any) -> list[Any]:
    return value if isinstance(value, list) else []


def _count(value: Any) -> float:
    """A number from the file, or 0 for anything else (a string, null, NaN)."""
    if isinstance(value, bool) or not isinstance(value, int | float) or value != value:
        return 0
    return value


def _text(value: Any, limit: int = 4000) -> str:
    text = value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)
    return text if len(text) <= limit else text[:limit] + f" … ({len(text) - limit:,} more characters)"
