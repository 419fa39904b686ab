"""A run with a decision question (the spec's `decide:`) runs its tasks in rounds and stops when the question is
decided: the tasks in the run's order (shuffled by its seed), a round of tasks at a time for every arm and seed
(paired: every arm runs the same task keys), and after each round a look — the confidence sequences of
compare.decision over the finished rounds — that stops the run by compare.decision.after_look: every question
decided, a question out of reach by the suite's end, a round that would pass a budget cap, or no task left. Every
look is a ledger row (decision_looks); a stopped run's figures are those of its finished rounds and never change
afterwards."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass

import numpy as np

from compare.decide_spec import DecideConfig
from compare.decision import ArmTasks, LookResult, after_look, budget_stop, look, next_round_spend, verdict_line
from compare.decision_data import arm_tasks
from compare.ledger import Ledger

SETTLED = ("decided", "exhausted", "futile")  # stops a resume cannot undo (a budget stop it can)
RunRound = Callable[[list[str]], Awaitable[None]]  # runs every unfinished key of these tasks, all arms and seeds


class DecisionRefused(ValueError):
    """A resume that would change the run's question; the message names the field."""


@dataclass
class Stop:
    """How the rounds ended: the last look's action and its line; action None when the run ended between looks
    (an arm stopped by a configuration error: the line says so; or no round left to run)."""

    action: str | None
    line: str | None


class DecisionRounds:
    def __init__(self, config: DecideConfig, ledger: Ledger, run_id: str, arms: list[str], *, seeds: int,
                 workers: int, stopped: Mapping[str, str], reaches_tasks: frozenset[str] | None = None):
        self.config, self.ledger, self.run_id, self.arms, self.seeds = config, ledger, run_id, arms, seeds
        self.reaches_tasks = reaches_tasks  # the tasks the reaches question reads (tasks: seen); None: every one
        self.size = config.round_size(workers, len(arms), seeds)
        self.stopped = stopped  # the runner's stopped arms and why: a live view of its dict

    async def check_resume(self) -> None:
        """A resumed run keeps the question it started with (its budget may change): else refused, by field."""
        run = await self.ledger.get_run(self.run_id)
        before = run.spec().decide if run is not None else None
        if before is None:
            raise DecisionRefused(f"decide: run {self.run_id} was started without a decision question; a resumed "
                                  "run keeps its question (remove decide: to resume it, or start a new run)")
        if before.question_digest() != self.config.question_digest():
            changed = _changed_fields(before.model_dump(exclude={"budget"}),
                                      self.config.model_dump(exclude={"budget"}), "decide")
            raise DecisionRefused(f"{', '.join(changed) or 'decide'}: changed since run {self.run_id} started; a "
                                  "resumed run keeps its question (only decide.budget may change): start a new run")

    async def settled(self) -> Stop | None:
        """How the run stopped, when it stopped for good (decided, out of reach, or every task run); None when it
        may go on."""
        looks = await self.ledger.looks(self.run_id)
        if looks and looks[-1]["action"] in SETTLED:
            return Stop(looks[-1]["action"], looks[-1]["reason"])
        return None

    async def run(self, task_ids: list[str], run_round: RunRound) -> Stop:
        if (settled := await self.settled()) is not None:
            return settled
        looks = await self.ledger.looks(self.run_id)
        previous = LookResult.model_validate(looks[-1]["result"]) if looks else None
        done = looks[-1]["tasks"] if looks else 0
        if looks and looks[-1]["action"] == "budget":  # resumed at the budget: go on only if the budget now allows
            data = await self._data(task_ids[:done])
            spent = self._spent(data)
            next_round = next_round_spend(spent, done, len(task_ids), self.size)
            if (reason := budget_stop(self.config, spent, next_round)) is not None:
                return Stop("budget", f"still at the budget: {reason}: raise decide.budget to go on")
        number = len(looks)
        chosen = None if self.reaches_tasks is None else np.array([t in self.reaches_tasks for t in task_ids])
        while done < len(task_ids):
            round_tasks = task_ids[done: done + self.size]
            await run_round(round_tasks)
            done += len(round_tasks)
            stopped = [arm for arm in self.arms if arm in self.stopped]
            if stopped:  # a configuration error stopped an arm: no look can pair it any more
                return Stop(None, f"undecided: arm {stopped[0]} {self.stopped[stopped[0]]}; fix it and resume the run")
            data = await self._data(task_ids[:done])
            number += 1
            previous = look(self.config, data, look_number=number, total_tasks=len(task_ids), previous=previous,
                            reaches_tasks=chosen)
            action, reason = after_look(self.config, previous, spent=self._spent(data), round_tasks=self.size)
            await self._record(number, previous, data, action, reason, done, len(task_ids))
            if action != "continue":
                looks = await self.ledger.looks(self.run_id)
                return Stop(action, looks[-1]["reason"])
        return Stop(None, None)

    async def _data(self, task_ids: list[str]) -> dict[str, ArmTasks]:
        await self.ledger.flush()
        return await asyncio.to_thread(lambda: arm_tasks(self.ledger.reader(), self.run_id, task_ids, self.arms))

    @staticmethod
    def _spent(data: dict[str, ArmTasks]) -> dict[str, float]:
        return {arm: tasks.spent_usd for arm, tasks in data.items()}

    async def _record(self, number: int, result: LookResult, data: dict[str, ArmTasks], action: str,
                      reason: str | None, done: int, total: int) -> None:
        left = total - done if action != "continue" else 0
        unspent_usd = sum(tasks.spent_usd / done * left for tasks in data.values()) if done else 0.0
        unspent_episodes = left * self.seeds * len(self.arms)
        line = None
        if action != "continue":
            status = "decided" if action == "decided" else "undecided"
            line = verdict_line(result, status, unspent_episodes, unspent_usd, stop=action)
            if reason is not None and action == "budget":
                line = f"{line} ({reason})"
        episodes = sum(int(tasks.attempts.sum()) for tasks in data.values())
        await self.ledger.record_look(
            self.run_id, number, tasks=done, total_tasks=total, episodes=episodes,
            spent_usd={arm: tasks.spent_usd for arm, tasks in data.items()},
            budget=self.config.budget.model_dump(mode="json"), result=result.model_dump(mode="json"), action=action,
            reason=line, unspent_episodes=unspent_episodes if action != "continue" else None,
            unspent_usd=unspent_usd if action != "continue" else None)


def _changed_fields(before: object, after: object, where: str) -> list[str]:
    """The dotted paths at which two JSON-like values differ."""
    if isinstance(before, dict) and isinstance(after, dict):
        return [path for key in sorted(set(before) | set(after), key=str)
                for path in _changed_fields(before.get(key), after.get(key), f"{where}.{key}")]
    return [] if before == after else [where]
