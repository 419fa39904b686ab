"""Every model call and tool call of an episode goes to the ledger as it happens, each call priced by its arm: the
episode loop's `EpisodeRecorder`, knowing the ledger and the arm, nothing of the runner.

The rows are queued, not awaited one by one: a step does not wait for a commit. `settle` (the episode's last
act) waits until they have all committed and raises the first that failed, so an episode whose calls are not
all in the ledger ends as a harness error, and its finish, queued after them, is never committed before them."""

from __future__ import annotations

import asyncio
from datetime import datetime

from adapters.base import CALL_INTENTS, CallAttempt, CallIntent, ToolCall, Usage
from compare.arms import ArmSpec
from compare.ledger import Ledger


class LedgerRecorder:
    """One episode's recorder; `spend_usd` is what its calls cost in tokens (0 for lease-billed arms).

    Made in the task that runs the episode, it becomes that task's keeper of call intents (adapters.base
    CALL_INTENTS) when its arm is billed per token: every request is then written to the ledger's intent journal
    before it leaves, so a call a crash loses still shows as unrecorded spend (compare.ledger.intent_journal)."""

    def __init__(self, ledger: Ledger, arm: ArmSpec, episode_id: str):
        self.ledger, self.arm, self.episode_id = ledger, arm, episode_id
        self.spend_usd = 0.0
        self._pending: list[asyncio.Future] = []
        CALL_INTENTS.set(self.intent if arm.billing == "tokens" else None)

    async def intent(self, intent: CallIntent) -> None:
        bound, source = intent_bound(self.arm, intent)
        self._keep(self.ledger.queue_intent(self.episode_id, intent, bound_usd=bound, price_source=source))

    async def model_call(self, step: int, attempt: CallAttempt) -> None:
        cost = revision = None
        price_source = "lease"  # an arm billed by its lease: the call's share comes from the lease's attribution
        price = self.arm.price_call(attempt.usage, attempt.router_model)
        if price is not None:
            cost, price_source, revision = price.cost_usd, price.price_source, price.price_revision
            self.spend_usd += cost or 0.0
        self._keep(self.ledger.queue_call(self.episode_id, step, attempt, cost_usd=cost, price_source=price_source,
                                          price_revision=revision))

    async def tool_call(self, step: int, index: int, call: ToolCall, output: str, started_at: datetime,
                        seconds: float) -> None:
        self._keep(self.ledger.queue_tool_call(self.episode_id, step=step, index=index, call=call,
                                               output_chars=len(output), started_at=started_at, seconds=seconds))

    async def settle(self) -> None:
        """Returns once every row recorded so far has committed; raises the first LedgerError among them."""
        pending, self._pending = self._pending, []
        if not pending:
            return
        await self.ledger.flush()  # an awaited write: the queued rows commit now, in its transaction or before
        outcomes = await asyncio.gather(*pending, return_exceptions=True)
        for outcome in outcomes:
            if isinstance(outcome, BaseException):
                raise outcome

    def _keep(self, future: asyncio.Future) -> None:
        future.add_done_callback(_retrieve)  # an episode cancelled before settle must not log "never retrieved"
        self._pending.append(future)


def intent_bound(arm: ArmSpec, intent: CallIntent) -> tuple[float | None, str | None]:
    """(the most the call can cost, where the prices came from): the request's bytes as input tokens (a token
    stands for at least one byte of the text, and the JSON around the text outweighs a chat template's markers)
    and its completion cap as output tokens, priced at the dearest rates the arm's sheet has for them (cache
    writes may cost more than input, reasoning more than output), and at the dearest of the models the router may
    fall back to. (None, source) when the request carried no cap or the arm has no price for its model."""
    if intent.max_tokens is None:
        return None, None
    prompt, completion = intent.request_bytes, intent.max_tokens
    models = [None, *getattr(arm, "fallback_prices", {})]  # None: the arm's own model
    prices = [arm.price_call(Usage(prompt_tokens=prompt, cache_write_tokens=write, completion_tokens=completion,
                                   reasoning_tokens=reasoning), model)
              for model in models for write in (0, prompt) for reasoning in (0, completion)]
    if any(price is None for price in prices):
        return None, None
    if any(price.cost_usd is None for price in prices):
        return None, prices[0].price_source
    return max(price.cost_usd for price in prices), prices[0].price_source


def _retrieve(future: asyncio.Future) -> None:
    if not future.cancelled():
        future.exception()
