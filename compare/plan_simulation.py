"""The Monte Carlo of a sequential run (`simulate_sequential`): it drives compare.decision's look and after_look
round by round exactly as the runner does, over tasks drawn by a `TaskSampler`: for `leafcost plan`, tasks
resampled from each arm's source (`resampling_sampler`: paired across arms when one run measured both, or drawn
from the priors); a caller that knows the true distributions (bench/) passes its own sampler."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np

from compare.decide_spec import DecideConfig
from compare.decision import ArmTasks, LookResult, after_look, look
from compare.plan_sources import PreparedArm, pair_arms

DEFAULT_SIMULATIONS = 200

TaskSampler = Callable[[np.random.Generator, int], dict[str, ArmTasks]]
"""Draws `n` tasks for every arm (paired by position: task i of each arm is the same task), each arm's arrays
filled as compare.decision.ArmTasks (resolved, attempts with a verdict and $ per task; spent_usd their $ sum)."""


@dataclass(frozen=True)
class SimulatedRun:
    """One simulated sequential run: how it stopped (compare.decision.after_look's action), the tasks and episodes
    it ran, its spend per arm, and its last look (each question's verdict and interval)."""

    action: str
    tasks: int
    episodes: int
    spent_usd: dict[str, float]
    final: LookResult

    @property
    def usd(self) -> float:
        return float(sum(self.spent_usd.values()))

    def verdicts(self) -> dict[str, str]:
        return {question.question: question.verdict for question in self.final.questions}


def simulate_sequential(config: DecideConfig, sample_tasks: TaskSampler, total_tasks: int, seeds: int,
                        rng: np.random.Generator, runs: int = DEFAULT_SIMULATIONS, *, workers: int,
                        arm_count: int | None = None, reaches_tasks: np.ndarray | None = None) -> list[SimulatedRun]:
    """`runs` sequential runs of a suite of `total_tasks` tasks: each draws its tasks with `sample_tasks(rng,
    total_tasks)` (in run order), then goes in rounds of config.round_size(workers, arm_count, seeds) tasks
    (arm_count None: the sampler's arms), looking after each round with compare.decision.look and stopping where
    compare.decision.after_look stops the runner (decided, out of reach, at the budget, no task left). An arm's
    spend so far is its drawn spent_usd pro rata to the tasks run. `reaches_tasks`: which of the total_tasks (in
    run order) a `reaches` question with `tasks: seen` reads, as the runner passes them to look (None: every task)."""
    if total_tasks < 1 or runs < 1:
        raise ValueError(f"total_tasks ({total_tasks}) and runs ({runs}) must be at least 1")
    results = []
    for _ in range(runs):
        drawn = sample_tasks(rng, total_tasks)
        size = config.round_size(workers, arm_count or len(drawn), seeds)
        results.append(_one_run(config, drawn, total_tasks, size, reaches_tasks))
    return results


def _one_run(config: DecideConfig, drawn: dict[str, ArmTasks], total: int, size: int,
             reaches_tasks: np.ndarray | None = None) -> SimulatedRun:
    done, number, previous = 0, 0, None
    while True:
        done = min(done + size, total)
        data = {name: _first(arm, done) for name, arm in drawn.items()}
        number += 1
        previous = look(config, data, look_number=number, total_tasks=total, previous=previous,
                        reaches_tasks=reaches_tasks)
        spent = {name: arm.spent_usd for name, arm in data.items()}
        action, _ = after_look(config, previous, spent=spent, round_tasks=size)  # as the runner stops
        if action != "continue":
            episodes = sum(int(arm.attempts.sum()) for arm in data.values())
            return SimulatedRun(action, done, episodes, spent, previous)


def _first(arm: ArmTasks, n: int) -> ArmTasks:
    total = float(arm.cost_usd.sum())
    part = float(arm.cost_usd[:n].sum())
    spent = arm.spent_usd * part / total if total > 0 else 0.0
    return ArmTasks(arm=arm.arm, resolved=arm.resolved[:n], attempts=arm.attempts[:n], cost_usd=arm.cost_usd[:n],
                    spent_usd=spent)


def resampling_sampler(arms: Sequence[PreparedArm], seeds: int) -> TaskSampler:
    """Tasks resampled with replacement from each arm's source; arms one run measured are resampled together on
    their shared tasks (the pairing kept). A source that ran other seeds gives each drawn task k seeds resolving
    at its measured rate. Each simulated run first resamples the source itself (a bootstrap of its tasks), then
    draws its tasks from that: a pilot of 25 tasks is a sample of the suite, not the suite, and a run simulated from
    it as if it were would be too sure of the pilot's effect."""
    groups: dict[str | None, list[PreparedArm]] = {}
    for arm in arms:
        groups.setdefault(arm.sample.run_id, []).append(arm)
    blocks: list[list[PreparedArm]] = []
    for run_id, members in groups.items():
        if run_id is not None and len(members) > 1:
            paired, ok = pair_arms({arm.name: arm for arm in members}, [arm.name for arm in members])
            blocks.extend([paired] if ok else [[arm] for arm in members])
        else:
            blocks.extend([arm] for arm in members)

    def sample(rng: np.random.Generator, n: int) -> dict[str, ArmTasks]:
        drawn = {}
        for block in blocks:
            measured = block[0].resolved.size
            rows = rng.integers(0, measured, measured)[rng.integers(0, measured, n)]  # the source resampled first
            for arm in block:
                if arm.exact_rows:
                    resolved = arm.sample.resolved[rows].astype(int)
                else:
                    resolved = rng.binomial(seeds, np.clip(arm.resolved[rows] / seeds, 0, 1))
                cost = np.zeros(n) if arm.cost is None else arm.cost[rows]
                drawn[arm.name] = ArmTasks(arm=arm.name, resolved=np.asarray(resolved, dtype=int),
                                           attempts=np.full(n, seeds), cost_usd=cost, spent_usd=float(cost.sum()))
        return {arm.name: drawn[arm.name] for arm in arms}

    return sample

