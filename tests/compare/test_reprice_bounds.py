"""What-if prices out of range (security review #15): `leafcost reprice` (the real command) and
`POST /runs/{id}/scenarios` refuse a price of 1e308, NaN, an infinity or a negative one by the field's name, with
exit 2 or HTTP 422, and store nothing; both go through the one price-sheet model (compare.reprice.PriceSheet)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import duckdb
import pytest
from fastapi.testclient import TestClient

from compare.api import create_app

LEAFCOST = Path(sys.executable).with_name("leafcost")
TOKEN = "test-reprice-bounds-token"

# (sheet as YAML, the field the refusal must name)
BAD_SHEETS = [
    ("arms: {frognano: {usd_per_hour: 1e308}}", "arms.frognano.usd_per_hour"),
    ("arms: {frognano: {usd_per_hour: 1.0e+308}}", "arms.frognano.usd_per_hour"),
    ("arms: {frognano: {usd_per_hour: .inf}}", "arms.frognano.usd_per_hour"),
    ("arms: {frognano: {usd_per_hour: .nan}}", "arms.frognano.usd_per_hour"),
    ("arms: {frognano: {usd_per_hour: -1.5}}", "arms.frognano.usd_per_hour"),
    ("sandbox_usd_per_vcpu_hour: 1.0e+308\narms: {}", "sandbox_usd_per_vcpu_hour"),
    ("sandbox_usd_per_vcpu_hour: .inf\narms: {}", "sandbox_usd_per_vcpu_hour"),
    ("sandbox_usd_per_vcpu_hour: -0.01\narms: {}", "sandbox_usd_per_vcpu_hour"),
    ("arms: {hosted: {prices: {input: .nan, output: 10.0}}}", "arms.hosted.prices.input"),
    ("arms: {hosted: {prices: {input: 1.0, output: 1.0e+308}}}", "arms.hosted.prices.output"),
    ("arms: {hosted: {prices: {input: 1.0, output: -.inf}}}", "arms.hosted.prices.output"),
]

# (raw JSON body, as a client may send it, and the location the 422 must name)
BAD_BODIES = [
    ('{"name":"huge","arms":{"frognano":{"usd_per_hour":1e308}},"sandbox_usd_per_vcpu_hour":1e308}',
     ["body", "arms", "frognano", "usd_per_hour"]),
    ('{"name":"huge","arms":{},"sandbox_usd_per_vcpu_hour":1e308}', ["body", "sandbox_usd_per_vcpu_hour"]),
    ('{"name":"nan","arms":{"frognano":{"usd_per_hour":NaN}}}', ["body", "arms", "frognano", "usd_per_hour"]),
    ('{"name":"inf","sandbox_usd_per_vcpu_hour":Infinity,"arms":{}}', ["body", "sandbox_usd_per_vcpu_hour"]),
    ('{"name":"ninf","sandbox_usd_per_vcpu_hour":-Infinity,"arms":{}}', ["body", "sandbox_usd_per_vcpu_hour"]),
    ('{"name":"over","arms":{"frognano":{"usd_per_hour":1e400}}}', ["body", "arms", "frognano", "usd_per_hour"]),
    ('{"name":"neg","arms":{"frognano":{"usd_per_hour":-3}}}', ["body", "arms", "frognano", "usd_per_hour"]),
    ('{"name":"p","arms":{"hosted":{"prices":{"input":NaN,"output":1}}}}',
     ["body", "arms", "hosted", "prices", "input"]),
    ('{"name":"p","arms":{"hosted":{"prices":{"input":1,"output":1e308}}}}',
     ["body", "arms", "hosted", "prices", "output"]),
]


def scenarios(db: Path, run_id: str) -> list[str]:
    with duckdb.connect(str(db), read_only=True) as conn:
        return [r[0] for r in conn.execute("SELECT name FROM scenarios WHERE run_id = ? ORDER BY name",
                                           [run_id]).fetchall()]


def strict_json(text: str):
    """JSON as the standard defines it: NaN and Infinity are not numbers there."""
    def refuse(constant: str):
        raise AssertionError(f"the body holds {constant}, which is not JSON")
    return json.loads(text, parse_constant=refuse)


@pytest.mark.parametrize(("sheet", "field"), BAD_SHEETS)
def test_reprice_refuses_an_impossible_price_in_one_line_naming_the_field(four_arm_run, tmp_path, sheet, field):
    db, run_id = four_arm_run
    before = scenarios(db, run_id)
    path = tmp_path / "sheet.yaml"
    path.write_text(f"name: bounds-cli\n{sheet}\n")
    result = subprocess.run([str(LEAFCOST), "reprice", run_id, "--prices", str(path), "--db", str(db), "--json"],
                            capture_output=True, text=True, timeout=120)
    assert result.returncode == 2, result.stderr[-2000:]
    assert "Traceback" not in result.stderr and result.stdout == ""
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("leafcost: "), result.stderr
    assert f"{field}:" in lines[0], lines[0]
    assert scenarios(db, run_id) == before  # nothing stored


def test_reprice_refuses_a_name_no_scenario_can_have(four_arm_run, tmp_path):
    db, run_id = four_arm_run
    path = tmp_path / "sheet.yaml"
    path.write_text("arms: {frognano: {usd_per_hour: 2.0}}\n")
    result = subprocess.run([str(LEAFCOST), "reprice", run_id, "--prices", str(path), "--db", str(db),
                             "--name", "../x y"], capture_output=True, text=True, timeout=120)
    assert result.returncode == 2 and "scenario name '../x y'" in result.stderr
    assert "../x y" not in scenarios(db, run_id)


@pytest.fixture(scope="module")
def client(four_arm_run):
    db, _ = four_arm_run
    # raise_server_exceptions=False: a 500 is answered as the server would, so it fails the status assertion
    return TestClient(create_app(db, api_token=TOKEN), raise_server_exceptions=False)


@pytest.mark.parametrize(("body", "loc"), BAD_BODIES)
def test_scenario_with_an_impossible_price_is_a_422_naming_the_field(client, four_arm_run, body, loc):
    db, run_id = four_arm_run
    before = scenarios(db, run_id)
    answer = client.post(f"/runs/{run_id}/scenarios", content=body,
                         headers={"Authorization": f"Bearer {TOKEN}", "Content-Type": "application/json"})
    assert answer.status_code == 422, answer.text
    detail = strict_json(answer.text)["detail"]
    assert loc in [error["loc"] for error in detail], detail
    assert scenarios(db, run_id) == before


def test_the_422_spells_out_the_non_finite_input_it_refused(client, four_arm_run):
    _, run_id = four_arm_run
    answer = client.post(f"/runs/{run_id}/scenarios", content='{"name":"n","sandbox_usd_per_vcpu_hour":NaN}',
                         headers={"Authorization": f"Bearer {TOKEN}", "Content-Type": "application/json"})
    error = strict_json(answer.text)["detail"][0]
    assert error["input"] == "nan" and "finite" in error["msg"]


def test_prices_at_the_bound_are_accepted(client, four_arm_run):
    """The bound refuses what cannot be a price, not dear ones: the run spec's maxima are accepted."""
    from compare.spec import MAX_USD_PER_HOUR, MAX_USD_PER_MTOK, MAX_USD_PER_VCPU_HOUR

    db, run_id = four_arm_run
    sheet = {"name": "bounds-max", "sandbox_usd_per_vcpu_hour": MAX_USD_PER_VCPU_HOUR,
             "arms": {"frognano": {"usd_per_hour": MAX_USD_PER_HOUR},
                      "hosted": {"prices": {"input": MAX_USD_PER_MTOK, "output": MAX_USD_PER_MTOK}}}}
    answer = client.post(f"/runs/{run_id}/scenarios", json=sheet, headers={"Authorization": f"Bearer {TOKEN}"})
    assert answer.status_code == 200, answer.text
    total = {a["arm"]: a["cost_usd"]["total"] for a in strict_json(answer.text)["arms"]}
    assert total["frognano"] > 0 and total["hosted"] > 0
    assert "bounds-max" in scenarios(db, run_id)
