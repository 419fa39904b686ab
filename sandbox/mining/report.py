"""The mining report: every candidate looked at, kept or dropped and why, written as `report.json` beside the mined
rows after each candidate, so a run that stops (an error, a kill) leaves the report of what it mined."""

from __future__ import annotations

import os
import tempfile
from collections import Counter
from datetime import datetime
from pathlib import Path

from pydantic import BaseModel, Field

REPORT_FILE = "report.json"
ROWS_FILE = "tasks.jsonl"


class CandidateResult(BaseModel):
    """One candidate: `kept` with its task's test lists, or dropped with one of errors.DROP_REASONS and a line."""

    sha: str
    subject: str
    committed_at: datetime
    kept: bool
    reason: str | None = None  # why dropped (errors.DROP_REASONS)
    detail: str | None = None
    log: str | None = None  # the step's log, relative to the output directory
    instance_id: str | None = None
    image: str | None = None
    fail_to_pass: int = 0
    pass_to_pass: int = 0
    flaky_tests: int = 0
    instruction_source: str | None = None
    built: bool = False  # its environment was detected and built (what --limit counts)
    describe_spent: dict | None = None  # --describe-with's call: prompt_tokens, completion_tokens, cost_usd
    seconds: float = 0.0
    build_seconds: float = 0.0  # of `seconds`, building its env and instance images (0 when found built)


class MiningReport(BaseModel):
    """What `leafcost mine` did: the scan's counts, each candidate's result, and the run's error if it stopped."""

    repository: str
    repo_name: str
    head: str | None = None
    started_at: datetime
    seconds: float = 0.0
    options: dict = Field(default_factory=dict)
    commits_seen: int = 0
    scan_dropped: dict[str, int] = Field(default_factory=dict)  # commits that were no candidate, by reason
    candidates: list[CandidateResult] = Field(default_factory=list)
    error: str | None = None  # the line that stopped the run early, if one did
    limit_reached: bool = False  # --limit candidates were built and tested; later candidates were not looked at
    finished: bool = False

    @property
    def kept(self) -> int:
        return sum(result.kept for result in self.candidates)

    def dropped(self) -> dict[str, int]:
        """Candidates dropped after the scan (environment, tests, instruction), by reason."""
        return dict(Counter(result.reason for result in self.candidates if not result.kept and result.reason))

    def summary(self) -> dict:
        """The counts a reader wants first (also the `--json` summary)."""
        return {"commits_seen": self.commits_seen, "candidates": len(self.candidates), "kept": self.kept,
                "dropped": {**self.scan_dropped, **_added(self.scan_dropped, self.dropped())},
                "flaky_tests": sum(result.flaky_tests for result in self.candidates),
                "built": sum(result.built for result in self.candidates), "limit_reached": self.limit_reached,
                "describe_usd": _describe_usd(self.candidates)}


def _describe_usd(results: list[CandidateResult]) -> float | None:
    """What --describe-with's calls cost in all (None when no call was priced)."""
    costs = [spent.get("cost_usd") for result in results if (spent := result.describe_spent)]
    priced = [cost for cost in costs if cost is not None]
    return round(sum(priced), 6) if priced else None


def _added(first: dict[str, int], second: dict[str, int]) -> dict[str, int]:
    return {reason: first.get(reason, 0) + count for reason, count in second.items()}


def write_report(report: MiningReport, out: Path) -> Path:
    """report.json in `out`, replaced atomically (a reader never sees half a report)."""
    out.mkdir(parents=True, exist_ok=True)
    path = out / REPORT_FILE
    document = report.model_dump_json(indent=2)
    handle, staging = tempfile.mkstemp(prefix=".report-", suffix=".json", dir=out)
    try:
        with os.fdopen(handle, "w", encoding="utf-8") as stream:
            stream.write(document + "\n")
        os.replace(staging, path)
    except BaseException:
        Path(staging).unlink(missing_ok=True)
        raise
    return path
