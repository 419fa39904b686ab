"""The figure documents (compare.documents): one definition per field, checked where the documents are built and
against docs/figures.md, so a figure added in one place and not the other fails here."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from pydantic import Field, ValidationError

from compare.breakeven import breakeven, breakeven_document
from compare.documents import (
    DOCUMENTS,
    ArmSummary,
    Breakeven,
    SummaryDocument,
    _Document,
    conforming,
    field_paths,
    models,
    reference_markdown,
    undocumented,
)

FIGURES_MD = Path(__file__).resolve().parents[2] / "docs" / "figures.md"
REFERENCE = re.compile(r"<!-- field reference: generated.*?-->\n\n(.*?)\n<!-- end of the field reference -->", re.S)


def self_hosted() -> dict:
    return {"arm": "frognano", "kind": "self-hosted", "attempts": 100, "resolved_attempts": 50,
            "cost_usd": {"sandbox": 1.0}, "utilization": 0.5,
            "lease": {"count": 1, "usd_per_hour": 3.5, "busy_seconds": 36_000.0}}


def hosted() -> dict:
    return {"arm": "gpt", "kind": "hosted", "cost_per_resolved_attempt": {"value": 0.5, "ci95": None}}


def test_every_field_of_every_document_says_what_it_means():
    for model in DOCUMENTS:
        assert undocumented(model) == [], model.__name__


def test_a_field_without_a_description_is_found():
    class Figures(_Document):
        documented: int = Field(description="a figure with its meaning")
        bare: float

    class Outer(_Document):
        inner: list[Figures] = Field(description="figures nested in a list")

    assert undocumented(Outer) == ["inner.bare"]


def test_a_key_the_builder_adds_without_a_model_fails_at_once():
    built = breakeven(self_hosted(), hosted())
    assert conforming(Breakeven, built) is built  # the document itself comes back, not a re-serialisation
    with pytest.raises(ValidationError, match="new_figure"):
        conforming(Breakeven, {**built, "new_figure": 1.0})
    missing = dict(built)
    del missing["grid"]
    with pytest.raises(ValidationError, match="grid"):
        conforming(Breakeven, missing)
    assert breakeven_document("run-1", self_hosted(), hosted())["run_id"] == "run-1"


def test_the_summary_builder_is_checked_on_the_way_out(four_arm_run):
    """A real run's summary validates (the builder checks it), and the same document with one key more does not."""
    from compare.ledger import connect_read_only
    from compare.summary import summarize

    db, run_id = four_arm_run
    with connect_read_only(db) as conn:
        document = summarize(conn, run_id, resamples=200)
    arm = document["arms"][0]
    paths = {path for path, _ in field_paths(ArmSummary)}
    assert set(arm) <= paths and set(arm["cost_usd"]) <= {p.removeprefix("cost_usd.") for p in paths}
    with pytest.raises(ValidationError, match="extra_cost"):
        conforming(SummaryDocument, {**document, "arms": [{**arm, "extra_cost": 0.0}]})


def test_figures_md_holds_the_generated_field_reference():
    """Every field, its type and meaning as the models say; regenerate with `python -m compare.documents`."""
    found = REFERENCE.search(FIGURES_MD.read_text(encoding="utf-8"))
    assert found, "docs/figures.md has no generated field reference"
    assert found.group(1) == reference_markdown()


def test_every_figure_the_prose_names_is_a_field():
    """The bold names of "The figures, one sentence each" (`**cost_usd.gpu**`, `**tasks / seeds / attempts**`): an
    arm entry's dotted path, or a field of a document every estimate shares (`ci95`)."""
    text = FIGURES_MD.read_text(encoding="utf-8")
    prose = text.split("## The figures, one sentence each", 1)[1].split("\n## ", 1)[0]
    named = [name.strip() for bold in re.findall(r"\*\*(.+?)\*\*", prose) for name in bold.split(" / ")]
    paths = {path for path, _ in field_paths(ArmSummary)} | {name for model in models()
                                                               for name in model.model_fields}
    assert named and [name for name in named if re.sub(r"\[k\]$", "", name) not in paths] == []
