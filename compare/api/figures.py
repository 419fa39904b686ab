"""The figures of one ledger as served: a run's state, and the summary, comparison and break-even documents,
those of finished runs kept in memory (a small LRU) while the file is unchanged on disk."""

from __future__ import annotations

import json
import threading
from collections import OrderedDict
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from fastapi.responses import Response

from compare.api.errors import ApiError, detail_list
from compare.ledger import LedgerAccess, LedgerBusy, Stamp
from compare.stats import DEFAULT_RESAMPLES, DEFAULT_SEED
from compare.summary import dumps

CACHE_ENTRIES = 128
JSON = "application/json"


@dataclass(frozen=True)
class RunState:
    run_id: str
    status: str
    updated_at: datetime
    spec: dict[str, Any]

    @property
    def arm_names(self) -> list[str]:
        return [arm["name"] for arm in self.spec.get("arms", [])]

    def require_arms(self, names: Sequence[str]) -> None:
        unknown = [n for n in names if n not in self.arm_names]
        if unknown:
            raise ApiError(404, f"run {self.run_id} has no arm {', '.join(map(repr, unknown))} (its arms: "
                                f"{', '.join(self.arm_names)})")


def run_state(conn, run_id: str) -> RunState:
    """The run's status and spec, or a 404 naming recent runs (as `leafcost summary` does)."""
    row = conn.execute("SELECT status, updated_at, spec_json FROM runs WHERE run_id = ?", [run_id]).fetchone()
    if row is None:
        known = [r[0] for r in conn.execute("SELECT run_id FROM runs ORDER BY created_at DESC LIMIT 5").fetchall()]
        hint = f" (recent runs: {', '.join(known)})" if known else " (this ledger has no runs)"
        raise ApiError(404, f"no run {run_id!r} in this ledger{hint}")
    return RunState(run_id=run_id, status=row[0], updated_at=row[1], spec=json.loads(row[2]))


def validated_spec(run: RunState):
    from compare.spec import RunSpec

    try:
        return RunSpec.model_validate(run.spec)
    except ValueError as exc:  # a spec this leafcost no longer accepts: nothing to price it with
        raise ApiError(422, detail_list(f"run {run.run_id}: its spec does not validate: {exc}")) from None


@dataclass(frozen=True)
class Outcome:
    """A figure's answer as served: status, the exact bytes, and the parsed document for in-process users."""

    status_code: int
    body: bytes
    document: dict[str, Any] | None = None

    def response(self) -> Response:
        return Response(content=self.body, status_code=self.status_code, media_type=JSON)


@dataclass(frozen=True)
class _Entry:
    outcome: Outcome
    updated_at: datetime
    stamp: Stamp


class Figures:
    """The run figures of one ledger; those of finished runs are kept (LRU), keyed by (kind, run_id, params)."""

    def __init__(self, access: LedgerAccess, max_entries: int = CACHE_ENTRIES):
        self._access = access
        self._max = max_entries
        self._entries: OrderedDict[tuple, _Entry] = OrderedDict()
        self._lock = threading.Lock()
        # One computation per key at a time (concurrent first requests wait for it); striped to stay bounded.
        self._compute_locks = [threading.Lock() for _ in range(32)]

    def summary(self, run_id: str, resamples: int = DEFAULT_RESAMPLES, seed: int = DEFAULT_SEED, *,
                strict: bool | None = None) -> Outcome:
        """`strict`: count flagged attempts as not resolved (None: as the run was started)."""
        from compare.summary import summarize

        def compute(conn, run: RunState) -> Outcome:
            return ok(summarize(conn, run_id, resamples=resamples, seed=seed, strict=strict))
        return self.get(("summary", run_id, resamples, seed, strict), run_id, compute)

    def summary_document(self, run_id: str, resamples: int = DEFAULT_RESAMPLES,
                         seed: int = DEFAULT_SEED) -> dict[str, Any]:
        """The summary as a dict (shared: do not modify it); what the web page renders, from the same cache."""
        return self.summary(run_id, resamples, seed).document

    def compare(self, run_id: str, arm_a: str, arm_b: str, *, allow_mismatch: bool, resamples: int,
                seed: int) -> Outcome:
        from compare.comparison import UnfairComparison, compare_arms

        def compute(conn, run: RunState) -> Outcome:
            run.require_arms([arm_a, arm_b])
            try:
                document = compare_arms(conn, run_id, arm_a, arm_b, allow_mismatch=allow_mismatch,
                                        resamples=resamples, seed=seed)
            except UnfairComparison as exc:
                detail = ("the arms are not comparable: " + "; ".join(exc.differences) + " (pass "
                          "allow_mismatch=true to compare anyway; the output then lists these differences)")
                body = json.dumps({"detail": detail, "differences": exc.differences}, ensure_ascii=False,
                                  separators=(",", ":")).encode()
                return Outcome(409, body)
            return ok(document)
        return self.get(("compare", run_id, arm_a, arm_b, allow_mismatch, resamples, seed), run_id, compute)

    def breakeven(self, run_id: str, self_hosted: str, hosted: str, *, gpu_usd_per_hour: float | None,
                  utilization: float | None) -> Outcome:
        """From the (cached) summary's arm entries: an arm's entry does not depend on the other arms, so these
        are the entries `leafcost breakeven` computes for the pair."""
        from compare.breakeven import breakeven_document

        document = self.summary_document(run_id)
        entries = {arm["arm"]: arm for arm in document["arms"]}
        unknown = [n for n in (self_hosted, hosted) if n not in entries]
        if unknown:
            raise ApiError(404, f"run {run_id} has no arm {', '.join(map(repr, unknown))} (its arms: "
                                f"{', '.join(entries)})")
        return ok(breakeven_document(run_id, entries[self_hosted], entries[hosted],
                                     gpu_usd_per_hour=gpu_usd_per_hour, utilization=utilization))

    def get(self, key: tuple, run_id: str, compute: Callable[[Any, RunState], Outcome]) -> Outcome:
        stamp = self._access.stamp()
        entry = self._cached(key)
        if entry is not None and entry.stamp == stamp:
            return entry.outcome
        with self._compute_locks[hash(key) % len(self._compute_locks)]:
            entry = self._cached(key)
            if entry is not None and entry.stamp == stamp:
                return entry.outcome
            try:
                with self._access.reading() as conn:
                    run = run_state(conn, run_id)
                    unchanged = entry is not None and run.status == "finished" and run.updated_at == entry.updated_at
                    outcome = entry.outcome if unchanged else compute(conn, run)
            except LedgerBusy:
                if entry is not None:  # another process writes the file; this finished run's figures stand
                    return entry.outcome
                raise
            if run.status == "finished":
                self._store(key, _Entry(outcome, run.updated_at, stamp))
            return outcome

    def _cached(self, key: tuple) -> _Entry | None:
        with self._lock:
            entry = self._entries.get(key)
            if entry is not None:
                self._entries.move_to_end(key)
            return entry

    def _store(self, key: tuple, entry: _Entry) -> None:
        with self._lock:
            self._entries[key] = entry
            self._entries.move_to_end(key)
            while len(self._entries) > self._max:
                self._entries.popitem(last=False)


def ok(document: dict[str, Any]) -> Outcome:
    return Outcome(200, dumps(document).encode(), document)
