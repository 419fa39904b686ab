"""Whether a mined candidate's tests tell its fix apart: the eval script a SWE-bench row carries, the row itself, and
the runs before and after the fix that give FAIL_TO_PASS and PASS_TO_PASS. Each run goes through the sandbox
protocol exactly as grading runs a SWE-bench row (the row loaded as a task, the verifier's fresh container, the
eval script's log), and each log is read by swebench's own parser as grading reads it, so the lists a mined row
carries are the ones `leafcost validate` and `run` will see."""

from __future__ import annotations

import hashlib
import json
import locale
import os
import re
import shlex
import tempfile
from datetime import datetime, timezone
from pathlib import Path

from pydantic import BaseModel, ValidationError

from sandbox import swebench_grading
from sandbox.backends import open_sandbox
from sandbox.grading import run_oracle, verify
from sandbox.mining.errors import Dropped
from sandbox.protocol import BuildError, SandboxError, SandboxOptions
from sandbox.swebench import WORKDIR, SWEBenchInstance, load_swebench_suite
from sandbox.tasks import SWEBenchFacts, Task

DEFAULT_LOG_PARSER = "parse_log_pytest"
EVAL_TYPE = "pass_and_fail"
# A task needs a FAIL_TO_PASS and a problem statement to load; a probe row (before the runs give the real lists and
# before the instruction is written) carries these instead. Grading's verdict on them is never read.
PROBE_TEST = "leafcost-mining-probe::placeholder"
PROBE_STATEMENT = "(mining probe: the instruction is written after the tests are classified)"
PASSING = frozenset({"PASSED", "XFAIL"})  # what swebench's grading counts as a pass (test_passed)
LOG_TAIL_CHARS = 20_000


class TestOutcome(BaseModel):
    """What the runs showed: the lists a row carries, the tests left out because their runs disagreed, and every
    run's {test: status} as swebench's parser read its log."""

    __test__ = False  # not a pytest test class, despite its name

    fail_to_pass: list[str]
    pass_to_pass: list[str]
    flaky: list[str]
    before: list[dict[str, str]]
    after: list[dict[str, str]]


def eval_script(base_commit: str, test_files: list[str], test_patch: str, test_command: str, *,
                activate: str = "") -> str:
    """A swebench-5 row's eval_script: the test files put back as at `base_commit` (those the test patch creates
    removed: they do not exist there), the test patch applied, `test_command` on `test_files` between SWE-bench's
    start and end markers, then the test files put back again. `test_command` gets the files appended, or in place
    of `{files}`; `activate` is shell text run first (e.g. entering the project's environment)."""
    constants = swebench_grading.swebench().constants
    existing, created, deleted = _test_patch_paths(test_patch)
    runnable = [path for path in test_files if path not in deleted]
    if not runnable:
        raise ValueError("eval_script: test_files names no test file the test patch leaves in place")
    delimiter = heredoc_delimiter(test_patch)
    reset = _reset_lines(base_commit, existing, created)
    body = test_patch[:-1] if test_patch.endswith("\n") else test_patch
    lines = ["#!/bin/bash", "set -uxo pipefail", *([activate.strip()] if activate.strip() else []),
             f"cd {WORKDIR}", f"git config --global --add safe.directory {WORKDIR}",
             "git status", "git show", f"git -c core.fileMode=false diff {base_commit}",
             *reset, f"git apply -v - <<'{delimiter}'", body, delimiter,
             f": '{constants.START_TEST_OUTPUT}'", _test_line(test_command, runnable),
             f": '{constants.END_TEST_OUTPUT}'", *reset]
    return "\n".join(lines) + "\n"


def mined_row(*, instance_id: str, repo: str, base_commit: str, patch: str, test_patch: str, problem_statement: str,
              created_at: datetime, version: str, image: str, eval_script: str, fail_to_pass: list[str],
              pass_to_pass: list[str], mined_from: str, instruction_source: str,
              log_parser: str = DEFAULT_LOG_PARSER, environment_setup_commit: str | None = None) -> dict[str, str]:
    """A swebench-5 row in the published datasets' columns (FAIL_TO_PASS and PASS_TO_PASS as JSON text), plus
    leafcost's own `instruction_source` and `mined_from` (the commit). Raises ValueError for an empty FAIL_TO_PASS
    or a row the SWE-bench loader would refuse."""
    if not fail_to_pass:
        raise ValueError(f"mined row {instance_id}: FAIL_TO_PASS is empty; a task needs at least one failing test "
                         "its fix makes pass")
    row = {
        "repo": repo, "instance_id": instance_id, "base_commit": base_commit, "patch": patch,
        "test_patch": test_patch, "problem_statement": problem_statement, "hints_text": "",
        "created_at": _utc_text(created_at, instance_id), "version": version,
        "FAIL_TO_PASS": json.dumps(list(fail_to_pass)), "PASS_TO_PASS": json.dumps(list(pass_to_pass)),
        "environment_setup_commit": environment_setup_commit or base_commit, "image": image,
        "eval_script": eval_script, "log_parser": log_parser, "eval_type": EVAL_TYPE,
        "instruction_source": instruction_source, "mined_from": mined_from,
    }
    try:
        SWEBenchInstance.model_validate(row)
    except ValidationError as exc:
        error = exc.errors()[0]
        where = ".".join(str(part) for part in error["loc"])
        raise ValueError(f"mined row {instance_id}: {where}: {error['msg']}") from None
    return row


def probe_row(*, problem_statement: str = "", **fields) -> dict[str, str]:
    """The row `classify` runs before the lists are known: mined_row's fields with a placeholder FAIL_TO_PASS (and
    statement, when none is written yet)."""
    return mined_row(**fields, problem_statement=problem_statement or PROBE_STATEMENT, fail_to_pass=[PROBE_TEST],
                     pass_to_pass=[])


async def classify(row: dict, options: SandboxOptions, runs: int = 3, *, timeout: float | None = None) -> TestOutcome:
    """Runs the row's eval script `runs` times without a patch (the verifier's empty-patch path) and `runs` times
    after the oracle applied the gold patch, as `leafcost validate` does, and classifies every test. Raises
    Dropped: tests_not_found (no log holds a test result), flaky (no FAIL_TO_PASS because the runs disagreed),
    no_fail_to_pass, harness_error (a sandbox, the oracle or the verifier failed; `log` says how)."""
    if runs < 1:
        raise ValueError(f"classify: runs must be at least 1, not {runs}")
    task = _probe_task(row, options, timeout)
    before, after, logs = [], [], {}
    for side, statuses in (("before", before), ("after", after)):
        for number in range(1, runs + 1):
            logs[side] = await _test_log(task, options, side=side, number=number)
            statuses.append(parse_test_log(task.swebench, logs[side]))
    try:
        return outcome_of(before, after)
    except Dropped as exc:
        exc.log = "\n\n".join(f"--- last {side} run's log ---\n{log[-LOG_TAIL_CHARS:]}" for side, log in logs.items())
        raise


def outcome_of(before: list[dict[str, str]], after: list[dict[str, str]]) -> TestOutcome:
    """The lists from each run's {test: status}: FAIL_TO_PASS did not pass (failed, errored or absent) in any run
    before and passed in every run after; PASS_TO_PASS passed in every run. A test whose outcome differs between runs
    of the same side is flaky and in neither list."""
    tests = sorted({test for statuses in (*before, *after) for test in statuses})
    if not tests:
        raise Dropped("tests_not_found", "no test results in any run's log: the test command found no tests in the "
                                         "files the candidate touches")
    passed_before = {test: [_passed(test, run) for run in before] for test in tests}
    passed_after = {test: [_passed(test, run) for run in after] for test in tests}
    flaky = [test for test in tests if len(set(passed_before[test])) > 1 or len(set(passed_after[test])) > 1]
    steady = [test for test in tests if test not in flaky]
    fail_to_pass = [test for test in steady if not passed_before[test][0] and passed_after[test][0]]
    pass_to_pass = [test for test in steady if passed_before[test][0] and passed_after[test][0]]
    if not fail_to_pass:
        # A flaky test that failed in some run before and passed in some run after could have been one.
        masked = [test for test in flaky if not all(passed_before[test]) and any(passed_after[test])]
        if masked:
            dropped = Dropped("flaky", f"no steady FAIL_TO_PASS: {len(masked)} test(s) that could be one gave "
                                       f"different results across runs ({', '.join(masked[:3])})")
            dropped.flaky = flaky  # the report counts them
            raise dropped
        raise Dropped("no_fail_to_pass", f"no test fails before the fix and passes after it ({len(tests)} test(s) "
                                         f"ran, {len(pass_to_pass)} passing both times)")
    return TestOutcome(fail_to_pass=fail_to_pass, pass_to_pass=pass_to_pass, flaky=flaky, before=before,
                       after=after)


def parse_test_log(facts: SWEBenchFacts, log: str) -> dict[str, str]:
    """{test: status} of one eval-script log, read by swebench's get_logs_eval with the row's parser (a TestSpec as
    grading builds one): only the marked test output, none when the log shows the run invalid (no markers, a
    patch that did not apply, an exit status that contradicts the results). Only swebench's statuses are kept."""
    modules = swebench_grading.swebench()
    spec = modules.types.TestSpec(instance_id=facts.instance_id, image=facts.image, eval_script_list=[],
                                  repo=facts.repo, version=facts.version, FAIL_TO_PASS=facts.fail_to_pass,
                                  PASS_TO_PASS=facts.pass_to_pass, log_parser=facts.log_parser,
                                  eval_type=facts.eval_type)
    handle, path = tempfile.mkstemp(prefix="leafcost-mine-", suffix=".txt")
    try:
        # get_logs_eval opens the file as text in the locale's encoding, as grade_log writes it.
        with os.fdopen(handle, "w", encoding=locale.getpreferredencoding(False), errors="replace") as out:
            out.write(log)
        statuses, _ = modules.grading.get_logs_eval(spec, path)
    finally:
        os.unlink(path)
    known = {status.value for status in modules.constants.TestStatus}
    return {test: status for test, status in statuses.items() if status in known}


def _probe_task(row: dict, options: SandboxOptions, timeout: float | None = None) -> Task:
    """The row as the SWE-bench loader makes it a task (a one-row file), its lists replaced by placeholders: the
    runs find the real ones. `timeout` replaces the verifier's (SWE-bench's 1800 s) for these runs only: a suite
    with a hanging test would otherwise cost half an hour per run."""
    probe = {**row, "FAIL_TO_PASS": json.dumps([PROBE_TEST]), "PASS_TO_PASS": "[]",
             "problem_statement": row.get("problem_statement") or PROBE_STATEMENT}
    with tempfile.TemporaryDirectory(prefix="leafcost-mine-row-") as scratch:
        path = Path(scratch) / "probe.jsonl"
        path.write_text(json.dumps(probe) + "\n", encoding="utf-8")
        suite = load_swebench_suite(path, cache_dir=options.cache_dir)
    if suite.errors:
        raise Dropped("harness_error", f"the mined row does not load as a SWE-bench task: {suite.errors[0].error}")
    task = suite.tasks[0]
    if timeout is None:
        return task
    verifier = task.config.verifier.model_copy(update={"timeout_sec": timeout})
    return task.model_copy(update={"config": task.config.model_copy(update={"verifier": verifier})})


async def _test_log(task: Task, options: SandboxOptions, *, side: str, number: int) -> str:
    """The eval script's log of one run: with no patch (before) or after the oracle's gold patch (after)."""
    where = f"{side} run {number}"
    try:
        opened = await open_sandbox(task, options, solution=side == "after")
        try:
            if side == "after":
                solved = await run_oracle(opened.sandbox, task)
                if not solved.ok:
                    raise Dropped("harness_error", f"{where}: the solution patch does not apply at the base commit "
                                                   f"(solve.sh exit {solved.exit_code})",
                                  log=solved.stdout + solved.stderr)
            grade = (await verify(opened, task, capture=False)).grade
            log = await opened.read_verifier_file(swebench_grading.TEST_OUTPUT, swebench_grading.LOG_CAP_BYTES)
        finally:
            await opened.close()
    except (BuildError, SandboxError, OSError) as exc:
        raise Dropped("harness_error", f"{where}: {type(exc).__name__}: {_first_line(str(exc))}",
                      log=str(exc)) from None
    if grade.error:
        raise Dropped("harness_error", f"{where}: the verifier gave no verdict ({grade.error}): "
                                       f"{_first_line(grade.detail or '')}", log=grade.output_tail)
    if log is None:
        raise Dropped("harness_error", f"{where}: the verifier wrote no {swebench_grading.TEST_OUTPUT}",
                      log=grade.output_tail)
    text = log.decode("utf-8", "replace")
    if text.startswith(swebench_grading.swebench().constants.APPLY_PATCH_FAIL):
        raise Dropped("harness_error", f"{where}: the verifier could not apply the patch", log=text)
    return text


def _passed(test: str, statuses: dict[str, str]) -> bool:
    return statuses.get(test) in PASSING


_DIFF_GIT = re.compile(r"^diff --git ")


def _test_patch_paths(test_patch: str) -> tuple[list[str], list[str], set[str]]:
    """(paths the patch changes that exist at the base commit, paths it creates, paths it deletes), from git's
    headers: `--- a/X` or `rename from X` names a file at the base, `+++ b/Y` or `rename to Y` one after it."""
    existing: list[str] = []
    created: list[str] = []
    deleted: set[str] = set()
    for old, new in _file_headers(test_patch):
        if old is not None and old not in existing:
            existing.append(old)
        if new is not None and old is None and new not in created:
            created.append(new)
        elif new is not None and old is not None and new != old and new not in created:
            created.append(new)  # a rename's new path does not exist at the base
        if new is None and old is not None:
            deleted.add(old)
    return existing, created, deleted


def _file_headers(patch: str) -> list[tuple[str | None, str | None]]:
    """(old path or None, new path or None) per file of a git diff, read from its header lines only."""
    files: list[dict[str, str | None]] = []
    in_header = False
    for line in patch.splitlines():
        if _DIFF_GIT.match(line):
            old, new = _diff_git_paths(line)
            files.append({"old": old, "new": new})
            in_header = True
        elif line.startswith("@@") or not files:
            in_header = False
        elif in_header:
            _read_header_line(line, files[-1])
    return [(entry["old"], entry["new"]) for entry in files]


def _read_header_line(line: str, entry: dict[str, str | None]) -> None:
    if line.startswith("new file mode"):
        entry["old"] = None
    elif line.startswith("deleted file mode"):
        entry["new"] = None
    elif line.startswith("rename from "):
        entry["old"] = _unquote(line.removeprefix("rename from "))
    elif line.startswith("rename to "):
        entry["new"] = _unquote(line.removeprefix("rename to "))
    elif line.startswith("--- "):
        entry["old"] = _side_path(line[4:], "a/")
    elif line.startswith("+++ "):
        entry["new"] = _side_path(line[4:], "b/")


def _diff_git_paths(line: str) -> tuple[str | None, str | None]:
    """`diff --git a/X b/Y`: the paths of a change without ---/+++ lines (mode-only, binary); a path with spaces
    is split where ` b/` starts, as git itself does for unquoted names."""
    rest = line.removeprefix("diff --git ")
    if rest.startswith('"'):
        end = rest.index('"', 1) + 1 if '"' in rest[1:] else len(rest)
        return _side_path(rest[:end], "a/"), _side_path(rest[end:].strip(), "b/")
    old, separator, new = rest.partition(" b/")
    return (_side_path(old, "a/"), new) if separator else (None, None)


def _side_path(text: str, prefix: str) -> str | None:
    path = _unquote(text.split("\t")[0].strip())
    if path == "/dev/null":
        return None
    return path.removeprefix(prefix)


def _unquote(text: str) -> str:
    """A path as git quotes it (C-style, octal bytes of UTF-8) or as it is."""
    if not (len(text) > 1 and text.startswith('"') and text.endswith('"')):
        return text
    raw = text[1:-1].encode("latin-1", "backslashreplace").decode("unicode_escape")
    return raw.encode("latin-1").decode("utf-8", "replace")


def heredoc_delimiter(text: str, prefix: str = "EOF_") -> str:
    """A here-document delimiter (`prefix` and a hash of `text`) that no line of `text` equals."""
    lines = set(text.splitlines())
    salt = 0
    while True:
        delimiter = prefix + hashlib.sha256(f"{salt}\0{text}".encode()).hexdigest()[:12]
        if delimiter not in lines:
            return delimiter
        salt += 1


def _reset_lines(base_commit: str, existing: list[str], created: list[str]) -> list[str]:
    """The test files as at the base commit: those that exist there checked out (a path missing there would make
    git refuse every path), those the patch creates removed."""
    lines = []
    if existing:
        lines.append(f"git checkout {base_commit} -- {' '.join(map(shlex.quote, existing))}")
    if created:
        lines.append(f"rm -f -- {' '.join(map(shlex.quote, created))}")
    return lines


def _test_line(test_command: str, files: list[str]) -> str:
    quoted = " ".join(map(shlex.quote, files))
    return test_command.replace("{files}", quoted) if "{files}" in test_command else f"{test_command} {quoted}"


def _utc_text(moment: datetime, instance_id: str) -> str:
    """ISO 8601 in UTC as the published datasets write created_at (2024-02-01T09:00:00Z)."""
    if moment.tzinfo is None:
        raise ValueError(f"mined row {instance_id}: created_at has no time zone; give the commit date in UTC")
    return moment.astimezone(timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


def _first_line(text: str) -> str:
    return next((line.strip() for line in text.splitlines() if line.strip()), "")[:300]
