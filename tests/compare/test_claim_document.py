"""The verdict on a run's claim (compare.claim) on a small real ledger written with the ledger's own writer: every
final attempt counted (errors as misses, harness errors beside them), strict grading, the harness-unhealthy verdict
that withholds any other, the contamination gap seen − fresh and its difference against another arm paired by task,
all against hand computation; the verdict words from the per-task counts alone (claim_from_tasks); and
`leafcost claim` through the console script: its page, --json, --strict-grading and its one-line refusals."""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
from datetime import date, datetime
from pathlib import Path

import numpy as np
import pytest

from compare.claim import (ClaimDocument, ClaimTask, claim_document, claim_from_tasks, contamination_gap,
                           difference_of_parts)
from compare.claim_check import check_claim
from compare.claim_spec import ClaimConfig
from compare.ledger import Ledger, LedgerAccess
from compare.stats import Resampler, resolve_rates
from compare.summary import SummaryError

LEAFCOST = Path(sys.executable).with_name("leafcost")
RELEASED = "2024-06-01"
CLAIM = {"title": "FrogNano-4B solves 61.5 % of SWE-bench Verified", "source": "https://example.com/frognano",
         "arm": "frog", "benchmark": "SWE-bench Verified", "instances": 500, "avg_at_k": 0.615, "pass_at_k": 0.71,
         "k": 3, "unconfirmed": ["the vendor's temperature"]}
# Per task, in the run's (deliberately unsorted) order: its creation time, then each arm's three final attempts:
# R resolved, M missed, F resolved with a flagged patch, G a grading error (no verdict: a miss), P a parser
# misconfiguration and I a final infrastructure error (harness errors, misses).
TASKS = {
    "s-03": ("2023-01-05T10:00:00Z", "RRR", "RRM"),
    "s-01": ("2023-02-01T10:00:00Z", "RRM", "RMM"),
    "s-02": ("2023-03-01T10:00:00Z", "RMP", "MMM"),
    "s-04": ("2023-04-01T10:00:00Z", "MMI", "RRR"),
    "s-05": ("2023-05-01T10:00:00Z", "RFM", "RRM"),
    "s-06": ("2024-06-01T23:00:00Z", "GMR", "RMM"),  # on the release day: seen
    "u-07": (None, "RRR", "RRR"),                     # undated: a claim task
    "f-01": ("2024-06-02T00:30:00Z", "MMM", "RMM"),
    "f-02": ("2024-09-01T10:00:00Z", "RMM", "RRM"),
    "f-03": ("2025-01-01T10:00:00Z", "MMR", "MMM"),
}
SEEN = ["s-03", "s-01", "s-02", "s-04", "s-05", "s-06", "u-07"]
FRESH = ["f-01", "f-02", "f-03"]
FINISH = {  # outcome letter → finish_episode's keywords
    "R": {"exit_reason": "agent", "resolved": True, "reward": 1.0},
    "M": {"exit_reason": "agent", "resolved": False, "reward": 0.0},
    "F": {"exit_reason": "agent", "resolved": True, "reward": 1.0, "flagged": True, "hack_paths": ["tests/x.py"]},
    "G": {"exit_reason": "agent", "resolved": False, "reward": None, "grade_error": "verifier timed out"},
    "P": {"exit_reason": "parser_misconfigured", "resolved": False, "reward": None, "harness_error": True},
    "I": {"exit_reason": "infrastructure_error", "resolved": False, "reward": None, "infra_error": True},
}
RESAMPLES, SEED = 2000, 20261202  # claim_document's defaults (the summary's)


def arm(name: str, released: str | None = None) -> dict:
    return {"name": name, "adapter": "router", "model": f"model-{name}", "base_url": "http://127.0.0.1:4000/v1",
            "api_key_env": "ROUTER_API_KEY", "prices": {"input": 1.0, "output": 4.0, "cached_input": 0.1},
            **({"released": released} if released else {})}


def spec(name: str, claim: dict | None, *, released: str | None = RELEASED) -> dict:
    raw = {"name": name, "suite": "builtin", "seeds": 3, "workers": 2,
           "arms": [arm("frog", released), arm("hosted"), {"name": "oracle", "adapter": "oracle"}]}
    return {**raw, "claim": claim} if claim is not None else raw


async def write_run(ledger: Ledger, run_id: str, raw: dict) -> None:
    """The run's tasks, their dates and both model arms' final attempts as TASKS scripts them; seed 2 of s-04 is
    first an infrastructure error that was retried (not final: it counts nowhere)."""
    from compare.spec import parse_run_spec

    await ledger.create_run(run_id, parse_run_spec(raw), task_ids=list(TASKS))
    await ledger.record_task_dates(run_id, {task: None if created is None else datetime.fromisoformat(created)
                                            for task, (created, _, _) in TASKS.items()})
    for task, (_, frog, hosted) in TASKS.items():
        for name, outcomes in (("frog", frog), ("hosted", hosted)):
            for seed, letter in enumerate(outcomes):
                attempt = 1
                if (task, name, seed) == ("s-04", "frog", 2):
                    retried = await ledger.start_episode(run_id, name, task, seed, 1)
                    await ledger.finish_episode(retried, final=False, n_steps=0, **FINISH["I"])
                    attempt = 2
                episode = await ledger.start_episode(run_id, name, task, seed, attempt)
                await ledger.finish_episode(episode, final=True, n_steps=1, **FINISH[letter])
    await ledger.set_run_status(run_id, "finished")


RUNS = {
    "claim-run": spec("claim", {**CLAIM, "max_harness_error_rate": 0.1}),
    "unhealthy-run": spec("unhealthy", CLAIM),  # 2 harness errors in 21 attempts: above the default 2 %
    "undated-arm-run": spec("undated", {**CLAIM, "max_harness_error_rate": 0.1}, released=None),
    "plain-run": spec("plain", None),
}


@pytest.fixture(scope="module")
def db(tmp_path_factory) -> Path:
    path = tmp_path_factory.mktemp("claim") / "ledger.duckdb"

    async def build() -> None:
        async with Ledger.open(path) as ledger:
            for run_id, raw in RUNS.items():
                await write_run(ledger, run_id, raw)
    asyncio.run(build())
    return path


def document(db: Path, run_id: str, strict: bool | None = None) -> ClaimDocument | None:
    with LedgerAccess(db).reading() as conn:
        return claim_document(conn, run_id, strict=strict)


def counts(script: str, *, strict: bool = False) -> tuple[int, int]:
    resolved = script.count("R") + (0 if strict else script.count("F"))
    return len(script), resolved


def frog_scores(tasks: list[str], *, strict: bool = False) -> np.ndarray:
    return np.array([counts(TASKS[t][1], strict=strict)[1] / 3 for t in tasks])


def hosted_scores(tasks: list[str]) -> np.ndarray:
    return np.array([counts(TASKS[t][2])[1] / 3 for t in tasks])


# --- the figures -------------------------------------------------------------------------------------------------

def test_every_final_attempt_counts_and_errors_are_misses(db):
    doc = document(db, "claim-run")
    assert [t.task_id for t in doc.per_task] == SEEN  # the run's order; the fresh tasks are not the claim's
    assert [(t.attempts, t.resolved, t.errors) for t in doc.per_task] == [
        (3, 3, 0), (3, 2, 0), (3, 1, 1), (3, 0, 1), (3, 2, 0), (3, 1, 0), (3, 3, 0)]
    assert doc.per_task[2].error_reasons == {"parser_misconfigured": 1}
    assert doc.per_task[3].error_reasons == {"infrastructure_error": 1}  # its retried attempt is not counted
    assert (doc.tasks, doc.total_tasks) == (7, 7)
    n, c = np.full(7, 3), np.array([3, 2, 1, 0, 2, 1, 3])
    rates = resolve_rates(n, c, Resampler(7, RESAMPLES, SEED))
    assert doc.avg_at_k.estimate == pytest.approx(12 / 21)
    assert [doc.avg_at_k.lower, doc.avg_at_k.upper] == list(rates["avg_at_k"].ci95)
    assert doc.pass_at_k.estimate == pytest.approx(6 / 7)  # every task but s-04 resolved at least once
    assert [doc.pass_at_k.lower, doc.pass_at_k.upper] == list(rates["pass_at_k"][3].ci95)
    check = check_claim(c / n, 0.615, tolerance=0.05, alpha=0.05, total_tasks=7)
    assert (doc.test.verdict, doc.test.estimate, doc.test.lower, doc.test.upper, doc.test.tasks_to_decide) == (
        check.verdict, check.estimate, check.lower, check.upper, check.tasks_to_decide)
    assert doc.verdict == check.verdict == "undecided"  # 7 tasks cannot settle 61.5 %
    harness = doc.harness
    assert (harness.attempts, harness.errors, harness.threshold, harness.healthy) == (21, 2, 0.1, True)
    assert harness.rate == pytest.approx(2 / 21)
    assert harness.by_exit_reason == {"infrastructure_error": 1, "parser_misconfigured": 1}
    assert (doc.arm, doc.model, doc.claimed.avg_at_k, doc.claimed.pass_at_k, doc.claimed.k) == (
        "frog", "model-frog", 0.615, 0.71, 3)


def test_the_document_recomputes_from_its_own_per_task_counts(db):
    doc = document(db, "claim-run")
    claim = ClaimConfig.model_validate({**CLAIM, "max_harness_error_rate": 0.1})
    again = claim_from_tasks(claim, doc.per_task, total_tasks=doc.total_tasks)
    assert again.model_dump() == {key: value for key, value in doc.model_dump().items() if key in again.model_dump()}


def test_strict_grading_counts_a_flagged_attempt_as_a_miss(db):
    lenient, strict = document(db, "claim-run"), document(db, "claim-run", strict=True)
    assert (lenient.strict_grading, strict.strict_grading) == (False, True)
    assert [t.resolved for t in lenient.per_task][4] == 2 and [t.resolved for t in strict.per_task][4] == 1
    assert strict.avg_at_k.estimate == pytest.approx(11 / 21)
    assert strict.test.estimate == pytest.approx(frog_scores(SEEN, strict=True).mean())


# --- the harness ----------------------------------------------------------------------------------------------------

def test_an_unhealthy_harness_withholds_the_verdict_and_names_its_exit_reasons(db):
    doc = document(db, "unhealthy-run")
    assert (doc.harness.healthy, doc.harness.threshold) == (False, 0.02)
    assert doc.verdict == "harness_unhealthy" and doc.test.verdict == "undecided"
    assert doc.test.tasks_to_decide is None  # more instances cannot help: the harness must be fixed
    assert doc.sentence.startswith("harness unhealthy: 2 of 21 attempts (9.5%) ended in a harness error "
                                   "(infrastructure_error 1, parser_misconfigured 1), above the 2.0% threshold")
    assert doc.avg_at_k == document(db, "claim-run").avg_at_k  # the figures are still shown


def tasks_at(rate_of: tuple[int, int], count: int, *, errors: int = 0) -> list[ClaimTask]:
    """`count` tasks resolving `rate_of` = (resolved, attempts), the first `errors` of them with one harness error
    among their misses."""
    resolved, attempts = rate_of
    return [ClaimTask(task_id=f"t{i}", attempts=attempts, resolved=resolved, errors=int(i < errors),
                      error_reasons={"parser_misconfigured": 1} if i < errors else {}) for i in range(count)]


def test_above_the_threshold_there_is_never_a_verdict_whatever_the_scores_say():
    claim = ClaimConfig.model_validate(CLAIM)  # threshold 2 %
    for rate_of, word in (((2, 3), "consistent"), ((1, 3), "below")):
        healthy = claim_from_tasks(claim, tasks_at(rate_of, 300, errors=6), total_tasks=300)  # 6 of 900: 0.7 %
        sick = claim_from_tasks(claim, tasks_at(rate_of, 300, errors=27), total_tasks=300)  # 27 of 900: 3 %
        assert healthy.verdict == word and healthy.harness.healthy
        assert sick.verdict == "harness_unhealthy" and sick.test.verdict == "undecided"
        assert sick.avg_at_k == healthy.avg_at_k and sick.harness.rate == pytest.approx(0.03)
        assert "no verdict on the claim" in sick.sentence and "consistent" not in sick.sentence


# --- the verdict words --------------------------------------------------------------------------------------------

def test_the_verdict_words_and_their_sentences():
    claim = ClaimConfig.model_validate(CLAIM)
    consistent = claim_from_tasks(claim, tasks_at((2, 3), 300), total_tasks=500)
    assert consistent.verdict == "consistent" and consistent.test.lower >= 0.615 - 0.05
    assert consistent.sentence.startswith("consistent with the claim: Avg@3 66.7% [")
    assert consistent.sentence.endswith("against the claimed 61.5%, within 5 points of it")
    below = claim_from_tasks(claim, tasks_at((1, 3), 300), total_tasks=500)
    assert below.verdict == "below" and below.test.upper < 0.615 and below.sentence.startswith("below the claim: ")
    few = [*tasks_at((3, 3), 3), *tasks_at((0, 3), 2)]
    undecided = claim_from_tasks(claim, [t.model_copy(update={"task_id": f"u{i}"}) for i, t in enumerate(few)],
                                 total_tasks=500)
    assert undecided.verdict == "undecided" and undecided.test.tasks_to_decide is not None
    more = undecided.test.tasks_to_decide
    assert more > 495 and undecided.sentence.startswith(
        f"undecided: {more:,} more instances would decide (this run has 495 claim tasks left); Avg@3 ")
    assert undecided.total_tasks == 500 and undecided.tasks == 5
    exhausted = claim_from_tasks(claim, [t.model_copy(update={"task_id": f"u{i}"}) for i, t in enumerate(few)],
                                 total_tasks=5)  # every claim task ran: no instance is left to run
    assert exhausted.verdict == "undecided" and "(every claim task has run: the benchmark cannot settle it at " \
        "this tolerance and error rate)" in exhausted.sentence


def test_nothing_finished_is_undecided_without_figures():
    result = claim_from_tasks(ClaimConfig.model_validate(CLAIM), [], total_tasks=500)
    assert (result.verdict, result.avg_at_k, result.pass_at_k, result.test.estimate) == ("undecided", None, None, None)
    assert result.sentence == "undecided: no claim task has a finished attempt yet"


def test_pass_at_k_needs_k_attempts_of_every_task():
    tasks = [ClaimTask(task_id="a", attempts=3, resolved=1), ClaimTask(task_id="b", attempts=2, resolved=2)]
    result = claim_from_tasks(ClaimConfig.model_validate(CLAIM), tasks, total_tasks=10)
    assert result.pass_at_k is None and "fewer than k = 3" in result.pass_at_k_reason
    assert result.avg_at_k.estimate == pytest.approx((1 / 3 + 1) / 2)


# --- the contamination gap -----------------------------------------------------------------------------------------

def test_the_contamination_gap_is_seen_minus_fresh_with_the_other_arms_paired_difference(db):
    gap = document(db, "claim-run").contamination
    assert (gap.released, gap.seen_tasks, gap.fresh_tasks, gap.reason) == (date(2024, 6, 1), 7, 3, None)
    seen, fresh = frog_scores(SEEN), frog_scores(FRESH)
    assert gap.seen.estimate == pytest.approx(12 / 21) and gap.fresh.estimate == pytest.approx(2 / 9)
    assert gap.gap.estimate == pytest.approx(12 / 21 - 2 / 9)
    assert gap.gap == difference_of_parts(seen, fresh, RESAMPLES, SEED)
    assert gap.gap.lower < gap.gap.estimate < gap.gap.upper
    (hosted,) = gap.versus  # the oracle is not a model arm
    assert (hosted.arm, hosted.seen_tasks, hosted.fresh_tasks) == ("hosted", 7, 3)
    their_seen, their_fresh = hosted_scores(SEEN), hosted_scores(FRESH)
    assert hosted.gap.estimate == pytest.approx(12 / 21 - 1 / 3)
    assert hosted.difference.estimate == pytest.approx(gap.gap.estimate - hosted.gap.estimate)
    # paired: the per-task differences are resampled, so a task's two scores stay together
    assert hosted.difference == difference_of_parts(seen - their_seen, fresh - their_fresh, RESAMPLES, SEED)


def test_no_release_day_means_every_task_is_the_claims_and_no_gap(db):
    doc = document(db, "undated-arm-run")
    assert doc.contamination is None
    assert [t.task_id for t in doc.per_task] == list(TASKS) and doc.total_tasks == 10


def test_a_gap_without_fresh_tasks_says_why():
    seen = tasks_at((2, 3), 4)
    gap = contamination_gap(date(2024, 6, 1), seen, [], others={"hosted": seen})
    assert gap.gap is None and gap.fresh is None and "no task created after the release day" in gap.reason
    assert gap.versus[0].difference is None and gap.versus[0].reason == "hosted has no finished attempt on the " \
                                                                        "fresh tasks"


def test_a_run_without_a_claim_has_no_document_and_an_unknown_run_is_refused(db):
    assert document(db, "plain-run") is None
    with pytest.raises(SummaryError, match="no run 'nope'"):
        document(db, "nope")


# --- the command ------------------------------------------------------------------------------------------------

def leafcost(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([str(LEAFCOST), *args], capture_output=True, text=True, timeout=300,
                          env={**os.environ, "COLUMNS": "200"})


def test_claim_json_is_the_document_with_its_schema(db):
    done = leafcost("claim", "claim-run", "--db", str(db), "--json")
    assert done.returncode == 0, done.stderr
    raw = json.loads(done.stdout)
    assert list(raw) == [
        "run_id", "preset", "title", "source", "benchmark", "arm", "model", "claimed", "instances", "unconfirmed",
        "strict_grading", "tasks", "total_tasks", "avg_at_k", "pass_at_k", "pass_at_k_reason", "test", "harness",
        "contamination", "verdict", "sentence", "bootstrap", "per_task"]
    assert set(raw["test"]) == {"alpha", "tolerance", "verdict", "estimate", "lower", "upper", "tasks",
                                "tasks_to_decide"}
    assert set(raw["harness"]) == {"attempts", "errors", "rate", "threshold", "healthy", "by_exit_reason"}
    assert set(raw["contamination"]) == {"released", "seen_tasks", "fresh_tasks", "seen", "fresh", "gap", "reason",
                                         "versus"}
    assert raw["contamination"]["released"] == "2024-06-01"
    assert set(raw["per_task"][0]) == {"task_id", "attempts", "resolved", "errors", "error_reasons"}
    assert ClaimDocument.model_validate(raw) == document(db, "claim-run")


def test_claim_page_and_strict_grading_through_the_console_script(db):
    page = leafcost("claim", "claim-run", "--db", str(db))
    assert page.returncode == 0, page.stderr
    doc = document(db, "claim-run")
    assert "Avg@3   57.1% [" in page.stdout and "claimed 61.5%" in page.stdout and "claimed 71.0%" in page.stdout
    assert doc.sentence in " ".join(page.stdout.split())
    assert "harness: 2 of 21 attempts (9.5%) ended in a harness error" in page.stdout
    assert "contamination gap (seen − fresh, released 2024-06-01): +34.9 points [" in page.stdout
    assert "versus hosted: its gap +23.8 points" in page.stdout
    assert "unconfirmed: the vendor's temperature" in page.stdout
    strict = json.loads(leafcost("claim", "claim-run", "--db", str(db), "--json", "--strict-grading").stdout)
    assert strict["strict_grading"] is True and strict["per_task"][4]["resolved"] == 1


def test_claim_refuses_a_run_without_claim_and_an_unknown_run_in_one_line(db):
    plain = leafcost("claim", "plain-run", "--db", str(db))
    assert plain.returncode == 2 and plain.stdout == ""
    assert plain.stderr.count("\n") == 1 and plain.stderr.startswith("leafcost: run plain-run has no claim: ")
    unknown = leafcost("claim", "nope", "--db", str(db), "--json")
    assert unknown.returncode == 2 and unknown.stderr.startswith("leafcost: no run 'nope' in this ledger")
    assert unknown.stderr.count("\n") == 1
