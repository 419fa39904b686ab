"""The ledger's own rows over HTTP: health, runs, a run's arms, its episodes (filtered, paged) and one episode
with its model calls and trajectory file."""

from __future__ import annotations

import json
from typing import Any

from fastapi import APIRouter, Query

from compare.api.declarations import BUSY, NOT_FOUND, leafcost_version
from compare.api.errors import ApiError
from compare.api.figures import run_state
from compare.api.models import (
    ArmRow,
    EpisodeDetail,
    EpisodeFull,
    EpisodePage,
    EpisodeRow,
    Health,
    ModelCall,
    RunDetail,
    RunItem,
    Tokens,
)
from compare.episode_list import EpisodeFilter, count_episodes, episode_costs, find_episode, list_episodes
from compare.ledger import LedgerAccess, fetch_rows
from compare.trajectory_files import read_trajectory


def ledger_routes(access: LedgerAccess) -> APIRouter:
    router = APIRouter(tags=["ledger"], responses={**BUSY})

    @router.get("/health", response_model=Health, summary="The server is up and its ledger readable")
    def health() -> Health:
        with access.reading() as conn:
            version = conn.execute("SELECT value FROM meta WHERE key = 'schema_version'").fetchone()[0]
        return Health(status="ok", ledger=str(access.path), schema_version=int(version),
                      leafcost_version=leafcost_version())

    @router.get("/runs", response_model=list[RunItem], summary="Every run, newest first")
    def runs() -> list[RunItem]:
        with access.reading() as conn:
            rows = fetch_rows(conn, "SELECT run_id, name, status, created_at, updated_at, suite, seeds, spec_json, "
                               "json_array_length(task_ids) AS tasks FROM runs ORDER BY created_at DESC, run_id")
        return [_run_item(row) for row in rows]

    @router.get("/runs/{run_id}", response_model=RunDetail, responses=NOT_FOUND,
                summary="A run: its spec, task order and arms (endpoint, config, status)")
    def run(run_id: str) -> RunDetail:
        with access.reading() as conn:
            run_state(conn, run_id)
            row = fetch_rows(conn, "SELECT * FROM runs WHERE run_id = ?", [run_id])[0]
            arm_rows = {r["arm"]: r for r in fetch_rows(conn, "SELECT * FROM arms WHERE run_id = ?", [run_id])}
        spec = json.loads(row.pop("spec_json"))
        arms = [_arm_row(arm, arm_rows.get(arm["name"])) for arm in spec.get("arms", [])]
        return RunDetail(**{**row, "task_ids": json.loads(row["task_ids"]),
                            "sandbox_options": _loads(row["sandbox_options"])}, spec=spec, arms=arms)

    @router.get("/runs/{run_id}/episodes", response_model=EpisodePage, responses=NOT_FOUND,
                summary="A run's attempts, filtered and paged (final attempts by default)")
    def episodes(run_id: str, arm: str | None = Query(None, description="only this arm"),
                 task: str | None = Query(None, description="only this task id"),
                 resolved: bool | None = Query(None, description="only resolved (true) or unresolved (false)"),
                 exit_reason: str | None = Query(None, description="only attempts that ended this way"),
                 final: bool = Query(True, description="the attempts that count (true) or the retried ones"),
                 limit: int = Query(50, ge=1, le=500), offset: int = Query(0, ge=0, le=2**31 - 1)) -> EpisodePage:
        chosen = EpisodeFilter(arm=arm, task=task, resolved=resolved, exit_reason=exit_reason, final=final)
        with access.reading() as conn:
            run = run_state(conn, run_id)
            if arm is not None:
                run.require_arms([arm])
            total = count_episodes(conn, run_id, chosen)
            rows = list_episodes(conn, run_id, chosen, limit=limit, offset=offset)
        return EpisodePage(total=total, limit=limit, offset=offset,
                           episodes=[_episode(row, row["cost_usd"]) for row in rows])

    @router.get("/runs/{run_id}/episodes/{episode_id:path}", response_model=EpisodeDetail, responses=NOT_FOUND,
                summary="One attempt: its row, every model call, and its trajectory file")
    def episode(run_id: str, episode_id: str) -> EpisodeDetail:
        with access.reading() as conn:
            run_state(conn, run_id)
            row = find_episode(conn, run_id, episode_id)
            if row is None:
                raise ApiError(404, f"run {run_id} has no episode {episode_id!r} (ids look like "
                                    f"{run_id}/ARM/TASK/s0/a1; GET /runs/{run_id}/episodes lists them)")
            calls = fetch_rows(conn, f"SELECT {', '.join(ModelCall.model_fields)} FROM model_calls "
                               "WHERE episode_id = ? ORDER BY step, attempt, call_id", [row["episode_id"]])
            cost = episode_costs(conn, run_id, [row["episode_id"]]).get(row["episode_id"])  # as the list sums it
        trajectory, reason = read_trajectory(access.path, row["trajectory_path"])
        return EpisodeDetail(episode=EpisodeFull(**_episode(row, cost).model_dump(), **{
                                 k: row[k] for k in EpisodeFull.model_fields if k not in EpisodeRow.model_fields}),
                             model_calls=[ModelCall(**c) for c in calls], trajectory=trajectory,
                             trajectory_reason=reason)

    return router


def _episode(row: dict[str, Any], cost: float | None) -> EpisodeRow:
    tokens = Tokens(prompt=row["prompt_tokens"], cached=row["cached_tokens"], completion=row["completion_tokens"],
                    reasoning=row["reasoning_tokens"])
    return EpisodeRow(**{k: row[k] for k in EpisodeRow.model_fields if k not in ("tokens", "cost_usd")},
                      tokens=tokens, cost_usd=cost)


def _run_item(row: dict[str, Any]) -> RunItem:
    spec = json.loads(row.pop("spec_json"))
    return RunItem(**row, arms=[arm["name"] for arm in spec.get("arms", [])])


def _arm_row(spec_arm: dict[str, Any], row: dict[str, Any] | None) -> ArmRow:
    if row is None:  # in the spec, never started (the run stopped first)
        return ArmRow(arm=spec_arm["name"], adapter=spec_arm.get("adapter", ""), model=spec_arm.get("model", ""),
                      status="not started", status_reason=None, endpoint=spec_arm.get("base_url"),
                      served_model=None, config=None, warnings=[], started_at=None, ended_at=None)
    return ArmRow(**{k: row[k] for k in ("arm", "adapter", "model", "status", "status_reason", "endpoint",
                                         "served_model", "started_at", "ended_at")},
                  config=_loads(row["config"]), warnings=_loads(row["warnings"]) or [])


def _loads(text: str | None) -> Any:
    return None if text is None else json.loads(text)
