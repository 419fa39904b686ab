"""Dollars are written by one rule (compare.arm_table.fmt_usd) on every surface: the terminal's tables and lines
(`leafcost summary`, `compare`, `breakeven`, the run table), the report and the web page show the same string for
the same number."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from fastapi.testclient import TestClient

from compare.arm_table import fmt_usd
from compare.serve import build_app

LEAFCOST = Path(sys.executable).with_name("leafcost")


@pytest.mark.parametrize("value, text", [
    (None, "n/a"), (0.0, "$0"), (0.000123, "$0.000123"), (0.00012349, "$0.000123"), (0.0125, "$0.0125"),
    (0.5, "$0.500"), (0.99949, "$0.999"), (0.9996, "$1.00"), (1, "$1.00"), (12.345, "$12.35"), (99.996, "$100"),
    (1234.5, "$1,234"), (1_234_567.8, "$1,234,568"), (-0.0125, "-$0.0125"), (-2500, "-$2,500"),
    (2.93e-06, "$0.00000293"), (float("nan"), "n/a"),
])
def test_the_rule(value, text):
    """Three significant digits below $1 (a call costs a fraction of a cent), cents from $1, whole dollars with
    thousands separators from $100; the band is the rounded amount's."""
    assert fmt_usd(value) == text


def test_a_difference_carries_its_sign():
    assert [fmt_usd(v, signed=True) for v in (0.000134, -0.000134, 0.0, 1500)] == [
        "+$0.000134", "-$0.000134", "$0", "+$1,500"]


def leafcost(*args: str) -> str:
    done = subprocess.run([str(LEAFCOST), *args], capture_output=True, text=True, timeout=300,
                          env={**os.environ, "COLUMNS": "200"})
    assert done.returncode == 0, done.stderr[-2000:]
    return done.stdout


def test_the_terminal_and_the_web_page_write_the_same_dollars(four_arm_run):
    db, run_id = four_arm_run
    client = TestClient(build_app(db, api_token=None))
    page = client.get(f"/run/{run_id}").text
    # the break-even grid: `leafcost breakeven` and the page, the same string for each number
    document = json.loads(leafcost("breakeven", run_id, "--self-hosted", "frognano", "--hosted", "hosted",
                                   "--db", str(db), "--json"))
    printed = leafcost("breakeven", run_id, "--self-hosted", "frognano", "--hosted", "hosted", "--db", str(db))
    for row in document["grid"]:
        cost = row["self_hosted_cost_per_resolved_attempt"]
        assert fmt_usd(cost) in printed and fmt_usd(cost) in page
    # the page's episode table: each hosted episode's token cost (972.5 µ$: sub-cent, three significant digits)
    episodes = client.get(f"/runs/{run_id}/episodes", params={"arm": "hosted"}).json()["episodes"]
    assert episodes and all(fmt_usd(e["cost_usd"]) in page for e in episodes)
    assert all(fmt_usd(e["cost_usd"]).startswith("$0.00097") for e in episodes)  # not $0.0010
    # a difference in `leafcost compare`: the sign before the dollar
    compared = json.loads(leafcost("compare", run_id, "--arms", "hosted,frognano", "--db", str(db), "--json"))
    difference = compared["cost_per_resolved_attempt_difference"]["value"]
    assert fmt_usd(difference, signed=True) in leafcost("compare", run_id, "--arms", "hosted,frognano",
                                                         "--db", str(db))
    # the arm table's cells (summary, report, page) by the same rule
    summary = json.loads(leafcost("summary", run_id, "--db", str(db), "--json"))
    total = {arm["arm"]: arm for arm in summary["arms"]}["hosted"]["cost_usd"]["total"]
    assert fmt_usd(total) in leafcost("summary", run_id, "--db", str(db)) and fmt_usd(total) in page
