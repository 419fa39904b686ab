"""A run's attempts as a list, written once for the API (`GET /runs/{id}/episodes`) and the web page's episode table:
the filter, the order, the paging, each row's token cost (Σ of its model calls' `cost_usd`, null when no call is
priced) and the lookup of one attempt by its id. Both read these rows, so they show the same attempts at the same
cost."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from compare.ledger import fetch_rows

if TYPE_CHECKING:
    import duckdb

# The same attempt at the same place on every page: its key, then its id (unique) for ties
ORDER = "arm, task_id, seed, attempt, episode_id"


@dataclass(frozen=True)
class EpisodeFilter:
    """Which attempts of a run: each field set narrows the list; `final` picks the attempts that count (true) or
    the retried ones (false)."""

    arm: str | None = None
    task: str | None = None
    resolved: bool | None = None  # an unfinished attempt (null) counts as unresolved
    exit_reason: str | None = None
    final: bool = True

    def where(self, run_id: str) -> tuple[str, list[Any]]:
        clauses, params = ["run_id = ?", "final = ?"], [run_id, self.final]
        for clause, value in (("arm = ?", self.arm), ("task_id = ?", self.task),
                              ("coalesce(resolved, false) = ?", self.resolved), ("exit_reason = ?", self.exit_reason)):
            if value is not None:
                clauses.append(clause)
                params.append(value)
        return " AND ".join(clauses), params


def count_episodes(conn: duckdb.DuckDBPyConnection, run_id: str, chosen: EpisodeFilter) -> int:
    where, params = chosen.where(run_id)
    return conn.execute(f"SELECT count(*) FROM episodes WHERE {where}", params).fetchone()[0]


def list_episodes(conn: duckdb.DuckDBPyConnection, run_id: str, chosen: EpisodeFilter, *, limit: int,
                  offset: int) -> list[dict[str, Any]]:
    """One page of episode rows (every column of `episodes`) in ORDER, each with its `cost_usd`."""
    where, params = chosen.where(run_id)
    rows = fetch_rows(conn, f"SELECT * FROM episodes WHERE {where} ORDER BY {ORDER} LIMIT ? OFFSET ?",
                      [*params, limit, offset])
    costs = episode_costs(conn, run_id, [row["episode_id"] for row in rows])
    return [{**row, "cost_usd": costs.get(row["episode_id"])} for row in rows]


def episode_costs(conn: duckdb.DuckDBPyConnection, run_id: str, episode_ids: list[str]) -> dict[str, float | None]:
    """Each attempt's token cost: Σ model_calls.cost_usd (null when none of its calls is priced, e.g. a
    self-hosted arm's, whose lease is its cost); an attempt without calls is absent. Only the page's ids are
    summed, not the run's every call."""
    if not episode_ids:
        return {}
    rows = conn.execute("SELECT episode_id, sum(cost_usd) FROM model_calls WHERE run_id = ? AND episode_id IN "
                        "(SELECT unnest(?::VARCHAR[])) GROUP BY episode_id", [run_id, episode_ids]).fetchall()
    return dict(rows)


def find_episode(conn: duckdb.DuckDBPyConnection, run_id: str, episode_id: str) -> dict[str, Any] | None:
    """One attempt's row by its id, whole (run/arm/task/s0/a1) or after the run id (arm/task/s0/a1)."""
    for candidate in (episode_id, f"{run_id}/{episode_id}"):
        rows = fetch_rows(conn, "SELECT * FROM episodes WHERE run_id = ? AND episode_id = ?", [run_id, candidate])
        if rows:
            return rows[0]
    return None
