"""A run's report on disk: what `leafcost report RUN_ID` writes. Every figure comes from
`compare.summary.summarize` and `compare.breakeven.breakeven` (reports compute no statistic of their own); the
rest is rendering and plain exports of ledger rows.

    out_dir/
      report.html          self-contained: CSS and both charts inline (SVG), no script, no external URL
      summary.md           the arm table, the notes and the provenance lines in Markdown
      summary.json         exactly `compare.summary.dumps(document)`, i.e. `leafcost summary RUN --json`
      episodes.csv|.parquet  every episodes row of the run (retried attempts included), written by DuckDB
      calls.csv|.parquet     every model_calls row of the run
      predictions/<arm>.jsonl         every final (task, seed) attempt of a model arm, one JSON line each
      predictions/<arm>.seed<N>.jsonl the same, one file per seed N, when the arm has attempts of several seeds
      evidence/            a run whose spec has `claim:`: the evidence pack a vendor can check (reports.evidence)

Predictions layout: a line is `{"instance_id", "model_name_or_path": "<arm>:<model>", "model_patch", "seed"}`
with the patch read from the attempt's trajectory (`output_patch`). SWE-bench's harness keys predictions by
instance_id (one per instance: a second line for the same instance replaces the first), so with several seeds
`<arm>.jsonl` holds them all for our own tools and each `<arm>.seed<N>.jsonl` is what to give the harness, one
evaluation per seed. With one seed `<arm>.jsonl` is already that file, so no copy of it is written. A model arm
with no final attempt (skipped, or stopped before its first) gets no file, and the notes say why. The oracle arm
has no predictions (its patches are the tasks' own solutions). A trajectory file that is missing or unreadable
gives an empty patch, and the report's notes count such attempts per arm."""

from __future__ import annotations

import json
from contextlib import contextmanager
from dataclasses import dataclass, field
from importlib import metadata
from pathlib import Path
from typing import Any

from compare.arm_table import arm_cells, columns, counted, figure_label, flagged_notes
from compare.breakeven import breakeven
from compare.decision_record import headline, look_table, outcome
from compare.ledger import LedgerAccess, connect_read_only
from compare.plan_record import plan_headline, plan_table, run_plan
from compare.summary import dumps, summarize
from reports.charts import cost_breakdown_svg, cost_vs_resolve_svg, esc, fmt_pct, fmt_usd


class ReportError(RuntimeError):
    """A report file could not be written; the message names it."""


@dataclass
class Provenance:
    """Where the numbers came from: printed at the foot of the HTML and Markdown reports."""

    price_table: str
    price_revisions: list[str]  # as recorded on the run's priced calls
    price_sources: dict[str, str]  # arm → price_source
    sandbox_spec_hashes: list[str]
    leafcost_version: str  # this report's
    run_leafcost_version: str  # the one that ran (runs.leafcost_version)
    bootstrap: dict[str, Any]

    def lines(self) -> list[str]:
        sources = ", ".join(f"{arm}: {source}" for arm, source in self.price_sources.items()) or "no arms"
        return [f"price table: {self.price_table}; recorded on the calls: "
                f"{', '.join(self.price_revisions) or 'none (no call was priced per token)'}",
                f"price sources: {sources}",
                f"sandbox spec hash: {', '.join(self.sandbox_spec_hashes) or 'none recorded'}",
                f"leafcost version: {self.leafcost_version} (run recorded by {self.run_leafcost_version})",
                f"bootstrap: {self.bootstrap.get('resamples')} resamples over {self.bootstrap.get('unit')}s, "
                f"seed {self.bootstrap.get('seed')}"]


@dataclass
class Predictions:
    """What the predictions export wrote, and the attempts whose trajectory could not be read."""

    files: dict[str, Path] = field(default_factory=dict)
    missing: dict[str, int] = field(default_factory=dict)  # arm → attempts written with an empty patch
    absent: dict[str, str] = field(default_factory=dict)  # arm → why it has no predictions file


def write_report(db_path: Path | str, run_id: str, out_dir: Path | str, *,
                 access: LedgerAccess | None = None, strict: bool | None = None) -> dict[str, Path]:
    """Writes every file above for `run_id` of the ledger at `db_path` into `out_dir` (created if needed) and
    returns {path relative to out_dir: absolute path}. The ledger is read through `access` when given (it upgrades
    a ledger from an older leafcost once), else read-only as it is. Raises compare.ledger.LedgerError (no, busy or
    outdated ledger), compare.summary.SummaryError (unknown run) or ReportError (a file could not be written).
    `strict` counts flagged attempts as not resolved (None: as the run was started)."""
    db_path, out = Path(db_path), Path(out_dir).resolve()
    with _reading(db_path, access) as conn:  # one read-only connection for every figure and export
        document = summarize(conn, run_id, strict=strict)
        try:
            out.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise ReportError(f"{out}: cannot create the report directory: {exc}") from None
        written = _export_rows(conn, run_id, out)
        predictions = _write_predictions(conn, run_id, document, out, db_path)
        written.update(_write_evidence(conn, run_id, out, db_path, strict))
        provenance = _provenance(conn, run_id, document)
        plan = run_plan(conn, run_id, summary=document)
    written.update(predictions.files)
    panels = breakeven_panels(document)
    notes = notes_of(document, predictions.missing, predictions.absent)
    texts = {"summary.json": dumps(document),
             "summary.md": render_markdown(document, notes, provenance, panels, plan=plan),
             "report.html": render_html(document, notes, provenance, panels, plan=plan)}
    for name, text in texts.items():
        written[name] = _write_text(out / name, text)
    return dict(sorted(written.items()))


def _write_evidence(conn, run_id: str, out: Path, db_path: Path, strict: bool | None) -> dict[str, Path]:
    """The evidence pack of a claim run, keyed under evidence/; nothing for a run without `claim:`."""
    from reports.evidence import EvidenceError, write_evidence

    try:
        pack = write_evidence(conn, run_id, out / "evidence", db_path=db_path, strict=strict)
    except EvidenceError as exc:
        raise ReportError(str(exc)) from None
    return {f"evidence/{name}": path for name, path in pack.items()}


@contextmanager
def _reading(db_path: Path, access: LedgerAccess | None):
    if access is not None:
        with access.reading() as conn:
            yield conn
        return
    conn = connect_read_only(db_path)
    try:
        yield conn
    finally:
        conn.close()


# ---------------------------------------------------------------------------------------------------------
# Ledger rows, exported by DuckDB itself (CSV and Parquet without pandas or pyarrow)

_EXPORTS = {
    "episodes": "SELECT * FROM episodes WHERE run_id = ? ORDER BY arm, task_id, seed, attempt",
    "calls": "SELECT * FROM model_calls WHERE run_id = ? ORDER BY call_id",
}
_FORMATS = {"csv": "(FORMAT csv, HEADER)", "parquet": "(FORMAT parquet)"}


def _export_rows(conn, run_id: str, out: Path) -> dict[str, Path]:
    written = {}
    for name, query in _EXPORTS.items():
        for suffix, options in _FORMATS.items():
            path = out / f"{name}.{suffix}"
            literal = str(path).replace("'", "''")  # COPY takes the file name as a literal, not a parameter
            try:
                conn.execute(f"COPY ({query}) TO '{literal}' {options}", [run_id])
            except Exception as exc:  # duckdb.IOException and kin: name the file
                raise ReportError(f"{path}: cannot write: {exc}") from None
            written[path.name] = path
    return written


# ---------------------------------------------------------------------------------------------------------
# SWE-bench-style predictions


def _write_predictions(conn, run_id: str, document: dict[str, Any], out: Path, db_path: Path) -> Predictions:
    rows = conn.execute("SELECT arm, task_id, seed, trajectory_path FROM episodes WHERE run_id = ? AND final "
                        "ORDER BY arm, task_id, seed", [run_id]).fetchall()
    result = Predictions()
    folder = out / "predictions"
    for arm in document["arms"]:
        if arm["kind"] == "oracle":
            continue
        name = arm["arm"]
        lines: list[dict[str, Any]] = []
        for _, task_id, seed, trajectory in (r for r in rows if r[0] == name):
            patch = _patch(_trajectory_file(trajectory, db_path, run_id, name))
            if patch is None:
                result.missing[name] = result.missing.get(name, 0) + 1
            lines.append({"instance_id": task_id, "model_name_or_path": f"{name}:{arm['model']}",
                          "model_patch": patch or "", "seed": int(seed)})
        if not lines:  # an empty file would read as "predicted nothing", which the arm never did
            result.absent[name] = _why_no_predictions(arm)
            continue
        result.files[f"predictions/{name}.jsonl"] = _write_jsonl(folder / f"{name}.jsonl", lines)
        seeds = sorted({line["seed"] for line in lines})
        for seed in seeds if len(seeds) > 1 else ():  # one seed: the file above is already the per-seed one
            per_seed = [line for line in lines if line["seed"] == seed]
            key = f"predictions/{name}.seed{seed}.jsonl"
            result.files[key] = _write_jsonl(out / key, per_seed)
    return result


def _why_no_predictions(arm: dict[str, Any]) -> str:
    if arm.get("status") == "skipped":
        return "no predictions file: the arm was skipped and ran no attempt"
    return f"no predictions file: the arm ({arm.get('status')}) finished no attempt"


def _trajectory_file(recorded: str | None, db_path: Path, run_id: str, arm: str) -> Path | None:
    """The recorded path, else the same file name in the runner's layout next to the ledger (a ledger copied
    elsewhere with its trajectories)."""
    if not recorded:
        return None
    path = Path(recorded)
    if path.is_file():
        return path
    moved = db_path.resolve().parent / "trajectories" / run_id / arm / path.name
    return moved if moved.is_file() else None


def _patch(path: Path | None) -> str | None:
    """The attempt's output_patch; None when the trajectory is missing or unreadable."""
    if path is None:
        return None
    try:
        patch = json.loads(path.read_text(encoding="utf-8")).get("output_patch")
    except (OSError, ValueError, AttributeError):
        return None
    return patch if isinstance(patch, str) else ""


def _write_jsonl(path: Path, lines: list[dict[str, Any]]) -> Path:
    return _write_text(path, "".join(json.dumps(line, ensure_ascii=False) + "\n" for line in lines))


def _write_text(path: Path, text: str) -> Path:
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")
    except OSError as exc:
        raise ReportError(f"{path}: cannot write: {exc}") from None
    return path


# ---------------------------------------------------------------------------------------------------------
# What the report states beside the figures


def _provenance(conn, run_id: str, document: dict[str, Any]) -> Provenance:
    from compare.pricing import litellm_revision

    hashes = conn.execute("SELECT DISTINCT sandbox_spec_hash FROM episodes WHERE run_id = ? AND sandbox_spec_hash "
                          "IS NOT NULL ORDER BY 1", [run_id]).fetchall()
    revisions = conn.execute("SELECT DISTINCT price_revision FROM model_calls WHERE run_id = ? AND price_revision "
                             "IS NOT NULL ORDER BY 1", [run_id]).fetchall()
    ran_with = conn.execute("SELECT leafcost_version FROM runs WHERE run_id = ?", [run_id]).fetchone()
    return Provenance(price_table=litellm_revision(), price_revisions=[r[0] for r in revisions],
                      price_sources={a["arm"]: a["price_source"] for a in document["arms"]},
                      sandbox_spec_hashes=[h[0] for h in hashes], leafcost_version=_version(),
                      run_leafcost_version=ran_with[0] if ran_with else "unknown",
                      bootstrap=document.get("bootstrap") or {})


def _version() -> str:
    try:
        return metadata.version("leafcost")
    except metadata.PackageNotFoundError:
        return "unknown (not installed)"


def breakeven_panels(document: dict[str, Any]) -> list[dict[str, Any]]:
    """compare.breakeven for every self-hosted × hosted pair of arms, in the document's arm order."""
    arms = document["arms"]
    return [breakeven(s, h) for s in arms if s["kind"] == "self-hosted" for h in arms if h["kind"] == "hosted"]


def notes_of(document: dict[str, Any], missing_trajectories: dict[str, int] | None = None,
             no_predictions: dict[str, str] | None = None) -> list[str]:
    """Every `reason` (and `*_reason`) of the document, one line per arm and text naming the figures it
    explains, then what the report itself could not do or write."""
    notes: list[str] = []
    if document.get("run_status") != "finished":
        notes.append(f"the run is {document.get('run_status')}: these figures cover the attempts finished so far")
    top = {k: v for k, v in document.items() if k not in ("arms", "decision")}  # the decision has its own section
    for scope, entry in [("run", top)] + [(a["arm"], a) for a in document["arms"]]:
        grouped: dict[str, list[str]] = {}
        for where, text in _reasons(entry):
            grouped.setdefault(text, []).append(where)
        notes += [f"{scope}: {', '.join(wheres)}: {text}" for text, wheres in grouped.items()]
    for arm in document["arms"]:
        notes += flagged_notes(arm)
    for arm, count in (missing_trajectories or {}).items():
        notes.append(f"{arm}: {counted(count, 'final attempt')} {'has' if count == 1 else 'have'} no readable "
                     "trajectory file: their predictions carry an empty patch")
    notes += [f"{arm}: {why}" for arm, why in (no_predictions or {}).items()]
    return notes


def _reasons(value: Any, path: str = "") -> list[tuple[str, str]]:
    found = []
    if isinstance(value, dict):
        for key, item in value.items():
            where = f"{path}.{key}" if path else key
            if (key == "reason" or key.endswith("_reason")) and isinstance(item, str) and item:
                label = path if key == "reason" else f"{path}.{key.removesuffix('_reason')}".strip(".")
                found.append((figure_label(label), item))
            else:
                found += _reasons(item, where)
    elif isinstance(value, list):
        for item in value:
            found += _reasons(item, path)
    return found


# ---------------------------------------------------------------------------------------------------------
# HTML

_CSS = """
body{font-family:system-ui,-apple-system,'Segoe UI',sans-serif;margin:2rem auto;max-width:1180px;padding:0 1rem;
color:#222;line-height:1.4}
h1{margin-bottom:.2rem}h2{margin-top:2rem;border-bottom:1px solid #ddd;padding-bottom:.2rem}
.meta{color:#555}code{background:#f3f3f3;padding:0 .25rem;border-radius:3px}
table{border-collapse:collapse;font-size:.85rem;margin:.5rem 0}
th,td{border:1px solid #ddd;padding:.3rem .45rem;text-align:left;vertical-align:top}
th{background:#f5f5f5}td.num{text-align:right;white-space:nowrap}
.scroll{overflow-x:auto}svg{max-width:100%;height:auto}
.breakeven{border:1px solid #ddd;border-radius:6px;padding:.6rem 1rem;margin:.8rem 0}
.breakeven dl{display:grid;grid-template-columns:max-content auto;gap:.15rem 1rem;margin:.4rem 0}
.breakeven dt{color:#555}.reason{color:#8a4b08}.verdict{font-weight:600}
footer{margin-top:2.5rem;border-top:1px solid #ddd;font-size:.8rem;color:#555}
"""


def render_html(document: dict[str, Any], notes: list[str], provenance: Provenance,
                panels: list[dict[str, Any]], *, plan: dict[str, Any] | None = None) -> str:
    run_id = esc(document["run_id"])
    scenario = f" · scenario <b>{esc(document['scenario'])}</b>" if document.get("scenario") else ""
    parts = [
        "<!doctype html>", '<html lang="en">', "<head>", '<meta charset="utf-8">',
        '<meta name="viewport" content="width=device-width, initial-scale=1">',
        f"<title>leafcost report {run_id}</title>", f"<style>{_CSS}</style>", "</head>", "<body>",
        '<header><h1>leafcost report</h1>',
        f'<p class="meta">run <code id="run-id">{run_id}</code> · status <b id="run-status">'
        f'{esc(document["run_status"])}</b> · {counted(len(document.get("task_order") or []), "task")} × '
        f'{counted(document.get("seeds") or 0, "seed")}{scenario}</p></header>',
        _html_decision(document.get("decision")), _html_plan(plan),
        '<section id="arms"><h2>Arms</h2><div class="scroll">', _html_table(document["arms"]), "</div></section>",
        '<section id="charts"><h2>Cost per resolved attempt against resolve rate</h2>',
        cost_vs_resolve_svg(document, standalone=False),
        "<h2>Where the dollars went</h2>", cost_breakdown_svg(document, standalone=False), "</section>",
        '<section id="breakeven"><h2>Break-even: self-hosted against hosted</h2>',
        "".join(_html_panel(p) for p in panels) or "<p>No self-hosted and hosted pair of arms in this run.</p>",
        "</section>",
        '<section id="notes"><h2>Notes</h2><ul>', "".join(f"<li>{esc(n)}</li>" for n in notes) or "<li>none</li>",
        "</ul></section>",
        '<footer id="provenance"><h2>Provenance</h2><ul>',
        "".join(f"<li>{esc(line)}</li>" for line in provenance.lines()), "</ul></footer>",
        "</body>", "</html>",
    ]
    return "\n".join(parts) + "\n"


def _html_decision(decision: dict[str, Any] | None) -> str:
    """The "Decision" section: the verdict line, what the stop left and a row per look; nothing without one."""
    if not decision:
        return ""
    headers, rows = look_table(decision)
    classes = ['' if header == "action" else ' class="num"' for header in headers]
    head = "".join(f'<th scope="col">{esc(header)}</th>' for header in headers)
    body = "".join("<tr>" + "".join(f"<td{klass}>{esc(text)}</td>" for text, klass in zip(row, classes, strict=True))
                   + "</tr>" for row in rows)
    left = outcome(decision)
    return (f'<section id="decision" data-status="{esc(decision["status"])}"><h2>Decision</h2>'
            f'<p class="verdict">{esc(headline(decision))}</p>'
            + (f'<p class="outcome">{esc(left)}</p>' if left else "")
            + (f'<div class="scroll"><table id="looks"><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>'
               "</div>" if rows else "")
            + "</section>")


def _html_plan(plan: dict[str, Any] | None) -> str:
    """The "Plan" section: what was planned before the run against what it did; nothing without a plan."""
    if not plan:
        return ""
    headers, rows = plan_table(plan)
    classes = [' class="num"' if header in ("planned", "actual") else "" for header in headers]
    head = "".join(f'<th scope="col">{esc(header)}</th>' for header in headers)
    body = "".join("<tr>" + "".join(f"<td{klass}>{esc(text)}</td>" for text, klass in zip(row, classes, strict=True))
                   + "</tr>" for row in rows)
    return (f'<section id="plan"><h2>Plan</h2><p class="plan-line">{esc(plan_headline(plan))}</p>'
            f'<div class="scroll"><table id="plan-table"><thead><tr>{head}</tr></thead><tbody>{body}</tbody>'
            "</table></div></section>")


def _html_table(arms: list[dict[str, Any]]) -> str:
    if not arms:
        return "<p>This run has no arms.</p>"
    headers = "".join(f'<th scope="col">{esc(column.label)}</th>' for column in columns())
    rows = []
    for arm in arms:
        cells = []
        for column, c in zip(columns(), arm_cells(arm), strict=True):
            ci = f' data-ci95="{esc(json.dumps(c.ci))}"' if c.ci else ""
            klass = ' class="num"' if column.numeric else ""
            cells.append(f'<td data-key="{c.key}" data-value="{esc(json.dumps(c.value))}"{ci}{klass}>'
                         f"{esc(c.full_text)}</td>")
        rows.append(f'<tr class="arm-row" data-arm="{esc(arm["arm"])}">{"".join(cells)}</tr>')
    return (f'<table class="arms" id="arm-table"><thead><tr>{headers}</tr></thead><tbody>{"".join(rows)}'
            "</tbody></table>")


def _panel_figures(p: dict[str, Any]) -> list[tuple[str, str, Any, str | None]]:
    """(key, label, value, text) of a break-even result; text None when the value is missing (its reason
    is shown instead)."""
    def usd(v: Any) -> str | None:
        return None if v is None else fmt_usd(v)

    def rate(v: Any) -> str | None:
        return None if v is None else fmt_pct(v)

    def count(v: Any) -> str | None:
        return None if v is None else f"{v:,.0f}"

    return [
        ("hosted_cost_per_resolved_attempt", f"{p['hosted']}: cost per resolved attempt",
         p.get("hosted_cost_per_resolved_attempt"), usd(p.get("hosted_cost_per_resolved_attempt"))),
        ("self_hosted_cost_per_resolved_attempt",
         f"{p['self_hosted']}: cost per resolved attempt at {fmt_usd(p.get('at_gpu_usd_per_hour'))}/GPU-hour, "
         f"{fmt_pct(p.get('at_utilization'))} utilization",
         p.get("self_hosted_cost_per_resolved_attempt"), usd(p.get("self_hosted_cost_per_resolved_attempt"))),
        ("self_hosted_resolve_rate", f"{p['self_hosted']}: resolved per attempt", p.get("self_hosted_resolve_rate"),
         rate(p.get("self_hosted_resolve_rate"))),
        ("busy_seconds_per_attempt", "busy GPU-seconds per attempt", p.get("busy_seconds_per_attempt"),
         None if p.get("busy_seconds_per_attempt") is None else f"{p['busy_seconds_per_attempt']:.3g} s"),
        ("gpu_usd_per_hour", "break-even GPU price at the measured utilization", p.get("gpu_usd_per_hour"),
         None if p.get("gpu_usd_per_hour") is None else f"{fmt_usd(p['gpu_usd_per_hour'])}/GPU-hour"),
        ("utilization", "utilization needed at the lease's price", p.get("utilization"), rate(p.get("utilization"))),
        ("monthly_attempts", "attempts a month at which an always-on lease breaks even",
         p.get("monthly_attempts"), count(p.get("monthly_attempts"))),
        ("monthly_capacity_attempts", "attempts one always-on lease can serve a month",
         p.get("monthly_capacity_attempts"), count(p.get("monthly_capacity_attempts"))),
    ]


def _panel_reasons(p: dict[str, Any]) -> list[str]:
    return [p[k] for k in ("reason", "utilization_reason", "monthly_attempts_reason") if p.get(k)]


def _html_panel(p: dict[str, Any]) -> str:
    title = f"{p['self_hosted']} (self-hosted) against {p['hosted']} (hosted)"
    figures = "".join(f'<dt>{esc(label)}</dt><dd data-key="{key}" data-value="{esc(json.dumps(value))}">'
                      f"{esc(text)}</dd>"
                      for key, label, value, text in _panel_figures(p) if text is not None)
    reasons = "".join(f'<p class="reason">{esc(r)}</p>' for r in _panel_reasons(p))
    grid = ""
    if p.get("grid"):
        rows = "".join(
            f"<tr><td>{esc(g['gpu'])}</td><td>{esc(g['level'])}</td><td class=\"num\">"
            f"{esc(fmt_usd(g['gpu_usd_per_hour']))}</td><td class=\"num\">"
            f"{esc(fmt_usd(g['self_hosted_cost_per_resolved_attempt']))}</td><td class=\"num\">"
            f"{esc(fmt_pct(g['breakeven_utilization']))}</td></tr>" for g in p["grid"])
        grid = ("<table class=\"grid\"><thead><tr><th>GPU</th><th>price level</th><th>$/GPU-hour</th>"
                f"<th>{esc(p['self_hosted'])} per resolved attempt</th><th>break-even utilization</th></tr></thead>"
                f"<tbody>{rows}</tbody></table>")
    return (f'<div class="breakeven" data-self-hosted="{esc(p["self_hosted"])}" data-hosted="{esc(p["hosted"])}">'
            f"<h3>{esc(title)}</h3>{reasons}<dl>{figures}</dl>{grid}</div>")


# ---------------------------------------------------------------------------------------------------------
# Markdown


def render_markdown(document: dict[str, Any], notes: list[str], provenance: Provenance,
                    panels: list[dict[str, Any]], *, plan: dict[str, Any] | None = None) -> str:
    lines = [f"# leafcost report {_md(document['run_id'])}", "",
             f"Run status: **{_md(document['run_status'])}**"
             + (f", scenario **{_md(document['scenario'])}**" if document.get("scenario") else ""), ""]
    lines += _markdown_decision(document.get("decision")) + _markdown_plan(plan)
    if document["arms"]:
        lines.append("| " + " | ".join(_md(column.label) for column in columns()) + " |")
        lines.append("|" + "|".join("---:" if column.numeric else "---" for column in columns()) + "|")
        lines += ["| " + " | ".join(_md(c.full_text) for c in arm_cells(arm)) + " |" for arm in document["arms"]]
    else:
        lines.append("This run has no arms.")
    if panels:
        lines += ["", "## Break-even", ""]
        for p in panels:
            figures = "; ".join(f"{label}: {text}" for _, label, _, text in _panel_figures(p) if text is not None)
            reasons = " ".join(_panel_reasons(p))
            lines.append(f"- {_md(p['self_hosted'])} against {_md(p['hosted'])}: "
                         + _md("; ".join(x for x in (figures, reasons) if x)))
    lines += ["", "## Notes", ""] + ([f"- {_md(n)}" for n in notes] or ["- none"])
    lines += ["", "## Provenance", ""] + [f"- {_md(line)}" for line in provenance.lines()]
    return "\n".join(lines) + "\n"


def _markdown_decision(decision: dict[str, Any] | None) -> list[str]:
    """The "Decision" section's lines (none without a decision question)."""
    if not decision:
        return []
    headers, rows = look_table(decision)
    left = outcome(decision)
    lines = ["## Decision", "", f"**{_md(headline(decision))}**", ""] + ([_md(left), ""] if left else [])
    if rows:
        lines.append("| " + " | ".join(_md(header) for header in headers) + " |")
        lines.append("|" + "|".join("---" if header == "action" else "---:" for header in headers) + "|")
        lines += ["| " + " | ".join(_md(text) for text in row) + " |" for row in rows]
        lines.append("")
    return lines


def _markdown_plan(plan: dict[str, Any] | None) -> list[str]:
    """The "Plan" section's lines (none for a run without a recorded plan)."""
    if not plan:
        return []
    headers, rows = plan_table(plan)
    lines = ["## Plan", "", _md(plan_headline(plan)), "",
             "| " + " | ".join(_md(header) for header in headers) + " |",
             "|" + "|".join("---:" if header in ("planned", "actual") else "---" for header in headers) + "|"]
    return lines + ["| " + " | ".join(_md(text) for text in row) + " |" for row in rows] + [""]


def _md(text: Any) -> str:
    """Safe inside a Markdown table cell or list item: pipes escaped, line breaks flattened."""
    return str(text).replace("\\", "\\\\").replace("|", "\\|").replace("\r", " ").replace("\n", " ")
