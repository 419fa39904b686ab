"""The run spec: a YAML file validated by pydantic (a wrong field is named with its path), and Leaf's
published evaluation settings as the `leaf` preset."""

from __future__ import annotations

import hashlib
import math
import os
import re
from pathlib import Path
from typing import Any, Literal

import yaml
from pydantic import BaseModel, Field, ValidationError, field_validator, model_validator

from compare.arms import (ARM_NAME, ARM_TAGS, MAX_USD_PER_HOUR, MAX_USD_PER_MTOK, MAX_USD_PER_VCPU_HOUR,  # noqa: F401
                          Arm, GpuLeaseSpec, LocalArm, OracleArm, Prices, PriceTier, RouterArm, Sampling, SglangArm,
                          StrictModel)
from compare.budgets import Budgets  # noqa: F401 - the spec's budgets, also read as compare.spec.Budgets
from compare.claim_spec import ClaimConfig
from compare.decide_spec import DecideConfig, PlanConfig
from sandbox import BackendName, SWEBenchImages

NAMESPACE_PATTERN = r"^[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?$"  # a Kubernetes namespace name (a DNS-1123 label)

# Upper bounds far above any real plan (the arms' price bounds are with the arms): a typo, not a plan.
INT64 = 2**63 - 1


class SpecError(ValueError):
    """A run spec that cannot be used; the message names the file and the field path."""


class KubernetesConfig(StrictModel):
    """Where the kubernetes backend puts its pods; the defaults are kubectl's (its current context)."""

    namespace: str = Field("default", pattern=NAMESPACE_PATTERN)
    context: str | None = Field(None, min_length=1, description="a context of the kubeconfig (default: current)")
    kubeconfig: str | None = Field(None, min_length=1, description="default: $KUBECONFIG or ~/.kube/config; "
                                   "in a cluster, the runner pod's service account")
    create_concurrency: int = Field(16, gt=0, le=1024, description="pods being created at once (until scheduled)")
    delete_concurrency: int = Field(16, gt=0, le=1024, description="pods being deleted at once")


class SandboxConfig(StrictModel):
    backend: BackendName = Field(
        "local", description="local: bubblewrap over this host; podman or docker: each task's own container image; "
        "kubernetes: the same images by digest, one pod per attempt")
    base_root: str = "host"
    bind_ro: list[str] = Field(default_factory=list)
    unsafe_no_isolation: bool = False
    images: str | None = Field(None, description="an image lock file (`leafcost images lock`) every task's image "
                               "must match, by digest")
    kubernetes: KubernetesConfig | None = None
    verifier_network: Literal["swebench", "none"] = Field(
        "swebench", description="SWE-bench instances: 'swebench' grades with network as SWE-bench's harness does "
        "(the internet, never this host's or a private address), 'none' grades offline")
    # Harbor's job-config overrides of every task's [environment]: the same for every arm, so in the spec hash.
    override_cpus: float | None = Field(None, gt=0, le=1024, description="every task's cpus instead of its own")
    override_memory_mb: int | None = Field(None, gt=0, le=16 << 20, description="every task's memory_mb instead "
                                           "of its own")
    override_storage_mb: int | None = Field(None, gt=0, le=1 << 30, description="every task's storage_mb instead "
                                            "of its own")

    def resources(self) -> dict[str, float | int]:
        """The overrides given, as [environment] fields."""
        given = {"cpus": self.override_cpus, "memory_mb": self.override_memory_mb,
                 "storage_mb": self.override_storage_mb}
        return {name: value for name, value in given.items() if value is not None}

    @model_validator(mode="after")
    def _backend_fields(self) -> SandboxConfig:
        if self.backend == "local" and self.images is not None:
            raise ValueError("images: an image lock applies to the podman, docker and kubernetes backends only")
        if self.kubernetes is not None and self.backend != "kubernetes":
            raise ValueError(f"kubernetes: applies to backend kubernetes only, not {self.backend}")
        if self.backend == "kubernetes" and self.images is None:
            raise ValueError("images: the kubernetes backend runs each task's image by digest: lock them with "
                             "`leafcost images lock SUITE` and name the lock file here")
        if self.backend != "local" and (self.base_root != "host" or self.bind_ro or self.unsafe_no_isolation):
            raise ValueError(f"base_root, bind_ro and unsafe_no_isolation apply to the local backend only, "
                             f"not {self.backend}")
        return self


class CostConfig(StrictModel):
    sandbox_usd_per_vcpu_hour: float = Field(
        0.045, ge=0, le=MAX_USD_PER_VCPU_HOUR,
        description="what one sandbox vCPU-hour costs, the same for every arm (default: an on-demand "
        "general-purpose cloud vCPU)")


class RunSpec(StrictModel):
    name: str = Field(pattern=r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,80}$")
    suite: str
    swebench: SWEBenchImages = Field(default_factory=SWEBenchImages,
                                     description="SWE-bench suites: how the instance images are named")
    tasks: list[str] | None = Field(None, description="only these task ids")
    limit: int | None = Field(None, gt=0, le=10_000_000, description="only the first N tasks (after shuffling)")
    seeds: int = Field(3, gt=0, le=10_000)
    workers: int = Field(4, gt=0, le=10_000)
    max_attempts: int = Field(2, gt=0, le=100, description="attempts per episode; only infrastructure failures retry")
    task_order_seed: int | None = Field(42, ge=-INT64, le=INT64,
                                        description="shuffle the task order with this seed; null keeps it")
    sandbox: SandboxConfig = Field(default_factory=SandboxConfig)
    budgets: Budgets = Field(default_factory=Budgets)
    costs: CostConfig = Field(default_factory=CostConfig)
    arms: list[Arm] = Field(min_length=1)
    preset: Literal["leaf"] | None = None
    decide: DecideConfig | None = Field(None, description="a decision question: the run goes in rounds and stops "
                                        "when it is decided (docs/decisions.md)")
    plan: PlanConfig | None = Field(None, description="what `leafcost plan` assumes where no run has measured an arm")
    claim: ClaimConfig | None = Field(None, description="a published figure this run checks (docs/claims.md)")

    @model_validator(mode="before")
    @classmethod
    def _apply_preset(cls, data: Any) -> Any:
        if isinstance(data, dict) and "repos" in data:
            raise ValueError("repos: no longer read: SWE-bench instances run in their own images, which hold the "
                             "repository (remove the key; see `swebench:` for the images' namespace and tag)")
        if isinstance(data, dict) and data.get("preset") == "leaf":
            return apply_leaf_preset(data)
        return data

    @field_validator("arms")
    @classmethod
    def _unique_names(cls, arms: list[Any]) -> list[Any]:
        names = [arm.name for arm in arms]
        duplicates = sorted({n for n in names if names.count(n) > 1})
        if duplicates:
            raise ValueError(f"arm names must be unique; repeated: {', '.join(duplicates)}")
        return arms

    @model_validator(mode="after")
    def _questions_name_arms(self) -> RunSpec:
        if self.decide is not None:
            self.decide.check_arms(self.arms)
            if self.task_order_seed is None:  # a stop after N tasks must have looked at a random sample of them
                raise ValueError("task_order_seed: a run with decide: may stop after a sample of the tasks, which "
                                 "must be a random one: give a seed (null keeps the suite's own order)")
        if self.plan is not None:
            self.plan.check_arms(self.arms)
        if self.claim is not None:
            self._check_claim(self.claim)
        return self

    def _check_claim(self, claim: ClaimConfig) -> None:
        by_name = {arm.name: arm for arm in self.arms}
        if claim.arm not in by_name:
            raise ValueError(f"claim.arm: no arm named {claim.arm!r} (arms: {', '.join(by_name)})")
        if by_name[claim.arm].kind == "oracle":
            raise ValueError(f"claim.arm: {claim.arm!r} is the oracle arm, which has no model to check")
        if claim.k != self.seeds:
            raise ValueError(f"claim.k: the claim averages over {claim.k} seeds, the spec runs seeds: {self.seeds}")

    def digest(self) -> str:
        """The hash of what every episode depends on: not the decision question, the claim or the plan's priors (they
        decide how many episodes run, or what is asked of them, not how one runs), so a resumed run may raise its
        budget. An arm's `released` is hashed as its other descriptive fields (name, model) are, since a resume keeps
        the stored spec; left out when unset, so runs started before the field existed still resume."""
        unset = {i: {"released"} for i, arm in enumerate(self.arms) if arm.released is None}
        exclude: dict[str, Any] = {"decide": True, "plan": True, "claim": True, **({"arms": unset} if unset else {})}
        return hashlib.sha256(self.model_dump_json(exclude=exclude).encode()).hexdigest()


# Leaf's published settings (shared/reference/leaf.md): applied where the spec is silent.
LEAF_PRESET: dict[str, Any] = {
    "seeds": 3, "workers": 150, "max_attempts": 2, "task_order_seed": 42,
    "budgets": {"max_steps": 150, "max_context_tokens": 131072, "time_budget_sec": 10800},
}
LEAF_SAMPLING: dict[str, Any] = {"temperature": 0.6, "top_p": 0.95, "top_k": 20, "min_p": 0.0,
                                 "chat_template_kwargs": {"enable_thinking": True}}  # as Leaf's eval configs
LEAF_TOKENS_PER_TURN = {"swe-bench-verified": 8192, "swe-bench-pro": 32000, "terminal-bench-2": 32000,
                        "patcheval-verified": 8192}


def apply_leaf_preset(data: dict[str, Any]) -> dict[str, Any]:
    merged = {**LEAF_PRESET, **data}
    merged["budgets"] = {**LEAF_PRESET["budgets"], **(data.get("budgets") or {})}
    suite_key = re.sub(r"[^a-z0-9]+", "-", Path(str(data.get("suite", ""))).stem.lower())
    if suite_key in LEAF_TOKENS_PER_TURN:
        merged["budgets"].setdefault("max_tokens_per_turn", LEAF_TOKENS_PER_TURN[suite_key])
    arms = []
    for arm in data.get("arms") or []:
        if isinstance(arm, dict) and arm.get("adapter") != "oracle":
            arm = {**arm, "sampling": _leaf_sampling(arm.get("sampling") or {})}
        arms.append(arm)
    merged["arms"] = arms
    return merged


def _leaf_sampling(sampling: Any) -> Any:
    """Leaf's sampling under the arm's own; the arm's chat_template_kwargs keys win one by one (an explicit
    null sends none). Anything but a mapping is left for validation to name."""
    if not isinstance(sampling, dict):
        return sampling
    merged = {**LEAF_SAMPLING, **sampling}
    kwargs = sampling.get("chat_template_kwargs", {})
    if isinstance(kwargs, dict):
        merged["chat_template_kwargs"] = {**LEAF_SAMPLING["chat_template_kwargs"], **kwargs}
    return merged


def load_run_spec(path: Path | str) -> RunSpec:
    return parse_run_spec(read_yaml(path), source=str(path))


def read_yaml(path: Path | str) -> Any:
    """A YAML file's content, or a SpecError naming the file and what is wrong with it."""
    path = Path(path)
    try:
        return yaml.load(path.read_text(encoding="utf-8"), Loader=UniqueKeyLoader)  # noqa: S506 - a SafeLoader
    except FileNotFoundError:
        raise SpecError(f"{path}: no such file: check the path") from None
    except IsADirectoryError:
        raise SpecError(f"{path}: a directory, not a file: name the YAML file") from None
    except OSError as exc:
        raise SpecError(f"{path}: cannot read: {exc.strerror}") from None
    except UnicodeDecodeError as exc:
        raise SpecError(f"{path}: not UTF-8 text (byte {exc.start}): give the YAML file itself") from None
    except yaml.YAMLError as exc:
        raise SpecError(f"{path}{yaml_problem(exc)}: fix the YAML") from None


class UniqueKeyLoader(yaml.SafeLoader):
    """PyYAML's safe loader, refusing a key given twice in one mapping: PyYAML keeps the last one silently, so a
    second `sandbox:` further down would quietly replace the first."""


def _unique_keys(loader: UniqueKeyLoader, node: yaml.MappingNode) -> dict[Any, Any]:
    first: dict[Any, int] = {}
    for key_node, _ in node.value:
        if key_node.tag == "tag:yaml.org,2002:merge":  # `<<: *base`: its keys may be overridden, as YAML means
            continue
        key = loader.construct_object(key_node, deep=True)
        try:
            if key in first:
                raise yaml.constructor.ConstructorError(None, None, f"{key!r} is given twice (first on line "
                                                        f"{first[key]})", key_node.start_mark)
            first[key] = key_node.start_mark.line + 1
        except TypeError:  # an unhashable key: construct_mapping below refuses it with PyYAML's own words
            continue
    return loader.construct_mapping(node, deep=True)


UniqueKeyLoader.add_constructor(yaml.resolver.BaseResolver.DEFAULT_MAPPING_TAG, _unique_keys)


def yaml_problem(exc: yaml.YAMLError) -> str:
    """` line L, column C: what is wrong`, one line (PyYAML's own text spans six, about a `<unicode string>`)."""
    problem = getattr(exc, "problem", None) or str(exc).splitlines()[0]
    if "'\\t'" in problem:
        problem = "a tab (YAML indents with spaces only)"
    context, opened = getattr(exc, "context", None), getattr(exc, "context_mark", None)
    if context and opened is not None:
        problem += f" ({context} opened at {_line_column(opened)})"
    mark = getattr(exc, "problem_mark", None)
    return f"{' ' + _line_column(mark) if mark is not None else ''}: {problem}"


def _line_column(mark: Any) -> str:
    return f"line {mark.line + 1}, column {mark.column + 1}"  # PyYAML counts from 0, editors from 1


def parse_run_spec(raw: Any, source: str = "spec") -> RunSpec:
    """A user's spec, validated, with every number in range and its host paths present, before anything runs.
    (A stored spec is read with RunSpec.model_validate_json: a ledger is read on machines without those paths.)"""
    spec = validate_mapping(RunSpec, raw, source, "a run spec is a mapping of fields (name, suite, arms, ...)")
    problem = _out_of_range(spec.model_dump(), "") or sandbox_path_problem(spec.sandbox)
    if problem:
        raise SpecError(f"{source}: {problem}")
    return spec


def sandbox_path_problem(sandbox: SandboxConfig) -> str | None:
    """The first of the sandbox's host paths that cannot work, named by its field; None when all can."""
    if sandbox.base_root != "host":
        root = Path(sandbox.base_root)
        if not root.is_dir():
            return f"sandbox.base_root: {root} does not exist" + ("" if not root.exists() else " as a directory")
        if not (root / "usr/bin/python3").exists():
            return (f"sandbox.base_root: {root} has no usr/bin/python3 (give a root directory with Python 3 in it, "
                    "or \"host\")")
    for i, path in enumerate(sandbox.bind_ro):
        if not os.path.isabs(path):
            return f"sandbox.bind_ro.{i}: {path} is not an absolute path (it is bound at the same path inside)"
        if not os.path.exists(path):
            return f"sandbox.bind_ro.{i}: {path} does not exist"
    return None


def _out_of_range(value: Any, where: str) -> str | None:
    """A number no field bounds (inside free-form mappings such as chat_template_kwargs) that JSON or the
    ledger cannot hold: an integer beyond 64 bits, or a float that is not finite."""
    if isinstance(value, dict):
        return next((found for key, item in value.items()
                     if (found := _out_of_range(item, f"{where}.{key}" if where else str(key)))), None)
    if isinstance(value, list | tuple):
        return next((found for i, item in enumerate(value) if (found := _out_of_range(item, f"{where}.{i}"))), None)
    if isinstance(value, int) and not isinstance(value, bool) and not -INT64 - 1 <= value <= INT64:
        return f"{where}: {value} is out of range (a 64-bit integer)"
    if isinstance(value, float) and not math.isfinite(value):
        return f"{where}: {value} is not a finite number"
    return None


def validate_mapping(model: type[BaseModel], raw: Any, source: str, shape: str) -> Any:
    """`raw` as `model`, or a SpecError naming the source and every wrong field by its path."""
    if not isinstance(raw, dict):
        raise SpecError(f"{source}: {shape}")
    try:
        return model.model_validate(raw)
    except ValidationError as exc:
        raise SpecError(f"{source}: {describe_validation_error(exc)}") from None


def describe_validation_error(exc: ValidationError) -> str:
    """Every problem, each as `field.path: message` (the union tag is dropped from arm paths)."""
    lines = []
    for error in exc.errors():
        loc = [str(part) for part in error["loc"] if part not in ARM_TAGS]
        message = error["msg"].removeprefix("Value error, ")  # pydantic's wrapping of our own ValueError
        if error["type"] in ("union_tag_invalid", "union_tag_not_found"):  # an arm's `adapter`
            loc.append(error["ctx"]["discriminator"].strip("'"))
            message = _unknown_arm_kind(error["ctx"].get("tag"))
        where = ".".join(loc) or "(top level)"
        if not loc and re.match(r"^[a-z_][\w.]*: ", message):  # a spec-wide check names its own field
            lines.append(message)
            continue
        if error["type"] == "extra_forbidden":
            message = "unknown field"
            if loc and loc[-1] == "api_key":
                message += " (never put a key in the spec: set api_key_env to the variable's name)"
        lines.append(f"{where}: {message}")
    return "; ".join(lines)


def _unknown_arm_kind(tag: Any) -> str:
    """An arm's missing or unknown `adapter`, with the kinds the registry (compare.arms) knows."""
    kinds = ", ".join(sorted(ARM_TAGS))
    return f"unknown adapter {tag!r}: choose one of {kinds}" if tag is not None else f"missing: choose one of {kinds}"
