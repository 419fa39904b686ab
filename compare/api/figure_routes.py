"""The figures over HTTP: a run's summary (or a stored scenario), a comparison of two arms, the break-even and the
price sheets, each served as the very bytes the CLI prints with `--json`."""

from __future__ import annotations

import json

from fastapi import APIRouter, Query
from fastapi.responses import Response

from compare.api.declarations import BUSY, NOT_FOUND, Resamples, Seed
from compare.api.errors import ApiError, invalid
from compare.api.figures import Figures, Outcome, ok, run_state, validated_spec
from compare.api.models import ArmPriceSheet, PricesDocument, UnfairDetail
from compare.decision_record import run_decision
from compare.documents import BreakevenDocument, CompareDocument, DecisionDocument, SummaryDocument
from compare.ledger import LedgerAccess
from compare.plan_record import RunPlanDocument, run_plan
from compare.stats import DEFAULT_RESAMPLES, DEFAULT_SEED
from compare.summary import dumps


def figure_routes(access: LedgerAccess, figures: Figures) -> APIRouter:
    router = APIRouter(tags=["figures"], responses={**BUSY, **NOT_FOUND})

    @router.get("/runs/{run_id}/summary", response_model=SummaryDocument,
                summary="Per arm: resolve rates and cost per resolved with 95 % CIs (`leafcost summary --json`)")
    def summary(run_id: str, resamples: Resamples = DEFAULT_RESAMPLES, seed: Seed = DEFAULT_SEED,
                scenario: str | None = Query(None, description="a stored what-if repricing instead (served as "
                                                               "stored: resamples and seed do not apply)"),
                strict_grading: bool | None = Query(None, description="count flagged attempts (a patch touching "
                                                    "the test harness) as not resolved; default: as the run was "
                                                    "started")) -> Response:
        if scenario is not None:
            return _stored_scenario(access, run_id, scenario).response()
        return figures.summary(run_id, resamples, seed, strict=strict_grading).response()

    @router.get("/runs/{run_id}/compare", response_model=CompareDocument,
                responses={409: {"model": UnfairDetail, "description": "the arms differ (tasks, seeds, "
                                 "temperature or sandbox) and allow_mismatch is false"}},
                summary="Two arms, paired on their shared tasks (`leafcost compare --json`)")
    def compare(run_id: str, arms: str = Query(..., description="two arm names, A,B (differences are A − B)"),
                allow_mismatch: bool = Query(False, description="compare arms that are not comparable"),
                resamples: Resamples = DEFAULT_RESAMPLES, seed: Seed = DEFAULT_SEED) -> Response:
        names = [a.strip() for a in arms.split(",") if a.strip()]
        if len(names) != 2:
            raise invalid(["query", "arms"], f"two arm names separated by a comma, got {arms!r}")
        if names[0] == names[1]:
            raise invalid(["query", "arms"], f"compare two different arms (got {names[0]!r} twice)")
        return figures.compare(run_id, names[0], names[1], allow_mismatch=allow_mismatch, resamples=resamples,
                               seed=seed).response()

    @router.get("/runs/{run_id}/breakeven", response_model=BreakevenDocument,
                summary="Where the self-hosted arm matches the hosted one (`leafcost breakeven --json`)")
    def breakeven(run_id: str, self_hosted: str = Query(..., description="the self-hosted arm"),
                  hosted: str = Query(..., description="the hosted arm"),
                  gpu_usd_per_hour: float | None = Query(None, gt=0, le=1e6, description="evaluate at this "
                                                         "price per GPU-hour (default: the lease's)"),
                  utilization: float | None = Query(None, ge=0.001, le=1.0, description="assumed utilization "
                                                    "(default: the measured one)")) -> Response:
        return figures.breakeven(run_id, self_hosted, hosted, gpu_usd_per_hour=gpu_usd_per_hour,
                                 utilization=utilization).response()

    @router.get("/runs/{run_id}/decision", response_model=DecisionDocument | None,
                summary="The run's decision question, its looks and verdict (the summary's `decision`); null for a "
                        "run without decide:")
    def decision(run_id: str) -> Response:
        with access.reading() as conn:  # never cached: two small reads, and a running decision changes
            run_state(conn, run_id)
            document = run_decision(conn, run_id)
        return Outcome(200, dumps(document).encode(), document).response()

    @router.get("/runs/{run_id}/plan", response_model=RunPlanDocument | None,
                summary="The plan recorded as the run started, each prediction against what the run did; null for a "
                        "run started without decide: or plan:")
    def plan(run_id: str) -> Response:
        def compute(conn, run) -> Outcome:  # cached as the summary is (a finished run's plan never changes)
            document = run_plan(conn, run_id)
            return Outcome(200, dumps(document).encode(), document)
        return figures.get(("plan", run_id), run_id, compute).response()

    @router.get("/prices", response_model=PricesDocument,
                summary="The price map revision, and with run_id the price sheet of each of its arms")
    def prices(run_id: str | None = Query(None, description="a run whose arms' prices to list")) -> PricesDocument:
        from compare.pricing import litellm_revision

        spec = None
        if run_id is not None:
            with access.reading() as conn:
                spec = validated_spec(run_state(conn, run_id))
        return PricesDocument(litellm=litellm_revision(), run_id=run_id,
                              sandbox_usd_per_vcpu_hour=spec.costs.sandbox_usd_per_vcpu_hour if spec else None,
                              arms=[_price_sheet(arm) for arm in spec.arms] if spec else [])

    return router


def _stored_scenario(access: LedgerAccess, run_id: str, scenario: str) -> Outcome:
    """A stored what-if, rendered as `leafcost summary --scenario NAME --json` prints it (never cached: a
    scenario can be replaced)."""
    with access.reading() as conn:
        run_state(conn, run_id)
        row = conn.execute("SELECT summary FROM scenarios WHERE run_id = ? AND name = ?", [run_id, scenario]
                           ).fetchone()
        if row is None:
            known = [r[0] for r in conn.execute("SELECT name FROM scenarios WHERE run_id = ? ORDER BY name",
                                                [run_id]).fetchall()]
            raise ApiError(404, f"run {run_id} has no scenario {scenario!r} (stored: {', '.join(known) or 'none'};"
                                " make one with POST /runs/{run_id}/scenarios or leafcost reprice)")
    return ok(json.loads(row[0]))


def _price_sheet(arm) -> ArmPriceSheet:
    return ArmPriceSheet(arm=arm.name, adapter=arm.adapter, model=arm.model, **arm.price_sheet())
