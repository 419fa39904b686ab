"""A run spec's `claim:`: a published figure the run checks (issue "The vendor's claim, checked in one command").
`leafcost reproduce` copies it from a preset (compare/presets/, one data file per claim); any spec may carry one.
It describes the question, not the episodes, so it is outside the spec's hash, as `decide:` is."""

from __future__ import annotations

from pydantic import Field, model_validator

from compare.arms import StrictModel


class ClaimConfig(StrictModel):
    """The claim: an arm's Avg@k (and Pass@k) on a benchmark, as its vendor published it, and how it is tested.

    The claim's tasks are the run's tasks that are not fresh for the claim's arm (created on or before its
    `released:` day, or undated); tasks created after it are the fresh ones the contamination gap compares them
    with (compare.freshness's rule)."""

    preset: str | None = Field(None, description="the preset this claim came from (compare/presets/NAME.yaml)")
    title: str = Field(min_length=1, max_length=200, description="what is claimed, in a few words")
    source: str = Field(min_length=1, max_length=2000, description="where the vendor states it")
    arm: str = Field(description="the arm whose figures are claimed, by name")
    benchmark: str = Field(min_length=1, max_length=200, description="the benchmark's name, e.g. SWE-bench Verified")
    instances: int | None = Field(None, gt=0, le=10_000_000, description="the benchmark's instance count the claim "
                                  "was made on (null: not stated)")
    avg_at_k: float = Field(gt=0, lt=1, description="the claimed Avg@k (a share: 0.615)")
    pass_at_k: float | None = Field(None, gt=0, le=1, description="the claimed Pass@k, if published")
    k: int = Field(gt=0, le=10_000, description="the seeds per task the claim averages over (the spec's seeds)")
    tolerance: float = Field(0.05, ge=0, lt=1, description="a true Avg@k at least claimed − tolerance is "
                             "'consistent with the claim'; the test names a shortfall beyond it")
    alpha: float = Field(0.05, gt=0, le=0.2, description="each verdict's error rate: 'below' when the claim holds, "
                         "'consistent' when the truth is short by more than the tolerance")
    max_harness_error_rate: float = Field(0.02, ge=0, le=1, description="above this share of the claim arm's "
                                          "attempts ending in a harness error, the verdict is 'harness unhealthy'")
    unconfirmed: list[str] = Field(default_factory=list, description="settings the preset could not confirm from "
                                   "the vendor's publications and code, one sentence each")

    @model_validator(mode="after")
    def _pass_at_least_avg(self) -> ClaimConfig:
        if self.pass_at_k is not None and self.pass_at_k < self.avg_at_k:
            raise ValueError(f"pass_at_k ({self.pass_at_k}) is below avg_at_k ({self.avg_at_k}): Pass@k is at "
                             "least Avg@k")
        return self
