"""The ledger's tables as SQL: the ordered migrations (DDL and the comments users read in duckdb_columns()),
the statuses their CHECK constraints allow, and the few statements that compute rows from other tables."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Literal

RunStatus = Literal["running", "finished", "interrupted", "failed"]
ArmStatus = Literal["ready", "skipped", "failed", "finished", "interrupted"]

_SCHEMA_V1 = """
CREATE TABLE meta (
    key VARCHAR PRIMARY KEY,
    value VARCHAR NOT NULL
);
CREATE TABLE runs (
    run_id VARCHAR PRIMARY KEY,
    name VARCHAR NOT NULL,
    created_at TIMESTAMPTZ NOT NULL,
    updated_at TIMESTAMPTZ NOT NULL,
    status VARCHAR NOT NULL CHECK (status IN ('running', 'finished', 'interrupted')),
    spec_json JSON NOT NULL,
    spec_sha256 VARCHAR NOT NULL,
    suite VARCHAR NOT NULL,
    task_ids JSON NOT NULL,
    seeds BIGINT NOT NULL,
    leafcost_version VARCHAR NOT NULL,
    sandbox_options JSON
);
CREATE TABLE arms (
    run_id VARCHAR NOT NULL,
    arm VARCHAR NOT NULL,
    adapter VARCHAR NOT NULL,
    model VARCHAR NOT NULL,
    endpoint VARCHAR,
    served_model VARCHAR,
    config JSON,
    server_info JSON,
    model_info JSON,
    warnings JSON,
    status VARCHAR NOT NULL CHECK (status IN ('ready', 'skipped', 'failed', 'finished', 'interrupted')),
    status_reason VARCHAR,
    started_at TIMESTAMPTZ,
    ended_at TIMESTAMPTZ,
    PRIMARY KEY (run_id, arm)
);
CREATE TABLE episodes (
    episode_id VARCHAR PRIMARY KEY,
    run_id VARCHAR NOT NULL,
    arm VARCHAR NOT NULL,
    task_id VARCHAR NOT NULL,
    seed BIGINT NOT NULL,
    attempt BIGINT NOT NULL,
    status VARCHAR NOT NULL CHECK (status IN ('running', 'finished')),
    exit_reason VARCHAR,
    resolved BOOLEAN,
    reward DOUBLE,
    grade_error VARCHAR,
    error_detail VARCHAR,
    infra_error BOOLEAN NOT NULL DEFAULT false,
    harness_error BOOLEAN NOT NULL DEFAULT false,
    final BOOLEAN NOT NULL DEFAULT false,
    n_steps BIGINT,
    prompt_tokens BIGINT,
    cached_tokens BIGINT,
    completion_tokens BIGINT,
    reasoning_tokens BIGINT,
    model_calls BIGINT,
    started_at TIMESTAMPTZ NOT NULL,
    ended_at TIMESTAMPTZ,
    elapsed_sec DOUBLE,
    sandbox_spec_hash VARCHAR,
    isolation VARCHAR,
    sandbox_cpu_seconds DOUBLE,
    sandbox_start_sec DOUBLE,
    patch_bytes BIGINT,
    trajectory_path VARCHAR,
    UNIQUE (run_id, arm, task_id, seed, attempt)
);
CREATE SEQUENCE model_calls_call_id_seq START 1;
CREATE TABLE model_calls (
    call_id BIGINT PRIMARY KEY DEFAULT nextval('model_calls_call_id_seq'),
    run_id VARCHAR NOT NULL,
    arm VARCHAR NOT NULL,
    episode_id VARCHAR NOT NULL,
    step BIGINT NOT NULL,
    attempt BIGINT NOT NULL,
    model VARCHAR NOT NULL,
    status VARCHAR NOT NULL,
    http_status BIGINT,
    error VARCHAR,
    finish_reason VARCHAR,
    prompt_tokens BIGINT NOT NULL,
    cached_tokens BIGINT NOT NULL,
    completion_tokens BIGINT NOT NULL,
    reasoning_tokens BIGINT NOT NULL,
    total_tokens BIGINT NOT NULL,
    started_at TIMESTAMPTZ NOT NULL,
    latency_sec DOUBLE NOT NULL,
    ttft_sec DOUBLE,
    router_cost_usd DOUBLE,
    router_cost_detail JSON,
    router_retries BIGINT,
    router_fallbacks BIGINT,
    cost_usd DOUBLE,
    price_source VARCHAR,
    price_revision VARCHAR,
    request_id VARCHAR
);
CREATE TABLE tool_calls (
    run_id VARCHAR NOT NULL,
    arm VARCHAR NOT NULL,
    episode_id VARCHAR NOT NULL,
    step BIGINT NOT NULL,
    idx BIGINT NOT NULL,
    tool_call_id VARCHAR,
    tool_name VARCHAR NOT NULL,
    arguments_chars BIGINT NOT NULL,
    output_chars BIGINT NOT NULL,
    started_at TIMESTAMPTZ NOT NULL,
    seconds DOUBLE NOT NULL
);
CREATE SEQUENCE gpu_leases_lease_id_seq START 1;
CREATE TABLE gpu_leases (
    lease_id BIGINT PRIMARY KEY DEFAULT nextval('gpu_leases_lease_id_seq'),
    run_id VARCHAR NOT NULL,
    arm VARCHAR NOT NULL,
    kind VARCHAR NOT NULL CHECK (kind IN ('gpu', 'cpu')),
    hardware VARCHAR NOT NULL,
    count BIGINT NOT NULL,
    usd_per_hour DOUBLE NOT NULL,
    started_at TIMESTAMPTZ NOT NULL,
    ended_at TIMESTAMPTZ
);
CREATE TABLE server_samples (
    run_id VARCHAR NOT NULL,
    arm VARCHAR NOT NULL,
    taken_at TIMESTAMPTZ NOT NULL,
    metric VARCHAR NOT NULL,
    value DOUBLE NOT NULL
);
"""

# What users see in duckdb_tables() / duckdb_columns(): the meaning of each table and of the columns whose
# name alone does not say it.
_COMMENTS: dict[str, str] = {
    "meta": "Ledger facts: schema_version.",
    "runs": "One row per run (a run spec over arms x tasks x seeds).",
    "runs.task_ids": "JSON array: the ordered task list every arm sees.",
    "runs.seeds": "Seeds per (arm, task).",
    "runs.spec_sha256": "sha256 of spec_json; a resume must match it.",
    "arms": "One row per arm of a run: the endpoint, what the server said about itself, and how the arm ended.",
    "arms.config": "JSON: what the adapter forces or adds to requests. Never holds a secret.",
    "arms.status": "ready, skipped (never started), failed (stopped by an error), interrupted (the run was "
                   "stopped) or finished.",
    "episodes": "One row per attempt of (arm, task, seed); infra-failed attempts stay, with final = false.",
    "episodes.final": "This attempt is the one that counts for its (arm, task, seed).",
    "episodes.infra_error": "The endpoint or sandbox failed (not the model); such attempts may be retried.",
    "episodes.harness_error": "leafcost itself failed during this attempt.",
    "episodes.reward": "The verifier's reward; NULL when grading gave none (see grade_error).",
    "episodes.prompt_tokens": "Sum over this attempt's model_calls: all input tokens, cached included.",
    "episodes.cached_tokens": "Sum over model_calls: the part of prompt_tokens served from the prefix cache.",
    "episodes.completion_tokens": "Sum over model_calls: all output tokens, reasoning included.",
    "episodes.reasoning_tokens": "Sum over model_calls: the part of completion_tokens spent reasoning.",
    "episodes.model_calls": "Number of HTTP attempts to the model (failed ones included).",
    "episodes.sandbox_spec_hash": "Hash of the sandbox spec; comparable arms share it.",
    "model_calls": "One row per HTTP attempt to a model endpoint, failed and retried ones included.",
    "model_calls.step": "The episode step (assistant turn) this attempt belongs to.",
    "model_calls.attempt": "The HTTP attempt within the step, from 1.",
    "model_calls.model": "The model or deployment that answered (a router's fallback shows here).",
    "model_calls.prompt_tokens": "All input tokens, cached included, as the server reported them.",
    "model_calls.cached_tokens": "The part of prompt_tokens served from the prefix cache.",
    "model_calls.completion_tokens": "All output tokens, reasoning included.",
    "model_calls.reasoning_tokens": "The part of completion_tokens spent reasoning.",
    "model_calls.cost_usd": "Tokens x the arm's price sheet; NULL when not priced per token (self-hosted).",
    "model_calls.price_source": "Where the prices came from (litellm price map, explicit spec prices, ...).",
    "model_calls.price_revision": "The price table revision used for cost_usd.",
    "model_calls.router_cost_usd": "What the router itself reported this call cost, kept beside cost_usd.",
    "tool_calls": "One row per tool call the model made.",
    "tool_calls.idx": "Position of the call among the step's tool calls.",
    "gpu_leases": "Hardware paid by the hour for a self-hosted arm: GPUs, or the CPU machine of the local arm.",
    "gpu_leases.usd_per_hour": "Per unit (per GPU): the lease costs count x usd_per_hour per hour.",
    "server_samples": "Prometheus samples scraped from a self-hosted server, one row per metric per scrape.",
    "server_samples.metric": "Sample name with its labels, as exposed.",
}


def _comments_sql(comments: Mapping[str, str]) -> str:
    statements = []
    for target, text in comments.items():
        kind = "COLUMN" if "." in target else "TABLE"
        statements.append(f"COMMENT ON {kind} {target} IS '{text.replace(chr(39), chr(39) * 2)}';")
    return "\n".join(statements)


# Ordered schema steps; opening a file applies those it lacks. A released step is never edited: a change is a
# new step appended at the end.
_ROUTER_MODEL_COLUMNS = """
ALTER TABLE model_calls ADD COLUMN router_model VARCHAR;
ALTER TABLE model_calls ADD COLUMN router_deployment VARCHAR;
""" + _comments_sql({
    "model_calls.router_model": "The model name the router says answered (x-litellm-model-group); a fallback's "
                                "differs from the arm's model and is priced at its own prices.",
    "model_calls.router_deployment": "The router's id of the deployment that answered (x-litellm-model-id).",
    "model_calls.router_fallbacks": "Fallbacks the router made behind this one request (its own header).",
})
_CACHE_WRITE_COLUMN = """
ALTER TABLE model_calls ADD COLUMN cache_write_tokens BIGINT NOT NULL DEFAULT 0;
""" + _comments_sql({"model_calls.cache_write_tokens": "The part of prompt_tokens written to the provider's "
                                                       "prompt cache (billed at the cache_write rate)."})
_SCENARIOS_TABLE = """
CREATE TABLE scenarios (
    run_id VARCHAR NOT NULL,
    name VARCHAR NOT NULL,
    created_at TIMESTAMPTZ NOT NULL,
    sheet JSON NOT NULL,
    summary JSON NOT NULL,
    PRIMARY KEY (run_id, name)
);
""" + _comments_sql({
    "scenarios": "What-if repricings of a finished run (leafcost reprice): other prices over the same recorded "
                 "facts, which stay untouched.",
    "scenarios.sheet": "JSON: the price sheet applied.",
    "scenarios.summary": "JSON: the leafcost summary document under that sheet.",
})
# A lease recorded before heartbeats existed and still open was left by a dead process (a migration runs with
# the file to itself): its last sign of life is its arm's last recorded activity before the arm's next lease.
_LEASE_HEARTBEATS = """
ALTER TABLE gpu_leases ADD COLUMN heartbeat_at TIMESTAMPTZ;
ALTER TABLE gpu_leases ADD COLUMN owner_pid BIGINT;
ALTER TABLE gpu_leases ADD COLUMN owner_host VARCHAR;
UPDATE gpu_leases AS l SET heartbeat_at = s.last_seen
FROM (
    SELECT b.lease_id, greatest(any_value(b.started_at), max(a.at)) AS last_seen
    FROM (SELECT lease_id, run_id, arm, started_at, ended_at,
                 lead(started_at) OVER (PARTITION BY run_id, arm ORDER BY started_at, lease_id) AS next_start
          FROM gpu_leases) AS b
    LEFT JOIN (
        SELECT run_id, arm, started_at + to_microseconds(CAST(latency_sec * 1e6 AS BIGINT)) AS at FROM model_calls
        UNION ALL SELECT run_id, arm, started_at + to_microseconds(CAST(seconds * 1e6 AS BIGINT)) FROM tool_calls
        UNION ALL SELECT run_id, arm, taken_at FROM server_samples
        UNION ALL SELECT run_id, arm, coalesce(ended_at, started_at) FROM episodes
    ) AS a ON a.run_id = b.run_id AND a.arm = b.arm AND a.at >= b.started_at
              AND (b.next_start IS NULL OR a.at < b.next_start)
    WHERE b.ended_at IS NULL
    GROUP BY b.lease_id
) AS s
WHERE l.lease_id = s.lease_id;
""" + _comments_sql({
    "gpu_leases.heartbeat_at": "The last time the owner process was known alive while the lease was open. An open "
                               "lease is billed up to here; one whose owner died is closed here on the next start.",
    "gpu_leases.owner_pid": "The process that opened the lease.",
    "gpu_leases.owner_host": "The host of the process that opened the lease.",
})
# DuckDB cannot alter a CHECK constraint: the runs table is rebuilt with 'failed' allowed and a reason column.
_RUN_FAILED_STATUS = """
CREATE TABLE runs_rebuilt (
    run_id VARCHAR PRIMARY KEY,
    name VARCHAR NOT NULL,
    created_at TIMESTAMPTZ NOT NULL,
    updated_at TIMESTAMPTZ NOT NULL,
    status VARCHAR NOT NULL CHECK (status IN ('running', 'finished', 'interrupted', 'failed')),
    spec_json JSON NOT NULL,
    spec_sha256 VARCHAR NOT NULL,
    suite VARCHAR NOT NULL,
    task_ids JSON NOT NULL,
    seeds BIGINT NOT NULL,
    leafcost_version VARCHAR NOT NULL,
    sandbox_options JSON,
    status_reason VARCHAR
);
INSERT INTO runs_rebuilt SELECT run_id, name, created_at, updated_at, status, spec_json, spec_sha256, suite, task_ids,
    seeds, leafcost_version, sandbox_options, NULL FROM runs;
DROP TABLE runs;
ALTER TABLE runs_rebuilt RENAME TO runs;
""" + _comments_sql({
    **{target: text for target, text in _COMMENTS.items() if target.split(".")[0] == "runs"},
    "runs.status": "running, finished, interrupted (stopped before the end: resume it) or failed (refused or "
                   "stopped by an error: see status_reason).",
    "runs.status_reason": "Why the run is failed or interrupted, in one line.",
})
# Every request to a per-token endpoint is kept here (journalled before it leaves: ledger.intent_journal); its
# model_calls row, when the answer is recorded, carries the same call_key. An intent of a finished attempt without
# that row is a call a crash lost: it may have been served and billed ("unrecorded spend"), bounded by the
# request's size.
_CALL_INTENTS = """
CREATE TABLE call_intents (
    call_key VARCHAR PRIMARY KEY,
    run_id VARCHAR NOT NULL,
    arm VARCHAR NOT NULL,
    episode_id VARCHAR NOT NULL,
    attempt BIGINT NOT NULL,
    model VARCHAR NOT NULL,
    sent_at TIMESTAMPTZ NOT NULL,
    request_bytes BIGINT NOT NULL,
    max_tokens BIGINT,
    bound_usd DOUBLE,
    price_source VARCHAR,
    router_spend_usd DOUBLE,
    router_prompt_tokens BIGINT,
    router_completion_tokens BIGINT,
    reconciled_at TIMESTAMPTZ,
    reconcile_note VARCHAR
);
ALTER TABLE model_calls ADD COLUMN call_key VARCHAR;
""" + _comments_sql({
    "call_intents": "One row per request to a per-token endpoint, journalled before the request is sent. One whose "
                    "call_key has no model_calls row in a finished attempt was lost by a crash: unrecorded spend.",
    "call_intents.call_key": "leafcost's id of the request, sent as x-litellm-call-id (a LiteLLM proxy logs it as "
                             "litellm_call_id); the model_calls row of its answer has the same call_key.",
    "call_intents.request_bytes": "Size of the JSON body sent: the upper bound on its prompt tokens (a token is at "
                                  "least one byte of the text it stands for).",
    "call_intents.max_tokens": "The completion cap the request carried: the upper bound on its completion tokens.",
    "call_intents.bound_usd": "request_bytes input tokens + max_tokens output tokens at the arm's prices, at the "
                              "dearest of its input, cache-write, output and reasoning rates: the most the call "
                              "could cost. NULL when unbounded (no cap sent) or unpriced.",
    "call_intents.router_spend_usd": "What the router's spend log says the call cost, when reconciliation found it.",
    "call_intents.reconcile_note": "What reconciliation with the router's spend log found (or why it could not ask).",
    "model_calls.call_key": "leafcost's id of the request (see call_intents).",
})
# A resolved attempt whose patch touches the test harness is flagged (sandbox.reward_hacking); a strict run counts
# it as not resolved. The verdict in `resolved` stays the verifier's.
_REWARD_HACKING = """
ALTER TABLE episodes ADD COLUMN hack_paths JSON;
ALTER TABLE episodes ADD COLUMN flagged BOOLEAN NOT NULL DEFAULT false;
ALTER TABLE runs ADD COLUMN strict_grading BOOLEAN NOT NULL DEFAULT false;
""" + _comments_sql({
    "episodes.hack_paths": "JSON list: the paths of the patch that belong to the test harness (conftest.py, "
                           "sitecustomize/usercustomize, .pth, pytest/tox/nox settings, CI config, the graded "
                           "tests' files); [] when none; NULL when no patch was captured to check.",
    "episodes.flagged": "Resolved, and its patch touches the test harness (hack_paths) or could not be checked. "
                        "Figures count it as resolved unless the run grades strictly.",
    "runs.strict_grading": "Set by leafcost run --strict-grading: this run's figures count flagged attempts as "
                           "not resolved.",
})
_ANSWER_TRUNCATED_COLUMN = """
ALTER TABLE model_calls ADD COLUMN answer_truncated_chars BIGINT NOT NULL DEFAULT 0;
""" + _comments_sql({"model_calls.answer_truncated_chars": "Characters cut from the answer's content, reasoning and "
                     "tool arguments past their caps (1,000,000 each, adapters.answers); 0 when nothing was cut."})
# A run with a decision question (the spec's `decide:`) looks at its figures after every round of tasks and stops
# when the question is decided, at its budget, or when the tasks run out: every look is a row.
_DECISION_LOOKS = """
CREATE TABLE decision_looks (
    run_id VARCHAR NOT NULL,
    look BIGINT NOT NULL,
    looked_at TIMESTAMPTZ NOT NULL,
    tasks BIGINT NOT NULL,
    total_tasks BIGINT NOT NULL,
    episodes BIGINT NOT NULL,
    spent_usd JSON NOT NULL,
    budget JSON NOT NULL,
    result JSON NOT NULL,
    action VARCHAR NOT NULL CHECK (action IN ('continue', 'decided', 'futile', 'budget', 'exhausted')),
    reason VARCHAR,
    unspent_episodes BIGINT,
    unspent_usd DOUBLE,
    PRIMARY KEY (run_id, look)
);
""" + _comments_sql({
    "decision_looks": "One row per look of a run with a decision question (decide: in its spec): after each round "
                      "of tasks, what the confidence sequences said and whether the run went on or stopped.",
    "decision_looks.tasks": "Tasks of the finished rounds the look used (every arm, every seed of each).",
    "decision_looks.episodes": "Final episodes of every arm recorded when the look was taken.",
    "decision_looks.spent_usd": "JSON {arm: $}: each arm's spend so far (tokens at its prices, its lease so far).",
    "decision_looks.budget": "JSON: decide.budget in effect at this look (a resume may raise it).",
    "decision_looks.result": "JSON: the look's verdicts (compare.decision.LookResult): per question the verdict, "
                             "estimate, interval and the sentence shown.",
    "decision_looks.action": "continue: another round ran after it; decided: every question decided, the run "
                             "stopped; futile: a question out of reach by the suite's end, the run stopped "
                             "undecided; budget: the next round would pass a cap, the run stopped undecided; "
                             "exhausted: no tasks left.",
    "decision_looks.reason": "Why the run stopped at this look (the cap passed, or the decision), one line.",
    "decision_looks.unspent_episodes": "Episodes of the spec the stop left unrun (every arm).",
    "decision_looks.unspent_usd": "What those episodes would have cost at each arm's mean cost per task so far.",
})
# A run whose spec has decide: or plan: keeps what leafcost plan predicted for it, made just before it started, so
# the prediction can be read beside what the run did.
_RUN_PLANS = """
CREATE TABLE run_plans (
    run_id VARCHAR PRIMARY KEY,
    made_at TIMESTAMPTZ NOT NULL,
    document JSON NOT NULL
);
""" + _comments_sql({
    "run_plans": "One row per run started with decide: or plan: in its spec: the plan made before it started "
                 "(leafcost plan --json's document); written once, never replaced (a resume keeps it).",
    "run_plans.made_at": "When the plan was recorded, as the run was created.",
    "run_plans.document": "JSON: compare.planning.PlanDocument: per arm the source, predicted episodes, dollars, "
                          "wall time and interval widths; with decide:, the simulated tasks, dollars and decided "
                          "probability.",
})
# Each task of a run with its creation date, so the figures can be split by it against an arm's release date
# (compare.freshness) without the suite at hand.
_RUN_TASKS = """
CREATE TABLE run_tasks (
    run_id VARCHAR NOT NULL,
    task_id VARCHAR NOT NULL,
    created_at TIMESTAMPTZ,
    PRIMARY KEY (run_id, task_id)
);
""" + _comments_sql({
    "run_tasks": "One row per task of a run (runs.task_ids), written when the run starts or resumes.",
    "run_tasks.created_at": "When the task was created: a SWE-bench row's created_at, a Harbor task's [metadata] "
                            "created_at; NULL when the task does not say. A model released before it cannot have "
                            "seen it.",
})
MIGRATIONS: list[str] = [_SCHEMA_V1, _comments_sql(_COMMENTS), _ROUTER_MODEL_COLUMNS, _CACHE_WRITE_COLUMN,
                         _SCENARIOS_TABLE, _LEASE_HEARTBEATS, _RUN_FAILED_STATUS, _CALL_INTENTS, _REWARD_HACKING,
                         _ANSWER_TRUNCATED_COLUMN, _DECISION_LOOKS, _RUN_PLANS, _RUN_TASKS]
SCHEMA_VERSION = len(MIGRATIONS)

ARM_TOTALS_SQL = """
SELECT arm, sum(done)::BIGINT, sum(resolved)::BIGINT, sum(errors)::BIGINT, sum(cost)::DOUBLE FROM (
    SELECT arm, count(*) AS done, count(*) FILTER (WHERE resolved) AS resolved,
           count(*) FILTER (WHERE errors) AS errors,
           0.0 AS cost
    FROM (SELECT arm, task_id, seed, bool_or(coalesce(resolved, false)) AS resolved,
                 bool_or(infra_error OR harness_error) AS errors
          FROM episodes WHERE run_id = $1 AND status = 'finished' AND final GROUP BY arm, task_id, seed)
    GROUP BY arm
    UNION ALL
    SELECT arm, 0, 0, 0, coalesce(sum(cost_usd), 0.0) FROM model_calls WHERE run_id = $1 AND cost_usd IS NOT NULL
    GROUP BY arm
) GROUP BY arm ORDER BY arm
"""
_TOKEN_SETS = ", ".join(f"{c} = c.{c}" for c in ("prompt_tokens", "cached_tokens", "completion_tokens",
                                                 "reasoning_tokens", "model_calls"))
FINISH_SQL = """
UPDATE episodes AS e SET status = 'finished', exit_reason = f.exit_reason, resolved = f.resolved,
    reward = f.reward, final = f.final, n_steps = f.n_steps, grade_error = f.grade_error,
    error_detail = f.error_detail, infra_error = f.infra_error, harness_error = f.harness_error,
    ended_at = f.ended_at, elapsed_sec = coalesce(f.elapsed_sec, epoch(f.ended_at) - epoch(e.started_at)),
    sandbox_cpu_seconds = f.sandbox_cpu_seconds, sandbox_start_sec = f.sandbox_start_sec,
    patch_bytes = f.patch_bytes, trajectory_path = coalesce(f.trajectory_path, e.trajectory_path),
    hack_paths = f.hack_paths, flagged = f.flagged,
    sandbox_spec_hash = coalesce(f.sandbox_spec_hash, e.sandbox_spec_hash),
    isolation = coalesce(f.isolation, e.isolation),
    prompt_tokens = coalesce(c.prompt_tokens, 0), cached_tokens = coalesce(c.cached_tokens, 0),
    completion_tokens = coalesce(c.completion_tokens, 0), reasoning_tokens = coalesce(c.reasoning_tokens, 0),
    model_calls = coalesce(c.model_calls, 0)
FROM (SELECT {unnest}) AS f
LEFT JOIN (
    SELECT episode_id, sum(prompt_tokens) AS prompt_tokens, sum(cached_tokens) AS cached_tokens,
           sum(completion_tokens) AS completion_tokens, sum(reasoning_tokens) AS reasoning_tokens,
           count(*) AS model_calls
    FROM model_calls WHERE episode_id IN (SELECT unnest($1::VARCHAR[])) GROUP BY episode_id
) AS c ON c.episode_id = f.episode_id
WHERE e.episode_id = f.episode_id AND e.status = 'running'
RETURNING e.episode_id
"""
INTERRUPT_SQL = f"""
UPDATE episodes AS e SET status = 'finished', exit_reason = 'interrupted', infra_error = true, final = false,
    resolved = false,
    error_detail = 'the run stopped while this attempt was running (the process crashed or was killed)',
    ended_at = c.ended_at, elapsed_sec = epoch(c.ended_at) - epoch(e.started_at), {_TOKEN_SETS}
FROM (
    SELECT r.episode_id,
           coalesce(sum(m.prompt_tokens), 0) AS prompt_tokens, coalesce(sum(m.cached_tokens), 0) AS cached_tokens,
           coalesce(sum(m.completion_tokens), 0) AS completion_tokens,
           coalesce(sum(m.reasoning_tokens), 0) AS reasoning_tokens, count(m.call_id) AS model_calls,
           greatest(any_value(r.started_at),
                    coalesce(max(m.started_at + to_microseconds(CAST(m.latency_sec * 1e6 AS BIGINT))),
                             any_value(r.started_at)),
                    coalesce(any_value(t.last_tool), any_value(r.started_at))) AS ended_at
    FROM episodes AS r
    LEFT JOIN model_calls AS m ON m.episode_id = r.episode_id
    LEFT JOIN (SELECT episode_id, max(started_at + to_microseconds(CAST(seconds * 1e6 AS BIGINT))) AS last_tool
               FROM tool_calls WHERE run_id = $1 GROUP BY episode_id) AS t ON t.episode_id = r.episode_id
    WHERE r.run_id = $1 AND r.status = 'running'
    GROUP BY r.episode_id
) AS c
WHERE e.episode_id = c.episode_id AND e.status = 'running'
RETURNING e.episode_id
"""
