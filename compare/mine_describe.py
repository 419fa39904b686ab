"""`leafcost mine --describe-with ARM`: one of a run spec's arms writes a mined task's problem statement, issue
style, from the commit message, the failing tests' names and the test patch. The solution patch is never sent:
it is only what the answer is checked against (sandbox.mining.instruction.leaks), and an answer that quotes it is
refused by raising `NoStatement` (a `Dropped` with reason leaky_instruction), which carries the call's tokens and
cost because they were spent either way."""

from __future__ import annotations

from typing import Any, NoReturn

from pydantic import BaseModel

from adapters.base import AdapterError, CallAttempt, Turn, Usage
from adapters.scrubbing import arm_secrets, scrub
from compare.spec import RunSpec
from sandbox.mining.errors import Dropped, MiningError
from sandbox.mining.instruction import leaks, statement_from_commit

__all__ = ["DESCRIBE_MAX_TOKENS", "DescribedStatement", "Describer", "NoStatement", "describe", "describe_messages"]

# The answer's cap: an issue is a page at most, and reasoning models spend part of the cap thinking.
DESCRIBE_MAX_TOKENS = 4096
# What of the test patch and the test names goes into the request: enough to show the behaviour, bounded in cost.
MAX_TEST_PATCH_CHARS = 40_000
MAX_TEST_NAMES = 50

SYSTEM_PROMPT = """You write the GitHub issue that a user of a software project would have filed before a change \
was made. You are given the commit message of the change, the names of tests that fail before it and pass after \
it, and the patch that adds or changes those tests. Describe the problem as the user saw it: what they did, what \
happened, what they expected instead; a short reproduction in the style of the tests is welcome. Never describe \
the fix, how to implement it, or which code to change, and never quote code that the fix adds. Answer with the \
issue only: a one-line title, a blank line, then the body in Markdown."""


class DescribedStatement(BaseModel):
    """A problem statement a model wrote and the leakage check let through."""

    text: str
    source: str  # "model:<arm name>", the row's instruction_source
    usage: Usage  # every HTTP attempt's tokens, summed (failed attempts' too: they were spent)
    cost_usd: float | None  # priced as the arm prices its calls; None for arms billed by lease, or unpriced


class NoStatement(Dropped):
    """The arm's call gave no usable statement: reason `leaky_instruction` (it quotes the solution; `log` holds the
    refused text) or `harness_error` (the call failed, or the answer was empty). `usage` and `cost_usd` are what
    the call spent."""

    def __init__(self, reason: str, detail: str, *, log: str = "", usage: Usage | None = None,
                 cost_usd: float | None = None):
        super().__init__(reason, detail, log)
        self.usage = usage or Usage()
        self.cost_usd = cost_usd


def describe_messages(*, message: str, fail_to_pass: list[str], test_patch: str) -> list[dict[str, str]]:
    """The chat request's messages. It takes no solution patch, so none can reach the model."""
    names = fail_to_pass[:MAX_TEST_NAMES]
    more = len(fail_to_pass) - len(names)
    tests = "\n".join(f"- {name}" for name in names) + (f"\n- ... and {more} more" if more > 0 else "")
    shown = test_patch[:MAX_TEST_PATCH_CHARS]
    if len(test_patch) > len(shown):
        shown += f"\n[... {len(test_patch) - len(shown)} more characters of the test patch not shown]"
    user = (f"Commit message:\n\n{statement_from_commit(message)}\n\nTests that fail before the change and pass "
            f"after it:\n{tests}\n\nThe test patch:\n\n```diff\n{shown}\n```")
    return [{"role": "system", "content": SYSTEM_PROMPT}, {"role": "user", "content": user}]


class Describer:
    """One arm writing statements for a mining run, its adapter started once:
    `async with Describer(spec, "gpt") as describer: await describer.describe(...)`. Raises MiningError (one line)
    for an arm the spec does not have, an arm that calls no model, or one whose endpoint cannot start."""

    def __init__(self, spec: RunSpec, arm_name: str):
        self.arm = _chatting_arm(spec, arm_name)
        self.secrets = arm_secrets(self.arm)
        self.adapter: Any = None

    async def __aenter__(self) -> Describer:
        try:
            self.adapter = self.arm.build_adapter()
            await self.adapter.start()
        except AdapterError as error:
            await self._stop()
            raise MiningError(self._scrub(f"--describe-with {self.arm.name}: the arm cannot start: {error}")) from None
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self._stop()

    async def describe(self, *, message: str, fail_to_pass: list[str], test_patch: str,
                       patch: str) -> DescribedStatement:
        """A statement for one candidate; NoStatement when the call fails or the answer quotes `patch`, the
        solution (MiningError when the arm turns out misconfigured: every further call would fail the same way)."""
        messages = describe_messages(message=message, fail_to_pass=fail_to_pass, test_patch=test_patch)
        try:
            turn: Turn = await self.adapter.chat(messages, [], max_tokens=DESCRIBE_MAX_TOKENS)
        except AdapterError as error:
            self._call_failed(error)
        usage, cost = _spent(self.arm, turn.attempts)
        text = self._scrub((turn.content or "").strip())
        if not text:
            raise NoStatement("harness_error", f"arm {self.arm.name} wrote no statement (finish_reason "
                              f"{turn.finish_reason})", usage=usage, cost_usd=cost)
        found = leaks(text, patch)
        if found is not None:
            raise NoStatement("leaky_instruction", f"the statement arm {self.arm.name} wrote quotes the solution: "
                              f"{found}", log=text, usage=usage, cost_usd=cost)
        return DescribedStatement(text=text, source=f"model:{self.arm.name}", usage=usage, cost_usd=cost)

    def _call_failed(self, error: AdapterError) -> NoReturn:
        detail = self._scrub(f"--describe-with {self.arm.name}: {error}")
        if error.configuration:
            raise MiningError(detail) from None
        usage, cost = _spent(self.arm, error.attempts)
        raise NoStatement("harness_error", detail, usage=usage, cost_usd=cost) from None

    def _scrub(self, text: str) -> str:
        return scrub(text, self.secrets)

    async def _stop(self) -> None:
        if self.adapter is not None:
            await self.adapter.stop()
            self.adapter = None


async def describe(spec: RunSpec, arm_name: str, *, message: str, fail_to_pass: list[str], test_patch: str,
                   patch: str) -> DescribedStatement:
    """One statement through the arm named `arm_name` of `spec` (its adapter started and stopped around the call);
    raises as Describer and Describer.describe do."""
    async with Describer(spec, arm_name) as describer:
        return await describer.describe(message=message, fail_to_pass=fail_to_pass, test_patch=test_patch,
                                        patch=patch)


def _chatting_arm(spec: RunSpec, name: str) -> Any:
    names = ", ".join(arm.name for arm in spec.arms)
    arm = next((arm for arm in spec.arms if arm.name == name), None)
    if arm is None:
        raise MiningError(f"--describe-with {name}: the spec has no such arm; its arms: {names}")
    if not arm.calls_a_model:
        raise MiningError(f"--describe-with {name}: the arm is an {arm.adapter} arm, which calls no model; "
                          f"name one that does (the spec's arms: {names})")
    return arm


def _spent(arm: Any, attempts: list[CallAttempt]) -> tuple[Usage, float | None]:
    """Every attempt's tokens summed, and their cost at the arm's prices (None when any attempt is unpriced)."""
    usage = sum((attempt.usage for attempt in attempts), Usage())
    prices = [arm.price_call(attempt.usage, attempt.router_model) for attempt in attempts]
    costs = [price.cost_usd if price is not None else None for price in prices]
    cost = sum(costs) if costs and None not in costs else None  # type: ignore[arg-type]
    return usage, cost
