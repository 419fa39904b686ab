"""A run's arms while it runs: each arm's solver started (its endpoint probed before any episode), its row in the
ledger, its lease opened, heartbeated and closed, its server's metrics sampled, and everything stopped at the
end. A lease never stays open: `stop` closes it even when the solver fails to stop."""

from __future__ import annotations

import asyncio
from typing import Any

from adapters import redact_url
from adapters.base import AdapterError, ArmStart, Lease, utcnow
from compare.episode import EpisodePrompt
from compare.ledger import Ledger
from compare.solvers import Solver
from compare.spec import RunSpec

LEASE_HEARTBEAT_SEC = 15.0  # the most a killed run's lease can be under-billed


class ArmRefused(RuntimeError):
    """An arm that cannot start (unreachable endpoint, missing key, no price); the message names the arm."""


class LiveArms:
    def __init__(self, ledger: Ledger, run_id: str, spec: RunSpec, prompts: dict[str, EpisodePrompt]):
        self.ledger, self.run_id, self.spec, self.prompts = ledger, run_id, spec, prompts
        self.solvers: dict[str, Solver] = {}  # every started arm's, the oracle's included
        self.lease_ids: dict[str, int] = {}  # the ledger's lease ids, by arm
        self.leases: dict[str, Lease] = {}  # the leases themselves, for the live spend

    async def start(self, arm: Any) -> list[str]:
        """Starts one arm and records it ready; returns its warnings. ArmRefused, the arm recorded failed, when it
        cannot start."""
        start = await self._start_solver(arm)
        prompt = self.prompts.get(arm.name)
        await self.ledger.record_arm(run_id=self.run_id, arm=arm.name, adapter=arm.adapter, model=arm.model,
                                     endpoint=start.endpoint, served_model=start.served_model,
                                     config={**start.config, **(prompt.config() if prompt else {})},
                                     server_info=start.server_info, model_info=start.model_info,
                                     warnings=start.warnings, status="ready")
        if start.lease is not None:
            self.lease_ids[arm.name] = await self.ledger.open_lease(self.run_id, arm.name, start.lease)
            self.leases[arm.name] = start.lease
        return [f"arm {arm.name}: {w}" for w in start.warnings]

    async def skip(self, arm: Any, reason: str) -> None:
        await self.ledger.record_arm(run_id=self.run_id, arm=arm.name, adapter=arm.adapter, model=arm.model,
                                     endpoint=endpoint_of(arm), status="skipped", status_reason=reason)

    def solver(self, arm: str) -> Solver:
        return self.solvers[arm]

    def lease_spend(self, arm: str) -> float:
        """What the arm's lease has cost so far, by the cost model's own rule."""
        lease = self.leases.get(arm)
        if lease is None:
            return 0.0
        from compare.costs import lease_cost_usd  # with numpy: only an arm with a lease pays for the import

        return lease_cost_usd(lease)

    def background(self) -> list[asyncio.Task]:
        """The loops that run beside the episodes: one metrics sampler per arm that has one, the lease heartbeat."""
        loops = [self._sample_metrics(name, interval) for name in self.solvers
                 if (interval := self._arm(name).metrics_interval()) is not None]
        return [asyncio.create_task(loop) for loop in [*loops, self._heartbeat()]]

    async def stop(self, status: str, failed: dict[str, str]) -> None:
        """Every started arm: a last metrics sample, its solver stopped, its lease closed, its row ended with
        `status` (or failed, with the reason in `failed`)."""
        for name, solver in list(self.solvers.items()):
            sample = await _quietly(solver.sample_metrics())
            if sample is not None:
                await self.ledger.record_sample(self.run_id, name, sample)
            lease = await _quietly(solver.stop())
            if name in self.lease_ids:  # closed even when the solver failed to stop
                await self.ledger.close_lease(self.lease_ids[name], (lease.ended_at if lease else None) or utcnow())
            reason = failed.get(name)
            await self.ledger.update_arm(self.run_id, name, status="failed" if reason else status,
                                         status_reason=reason, ended_at=utcnow())
        self.solvers.clear()

    async def _start_solver(self, arm: Any) -> ArmStart:
        if problem := arm.start_problem():
            raise ArmRefused(f"arm {arm.name}: {problem}")
        solver = None
        try:
            solver = arm.build_solver(self.spec.budgets, self.prompts.get(arm.name))
            start = await solver.start()
        except AdapterError as exc:
            if solver is not None:
                await _quietly(solver.stop())
            await self.ledger.record_arm(self.run_id, arm.name, adapter=arm.adapter, model=arm.model,
                                         endpoint=endpoint_of(arm), status="failed", status_reason=str(exc))
            raise ArmRefused(f"arm {arm.name}: {exc}") from None
        self.solvers[arm.name] = solver
        return start

    def _arm(self, name: str) -> Any:
        return next(arm for arm in self.spec.arms if arm.name == name)

    async def _heartbeat(self) -> None:
        """Open leases carry a heartbeat: if this process is killed, a resume closes them at the last one."""
        while True:
            await asyncio.sleep(LEASE_HEARTBEAT_SEC)
            if self.lease_ids:
                await _quietly(self.ledger.heartbeat_leases(list(self.lease_ids.values()), utcnow()))

    async def _sample_metrics(self, arm: str, interval: float) -> None:
        solver = self.solvers[arm]
        while True:
            sample = await _quietly(solver.sample_metrics())
            if sample is not None:
                await self.ledger.record_sample(self.run_id, arm, sample)
            await asyncio.sleep(interval)


def endpoint_of(arm: Any) -> str | None:
    return redact_url(arm.base_url) if arm.base_url else None


async def _quietly(awaitable):
    try:
        return await awaitable
    except Exception:  # noqa: BLE001 - a failing metrics scrape or stop must not lose the run's results
        return None
