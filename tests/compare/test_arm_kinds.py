"""Arm kinds are types: each is one file in compare/arms, and everything else asks the arm instead of testing its
type, so a new kind is a new file plus its line in ARM_TYPES."""

from __future__ import annotations

import ast
from pathlib import Path
from types import SimpleNamespace

import pytest

from compare.arms import ARM_TAGS, ARM_TYPES, Prices
from compare.spec import parse_run_spec

ROOT = Path(__file__).parents[2]
ARM_CLASS_NAMES = {arm.__name__ for arm in ARM_TYPES}

ARMS = [
    {"name": "frognano", "adapter": "sglang", "model": "frognano-4b", "base_url": "http://127.0.0.1:30000/v1",
     "gpu": {"type": "H200", "count": 2, "usd_per_hour": 3.5}},
    {"name": "hosted", "adapter": "router", "model": "gpt-5-mini", "base_url": "http://127.0.0.1:4000/v1",
     "prices": {"input": 0.25, "output": 2.0}},
    {"name": "smol", "adapter": "local"},
    {"name": "oracle", "adapter": "oracle"},
]


def arms():
    return parse_run_spec({"name": "kinds", "suite": "builtin", "arms": ARMS}).arms


def test_every_kind_says_how_it_is_grouped_and_billed():
    assert ARM_TAGS == {"sglang", "router", "local", "oracle"}
    found = {arm.adapter: (arm.kind, arm.billing) for arm in arms()}
    assert found == {"sglang": ("self-hosted", "lease"), "router": ("hosted", "tokens"),
                     "local": ("self-hosted", "lease"), "oracle": ("oracle", "none")}


def test_no_module_outside_the_arm_kinds_names_an_arm_class():
    """The runner, summary, repricing, API and reports ask the arm; none tests which class it is."""
    offenders = []
    for path in sorted([*(ROOT / "compare").rglob("*.py"), *(ROOT / "reports").rglob("*.py")]):
        if path.parent.name == "arms" or path.name == "spec.py":  # the kinds themselves, and the spec's union
            continue
        names = {node.id for node in ast.walk(ast.parse(path.read_text())) if isinstance(node, ast.Name)}
        names |= {alias.name for node in ast.walk(ast.parse(path.read_text())) if isinstance(node, ast.ImportFrom)
                  for alias in node.names}
        if names & ARM_CLASS_NAMES:
            offenders.append(f"{path.relative_to(ROOT)}: {sorted(names & ARM_CLASS_NAMES)}")
    assert offenders == []


def test_price_sheets_have_every_field_of_the_api_for_every_kind():
    sheets = {arm.adapter: arm.price_sheet() for arm in arms()}
    assert {frozenset(sheet) for sheet in sheets.values()} == {frozenset(
        {"source", "prices", "litellm_model", "fallback_prices", "usd_per_hour", "gpus", "gpu_type"})}
    assert sheets["sglang"] | {} == {**sheets["oracle"], "source": "lease", "usd_per_hour": 3.5, "gpus": 2,
                                     "gpu_type": "H200"}
    assert sheets["router"]["source"] == "explicit" and sheets["router"]["prices"].input == 0.25
    assert (sheets["local"]["source"], sheets["local"]["usd_per_hour"]) == ("lease", 0.10)


def test_each_kind_takes_the_what_if_price_it_is_billed_by():
    by_tag = {arm.adapter: arm for arm in arms()}
    hourly = SimpleNamespace(prices=None, litellm_model=None, usd_per_hour=2.0)
    tokens = SimpleNamespace(prices=Prices(input=1, output=2), litellm_model=None, usd_per_hour=None)
    assert by_tag["sglang"].reprice(hourly) == by_tag["local"].reprice(hourly) == 2.0
    assert by_tag["router"].reprice(tokens).output == 2
    with pytest.raises(ValueError, match="priced by the hour: give usd_per_hour"):
        by_tag["sglang"].reprice(tokens)
    with pytest.raises(ValueError, match="priced per token"):
        by_tag["router"].reprice(hourly)
    with pytest.raises(ValueError, match="the oracle arm has no prices to change"):
        by_tag["oracle"].reprice(hourly)
    unknown = SimpleNamespace(prices=None, litellm_model="no-such-model-anywhere", usd_per_hour=None)
    with pytest.raises(ValueError, match="litellm_model 'no-such-model-anywhere' has no price in"):
        by_tag["router"].reprice(unknown)


def test_only_an_unpriced_hosted_arm_refuses_to_start():
    unpriced = parse_run_spec({"name": "k", "suite": "builtin", "arms": [
        {"name": "h", "adapter": "router", "model": "no-such-model-anywhere"}]}).arms[0]
    assert "has no price in" in unpriced.start_problem() and "allow_unpriced: true" in unpriced.start_problem()
    assert unpriced.model_copy(update={"allow_unpriced": True}).start_problem() is None
    assert [arm.start_problem() for arm in arms()] == [None] * 4


def test_adapters_are_built_by_the_arm_and_the_oracle_has_none(monkeypatch):
    monkeypatch.setenv("ROUTER_API_KEY", "sk-test")  # the router adapter reads its key when it is built
    built = {arm.adapter: arm.build_adapter() for arm in arms()}
    assert built["oracle"] is None
    assert {tag: type(adapter).__name__ for tag, adapter in built.items() if adapter} == {
        "sglang": "SGLangAdapter", "router": "RouterAdapter", "local": "LocalAdapter"}
    assert [arm.metrics_interval() for arm in arms()] == [15.0, None, None, None]


def test_each_arm_builds_its_solver_and_only_the_oracle_sees_the_solution(monkeypatch):
    monkeypatch.setenv("ROUTER_API_KEY", "sk-test")
    from compare.episode import LEAFCOST_PROMPT
    from compare.spec import Budgets

    solvers = {arm.adapter: arm.build_solver(Budgets(), LEAFCOST_PROMPT) for arm in arms()}
    assert {tag: (type(s).__name__, s.sees_solution) for tag, s in solvers.items()} == {
        "sglang": ("LeafAgent", False), "router": ("LeafAgent", False), "local": ("LeafAgent", False),
        "oracle": ("ReferenceSolution", True)}
    assert type(solvers["router"].adapter).__name__ == "RouterAdapter"
    with pytest.raises(TypeError, match="has no model to drive"):  # a model arm without its prompt is a bug
        arms()[0].build_solver(Budgets(), None)


def test_the_runner_and_an_attempt_never_ask_what_kind_an_arm_is():
    """The oracle is a second solver, not a branch: the runner's one question about an arm is its billing."""
    for name in ("runner.py", "live_arms.py", "attempt.py", "solvers.py"):
        tree = ast.parse((ROOT / "compare" / name).read_text())
        kinds = [node.lineno for node in ast.walk(tree) if isinstance(node, ast.Attribute) and node.attr == "kind"
                 and not (isinstance(node.value, ast.Name) and node.value.id == "exc")]
        strings = [node.lineno for node in ast.walk(tree) if isinstance(node, ast.Constant) and node.value == "oracle"
                   and name != "solvers.py"]
        assert (name, kinds, strings) == (name, [], [])
