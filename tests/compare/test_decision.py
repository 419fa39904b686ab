"""A run's decision question (compare.decide_spec) and one look at it (compare.decision): a question that cannot
be asked is refused with its field named; on scripted per-task figures whose answer is known, each look gives
that answer, keeps a verdict once reached, waits for the cost interval's burn-in, and says how many more tasks an
undecided question needs; a budget cap stops the next round by name; the verdict reads as one line."""

from __future__ import annotations

import numpy as np
import pytest
from pydantic import TypeAdapter, ValidationError

from compare.arms import Arm, StrictModel
from compare.decide_spec import ArmPrior, DecideConfig, PlanConfig
from compare.decision import ArmTasks, LookResult, budget_stop, look, verdict_line
from compare.sequential import BettingSequence
from compare.spec import describe_validation_error

SEEDS = 3
TOTAL = 500  # the run's whole length: every interval's mixture is tuned for it


class Holder(StrictModel):
    """Where a run spec holds them: errors read with the spec's own paths (decide.cheaper.margin: ...)."""

    decide: DecideConfig | None = None
    plan: PlanConfig | None = None


def refusal(**fields) -> str:
    with pytest.raises(ValidationError) as caught:
        Holder.model_validate(fields)
    return describe_validation_error(caught.value)


def arms() -> list:
    adapter = TypeAdapter(list[Arm])
    return adapter.validate_python([
        {"name": "hosted", "adapter": "router", "model": "gpt-x", "prices": {"input": 1.0, "output": 4.0}},
        {"name": "frognano", "adapter": "sglang", "model": "frognano", "base_url": "http://gpu:30000/v1",
         "gpu": {"type": "H200", "usd_per_hour": 3.5}},
        {"name": "oracle", "adapter": "oracle"},
        {"name": "loose", "adapter": "router", "model": "gpt-y", "allow_unpriced": True}])


def config(**fields) -> DecideConfig:
    return DecideConfig.model_validate(fields)


CHEAPER = {"arms": ["hosted", "frognano"], "margin": 0.1}


# --- the question in the spec --------------------------------------------------------------------------------------

def test_a_well_formed_question_passes_its_arm_checks():
    decide = config(cheaper=CHEAPER, reaches={"arm": "frognano", "avg_at_k": 0.615},
                    budget={"total_usd": 50, "per_arm_usd": {"hosted": 30}})
    decide.check_arms(arms())  # no error
    PlanConfig.model_validate({"priors": {"frognano": {"resolve_rate": 0.6, "prompt_tokens": 1000,
                                                       "completion_tokens": 100}}}).check_arms(arms())
    assert decide.alpha == 0.05 and decide.min_tasks == 20 and decide.round_tasks is None


@pytest.mark.parametrize("fields, message", [
    ({"cheaper": {"arms": ["hosted", "gone"]}},
     "decide.cheaper.arms.1: no arm named 'gone' (arms: hosted, frognano, oracle, loose)"),
    ({"reaches": {"arm": "gone", "avg_at_k": 0.6}}, "decide.reaches.arm: no arm named 'gone'"),
    ({"reaches": {"arm": "hosted", "avg_at_k": 0.6}, "budget": {"per_arm_usd": {"gone": 5}}},
     "decide.budget.per_arm_usd.gone: no arm named 'gone'"),
    ({"cheaper": {"arms": ["oracle", "hosted"]}}, "decide.cheaper.arms.0: the oracle arm 'oracle' has no cost"),
    ({"cheaper": {"arms": ["hosted", "loose"]}}, "decide.cheaper.arms.1: arm 'loose' sets allow_unpriced: true"),
])
def test_a_question_the_arms_cannot_answer_is_refused_with_its_field(fields, message):
    with pytest.raises(ValueError) as caught:
        config(**fields).check_arms(arms())
    assert str(caught.value).startswith(message)


def test_every_bad_arm_is_named_at_once_and_a_claim_may_name_any_arm():
    with pytest.raises(ValueError) as caught:
        config(cheaper={"arms": ["oracle", "gone"]}, budget={"per_arm_usd": {"lost": 1}}).check_arms(arms())
    assert [p.split(":")[0] for p in str(caught.value).split("; ")] == [
        "decide.cheaper.arms.0", "decide.cheaper.arms.1", "decide.budget.per_arm_usd.lost"]
    config(reaches={"arm": "oracle", "avg_at_k": 0.9}).check_arms(arms())  # a resolve rate needs no price
    config(reaches={"arm": "loose", "avg_at_k": 0.9}).check_arms(arms())


def test_a_prior_for_a_missing_arm_is_refused_with_its_field():
    plan = PlanConfig.model_validate({"priors": {"gone": {"resolve_rate": 0.5, "prompt_tokens": 10,
                                                          "completion_tokens": 1}}})
    with pytest.raises(ValueError, match=r"^plan\.priors\.gone: no arm named 'gone' \(arms: hosted, frognano"):
        plan.check_arms(arms())


def test_the_same_arm_twice_is_refused():
    assert refusal(decide={"cheaper": {"arms": ["hosted", "hosted"]}}) == \
        "decide.cheaper.arms: name two different arms, not 'hosted' twice"


@pytest.mark.parametrize("margin", [-0.1, float("nan"), float("inf"), "abc", 1.5])
def test_a_margin_that_is_negative_not_a_number_or_above_one_is_refused(margin):
    assert refusal(decide={"cheaper": {"arms": ["a", "b"], "margin": margin}}).startswith("decide.cheaper.margin: ")


@pytest.mark.parametrize("claimed", [0, 1, float("nan")])
def test_a_claimed_rate_outside_zero_to_one_is_refused(claimed):
    assert refusal(decide={"reaches": {"arm": "a", "avg_at_k": claimed}}).startswith("decide.reaches.avg_at_k: ")


@pytest.mark.parametrize("alpha", [0, 0.5])
def test_alpha_outside_its_range_is_refused(alpha):
    assert refusal(decide={"reaches": {"arm": "a", "avg_at_k": 0.5}, "alpha": alpha}).startswith("decide.alpha: ")


def test_a_decision_without_a_question_is_refused():
    assert refusal(decide={"alpha": 0.05}).startswith("decide: give a question: cheaper:")


@pytest.mark.parametrize("budget, field", [
    ({"total_usd": 0}, "decide.budget.total_usd"), ({"total_usd": -5}, "decide.budget.total_usd"),
    ({"total_usd": float("inf")}, "decide.budget.total_usd"),
    ({"per_arm_usd": {"hosted": 0}}, "decide.budget.per_arm_usd.hosted"),
    ({"per_arm_usd": {"hosted": float("nan")}}, "decide.budget.per_arm_usd.hosted"),
])
def test_a_budget_cap_that_is_not_a_positive_amount_is_refused(budget, field):
    assert refusal(decide={"reaches": {"arm": "a", "avg_at_k": 0.5}, "budget": budget}).startswith(f"{field}: ")


@pytest.mark.parametrize("fields, field", [({"round_tasks": 0}, "decide.round_tasks"),
                                           ({"min_tasks": 1}, "decide.min_tasks")])
def test_rounds_of_no_task_or_a_burn_in_of_one_task_are_refused(fields, field):
    assert refusal(decide={"reaches": {"arm": "a", "avg_at_k": 0.5}, **fields}).startswith(f"{field}: ")


def test_a_prior_with_more_cached_than_prompt_tokens_is_refused():
    prior = {"resolve_rate": 0.5, "prompt_tokens": 10, "cached_tokens": 11, "completion_tokens": 1}
    assert refusal(plan={"priors": {"a": prior}}).startswith("plan.priors.a: cached_tokens (11) exceeds")
    assert ArmPrior.model_validate({**prior, "cached_tokens": 10}).episode_seconds == 300


def test_the_question_digest_ignores_the_budget_but_not_the_question():
    base = config(cheaper=CHEAPER)
    assert config(cheaper=CHEAPER, budget={"total_usd": 9}).question_digest() == base.question_digest()
    assert config(cheaper={**CHEAPER, "margin": 0.2}).question_digest() != base.question_digest()
    assert config(cheaper=CHEAPER, alpha=0.1).question_digest() != base.question_digest()


def test_a_round_fills_the_workers_unless_its_size_is_given():
    automatic = config(cheaper=CHEAPER)
    assert automatic.round_size(workers=150, arms=2, seeds=3) == 25
    assert automatic.round_size(workers=4, arms=2, seeds=3) == 10
    assert config(cheaper=CHEAPER, round_tasks=6).round_size(workers=150, arms=2, seeds=3) == 6


# --- one look -------------------------------------------------------------------------------------------------------

def arm(name: str, resolved, cost, attempts=None) -> ArmTasks:
    resolved = np.asarray(resolved, dtype=int)
    attempts = np.full(resolved.size, SEEDS) if attempts is None else np.asarray(attempts, dtype=int)
    cost = np.asarray(cost, dtype=float)
    return ArmTasks(name, resolved, attempts, cost, float(cost.sum()))


def paired(n: int, ratio: float, spread: float = 0.3, seed: int = 1) -> dict[str, ArmTasks]:
    """Two arms on the same n tasks and the same resolved attempts; b's cost per task is a's times `ratio`
    times a per-task factor of log-spread `spread`, so θa / θb is near 1 / ratio."""
    rng = np.random.default_rng(seed)
    resolved = rng.binomial(SEEDS, 0.6, n)
    cost_a = rng.lognormal(0.0, 1.0, n)
    cost_b = cost_a * ratio * rng.lognormal(0.0, spread, n)
    return {"a": arm("a", resolved, cost_a), "b": arm("b", resolved, cost_b)}


def one_look(decide: DecideConfig, data, *, number=1, previous=None) -> LookResult:
    return look(decide, data, look_number=number, total_tasks=TOTAL, previous=previous)


def test_a_clearly_cheaper_first_arm_is_decided_first_and_named():
    result = one_look(config(cheaper={"arms": ["a", "b"]}), paired(60, ratio=3.0))
    question = result.questions[0]
    assert result.decided and question.verdict == "first" and question.decided_at_tasks == 60
    assert question.upper < 1 and question.estimate == pytest.approx(1 / 3, rel=0.15)
    assert question.difference_usd.upper < 0 and question.tasks_to_decide is None
    assert question.cost_per_resolved["a"].estimate < question.cost_per_resolved["b"].estimate
    assert question.sentence.startswith("a is cheaper per resolved attempt than b by $")
    assert result.tasks == 60 and result.total_tasks == TOTAL and result.look == 1


def test_a_clearly_cheaper_second_arm_is_decided_second_with_its_saving():
    data = paired(60, ratio=0.5)
    question = one_look(config(cheaper={"arms": ["a", "b"]}), data).questions[0]
    assert question.verdict == "second" and question.lower > 1
    assert question.difference_usd.estimate > 0
    theta = {name: arm.cost_usd.sum() / arm.resolved.sum() for name, arm in data.items()}
    saving = round(100 * (1 - theta["b"] / theta["a"]))
    assert question.sentence.startswith(f"b is cheaper per resolved attempt than a by ${theta['a'] - theta['b']:.3g}")
    assert f"({saving} % [" in question.sentence


def test_arms_within_the_margin_are_equivalent():
    question = one_look(config(cheaper={"arms": ["a", "b"], "margin": 0.2}),
                        paired(400, ratio=1.0, spread=0.1)).questions[0]
    assert question.verdict == "equivalent"
    assert 1 / 1.2 <= question.lower <= question.upper <= 1.2
    assert question.sentence.startswith("a and b cost the same per resolved attempt within 20 %: a costs ")


def test_close_arms_at_few_tasks_are_undecided_with_the_tasks_the_plan_needs():
    result = one_look(config(cheaper={"arms": ["a", "b"]}), paired(25, ratio=1.1, spread=0.8))
    question = result.questions[0]
    assert not result.decided and question.verdict == "undecided" and question.decided_at_tasks is None
    assert question.lower < 1 < question.upper
    assert question.tasks_to_decide > 0
    assert question.sentence.startswith("which of a and b costs less per resolved attempt is undecided: a costs ")


def test_no_cost_verdict_before_the_burn_in():
    data = paired(12, ratio=3.0, spread=0.05)
    waiting = one_look(config(cheaper={"arms": ["a", "b"]}, min_tasks=20), data).questions[0]
    assert waiting.verdict == "undecided" and waiting.upper < 1  # the interval alone would have decided it
    assert waiting.tasks_to_decide == 8  # the burn-in's 20 tasks, not the interval, is what it waits for
    assert "undecided before 20 tasks (decide.min_tasks)" in waiting.sentence
    assert one_look(config(cheaper={"arms": ["a", "b"]}, min_tasks=12), data).questions[0].verdict == "first"


def test_the_plans_further_tasks_shrink_as_tasks_come():
    """The same ten tasks over and over: the estimate and the spread stay put, so the tasks the plan needs in all
    stay (nearly) put and the further tasks fall by the tasks run."""
    rng = np.random.default_rng(3)
    resolved, cost_a = rng.binomial(SEEDS, 0.6, 10), rng.lognormal(0, 1, 10)
    cost_b = cost_a * rng.lognormal(0, 0.4, 10)
    cost_b *= cost_a.sum() / cost_b.sum() / 0.9  # θa / θb = 0.9 exactly: a is 10 % cheaper
    decide = config(cheaper={"arms": ["a", "b"]})
    further = []
    for repeats in (2, 4, 8):
        data = {"a": arm("a", np.tile(resolved, repeats), np.tile(cost_a, repeats)),
                "b": arm("b", np.tile(resolved, repeats), np.tile(cost_b, repeats))}
        question = one_look(decide, data).questions[0]
        assert question.verdict == "undecided" and question.estimate == pytest.approx(0.9)
        further.append(question.tasks_to_decide)
    assert further[0] > further[1] > further[2] > 0, further
    assert further[0] + 20 == pytest.approx(further[2] + 80, rel=0.1)  # the same need in all, from any look


def test_an_arm_with_nothing_resolved_leaves_the_cost_question_open_and_says_why():
    data = {"a": arm("a", [1, 2, 0], [1.0, 1.0, 1.0]), "b": arm("b", [0, 0, 0], [2.0, 2.0, 2.0])}
    question = one_look(config(cheaper={"arms": ["a", "b"]}, min_tasks=2), data).questions[0]
    assert question.verdict == "undecided" and question.estimate is None and question.tasks_to_decide is None
    assert question.cost_per_resolved["b"] is None and question.cost_per_resolved["a"] is not None
    assert question.sentence.endswith("b has no resolved attempt yet")


def test_a_rate_clearly_above_the_claim_reaches_it():
    data = {"f": arm("f", [3] * 50 + [2] * 30, np.ones(80))}
    question = one_look(config(reaches={"arm": "f", "avg_at_k": 0.615}), data).questions[0]
    assert question.verdict == "reaches" and question.lower >= 0.615 and question.decided_at_tasks == 80
    assert question.estimate == pytest.approx((150 + 60) / 240)
    assert question.sentence == (f"f's Avg@3 reaches 0.615: {question.estimate:.2f} "
                                 f"[{question.lower:.2f}, {question.upper:.2f}]")


def test_a_rate_clearly_below_the_claim_is_below_and_a_close_one_undecided():
    low = {"f": arm("f", [0, 1, 1] * 20, np.ones(60))}
    below = one_look(config(reaches={"arm": "f", "avg_at_k": 0.9}), low).questions[0]
    assert below.verdict == "below" and below.upper < 0.9
    assert below.sentence.startswith("f's Avg@3 is below 0.9: 0.22 [")
    close = one_look(config(reaches={"arm": "f", "avg_at_k": 0.3}), {"f": arm("f", [0, 1, 1] * 4, np.ones(12))})
    question = close.questions[0]
    assert question.verdict == "undecided" and question.tasks_to_decide > 0 and not close.decided
    assert question.sentence.startswith("f's Avg@3 reaching 0.3 is undecided: 0.22 [")


def test_tasks_with_no_verdict_are_left_out_of_the_resolve_rate():
    scored = one_look(config(reaches={"arm": "f", "avg_at_k": 0.5}), {"f": arm("f", [3, 2] * 20, np.ones(40))})
    padded = one_look(config(reaches={"arm": "f", "avg_at_k": 0.5}),
                      {"f": arm("f", [3, 2] * 20 + [0] * 5, np.ones(45), attempts=[3] * 40 + [0] * 5)})
    assert padded.questions[0].estimate == scored.questions[0].estimate
    assert padded.questions[0].lower == scored.questions[0].lower


def test_a_verdict_reached_earlier_is_kept_with_its_tasks():
    decide = config(cheaper={"arms": ["a", "b"]}, reaches={"arm": "a", "avg_at_k": 0.2})
    first = one_look(decide, paired(40, ratio=3.0))
    assert [q.verdict for q in first.questions] == ["first", "reaches"] and first.decided
    reversed_data = paired(80, ratio=1 / 3, seed=2)  # later tasks say the opposite: the verdict never flips
    later = one_look(decide, reversed_data, number=2, previous=first)
    assert later.questions == first.questions and later.decided and later.look == 2 and later.tasks == 80
    assert one_look(decide, reversed_data, number=2).questions[0].verdict == "second"  # without the history


def test_a_run_is_decided_only_when_every_question_is():
    decide = config(cheaper={"arms": ["a", "b"]}, reaches={"arm": "a", "avg_at_k": 0.6})
    result = one_look(decide, paired(60, ratio=3.0))
    assert [q.verdict for q in result.questions] == ["first", "undecided"] and not result.decided
    kept = one_look(decide, paired(60, ratio=1.0, spread=1.0, seed=5), number=2, previous=result)
    assert kept.questions[0] == result.questions[0] and kept.questions[1].verdict == "undecided"


def first_tasks(data: dict[str, ArmTasks], n: int) -> dict[str, ArmTasks]:
    """What a look after the rounds covering the first n tasks sees."""
    return {name: arm(name, a.resolved[:n], a.cost_usd[:n], a.attempts[:n]) for name, a in data.items()}


def scripted_run(n: int, seed: int) -> dict[str, ArmTasks]:
    """Two arms on n tasks, a's true Avg@3 0.6; about one task in eight has no attempt with a verdict yet."""
    rng = np.random.default_rng(seed)
    attempts = np.where(rng.uniform(size=n) < 0.12, 0, SEEDS)
    resolved = np.minimum(rng.binomial(SEEDS, rng.beta(1.2, 0.8, n)), attempts)
    cost = rng.lognormal(0.0, 1.0, n)
    return {"a": arm("a", resolved, cost, attempts), "b": arm("b", resolved, cost * rng.lognormal(0.0, 0.5, n))}


def test_a_look_continued_from_the_previous_looks_state_equals_one_computed_from_scratch():
    """Rounds of random sizes: each look given the previous look (its reaches sequence carried on) gives the
    result of a look given that previous look as the ledger returns it (JSON: no state, so from scratch)."""
    rng = np.random.default_rng(41)
    data = scripted_run(400, seed=8)
    decide = config(cheaper={"arms": ["a", "b"]}, reaches={"arm": "a", "avg_at_k": 0.6})  # the truth: undecided
    carried = restored = None
    done = number = 0
    while done < 400:
        done, number = min(400, done + int(rng.integers(1, 60))), number + 1
        seen = first_tasks(data, done)
        carried = one_look(decide, seen, number=number, previous=carried)
        from_ledger = restored and LookResult.model_validate_json(restored.model_dump_json())
        restored = one_look(decide, seen, number=number, previous=from_ledger)
        assert carried.model_dump() == restored.model_dump() and carried == restored
        assert carried._reaches_state.sequence.n == int((data["a"].attempts[:done] > 0).sum())
    assert number > 10 and carried.questions[1].verdict == "undecided"  # the state was carried at every look


def test_a_look_feeds_the_sequence_only_the_new_tasks_when_the_previous_look_covers_the_first(monkeypatch):
    fed = []
    extend = BettingSequence.extend

    def counted_extend(sequence, values):
        fed.append(len(values))
        return extend(sequence, values)

    monkeypatch.setattr(BettingSequence, "extend", counted_extend)
    decide = config(reaches={"arm": "a", "avg_at_k": 0.6})
    data = scripted_run(100, seed=9)
    scored = [int((data["a"].attempts[:n] > 0).sum()) for n in (40, 100)]
    first = one_look(decide, first_tasks(data, 40))
    second = one_look(decide, data, number=2, previous=first)
    assert fed == [scored[0], scored[1] - scored[0]]  # the second look paid only for its new tasks
    assert first._reaches_state.sequence.n == scored[0]  # the previous look's state is left as it was
    resumed = one_look(decide, data, number=2, previous=LookResult.model_validate_json(first.model_dump_json()))
    assert fed[-1] == scored[1] and resumed.model_dump() == second.model_dump()  # no state stored: from scratch
    one_look(decide, scripted_run(100, seed=10), number=2, previous=first)
    assert fed[-1] == int((scripted_run(100, seed=10)["a"].attempts > 0).sum())  # other tasks: not continued


def test_arms_covering_different_tasks_are_refused():
    data = {"a": arm("a", [1, 2], [1.0, 1.0]), "b": arm("b", [1, 2, 3], [1.0, 1.0, 1.0])}
    with pytest.raises(ValueError, match="same tasks"):
        one_look(config(cheaper={"arms": ["a", "b"]}), data)


# --- the budget and the line ----------------------------------------------------------------------------------------

def test_the_total_cap_stops_a_round_that_would_pass_it_and_names_the_cap():
    decide = config(cheaper=CHEAPER, budget={"total_usd": 50})
    assert budget_stop(decide, {"hosted": 30.0, "frognano": 19.2}, {"hosted": 4.0, "frognano": 2.1}) == \
        "decide.budget.total_usd $50.00 reached ($49.20 spent; the next round would cost about $6.10)"
    assert budget_stop(decide, {"hosted": 30.0, "frognano": 10.0}, {"hosted": 4.0, "frognano": 2.1}) is None
    assert budget_stop(decide, {"hosted": 50.0}, {}) is not None  # already spent: reached with no round to come


def test_a_per_arm_cap_stops_on_its_arm_only():
    decide = config(cheaper=CHEAPER, budget={"per_arm_usd": {"frognano": 10}})
    assert budget_stop(decide, {"hosted": 500.0, "frognano": 8.0}, {"hosted": 100.0, "frognano": 1.0}) is None
    assert budget_stop(decide, {"hosted": 0.0, "frognano": 8.0}, {"hosted": 0.0, "frognano": 2.5}) == \
        "decide.budget.per_arm_usd.frognano $10.00 reached ($8.00 spent; the next round would cost about $2.50)"
    assert budget_stop(config(cheaper=CHEAPER), {"hosted": 1e6}, {"hosted": 1e6}) is None  # no cap, no stop


def test_the_verdict_line_says_decided_and_what_was_not_spent():
    result = one_look(config(cheaper={"arms": ["a", "b"]}), paired(60, ratio=3.0))
    line = verdict_line(result, "decided", 2640, 23.456)
    assert line.startswith("decided after 60 of 500 tasks: a is cheaper per resolved attempt than b by $")
    assert line.endswith("; $23.46 of evaluation not spent (2640 episodes)")


def test_the_verdict_line_says_undecided_where_it_stopped_and_what_the_plan_needs():
    decide = config(cheaper={"arms": ["a", "b"]}, reaches={"arm": "a", "avg_at_k": 0.3})
    result = one_look(decide, paired(25, ratio=1.1, spread=0.8))
    needs = max(q.tasks_to_decide for q in result.questions if q.verdict == "undecided")
    line = verdict_line(result, "undecided", 0, 0.0)
    assert line.startswith("undecided at the budget after 25 of 500 tasks: which of a and b costs less")
    assert line.endswith(f"; the plan says {needs} more tasks")
    assert verdict_line(result, "undecided", 0, 0.0, stop="exhausted").startswith(
        "undecided with every task run after 25 of 500 tasks: ")


def test_arms_that_cost_exactly_the_same_with_no_margin_can_never_be_told_apart():
    data = paired(30, ratio=1.0, spread=0.0)
    result = one_look(config(cheaper={"arms": ["a", "b"]}), data)
    question = result.questions[0]
    assert question.verdict == "undecided" and question.estimate == pytest.approx(1.0)
    assert question.tasks_to_decide is None
    assert verdict_line(result, "undecided", 0, 0.0).endswith(
        "; the plan cannot say how many more tasks (no estimate yet, or one on a decision boundary)")
    with_margin = one_look(config(cheaper={"arms": ["a", "b"], "margin": 0.05}), data).questions[0]
    assert with_margin.verdict == "equivalent"


# --- futility: stop undecided when the rest of the suite cannot decide -------------------------------------------

def equal_cost(n: int, seed: int = 11) -> dict[str, ArmTasks]:
    """Two arms whose true costs per resolved attempt are equal: b's cost is a's times a mean-one factor."""
    rng = np.random.default_rng(seed)
    resolved = rng.binomial(SEEDS, 0.6, n)
    cost_a = rng.lognormal(0.0, 1.0, n)
    return {"a": arm("a", resolved, cost_a), "b": arm("b", resolved, cost_a * rng.lognormal(-0.045, 0.3, n))}


def test_arms_that_cost_the_same_late_in_the_suite_are_futile_and_the_run_may_stop_undecided():
    """Equal costs, no margin, 400 of 500 tasks: even with the truth at the interval's edge the last 100 tasks
    cannot move the estimate past 0 by the final radius; the same tasks with 4,000 in the suite could."""
    data = equal_cost(400)
    decide = config(cheaper={"arms": ["a", "b"]})
    result = one_look(decide, data)
    question = result.questions[0]
    assert question.verdict == "undecided" and question.futile and result.futile and not result.decided
    assert "futile" not in result.model_dump() and "futile" not in question.model_dump()  # the ledger's schema
    roomy = look(decide, data, look_number=1, total_tasks=4000, previous=None)
    assert not roomy.futile and not roomy.questions[0].futile


def test_no_futility_before_the_burn_in_at_the_suites_end_or_once_decided():
    decide = config(cheaper={"arms": ["a", "b"]}, min_tasks=20)
    early = one_look(decide, paired(15, ratio=1.0, spread=0.0))
    assert not early.futile  # before min_tasks nothing is judged
    last = look(decide, equal_cost(60), look_number=1, total_tasks=60, previous=None)
    assert not last.futile  # no task left: the run ends exhausted, not futile
    decided = one_look(decide, paired(60, ratio=3.0))
    assert decided.decided and not decided.futile and not decided.questions[0].futile


def test_a_claim_at_the_arms_rate_late_in_the_suite_is_futile_and_a_clear_one_is_not():
    rng = np.random.default_rng(9)
    resolved = rng.binomial(SEEDS, rng.beta(0.7, 0.7, 450))
    data = {"a": arm("a", resolved, np.ones(450))}
    at_rate = float(resolved.mean() / SEEDS)
    futile = one_look(config(reaches={"arm": "a", "avg_at_k": at_rate}), data)
    assert futile.questions[0].verdict == "undecided" and futile.futile
    early = {"a": arm("a", resolved[:100], np.ones(100))}
    assert not one_look(config(reaches={"arm": "a", "avg_at_k": at_rate}), early).futile


def test_the_verdict_line_of_a_futile_stop_says_it_is_out_of_reach_and_what_was_not_spent():
    result = one_look(config(cheaper={"arms": ["a", "b"]}), equal_cost(400))
    assert result.futile
    line = verdict_line(result, "undecided", 600, 12.5, stop="futile")
    assert line.startswith("undecided, out of reach in this suite, after 400 of 500 tasks: even at the most "
                           "favourable value of its interval the remaining tasks could not decide it; which of a")
    assert line.endswith("; $12.50 of evaluation not spent (600 episodes)")


def test_the_claims_bets_are_sized_for_the_suite():
    """The claim's betting sequence is sized for 60 % of total_tasks: the same scores looked at as part of a
    shorter suite give a narrower interval at its end than as part of a longer one."""
    rng = np.random.default_rng(2)
    resolved = rng.binomial(SEEDS, rng.beta(2, 2, 300))
    data = {"a": arm("a", resolved, np.ones(300))}
    decide = config(reaches={"arm": "a", "avg_at_k": 0.9})
    short = look(decide, data, look_number=1, total_tasks=300, previous=None).questions[0]
    long = look(decide, data, look_number=1, total_tasks=3000, previous=None).questions[0]
    assert short.upper - short.lower < long.upper - long.lower
    state = look(decide, data, look_number=1, total_tasks=300, previous=None)._reaches_state
    assert state.sequence.horizon == 180
