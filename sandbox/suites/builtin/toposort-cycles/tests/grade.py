"""The built-in suite's grader: a task is resolved (reward 1) only when every test named in /tests/tests.json (its
FAIL_TO_PASS and PASS_TO_PASS, as SWE-bench names them) reported "passed", exactly once, and nothing else did.

    python3 -I /tests/grade.py unittest        grade the Python tests in /tests (test_*.py) with unittest
    python3 -I /tests/grade.py run COMMAND...  grade COMMAND, which reports to the fd in $LEAFCOST_RESULTS_FD

The code under test runs inside the test process, as the same user as this script: it can exit early with any
status, print anything, patch the test framework and write /logs/verifier itself. So:
- each test's outcome goes, by id, to a file this script opened before the tests started and that has no name
  (O_TMPFILE); exit status and output count for nothing, and a test that never reported did not pass;
- Python runs isolated (-I: no PYTHONPATH, no user site, no sitecustomize or usercustomize from /app); /app joins
  sys.path after the standard library, once the runner is loaded, so nothing in /app stands in for unittest;
- the unittest runner checks after every test that unittest's classes, its functions' code and the builtins are
  the ones it started with (a patched assertEqual or TestCase.run is reported as tampering);
- this script is a subreaper that nobody can ptrace: every process the tests left behind is killed before the
  verdict is written, and the verdict is written last, replacing any reward file the tests wrote.
Standard library only: it is copied into every task's tests/ from sandbox/suites/grading/ (Harbor tasks are
self-contained), and tests/sandbox/test_builtin_suite_grading.py checks the copies.
"""

from __future__ import annotations

import ctypes
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time

TESTS = "/tests"
APP = "/app"
LOGS = "/logs/verifier"
RESULTS_FD_VARIABLE = "LEAFCOST_RESULTS_FD"
TIMEOUT_SEC = 60.0  # a hung test run is a miss, not a verifier timeout
RESULTS_CAP_BYTES = 1 << 20
_PR_SET_DUMPABLE, _PR_SET_CHILD_SUBREAPER = 4, 36


def main(argv: list[str]) -> int:
    if argv[:1] == ["unittest-runner"]:
        return run_unittest()
    if argv[:1] == ["unittest"]:
        return grade([sys.executable, "-I", os.path.abspath(__file__), "unittest-runner"])
    if argv[:1] == ["run"] and argv[1:]:
        return grade(argv[1:])
    print(__doc__, file=sys.stderr)
    return 2


def grade(command: list[str]) -> int:
    """Runs `command`, kills what it left, writes the verdict. Exits 0 once the verdict is written (whatever it
    is): test.sh writes reward 0 itself when this script dies before that."""
    with open(os.path.join(TESTS, "tests.json"), encoding="utf-8") as handle:  # read before any test code runs
        manifest = json.load(handle)
    expected = [*manifest["FAIL_TO_PASS"], *manifest["PASS_TO_PASS"]]
    problems = [] if _protect_self() else ["cannot become a subreaper: leftover processes could outlive grading"]
    with tempfile.TemporaryFile(dir="/tmp") as results, open(os.path.join(LOGS, "test_output.txt"), "ab") as log:
        problems += _run(command, results, log)
        results.seek(0)
        lines = results.read(RESULTS_CAP_BYTES).decode("utf-8", "replace").splitlines()
    tests, found = _judge(expected, lines)
    problems += found
    resolved = not problems
    summary = {"resolved": resolved, "tests": tests, "problems": problems}
    _replace(os.path.join(LOGS, "test_results.json"), json.dumps(summary, indent=2) + "\n")
    _remove(os.path.join(LOGS, "reward.json"))  # Harbor reads it before reward.txt
    _replace(os.path.join(LOGS, "reward.txt"), "1\n" if resolved else "0\n")
    passed = sum(outcome == "passed" for outcome in tests.values())
    print(f"{passed} of {len(expected)} named tests passed; " + ("resolved" if resolved else "not resolved"))
    for problem in problems:
        print(f"  {problem}")
    return 0


def _protect_self() -> bool:
    """Orphans of the tests become this process's children (so they can be killed), and this process is not
    dumpable (no ptrace, its /proc files belong to root)."""
    try:
        prctl = ctypes.CDLL(None, use_errno=True).prctl
    except (OSError, AttributeError):
        return False
    prctl(_PR_SET_DUMPABLE, 0, 0, 0, 0)
    return prctl(_PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) == 0


def _run(command: list[str], results, log) -> list[str]:
    """The tests in their own session (a kill of their process group never reaches this script), reporting to
    `results`; then every process left behind is killed. What went wrong, as problems."""
    env = {**os.environ, RESULTS_FD_VARIABLE: str(results.fileno())}
    try:
        process = subprocess.Popen(command, stdin=subprocess.DEVNULL, stdout=log, stderr=log, env=env,
                                   pass_fds=(results.fileno(),), start_new_session=True, cwd=APP)
    except OSError as exc:
        return [f"the tests could not start: {exc}"]
    problems = []
    try:
        process.wait(timeout=TIMEOUT_SEC)
    except subprocess.TimeoutExpired:
        problems.append(f"the tests ran longer than {TIMEOUT_SEC:g} s")
    if not _kill_leftovers():
        problems.append("processes left by the tests could not be stopped")
    return problems


def _kill_leftovers(give_up_sec: float = 10.0) -> bool:
    """SIGKILLs every child of this process (the tests and, this being their subreaper, whatever they left) until
    none is left; a forking process is caught on the next round."""
    give_up = time.monotonic() + give_up_sec
    while time.monotonic() < give_up:
        for pid in _children():
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        try:
            if os.waitpid(-1, os.WNOHANG)[0] == 0:
                time.sleep(0.01)
        except ChildProcessError:
            return True
    return False


def _children() -> list[int]:
    me, found = os.getpid(), []
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                with open(f"/proc/{entry}/stat", "rb") as handle:
                    fields = handle.read().rsplit(b")", 1)[1].split()
            except (OSError, IndexError):
                continue
            if int(fields[1]) == me:
                found.append(int(entry))
    return found


def _judge(expected: list[str], lines: list[str]) -> tuple[dict[str, str], list[str]]:
    """Each expected id's outcome ("passed", "failed" or "missing") and every reason the task is not resolved."""
    reported: dict[str, list[str]] = {}
    problems, done = [], False
    for line in lines:
        word, _, rest = line.partition(" ")
        if word in ("passed", "failed"):
            reported.setdefault(rest, []).append(word)
        elif word == "done":
            done = True
        elif word == "tampered" and not problems:
            problems.append(f"the test framework was changed while the tests ran: {rest}")
    tests = {}
    for test_id in expected:
        outcomes = reported.get(test_id, [])
        tests[test_id] = "missing" if not outcomes else "passed" if outcomes == ["passed"] else "failed"
    if not done:
        problems.append("the test run did not finish")
    for outcome in ("failed", "missing"):
        if names := [test_id for test_id, found in tests.items() if found == outcome]:
            problems.append(f"{outcome}: {', '.join(names)}")
    if unexpected := sorted(set(reported) - set(expected)):
        problems.append(f"tests not in tests.json: {', '.join(unexpected)}")
    return tests, problems


def _remove(path: str) -> None:
    """Whatever the tests left at `path`: a file, a link, a directory."""
    if os.path.isdir(path) and not os.path.islink(path):
        shutil.rmtree(path)
    elif os.path.lexists(path):
        os.unlink(path)


def _replace(path: str, text: str) -> None:
    """Written beside, then renamed into place."""
    _remove(path)
    fd, temporary = tempfile.mkstemp(dir=os.path.dirname(path), prefix=".grade-")
    with os.fdopen(fd, "w", encoding="utf-8") as handle:
        handle.write(text)
    os.replace(temporary, path)


# ------------------------------------------------------------------ the unittest runner (inside the test process)


def run_unittest() -> int:
    """Discovers and runs /tests/test_*.py, writing "passed ID" or "failed ID" for each test as it ends, then
    "done". Everything it relies on is loaded, and checked afterwards, before /app is importable."""
    import builtins
    import unittest

    fd = int(os.environ[RESULTS_FD_VARIABLE])
    write = os.write

    class Reporter(unittest.TextTestResult):
        """A test passed when unittest called addSuccess and recorded nothing else for it (a skip, an expected
        failure or a failed subtest is no pass)."""

        def startTest(self, test):
            super().startTest(test)
            self._before, self._succeeded = self._recorded(), False

        def addSuccess(self, test):
            super().addSuccess(test)
            self._succeeded = True

        def addError(self, test, err):  # also a setUpClass or a module that failed outside any test
            super().addError(test, err)
            if not isinstance(test, unittest.TestCase):
                write(fd, f"failed {test.id()}\n".encode())

        def stopTest(self, test):
            super().stopTest(test)
            passed = self._succeeded and self._recorded() == self._before
            write(fd, f"{'passed' if passed else 'failed'} {test.id()}\n".encode())
            if changed := _changed(framework, _framework(owners)):
                write(fd, f"tampered {', '.join(changed[:5])}\n".encode())

        def _recorded(self):
            return (len(self.failures), len(self.errors), len(self.skipped), len(self.expectedFailures),
                    len(self.unexpectedSuccesses))

    owners = (builtins, unittest.case, unittest.result, unittest.suite, unittest.loader, unittest.runner,
              sys.modules[__name__], Reporter)
    framework = _framework(owners)
    # Bytecode of its own: never a .pyc the agent's runs left in /app (stale when an edit kept mtime and size).
    sys.pycache_prefix = tempfile.mkdtemp(prefix="leafcost-pycache-")
    sys.path.insert(_after_stdlib(sys.path), APP)
    suite = unittest.defaultTestLoader.discover(TESTS, pattern="test_*.py", top_level_dir=TESTS)
    runner = unittest.TextTestRunner(stream=sys.stderr, verbosity=2, resultclass=Reporter)
    runner.run(suite)
    write(fd, b"done\n")
    return 0


def _framework(owners) -> dict[str, object]:
    """Every name the verdict rests on, with its object: module globals, the attributes of the classes defined
    there, and their functions' code (replaceable in place)."""
    found: dict[str, object] = {}
    for owner in owners:
        prefix = f"{owner.__module__}.{owner.__qualname__}" if isinstance(owner, type) else owner.__name__
        for name, value in list(vars(owner).items()):
            found[f"{prefix}.{name}"] = value
            if hasattr(value, "__code__"):
                found[f"{prefix}.{name}.__code__"] = value.__code__
            if isinstance(value, type) and value.__module__ == prefix != "builtins":  # built-in types are immutable
                found.update(_framework([value]))
    return found


def _changed(before: dict[str, object], after: dict[str, object]) -> list[str]:
    missing = object()
    return [name for name, value in before.items() if after.get(name, missing) is not value]


def _after_stdlib(path: list[str]) -> int:
    """Where /app goes: after the standard library (no module of the code under test can replace one the runner
    imports later), before installed packages (the code under test wins over a namesake there)."""
    for index, entry in enumerate(path):
        if entry.endswith(("site-packages", "dist-packages")):
            return index
    return len(path)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
