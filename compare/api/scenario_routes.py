"""The one write route: a what-if price sheet, repriced and stored as a named scenario."""

from __future__ import annotations

import asyncio

from fastapi import APIRouter, Depends, Query
from fastapi.responses import Response
from fastapi.security import HTTPAuthorizationCredentials, HTTPBearer

from compare.api.declarations import BUSY, NOT_FOUND, Resamples, Seed
from compare.api.errors import ApiError, invalid
from compare.api.figures import JSON, run_state, validated_spec
from compare.api.models import ErrorDetail
from compare.api.write_guard import API_TOKEN_ENV, WRITE_BODY_MAX_BYTES, token_refusal
from compare.documents import SummaryDocument
from compare.ledger import LedgerAccess, LedgerBusy, SecretInLedger
from compare.reprice import SCENARIO_NAME, PriceSheet
from compare.stats import DEFAULT_RESAMPLES, DEFAULT_SEED
from compare.summary import SummaryError, dumps


def scenario_routes(access: LedgerAccess, token: str | None) -> APIRouter:
    router = APIRouter(tags=["scenarios"])
    bearer = HTTPBearer(auto_error=False, description=f"the server's {API_TOKEN_ENV}")

    def authorized(credentials: HTTPAuthorizationCredentials | None = Depends(bearer)) -> None:
        # WriteGuard refused a wrong token already; checked again here so the route never relies on middleware
        header = f"{credentials.scheme} {credentials.credentials}" if credentials is not None else None
        refusal = token_refusal(token, header)
        if refusal is not None:
            raise refusal

    @router.post("/runs/{run_id}/scenarios", response_model=SummaryDocument, dependencies=[Depends(authorized)],
                 responses={**NOT_FOUND, **BUSY,
                            400: {"model": ErrorDetail, "description": "the body cannot be parsed (not UTF-8 JSON)"},
                            401: {"model": ErrorDetail, "description": "missing or wrong bearer token"},
                            403: {"model": ErrorDetail, "description": f"writes disabled: no {API_TOKEN_ENV}"},
                            409: {"model": ErrorDetail, "description": "the ledger is busy (a run writes it)"},
                            413: {"model": ErrorDetail,
                                  "description": f"the body is larger than {WRITE_BODY_MAX_BYTES:,} bytes"}},
                 summary="Reprice a run under another price sheet and store it as a named scenario")
    def create_scenario(run_id: str, sheet: PriceSheet,
                        name: str | None = Query(None, pattern=SCENARIO_NAME,
                                                 description="the scenario's name (default: the sheet's)"),
                        resamples: Resamples = DEFAULT_RESAMPLES, seed: Seed = DEFAULT_SEED) -> Response:
        from compare.reprice import overrides_for, sheet_summary
        from compare.summary import summarize

        scenario = name or sheet.name
        if scenario is None:
            raise invalid(["query", "name"], "name the scenario: `name` in the sheet or ?name=")
        try:
            with access.reading() as conn:
                spec = validated_spec(run_state(conn, run_id))
                try:
                    overrides = overrides_for(conn, run_id, spec, sheet, scenario)
                except SummaryError as exc:
                    raise invalid(["body"], str(exc)) from None
                document = summarize(conn, run_id, resamples=resamples, seed=seed, overrides=overrides)
            with access.writing() as ledger:
                asyncio.run(ledger.save_scenario(run_id, scenario, sheet_summary(sheet), document))
        except SecretInLedger as exc:
            raise invalid(["body"], str(exc)) from None
        except LedgerBusy as exc:
            raise ApiError(409, f"the ledger is busy: {exc}") from None
        return Response(content=dumps(document), media_type=JSON)

    return router
