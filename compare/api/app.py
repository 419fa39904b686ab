"""The FastAPI app of one ledger: its routes, error handlers and write guard (binds nothing: `leafcost serve`
runs it on uvicorn)."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from fastapi import APIRouter, FastAPI

from compare.api.declarations import leafcost_version
from compare.api.errors import install_error_handlers
from compare.api.figure_routes import figure_routes
from compare.api.figures import Figures
from compare.api.ledger_routes import ledger_routes
from compare.api.scenario_routes import scenario_routes
from compare.api.write_guard import WriteGuard
from compare.ledger import LedgerAccess


def create_app(db_path: Path | str, *, api_token: str | None = None,
               extra_routers: Sequence[APIRouter] = (), access: LedgerAccess | None = None) -> FastAPI:
    """The API of the ledger at `db_path` (binds nothing: `leafcost serve` runs it on uvicorn). Writes need
    `Authorization: Bearer <api_token>`; without a token they are disabled. An outdated ledger is upgraded here
    once unless a run holds it. `app.state.figures` is the figure cache (extra routers may render from it), and
    `app.state.access` how the ledger is read (`access`: an InProcessLedgerAccess while this process writes it)."""
    access = access or LedgerAccess(Path(db_path))
    access.upgrade_if_outdated()
    figures = Figures(access)
    app = FastAPI(title="leafcost", version=leafcost_version(),
                  summary="Cost per resolved coding task: a ledger's runs, episodes and figures",
                  # One schema per model: the documents omit optional keys, so defaults must stay optional.
                  separate_input_output_schemas=False)
    app.state.figures = figures
    app.state.access = access
    install_error_handlers(app)
    app.include_router(ledger_routes(access))
    app.include_router(figure_routes(access, figures))
    app.include_router(scenario_routes(access, api_token or None))
    app.add_middleware(WriteGuard, token=api_token or None)
    for router in extra_routers:
        app.include_router(router)
    return app
