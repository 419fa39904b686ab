"""Grades one SWE-bench instance inside the sandbox: parses the test log, checks FAIL_TO_PASS and PASS_TO_PASS,
writes Harbor's reward.json. Standard library only: it is copied into /tests and run by the sandbox's python3.

Test names follow SWE-bench's log parsers, so the ids in an instance's FAIL_TO_PASS match what is parsed here:
pytest's `-rA` short summary gives node ids (`tests/test_x.py::test_a[1]`), unittest's verbose output gives
`test_a (module.Class)`. A test missing from the log counts as failed, as in SWE-bench.

    python3 swebench_grader.py SPEC.json TEST_OUTPUT REWARD.json    grade a test run
    python3 swebench_grader.py --fail REASON REWARD.json [LOG]      reward 0 with a reason (no test run)
"""

from __future__ import annotations

import json
import os
import re
import sys

PASSED, FAILED, ERROR, SKIPPED, XFAIL, XPASS = "PASSED", "FAILED", "ERROR", "SKIPPED", "XFAIL", "XPASS"
# SWE-bench's `test_passed`: an expected failure is a pass, everything else (skipped, missing) is not.
PASSING = {PASSED, XFAIL}
_PYTEST_STATUSES = (PASSED, FAILED, ERROR, SKIPPED, XFAIL, XPASS)
_UNITTEST_OUTCOMES = {"ok": PASSED, "FAIL": FAILED, "ERROR": ERROR, "expected failure": XFAIL,
                      "unexpected success": FAILED}
# `test_name (dotted.path)` at the start of a unittest verbose line; the path ends with `.test_name` on 3.11+.
_UNITTEST_TEST = re.compile(r"^(\w+) \(([\w.]+)\)")
_UNITTEST_SUMMARY = re.compile(r"^(FAIL|ERROR): (\w+) \(([\w.]+)\)")


def parse_pytest(log: str) -> dict[str, str]:
    """pytest `-rA` short summary lines (`PASSED id`, `FAILED id - message`, ...) → {node id: status}."""
    statuses: dict[str, str] = {}
    for line in log.splitlines():
        status, _, rest = line.strip().partition(" ")
        if status not in _PYTEST_STATUSES or not rest.strip():
            continue
        node_id = _pytest_node_id(rest.strip())
        _record(statuses, node_id, status)
        # SWE-bench's own parser keeps only the first word; ids with spaces in parameters are kept both ways.
        first_word = rest.split()[0]
        if first_word != node_id:
            statuses.setdefault(first_word, status)
    return statuses


def parse_unittest(log: str) -> dict[str, str]:
    """unittest verbose output (`test_a (module.Class) ... ok`) → {`test_a (module.Class)`: status}.

    Python 3.11+ prints `test_a (module.Class.test_a)`; both spellings are recorded, so FAIL_TO_PASS ids of
    either form match. A test's output between its name and its verdict, and docstring lines, are skipped."""
    statuses: dict[str, str] = {}
    pending: list[str] = []
    for raw in log.splitlines():
        line = raw.strip()
        summary = _UNITTEST_SUMMARY.match(line)
        if summary:  # the `FAIL: test (path)` headers after the run; subtest failures only show up here
            for name in _unittest_names(summary.group(2), summary.group(3)):
                _record(statuses, name, FAILED if summary.group(1) == "FAIL" else ERROR)
            continue
        test = _UNITTEST_TEST.match(line)
        if test:
            pending = _unittest_names(test.group(1), test.group(2))
        if not pending:
            continue
        verdict = line.rpartition(" ... ")[2] if " ... " in line else (line if not test else "")
        status = _unittest_status(verdict)
        if status:
            for name in pending:
                _record(statuses, name, status)
            pending = []
    return statuses


PARSERS = {"pytest": parse_pytest, "unittest": parse_unittest}


def grade(statuses: dict[str, str], fail_to_pass: list[str], pass_to_pass: list[str]) -> dict:
    """The reward.json body: resolved (reward 1.0) iff every FAIL_TO_PASS and PASS_TO_PASS test passed."""

    def split(tests: list[str]) -> dict[str, list[str]]:
        passed = [t for t in tests if statuses.get(t) in PASSING]
        missing = [t for t in tests if t not in statuses]
        failed = [t for t in tests if statuses.get(t) not in PASSING]
        return {"passed": passed, "failed": failed, "missing": missing}

    f2p, p2p = split(fail_to_pass), split(pass_to_pass)
    resolved = not f2p["failed"] and not p2p["failed"]
    return {"reward": 1.0 if resolved else 0.0, "fail_to_pass": f2p, "pass_to_pass": p2p}


def grade_files(spec_path: str, log_path: str, reward_path: str) -> dict:
    with open(spec_path, encoding="utf-8") as handle:
        spec = json.load(handle)
    try:
        with open(log_path, encoding="utf-8", errors="replace") as handle:
            log = handle.read()
    except FileNotFoundError:
        log = ""
    statuses = PARSERS[spec["log_parser"]](log)
    result = grade(statuses, spec["fail_to_pass"], spec["pass_to_pass"])
    if not statuses:
        result["reason"] = f"no test results found in {log_path} by the {spec['log_parser']} parser"
    _write_json(reward_path, result)
    return result


def fail(reason: str, reward_path: str, log_path: str | None = None) -> dict:
    detail = ""
    if log_path:
        try:
            with open(log_path, encoding="utf-8", errors="replace") as handle:
                detail = handle.read()[-2000:]
        except OSError:
            pass
    result = {"reward": 0.0, "reason": reason, "detail": detail}
    _write_json(reward_path, result)
    return result


def main(argv: list[str]) -> int:
    if len(argv) >= 3 and argv[0] == "--fail":
        fail(argv[1], argv[2], argv[3] if len(argv) > 3 else None)
        return 0
    if len(argv) != 3:
        sys.stderr.write(__doc__ or "")
        return 2
    result = grade_files(*argv)
    summary = {key: len(result[key]["failed"]) for key in ("fail_to_pass", "pass_to_pass")}
    print(f"swebench grader: reward {result['reward']}, failed {summary}")
    return 0


def _pytest_node_id(rest: str) -> str:
    """The node id before ` - message`; a ` - ` inside unbalanced parameter brackets is part of the id."""
    parts = rest.split(" - ")
    node_id = parts[0]
    for part in parts[1:]:
        if node_id.count("[") <= node_id.count("]"):
            break
        node_id += " - " + part
    return node_id.strip()


def _unittest_names(name: str, path: str) -> list[str]:
    if path.endswith("." + name):
        return [f"{name} ({path[:-len(name) - 1]})", f"{name} ({path})"]
    return [f"{name} ({path})", f"{name} ({path}.{name})"]


def _unittest_status(verdict: str) -> str | None:
    verdict = verdict.strip()
    if verdict.startswith("skipped"):
        return SKIPPED
    return _UNITTEST_OUTCOMES.get(verdict)


def _record(statuses: dict[str, str], name: str, status: str) -> None:
    """A failure sticks: a later `ok` for the same name (a rerun, a subtest summary) does not hide it."""
    if statuses.get(name) in (FAILED, ERROR) and status not in (FAILED, ERROR):
        return
    statuses[name] = status


def _write_json(path: str, value: dict) -> None:
    os.makedirs(os.path.dirname(path) or ".", exist_ok=True)
    temporary = f"{path}.tmp"
    with open(temporary, "w", encoding="utf-8") as handle:
        json.dump(value, handle, indent=2)
    os.replace(temporary, path)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
