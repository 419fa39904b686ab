"""The arm table's registry (compare.arm_table): every column is a documented field of an arm's summary entry, and
the CLI table, the report (HTML and Markdown) and the web page show what the registry lists, so a figure added to
it appears everywhere at once."""

from __future__ import annotations

import re

import pytest

from compare import arm_table
from compare.arm_table import ARM_COLUMNS, CLI_COLUMNS, CLI_WIDE_COLUMNS, Column, arm_cells, columns
from compare.cli_results import _print_summary
from reports.report import _html_table, render_markdown
from reports.web import _arm_table


def arm(**changes) -> dict:
    """An arm entry shaped like `leafcost summary`'s (the fields the table reads)."""
    entry = {"arm": "hosted", "kind": "hosted", "model": "gpt-x", "status": "finished", "tasks": 3, "seeds": 2,
             "attempts": 6, "attempts_including_retries": 7, "resolved_attempts": 4, "resolved_tasks": 2,
             "avg_at_k": {"value": 2 / 3, "ci95": [1 / 3, 1.0]},
             "cost_per_resolved_attempt": {"value": 0.0125, "ci95": None, "reason": "unbounded"},
             "cost_per_resolved_task": {"value": None, "ci95": None, "reason": "no task resolved"},
             "cost_usd": {"total": 0.05, "tokens": 0.049, "gpu": 0.0, "sandbox": 0.001}, "utilization": None,
             "harness_error_rate": 0.0, "infra_error_rate": 1 / 6, "price_source": "explicit", "unpriced_calls": 0}
    return entry | changes


class _Provenance:
    def lines(self) -> list[str]:
        return []


def headers_of(html: str) -> list[str]:
    return re.findall(r"<th[^>]*>([^<]*)</th>", html)


def test_every_column_is_a_documented_field_with_a_unique_key():
    assert len({c.key for c in ARM_COLUMNS}) == len(ARM_COLUMNS)
    for column in ARM_COLUMNS:
        assert column.description, column.key  # KeyError when the path names no documented field
    for cli in (CLI_COLUMNS, CLI_WIDE_COLUMNS):
        shown = [key for entry in cli for key in ((entry,) if isinstance(entry, str) else entry)]
        assert set(shown) <= {c.key for c in ARM_COLUMNS}
    assert set(CLI_COLUMNS) <= set(CLI_WIDE_COLUMNS)  # --wide adds columns, never takes one away
    with pytest.raises(KeyError, match="no documented field 'cost_usd.nope'"):
        Column("nope", "nope", "cost_usd.nope", "usd").description


def test_cells_format_each_figure_and_keep_its_number():
    cells = {c.key: c for c in arm_cells(arm())}
    assert cells["tasks_seeds"].text == "3×2" and cells["tasks_seeds"].value == 3
    assert cells["resolved_attempts"].text == "4/6"
    assert cells["avg_at_k"].full_text == "66.7% [33.3%, 100.0%]" and cells["avg_at_k"].ci == [1 / 3, 1.0]
    assert cells["cost_per_resolved_attempt"].full_text == "$0.0125 [no CI]"
    missing = cells["cost_per_resolved_task"]
    assert (missing.text, missing.value, missing.reason) == ("n/a", None, "no task resolved")
    assert cells["infra_error_rate"].text == "16.7%" and cells["utilization"].text == "n/a"
    assert [c.key for c in arm_cells(arm(), ("kind", "arm"))] == ["arm", "kind"]  # the registry's order


def test_every_renderer_shows_the_registrys_columns(capsys, monkeypatch):
    labels = [c.label for c in ARM_COLUMNS]
    assert headers_of(_html_table([arm()])) == labels
    assert headers_of(_arm_table({"arms": [arm()]})) == labels
    markdown = render_markdown({"run_id": "r", "run_status": "finished", "arms": [arm()]}, [], _Provenance(), [])
    assert "| " + " | ".join(labels) + " |" in markdown
    monkeypatch.setenv("COLUMNS", "250")
    _print_summary({"run_id": "r", "arms": [arm()]}, wide=True)
    printed = capsys.readouterr().out
    assert "$0.0490" in printed and "$0.00100" in printed and "lease /" in printed  # tokens / lease / sandbox
    assert "gpt-x" not in printed  # the model is not among the CLI's columns
    _print_summary({"run_id": "r", "arms": [arm()]})
    printed = capsys.readouterr().out
    assert "$0.0125" in printed and "$0.0490" not in printed  # by default: no cost split
    assert "[no CI]" in printed  # an interval's text, not a Rich style (which printed nothing)
    assert "hosted: of its final attempts, 16.7% infra errors" in printed  # no column for it: a note


def test_a_column_added_to_the_registry_appears_in_every_renderer(monkeypatch, capsys):
    retries = Column("retries", "RETRIES", "attempts_including_retries", "count")
    monkeypatch.setattr(arm_table, "ARM_COLUMNS", (*ARM_COLUMNS, retries))
    monkeypatch.setattr(arm_table, "CLI_COLUMNS", (*CLI_COLUMNS, "retries"))
    monkeypatch.setenv("COLUMNS", "250")
    assert columns()[-1] is retries
    html = _html_table([arm()])
    assert headers_of(html)[-1] == "RETRIES" and 'data-key="retries" data-value="7"' in html
    web = _arm_table({"arms": [arm()]})
    assert headers_of(web)[-1] == "RETRIES" and 'data-key=retries data-value="7"' in web
    markdown = render_markdown({"run_id": "r", "run_status": "finished", "arms": [arm()]}, [], _Provenance(), [])
    assert "| RETRIES |" in markdown and markdown.count("---:|") == sum(c.numeric for c in columns())
    _print_summary({"run_id": "r", "arms": [arm()]})
    assert "RETRIES" in capsys.readouterr().out
