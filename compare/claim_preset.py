"""Claim presets: one data file per published claim (compare/presets/NAME.yaml) holding the claimed figures, the
benchmark's dataset, the vendor's published settings and what could not be confirmed; read by `leafcost reproduce`,
which turns one into a run spec. A second claim is a second file, not new code."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from pydantic import Field, model_validator

from compare.arms import Sampling, StrictModel
from compare.budgets import Budgets
from compare.claim_spec import ClaimConfig
from compare.spec import INT64, SpecError, read_yaml, validate_mapping

PRESETS_DIR = Path(__file__).parent / "presets"
PRESET_NAME = r"^[a-z0-9][a-z0-9_.-]{0,80}$"  # also a valid run spec name


class PresetError(ValueError):
    """A preset that cannot be had; the message names the preset (and the known ones) or its file and field."""


class PresetClaim(ClaimConfig):
    """The claim as a preset states it: everything but the arm, which is the run's first arm."""

    arm: str | None = Field(None, description="not in a preset: the claim's arm is the first --arm")

    @model_validator(mode="after")
    def _no_arm(self) -> PresetClaim:
        if self.arm is not None or self.preset is not None or self.unconfirmed:
            raise ValueError("arm, preset and unconfirmed are filled in by `leafcost reproduce` (the claim arm is "
                             "the first --arm; unconfirmed is the preset's top-level list): remove them")
        return self


class PresetDataset(StrictModel):
    """Where the benchmark's instances come from, as `leafcost swebench export` names them."""

    name: str = Field(min_length=1, max_length=200, description="the Hugging Face dataset, e.g. "
                      "SWE-bench/SWE-bench_Verified")
    split: str = Field("test", min_length=1, max_length=100)
    revision: str | None = Field(None, min_length=1, max_length=200, description="the commit the claim ran on "
                                 "(null: not published)")
    instance_ids: list[str] | None = Field(None, min_length=1, description="exactly these instances (null: the "
                                           "claim's instance count, whichever they are)")

    def export_command(self) -> str:
        """The command line that writes these rows."""
        revision = f" --revision {self.revision}" if self.revision else ""
        return f"leafcost swebench export {self.name} --split {self.split}{revision} --out ROWS.jsonl"


class PresetSettings(StrictModel):
    """The vendor's published evaluation settings the run spec takes as they are."""

    seeds: int = Field(gt=0, le=10_000)
    workers: int = Field(gt=0, le=10_000)
    max_attempts: int = Field(gt=0, le=100)
    task_order_seed: int | None = Field(ge=-INT64, le=INT64)
    budgets: Budgets
    sampling: Sampling = Field(description="the claim arm's sampling; an arm file may not set these otherwise")


class ClaimPreset(StrictModel):
    """One preset file."""

    name: str = Field(pattern=PRESET_NAME)
    model: str = Field(min_length=1, max_length=200, description="the published weights the claim is about")
    serving: str | None = Field(None, max_length=500, description="how the vendor serves the model, as published")
    claim: PresetClaim
    dataset: PresetDataset
    settings: PresetSettings
    unconfirmed: list[str] = Field(default_factory=list, description="settings neither the vendor's publications "
                                   "nor its code confirm, one sentence each")

    @model_validator(mode="after")
    def _consistent(self) -> ClaimPreset:
        if self.claim.k != self.settings.seeds:
            raise ValueError(f"claim.k: {self.claim.k}, but settings.seeds is {self.settings.seeds}: Avg@k averages "
                             "over the seeds")
        ids = self.dataset.instance_ids
        if ids is not None:
            if len(set(ids)) != len(ids):
                raise ValueError("dataset.instance_ids: an instance is listed twice")
            if self.claim.instances is not None and len(ids) != self.claim.instances:
                raise ValueError(f"dataset.instance_ids: {len(ids)} listed, but claim.instances is "
                                 f"{self.claim.instances}")
        return self

    def claim_config(self, arm: str) -> ClaimConfig:
        """The run spec's `claim:` with `arm` as the claim's arm."""
        stated = self.claim.model_dump(exclude={"arm", "preset", "unconfirmed"})
        return ClaimConfig(**stated, arm=arm, preset=self.name, unconfirmed=list(self.unconfirmed))


def preset_names() -> list[str]:
    """The presets leafcost ships, by name."""
    return sorted(path.stem for path in PRESETS_DIR.glob("*.yaml"))


def list_presets() -> list[ClaimPreset]:
    """Every preset leafcost ships, by name."""
    return [load_preset(name) for name in preset_names()]


def load_preset(preset: str) -> ClaimPreset:
    """A preset by name (compare/presets/NAME.yaml) or by the path of a preset file; PresetError naming the known
    presets when it is neither, or the file and field when the file is wrong."""
    path = _preset_path(preset)
    try:
        loaded = validate_mapping(ClaimPreset, read_yaml(path), str(path), "a preset is a mapping of fields (name, "
                                  "model, claim, dataset, settings, unconfirmed)")
    except SpecError as exc:
        raise PresetError(str(exc)) from None
    if path.parent == PRESETS_DIR and loaded.name != path.stem:  # a shipped preset is found by its file's name
        raise PresetError(f"{path}: name: {loaded.name!r}, but the file is {path.name}: they must match")
    return loaded


def _preset_path(preset: str) -> Path:
    if preset.endswith((".yaml", ".yml")) or "/" in preset or Path(preset).is_file():
        return Path(preset)
    if preset in preset_names():
        return PRESETS_DIR / f"{preset}.yaml"
    known = ", ".join(preset_names()) or "none"
    raise PresetError(f"preset {preset!r}: no such preset (presets: {known}); or give the path of a preset file")


def preset_listing(preset: ClaimPreset) -> dict[str, Any]:
    """What `leafcost reproduce --list` says of a preset."""
    claim = preset.claim
    return {"name": preset.name, "title": claim.title, "benchmark": claim.benchmark, "instances": claim.instances,
            "model": preset.model, "avg_at_k": claim.avg_at_k, "pass_at_k": claim.pass_at_k, "k": claim.k,
            "dataset": preset.dataset.name, "split": preset.dataset.split, "unconfirmed": len(preset.unconfirmed)}
