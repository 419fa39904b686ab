"""Each task's reference solution instead of a model: proves the harness end to end; costs only its sandbox."""

from __future__ import annotations

from typing import ClassVar, Literal

from compare.arms.base import ArmSpec


class OracleArm(ArmSpec):
    """Runs each task's reference solution instead of a model: proves the harness end to end."""

    kind: ClassVar = "oracle"
    billing: ClassVar = "none"
    calls_a_model: ClassVar = False

    adapter: Literal["oracle"]

    def build_solver(self, budgets, prompt):
        from compare.solvers import ReferenceSolution

        return ReferenceSolution()
