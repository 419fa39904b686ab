"""The runner: arms × tasks × seeds expanded to episode keys in one task order for every arm, one pool of async
workers shared across arms, infrastructure failures retried with a fresh sandbox and conversation, every
attempt in the ledger, and resume that never reruns or double-counts a finished episode."""

from __future__ import annotations

import asyncio
import random
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from pydantic import BaseModel, Field

from adapters.base import CallAttempt
from compare.arm_gates import ArmGates
from compare.attempt import AttemptOutcome, run_attempt
from compare.episode import EpisodeResult
from compare.leaf_prompt import LeafCheckoutError, arm_prompts, run_spec_digest
from compare.ledger import ArmTotals, Ledger, new_run_id
from compare.live_arms import ArmRefused, LiveArms
from compare.reconcile import Reconciliation, reconcile, reconcile_unrecorded, unrecorded_warning
from compare.recording import LedgerRecorder
from compare.spec import RunSpec
from compare.trajectory_files import trajectories_root, trajectory_path, write_trajectory
from sandbox import (SandboxError, SandboxOptions, Suite, Task, close_backend, load_suite, remove_leftovers,
                     require_backend)

if TYPE_CHECKING:  # a run with decide: loads them (numpy, the summary, the statistics); a plain run never does
    from compare.decision_rounds import DecisionRounds, Stop


class RunError(RuntimeError):
    """The run cannot start or go on (bad suite, unreachable endpoint, missing key); the message says why."""


class EpisodeKey(BaseModel, frozen=True):
    arm: str
    task_id: str
    seed: int


class ArmProgress(BaseModel):
    arm: str
    total: int
    done: int = 0
    resolved: int = 0
    errors: int = 0
    spend_usd: float = 0.0
    status: str = "ready"
    status_reason: str | None = None


class RunSummary(BaseModel):
    run_id: str
    db: str
    status: str
    arms: list[ArmProgress]
    trajectories: str
    warnings: list[str] = Field(default_factory=list)
    reconciliation: list[Reconciliation] = Field(default_factory=list)
    decision: str | None = None  # a run with decide:, once stopped: the verdict line (decided or not, and why)
    # per arm with released: in the spec, its figures on fresh and seen tasks (compare.freshness); added by the CLI
    freshness: list[dict[str, Any]] | None = None


ProgressCallback = Callable[[ArmProgress], None]


def task_order(suite: Suite, spec: RunSpec) -> list[Task]:
    """One order for every arm: shuffled with the spec's seed (Leaf uses 42), then filtered and limited."""
    tasks = sorted(suite.tasks, key=lambda t: t.task_id)
    if spec.task_order_seed is not None:
        random.Random(spec.task_order_seed).shuffle(tasks)
    if spec.tasks is not None:
        wanted = set(spec.tasks)
        missing = wanted - {t.task_id for t in tasks}
        if missing:
            raise RunError(f"tasks not in the suite: {', '.join(sorted(missing))}")
        tasks = [t for t in tasks if t.task_id in wanted]
    return tasks[: spec.limit] if spec.limit else tasks


def expand_keys(spec: RunSpec, tasks: list[Task], arms: list[str]) -> list[EpisodeKey]:
    """Task-major order so arms progress side by side: task 1 seed 0 for every arm, then seed 1, ..."""
    return [EpisodeKey(arm=arm, task_id=task.task_id, seed=seed)
            for task in tasks for seed in range(spec.seeds) for arm in arms]


class Runner:
    def __init__(self, spec: RunSpec, ledger: Ledger, *, db_path: Path, run_id: str | None = None,
                 skip_arms: dict[str, str] | None = None, on_progress: ProgressCallback | None = None,
                 strict_grading: bool = False, plan: dict | None = None):
        self.spec = spec
        self.plan = plan  # compare.planning's PlanDocument (JSON) made before the run: recorded with a new run only
        self.strict_grading = strict_grading  # flagged attempts count as misses (a resume may turn it on, never off)
        self.arm_specs = {arm.name: arm for arm in spec.arms}
        self.ledger = ledger
        self.db_path = Path(db_path)
        self.resuming = run_id is not None
        self.run_id = run_id or new_run_id(spec.name)
        self.skip_arms = dict(skip_arms or {})
        self.on_progress = on_progress or (lambda progress: None)
        self.options = SandboxOptions(backend=spec.sandbox.backend, base_root=spec.sandbox.base_root,
                                      extra_ro_binds=spec.sandbox.bind_ro,
                                      unsafe_no_isolation=spec.sandbox.unsafe_no_isolation,
                                      images_lock=Path(spec.sandbox.images) if spec.sandbox.images else None,
                                      verifier_network=spec.sandbox.verifier_network, **_kube_options(spec))
        self.trajectory_dir = trajectories_root(self.db_path) / self.run_id
        self.progress: dict[str, ArmProgress] = {}
        self.warnings: list[str] = []
        self.misconfigured: dict[str, Counter[str]] = {}  # arm -> signature (with the flag to fix) -> episodes
        # an arm's attempts wait for its endpoint's first answer; a configuration error stops the arm
        self.gates = ArmGates(ungated={arm.name for arm in spec.arms if not arm.calls_a_model})
        self.stopped: dict[str, str] = self.gates.stopped  # arm -> why no more of its episodes run
        self.decision: str | None = None
        self._starts: dict[str, asyncio.Future[None]] = {}  # episode id -> its start's commit, until its finish

    async def run(self) -> RunSummary:
        try:
            self.prompts = arm_prompts(self.spec)  # a broken Leaf checkout is refused before anything is recorded
        except LeafCheckoutError as exc:
            raise RunError(str(exc)) from None
        self.spec_sha256 = run_spec_digest(self.spec, self.prompts)
        self.arms = LiveArms(self.ledger, self.run_id, self.spec, self.prompts)
        try:
            require_backend(self.options)  # a missing bubblewrap or engine refuses the run, not every episode
        except SandboxError as exc:
            raise RunError(str(exc)) from None
        leftovers = await asyncio.to_thread(remove_leftovers, self.options, self.run_id)
        if leftovers:
            self.warnings.append(f"removed {len(leftovers)} workspace(s), build(s), cgroup(s) or container(s) left "
                                 "by killed leafcost processes")
        suite = self._load_suite()
        tasks = task_order(suite, self.spec)
        if not tasks:
            raise RunError("the suite has no runnable tasks")
        by_id = {t.task_id: t for t in tasks}
        rounds = self._decision_rounds(tasks)
        config = self.spec.decide
        if config is not None and config.cheaper is not None and len(tasks) <= config.min_tasks:
            raise RunError(f"decide.min_tasks: {config.min_tasks} is not below the suite's {len(tasks)} tasks: the "
                           "cost question could never be decided; lower it or run more tasks")
        if rounds is not None and self.resuming:
            from compare.decision_rounds import DecisionRefused

            try:
                await rounds.check_resume()
            except DecisionRefused as exc:
                raise RunError(str(exc)) from None
        await self._record_run(tasks)
        if self.strict_grading:
            await self.ledger.set_strict_grading(self.run_id)
        if rounds is not None and (settled := await rounds.settled()) is not None:
            return await self._already_settled(settled, len(tasks) * self.spec.seeds)
        try:
            await self._start_arms(episodes_per_arm=len(tasks) * self.spec.seeds)
        except RunError as exc:  # a run refused at start says so in the ledger instead of staying "running"
            await asyncio.shield(self._stop_arms("interrupted"))
            await self.ledger.set_run_status(self.run_id, "failed", str(exc))
            raise
        live = [arm.name for arm in self.spec.arms if arm.name not in self.skip_arms]
        keys = expand_keys(self.spec, tasks, live)
        finished = await self.ledger.finished_keys(self.run_id) if self.resuming else set()
        await self._restore_totals(live)
        pending = [k for k in keys if (k.arm, k.task_id, k.seed) not in finished]
        background = self.arms.background()
        status = "interrupted"
        try:
            if rounds is None:
                await self._work(pending, by_id)
            else:
                await self._decide(rounds, tasks, live, finished, by_id)
            status = "finished"
        finally:
            for task in background:
                task.cancel()
            await asyncio.gather(*background, return_exceptions=True)
            await asyncio.shield(self._stop_arms(status))
            if self.options.backend == "kubernetes":  # an interrupted attempt's pod may not have been deleted yet
                await asyncio.shield(asyncio.to_thread(remove_leftovers, self.options, self.run_id))
            await close_backend(self.options)
        reconciliation = await self._reconcile()
        self.warnings += [r.warning() for r in reconciliation if r.flagged]
        for arm, signatures in self.misconfigured.items():
            for signature, count in signatures.items():
                self.warnings.append(f"arm {arm}: {count} episode(s) ended parser_misconfigured (a harness error, "
                                     f"not the model's miss): {signature}")
        return RunSummary(run_id=self.run_id, db=str(self.db_path), status=status,
                          arms=list(self.progress.values()), trajectories=str(self.trajectory_dir),
                          warnings=self.warnings, reconciliation=reconciliation, decision=self.decision)

    async def _reconcile(self) -> list[Reconciliation]:
        """For every hosted arm, the router's reported cost beside ours, call by call (answered calls only)."""
        await self.ledger.flush()
        results = []
        for arm in self.spec.arms:
            if arm.billing == "tokens" and arm.name not in self.skip_arms:
                rows = self.ledger.query("SELECT cost_usd, router_cost_usd FROM model_calls WHERE run_id = ? AND "
                                         "arm = ? AND status = 'ok'", [self.run_id, arm.name])
                results.append(reconcile(rows, arm.name))
                await reconcile_unrecorded(self.ledger, self.run_id, arm)  # calls a crash lost, in the spend log
                if (lost := unrecorded_warning(self.ledger, self.run_id, arm.name)) is not None:
                    self.warnings.append(lost)
        return results

    # --- set-up -------------------------------------------------------------------------------------------

    def _load_suite(self) -> Suite:
        try:
            suite = load_suite(self.spec.suite, cache_dir=self.options.cache_dir, swebench_images=self.spec.swebench)
        except ValueError as exc:
            raise RunError(str(exc)) from None
        for error in suite.errors:
            self.warnings.append(f"task {error.task_id} skipped: {error.error}")
        for task in suite.tasks:
            self.warnings.extend(task.warnings)  # e.g. task.toml keys Harbor does not know, ignored
        resources = self.spec.sandbox.resources()
        return suite.model_copy(update={"tasks": [task.with_resources(resources) for task in suite.tasks]})

    async def _record_run(self, tasks: list[Task]) -> None:
        if self.resuming:
            run = await self.ledger.get_run(self.run_id)
            if run is None:
                raise RunError(f"no run {self.run_id!r} in {self.db_path}")
            if run.spec_sha256 != self.spec_sha256:
                raise RunError(f"run {self.run_id} was started with a different spec; resume it with the same file")
            if run.task_ids != [t.task_id for t in tasks]:
                raise RunError(f"run {self.run_id}: the suite's tasks changed since the run started")
            # One transaction (attempts left running interrupted, orphan leases closed, the run running again,
            # its tasks' dates), committed by the writer thread while this one imports what starting the arms
            # needs; nothing else starts before it commits.
            resumed = self.ledger.queue_resume_run(self.run_id, task_dates={t.task_id: t.created_at for t in tasks})
            try:
                self._preload_arms()
            finally:
                interrupted, closed = await resumed
            if interrupted:
                self.warnings.append(f"{interrupted} episode(s) left running by the previous process were "
                                     "recorded as interrupted; their tokens stay in the ledger")
            self._warn_orphan_leases(closed)
            return
        # The same for a new run: orphan leases closed, the run, its tasks' dates, its plan.
        begun = self.ledger.queue_begin_run(self.run_id, self.spec, spec_sha256=self.spec_sha256,
                                            task_dates={t.task_id: t.created_at for t in tasks},
                                            sandbox_options=self.options.model_dump(mode="json"), plan=self.plan)
        try:
            self._preload_arms()
        finally:
            self._warn_orphan_leases(await begun)

    def _preload_arms(self) -> None:
        for arm in self.spec.arms:
            if arm.name not in self.skip_arms:
                arm.preload()

    def _warn_orphan_leases(self, closed: int) -> None:
        """Leases a killed process left open (this run's or any other's) end at their last heartbeat."""
        if closed:
            self.warnings.append(f"{closed} lease(s) left open by killed leafcost processes were closed at their "
                                 "last heartbeat")

    async def _start_arms(self, episodes_per_arm: int) -> None:
        """Every arm is probed before any episode: an unreachable endpoint or a missing key stops the run here."""
        for arm in self.spec.arms:
            if arm.name in self.skip_arms:
                await self.arms.skip(arm, self.skip_arms[arm.name])
                self.progress[arm.name] = ArmProgress(arm=arm.name, total=0, status="skipped",
                                                      status_reason=self.skip_arms[arm.name])
                continue
            try:
                self.warnings += await self.arms.start(arm)
            except ArmRefused as exc:
                raise RunError(str(exc)) from None
            self.progress[arm.name] = ArmProgress(arm=arm.name, total=episodes_per_arm)
            self.on_progress(self.progress[arm.name])

    async def _stop_arms(self, status: str) -> None:
        await self.arms.stop(status, failed=self.stopped)
        await self.ledger.set_run_status(self.run_id, status)

    async def _restore_totals(self, live: list[str]) -> None:
        """After --resume the figures printed are the ledger's (every process's), not only this one's."""
        totals = await self.ledger.arm_totals(self.run_id) if self.resuming else {}
        for arm in live:
            recorded = totals.get(arm, ArmTotals())
            progress = self.progress[arm]
            progress.done, progress.resolved, progress.errors = recorded.done, recorded.resolved, recorded.errors
            if self.arm_specs[arm].billing == "tokens":
                progress.spend_usd = recorded.calls_cost_usd

    # --- deciding -----------------------------------------------------------------------------------------

    def _decision_rounds(self, tasks: list[Task]) -> DecisionRounds | None:
        """The rounds of a run with a decision question; a question about a skipped arm is refused."""
        config = self.spec.decide
        if config is None:
            return None
        asked = [*(config.cheaper.arms if config.cheaper else []), *([config.reaches.arm] if config.reaches else [])]
        skipped = [arm for arm in asked if arm in self.skip_arms]
        if skipped:
            raise RunError(f"decide: asks about {', '.join(skipped)}, which this run skips "
                           f"({self.skip_arms[skipped[0]]})")
        from compare.decision_rounds import DecisionRounds

        live = [arm.name for arm in self.spec.arms if arm.name not in self.skip_arms]
        return DecisionRounds(config, self.ledger, self.run_id, live, seeds=self.spec.seeds, workers=self.spec.workers,
                              stopped=self.stopped, reaches_tasks=self._reaches_tasks(tasks))

    def _reaches_tasks(self, tasks: list[Task]) -> frozenset[str] | None:
        """The tasks a `reaches: {tasks: seen}` question reads: those not fresh for its arm (None: every task);
        refused when every task is fresh (the claim could never be judged)."""
        from compare.claim_check import reaches_task_mask

        try:
            mask = reaches_task_mask(self.spec, tasks)
        except ValueError as exc:
            raise RunError(str(exc)) from None
        return None if mask is None else frozenset(t.task_id for t, seen in zip(tasks, mask) if seen)

    async def _already_settled(self, settled: Stop, episodes_per_arm: int) -> RunSummary:
        """A resumed run whose question is decided, or whose tasks are all run, has nothing left: no arm is started
        (no endpoint probed, no lease opened) and its figures stay as they are."""
        totals = await self.ledger.arm_totals(self.run_id)
        for arm in self.spec.arms:
            recorded = totals.get(arm.name, ArmTotals())
            self.progress[arm.name] = ArmProgress(arm=arm.name, total=episodes_per_arm, done=recorded.done,
                                                  resolved=recorded.resolved, errors=recorded.errors,
                                                  spend_usd=recorded.calls_cost_usd)
        await self.ledger.set_run_status(self.run_id, "finished")
        self.warnings.append(f"run {self.run_id} already stopped ({settled.action}): nothing left to run")
        return RunSummary(run_id=self.run_id, db=str(self.db_path), status="finished",
                          arms=list(self.progress.values()), trajectories=str(self.trajectory_dir),
                          warnings=self.warnings, decision=settled.line)

    async def _decide(self, rounds: DecisionRounds, tasks: list[Task], live: list[str],
                      finished: set[tuple[str, int, int]], by_id: dict[str, Task]) -> None:
        """Round after round until the question is decided, a cap would be passed, or no task is left."""
        async def run_round(task_ids: list[str]) -> None:
            keys = expand_keys(self.spec, [by_id[t] for t in task_ids], live)
            await self._work([k for k in keys if (k.arm, k.task_id, k.seed) not in finished], by_id)

        self.decision = (await rounds.run([t.task_id for t in tasks], run_round)).line

    # --- episodes -----------------------------------------------------------------------------------------

    async def _work(self, keys: list[EpisodeKey], tasks: dict[str, Task]) -> None:
        queue: asyncio.Queue[EpisodeKey] = asyncio.Queue()
        for key in keys:
            queue.put_nowait(key)

        async def worker() -> None:
            while True:
                try:
                    key = queue.get_nowait()
                except asyncio.QueueEmpty:
                    return
                await self._run_key(key, tasks[key.task_id])

        workers = [asyncio.create_task(worker()) for _ in range(min(self.spec.workers, max(1, len(keys))))]
        try:
            await asyncio.gather(*workers)
        finally:
            for task in workers:
                task.cancel()
            await asyncio.gather(*workers, return_exceptions=True)

    async def _run_key(self, key: EpisodeKey, task: Task) -> None:
        """Attempts until one is not an infrastructure failure or `max_attempts` is reached; all are recorded. None
        starts once the arm is stopped; one its stop cancelled is recorded, not counted."""
        if key.arm in self.stopped:
            return
        # A new run has no attempt of any key but this process's (each key is run once per process): no query.
        first = await self.ledger.next_attempt(self.run_id, key.arm, key.task_id, key.seed) if self.resuming else 1
        # Attempts a crash interrupted do not use up the retry budget: a resumed key always gets one more.
        limit = max(self.spec.max_attempts, first)
        for attempt in range(first, limit + 1):
            last = attempt == limit
            if not await self.gates.admit(key.arm):
                return
            try:
                outcome = await self._attempt(key, task, attempt, last)
            finally:
                self.gates.release(key.arm)
            if outcome is None:
                return
            if not outcome.infra_error or last:
                break
        progress = self.progress[key.arm]
        progress.done += 1
        progress.resolved += int(bool(outcome.resolved))
        progress.errors += int(outcome.infra_error or outcome.harness_error)
        if outcome.result is not None and outcome.result.misconfiguration:
            self.misconfigured.setdefault(key.arm, Counter())[outcome.result.misconfiguration] += 1
        self.on_progress(progress)

    def _on_result(self, arm: str, result: EpisodeResult) -> None:
        """Heard as an episode ends, before it is graded: a configuration error stops its arm at once."""
        if result.exit_reason == "configuration_error":
            self._stop_arm(arm, result.error or "configuration error")

    def _stop_arm(self, arm: str, error: str) -> None:
        """A configuration error repeats on every episode: the arm stops after the first, which says why; its
        attempts in flight are cancelled before they are graded, and none other starts."""
        reason = f"stopped after a configuration error; its other episodes were not run: {error}"
        if self.gates.stop(arm, reason):
            self.progress[arm].status, self.progress[arm].status_reason = "failed", reason
            self.warnings.append(f"arm {arm}: {reason}")

    async def _attempt(self, key: EpisodeKey, task: Task, attempt: int, last: bool) -> AttemptOutcome | None:
        """One attempt, recorded whatever happens; None when its arm's stop cancelled it (recorded, not final)."""
        # The start commits while the sandbox opens; the solver waits for it (no model call for an attempt the
        # ledger does not have), its rows and its finish are queued after it, and the finish waits for it (_finish).
        episode_id, started = self.ledger.queue_start_episode(run_id=self.run_id, arm=key.arm, task_id=key.task_id,
                                                              seed=key.seed, attempt=attempt)
        self._starts[episode_id] = started
        recorder = LedgerRecorder(self.ledger, self.arm_specs[key.arm], episode_id)
        outcome = AttemptOutcome(episode_id)
        labels = {"leafcost.run": self.run_id, "leafcost.arm": key.arm, "leafcost.task": key.task_id,
                  "leafcost.seed": str(key.seed), "leafcost.attempt": str(attempt)}
        if key.arm in self.stopped:  # stopped while this attempt was being recorded: it never starts
            outcome.cancelled, outcome.error = True, f"not started: the arm {self.stopped[key.arm]}"
            await asyncio.shield(self._finish(key, attempt, outcome, recorder, final=False))
            return None
        # its own task, so that the arm's stop can cancel it without cancelling this worker
        work = asyncio.ensure_future(run_attempt(
            outcome, self.arms.solver(key.arm), task, self.options, _AnswerWatch(recorder, key.arm, self.gates),
            labels, on_result=lambda result: self._on_result(key.arm, result), recorded=started))
        self.gates.track(key.arm, work)
        stopped_by_arm = False
        try:
            await work
        except asyncio.CancelledError:
            if work.cancelled():  # also when the cancel came before run_attempt began, so it could not say so
                outcome.cancelled = True
            stopped_by_arm = work.cancelled() and key.arm in self.stopped and not _cancelling()
            if not stopped_by_arm:
                raise
            outcome.error = f"cancelled before grading: the arm {self.stopped[key.arm]}"
        finally:  # a cancelled attempt is recorded too, as cancelled and not final
            final = not outcome.cancelled and (not outcome.infra_error or last)
            await asyncio.shield(self._finish(key, attempt, outcome, recorder, final))
        return None if stopped_by_arm else outcome

    async def _finish(self, key: EpisodeKey, attempt: int, outcome: AttemptOutcome, recorder: LedgerRecorder,
                      final: bool) -> None:
        await self._starts.pop(outcome.episode_id)  # its LedgerError, if the start was kept out, ends the run
        path = trajectory_path(self.trajectory_dir, key.arm, key.task_id, key.seed, attempt)
        write_trajectory(path, outcome.trajectory(run_id=self.run_id, arm=key.arm, instance_id=key.task_id,
                                                  task_id=key.task_id, seed=key.seed, attempt=attempt,
                                                  trajectory_id=outcome.episode_id))
        await self.ledger.finish_episode(outcome.episode_id, **outcome.ledger_fields(), final=final,
                                         trajectory_path=str(path))
        progress = self.progress[key.arm]
        progress.spend_usd += recorder.spend_usd
        if self.arm_specs[key.arm].billing == "lease":
            progress.spend_usd = self.arms.lease_spend(key.arm)


class _AnswerWatch:
    """An attempt's recorder that tells the arm's gate when the endpoint answered a call; the rest is the
    recorder's own."""

    def __init__(self, recorder: LedgerRecorder, arm: str, gates: ArmGates):
        self._recorder, self._arm, self._gates = recorder, arm, gates

    async def model_call(self, step: int, attempt: CallAttempt) -> None:
        if attempt.status == "ok":
            self._gates.answered(self._arm)
        await self._recorder.model_call(step, attempt)

    def __getattr__(self, name: str):
        return getattr(self._recorder, name)


def _cancelling() -> bool:
    """Whether this task itself is being cancelled (Ctrl-C, the run ending), not only something it awaited."""
    task = asyncio.current_task()
    return task is not None and task.cancelling() > 0


def _kube_options(spec: RunSpec) -> dict:
    kube = spec.sandbox.kubernetes
    if kube is None:
        return {}
    return {"kube_namespace": kube.namespace, "kube_context": kube.context,
            "kubeconfig": Path(kube.kubeconfig) if kube.kubeconfig else None,
            "kube_create_limit": kube.create_concurrency, "kube_delete_limit": kube.delete_concurrency}
