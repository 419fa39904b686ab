"""The kinds of arm a run spec can name, one file each: its spec (a pydantic model whose `adapter` is its tag) and
how it is billed, built, priced and repriced (`ArmSpec`). Nothing else in leafcost branches on an arm's type, so a
new kind is a new file here plus its line in ARM_TYPES."""

from __future__ import annotations

from typing import Annotated, Union

from pydantic import Field

from compare.arms.base import (ARM_NAME, MAX_USD_PER_HOUR, MAX_USD_PER_MTOK, MAX_USD_PER_VCPU_HOUR, ArmSpec, Billing,
                               Kind, Prices, PriceTier, Sampling, StrictModel)
from compare.arms.local import LocalArm
from compare.arms.oracle import OracleArm
from compare.arms.router import RouterArm
from compare.arms.sglang import GpuLeaseSpec, SglangArm

ARM_TYPES: tuple[type[ArmSpec], ...] = (SglangArm, RouterArm, LocalArm, OracleArm)
ARM_TAGS = frozenset(arm.model_fields["adapter"].annotation.__args__[0] for arm in ARM_TYPES)
Arm = Annotated[Union[ARM_TYPES], Field(discriminator="adapter")]  # noqa: UP007 - a union built from the tuple

__all__ = ["ARM_NAME", "ARM_TAGS", "ARM_TYPES", "Arm", "ArmSpec", "Billing", "GpuLeaseSpec", "Kind", "LocalArm",
           "MAX_USD_PER_HOUR", "MAX_USD_PER_MTOK", "MAX_USD_PER_VCPU_HOUR", "OracleArm", "PriceTier", "Prices",
           "RouterArm", "Sampling", "SglangArm", "StrictModel"]
