"""`leafcost serve`: a ledger's API (compare.api) and its web page (reports.web) on uvicorn."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Annotated

import typer

from compare.cli_common import DbOption, fail

LOOPBACK = {"127.0.0.1", "localhost", "::1"}


def main(
    db: DbOption = None,
    host: Annotated[str, typer.Option("--host", help="the address to listen on (the API has no read "
                                                     "authentication: keep it on loopback unless that is wanted)")]
    = "127.0.0.1",
    port: Annotated[int, typer.Option("--port", min=1, max=65535, help="the TCP port")] = 8000,
) -> None:
    """Serve a ledger over HTTP: runs, episodes, model calls and every figure of `leafcost summary`, `compare`
    and `breakeven` as the same JSON (OpenAPI docs at /docs), and the web page at /. Storing a what-if
    scenario (POST) needs the bearer token in $LEAFCOST_API_TOKEN; without it writes are disabled."""
    import uvicorn

    from compare.api import API_TOKEN_ENV, create_app
    from compare.ledger import default_db_path

    path = db or default_db_path()
    if not path.is_file():
        fail(f"{path}: no ledger here (run `leafcost run` first, or pass --db / set LEAFCOST_DB)", 2)
    token = os.environ.get(API_TOKEN_ENV) or None
    app = create_app(path, api_token=token, extra_routers=_page_routers(path, lambda: app))
    writes = "enabled (bearer token)" if token else f"disabled (set {API_TOKEN_ENV} to enable)"
    typer.echo(f"leafcost serve: {path} on http://{_url_host(host)}:{port} (API docs /docs); writes {writes}",
               err=True)
    if host not in LOOPBACK:
        typer.echo(f"leafcost serve: listening on {host}: anyone who reaches it can read this ledger", err=True)
    uvicorn.run(app, host=host, port=port, log_level="info")


serve = main  # the command's name on the `leafcost` app


def _page_routers(path: Path, app):
    """The web page, rendering the summaries the API caches (so both show the same numbers)."""
    from reports.web import web_router

    return [web_router(path, summaries=lambda run_id: app().state.figures.summary_document(run_id))]


def _url_host(host: str) -> str:
    return f"[{host}]" if ":" in host else host
