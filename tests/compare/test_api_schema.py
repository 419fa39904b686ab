"""The API against its own OpenAPI schema: schemathesis generates requests for every operation, valid and invalid,
and every answer must be free of 5xx and be a status and body the schema documents (so the response models
describe the real documents). On the real run of conftest's `four_arm_run`: with any ids, and with the run's own
ids (so the figures are computed instead of stopping at "no run"); writes with and without the token.

(Schemathesis's pytest loaders need pytest < 9, so each operation's case strategy is driven by Hypothesis here.)"""

from __future__ import annotations

import pytest
import schemathesis
from hypothesis import HealthCheck, given, settings
from schemathesis import GenerationMode
from schemathesis.checks import not_a_server_error
from schemathesis.specs.openapi.checks import (
    content_type_conformance,
    response_schema_conformance,
    status_code_conformance,
)

from compare.api import create_app

TOKEN = "test-api-schema-token"
CHECKS = [not_a_server_error, status_code_conformance, content_type_conformance, response_schema_conformance]
EXAMPLES = 25
READS = ["/health", "/runs", "/runs/{run_id}", "/runs/{run_id}/summary", "/runs/{run_id}/compare",
         "/runs/{run_id}/episodes", "/runs/{run_id}/episodes/{episode_id}", "/runs/{run_id}/breakeven",
         "/runs/{run_id}/decision", "/runs/{run_id}/plan", "/prices"]
WRITE = "/runs/{run_id}/scenarios"
QUERIED = ["/runs/{run_id}/summary", "/runs/{run_id}/compare", "/runs/{run_id}/episodes", "/runs/{run_id}/breakeven"]


@pytest.fixture(scope="module")
def api_schema(four_arm_run):
    db, _ = four_arm_run
    return schemathesis.openapi.from_asgi("/openapi.json", create_app(db))  # no token: writes answer 403


@pytest.fixture(scope="module")
def api_schema_with_token(four_arm_run):
    db, _ = four_arm_run
    return schemathesis.openapi.from_asgi("/openapi.json", create_app(db, api_token=TOKEN))


def run_ids(path: str, four_arm_run) -> dict[str, str]:
    """The run's own id for the path's {run_id}, and one of its episodes for {episode_id}."""
    _, run_id = four_arm_run
    ids = {"run_id": run_id, "episode_id": f"{run_id}/hosted/calc-b/s1/a1"}
    return {name: value for name, value in ids.items() if "{" + name + "}" in path}


def check_every_case(operation, mode: GenerationMode, *, path_parameters=None, headers=None) -> None:
    strategy = operation.as_strategy(mode, path_parameters=path_parameters or None, headers=headers)

    @settings(max_examples=EXAMPLES, deadline=None, suppress_health_check=list(HealthCheck), derandomize=True,
              database=None)
    @given(case=strategy)
    def check(case) -> None:
        case.call_and_validate(checks=CHECKS)

    check()


def test_the_schema_lists_every_operation(api_schema):
    listed = {(operation.method.upper(), operation.path) for operation in
              (result.ok() for result in api_schema.get_all_operations())}
    assert listed == {("GET", path) for path in READS} | {("POST", WRITE)}


@pytest.mark.parametrize("path", [*READS, WRITE])
def test_any_input_is_answered_without_a_server_error(api_schema, path):
    operation = api_schema[path]["POST" if path == WRITE else "GET"]
    check_every_case(operation, GenerationMode.POSITIVE)


@pytest.mark.parametrize("path", [p for p in READS if "{run_id}" in p])
def test_any_query_about_the_real_run_is_answered_without_a_server_error(api_schema, four_arm_run, path):
    check_every_case(api_schema[path]["GET"], GenerationMode.POSITIVE, path_parameters=run_ids(path, four_arm_run))


@pytest.mark.parametrize("path", QUERIED)  # the other operations have only path parameters, pinned here
def test_invalid_queries_about_the_real_run_are_refused_without_a_server_error(api_schema, four_arm_run, path):
    check_every_case(api_schema[path]["GET"], GenerationMode.NEGATIVE, path_parameters=run_ids(path, four_arm_run))


@pytest.mark.parametrize("mode", [GenerationMode.POSITIVE, GenerationMode.NEGATIVE])
def test_any_price_sheet_is_answered_without_a_server_error(api_schema_with_token, four_arm_run, mode):
    check_every_case(api_schema_with_token[WRITE]["POST"], mode, path_parameters=run_ids(WRITE, four_arm_run),
                     headers={"Authorization": f"Bearer {TOKEN}"})
