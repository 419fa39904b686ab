"""`reports.evidence`: the evidence pack `leafcost report` writes for a claim run, from a real run (the runner against
scripted SGLang and OpenAI servers that demand their keys, a FrogNano checkout's prompt, Harbor tasks dated on both
sides of the claim arm's release). A checker that reads only the pack's files recomputes the verdict; a changed
file breaks the manifest; no key reaches the pack."""

from __future__ import annotations

import importlib.util
import json
import subprocess
import sys
from datetime import date, datetime
from pathlib import Path

import duckdb
import pytest
import yaml

from compare.claim import ClaimTask, claim_from_tasks, harness_error_reason
from compare.claim_spec import ClaimConfig
from compare.episode import EpisodePrompt
from compare.leaf_prompt import run_spec_digest
from compare.spec import RunSpec
from reports import ReportError, write_report
from reports.evidence import MANIFEST, EvidenceError, check_manifest, safe_name, write_evidence

LEAFCOST = Path(sys.executable).with_name("leafcost")
SGLANG_KEY, ROUTER_KEY = "sk-evidence-sglang-key-7431", "sk-evidence-router-key-9902"
KEYS = {"LEAFCOST_TEST_EVIDENCE_SGLANG": SGLANG_KEY, "LEAFCOST_TEST_EVIDENCE_ROUTER": ROUTER_KEY}
RELEASED = "2025-06-01"
# task → (created_at in task.toml or None, whether the scripted edit fixes it)
TASKS = {"calc-old-fixed": ('"2025-01-10"', True), "calc-undated-fixed": (None, True),
         "calc-old-broken": ('"2025-05-31"', False), "calc-new-broken": ('"2025-09-01"', False)}
SEEDS = 2


def _leaf_checkouts():
    """tests/compare/leaf_checkouts.py (its folder is not a package)."""
    path = Path(__file__).parents[1] / "compare" / "leaf_checkouts.py"
    spec = importlib.util.spec_from_file_location("evidence_leaf_checkouts", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.fixture(scope="module")
def claim_run(tmp_path_factory):
    """A finished claim run: `frognano` (SGLang with --api-key, Leaf's prompt from a fake checkout, released before
    the newest task), `hosted` (a router arm whose key is in api_key_env) and the oracle; four tasks, two seeds.
    Returns (db, run_id)."""
    import asyncio

    from conftest import SOLVE_SCRIPT, TASK_TOML, _write_calc_task
    from support.sglang_fake import ScriptedServer

    from compare.ledger import Ledger
    from compare.runner import Runner
    from compare.spec import parse_run_spec

    root = tmp_path_factory.mktemp("claim-run")
    for name, (created, fixable) in TASKS.items():
        _write_calc_task(root / "tasks" / name, "a - b" if fixable else "b - a")
        if created is not None:
            toml = TASK_TOML.format(verifier_timeout=60, memory_mb=512, pids=256, network="false")
            (root / "tasks" / name / "task.toml").write_text(toml + f"[metadata]\ncreated_at = {created}\n")
    checkout = _leaf_checkouts().write_checkout(root / "FrogNano", git=True)
    db = root / "ledger.duckdb"
    sglang_script = {**SOLVE_SCRIPT, "auth": f"Bearer {SGLANG_KEY}"}
    router_script = {**SOLVE_SCRIPT, "auth": f"Bearer {ROUTER_KEY}"}
    with pytest.MonkeyPatch.context() as env, ScriptedServer(sglang_script) as sglang, \
            ScriptedServer(router_script) as openai:
        for name, value in KEYS.items():
            env.setenv(name, value)
        spec = parse_run_spec({
            "name": "claim", "suite": str(root / "tasks"), "seeds": SEEDS, "workers": 4, "max_attempts": 1,
            "budgets": {"max_steps": 4, "time_budget_sec": 120},
            "arms": [{"name": "frognano", "adapter": "sglang", "model": "frognano-4b", "base_url": sglang.base_url,
                      "api_key_env": "LEAFCOST_TEST_EVIDENCE_SGLANG", "max_retries": 0, "released": RELEASED,
                      "leaf_checkout": str(checkout), "gpu": {"type": "H200", "usd_per_hour": 3.5},
                      "metrics_interval_sec": 0.5},
                     {"name": "hosted", "adapter": "router", "model": "hosted-gpt", "base_url": openai.base_url,
                      "api_key_env": "LEAFCOST_TEST_EVIDENCE_ROUTER", "max_retries": 0,
                      "allow_unlisted_model": True, "prices": {"input": 1.25, "output": 10.0}},
                     {"name": "oracle", "adapter": "oracle"}],
            "claim": {"title": "FrogNano-4B on calc", "source": "https://example.invalid/card", "arm": "frognano",
                      "benchmark": "calc", "avg_at_k": 0.6, "pass_at_k": 0.7, "k": SEEDS,
                      "unconfirmed": ["the calculator's version"]}})
        ledger = Ledger.open(db)
        try:
            summary = asyncio.run(Runner(spec, ledger, db_path=db).run())
        finally:
            ledger.close()
    assert summary.status == "finished"
    return db, summary.run_id


@pytest.fixture(scope="module")
def pack(claim_run, tmp_path_factory):
    """`leafcost report` of the claim run, with both keys in its environment; returns the evidence directory."""
    db, run_id = claim_run
    out = tmp_path_factory.mktemp("report") / "out"
    with pytest.MonkeyPatch.context() as env:
        for name, value in KEYS.items():
            env.setenv(name, value)
        done = subprocess.run([str(LEAFCOST), "report", run_id, "--db", str(db), "--out", str(out), "--json"],
                              capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    written = json.loads(done.stdout)
    assert written["evidence/verdict.json"] == str((out / "evidence" / "verdict.json").resolve())
    return out / "evidence"


def _files(root: Path) -> set[str]:
    return {p.relative_to(root).as_posix() for p in root.rglob("*") if p.is_file()}


def test_the_pack_holds_every_file_and_nothing_else(pack):
    prompts = {f"leaf_prompt/{arm}/{name}" for arm in ("frognano", "hosted")
               for name in ("system_prompt.txt", "tools.json", "source.json")}
    predictions = {f"predictions/{arm}.seed{seed}.jsonl" for arm in ("frognano", "hosted") for seed in range(SEEDS)}
    expected = {"README.md", "verdict.json", "verdict.md", "verdict.html", "spec.yaml", "spec.sha256",
                "task_order.json", "task_dates.json", "ledger.duckdb", MANIFEST, "sglang/frognano/launch.txt",
                "sglang/frognano/server_info.json", "sglang/frognano/model_info.json"} | prompts | predictions
    assert _files(pack) == expected  # Harbor tasks have no SWE-bench report; no lock: no images.lock.json
    readme = (pack / "README.md").read_text()
    assert "images.lock.json: not written: the spec locked no images" in readme
    assert "sha256sum -c MANIFEST.sha256" in readme
    assert not list(pack.parent.glob(".evidence-*"))  # the staging directory is gone


def recompute(pack: Path) -> tuple[dict, ClaimConfig, list[ClaimTask], int]:
    """The checker: the verdict from the pack's predictions, task order and dates, and the claim as verdict.json
    states it; nothing else is read."""
    verdict = json.loads((pack / "verdict.json").read_text())
    order = json.loads((pack / "task_order.json").read_text())
    dates = json.loads((pack / "task_dates.json").read_text())
    arm = verdict["arm"]
    released = date.fromisoformat(dates["released"][arm]) if dates["released"][arm] else None
    created = {task: datetime.fromisoformat(when).date() if when else None for task, when in dates["created"].items()}
    # not fresh for the claim arm: created on or before its release day, or undated; every task without a release day
    claim_tasks = [task for task in order if released is None or created[task] is None or created[task] <= released]
    assert claim_tasks == dates["claim_tasks"]
    lines = [json.loads(line) for path in sorted((pack / "predictions").glob(f"{arm}.seed*.jsonl"))
             for line in path.read_text().splitlines()]
    per_task = []
    for task in claim_tasks:
        mine = [line for line in lines if line["instance_id"] == task]
        if not mine:
            continue
        reasons: dict[str, int] = {}
        for line in mine:
            if reason := harness_error_reason(line["exit_reason"], line["infra_error"], line["harness_error"]):
                reasons[reason] = reasons.get(reason, 0) + 1
        per_task.append(ClaimTask(task_id=task, attempts=len(mine), resolved=sum(line["resolved"] for line in mine),
                                  errors=sum(reasons.values()), error_reasons=reasons))
    claimed = verdict["claimed"]
    claim = ClaimConfig(title=verdict["title"], source=verdict["source"], arm=arm, benchmark=verdict["benchmark"],
                        avg_at_k=claimed["avg_at_k"], pass_at_k=claimed["pass_at_k"], k=claimed["k"],
                        tolerance=verdict["test"]["tolerance"], alpha=verdict["test"]["alpha"],
                        max_harness_error_rate=verdict["harness"]["threshold"])
    return verdict, claim, per_task, len(claim_tasks)


def test_a_checker_reading_only_the_pack_recomputes_the_verdict(pack):
    verdict, claim, per_task, total = recompute(pack)
    figures = claim_from_tasks(claim, per_task, total_tasks=total, resamples=verdict["bootstrap"]["resamples"],
                               seed=verdict["bootstrap"]["seed"])
    for key, value in json.loads(figures.model_dump_json()).items():
        assert verdict[key] == value, key
    assert [task.model_dump() for task in per_task] == verdict["per_task"]
    # the fixture's counts: both seeds fix calc-old-fixed and calc-undated-fixed, never calc-old-broken
    assert [(t.task_id, t.attempts, t.resolved) for t in per_task] == [
        (task, SEEDS, SEEDS if TASKS[task][1] else 0) for task in json.loads((pack / "task_order.json").read_text())
        if task != "calc-new-broken"]
    assert verdict["avg_at_k"]["estimate"] == pytest.approx(2 / 3)
    assert verdict["contamination"]["fresh_tasks"] == 1 and verdict["contamination"]["seen_tasks"] == 3


def test_the_spec_and_the_prompt_in_the_pack_give_the_recorded_spec_hash(pack):
    spec = RunSpec.model_validate(yaml.safe_load((pack / "spec.yaml").read_text()))
    folder = pack / "leaf_prompt" / "frognano"
    source = json.loads((folder / "source.json").read_text())
    prompt = EpisodePrompt(source="leaf-checkout", system_prompt=(folder / "system_prompt.txt").read_text(),
                           tools=json.loads((folder / "tools.json").read_text()))
    assert run_spec_digest(spec, {"frognano": prompt}) == (pack / "spec.sha256").read_text().strip()
    assert source["matches_run"] is True and source["leaf_commit"] and source["source"] == "leaf-checkout"
    assert source["prompt_sha256"] == source["recorded_by_the_run"]["prompt_sha256"] == prompt.prompt_sha256
    import hashlib

    assert hashlib.sha256((folder / "tools.json").read_bytes()).hexdigest() == source["tools_sha256"]
    hosted = json.loads((pack / "leaf_prompt" / "hosted" / "source.json").read_text())
    assert hosted["source"] == "leafcost" and hosted["matches_run"] is True


def test_predictions_are_swebench_lines_with_the_verdict_facts(pack, claim_run):
    db, run_id = claim_run
    with duckdb.connect(str(db), read_only=True) as ledger:
        rows = {row[0]: row for row in ledger.execute(
            "SELECT task_id, resolved, exit_reason FROM episodes WHERE run_id = ? AND final AND arm = 'hosted' AND "
            "seed = 1", [run_id]).fetchall()}
    order = json.loads((pack / "task_order.json").read_text())
    lines = [json.loads(line) for line in (pack / "predictions" / "hosted.seed1.jsonl").read_text().splitlines()]
    assert [(line["instance_id"], line["resolved"], line["exit_reason"]) for line in lines] == \
        [rows[task] for task in order]  # every task, in the run's order
    fixed = next(line for line in lines if line["instance_id"] == "calc-old-fixed")
    assert fixed["model_name_or_path"] == "hosted:hosted-gpt" and fixed["seed"] == 1
    assert "-    return a - b" in fixed["model_patch"] and "+    return a + b" in fixed["model_patch"]


def test_the_sglang_files_hold_the_launch_and_what_the_server_said(pack):
    folder = pack / "sglang" / "frognano"
    launch = (folder / "launch.txt").read_text()
    assert "--tool-call-parser qwen3_coder" in launch and "--model-path frognano-4b" in launch
    server = json.loads((folder / "server_info.json").read_text())
    assert server["tool_call_parser"] == "qwen3_coder" and server["api_key"] == "[redacted]"
    assert json.loads((folder / "model_info.json").read_text()) is not None


def test_the_ledger_extract_holds_only_this_run(pack, claim_run):
    db, run_id = claim_run
    with duckdb.connect(str(pack / "ledger.duckdb"), read_only=True) as extract, \
            duckdb.connect(str(db), read_only=True) as ledger:
        tables = {row[0] for row in ledger.execute(
            "SELECT DISTINCT table_name FROM duckdb_columns() WHERE column_name = 'run_id'").fetchall()}
        assert {row[0] for row in extract.execute("SELECT table_name FROM duckdb_tables()").fetchall()} \
            == tables | {"meta"}
        for table in sorted(tables):
            ours = ledger.execute(f'SELECT count(*) FROM "{table}" WHERE run_id = ?', [run_id]).fetchone()[0]
            assert extract.execute(f'SELECT count(*) FROM "{table}"').fetchone()[0] == ours, table
            assert extract.execute(f'SELECT count(*) FROM "{table}" WHERE run_id <> ?', [run_id]).fetchone()[0] == 0
        assert extract.execute("SELECT count(*) FROM episodes").fetchone()[0] > 0


def test_no_key_reaches_the_pack(pack, claim_run):
    _, run_id = claim_run
    for name in _files(pack):
        data = (pack / name).read_bytes()
        assert SGLANG_KEY.encode() not in data and ROUTER_KEY.encode() not in data, name
    with duckdb.connect(str(pack / "ledger.duckdb"), read_only=True) as extract:
        query = 'SELECT count(*) FROM episodes t WHERE contains(CAST(t AS VARCHAR), ?)'
        assert extract.execute(query, [run_id]).fetchone()[0] > 0  # the search below finds what is there
        for (table,) in extract.execute("SELECT table_name FROM duckdb_tables()").fetchall():
            for key in KEYS.values():
                hits = extract.execute(f'SELECT count(*) FROM "{table}" t WHERE contains(CAST(t AS VARCHAR), ?)',
                                       [key]).fetchone()[0]
                assert hits == 0, table


def test_the_manifest_lists_every_file_and_a_changed_one_fails_it(pack, tmp_path):
    copy = tmp_path / "evidence"
    subprocess.run(["cp", "-r", str(pack), str(copy)], check=True)
    assert check_manifest(copy) == []
    assert subprocess.run(["sha256sum", "--quiet", "-c", MANIFEST], cwd=copy).returncode == 0
    listed = {line.split("  ", 1)[1] for line in (copy / MANIFEST).read_text().splitlines()}
    assert listed == _files(copy) - {MANIFEST}
    first = (copy / "predictions" / "frognano.seed0.jsonl")
    first.write_text(first.read_text().replace('"resolved": false', '"resolved": true'))
    (copy / "extra.txt").write_text("added later\n")
    assert check_manifest(copy) == ["predictions/frognano.seed0.jsonl: its sha256 differs from MANIFEST.sha256's",
                                    f"extra.txt: not listed in {MANIFEST}"]
    assert subprocess.run(["sha256sum", "--quiet", "-c", MANIFEST], cwd=copy, capture_output=True).returncode != 0


def test_the_verdict_page_shows_the_document(pack):
    verdict = json.loads((pack / "verdict.json").read_text())
    html, markdown = (pack / "verdict.html").read_text(), (pack / "verdict.md").read_text()
    for page in (html, markdown):
        assert "60.0 %" in page and "70.0 %" in page  # the claimed figures
        assert "the calculator&#x27;s version" in page or "the calculator's version" in page
    assert f'data-verdict="{verdict["verdict"]}"' in html
    assert "<script" not in html and "http" not in html.replace("https://example.invalid/card", "")
    assert verdict["sentence"].split(":")[0] in markdown


def test_a_key_recorded_by_mistake_stops_the_pack(claim_run, tmp_path, monkeypatch):
    """A trajectory that somehow holds the router's key: the pack is refused, naming the file, and nothing is left."""
    from compare.ledger import connect_read_only

    db, run_id = claim_run
    with duckdb.connect(str(db), read_only=True) as ledger:
        trajectory = Path(ledger.execute("SELECT trajectory_path FROM episodes WHERE run_id = ? AND final AND arm = "
                                         "'hosted' AND seed = 0 ORDER BY task_id LIMIT 1", [run_id]).fetchone()[0])
    original = trajectory.read_text()
    for name, value in KEYS.items():
        monkeypatch.setenv(name, value)
    document = json.loads(original)
    document["output_patch"] = f"+API_KEY = '{ROUTER_KEY}'\n"
    trajectory.write_text(json.dumps(document))
    try:
        with connect_read_only(db) as conn, pytest.raises(EvidenceError) as raised:
            write_evidence(conn, run_id, tmp_path / "evidence", db_path=db)
        with pytest.raises(ReportError, match=r"predictions/hosted.seed0.jsonl: holds the value of an arm's API key"):
            write_report(db, run_id, tmp_path / "report")
    finally:
        trajectory.write_text(original)
    assert "predictions/hosted.seed0.jsonl" in str(raised.value) and ROUTER_KEY not in str(raised.value)
    assert not (tmp_path / "evidence").exists() and not list(tmp_path.glob(".evidence-*"))


def test_a_run_without_a_claim_gets_no_pack(four_arm_run, tmp_path):
    db, run_id = four_arm_run
    written = write_report(db, run_id, tmp_path / "out")
    assert not any(name.startswith("evidence/") for name in written)
    assert not (tmp_path / "out" / "evidence").exists()


@pytest.mark.parametrize("text, expected", [
    ("astropy__astropy-12907", "astropy__astropy-12907"), ("a/b", "a%2Fb"), ("..", "%2E."), (".", "%2E"),
    ("../../etc/passwd", "%2E.%2F..%2Fetc%2Fpasswd"), (".hidden", "%2Ehidden"), ("a b%", "a%20b%25"),
    ("", "%00empty"), ("x~y", "x%7Ey"), ("v1.2", "v1.2")])
def test_safe_name_keeps_plain_ids_and_escapes_the_rest(text, expected):
    assert safe_name(text) == expected
    assert "/" not in safe_name(text) and safe_name(text) not in (".", "..")


def test_safe_name_cuts_a_long_id_and_keeps_names_distinct():
    long_a, long_b = "a" * 300 + "1", "a" * 300 + "2"
    assert len(safe_name(long_a).encode()) <= 200 and safe_name(long_a) != safe_name(long_b)
    assert len({safe_name(t) for t in ("a/b", "a%2Fb", "a_b", "a.b", "%2E", ".")}) == 6


SWEBENCH_ROWS = Path(__file__).parents[1] / "fixtures" / "swebench" / "instances.jsonl"
SRCLAYOUT = "leafcost-fixtures__srclayout-1"
# The fixture's gold change to slugify, made with Leaf's Edit tool.
SLUGIFY_FIX = {"turns": [
    {"tool_calls": [{"name": "Edit", "arguments": {
        "file_path": "src/slugkit/text.py",
        "old_string": 'words = re.split(r"[^a-z0-9]", ascii_text.lower())\n    return separator.join(words)',
        "new_string": 'words = re.split(r"[^a-z0-9]+", ascii_text.lower())\n'
                      "    return separator.join(word for word in words if word)"}}],
     "usage": {"prompt_tokens": 500, "completion_tokens": 60, "cached_tokens": 0}},
    {"content": "Fixed slugify.", "usage": {"prompt_tokens": 600, "completion_tokens": 5, "cached_tokens": 500}}]}


def test_a_swebench_claim_run_packs_swebench_reports_and_the_image_lock(container_images, tmp_path):
    """On podman, one fixture instance with its image locked: the pack holds SWE-bench's report of the prediction
    exactly as the trajectory recorded it, and the lock the spec named."""
    from support.sglang_fake import ScriptedServer
    from swebench_images import ensure_swebench_instance_images

    ensure_swebench_instance_images(SWEBENCH_ROWS)
    env = {"PATH": "/usr/sbin:/usr/bin:/bin", "HOME": str(tmp_path), "LEAFCOST_CACHE": str(tmp_path / "cache")}
    lock, db = tmp_path / "swebench.lock.json", tmp_path / "ledger.duckdb"
    locked = subprocess.run([str(LEAFCOST), "images", "lock", str(SWEBENCH_ROWS), "--backend", "podman", "-o",
                             str(lock), "--json"], capture_output=True, text=True, timeout=600, cwd=tmp_path, env=env)
    assert locked.returncode == 0, locked.stderr[-2000:]
    with ScriptedServer(SLUGIFY_FIX) as sglang:
        spec = {"name": "swebench-claim", "suite": str(SWEBENCH_ROWS), "tasks": [SRCLAYOUT], "seeds": 1, "workers": 1,
                "max_attempts": 1, "budgets": {"max_steps": 4, "time_budget_sec": 600},
                "sandbox": {"backend": "podman", "images": str(lock)},
                "arms": [{"name": "frognano", "adapter": "sglang", "model": "frognano-4b", "base_url": sglang.base_url,
                          "max_retries": 0, "gpu": {"type": "H200", "usd_per_hour": 3.5}}],
                "claim": {"title": "FrogNano-4B on the fixtures", "source": "a test", "arm": "frognano",
                          "benchmark": "SWE-bench fixtures", "avg_at_k": 0.5, "k": 1}}
        (tmp_path / "spec.yaml").write_text(yaml.safe_dump(spec))
        ran = subprocess.run([str(LEAFCOST), "run", str(tmp_path / "spec.yaml"), "--db", str(db), "--json"],
                             capture_output=True, text=True, timeout=1800, cwd=tmp_path, env=env)
    assert ran.returncode == 0, ran.stderr[-3000:]
    run_id = json.loads(ran.stdout)["run_id"]
    write_report(db, run_id, tmp_path / "report")
    pack = tmp_path / "report" / "evidence"
    assert check_manifest(pack) == []
    assert (pack / "images.lock.json").read_bytes() == lock.read_bytes()
    with duckdb.connect(str(db), read_only=True) as ledger:
        trajectory = ledger.execute("SELECT trajectory_path FROM episodes WHERE run_id = ? AND final",
                                    [run_id]).fetchone()[0]
    rewards = json.loads(Path(trajectory).read_text())["rewards"]
    report = json.loads((pack / "swebench" / "frognano" / "seed0" / SRCLAYOUT / "report.json").read_text())
    assert report == {SRCLAYOUT: rewards} and rewards["resolved"] is True
    line = json.loads((pack / "predictions" / "frognano.seed0.jsonl").read_text())
    assert line["instance_id"] == SRCLAYOUT and line["resolved"] is True
    assert line["model_patch"].startswith("diff --git a/src/slugkit/text.py")
    verdict, claim, per_task, total = recompute(pack)
    assert claim_from_tasks(claim, per_task, total_tasks=total).verdict == verdict["verdict"]
    assert verdict["per_task"] == [{"task_id": SRCLAYOUT, "attempts": 1, "resolved": 1, "errors": 0,
                                    "error_reasons": {}}]
