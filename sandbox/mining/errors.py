"""What stops a mining run (MiningError) and what drops one candidate (Dropped), with the reasons the mining report
counts."""

from __future__ import annotations

# Why a candidate was dropped, as the mining report counts them.
DROP_REASONS = frozenset({
    "merge", "no_parent", "thin_message", "no_tests", "tests_only", "too_many_files", "binary_only",
    "no_project", "install_failed", "tests_not_found", "no_fail_to_pass", "flaky", "leaky_instruction",
    "harness_error",
})


class MiningError(RuntimeError):
    """The whole mining run cannot go on (not a git repository, a date range with no commits, a bad hint file):
    one line a user can act on."""


class Dropped(RuntimeError):
    """One candidate cannot become a task: `reason` is one of DROP_REASONS, str(self) the one-line detail, `log` the
    step's output (an install, a test run) when there is one."""

    def __init__(self, reason: str, detail: str, log: str = ""):
        if reason not in DROP_REASONS:
            raise ValueError(f"unknown drop reason {reason!r}")
        super().__init__(detail)
        self.reason = reason
        self.log = log
