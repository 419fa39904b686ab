"""The evidence pack of a claim run: what `leafcost report RUN_ID` writes into OUT/evidence/ when the run's spec has
`claim:`, one directory a vendor can check without leafcost's ledger. The verdict is compare.claim's ClaimDocument
(reports compute no statistic of their own); everything else is a copy of what the run recorded.

    evidence/
      README.md                  what each file is and how to check it
      verdict.json               the ClaimDocument (`leafcost claim RUN_ID --json`)
      verdict.md, verdict.html   the verdict page (the HTML self-contained)
      spec.yaml, spec.sha256     the run spec as stored (runs.spec_json) and the run's spec hash (runs.spec_sha256)
      task_order.json            the ordered task list every arm saw (runs.task_ids)
      task_dates.json            each task's creation time and each model arm's release day: which tasks are claim tasks
      images.lock.json           the spec's image lock (sandbox.images), copied when it can still be read
      leaf_prompt/<arm>/         system_prompt.txt, tools.json (the bytes sent), source.json (where from, sha256s)
      sglang/<arm>/              launch.txt, server_info.json, model_info.json (a self-hosted SGLang arm)
      predictions/<arm>.seed<N>.jsonl   SWE-bench's predictions format + resolved, exit_reason, flags, per line
      swebench/<arm>/seed<N>/<instance_id>/report.json   SWE-bench's report of that prediction, as graded
      ledger.duckdb              the run's rows of every ledger table that has run_id (and the schema version)
      MANIFEST.sha256            sha256 of every other file (`sha256sum -c MANIFEST.sha256`)

Paths are built only from names leafcost controls: arm names (ARM_NAME) and task ids passed through safe_name,
which escapes anything but letters, digits, `_`, `-` and inner dots. No secret of the spec's arms may appear: a
file holding one stops the pack (EvidenceError), since such a value must never have been recorded."""

from __future__ import annotations

import hashlib
import json
import shutil
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import quote

import yaml

from adapters.scrubbing import arm_secrets, redact_values
from adapters.sglang import launch_command_text
from compare.claim_check import claim_task_mask
from compare.freshness import RULE, task_dates
from compare.leaf_prompt import LeafCheckoutError, read_leaf_checkout
from compare.spec import RunSpec
from reports.charts import esc

MANIFEST = "MANIFEST.sha256"
MIN_SCANNED_SECRET = 8  # a shorter configured value would match ordinary text; it is not searched for
MAX_NAME_BYTES = 200  # below every file system's 255-byte name limit, with room for a suffix
# SWE-bench's report of one prediction always carries this key (get_eval_report); a Harbor reward.json does not.
SWEBENCH_REPORT_KEY = "patch_successfully_applied"


class EvidenceError(RuntimeError):
    """The evidence pack could not be written; the message names the file."""


def write_evidence(conn, run_id: str, out: Path, *, db_path: Path, strict: bool | None = None) -> dict[str, Path]:
    """Writes the pack of `run_id` into `out` (replacing a pack there) and returns {path relative to out: path};
    {} when the run's spec has no claim. `conn` reads the ledger at `db_path` (trajectories recorded elsewhere are
    looked for next to it); `strict` as compare.claim.claim_document takes it (None: as the run was started)."""
    from compare.claim import claim_document  # numpy and the bootstrap: loaded only for a claim run's report

    document = claim_document(conn, run_id, strict=strict)
    if document is None:
        return {}
    run = _run_row(conn, run_id)
    spec = RunSpec.model_validate_json(run["spec_json"])
    strict_used = document.strict_grading  # the predictions' `resolved` is what the verdict counted
    parent = out.parent
    try:
        parent.mkdir(parents=True, exist_ok=True)
        staging = Path(tempfile.mkdtemp(prefix=".evidence-", dir=parent))
    except OSError as exc:
        raise EvidenceError(f"{out}: cannot create the evidence directory: {exc}") from None
    try:
        pack = _Pack(staging)
        _write_files(pack, conn, run_id, run, spec, document, db_path, strict_used)
        _refuse_secrets(pack, spec)
        pack.write_manifest()
        _replace(staging, out)
    except BaseException:
        shutil.rmtree(staging, ignore_errors=True)
        raise
    return {name: out / name for name in sorted(pack.files)}


def check_manifest(pack_dir: Path | str) -> list[str]:
    """What is wrong with a pack's files against its MANIFEST.sha256, one line each: a file changed, missing, or
    not listed. [] when every file is as listed (what `sha256sum -c` checks, plus files added since)."""
    root = Path(pack_dir)
    listed: dict[str, str] = {}
    for line in (root / MANIFEST).read_text(encoding="utf-8").splitlines():
        digest, _, name = line.partition("  ")
        listed[name] = digest
    problems = []
    for name, digest in sorted(listed.items()):
        path = root / name
        if not path.is_file():
            problems.append(f"{name}: listed in {MANIFEST} but missing")
        elif _sha256_file(path) != digest:
            problems.append(f"{name}: its sha256 differs from {MANIFEST}'s")
    present = {p.relative_to(root).as_posix() for p in root.rglob("*") if p.is_file()} - {MANIFEST}
    problems += [f"{name}: not listed in {MANIFEST}" for name in sorted(present - set(listed))]
    return problems


def safe_name(text: str) -> str:
    """`text` as one path component: letters, digits, `_`, `-` and dots kept (not a leading dot), every other
    byte %-escaped (`/` is %2F, so `..` and `a/b` cannot leave the directory); a name too long for a file
    system is cut and ends with its sha256's first 16 digits. Distinct texts give distinct names."""
    name = quote(text, safe="").replace("~", "%7E")
    if name.startswith("."):
        name = "%2E" + name[1:]
    if not name:
        name = "%00empty"
    if len(name.encode()) > MAX_NAME_BYTES:
        name = f"{name[:MAX_NAME_BYTES - 17]}~{hashlib.sha256(text.encode()).hexdigest()[:16]}"
    return name


# --------------------------------------------------------------------------------------------------------------
# Writing the files


@dataclass
class _Pack:
    """The staging directory and what has been written into it (relative POSIX path → absolute path)."""

    root: Path
    files: dict[str, Path] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)  # what the pack could not hold, for the README

    def write(self, parts: tuple[str, ...], data: bytes | str) -> Path:
        relative = "/".join(parts)
        path = self.root.joinpath(*parts)
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_bytes(data.encode("utf-8") if isinstance(data, str) else data)
        except OSError as exc:
            raise EvidenceError(f"{path}: cannot write: {exc}") from None
        self.files[relative] = path
        return path

    def write_json(self, parts: tuple[str, ...], value: Any) -> Path:
        return self.write(parts, json.dumps(value, indent=2, ensure_ascii=False) + "\n")

    def write_manifest(self) -> None:
        lines = [f"{_sha256_file(path)}  {name}\n" for name, path in sorted(self.files.items())]
        self.write((MANIFEST,), "".join(lines))


def _write_files(pack: _Pack, conn, run_id: str, run: dict[str, Any], spec: RunSpec, document: Any,
                 db_path: Path, strict: bool) -> None:
    arms = _arm_rows(conn, run_id)
    task_ids = json.loads(run["task_ids"])
    verdict = json.loads(document.model_dump_json())
    pack.write(("verdict.json",), document.model_dump_json(indent=2) + "\n")
    pack.write(("spec.yaml",), yaml.safe_dump(json.loads(run["spec_json"]), sort_keys=False, allow_unicode=True))
    pack.write(("spec.sha256",), f"{run['spec_sha256']}\n")
    pack.write_json(("task_order.json",), task_ids)
    pack.write_json(("task_dates.json",), _task_dates(conn, run_id, task_ids, spec))
    _write_images_lock(pack, spec)
    model_arms = [arm for arm in spec.arms if arm.kind != "oracle"]
    for arm in model_arms:
        _write_leaf_prompt(pack, arm, arms.get(arm.name) or {})
    for arm in model_arms:
        if arm.adapter == "sglang":
            _write_sglang(pack, arm, arms.get(arm.name) or {}, spec)
    _write_predictions(pack, conn, run_id, task_ids, model_arms, arms, db_path, strict)
    _write_ledger_extract(pack, conn, run_id)
    pack.write(("verdict.md",), render_verdict_markdown(verdict))
    pack.write(("verdict.html",), render_verdict_html(verdict))
    pack.write(("README.md",), _readme(verdict, spec, strict, pack.notes))


def _run_row(conn, run_id: str) -> dict[str, Any]:
    cursor = conn.execute("SELECT spec_json, spec_sha256, task_ids FROM runs WHERE run_id = ?", [run_id])
    row = cursor.fetchone()
    if row is None:
        raise EvidenceError(f"run {run_id}: not in the ledger")
    return dict(zip([d[0] for d in cursor.description], row, strict=True))


def _arm_rows(conn, run_id: str) -> dict[str, dict[str, Any]]:
    cursor = conn.execute("SELECT arm, adapter, model, config, server_info, model_info FROM arms WHERE run_id = ?",
                          [run_id])
    names = [d[0] for d in cursor.description]
    rows = [dict(zip(names, row, strict=True)) for row in cursor.fetchall()]
    for row in rows:
        for key in ("config", "server_info", "model_info"):
            row[key] = json.loads(row[key]) if isinstance(row[key], str) else row[key]
    return {row["arm"]: row for row in rows}


def _task_dates(conn, run_id: str, task_ids: list[str], spec: RunSpec) -> dict[str, Any]:
    """Each task's creation time, each model arm's release day, and the claim arm's claim tasks by that rule."""
    dates = task_dates(conn, run_id)
    claim_arm = next(arm for arm in spec.arms if spec.claim is not None and arm.name == spec.claim.arm)
    mask = claim_task_mask(task_ids, dates, claim_arm.released)
    return {"rule": RULE + "; undated tasks are claim tasks",
            "released": {arm.name: arm.released.isoformat() if arm.released else None
                         for arm in spec.arms if arm.kind != "oracle"},
            "created": {task: dates[task].isoformat() if task in dates else None for task in task_ids},
            "claim_arm": claim_arm.name,
            "claim_tasks": [task for task, claimed in zip(task_ids, mask, strict=True) if claimed]}


def _write_images_lock(pack: _Pack, spec: RunSpec) -> None:
    lock = spec.sandbox.images
    if lock is None:
        pack.notes.append("images.lock.json: not written: the spec locked no images (sandbox.images is unset; "
                          "the episodes' image digests are in the ledger's sandbox spec hashes)")
        return
    try:
        data = Path(lock).expanduser().read_bytes()
    except OSError as exc:
        pack.notes.append(f"images.lock.json: not written: the spec's lock {lock} is gone or unreadable now "
                          f"({exc.strerror or exc})")
        return
    pack.write(("images.lock.json",), data)
    pack.notes.append(f"images.lock.json: copied at report time from {lock}")


def _write_leaf_prompt(pack: _Pack, arm: Any, row: dict[str, Any]) -> None:
    """The prompt and tools the arm sends, read again now, beside the sha256s the run recorded."""
    from compare.episode import LEAFCOST_PROMPT

    folder = ("leaf_prompt", safe_name(arm.name))
    recorded = {key: (row.get("config") or {}).get(key)
                for key in ("prompt_source", "leaf_checkout", "leaf_commit", "prompt_sha256", "tools_sha256")}
    source: dict[str, Any] = {"arm": arm.name, "leaf_checkout": arm.leaf_checkout, "recorded_by_the_run": recorded}
    try:
        prompt = read_leaf_checkout(arm.leaf_checkout) if arm.leaf_checkout else LEAFCOST_PROMPT
    except LeafCheckoutError as exc:
        source.update({"source": "leaf-checkout", "error": str(exc), "matches_run": None})
        pack.write_json((*folder, "source.json"), source)
        pack.notes.append(f"leaf_prompt/{folder[1]}: the checkout cannot be read now: only the recorded sha256s")
        return
    pack.write((*folder, "system_prompt.txt"), prompt.system_prompt)
    # compact, keys in the order sent: the file's sha256 is tools_sha256
    pack.write((*folder, "tools.json"), json.dumps(prompt.tools, separators=(",", ":"), ensure_ascii=False))
    matches = (recorded["prompt_sha256"] == prompt.prompt_sha256 and recorded["tools_sha256"] == prompt.tools_sha256)
    source.update({"source": prompt.source, "leaf_commit": prompt.leaf_commit, "prompt_sha256": prompt.prompt_sha256,
                   "tools_sha256": prompt.tools_sha256, "matches_run": matches, "error": None})
    pack.write_json((*folder, "source.json"), source)
    if not matches:
        pack.notes.append(f"leaf_prompt/{folder[1]}: the prompt read now differs from the one the run recorded "
                          "(source.json has both sha256s)")


def _write_sglang(pack: _Pack, arm: Any, row: dict[str, Any], spec: RunSpec) -> None:
    """The launch leafcost recommends for this model, and what the server said about itself at the arm's start."""
    secrets = arm_secrets(arm)
    server = redact_values(row.get("server_info"), secrets) if row.get("server_info") is not None else None
    model = redact_values(row.get("model_info"), secrets) if row.get("model_info") is not None else None
    folder = ("sglang", safe_name(arm.name))
    pack.write((*folder, "launch.txt"), _launch_text(server or {}, arm, spec))
    pack.write_json((*folder, "server_info.json"), server)
    pack.write_json((*folder, "model_info.json"), model)
    if server is None:
        pack.notes.append(f"sglang/{folder[1]}: the server gave no /get_server_info (server_info.json is null)")


def _launch_text(server: dict[str, Any], arm: Any, spec: RunSpec) -> str:
    def whole(key: str, default: int) -> int:
        value = server.get(key)
        return value if isinstance(value, int) and not isinstance(value, bool) and value > 0 else default

    model_path = server.get("model_path") if isinstance(server.get("model_path"), str) else arm.model
    context = whole("context_length", spec.budgets.max_context_tokens or 131072)
    line = launch_command_text(model_path=model_path, context_length=context, tp=whole("tp_size", 1),
                               port=whole("port", 30000))
    return ("# The SGLang launch leafcost recommends for this model (adapters.sglang.launch_command_text), with the\n"
            "# model path, context length, tensor parallelism and port the server reported; what it actually ran\n"
            "# with is server_info.json.\n" + line + "\n")


def _write_predictions(pack: _Pack, conn, run_id: str, task_ids: list[str], model_arms: list[Any],
                       arms: dict[str, dict[str, Any]], db_path: Path, strict: bool) -> None:
    """One predictions file per model arm and seed, lines in the run's task order, and SWE-bench's report of each
    graded prediction."""
    position = {task: index for index, task in enumerate(task_ids)}
    rows = sorted(conn.execute("SELECT arm, task_id, seed, resolved, flagged, exit_reason, infra_error, "
                               "harness_error, trajectory_path FROM episodes WHERE run_id = ? AND final",
                               [run_id]).fetchall(),
                  key=lambda row: (row[0], row[2], position.get(row[1], len(position)), row[1]))
    unreadable: dict[str, int] = {}
    for arm in model_arms:
        model = (arms.get(arm.name) or {}).get("model") or arm.model
        by_seed: dict[int, list[str]] = {}
        for _, task_id, seed, resolved, flagged, exit_reason, infra, harness, trajectory in \
                (r for r in rows if r[0] == arm.name):
            document = _trajectory(trajectory, db_path, run_id, arm.name)
            if document is None:
                unreadable[arm.name] = unreadable.get(arm.name, 0) + 1
            patch = (document or {}).get("output_patch")
            line = {"instance_id": task_id, "model_name_or_path": f"{arm.name}:{model}",
                    "model_patch": patch if isinstance(patch, str) else "", "seed": int(seed),
                    "resolved": bool(resolved) and not (strict and bool(flagged)), "exit_reason": exit_reason,
                    "flagged": bool(flagged), "infra_error": bool(infra), "harness_error": bool(harness)}
            by_seed.setdefault(int(seed), []).append(json.dumps(line, ensure_ascii=False) + "\n")
            _write_swebench_report(pack, arm.name, int(seed), task_id, (document or {}).get("rewards"))
        for seed, lines in sorted(by_seed.items()):
            pack.write(("predictions", f"{safe_name(arm.name)}.seed{seed}.jsonl"), "".join(lines))
        if not by_seed:  # an empty file would read as "predicted nothing", which the arm never did
            pack.notes.append(f"predictions/{safe_name(arm.name)}: no file: the arm finished no attempt")
    pack.notes += [f"predictions/{arm}: {count} final attempt(s) have no readable trajectory: their model_patch is "
                   "empty and they have no report.json" for arm, count in unreadable.items()]


def _write_swebench_report(pack: _Pack, arm: str, seed: int, task_id: str, rewards: Any) -> None:
    if isinstance(rewards, dict) and SWEBENCH_REPORT_KEY in rewards:
        # SWE-bench's own report.json is keyed by instance id, as its run_evaluation writes it
        pack.write_json(("swebench", safe_name(arm), f"seed{seed}", safe_name(task_id), "report.json"),
                        {task_id: rewards})


def _trajectory(recorded: str | None, db_path: Path, run_id: str, arm: str) -> dict[str, Any] | None:
    """The attempt's trajectory document: at the recorded path, else the same file name in the runner's layout next
    to the ledger (a ledger copied elsewhere with its trajectories); None when missing or unreadable."""
    if not recorded:
        return None
    path = Path(recorded)
    if not path.is_file():
        path = db_path.resolve().parent / "trajectories" / run_id / arm / path.name
    try:
        document = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    return document if isinstance(document, dict) else None


def _write_ledger_extract(pack: _Pack, conn, run_id: str) -> None:
    """ledger.duckdb: every ledger table that has a run_id column, only this run's rows (and `meta`, which says
    the schema version), copied by DuckDB itself."""
    path = pack.root / "ledger.duckdb"
    tables = [row[0] for row in conn.execute(
        "SELECT t.table_name FROM duckdb_tables() t JOIN duckdb_columns() c ON c.database_name = t.database_name "
        "AND c.schema_name = t.schema_name AND c.table_name = t.table_name WHERE t.database_name = "
        "current_database() AND t.schema_name = 'main' AND c.column_name = 'run_id' ORDER BY 1").fetchall()]
    literal = str(path).replace("'", "''")  # ATTACH takes the file name as a literal, not a parameter
    try:
        conn.execute(f"ATTACH '{literal}' AS evidence_pack (READ_WRITE)")
        try:
            conn.execute("CREATE TABLE evidence_pack.meta AS SELECT * FROM meta")
            for table in tables:
                conn.execute(f'CREATE TABLE evidence_pack."{table}" AS SELECT * FROM "{table}" WHERE run_id = ?',
                             [run_id])
        finally:
            conn.execute("DETACH evidence_pack")
    except Exception as exc:  # duckdb.IOException and kin: name the file
        raise EvidenceError(f"{path}: cannot write the ledger extract: {exc}") from None
    pack.files["ledger.duckdb"] = path


def _refuse_secrets(pack: _Pack, spec: RunSpec) -> None:
    """Stops the pack when a file holds a configured secret of the spec's arms (in any spelling JSON gives it)."""
    secrets = {value for arm in spec.arms for value in arm_secrets(arm) if len(value) >= MIN_SCANNED_SECRET}
    if not secrets:
        return
    needles = {variant.encode() for secret in secrets for variant in (secret, json.dumps(secret)[1:-1])}
    for name, path in pack.files.items():
        found = _ledger_holds(path, secrets) if name == "ledger.duckdb" else \
            any(needle in path.read_bytes() for needle in needles)
        if found:
            raise EvidenceError(f"{name}: holds the value of an arm's API key or URL credential; no evidence pack "
                                "was written (the ledger must never hold one: report this as a bug)")


def _ledger_holds(path: Path, secrets: set[str]) -> bool:
    """Whether any row of the extract, as text, contains a secret (its storage may compress strings)."""
    import duckdb

    with duckdb.connect(str(path), read_only=True) as extract:
        tables = [row[0] for row in extract.execute("SELECT table_name FROM duckdb_tables()").fetchall()]
        for table in tables:
            for secret in secrets:
                query = f'SELECT count(*) FROM "{table}" t WHERE contains(CAST(t AS VARCHAR), ?)'
                if extract.execute(query, [secret]).fetchone()[0]:
                    return True
    return False


def _replace(staging: Path, out: Path) -> None:
    """`staging` becomes `out`; an older pack there is removed only once the new one is complete."""
    old = None
    try:
        if out.exists():
            old = Path(tempfile.mkdtemp(prefix=".evidence-old-", dir=out.parent))
            out.rename(old / "pack")
        staging.rename(out)
    except OSError as exc:
        raise EvidenceError(f"{out}: cannot put the evidence pack in place: {exc}") from None
    if old is not None:
        shutil.rmtree(old, ignore_errors=True)


def _sha256_file(path: Path) -> str:
    with path.open("rb") as handle:
        return hashlib.file_digest(handle, "sha256").hexdigest()


# --------------------------------------------------------------------------------------------------------------
# The verdict page and the README


def render_verdict_markdown(verdict: dict[str, Any]) -> str:
    """The verdict page in Markdown, from verdict.json's document."""
    lines = [f"# {_md(verdict.get('title'))}", "", f"**{_md(verdict.get('sentence'))}**", ""]
    lines += [f"- {_md(label)}: {_md(text)}" for label, text in _facts(verdict)]
    lines += ["", "## Figures", "", "| figure | measured | 95 % interval | claimed |", "|---|---:|---:|---:|"]
    lines += [f"| {_md(a)} | {_md(b)} | {_md(c)} | {_md(d)} |" for a, b, c, d in _figure_rows(verdict)]
    lines += ["", "## The test", ""] + [f"- {_md(line)}" for line in _test_lines(verdict)]
    lines += ["", "## Harness health", ""] + [f"- {_md(line)}" for line in _harness_lines(verdict)]
    lines += ["", "## Contamination gap", ""] + [f"- {_md(line)}" for line in _gap_lines(verdict)]
    lines += ["", "## Settings the preset could not confirm", ""]
    lines += [f"- {_md(setting)}" for setting in verdict.get("unconfirmed") or []] or ["- none"]
    lines += ["", "## Per task (claim arm, final attempts)", "", "| task | attempts | resolved | errors |",
              "|---|---:|---:|---:|"]
    lines += [f"| {_md(t.get('task_id'))} | {t.get('attempts')} | {t.get('resolved')} | {t.get('errors')} |"
              for t in verdict.get("per_task") or []]
    return "\n".join(lines) + "\n"


_CSS = ("body{font-family:system-ui,sans-serif;margin:2rem auto;max-width:980px;padding:0 1rem;color:#222;"
        "line-height:1.4}table{border-collapse:collapse;font-size:.9rem}th,td{border:1px solid #ddd;"
        "padding:.3rem .5rem;text-align:left}td.num{text-align:right}th{background:#f5f5f5}"
        ".verdict{font-size:1.2rem;font-weight:600}")


def render_verdict_html(verdict: dict[str, Any]) -> str:
    """The verdict page as one self-contained HTML file (no script, no external URL)."""
    def items(lines: list[str]) -> str:
        return "<ul>" + "".join(f"<li>{esc(line)}</li>" for line in lines) + "</ul>"

    figures = "".join("<tr>" + f"<td>{esc(a)}</td>" + "".join(f'<td class="num">{esc(x)}</td>' for x in (b, c, d))
                      + "</tr>" for a, b, c, d in _figure_rows(verdict))
    tasks = "".join(f"<tr><td>{esc(t.get('task_id'))}</td><td class=\"num\">{esc(t.get('attempts'))}</td>"
                    f"<td class=\"num\">{esc(t.get('resolved'))}</td><td class=\"num\">{esc(t.get('errors'))}</td>"
                    "</tr>" for t in verdict.get("per_task") or [])
    parts = ["<!doctype html>", '<html lang="en">', '<head><meta charset="utf-8">',
             f"<title>{esc(verdict.get('title'))}</title><style>{_CSS}</style></head><body>",
             f"<h1>{esc(verdict.get('title'))}</h1>",
             f'<p class="verdict" id="verdict" data-verdict="{esc(verdict.get("verdict"))}">'
             f"{esc(verdict.get('sentence'))}</p>",
             "<dl>" + "".join(f"<dt>{esc(k)}</dt><dd>{esc(v)}</dd>" for k, v in _facts(verdict)) + "</dl>",
             "<h2>Figures</h2><table><thead><tr><th>figure</th><th>measured</th><th>95 % interval</th>"
             f"<th>claimed</th></tr></thead><tbody>{figures}</tbody></table>",
             "<h2>The test</h2>" + items(_test_lines(verdict)),
             "<h2>Harness health</h2>" + items(_harness_lines(verdict)),
             "<h2>Contamination gap</h2>" + items(_gap_lines(verdict)),
             "<h2>Settings the preset could not confirm</h2>" + items(verdict.get("unconfirmed") or ["none"]),
             "<h2>Per task (claim arm, final attempts)</h2><table><thead><tr><th>task</th><th>attempts</th>"
             f"<th>resolved</th><th>errors</th></tr></thead><tbody>{tasks}</tbody></table>",
             "</body></html>"]
    return "\n".join(parts) + "\n"


def _facts(v: dict[str, Any]) -> list[tuple[str, str]]:
    return [("run", str(v.get("run_id"))), ("benchmark", str(v.get("benchmark"))),
            ("arm", f"{v.get('arm')} ({v.get('model')})"), ("source of the claim", str(v.get("source"))),
            ("preset", str(v.get("preset") or "none")),
            ("grading", "strict: flagged attempts count as not resolved" if v.get("strict_grading") else "as graded"),
            ("claim tasks graded", f"{v.get('tasks')} of {v.get('total_tasks')} in the run's task list"
             + (f"; the claim was made on {v['instances']} instances" if v.get("instances") else ""))]


def _figure_rows(v: dict[str, Any]) -> list[tuple[str, str, str, str]]:
    claimed = v.get("claimed") or {}
    k = claimed.get("k")
    return [(f"Avg@{k}", *_figure(v.get("avg_at_k")), _pct(claimed.get("avg_at_k"))),
            (f"Pass@{k}", *_figure(v.get("pass_at_k"), v.get("pass_at_k_reason")), _pct(claimed.get("pass_at_k")))]


def _figure(figure: dict[str, Any] | None, reason: str | None = None) -> tuple[str, str]:
    if not figure:
        return "none", reason or "none"
    return _pct(figure.get("estimate")), f"{_pct(figure.get('lower'))} to {_pct(figure.get('upper'))}"


def _test_lines(v: dict[str, Any]) -> list[str]:
    test = v.get("test") or {}
    claimed = (v.get("claimed") or {}).get("avg_at_k")
    lines = [f"verdict: {v.get('verdict')} (the test's word: {test.get('verdict')})",
             f"anytime-valid interval on Avg@k at level 1 − {test.get('alpha')}: {_pct(test.get('lower'))} to "
             f"{_pct(test.get('upper'))} (estimate {_pct(test.get('estimate'))})",
             f"below iff the interval lies under the claim ({_pct(claimed)}); consistent iff it lies at or above "
             f"the claim less the tolerance {_pct(test.get('tolerance'))}; each word's error rate is at most "
             f"{test.get('alpha')}"]
    if test.get("tasks_to_decide") is not None:
        lines.append(f"undecided: {test['tasks_to_decide']} more instances would decide")
    return lines


def _harness_lines(v: dict[str, Any]) -> list[str]:
    h = v.get("harness") or {}
    reasons = ", ".join(f"{reason}: {count}" for reason, count in (h.get("by_exit_reason") or {}).items())
    return [f"{h.get('errors')} harness errors in {h.get('attempts')} attempts ({_pct(h.get('rate'))}; threshold "
            f"{_pct(h.get('threshold'))}): {'healthy' if h.get('healthy') else 'unhealthy'}",
            f"by exit reason: {reasons or 'none'}"]


def _gap_lines(v: dict[str, Any]) -> list[str]:
    gap = v.get("contamination")
    if not gap:
        return ["none: the claim arm has no release day, or no task of the run is fresh for it"]
    lines = [f"released {gap.get('released')}: {gap.get('seen_tasks')} seen tasks, {gap.get('fresh_tasks')} fresh",
             "seen: {} ({}); fresh: {} ({})".format(*_figure(gap.get("seen")), *_figure(gap.get("fresh"))),
             f"gap (seen − fresh): {_points(gap.get('gap'), gap.get('reason'))}"]
    for other in gap.get("versus") or []:
        lines.append(f"{other.get('arm')}: its gap {_points(other.get('gap'), other.get('reason'))}; the claim "
                     f"arm's gap minus it {_points(other.get('difference'), other.get('reason'))} (paired by task)")
    return lines


def _points(figure: dict[str, Any] | None, reason: str | None) -> str:
    """A difference of shares in signed percentage points with its interval, or why there is none."""
    if not figure:
        return f"none ({reason})" if reason else "none"
    return (f"{100 * figure['estimate']:+.1f} points (95 % interval {100 * figure['lower']:+.1f} to "
            f"{100 * figure['upper']:+.1f})")


def _readme(verdict: dict[str, Any], spec: RunSpec, strict: bool, notes: list[str]) -> str:
    grading = ("strict (flagged attempts count as not resolved)" if strict
               else "as graded (flagged attempts count as resolved; `flagged` says which)")
    lines = [f"# Evidence pack: {verdict.get('title')}", "",
             f"Run `{verdict.get('run_id')}` of leafcost checks the claim on arm `{verdict.get('arm')}`: "
             f"**{verdict.get('sentence')}**", "",
             "## Files", ""] + [f"- `{name}`: {text}" for name, text in _FILES] + [
             "", "## How to check it", ""] + [f"{n}. {text}" for n, text in enumerate(_CHECKS, 1)] + [
             "", "## This pack", "",
             f"- grading: {grading}",
             f"- seeds: {spec.seeds}; arms: {', '.join(arm.name for arm in spec.arms)}"]
    lines += [f"- {note}" for note in notes]
    return "\n".join(lines) + "\n"


_FILES = [
    ("verdict.json", "the verdict document (`leafcost claim RUN_ID --json`): the claimed figures, the measured Avg@k "
     "and Pass@k with 95 % bootstrap intervals, the test (verdict word, anytime-valid interval, alpha, tolerance), "
     "harness health, the contamination gap, and per_task (the claim arm's counts)"),
    ("verdict.md, verdict.html", "the same verdict as a page"),
    ("spec.yaml", "the run spec exactly as the run stored it"),
    ("spec.sha256", "the run's spec hash (RunSpec.digest(); with a Leaf checkout it also covers the prompt's and "
     "tools' sha256s: compare.leaf_prompt.run_spec_digest)"),
    ("task_order.json", "the ordered task list every arm saw"),
    ("task_dates.json", "each task's creation time, each model arm's release day, and the claim tasks that rule "
     "gives for the claim arm"),
    ("images.lock.json", "the image digests every task ran in (when the spec locked them: see below)"),
    ("leaf_prompt/<arm>/", "system_prompt.txt and tools.json as sent (tools.json's sha256 is tools_sha256), and "
     "source.json: where they came from and the sha256s the run recorded"),
    ("sglang/<arm>/", "launch.txt (the recommended SGLang launch), server_info.json and model_info.json (what the "
     "server said about itself when the arm started)"),
    ("predictions/<arm>.seed<N>.jsonl", "one line per task: SWE-bench's prediction (instance_id, "
     "model_name_or_path, model_patch) plus seed, resolved (as the verdict counts it), exit_reason, flagged, "
     "infra_error, harness_error"),
    ("swebench/<arm>/seed<N>/<instance_id>/report.json", "SWE-bench's report of that prediction (get_eval_report), "
     "as graded; instance ids that are not plain names are %-escaped in the path"),
    ("ledger.duckdb", "this run's rows of every ledger table with a run_id column (`duckdb ledger.duckdb`)"),
    ("MANIFEST.sha256", "the sha256 of every other file"),
]
_CHECKS = [
    "`sha256sum -c MANIFEST.sha256` in this directory: every file is as written.",
    "Grade the predictions yourself: give `predictions/<arm>.seed<N>.jsonl` to SWE-bench's harness "
    "(`python -m swebench.harness.run_evaluation --predictions_path ...`), one evaluation per seed, and compare "
    "its reports with `swebench/`.",
    "Recompute the verdict: for each claim task of task_dates.json, in task_order.json's order, count the claim "
    "arm's prediction lines (attempts) and those with resolved true; a task's score is resolved ÷ attempts "
    "(errors are misses). compare.claim.claim_from_tasks with verdict.json's claimed values, tolerance and alpha "
    "gives verdict.json's figures and verdict.",
    "Send the same requests: leaf_prompt/ holds the system prompt and tools each arm sent; spec.yaml the sampling "
    "and limits; sglang/ the server's launch and self-description.",
]


def _pct(value: Any) -> str:
    return "none" if not isinstance(value, (int, float)) else f"{100 * value:.1f} %"


def _md(text: Any) -> str:
    """Safe inside a Markdown table cell or list item: pipes escaped, line breaks flattened."""
    return str(text).replace("\\", "\\\\").replace("|", "\\|").replace("\r", " ").replace("\n", " ")
