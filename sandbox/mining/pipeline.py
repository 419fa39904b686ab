"""`leafcost mine`: a repository's history to validated SWE-bench rows. For each candidate commit (candidates.scan):
its instruction from the message, refused when it quotes the fix (instruction); the repository at the parent commit
with no later history (export); the project's environment (environment) built as an instance image (images); the
touched tests run three times before and after the fix, exactly as grading runs them (validation); a row in
swebench-5 shape, and optionally a Harbor task directory. One candidate's failure drops that candidate with a
reason; the report is rewritten after each one."""

from __future__ import annotations

import asyncio
import json
import re
import tempfile
import time
from collections import Counter
from collections.abc import Awaitable, Callable
from datetime import date, datetime, timezone
from pathlib import Path

from pydantic import BaseModel, Field

from sandbox.mining import candidates as scanning
from sandbox.mining import environment, images, instruction, validation
from sandbox.mining.candidates import Candidate
from sandbox.mining.errors import Dropped, MiningError
from sandbox.mining.export import export_at
from sandbox.mining.hints import EnvHint, load_env_hint
from sandbox.mining.report import ROWS_FILE, CandidateResult, MiningReport, write_report
from sandbox.protocol import SandboxOptions

BUILD_TIMEOUT_SEC = 1800.0
LOGS_DIR = "logs"
HARBOR_DIR = "harbor"
# The model that writes a problem statement from a candidate and its failing tests (compare's --describe-with):
# returns (statement, source, what the call spent: {"prompt_tokens", "completion_tokens", "cost_usd"}). A Dropped
# it raises may carry `spent` too. sandbox/ never calls a model itself.
Describer = Callable[[Candidate, list[str]], Awaitable[tuple[str, str, dict]]]


class MineOptions(BaseModel):
    repository: Path
    out: Path
    since: date | None = None
    until: date | None = None
    paths: list[str] = Field(default_factory=list)
    limit: int | None = None
    rev: str = "HEAD"
    repo_name: str | None = None  # owner/name for the rows; default local/<the directory's name>
    env_hint: Path | None = None
    ca_bundle: Path | None = None
    runs: int = Field(3, ge=1, le=10)
    test_timeout: float = Field(900.0, gt=0)  # one test run's limit (SWE-bench grades with 1800 s)
    harbor: bool = False


def repo_name_for(repository: Path, given: str | None) -> str:
    """The rows' `repo` (owner/name, as SWE-bench's rows name a repository)."""
    if given is not None:
        if not re.fullmatch(r"[A-Za-z0-9_.\-]+/[A-Za-z0-9_.\-]+", given):
            raise MiningError(f"--repo-name {given!r}: expected owner/name (letters, digits, '.', '_', '-')")
        return given
    name = repository.resolve().name.removesuffix(".git") or "repository"
    return f"local/{re.sub(r'[^A-Za-z0-9_.-]+', '-', name).strip('-.') or 'repository'}"


def instance_id_for(repo_name: str, sha: str) -> str:
    owner, name = repo_name.split("/", 1)
    return f"{owner}__{name}-{sha[:12]}"


async def mine(options: MineOptions, sandbox: SandboxOptions, *, describe: Describer | None = None,
               on_result: Callable[[CandidateResult], None] | None = None,
               on_scanned: Callable[[int | None], None] | None = None) -> MiningReport:
    """Mines `options.repository` into `options.out` (tasks.jsonl, report.json, logs/, harbor/). A MiningError stops
    the run after its report is written with the error; one candidate's problem drops only that candidate."""
    started = time.monotonic()
    name = repo_name_for(options.repository, options.repo_name)
    report = MiningReport(repository=str(options.repository), repo_name=name, started_at=datetime.now(timezone.utc),
                          options=options.model_dump(mode="json", exclude={"repository", "out"}))
    options.out.mkdir(parents=True, exist_ok=True)
    rows_path = options.out / ROWS_FILE
    rows_path.write_text("", encoding="utf-8")
    try:
        hint = load_env_hint(options.env_hint) if options.env_hint is not None else None
        scan = await asyncio.to_thread(scanning.scan, options.repository, since=options.since, until=options.until,
                                       paths=options.paths, limit=None, rev=options.rev)
        report.head, report.commits_seen = scan.head, scan.seen
        report.scan_dropped = dict(Counter(reason for _, reason, _ in scan.dropped))
        write_report(report, options.out)
        if on_scanned is not None:
            on_scanned(len(scan.candidates) if options.limit is None else None)
        built = 0
        for candidate in scan.candidates:
            if options.limit is not None and built >= options.limit:  # the limit counts candidates built and tested
                report.limit_reached = True
                break
            result = await _one(candidate, options, sandbox, hint, name, describe)
            built += result.built
            report.candidates.append(result)
            write_report(report, options.out)
            if on_result is not None:
                on_result(result)
        report.finished = True
    except MiningError as exc:
        report.error = str(exc)
        raise
    finally:
        report.seconds = round(time.monotonic() - started, 3)
        write_report(report, options.out)
    return report


async def _one(candidate: Candidate, options: MineOptions, sandbox: SandboxOptions, hint: EnvHint | None,
               repo_name: str, describe: Describer | None) -> CandidateResult:
    started = time.monotonic()
    instance_id = instance_id_for(repo_name, candidate.sha)
    result = CandidateResult(sha=candidate.sha, subject=candidate.subject, committed_at=candidate.committed_at,
                             kept=False, instance_id=instance_id)
    try:
        row, outcome, source = await _mined_row(candidate, options, sandbox, hint, repo_name, instance_id, describe,
                                                result)
    except Dropped as exc:
        result.reason, result.detail = exc.reason, str(exc)
        result.describe_spent = getattr(exc, "spent", None)
        result.flaky_tests = len(getattr(exc, "flaky", []))
        if exc.log:
            result.log = _write_log(options.out, candidate.sha, exc.reason, exc.log)
    except MiningError:
        raise
    except Exception as exc:  # noqa: BLE001 - one candidate's harness failure never stops the others
        result.reason, result.detail = "harness_error", f"{type(exc).__name__}: {str(exc)[:500]}"
    else:
        if options.harbor and (problem := _harbor_task(row, options.out / HARBOR_DIR / instance_id)):
            result.reason, result.detail = "harness_error", problem
            result.seconds = round(time.monotonic() - started, 3)
            return result
        _append_row(options.out / ROWS_FILE, row)
        result.kept, result.instruction_source = True, source
        result.fail_to_pass, result.pass_to_pass = len(outcome.fail_to_pass), len(outcome.pass_to_pass)
        result.flaky_tests = len(outcome.flaky)
    result.seconds = round(time.monotonic() - started, 3)
    return result


async def _mined_row(candidate: Candidate, options: MineOptions, sandbox: SandboxOptions, hint: EnvHint | None,
                     repo_name: str, instance_id: str, describe: Describer | None, result: CandidateResult):
    statement = instruction.statement_from_commit(candidate.message,
                                                  news=instruction.news_fragments(candidate.patch))
    if not statement.strip() and describe is None:
        raise Dropped("thin_message", "nothing of the commit message is left to describe the problem once its "
                      "trailers are removed")
    if describe is None and (quoted := instruction.leaks(statement, candidate.patch)):
        raise Dropped("leaky_instruction", f"the commit message quotes the fix: {quoted[:120]!r}")
    with tempfile.TemporaryDirectory(prefix="leafcost-mine-") as scratch:
        tree = Path(scratch) / "repo"
        await asyncio.to_thread(export_at, options.repository, candidate.parent, tree)
        facts = environment.detect_project(tree, candidate.committed_at, hint)
        modules = facts.runnable_tests(candidate.test_files)  # which files run depends on the project's runner
        if not modules:
            raise Dropped("tests_not_found", f"the commit changes none of the {facts.test_files_described()}: "
                          + ", ".join(candidate.test_files[:5]))
        result.built = True
        building = time.monotonic()
        image = await images.build_instance_image(sandbox.backend, facts, tree, instance_id,
                                                   ca_bundle=options.ca_bundle, timeout=BUILD_TIMEOUT_SEC,
                                                   repo=repo_name)
    result.image = image
    result.build_seconds = round(time.monotonic() - building, 3)
    script = validation.eval_script(candidate.parent, modules, candidate.test_patch, facts.test_command)
    fields = dict(instance_id=instance_id, repo=repo_name, base_commit=candidate.parent, patch=candidate.patch,
                  test_patch=candidate.test_patch, problem_statement=statement,
                  created_at=candidate.committed_at, version=facts.version, image=image, eval_script=script,
                  log_parser=facts.log_parser, mined_from=candidate.sha, instruction_source="commit-message")
    outcome = await validation.classify(validation.probe_row(**fields), sandbox, runs=options.runs,
                                        timeout=options.test_timeout)
    source = "commit-message"
    if describe is not None:
        statement, source, result.describe_spent = await describe(candidate, outcome.fail_to_pass)
        if quoted := instruction.leaks(statement, candidate.patch):
            raise Dropped("leaky_instruction", f"the statement {source} wrote quotes the fix: {quoted[:120]!r}")
    fields.update(problem_statement=statement, instruction_source=source)
    row = validation.mined_row(**fields, fail_to_pass=outcome.fail_to_pass, pass_to_pass=outcome.pass_to_pass)
    return row, outcome, source


def _harbor_task(row: dict, directory: Path) -> str | None:
    """Writes the row's Harbor task directory; why it could not, if it could not (the candidate is then dropped)."""
    from sandbox.mining.harbor_export import write_harbor_task

    try:
        write_harbor_task(row, directory)
    except (ValueError, OSError) as exc:
        return f"its Harbor task directory could not be written: {exc}"
    return None


def _append_row(path: Path, row: dict) -> None:
    with path.open("a", encoding="utf-8") as stream:
        stream.write(json.dumps(row, default=str) + "\n")


def _write_log(out: Path, sha: str, step: str, text: str) -> str:
    relative = Path(LOGS_DIR) / sha[:12] / f"{step}.log"
    (out / relative).parent.mkdir(parents=True, exist_ok=True)
    (out / relative).write_text(text, encoding="utf-8", errors="replace")
    return str(relative)
