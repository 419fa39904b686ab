"""What a decision look reads from the ledger: each arm's per-task figures on the tasks of the finished rounds,
counted by the summary's own code, so a look and the summary never disagree. (What the run's decision says
afterwards, for every surface, is compare.decision_record.)"""

from __future__ import annotations

from datetime import datetime, timezone

import numpy as np

from compare.decision import ArmTasks
from compare.summary import arm_summary_with_tables, load_arms, load_run, sandbox_usd_per_vcpu_hour

LOOK_RESAMPLES = 1  # a look reads the per-task tables only; the summary's bootstrap is not needed


def arm_tasks(conn, run_id: str, task_ids: list[str], arms: list[str]) -> dict[str, ArmTasks]:
    """Each arm's resolved attempts, attempts with a verdict and dollars per task, over `task_ids` in that order
    (a task with no finished attempt counts zero), and its whole spend so far."""
    run = load_run(conn, run_id)
    spec = run.spec()
    price = sandbox_usd_per_vcpu_hour(spec, None)
    now = datetime.now(timezone.utc)
    result = {}
    for facts in load_arms(conn, run, spec, arms):
        # The look is taken by the process holding the arm's lease: an open lease has cost up to now, not to its
        # last heartbeat (which a finished run's figures stop at, as its owner may be long dead).
        facts.leases = [lease.model_copy(update={"heartbeat_at": None}) if lease.ended_at is None else lease
                        for lease in facts.leases]
        summary, tables = arm_summary_with_tables(facts, price, resamples=LOOK_RESAMPLES, seed=0, now=now)
        index = {task: i for i, task in enumerate(tables.tasks)}
        rows = [index.get(task) for task in task_ids]
        pick = np.array([-1 if i is None else i for i in rows], dtype=np.int64)

        def column(values: np.ndarray, dtype: type) -> np.ndarray:
            padded = np.append(np.asarray(values, dtype=dtype), dtype(0))  # index -1 picks the appended zero
            return padded[pick]

        spent = summary["cost_usd"]["total"]
        result[facts.arm] = ArmTasks(arm=facts.arm, resolved=column(tables.c, int), attempts=column(tables.n, int),
                                     cost_usd=column(tables.cost, float),
                                     spent_usd=float(spent if spent is not None else tables.cost.sum()))
    return result
