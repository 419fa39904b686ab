"""Every model call and tool call of an episode goes to the ledger as it happens, each call priced by its arm: the
episode loop's `EpisodeRecorder`, knowing the ledger and the arm, nothing of the runner."""

from __future__ import annotations

from datetime import datetime

from adapters.base import CallAttempt, ToolCall
from compare.arms import ArmSpec
from compare.ledger import Ledger


class LedgerRecorder:
    """One episode's recorder; `spend_usd` is what its calls cost in tokens (0 for lease-billed arms)."""

    def __init__(self, ledger: Ledger, arm: ArmSpec, episode_id: str):
        self.ledger, self.arm, self.episode_id = ledger, arm, episode_id
        self.spend_usd = 0.0

    async def model_call(self, step: int, attempt: CallAttempt) -> None:
        cost = revision = None
        price_source = "lease"  # an arm billed by its lease: the call's share comes from the lease's attribution
        price = self.arm.price_call(attempt.usage, attempt.router_model)
        if price is not None:
            cost, price_source, revision = price.cost_usd, price.price_source, price.price_revision
            self.spend_usd += cost or 0.0
        await self.ledger.record_call(self.episode_id, step, attempt, cost_usd=cost, price_source=price_source,
                                      price_revision=revision)

    async def tool_call(self, step: int, index: int, call: ToolCall, output: str, started_at: datetime,
                        seconds: float) -> None:
        await self.ledger.record_tool_call(self.episode_id, step=step, index=index, call=call,
                                           output_chars=len(output), started_at=started_at, seconds=seconds)
