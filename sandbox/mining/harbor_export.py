"""A mined row as a Harbor task directory that stands alone: Harbor (or `leafcost validate` on the directory) runs it
with no SWE-bench grading on the host. The row's image is the environment, its problem statement the instruction, its
gold patch the oracle, and tests/test.sh runs the row's eval script in the agent's container (Harbor's shared
verifier mode) and writes reward.txt itself: 1 when every FAIL_TO_PASS and PASS_TO_PASS test is reported passed in
pytest's -rA summary of that log, read as swebench's parse_log_pytest reads it, else 0.

test.sh reads only the summary: the lines after the last "short test summary info" header within the eval script's
markers, up to pytest's closing `===` line, so a test whose output prints `PASSED <id>` cannot pass another test.
Like SWE-bench's grading it scores 0 when the log holds one of the SWE-bench failure markers, lacks its start or end
marker, or records a non-zero exit status while reporting no failure; unlike it, it never falls back to the whole
log when the marked output holds no result.
"""

from __future__ import annotations

import os
import shlex
import shutil
import tomllib
import uuid
from datetime import timezone
from pathlib import Path

from pydantic import AwareDatetime, Field, ValidationError

from sandbox import swebench_grading
from sandbox.mining.validation import heredoc_delimiter
from sandbox.swebench import AGENT_TIMEOUT_SEC, VERIFIER_TIMEOUT_SEC, WORKDIR, SWEBenchInstance, toml_string

EXPORTED_PARSER = "parse_log_pytest"
EXPORTED_EVAL_TYPE = "pass_and_fail"
# task.toml's [metadata] benchmark of every exported task: how a later export recognises a directory it may replace.
BENCHMARK = "leafcost-mined"
REQUIRED_TESTS_FILE = "required_tests.txt"
# Every character Python's str.split() splits on (str.isspace), newline aside: parse_log_pytest splits each summary
# line on them, so test.sh turns them into spaces before it splits. A unit test checks the list against Python's.
PYTHON_WHITESPACE = ("\t\x0b\x0c\r\x1c\x1d\x1e\x1f \x85\xa0\u1680" + "".join(map(chr, range(0x2000, 0x200b)))
                     + "\u2028\u2029\u202f\u205f\u3000")


class ExportedRow(SWEBenchInstance):
    """The row fields a Harbor export reads: a SWE-bench row's, and the mined row's own date and provenance."""

    created_at: AwareDatetime
    mined_from: str = Field(min_length=1)
    instruction_source: str = Field(min_length=1)


def write_harbor_task(row: dict, directory: Path) -> Path:
    """Writes the row as a Harbor task at `directory` (task.toml, instruction.md, tests/test.sh and eval.sh,
    solution/solve.sh and gold.patch), built in a staging directory and renamed into place. An existing directory
    must be empty or an earlier export of the same instance_id (then it is replaced whole); anything else raises
    FileExistsError. A row that is not a parse_log_pytest, pass_and_fail row, or a test id no pytest summary line
    can hold (empty, or with whitespace), raises ValueError."""
    exported = _exported_row(row)
    directory = Path(directory)
    _check_target(directory, exported.instance_id)
    _write_atomically(directory, _task_files(exported))
    return directory


def _exported_row(row: dict) -> ExportedRow:
    """The row validated for export; ValueError with one line naming the field."""
    label = row.get("instance_id") if isinstance(row.get("instance_id"), str) else "(no instance_id)"
    if row.get("log_parser") != EXPORTED_PARSER:
        raise ValueError(f"row {label}: log_parser {row.get('log_parser')!r} cannot be exported as a Harbor task: its "
                         f"test.sh reads pytest's -rA summary as {EXPORTED_PARSER} does; only {EXPORTED_PARSER} rows "
                         "can be")
    if row.get("eval_type") != EXPORTED_EVAL_TYPE:
        raise ValueError(f"row {label}: eval_type {row.get('eval_type')!r} cannot be exported as a Harbor task: its "
                         f"test.sh requires every listed test to pass ({EXPORTED_EVAL_TYPE})")
    try:
        exported = ExportedRow.model_validate(row)
    except ValidationError as exc:
        error = exc.errors()[0]
        where = ".".join(str(part) for part in error["loc"]) or "(top level)"
        raise ValueError(f"row {label}: {where}: {error['msg'].removeprefix('Value error, ')}") from None
    if not exported.problem_statement.strip():
        raise ValueError(f"row {label}: problem_statement is blank; Harbor needs an instruction")
    for kind, tests in (("FAIL_TO_PASS", exported.FAIL_TO_PASS), ("PASS_TO_PASS", exported.PASS_TO_PASS)):
        for test in tests:
            if test.split() != [test]:
                raise ValueError(f"row {label}: {kind} test {test!r} is empty or has whitespace: {EXPORTED_PARSER} "
                                 "keeps only the first word after a summary line's status, so no log could report "
                                 "it passed; fix the list")
    return exported


def _verifier_script(required: list[str]) -> str:
    """tests/test.sh: the eval script's log to $LOGS/test_output.txt, the required test ids (one a line, none with
    whitespace) to $LOGS/required_tests.txt by a quoted here-document, then awk's verdict to $LOGS/reward.txt."""
    constants = swebench_grading.swebench().constants
    markers = {"start": constants.START_TEST_OUTPUT, "end": constants.END_TEST_OUTPUT,
               "exit_marker": constants.TEST_EXIT_CODE, "bad1": constants.APPLY_PATCH_FAIL,
               "bad2": constants.RESET_FAILED, "bad3": constants.TESTS_ERROR, "bad4": constants.TESTS_TIMEOUT}
    # awk -v reads a backslash as an escape; the program goes inside single quotes.
    assert not any("\\" in text for text in markers.values()) and "'" not in _AWK_GRADER
    variables = " ".join(f"-v {name}={shlex.quote(text)}" for name, text in markers.items())
    ids = "\n".join(required)
    delimiter = heredoc_delimiter(ids, prefix="LEAFCOST_TESTS_")
    return f"""#!/bin/bash
# Harbor verifier of a task mined by leafcost: the row's eval script runs in the agent's container, and the reward is
# 1 iff every FAIL_TO_PASS and PASS_TO_PASS test is PASSED or XFAIL in pytest's -rA summary of its log, read as
# swebench {swebench_grading.SWEBENCH_VERSION}'s parse_log_pytest reads it (leafcost's sandbox/mining/harbor_export.py).
set -uo pipefail
TESTS=/tests
LOGS=/logs/verifier
mkdir -p "$LOGS"
cat > "$LOGS/{REQUIRED_TESTS_FILE}" <<'{delimiter}'
{ids}
{delimiter}
/bin/bash "$TESTS/eval.sh" > "$LOGS/test_output.txt" 2>&1
reward=$(LC_ALL=C awk {variables} '{_AWK_GRADER}' "$LOGS/{REQUIRED_TESTS_FILE}" "$LOGS/test_output.txt")
[ "$reward" = 1 ] || reward=0
echo "$reward" > "$LOGS/reward.txt"
"""


def _task_files(row: ExportedRow) -> dict[str, str]:
    return {
        "task.toml": _task_toml(row),
        "instruction.md": row.problem_statement,
        "tests/test.sh": _verifier_script(list(dict.fromkeys(row.FAIL_TO_PASS + row.PASS_TO_PASS))),
        "tests/eval.sh": swebench_grading.eval_script(row.eval_script),
        "solution/solve.sh": _SOLVE_SH,
        "solution/gold.patch": row.patch,
    }


def _task_toml(row: ExportedRow) -> str:
    metadata = {"benchmark": BENCHMARK, "instance_id": row.instance_id, "repo": row.repo,
                "base_commit": row.base_commit, "created_at": _utc_text(row), "mined_from": row.mined_from,
                "instruction_source": row.instruction_source, "version": row.version, "log_parser": row.log_parser,
                "eval_type": row.eval_type}
    lines = ['schema_version = "1.2"', "", "[metadata]"]
    lines += [f"{key} = {toml_string(value)}" for key, value in metadata.items()]
    lines += ["", "[agent]", f"timeout_sec = {AGENT_TIMEOUT_SEC}",
              # test.sh grades the agent's own working tree, as a Harbor task does.
              "", "[verifier]", f"timeout_sec = {VERIFIER_TIMEOUT_SEC}", 'environment_mode = "shared"',
              "", "[environment]", f"docker_image = {toml_string(row.image)}", f"workdir = {toml_string(WORKDIR)}",
              "allow_internet = false", ""]
    return "\n".join(lines)


def _utc_text(row: ExportedRow) -> str:
    """created_at as the rows write it (2024-02-01T09:00:00Z): a string, which the freshness split reads."""
    return row.created_at.astimezone(timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


def _check_target(directory: Path, instance_id: str) -> None:
    if directory.is_symlink() or (directory.exists() and not directory.is_dir()):
        raise FileExistsError(f"{directory}: exists and is not a directory; choose another place for the Harbor task")
    if not directory.is_dir() or not any(directory.iterdir()):
        return
    if _exported_instance(directory) != instance_id:
        raise FileExistsError(f"{directory}: not empty and not an earlier Harbor export of {instance_id}; remove it or "
                              "choose another directory")


def _exported_instance(directory: Path) -> str | None:
    """The instance_id of the leafcost export at `directory`, or None when it is not one."""
    try:
        metadata = tomllib.loads((directory / "task.toml").read_text(encoding="utf-8")).get("metadata", {})
    except (OSError, UnicodeDecodeError, tomllib.TOMLDecodeError):
        return None
    if not isinstance(metadata, dict) or metadata.get("benchmark") != BENCHMARK:
        return None
    instance_id = metadata.get("instance_id")
    return instance_id if isinstance(instance_id, str) else None


def _write_atomically(directory: Path, files: dict[str, str]) -> None:
    """Writes `files` in a hidden staging directory beside `directory` (Harbor suites skip dot-names), then renames it
    into place; an earlier export is moved aside first and removed after, or put back if the rename fails."""
    directory.parent.mkdir(parents=True, exist_ok=True)
    staging = directory.parent / f".exporting-{directory.name}-{uuid.uuid4().hex[:8]}"
    replaced = directory.parent / f".replaced-{directory.name}-{uuid.uuid4().hex[:8]}"
    try:
        for relative, text in files.items():
            target = staging / relative
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_bytes(text.encode("utf-8"))
            if relative.endswith(".sh"):
                target.chmod(0o755)
        if directory.is_dir() and any(directory.iterdir()):
            os.rename(directory, replaced)
            try:
                os.rename(staging, directory)
            except OSError:
                os.rename(replaced, directory)
                raise
        else:
            os.rename(staging, directory)  # over an empty directory too
    finally:
        shutil.rmtree(staging, ignore_errors=True)
        shutil.rmtree(replaced, ignore_errors=True)


def _awk_bytes(text: str) -> str:
    """`text`'s UTF-8 bytes as awk octal escapes, for a regex awk reads byte by byte (LC_ALL=C)."""
    return "".join(f"\\{byte:03o}" for byte in text.encode("utf-8"))


_SOLVE_SH = f"""#!/bin/bash
# The mined commit's own change (the gold patch): the oracle that proves the task solvable.
set -euo pipefail
cd {WORKDIR}
git apply -v /solution/gold.patch
"""

# The verdict, one pass over the required ids (first file) and the log (second). It follows swebench's get_logs_eval
# and parse_log_pytest: lines split as Python's text mode splits them (\r\n, \r, \n); the text between the first
# start marker and the next end (or start) marker; a line that starts with a status word (FAILED lines with " - "
# made " "), split on Python's whitespace, records status[word 2] = word 1, a later line winning, `SKIPPED [N]`
# skipped; a test passed iff PASSED or XFAIL. Only the lines after the last summary header count, up to the closing
# `=` line. Why a test failed goes to stderr.
_AWK_GRADER = r"""
BEGIN { RS = "\r\n|\r|\n"; ws = "WHITESPACE"; header = "^=+ short test summary info =+ *$" }
FILENAME == ARGV[1] { required[$0] = 1; next }
{
  line = $0
  if (index(line, bad1) || index(line, bad2) || index(line, bad3) || index(line, bad4)) bad = 1
  if (index(line, end)) seen_end = 1
  if (exit_code == "") find_exit_code(line)
  if (state == 0) {
    at = index(line, start)
    if (!at) next
    state = 1
    line = substr(line, at + length(start))
  }
  if (state != 1) next
  cut = index(line, end); again = index(line, start)
  if (again && (!cut || again < cut)) cut = again
  if (cut) { line = substr(line, 1, cut - 1); state = 2 }
  if (line ~ header) { split("", status); in_summary = 1; found = 0 }
  else if (in_summary && substr(line, 1, 1) == "=") in_summary = 0
  else if (in_summary) record(line)
}
function find_exit_code(text,    at, rest) {
  while ((at = index(text, exit_marker ":")) > 0) {
    rest = substr(text, at + length(exit_marker) + 1)
    sub(/^[ \t\r\f\v]*/, "", rest)
    if (match(rest, /^-?[0-9]+/)) { exit_code = substr(rest, 1, RLENGTH); return }
    text = substr(text, at + 1)
  }
}
function complain(why) { print why > "/dev/stderr"; print 0 }
function record(text,    words, n) {
  if (text !~ /^(FAILED|PASSED|SKIPPED|ERROR|XFAIL)/) return
  if (text ~ /^FAILED/) gsub(/ - /, " ", text)
  gsub(ws, " ", text)
  n = split(text, words, " ")
  if (n < 2) return
  if (words[1] == "SKIPPED" && words[2] ~ /^\[[0-9]+\]$/) return
  status[words[2]] = words[1]
  found = 1
}
END {
  if (state == 0 || !seen_end) { complain("the log has no test output between the SWE-bench markers"); exit }
  if (bad) { complain("the log holds one of the SWE-bench failure markers"); exit }
  failing = 0
  for (test in status) if (status[test] == "FAILED" || status[test] == "ERROR") failing = 1
  if (exit_code != "" && exit_code + 0 != 0 && found && !failing) {
    complain("the tests exited " exit_code " but the summary reports no failure"); exit
  }
  reward = 1
  for (test in required) {
    if (!(test in status)) { print "not in the summary: " test > "/dev/stderr"; reward = 0 }
    else if (status[test] != "PASSED" && status[test] != "XFAIL") {
      print status[test] ": " test > "/dev/stderr"; reward = 0
    }
  }
  print reward
}
""".replace("WHITESPACE", "|".join(_awk_bytes(c) for c in PYTHON_WHITESPACE if c not in " \t"))
