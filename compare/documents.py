"""The figure documents, defined once: what `leafcost summary`, `compare` and `breakeven` print with `--json`, what
the API serves and what the reports render. compare.summary, compare.comparison and compare.breakeven build each
document as plain JSON data and check it against its model here on the way out (`conforming`), so a field a
builder adds without a model, or a model field a builder forgets, fails at once; every field says what it means,
and docs/figures.md is checked against these descriptions (tests/compare/test_documents.py).

Fields with a default are keys a document carries only in some cases (a reason beside a missing number, the
leaf_commit of a prompt); a null value and a missing key mean different things, so documents are rendered as built
(compare.summary.dumps), never re-serialised from a model."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import datetime
from typing import Any, Literal, TypeVar, get_args, get_origin

from pydantic import BaseModel, ConfigDict, Field

from compare.arms.base import Kind
from compare.costs import WorkWeights


class _Document(BaseModel):
    model_config = ConfigDict(extra="forbid")  # a key no model declares is an error, not a silent extra


class Estimate(_Document):
    """A figure with its 95 % interval over tasks, or a reason where either, or one bound, is missing."""

    value: float | None = Field(description="the figure itself, null (with a reason) when there is no number")
    ci95: list[float | None] | None = Field(
        description="the 95 % interval [low, high] over tasks; one bound null (with a reason) when that side is "
                    "unbounded, the one-sided interval that exists: [low, null] is [low, ∞), as when some resamples "
                    "resolve nothing; null (with a reason) when no interval can be given")
    reason: str | None = Field(None, description="why the value, the interval or one of its bounds is missing")


class CostParts(_Document):
    """An arm's whole cost in USD, split by where each dollar went."""

    total: float | None = Field(description="tokens + GPU or machine lease + sandbox, every attempt included; null "
                                            "when the arm has unpriced calls")
    tokens: float | None = Field(description="every model call's tokens × the arm's price sheet, failed and retried "
                                             "calls included; null when the arm has unpriced calls")
    gpu: float = Field(description="the self-hosted arm's whole lease, idle time included, attributed to its "
                                   "attempts by weighted work")
    sandbox: float | None = Field(description="sandbox CPU-seconds × the run's $/vCPU-hour; null when no attempt's "
                                              "CPU was measured (sandbox_cost_reason says why)")


class LeaseDetail(_Document):
    """A self-hosted arm's lease: its hardware, seconds and cost, fully loaded and marginal."""

    kind: str = Field(description="what was leased: gpu, or cpu for the local arm's machine")
    hardware: str = Field(description="the GPU type (or the machine) of the lease")
    count: int = Field(description="how many GPUs the lease holds")
    usd_per_hour: float = Field(description="the lease's price per GPU-hour (per machine-hour for the local arm)")
    seconds: float = Field(description="the lease's length, summed over its leases, to the end or last heartbeat")
    cost_usd: float = Field(description="the lease's whole cost: count × $/hour × hours, idle time included")
    fully_loaded_usd: float = Field(description="the fully loaded cost, equal to the lease's whole cost")
    marginal_usd: float | None = Field(description="the lower bound: the attempts' weighted tokens at the saturation "
                                                   "throughput × the lease's $/s")
    saturation_tokens_per_sec: float | None = Field(description="the saturation throughput the marginal cost uses")
    saturation_source: str | None = Field(description="where the saturation throughput came from: the spec, or "
                                                      "measured from server samples")
    busy_seconds: float | None = Field(description="busy GPU-seconds from the server's busy counter, summed over "
                                                   "every GPU and every category but idle")
    busy_counter: str | None = Field(description="which SGLang counter gave the busy seconds (its name changed in "
                                                 "0.5.11)")
    weights: WorkWeights = Field(description="the work weights that split the lease: fitted from the server's "
                                             "counters or the documented defaults")
    open: bool = Field(description="whether a lease is still open (billed up to its last heartbeat)")
    busy_counter_reason: str | None = Field(None, description="why no busy counter was read")
    utilization_reason: str | None = Field(None, description="why the utilization is missing")
    marginal_reason: str | None = Field(None, description="why the marginal cost is missing")


class FlaggedAttempt(_Document):
    """A resolved attempt whose patch touches the test harness: reward hacking shown, not hidden."""

    task_id: str = Field(description="the attempt's task")
    seed: int = Field(description="the attempt's seed")
    episode_id: str = Field(description="the attempt's episode id (its trajectory carries the same paths)")
    paths: list[str] | None = Field(description="the patch's paths in the test harness: conftest.py, "
                                                "sitecustomize/usercustomize, .pth files, pytest/tox/nox settings, CI "
                                                "config, the graded tests' files; null when no patch was captured to "
                                                "check")


class UnrecordedSpend(_Document):
    """Calls that left for a per-token endpoint and were never recorded (the process died first): they may have
    been served and billed. Not in the arm's totals; bounded, and looked up in the router's spend log."""

    calls: int = Field(description="calls of finished attempts with an intent and no recorded answer")
    bound_usd: float | None = Field(description="the most they can have cost: each request's bytes as input tokens "
                                                "and its completion cap as output tokens, at the arm's dearest rates; "
                                                "null (with a reason) when a call has no cap or no price")
    prompt_tokens_bound: int = Field(description="the requests' bytes: an upper bound on their prompt tokens")
    completion_tokens_bound: int | None = Field(description="the requests' completion caps, summed")
    reason: str | None = Field(description="why there is no bound")
    looked_up: int = Field(description="calls looked up in the router's spend log")
    found_in_router_log: int = Field(description="calls the router's spend log has (served and billed)")
    router_spend_usd: float | None = Field(description="what the router's spend log billed for them")
    router_log_note: str | None = Field(description="what the spend log lookup said (or why there is no log)")


class ArmSummary(_Document):
    """One arm of a run: its resolve rates with CIs, its whole cost and cost per resolved."""

    arm: str = Field(description="the arm's name in the run spec")
    kind: Kind = Field(description="hosted (priced per token), self-hosted (a lease) or oracle (the tasks' "
                                   "solutions)")
    adapter: str = Field(description="the adapter the arm ran through")
    model: str = Field(description="the model the arm asked for")
    status: str = Field(description="ready, skipped, failed, finished, interrupted, or not started")
    status_reason: str | None = Field(description="why the arm was skipped or failed")
    tasks: int = Field(description="tasks with a finished (final) attempt")
    seeds: int = Field(description="the most seeds any task has")
    attempts: int = Field(description="final attempts, one per (task, seed)")
    attempts_including_retries: int = Field(description="every attempt, the retried infrastructure failures "
                                                        "included")
    resolved_attempts: int = Field(description="final attempts whose hidden tests passed")
    resolved_tasks: int = Field(description="tasks resolved at least once")
    strict_grading: bool = Field(description="whether flagged attempts count as not resolved in every figure here "
                                             "(leafcost run or summary --strict-grading)")
    flagged_attempts: int = Field(description="final attempts the verifier resolved whose patch touches the test "
                                              "harness (or could not be checked); counted in resolved_attempts "
                                              "unless strict_grading")
    flagged: list[FlaggedAttempt] = Field(description="each flagged attempt with its paths")
    avg_at_k: Estimate = Field(description="the mean over tasks of resolved seeds ÷ seeds with a verdict (Leaf's "
                                           "Avg@k); null with a reason for an arm a configuration error stopped")
    pass_at_k: dict[str, Estimate] = Field(description="per k, the unbiased chance that at least one of k seeds "
                                                       "resolves a task, averaged over tasks")
    pass_hat_k: dict[str, Estimate] = Field(description="per k, the chance that all k of k seeds resolve a task, "
                                                        "averaged over tasks")
    harness_error_rate: float | None = Field(description="the share of final attempts that leafcost or the set-up "
                                                         "failed")
    infra_error_rate: float | None = Field(description="the share of final attempts that the endpoint or sandbox "
                                                       "failed after every retry")
    grading_errors: int = Field(description="final attempts the verifier gave no verdict on (no reward file, an "
                                            "invalid reward, a verifier timeout): neither resolved nor missed")
    grading_error_rate: float | None = Field(description="the share of final attempts with no verdict; they are "
                                                         "left out of every resolve rate")
    parser_misconfigured_rate: float | None = Field(description="the share of final attempts lost to SGLang's "
                                                                "parser flags")
    configuration_error_rate: float | None = Field(description="the share of final attempts lost to the arm's "
                                                               "endpoint, key or model")
    task_error_rate: float | None = Field(description="the share of final attempts whose task could not be built "
                                                      "or read")
    prompt_source: Literal["leafcost", "leaf-checkout"] | None = Field(
        description="whose system prompt and tool descriptions the arm sent; null for the oracle, which sends none")
    leaf_commit: str | None = Field(None, description="the Leaf checkout's commit when the prompt came from it")
    cost_usd: CostParts = Field(description="the arm's whole cost, split into tokens, lease and sandbox")
    cost_per_resolved_attempt: Estimate = Field(description="total cost ÷ resolved attempts, with a bootstrap CI "
                                                            "over tasks")
    cost_per_resolved_task: Estimate = Field(description="total cost ÷ tasks resolved at least once, with a "
                                                         "bootstrap CI over tasks")
    utilization: float | None = Field(description="busy GPU-seconds ÷ the lease's GPU-seconds; null with several "
                                                  "leases or no busy counter")
    price_source: str = Field(description="where the prices came from: explicit, litellm, lease, unpriced, none "
                                          "(sandbox only) for the oracle, or scenario NAME")
    unpriced_calls: int = Field(description="hosted calls that used tokens but have no cost or exactly 0.0")
    impossible_usage_calls: int = Field(description="calls whose answer reported impossible usage (negative, not a "
                                                    "whole number, above 2**30 tokens, a part above its whole): "
                                                    "endpoint errors (bad_response), never priced")
    unrecorded_spend: UnrecordedSpend = Field(description="calls sent (their intent journalled first) whose answer "
                                                          "a crash kept out of the ledger: not in the totals, bounded")
    router_reported_cost_usd: float | None = Field(description="the router's own total, kept beside ours")
    lease: LeaseDetail | None = Field(description="the self-hosted arm's lease; null for other arms")
    sandbox_cpu_seconds: float = Field(description="sandbox CPU-seconds of every attempt, as measured")
    sandbox_cost_reason: str | None = Field(description="why the sandbox cost is missing or partial: attempts whose "
                                                        "CPU no cgroup measured")


class Bootstrap(_Document):
    """How the intervals were drawn."""

    resamples: int = Field(description="bootstrap resamples drawn")
    seed: int = Field(description="the bootstrap's seed: the same seed gives the same intervals")
    unit: str = Field(description="what is resampled: tasks, a task's seeds and attempts staying together")


class Bounds(_Document):
    """A figure a decision look estimated, with its confidence-sequence interval."""

    estimate: float | None = Field(description="the point estimate at the look")
    lower: float | None = Field(description="the interval's lower bound (valid at every look: anytime-valid)")
    upper: float | None = Field(description="the interval's upper bound")


class QuestionVerdict(_Document):
    """One question of a run's `decide:` at a look: its verdict, estimate and interval, and the sentence shown."""

    question: Literal["cheaper", "reaches"] = Field(description="cheaper: which of two arms costs less per resolved "
                                                                "attempt; reaches: whether an arm's Avg@k reaches a "
                                                                "claimed value")
    arms: list[str] = Field(description="the arms the question names (cheaper: first, second)")
    verdict: str = Field(description="cheaper: first, second, equivalent or undecided; reaches: reaches, consistent "
                                     "(within the question's tolerance), below or undecided; a verdict once reached "
                                     "never changes at a later look")
    decided_at_tasks: int | None = Field(description="tasks the look that decided it had used; null while undecided")
    estimate: float | None = Field(description="cheaper: the ratio of the arms' costs per resolved attempt (first ÷ "
                                               "second); reaches: the arm's Avg@k")
    lower: float | None = Field(description="the interval's lower bound for the estimate")
    upper: float | None = Field(description="the interval's upper bound for the estimate")
    difference_usd: Bounds | None = Field(description="cheaper: the first arm's cost per resolved attempt minus the "
                                                      "second's, in USD; null otherwise")
    cost_per_resolved: dict[str, Bounds | None] = Field(description="cheaper: each arm's cost per resolved attempt "
                                                                    "with its interval (null while the arm has "
                                                                    "nothing resolved or spent)")
    tasks_to_decide: int | None = Field(description="the plan: how many more tasks should decide it at the gap "
                                                    "measured so far; null when decided or when no gap was seen")
    sentence: str = Field(description="the verdict in words, with the figures and their intervals")


class LookVerdicts(_Document):
    """What one look of a decision said (compare.decision.LookResult)."""

    look: int = Field(description="the look's number, from 1")
    tasks: int = Field(description="tasks of the finished rounds the look used (every arm ran each of them)")
    total_tasks: int = Field(description="the run's tasks")
    questions: list[QuestionVerdict] = Field(description="each question of decide:, in the spec's order")
    decided: bool = Field(description="whether every question is decided")


class DecisionLook(_Document):
    """One look of a run's decision as the ledger keeps it (a decision_looks row)."""

    look: int = Field(description="the look's number, from 1")
    looked_at: datetime = Field(description="when the look was taken")
    tasks: int = Field(description="tasks of the finished rounds the look used")
    total_tasks: int = Field(description="the run's tasks")
    episodes: int = Field(description="final episodes of every arm when the look was taken")
    spent_usd: dict[str, float] = Field(description="each arm's spend so far, in USD")
    budget: dict[str, Any] = Field(description="decide.budget in effect at this look (a resume may raise it)")
    action: Literal["continue", "decided", "futile", "budget", "exhausted"] = Field(
        description="continue: another round ran; decided: every question decided, the run stopped; futile: a "
                    "question out of reach by the suite's end; budget: the next round would pass a cap; exhausted: "
                    "no tasks left")
    reason: str | None = Field(description="the verdict line of a look that stopped the run; null for continue")


class DecisionDocument(_Document):
    """A run's decision (its spec's `decide:`): `GET /runs/{run_id}/decision`, and the `decision` field of the
    summary and compare documents."""

    status: Literal["decided", "undecided", "running", "ended"] = Field(
        description="decided: every question decided; undecided: stopped at the budget, out of reach in this suite "
                    "or with every task run; running: no stop recorded yet; ended: the run ended between looks, "
                    "undecided (interrupted, or an arm stopped by a configuration error): `line` says which")
    stop: Literal["continue", "decided", "futile", "budget", "exhausted"] | None = Field(
        description="the last look's action; null before the first look")
    line: str | None = Field(description="the verdict line of the stop (\"decided after N of M tasks: ...\"), or why "
                                         "a run that ended did not stop on its question; null while running")
    question: dict[str, Any] = Field(description="the spec's decide: section as the run was started "
                                                 "(docs/run-spec.md)")
    final: LookVerdicts | None = Field(description="what the last look said; null before the first look")
    unspent_episodes: int | None = Field(description="episodes of the spec the stop left unrun (every arm); null "
                                                     "while running")
    unspent_usd: float | None = Field(description="what those episodes would have cost at each arm's mean cost per "
                                                  "task so far; null while running")
    looks: list[DecisionLook] = Field(description="every look, in order")


class FreshnessPart(_Document):
    """An arm's figures on one part of its tasks, computed as the summary computes them on all of them."""

    tasks: int = Field(description="the arm's tasks (with a finished attempt) in this part")
    attempts: int = Field(description="their final attempts with a verdict: Avg@k's denominators")
    resolved_attempts: int = Field(description="their final attempts whose hidden tests passed")
    avg_at_k: Estimate = Field(description="Avg@k over this part's tasks, with a bootstrap CI over them")
    cost_per_resolved_attempt: Estimate = Field(description="this part's tasks' whole cost ÷ their resolved "
                                                            "attempts, with a bootstrap CI over them")


class ArmFreshness(_Document):
    """One arm with a release date (`released:` in its spec), its figures split by when each task was created."""

    arm: str = Field(description="the arm's name in the run spec")
    released: str = Field(description="the model's release day as the spec gives it (YYYY-MM-DD)")
    fresh: FreshnessPart = Field(description="tasks created after the release day (UTC): the model cannot have "
                                             "seen them")
    seen: FreshnessPart = Field(description="tasks created on or before the release day")
    undated_tasks: int = Field(description="the arm's tasks without a creation date, in neither part")


class SummaryDocument(_Document):
    """`leafcost summary RUN --json`."""

    run_id: str = Field(description="the run's id")
    run_status: str = Field(description="the run's status: running, finished, interrupted or failed")
    task_order: list[str] = Field(description="the run's tasks in the order every arm ran them")
    seeds: int = Field(description="the seeds per task the run asked for")
    sandbox_usd_per_vcpu_hour: float = Field(description="the sandbox price every arm is charged")
    bootstrap: Bootstrap = Field(description="how the intervals were drawn")
    scenario: str | None = Field(description="the what-if price sheet these figures use; null for the recorded "
                                             "prices")
    strict_grading: bool = Field(description="whether flagged attempts (a patch touching the test harness) count "
                                             "as not resolved; the verifier's verdict stays in the ledger either way")
    arms: list[ArmSummary] = Field(description="one entry per arm, in the spec's order")
    decision: DecisionDocument | None = Field(None, description="the run's decision question and what it decided; "
                                                                "null for a run without decide: (absent from a "
                                                                "what-if stored by an older leafcost)")
    freshness: list[ArmFreshness] | None = Field(
        None, description="per arm with released: in the spec, its Avg@k and cost per resolved attempt on tasks "
        "created after the release day and on the rest; null when no arm has a release date or no task a date "
        "(absent from a what-if stored by an older leafcost)")


class GridRow(_Document):
    """The break-even at one price of the public GPU price grid."""

    gpu: str = Field(description="the GPU type of the price")
    level: str = Field(description="low, typical or high list price")
    gpu_usd_per_hour: float = Field(description="the price per GPU-hour")
    self_hosted_cost_per_resolved_attempt: float | None = Field(description="the self-hosted cost per resolved "
                                                                            "attempt at this price")
    breakeven_utilization: float = Field(description="the utilization at which this price matches the hosted arm")


class Breakeven(_Document):
    """Where the self-hosted arm's cost per resolved attempt equals the hosted arm's."""

    self_hosted: str = Field(description="the self-hosted arm")
    hosted: str = Field(description="the hosted arm")
    unit: str = Field(description="the figure both arms are matched on: cost per resolved attempt")
    reason: str | None = Field(None, description="why there is no break-even number")
    hosted_cost_per_resolved_attempt: float | None = Field(None, description="the hosted arm's cost per resolved "
                                                                             "attempt, the target")
    self_hosted_resolve_rate: float | None = Field(None, description="resolved attempts ÷ attempts of the "
                                                                     "self-hosted arm")
    busy_seconds_per_attempt: float | None = Field(None, description="busy GPU-seconds per attempt, summed over "
                                                                     "every GPU")
    sandbox_usd_per_attempt: float | None = Field(None, description="the self-hosted arm's sandbox cost per attempt")
    gpus: int | None = Field(None, description="GPUs in the self-hosted arm's lease")
    at_gpu_usd_per_hour: float | None = Field(None, description="the price per GPU-hour it is evaluated at")
    at_utilization: float | None = Field(None, description="the utilization it is evaluated at")
    self_hosted_cost_per_resolved_attempt: float | None = Field(None, description="the self-hosted cost per "
                                                                                  "resolved attempt at that price "
                                                                                  "and utilization")
    gpu_usd_per_hour: float | None = Field(description="the break-even price per GPU-hour at the utilization")
    utilization: float | None = Field(description="the utilization needed at the lease's price (null above 100 %)")
    utilization_reason: str | None = Field(None, description="why the needed utilization is not reachable")
    monthly_attempts: float | None = Field(description="attempts a month at which an always-on lease breaks even "
                                                       "(null beyond its capacity)")
    monthly_capacity_attempts: float | None = Field(None, description="attempts one always-on lease can serve a "
                                                                      "month")
    monthly_attempts_reason: str | None = Field(None, description="why the monthly volume is beyond reach")
    grid: list[GridRow] = Field(description="the cost over the public GPU price grid")


class BreakevenDocument(Breakeven):
    """`leafcost breakeven RUN --json`."""

    run_id: str = Field(description="the run's id")


class McNemar(_Document):
    """McNemar's exact test on tasks, with one seed per arm."""

    a_only: int = Field(description="tasks only the first arm resolved")
    b_only: int = Field(description="tasks only the second arm resolved")
    p_value: float = Field(description="the two-sided exact p-value")


class PairedBootstrap(Bootstrap):
    """The bootstrap of a comparison: the same resamples for both arms."""

    paired: bool = Field(description="whether both arms were drawn on the same resamples")


class CompareDocument(_Document):
    """`leafcost compare RUN --arms A,B --json`: differences are A minus B."""

    run_id: str = Field(description="the run's id")
    arms: list[str] = Field(description="the two arms, A then B")
    scenario: str | None = Field(description="the what-if price sheet these figures use; null for the recorded "
                                             "prices")
    comparable: bool = Field(description="whether the arms share tasks, seeds, temperature, sandbox and prompt")
    differences: list[str] = Field(description="every way the arms differ, empty when comparable")
    shared_tasks: int = Field(description="tasks both arms finished, the ones the differences are paired on")
    bootstrap: PairedBootstrap = Field(description="how the paired intervals were drawn")
    difference: str = Field(description="which way the differences go: first arm minus second arm")
    resolve_rate_difference: Estimate = Field(description="Avg@k of A minus Avg@k of B, with a paired CI")
    cost_per_resolved_attempt_difference: Estimate = Field(description="A's cost per resolved attempt minus B's, "
                                                                       "with a paired CI")
    cost_per_resolved_task_difference: Estimate = Field(description="A's cost per resolved task minus B's, with a "
                                                                    "paired CI")
    mcnemar: McNemar | None = Field(description="McNemar's exact test, with one seed; null with several")
    summaries: list[ArmSummary] = Field(description="both arms' summary entries")
    breakeven: Breakeven | None = Field(description="the break-even when one arm is self-hosted and the other "
                                                    "hosted")
    decision: DecisionDocument | None = Field(description="the run's decision question and what it decided; null "
                                                          "for a run without decide:")
    freshness: list[ArmFreshness] | None = Field(description="both arms' fresh vs seen split, as in the summary "
                                                             "document; null when neither arm has released: or "
                                                             "no task has a date")


DOCUMENTS: tuple[type[BaseModel], ...] = (SummaryDocument, CompareDocument, BreakevenDocument,
                                          DecisionDocument)

_D = TypeVar("_D", bound=dict)


def conforming(model: type[BaseModel], document: _D) -> _D:
    """`document` itself, once it validates as `model` (pydantic's ValidationError names the field otherwise)."""
    model.model_validate(document)
    return document


def field_paths(model: type[BaseModel], prefix: str = "") -> Iterator[tuple[str, str | None]]:
    """(dotted path, description) of every field of `model` and of the documents nested in it, depth first;
    a list or dict of documents adds no step to the path (`arms.cost_usd.total` is `arms[i].cost_usd.total`)."""
    for name, info in model.model_fields.items():
        path = f"{prefix}{name}"
        yield path, info.description
        nested = _nested_model(info.annotation)
        if nested is not None:
            yield from field_paths(nested, path + ".")


def description(model: type[BaseModel], path: str) -> str:
    """The description of the field at a dotted `path` of `model` (KeyError if there is none)."""
    found = dict(field_paths(model)).get(path)
    if not found:
        raise KeyError(f"{model.__name__} has no documented field {path!r}")
    return found


def undocumented(model: type[BaseModel]) -> list[str]:
    """The dotted paths of `model`'s fields (nested documents included) that have no description."""
    return [path for path, text in field_paths(model) if not text]


def models(roots: tuple[type[BaseModel], ...] = DOCUMENTS) -> list[type[BaseModel]]:
    """`roots` and every document model they use (fields, and the model a document extends), first seen first."""
    found: list[type[BaseModel]] = []

    def visit(model: type[BaseModel]) -> None:
        if model in found:
            return
        found.append(model)
        if _parent(model) is not None:
            visit(_parent(model))
        for info in model.model_fields.values():
            for nested in _nested_models(info.annotation):
                visit(nested)

    for root in roots:
        visit(root)
    return found


def reference_markdown() -> str:
    """Every document's fields with their type and meaning, as docs/figures.md holds it (`python -m
    compare.documents` prints it; a test compares the two)."""
    parts = []
    for model in models():
        parent = _parent(model)
        own = [name for name in model.model_fields if parent is None or name not in parent.model_fields]
        intro = (model.__doc__ or "").strip().replace("\n", " ")
        if parent is not None:
            intro += f" Every field of [{parent.__name__}](#{parent.__name__.lower()}), and:"
        rows = [f"| `{name}` | {_type_text(model.model_fields[name].annotation)} | "
                f"{_cell(model.model_fields[name].description)} |" for name in own]
        parts.append("\n".join([f"### {model.__name__}", "", intro, "", "| field | type | meaning |",
                                "|---|---|---|", *rows]))
    return "\n\n".join(parts) + "\n"


def _cell(text: str | None) -> str:
    return (text or "").replace("|", "\\|")


def _parent(model: type[BaseModel]) -> type[BaseModel] | None:
    base = model.__bases__[0]
    return None if base in (_Document, BaseModel) else base


def _nested_models(annotation: Any) -> list[type[BaseModel]]:
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return [annotation]
    return [found for arg in getattr(annotation, "__args__", ()) for found in _nested_models(arg)]


_TYPE_NAMES = {str: "string", int: "integer", float: "number", bool: "boolean", type(None): "null",
               datetime: "string (ISO 8601 time)", Any: "any JSON value"}


def _type_text(annotation: Any) -> str:
    if annotation in _TYPE_NAMES:
        return _TYPE_NAMES[annotation]
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return f"[{annotation.__name__}](#{annotation.__name__.lower()})"
    origin, args = get_origin(annotation), get_args(annotation)
    if origin is Literal:
        return " or ".join(f"`{value}`" for value in args)
    if origin is list:
        return f"list of {_type_text(args[0])}"
    if origin is dict:
        return f"map of {_type_text(args[1])}"
    return " or ".join(_type_text(arg) for arg in args)  # a union


def _nested_model(annotation: Any) -> type[BaseModel] | None:
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return annotation
    for arg in getattr(annotation, "__args__", ()):
        found = _nested_model(arg)
        if found is not None:
            return found
    return None


if __name__ == "__main__":
    print(reference_markdown(), end="")
