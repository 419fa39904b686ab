"""`leafcost swebench export` as a person runs it: the real console script, offline, with Hugging Face's cache in
the test's folder; a parquet file in SWE-bench Verified's column layout becomes rows `leafcost` loads, and every bad
input is one `leafcost:` line, exit 2, with no output file left behind."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from sandbox.swebench_grading import eval_type_names

LEAFCOST = Path(sys.executable).with_name("leafcost")
FIXTURE = Path(__file__).parents[1] / "fixtures" / "swebench" / "instances.jsonl"
VERIFIED_COLUMNS = ("repo", "instance_id", "base_commit", "patch", "test_patch", "problem_statement", "hints_text",
                    "created_at", "version", "FAIL_TO_PASS", "PASS_TO_PASS", "environment_setup_commit", "difficulty",
                    "image", "eval_script", "log_parser", "eval_type")
# Started before leafcost by Python's `site`: `import datasets` fails as it does where the library is not installed.
NO_DATASETS = '''import sys


class NoDatasets:
    def find_spec(self, name, path=None, target=None):
        if name == "datasets" or name.startswith("datasets."):
            raise ModuleNotFoundError(f"No module named {name!r}", name=name)


sys.meta_path.insert(0, NoDatasets())
'''


def leafcost(*args: str, cwd: Path, env: dict[str, str] | None = None) -> subprocess.CompletedProcess:
    offline = {"HF_HOME": str(cwd / "hf"), "HF_DATASETS_OFFLINE": "1", "HF_HUB_OFFLINE": "1",
               "LEAFCOST_CACHE": str(cwd / "cache")}
    return subprocess.run([str(LEAFCOST), *args], capture_output=True, text=True, cwd=cwd, timeout=300,
                          env={**os.environ, **offline, **(env or {})})


def one_line(result: subprocess.CompletedProcess) -> str:
    lines = result.stderr.splitlines()
    assert result.returncode == 2 and len(lines) == 1 and lines[0].startswith("leafcost: "), result.stderr
    assert result.stdout == ""
    return lines[0].removeprefix("leafcost: ")


def verified_rows() -> list[dict]:
    rows = [json.loads(line) | {"difficulty": "15 min - 1 hour"} for line in FIXTURE.read_text().splitlines()]
    return [{column: row[column] for column in VERIFIED_COLUMNS} for row in rows]


def write_parquet(path: Path, rows: list[dict]) -> Path:
    schema = pa.schema([(column, pa.string()) for column in rows[0]])  # the lists as JSON text, as Verified has them
    pq.write_table(pa.Table.from_pylist(rows, schema=schema), path)
    return path


def test_a_verified_parquet_exports_offline_through_datasets(tmp_path):
    rows = verified_rows()
    write_parquet(tmp_path / "verified.parquet", rows)

    result = leafcost("swebench", "export", "verified.parquet", "--out", "rows/verified.jsonl", "--json",
                      cwd=tmp_path)

    assert result.returncode == 0 and result.stderr == "", result.stderr
    report = json.loads(result.stdout)
    assert report["out"] == "rows/verified.jsonl" and report["source_file"] == "rows/verified.source.json"
    assert report["source"]["kind"] == "parquet" and report["source"]["rows"] == 4
    assert report["source"]["columns"] == list(VERIFIED_COLUMNS) and report["refused"] == []
    written = [json.loads(line) for line in (tmp_path / "rows" / "verified.jsonl").read_text().splitlines()]
    assert written == rows
    assert json.loads((tmp_path / "rows" / "verified.source.json").read_text()) == report["source"]
    # a local file is read into a throwaway cache: nothing of it stays in Hugging Face's
    assert not list((tmp_path / "hf").rglob("*.arrow"))


def test_the_terminal_line_says_what_was_written_and_warns_of_rows_the_loader_refuses(tmp_path):
    rows = verified_rows()
    rows[0]["eval_type"] = "nonsense"
    write_parquet(tmp_path / "verified.parquet", rows)

    result = leafcost("swebench", "export", "verified.parquet", "-o", "verified.jsonl", cwd=tmp_path)

    assert result.returncode == 0
    assert result.stdout.startswith(f"wrote 4 rows to verified.jsonl ({tmp_path / 'verified.parquet'}, sha256 ")
    assert result.stdout.rstrip().endswith("; where they came from: verified.source.json")
    assert result.stderr.splitlines() == [
        "leafcost: warning: leafcost's loader will refuse 1 of these rows (a run reports them as load errors):",
        f"  {rows[0]['instance_id']}: eval_type: must be one of {', '.join(sorted(eval_type_names()))}"], result.stderr


def test_an_unreachable_hugging_face_dataset_is_one_line(tmp_path):
    line = one_line(leafcost("swebench", "export", "verified", "--out", "out/verified.jsonl", cwd=tmp_path))
    assert line == ("SWE-bench/SWE-bench_Verified: cannot reach Hugging Face and no copy is in the cache: offline "
                    "mode is on (HF_HUB_OFFLINE and HF_DATASETS_OFFLINE); connect and retry, or export a downloaded "
                    "copy (its folder, or a .parquet/.jsonl file)")
    assert not (tmp_path / "out").exists() or not list((tmp_path / "out").iterdir())


def test_without_the_datasets_library_a_parquet_file_says_how_to_install_it_and_json_lines_still_export(tmp_path):
    blocker = tmp_path / "blocker"
    blocker.mkdir()
    (blocker / "sitecustomize.py").write_text(NO_DATASETS)
    no_datasets = {"PYTHONPATH": str(blocker)}
    write_parquet(tmp_path / "verified.parquet", verified_rows())
    (tmp_path / "verified.jsonl").write_text("".join(json.dumps(row) + "\n" for row in verified_rows()))

    line = one_line(leafcost("swebench", "export", "verified.parquet", "-o", "out/a.jsonl", cwd=tmp_path,
                             env=no_datasets))
    exported = leafcost("swebench", "export", "verified.jsonl", "-o", "out/b.jsonl", "--json", cwd=tmp_path,
                        env=no_datasets)

    assert line == (f"reading {tmp_path / 'verified.parquet'} needs the `datasets` library, which is not installed: "
                    "pip install 'leafcost[datasets]' (in a checkout: make datasets); .jsonl and .json files need "
                    "nothing")
    assert exported.returncode == 0, exported.stderr
    assert json.loads(exported.stdout)["source"]["datasets_version"] is None
    assert sorted(path.name for path in (tmp_path / "out").iterdir()) == ["b.jsonl", "b.source.json"]


@pytest.mark.parametrize("case", ["unknown type", "missing columns", "duplicate ids"])
def test_bad_input_is_one_line_and_leaves_no_file(tmp_path, case):
    rows = verified_rows()
    if case == "unknown type":
        dataset = tmp_path / "verified.csv"
        dataset.write_text("instance_id\n")
        said = f"{dataset.name}: unknown file type '.csv': export a .parquet, .jsonl or .json file"
    elif case == "missing columns":
        dataset = write_parquet(tmp_path / "old.parquet", [{k: v for k, v in row.items() if k not in
                                                            ("eval_script", "log_parser")} for row in rows])
        said = f"{dataset}: no column eval_script, log_parser, which leafcost's loader needs"
    else:
        dataset = write_parquet(tmp_path / "dup.parquet", rows + rows[:2])
        said = f"2 instance id(s) appear more than once: {rows[0]['instance_id']}, {rows[1]['instance_id']}"
    out = tmp_path / "out"
    out.mkdir()

    line = one_line(leafcost("swebench", "export", dataset.name, "--out", "out/rows.jsonl", cwd=tmp_path))

    assert line.startswith(said), line
    assert list(out.iterdir()) == []
