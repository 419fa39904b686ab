"""SWE-bench's own grading, run on the host over the test log its eval script printed in the instance's container:
`swebench` 5.0.2's log parsers, its exit-code cross-check and `get_eval_report`, field for field. Our code is the
glue: loading those modules, the TestSpec, and the script that applies the model's patch as SWE-bench's harness does.

`swebench.harness`'s `__init__` imports the package's Docker, Modal and dataset drivers (docker, modal, datasets:
~450 MB) that grading never touches. The grading modules themselves need only the standard library and unidiff, so
leafcost installs `swebench` without its dependencies and registers a bare `swebench.harness` package before
importing them: the modules run exactly as published, their package's `__init__` does not run.
"""

from __future__ import annotations

import importlib
import importlib.util
import locale
import os
import shlex
import sys
import tempfile
import types
from functools import cache
from pathlib import Path
from typing import Any

from sandbox.tasks import SuiteError, SWEBenchFacts

SWEBENCH_VERSION = "5.0.2"
INSTALL_HINT = f"pip install --no-deps swebench=={SWEBENCH_VERSION} unidiff==1.0.1 (make does this)"
# Where SWE-bench's harness puts the model's patch, and the log of the eval script it grades.
PATCH_PATH = "/tmp/patch.diff"
EVAL_SCRIPT_PATH = "/tests/eval.sh"
TEST_OUTPUT = "test_output.txt"
LOG_CAP_BYTES = 64 << 20
# SWE-bench's harness's GIT_APPLY_CMDS, in its order (its module imports docker, so the list is restated here).
APPLY_TRIES = ("git apply --verbose", "git apply --verbose --3way", "git apply --verbose --reject",
               "patch --batch --forward --fuzz=5 -p1 -i")


class SWEBenchUnavailable(SuiteError):
    """The pinned `swebench` package is missing or another release: no SWE-bench suite can be loaded."""


@cache
def swebench() -> types.SimpleNamespace:
    """SWE-bench's grading modules: constants, grading, log_parsers and types."""
    spec = importlib.util.find_spec("swebench")
    if spec is None or not spec.submodule_search_locations:
        raise SWEBenchUnavailable(f"the swebench package is not installed: {INSTALL_HINT}")
    root = Path(next(iter(spec.submodule_search_locations)))
    if "swebench.harness" not in sys.modules:
        harness = types.ModuleType("swebench.harness")
        harness.__path__ = [str(root / "harness")]
        sys.modules["swebench.harness"] = harness
    try:
        package = importlib.import_module("swebench")
        modules = {name: importlib.import_module(f"swebench.{name}")
                   for name in ("harness.constants", "harness.grading", "harness.log_parsers", "types")}
    except ImportError as exc:
        raise SWEBenchUnavailable(f"swebench's grading modules do not import ({exc}): {INSTALL_HINT}") from None
    if package.__version__ != SWEBENCH_VERSION:
        raise SWEBenchUnavailable(f"swebench {package.__version__} is installed; leafcost is checked against "
                                  f"{SWEBENCH_VERSION}: {INSTALL_HINT}")
    return types.SimpleNamespace(**{name.rsplit(".", 1)[-1]: module for name, module in modules.items()})


def parser_names() -> frozenset[str]:
    return frozenset(swebench().log_parsers.PARSER_REGISTRY)


def eval_type_names() -> frozenset[str]:
    return frozenset(kind.value for kind in swebench().constants.EvalType)


def eval_script(dataset_script: str) -> str:
    """The eval script as SWE-bench's harness runs it: the dataset's, with the test command's own exit status
    recorded after the end marker (`record_test_exit_code`), which grading cross-checks against the log."""
    constants = swebench().constants
    lines = [line for line in dataset_script.strip().split("\n") if line not in ("#!/bin/bash", "set -uxo pipefail")]
    for i, line in enumerate(lines):
        if constants.END_TEST_OUTPUT in line:
            lines[i:i + 1] = [f"{constants.TEST_EXIT_CODE_VAR}=$?", line,
                              f'echo "{constants.TEST_EXIT_CODE}: ${constants.TEST_EXIT_CODE_VAR}"']
            break
    return "\n".join(["#!/bin/bash", "set -uxo pipefail", *lines]) + "\n"


def verifier_script(workdir: str) -> str:
    """test.sh of a SWE-bench task: SWE-bench's harness steps in the verifier's fresh container. The model's patch
    (at PATCH_PATH; none for an empty attempt, run as SWE-bench's no-patch check) is applied by the same chain of
    commands, a failed try undone before the next; then the eval script, its stdout and stderr as one log."""
    constants = swebench().constants
    log = f"/logs/verifier/{TEST_OUTPUT}"
    return f"""#!/bin/bash
# SWE-bench's evaluation of one prediction (leafcost's glue; swebench {SWEBENCH_VERSION} grades the log on the host).
cd {shlex.quote(workdir)} || exit 1
if [ -s {PATCH_PATH} ]; then
  applied=""
  {_apply_chain()}
  if [ -z "$applied" ] && git apply --check --reverse {PATCH_PATH} >> /logs/verifier/apply.txt 2>&1; then
    applied=1
  fi
  if [ -z "$applied" ]; then
    {{ echo {shlex.quote(constants.APPLY_PATCH_FAIL)}; cat /logs/verifier/apply.txt; }} > {log}
    exit 0
  fi
  echo {shlex.quote(constants.APPLY_PATCH_PASS)} >> /logs/verifier/apply.txt
fi
/bin/bash {EVAL_SCRIPT_PATH} > {log} 2>&1
"""


def _apply_chain() -> str:
    steps = []
    for i, command in enumerate(APPLY_TRIES):
        undo = "git checkout -- . ; git clean -fd; " if i else ""
        steps.append(f'[ -n "$applied" ] || {{ {undo}{command} {PATCH_PATH} >> /logs/verifier/apply.txt 2>&1 '
                     f'&& applied=1; }}')
    return "\n  ".join(steps)


def grade_log(facts: SWEBenchFacts, log: bytes, model_patch: str) -> dict[str, Any]:
    """SWE-bench's report for one prediction (`get_eval_report`, with every test's status): `resolved`,
    `patch_successfully_applied`, `tests_status` with FAIL_TO_PASS/PASS_TO_PASS success and failure lists, ..."""
    modules = swebench()
    spec = modules.types.TestSpec(instance_id=facts.instance_id, image=facts.image, eval_script_list=[],
                                  repo=facts.repo, version=facts.version, FAIL_TO_PASS=facts.fail_to_pass,
                                  PASS_TO_PASS=facts.pass_to_pass, log_parser=facts.log_parser,
                                  eval_type=facts.eval_type)
    prediction = {"instance_id": spec.instance_id, "model_name_or_path": "leafcost", "model_patch": model_patch}
    # get_eval_report reads the log from a path: a file of ours, never one inside the sandbox.
    handle, path = tempfile.mkstemp(prefix="leafcost-swebench-", suffix=".txt")
    try:
        # It opens the file as text in the locale's encoding; bytes that are not UTF-8 become U+FFFD first.
        with os.fdopen(handle, "w", encoding=locale.getpreferredencoding(False), errors="replace") as out:
            out.write(log.decode("utf-8", "replace"))
        report = modules.grading.get_eval_report(spec, prediction, path, include_tests_status=True)
    finally:
        os.unlink(path)
    return report[spec.instance_id]


def why_unresolved(report: dict[str, Any]) -> str | None:
    """One line from SWE-bench's report on why an instance is not resolved: the patch, or the tests that failed
    or never ran (SWE-bench counts a test missing from the log as failed)."""
    if report.get("resolved"):
        return None
    if not report.get("patch_successfully_applied"):
        reason = report.get("infra_failure_reason")
        return ("the patch did not apply, or the log holds no test results" + (f" ({reason})" if reason else ""))
    status = report.get("tests_status") or {}
    parts = []
    for kind in ("FAIL_TO_PASS", "PASS_TO_PASS"):
        failed = (status.get(kind) or {}).get("failure") or []
        if failed:
            shown = ", ".join(failed[:5]) + (f", and {len(failed) - 5} more" if len(failed) > 5 else "")
            parts.append(f"{kind} failed or missing from the log: {shown}")
    return "; ".join(parts) or None
