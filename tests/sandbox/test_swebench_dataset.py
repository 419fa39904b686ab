"""Exporting a SWE-bench dataset as the rows leafcost loads: a parquet file in SWE-bench Verified's column layout
read through `datasets` (offline), the same rows as JSON Lines and JSON, a downloaded folder's splits, and each bad
input refused in one line with no file left behind."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from sandbox import load_suite
from sandbox.swebench_dataset import (DatasetExportError, export_swebench_dataset, instance_ids_digest,
                                      locate_dataset, source_path)

FIXTURE = Path(__file__).parents[1] / "fixtures" / "swebench" / "instances.jsonl"
# SWE-bench Verified's columns in its order, FAIL_TO_PASS/PASS_TO_PASS as JSON text, then the evaluation columns
# swebench 5.0 added to every row.
VERIFIED_COLUMNS = ("repo", "instance_id", "base_commit", "patch", "test_patch", "problem_statement", "hints_text",
                    "created_at", "version", "FAIL_TO_PASS", "PASS_TO_PASS", "environment_setup_commit", "difficulty")
SWEBENCH5_COLUMNS = ("image", "eval_script", "log_parser", "eval_type")


@pytest.fixture(autouse=True)
def offline(monkeypatch, tmp_path):
    """No network, and Hugging Face's cache in the test's folder (for a first import of `datasets` here)."""
    monkeypatch.setenv("HF_HOME", str(tmp_path / "hf"))
    monkeypatch.setenv("HF_DATASETS_OFFLINE", "1")
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")


def verified_rows() -> list[dict]:
    """The fixture instances with every column of SWE-bench Verified, in its order and types."""
    rows = [json.loads(line) for line in FIXTURE.read_text().splitlines()]
    for row in rows:
        row["difficulty"] = "<15 min fix"
        assert isinstance(row["FAIL_TO_PASS"], str) and isinstance(row["PASS_TO_PASS"], str)
    return [{column: row[column] for column in VERIFIED_COLUMNS + SWEBENCH5_COLUMNS} for row in rows]


def write_parquet(path: Path, rows: list[dict]) -> Path:
    columns = list(rows[0])
    schema = pa.schema([(column, pa.string()) for column in columns])
    pq.write_table(pa.Table.from_pylist(rows, schema=schema), path)
    return path


def lines(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text().splitlines()]


def test_a_verified_layout_parquet_exports_every_row_as_stored_and_loads_as_tasks(tmp_path):
    import datasets

    rows = verified_rows()
    parquet = write_parquet(tmp_path / "verified.parquet", rows)
    out = tmp_path / "out" / "verified.jsonl"

    result = export_swebench_dataset(str(parquet), out)

    assert lines(out) == rows  # every column, in order, values as the dataset stores them (lists as JSON text)
    assert list(lines(out)[0]) == list(VERIFIED_COLUMNS + SWEBENCH5_COLUMNS)
    source = json.loads(source_path(out).read_text())
    assert source_path(out) == tmp_path / "out" / "verified.source.json" and result.source_file == str(source_path(out))
    assert source == result.source.model_dump()
    assert source["kind"] == "parquet" and source["split"] is None and source["commit"] is None
    assert source["files"] == [{"path": str(parquet), "sha256": hashlib.sha256(parquet.read_bytes()).hexdigest()}]
    assert source["rows"] == 4 and source["datasets_version"] == datasets.__version__
    ids = [row["instance_id"] for row in rows]
    assert source["instance_ids_sha256"] == hashlib.sha256("".join(f"{i}\n" for i in sorted(ids)).encode()).hexdigest()
    assert source["rows_sha256"] == hashlib.sha256(out.read_bytes()).hexdigest()
    assert result.refused == []

    suite = load_suite(str(out), cache_dir=tmp_path / "cache")
    assert suite.errors == [] and [task.task_id for task in suite.tasks] == ids
    first = suite.tasks[0].swebench
    assert first.fail_to_pass == json.loads(rows[0]["FAIL_TO_PASS"]) and first.log_parser == rows[0]["log_parser"]


def test_the_same_rows_as_json_lines_json_and_parquet_export_to_the_same_bytes(tmp_path):
    rows = verified_rows()
    jsonl = tmp_path / "rows.jsonl"
    jsonl.write_text("".join(json.dumps(row) + "\n" for row in rows))
    whole = tmp_path / "rows.json"
    whole.write_text(json.dumps(rows, indent=1))
    parquet = write_parquet(tmp_path / "rows.parquet", rows)

    exported = [export_swebench_dataset(str(path), tmp_path / f"from-{path.suffix[1:]}.jsonl").source
                for path in (jsonl, whole, parquet)]

    assert len({source.rows_sha256 for source in exported}) == 1
    assert {source.instance_ids_sha256 for source in exported} == {instance_ids_digest(r["instance_id"] for r in rows)}
    assert [source.kind for source in exported] == ["jsonl", "json", "parquet"]
    assert [source.datasets_version is None for source in exported] == [True, True, False]


def test_list_typed_test_columns_are_written_as_json_lists_the_loader_reads(tmp_path):
    rows = verified_rows()
    for row in rows:
        row["FAIL_TO_PASS"], row["PASS_TO_PASS"] = json.loads(row["FAIL_TO_PASS"]), json.loads(row["PASS_TO_PASS"])
    parquet = tmp_path / "lists.parquet"
    pq.write_table(pa.Table.from_pylist(rows), parquet)
    out = tmp_path / "lists.jsonl"

    export_swebench_dataset(str(parquet), out)

    assert [row["FAIL_TO_PASS"] for row in lines(out)] == [row["FAIL_TO_PASS"] for row in rows]
    assert load_suite(str(out), cache_dir=tmp_path / "cache").errors == []


# A Hugging Face dataset repository's card names its splits' files (SWE-bench Lite's has dev and test).
CARD = """---
configs:
- config_name: default
  data_files:
  - split: dev
    path: data/dev-*
  - split: test
    path: data/test-*
---
"""


@pytest.mark.parametrize("layout", ["test.parquet", "data/test-00000-of-00001.parquet"])
def test_a_downloaded_folder_is_read_by_split(tmp_path, layout):
    """swebench's `dataset build` writes <split>.parquet; a Hugging Face dataset repository keeps data/<split>-*."""
    rows = verified_rows()
    folder = tmp_path / "SWE-bench_Verified"
    (folder / layout).parent.mkdir(parents=True)
    write_parquet(folder / layout, rows[:3])
    write_parquet(folder / layout.replace("test", "dev"), rows[3:])
    if layout.startswith("data/"):
        (folder / "README.md").write_text(CARD)

    test = export_swebench_dataset(str(folder), tmp_path / "test.jsonl")
    dev = export_swebench_dataset(str(folder), tmp_path / "dev.jsonl", split="dev")

    assert (test.source.kind, test.source.split, test.source.rows) == ("folder", "test", 3)
    assert lines(tmp_path / "dev.jsonl") == rows[3:] and dev.source.split == "dev"
    assert [Path(f.path).relative_to(folder).as_posix() for f in test.source.files] == [layout]
    with pytest.raises(DatasetExportError) as refused:
        export_swebench_dataset(str(folder), tmp_path / "x.jsonl", split="train")
    assert str(refused.value) == f"--split train: {folder} has no such split (it has dev, test)"


def test_a_row_the_loader_would_refuse_is_exported_and_named(tmp_path):
    rows = verified_rows()
    rows[1]["log_parser"] = "parse_log_nonsense"
    jsonl = tmp_path / "rows.jsonl"
    jsonl.write_text("".join(json.dumps(row) + "\n" for row in rows))

    result = export_swebench_dataset(str(jsonl), tmp_path / "out.jsonl")

    assert result.source.rows == 4
    assert [(row.instance_id, row.error.split(":")[0]) for row in result.refused] == [(rows[1]["instance_id"],
                                                                                         "log_parser")]


def test_aliases_and_hugging_face_names_are_located_as_swebench_names_them():
    verified = locate_dataset("Verified")
    assert (verified.kind, verified.name, verified.split, verified.revision) == (
        "hub", "SWE-bench/SWE-bench_Verified", "test", None)
    assert locate_dataset("lite", split="dev").name == "SWE-bench/SWE-bench_Lite"
    assert locate_dataset("full").name == "SWE-bench/SWE-bench"
    named = locate_dataset("princeton-nlp/SWE-bench_Verified", revision="abc123")
    assert (named.name, named.revision) == ("princeton-nlp/SWE-bench_Verified", "abc123")


# --- bad input: one line, nothing written --------------------------------------------------------------------


def refused(dataset: str, out: Path, **options) -> str:
    """The one-line message, checked to leave no file beside `out` that was not there before."""
    before = listing(out.parent)
    with pytest.raises(DatasetExportError) as error:
        export_swebench_dataset(dataset, out, **options)
    message = str(error.value)
    assert "\n" not in message and listing(out.parent) == before
    return message


def listing(folder: Path) -> list[Path]:
    return sorted(folder.iterdir()) if folder.exists() else []


def test_rows_from_before_swebench_5_name_the_missing_columns(tmp_path):
    old = [{column: row[column] for column in VERIFIED_COLUMNS} for row in verified_rows()]
    parquet = write_parquet(tmp_path / "old.parquet", old)
    out = tmp_path / "out" / "verified.jsonl"
    out.parent.mkdir()
    out.write_text("the previous export\n")

    message = refused(str(parquet), out)

    assert message.startswith(f"{parquet}: no column image, eval_script, log_parser, eval_type, which leafcost's "
                              "loader needs; these rows are in SWE-bench's layout from before swebench 5.0")
    assert out.read_text() == "the previous export\n" and not source_path(out).exists()


def test_a_missing_core_column_is_named(tmp_path):
    rows = [{k: v for k, v in row.items() if k not in ("patch", "FAIL_TO_PASS")} for row in verified_rows()]
    jsonl = tmp_path / "rows.jsonl"
    jsonl.write_text("".join(json.dumps(row) + "\n" for row in rows))
    assert refused(str(jsonl), tmp_path / "out" / "rows.jsonl") == (f"{jsonl}: no column patch, FAIL_TO_PASS, which "
                                                           "leafcost's loader needs")


def test_duplicate_instance_ids_are_named_and_nothing_is_written(tmp_path):
    rows = verified_rows()
    rows.append(dict(rows[2]))
    parquet = write_parquet(tmp_path / "dup.parquet", rows)
    assert refused(str(parquet), tmp_path / "out" / "dup.jsonl") == (
        f"1 instance id(s) appear more than once: {rows[2]['instance_id']}; a dataset names each instance once")


@pytest.mark.parametrize(("name", "options", "expected"), [
    ("rows.csv", {}, "rows.csv: unknown file type '.csv': export a .parquet, .jsonl or .json file, a dataset "
     "folder, or a Hugging Face dataset"),
    ("gone.parquet", {}, "gone.parquet: no such file"),
    ("not a name", {}, "not a name: not a file, a folder, an alias (full, verified, lite, multilingual, "
     "multimodal) or a Hugging Face name (OWNER/NAME)"),
    ("rows.jsonl", {"split": "dev"}, "--split dev: rows.jsonl is one split already (--split picks a split of a "
     "Hugging Face dataset or a dataset folder)"),
    ("rows.jsonl", {"revision": "v1"}, "--revision v1: a revision picks a Hugging Face commit; rows.jsonl is a "
     "local copy (drop --revision)"),
])
def test_bad_names_and_options_are_one_line(tmp_path, monkeypatch, name, options, expected):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "rows.csv").write_text("instance_id\nx\n")
    (tmp_path / "rows.jsonl").write_text(FIXTURE.read_text())
    assert refused(name, tmp_path / "out" / "rows.jsonl", **options) == expected


def test_out_must_be_json_lines(tmp_path):
    (tmp_path / "rows.jsonl").write_text(FIXTURE.read_text())
    assert refused(str(tmp_path / "rows.jsonl"), tmp_path / "out" / "rows.json") == (
        f"--out {tmp_path / 'out' / 'rows.json'}: must end in .jsonl (leafcost loads SWE-bench rows from .jsonl)")


def test_a_broken_json_line_is_named(tmp_path):
    jsonl = tmp_path / "rows.jsonl"
    jsonl.write_text(FIXTURE.read_text().splitlines()[0] + "\n{not json\n")
    assert refused(str(jsonl), tmp_path / "out" / "rows.jsonl").startswith(f"{jsonl} line 2: not valid JSON: ")
