"""A real small model on this machine's CPU (llama.cpp's server): self-hosted, paid by the machine-hour."""

from __future__ import annotations

from typing import Any, ClassVar, Literal

from pydantic import Field

from compare.arms.base import MAX_USD_PER_HOUR, ArmSpec


class LocalArm(ArmSpec):
    kind: ClassVar = "self-hosted"
    billing: ClassVar = "lease"
    start_modules: ClassVar = ("compare.solvers", "adapters.local")
    busy_counter_missing: ClassVar = "llama.cpp (the local arm's server) has no busy-time counter"

    adapter: Literal["local"]
    model: str = "smollm2-135m"
    machine_usd_per_hour: float = Field(0.10, gt=0, le=MAX_USD_PER_HOUR,
                                        description="what this CPU machine costs per hour")
    parallel: int = Field(4, gt=0, le=4096, description="server slots (continuous batching)")

    def build_adapter(self):
        from adapters.local import LocalAdapter

        return LocalAdapter(model=self.model, sampling=self.sampling.body(), parallel=self.parallel,
                            machine_usd_per_hour=self.machine_usd_per_hour,
                            request_timeout_sec=self.request_timeout_sec, max_retries=self.max_retries)

    def price_sheet(self) -> dict[str, Any]:
        return {**super().price_sheet(), "source": "lease", "usd_per_hour": self.machine_usd_per_hour}
