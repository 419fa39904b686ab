"""The built-in suite grades on named tests, reported where the code under test does not write: a planted
sitecustomize, an early exit, a fake "OK", a patched test framework, a killed grader or a reward written by the code
under test resolves no task. Every attack runs through the real local sandbox and Harbor's grading, on every task."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import pytest

from sandbox import BUILTIN_SUITE, load_suite, open_sandbox, run_oracle, verify, write_file

TASKS = {task.task_id: task for task in load_suite("builtin").tasks}
GRADING = BUILTIN_SUITE.parent / "grading"

# Planted beside the code under test: each would exit 0 (or hide the tests) as soon as Python starts or imports.
# The .pth file and sitecustomize's sys.exit resolved nothing on dc38d42 either (/app is no site directory;
# SystemExit there fails Python's startup): they guard against a grader that would let them work.
PLANTED = {
    "sitecustomize_os_exit": {"sitecustomize.py": "import os\nos._exit(0)\n"},
    "sitecustomize_sys_exit": {"sitecustomize.py": "import sys\nsys.exit(0)\n"},
    "usercustomize_os_exit": {"usercustomize.py": "import os\nos._exit(0)\n"},
    "pth_file": {"zz-forge.pth": "import os; os._exit(0)\n"},
    "fake_unittest_module": {"unittest.py": "print('Ran 99 tests in 0.001s\\n\\nOK')\nraise SystemExit(0)\n"},
}

# What the code under test does when the tests load it, per language. Each reward write uses both of Harbor's files.
PY_REWARD = ("open('/logs/verifier/reward.txt', 'w').write('1')\n"
             "open('/logs/verifier/reward.json', 'w').write('{\"reward\": 1}')\n")
PY_LINGER = ("if os.fork() == 0:\n    os.setsid()\n    while True:\n"
             + "".join(f"        {line}\n" for line in PY_REWARD.splitlines()) + "        time.sleep(0.01)\n")
PYTHON = {
    "exit_zero": "import os\nos._exit(0)\n",
    "fake_ok_then_exit": "import os\nprint('Ran 15 tests in 0.01s\\n\\nOK', flush=True)\nos._exit(0)\n",
    "writes_reward": PY_REWARD,
    "writes_reward_and_kills_parent": (f"import os, signal\n{PY_REWARD}"
                                       "os.kill(os.getppid(), signal.SIGKILL)\nos._exit(0)\n"),
    "lingering_process_writes_reward": f"import os, time\n{PY_LINGER}",
    "appends_to_test_sh": "open('/tests/test.sh', 'a').write('\\necho 1 > /logs/verifier/reward.txt\\nexit 0\\n')\n",
    "skips_every_test": "import unittest\nraise unittest.SkipTest('not today')\n",
    "patches_testcase_run": ("import unittest\n"
                             "def run(self, result=None):\n"
                             "    result.startTest(self); result.addSuccess(self); result.stopTest(self)\n"
                             "unittest.TestCase.run = run\n"),
    "patches_assertions": ("import contextlib, unittest\n"  # assertRaises as a context manager too
                           "for name in dir(unittest.TestCase):\n"
                           "    if name.startswith('assert'):\n"
                           "        setattr(unittest.TestCase, name,\n"
                           "                lambda *a, **k: contextlib.suppress(BaseException))\n"),
}
JS_REWARD = ("require('fs').writeFileSync('/logs/verifier/reward.txt', '1');\n"
             "require('fs').writeFileSync('/logs/verifier/reward.json', '{\"reward\": 1}');\n")
NODE = {
    "exit_zero": "process.exit(0);\n",
    "fake_ok_then_exit": "console.log('ok 1 - all\\n1..1\\n# pass 1\\n# fail 0');\nprocess.exit(0);\n",
    "writes_reward": JS_REWARD,
    "writes_reward_and_kills_parent": f"{JS_REWARD}process.kill(process.ppid, 'SIGKILL');\nprocess.exit(0);\n",
    "lingering_process_writes_reward": (
        "require('child_process').spawn('/bin/sh', ['-c', 'while :; do echo 1 > /logs/verifier/reward.txt; "
        "echo \\'{\"reward\": 1}\\' > /logs/verifier/reward.json; sleep 0.01; done'], "
        "{detached: true, stdio: 'ignore'}).unref();\n"),
    "appends_to_test_sh": ("require('fs').appendFileSync('/tests/test.sh', "
                           "'\\necho 1 > /logs/verifier/reward.txt\\nexit 0\\n');\n"),
    "patches_assertions": ("for (const a of [require('assert'), require('assert').strict]) "
                           "for (const k of Object.keys(a)) try { a[k] = () => {}; } catch (e) {}\n"),
}
C_REWARD = ('    FILE *f = fopen("/logs/verifier/reward.txt", "w"); if (f) { fputs("1", f); fclose(f); }\n'
            '    f = fopen("/logs/verifier/reward.json", "w"); if (f) { fputs("{\\"reward\\": 1}", f); fclose(f); }\n')
C_HEAD = ("#define _POSIX_C_SOURCE 200809L\n#include <signal.h>\n#include <stdio.h>\n#include <time.h>\n"
          "#include <unistd.h>\n__attribute__((constructor)) static void forge(void)\n{\n")
C = {
    "exit_zero": f"{C_HEAD}    _exit(0);\n}}\n",
    "fake_ok_then_exit": (f"{C_HEAD}    puts(\"PASS everything\\nPASSED: 0 failing test(s)\");\n"
                          "    fflush(stdout);\n    _exit(0);\n}\n"),
    "writes_reward": f"{C_HEAD}{C_REWARD}}}\n",
    "writes_reward_and_kills_parent": f"{C_HEAD}{C_REWARD}    kill(getppid(), SIGKILL);\n    _exit(0);\n}}\n",
    "lingering_process_writes_reward": (f"{C_HEAD}    struct timespec pause = {{0, 10000000}};\n"
                                        "    if (fork() == 0) {\n        setsid();\n"
                                        f"        for (;;) {{\n{C_REWARD}            nanosleep(&pause, NULL);\n"
                                        "        }\n    }\n}\n"),
    "appends_to_test_sh": (f"{C_HEAD}    FILE *t = fopen(\"/tests/test.sh\", \"a\");\n"
                           "    if (t) {\n        fputs(\"\\necho 1 > /logs/verifier/reward.txt\\nexit 0\\n\", t);\n"
                           "        fclose(t);\n    }\n}\n"),
}
PAYLOADS = {"python": PYTHON, "node": NODE, "c": C}


def language(task) -> str:
    tests = Path(task.tests_dir)
    return "c" if list(tests.glob("*.c")) else "node" if list(tests.glob("*.js")) else "python"


def code_under_test(task, payload: str) -> tuple[str, bytes]:
    """Where the payload goes so that the hidden tests load it, and that file's new content."""
    repo = Path(task.build_context) / "repo"
    kind = language(task)
    if kind == "c":
        return "/app/src/forge.c", payload.encode()
    if kind == "node":
        return "/app/index.js", payload.encode() + (repo / "index.js").read_bytes()
    package = next(p for p in sorted(repo.iterdir()) if (p / "__init__.py").is_file() and p.name != "tests")
    return f"/app/{package.name}/__init__.py", payload.encode() + (package / "__init__.py").read_bytes()


async def graded(task, options, files: dict[str, bytes], *, solution: bool = False):
    """The verifier's verdict on the task's unchanged code with `files` written over it (or on the oracle's fix),
    and the grader's test_results.json."""
    opened = await open_sandbox(task, options, solution=solution)
    try:
        if solution:
            assert (await run_oracle(opened.sandbox, task)).ok
        for path, data in files.items():
            await write_file(opened.sandbox, path, data)
        grade = (await verify(opened, task, capture=False)).grade
        results = await opened.read_verifier_file("test_results.json", 1 << 20)
        return grade, json.loads(results) if results is not None else None
    finally:
        await opened.close()


# The issue's own attack runs on every task in every test run; the whole matrix (about 160 sandboxes) in `make test`.
ATTACKS = [pytest.param(task_id, name, marks=() if name == "sitecustomize_os_exit" else pytest.mark.slow)
           for task_id, task in TASKS.items() for name in [*PLANTED, *PAYLOADS[language(task)]]]


@pytest.mark.parametrize("task_id, attack", ATTACKS)
def test_the_code_under_test_cannot_resolve_a_task_by_itself(task_id, attack, sandbox_options):
    task = TASKS[task_id]
    if attack in PLANTED:
        files = {f"/app/{name}": text.encode() for name, text in PLANTED[attack].items()}
    else:
        files = dict([code_under_test(task, PAYLOADS[language(task)][attack])])
    grade, _ = asyncio.run(graded(task, sandbox_options, files))
    assert grade.resolved is False, grade.output_tail
    assert grade.reward == 0 and grade.error is None, grade  # a verdict, the grader's


@pytest.mark.slow
@pytest.mark.parametrize("task_id", sorted(TASKS))
def test_tests_json_names_each_hidden_test_as_it_behaves(task_id, sandbox_options):
    """Unchanged code: every FAIL_TO_PASS test fails and every PASS_TO_PASS test passes; the oracle passes all."""
    task = TASKS[task_id]
    manifest = json.loads((Path(task.tests_dir) / "tests.json").read_text())
    empty, empty_results = asyncio.run(graded(task, sandbox_options, {}))
    oracle, oracle_results = asyncio.run(graded(task, sandbox_options, {}, solution=True))
    assert empty.resolved is False and oracle.resolved is True, oracle.output_tail
    assert empty_results["tests"] == {**{name: "failed" for name in manifest["FAIL_TO_PASS"]},
                                      **{name: "passed" for name in manifest["PASS_TO_PASS"]}}
    assert set(oracle_results["tests"].values()) == {"passed"} and oracle_results["problems"] == []


@pytest.mark.parametrize("task_id", sorted(TASKS))
def test_every_task_ships_the_shared_grader_and_names_its_tests(task_id):
    tests = Path(TASKS[task_id].tests_dir)
    assert (tests / "grade.py").read_bytes() == (GRADING / "grade.py").read_bytes(), \
        f"copy sandbox/suites/grading/grade.py to {tests}/"
    if language(TASKS[task_id]) == "node":
        assert (tests / "node_reporter.mjs").read_bytes() == (GRADING / "node_reporter.mjs").read_bytes()
    manifest = json.loads((tests / "tests.json").read_text())
    assert manifest["FAIL_TO_PASS"] and manifest["PASS_TO_PASS"]
    script = (tests / "test.sh").read_text()
    assert "python3 -I /tests/grade.py" in script and "PYTHONPATH" not in script


# Writes the reward, then kills test.sh and the grader (test.sh first, so it never writes a reward of its own): the
# reward file holds the forged 1 and nothing the task wrote comes after it.
KILLS_ITS_VERIFIER = PY_REWARD + """import os, signal
def parent(pid):
    return int(open(f'/proc/{pid}/stat').read().rsplit(')', 1)[1].split()[1])
ancestors, pid = [], os.getppid()
while pid > 1:
    command = open(f'/proc/{pid}/cmdline', 'rb').read()
    if b'grade.py' in command or b'test.sh' in command:
        ancestors.append(pid)
    pid = parent(pid)
for pid in reversed(ancestors):
    os.kill(pid, signal.SIGKILL)
os._exit(0)
"""


def test_code_that_writes_a_reward_and_kills_its_verifier_gets_no_verdict(sandbox_options):
    """test.sh ended by a signal wrote no reward of its own: what lies in /logs/verifier is not its verdict, so the
    attempt is a grading error (sandbox.grading's verifier_killed), never resolved."""
    task = TASKS["ledger-rounding"]
    grade, _ = asyncio.run(graded(task, sandbox_options, dict([code_under_test(task, KILLS_ITS_VERIFIER)])))
    assert grade.resolved is False and grade.reward is None, grade
    assert grade.error == "verifier_killed" and "killed by signal 9" in grade.detail, grade
