"""`leafcost serve`: a ledger's API (compare.api) and its web page (reports.web) on uvicorn."""

from __future__ import annotations

import os
import threading
import time
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

    from compare.api import API_TOKEN_ENV
    from compare.ledger import LedgerAccess, LedgerError, default_db_path

    path = db or default_db_path()
    if not path.is_file():
        fail(f"{path}: no ledger here (run `leafcost run` first, or pass --db / set LEAFCOST_DB)", 2)
    try:  # refused now, in one line, rather than on every request of a server that started
        with LedgerAccess(path).reading():
            pass
    except LedgerError as exc:
        fail(str(exc), 2)
    token = os.environ.get(API_TOKEN_ENV) or None
    app = build_app(path, api_token=token)
    writes = "enabled (bearer token)" if token else f"disabled (set {API_TOKEN_ENV} to enable)"
    typer.echo(f"leafcost serve: {path} on http://{_url_host(host)}:{port} (API docs /docs); writes {writes}",
               err=True)
    if host not in LOOPBACK:
        typer.echo(f"leafcost serve: listening on {host}: anyone who reaches it can read this ledger", err=True)
    uvicorn.run(app, host=host, port=port, log_level="info")


serve = main  # the command's name on the `leafcost` app


def build_app(path: Path, *, api_token: str | None, access=None):
    """The API and, at /, the web page rendering the summaries the API caches (so both show the same numbers),
    both reading the ledger the same way (`access`: through a writing ledger for `leafcost run --serve`)."""
    from compare.api import create_app
    from compare.ledger import LedgerAccess
    from reports.web import web_router

    access = access or LedgerAccess(path)
    app = create_app(path, api_token=api_token, access=access)
    app.include_router(web_router(path, access=access, summaries=app.state.figures.summary_document))
    return app


class BackgroundServer:
    """The app on uvicorn in a thread of this process, beside a run that writes the ledger (DuckDB lets no other
    process read the file meanwhile)."""

    def __init__(self, app, host: str, port: int):
        import uvicorn

        self.url = f"http://{_url_host(host)}:{port}"
        self._server = uvicorn.Server(uvicorn.Config(app, host=host, port=port, log_level="warning"))
        self._thread = threading.Thread(target=self._server.run, name="leafcost-serve", daemon=True)

    def start(self, timeout_sec: float = 30.0) -> BackgroundServer:
        self._thread.start()
        deadline = time.monotonic() + timeout_sec
        while not self._server.started:
            if not self._thread.is_alive() or time.monotonic() > deadline:
                raise RuntimeError(f"the API server did not start on {self.url} (is the port taken?)")
            time.sleep(0.05)
        return self

    def stop(self) -> None:
        self._server.should_exit = True
        self._thread.join(timeout=10)


def _url_host(host: str) -> str:
    return f"[{host}]" if ":" in host else host
