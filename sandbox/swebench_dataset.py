"""Exports a SWE-bench dataset as the JSON Lines rows `sandbox.swebench` loads, beside a record of where they came
from (`ExportSource`, written to `source_path(out)`).

A dataset is named as swebench's own tools name it: an alias (`verified`, `lite`, `full`, `multilingual`,
`multimodal`), a Hugging Face name (`SWE-bench/SWE-bench_Verified`), a downloaded copy's folder (the dataset
repository, or `swebench dataset build`'s `<split>.parquet` files), or a local `.parquet`, `.jsonl` or `.json` file.
Hugging Face, folders and parquet files are read through the optional `datasets` library; JSON needs nothing. Rows
are written as the dataset stores them (FAIL_TO_PASS/PASS_TO_PASS as JSON text in the published datasets: swebench
and leafcost read both), every column kept.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import tempfile
from collections import Counter
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import date, datetime, time
from pathlib import Path
from typing import IO, Any, Literal

from pydantic import BaseModel, ValidationError

from sandbox import swebench_grading
from sandbox.swebench import EVALUATION_FIELDS, HARNESS_FIELDS, SWEBenchInstance

# swebench 5.0.2's CLI aliases (swebench.cli._datasets) and its loader's `lite` (harness.utils.load_swebench_dataset).
DATASET_ALIASES = {
    "full": "SWE-bench/SWE-bench",
    "verified": "SWE-bench/SWE-bench_Verified",
    "lite": "SWE-bench/SWE-bench_Lite",
    "multilingual": "SWE-bench/SWE-bench_Multilingual",
    "multimodal": "SWE-bench/SWE-bench_Multimodal",
}
DEFAULT_SPLIT = "test"
INSTALL_HINT = "pip install 'leafcost[datasets]' (in a checkout: make datasets)"
FILE_KINDS = {".parquet": "parquet", ".jsonl": "jsonl", ".json": "json"}
# The columns leafcost's loader requires, and `version`, which swebench's harness reads of every row (make_test_spec).
REQUIRED_COLUMNS: tuple[str, ...] = (
    *(name for name, field in SWEBenchInstance.model_fields.items() if field.is_required()), "version")
# The columns swebench 5.0 added to every row (an instance's evaluation moved from the package into the dataset).
SWEBENCH5_COLUMNS = (*EVALUATION_FIELDS, *HARNESS_FIELDS)
_HUB_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]*/[A-Za-z0-9][A-Za-z0-9._-]*$")

SourceKind = Literal["hub", "folder", "parquet", "jsonl", "json"]


class DatasetExportError(Exception):
    """The dataset cannot be exported; the message is one line saying why and what to do."""


class DatasetLocation(BaseModel):
    """What a DATASET argument names: a Hugging Face dataset (`name` its id) or a local folder or file (`name` its
    absolute path); `split` is None for a file, which is one split already."""

    kind: SourceKind
    name: str
    split: str | None
    revision: str | None


class SourceFile(BaseModel):
    path: str
    sha256: str


class ExportSource(BaseModel):
    """Where exported rows came from, enough to fetch the same rows again and to check they are the same."""

    dataset: str                  # as given
    kind: SourceKind
    name: str                     # the Hugging Face id (an alias expanded) or the local path
    split: str | None
    revision: str | None          # the revision asked for (Hugging Face)
    commit: str | None            # the Hugging Face commit the rows were read at
    files: list[SourceFile]       # local sources: every file read, with its sha256
    rows: int
    columns: list[str]
    instance_ids_sha256: str      # sha256 of the sorted instance ids, one per line (instance_ids_digest)
    rows_sha256: str              # sha256 of the JSON Lines file written
    datasets_version: str | None  # the `datasets` library that read them (None: read as JSON)


class RefusedRow(BaseModel):
    """An exported row leafcost's loader will refuse (e.g. SWE-bench Multimodal's binary test assets)."""

    instance_id: str
    error: str


class ExportResult(BaseModel):
    out: str
    source_file: str
    source: ExportSource
    refused: list[RefusedRow]


def source_path(out: Path) -> Path:
    """Where the export's ExportSource goes: beside the rows, `verified.jsonl` → `verified.source.json`."""
    return Path(out).with_suffix(".source.json")


def instance_ids_digest(ids: Iterable[str]) -> str:
    """sha256 of the ids sorted, one per line: the same set of instances gives the same digest in any order."""
    return hashlib.sha256("".join(f"{i}\n" for i in sorted(ids)).encode()).hexdigest()


def locate_dataset(dataset: str, *, split: str | None = None, revision: str | None = None) -> DatasetLocation:
    """The alias, Hugging Face name, folder or file DATASET names; DatasetExportError when it names none."""
    name = DATASET_ALIASES.get(dataset.strip().lower(), dataset)
    path = Path(dataset).expanduser()
    if name == dataset and path.exists():
        if revision is not None:
            raise DatasetExportError(f"--revision {revision}: a revision picks a Hugging Face commit; {dataset} is a "
                                     "local copy (drop --revision)")
        return _local_location(dataset, path.resolve(), split)
    if path.suffix in FILE_KINDS:
        raise DatasetExportError(f"{dataset}: no such file")
    if not _HUB_NAME.match(name):
        aliases = ", ".join(DATASET_ALIASES)
        raise DatasetExportError(f"{dataset}: not a file, a folder, an alias ({aliases}) or a Hugging Face name "
                                 "(OWNER/NAME)")
    return DatasetLocation(kind="hub", name=name, split=split or DEFAULT_SPLIT, revision=revision)


def export_swebench_dataset(dataset: str, out: Path, *, split: str | None = None,
                            revision: str | None = None) -> ExportResult:
    """Writes the dataset's rows to `out` (JSON Lines) and their ExportSource to `source_path(out)`, both or
    neither: on any DatasetExportError no new file is left and an older `out` is untouched."""
    out = Path(out)
    if out.suffix != ".jsonl":
        raise DatasetExportError(f"--out {out}: must end in .jsonl (leafcost loads SWE-bench rows from .jsonl)")
    location = locate_dataset(dataset, split=split, revision=revision)
    try:
        swebench_grading.swebench()  # each row is checked as the loader checks it, with the pinned package
    except swebench_grading.SWEBenchUnavailable as exc:
        raise DatasetExportError(str(exc)) from None
    with _opened(location) as table, _staged(out) as rows_file, _staged(source_path(out)) as source_file:
        _require_columns(location, table.columns)
        written = _write_rows(table.rows, rows_file.handle)
        source = ExportSource(
            dataset=dataset, kind=location.kind, name=location.name, split=location.split,
            revision=location.revision, commit=table.commit, files=table.files, rows=len(written.ids),
            columns=table.columns, instance_ids_sha256=instance_ids_digest(written.ids),
            rows_sha256=written.sha256, datasets_version=table.datasets_version)
        source_file.handle.write(source.model_dump_json(indent=2) + "\n")
    return ExportResult(out=str(out), source_file=str(source_path(out)), source=source, refused=written.refused)


# --- locating --------------------------------------------------------------------------------------------------


def _local_location(dataset: str, path: Path, split: str | None) -> DatasetLocation:
    if path.is_dir():
        return DatasetLocation(kind="folder", name=str(path), split=split or DEFAULT_SPLIT, revision=None)
    kind = FILE_KINDS.get(path.suffix.lower())
    if kind is None:
        raise DatasetExportError(f"{dataset}: unknown file type {path.suffix or '(no extension)'!r}: export a "
                                 ".parquet, .jsonl or .json file, a dataset folder, or a Hugging Face dataset")
    if split is not None:
        raise DatasetExportError(f"--split {split}: {dataset} is one split already (--split picks a split of a "
                                 "Hugging Face dataset or a dataset folder)")
    return DatasetLocation(kind=kind, name=str(path), split=None, revision=None)


# --- reading ---------------------------------------------------------------------------------------------------


@dataclass
class _Table:
    columns: list[str]
    rows: Iterable[dict[str, Any]]
    commit: str | None
    files: list[SourceFile]
    datasets_version: str | None


@contextmanager
def _opened(location: DatasetLocation) -> Iterator[_Table]:
    """The dataset's rows, readable until the context closes (a local copy's arrow cache is temporary)."""
    if location.kind in ("jsonl", "json"):
        yield _json_table(location)
        return
    datasets = _import_datasets(location)
    with tempfile.TemporaryDirectory(prefix="leafcost-datasets-") as scratch:
        # A local copy is read into a throwaway cache; a Hugging Face download is kept in the user's cache.
        cache_dir = None if location.kind == "hub" else scratch
        yield _datasets_table(datasets, location, cache_dir)


def _import_datasets(location: DatasetLocation):
    try:
        import datasets
    except ImportError as exc:
        reason = "" if exc.name == "datasets" else f" ({exc})"
        raise DatasetExportError(f"reading {location.name} needs the `datasets` library, which is not installed"
                                 f"{reason}: {INSTALL_HINT}; .jsonl and .json files need nothing") from None
    import huggingface_hub

    # The command's output is its own lines: no download bars, no retry chatter (a failure is one line of ours).
    datasets.disable_progress_bars()
    datasets.logging.set_verbosity_error()
    huggingface_hub.logging.set_verbosity_error()
    return datasets


def _datasets_table(datasets, location: DatasetLocation, cache_dir: str | None) -> _Table:
    split = location.split or "train"  # a single parquet file is one split, which `datasets` calls train
    try:
        builder = _builder(datasets, location, split, cache_dir)
        builder.download_and_prepare()
        splits = sorted(builder.info.splits or ())
        if split not in splits:
            raise DatasetExportError(_no_split(location, split, splits))
        table = builder.as_dataset(split=split)
    except DatasetExportError:
        raise
    except ConnectionError as exc:  # offline, or no route to the hub, and no copy in the cache
        raise DatasetExportError(_unreachable(location, exc)) from None
    except (datasets.exceptions.DatasetsError, OSError, ValueError, RuntimeError) as exc:
        raise DatasetExportError(f"{location.name}: `datasets` could not read it: {_first_line(exc)}") from None
    commit = builder.hash if location.kind == "hub" else None  # the commit `datasets` resolved the revision to
    files = [] if location.kind == "hub" else _local_files(builder, split)
    return _Table(columns=list(table.column_names), rows=table, commit=commit, files=files,
                  datasets_version=datasets.__version__)


def _builder(datasets, location: DatasetLocation, split: str, cache_dir: str | None):
    # swebench's `dataset build` layout (<split>.parquet in the folder), read as swebench's loader reads it
    if location.kind == "folder" and (split_files := sorted(Path(location.name).glob("*.parquet"))):
        by_split = {path.stem: path for path in split_files}
        if split not in by_split:
            raise DatasetExportError(_no_split(location, split, list(by_split)))
        return datasets.load_dataset_builder("parquet", data_files={split: str(by_split[split])}, cache_dir=cache_dir)
    if location.kind == "parquet":
        return datasets.load_dataset_builder("parquet", data_files={split: location.name}, cache_dir=cache_dir)
    return datasets.load_dataset_builder(location.name, revision=location.revision, cache_dir=cache_dir)


def _no_split(location: DatasetLocation, split: str, splits: list[str]) -> str:
    return f"--split {split}: {location.name} has no such split (it has {', '.join(sorted(splits)) or 'none'})"


def _unreachable(location: DatasetLocation, exc: Exception) -> str:
    offline = [name for name in ("HF_HUB_OFFLINE", "HF_DATASETS_OFFLINE")
               if os.environ.get(name, "").strip().lower() in ("1", "true", "yes", "on")]
    why = f"offline mode is on ({' and '.join(offline)})" if offline else _first_line(exc)
    return (f"{location.name}: cannot reach Hugging Face and no copy is in the cache: {why}; connect and retry, or "
            "export a downloaded copy (its folder, or a .parquet/.jsonl file)")


def _local_files(builder, split: str) -> list[SourceFile]:
    """Every data file `datasets` read for the split, with its sha256."""
    data_files = builder.config.data_files or {}
    paths = sorted(str(path) for path in data_files.get(split, ()))
    return [SourceFile(path=path, sha256=_file_sha256(Path(path))) for path in paths]


def _json_table(location: DatasetLocation) -> _Table:
    path = Path(location.name)
    rows = list(_json_rows(path, location.kind))
    if not rows:
        raise DatasetExportError(f"{path}: has no rows")
    columns = [column for column in rows[0] if all(column in row for row in rows)]
    return _Table(columns=columns, rows=rows, commit=None,
                  files=[SourceFile(path=str(path), sha256=_file_sha256(path))], datasets_version=None)


def _json_rows(path: Path, kind: str) -> Iterator[dict[str, Any]]:
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise DatasetExportError(f"{path}: cannot read it: {exc}") from None
    if kind == "json":
        whole = _parsed(text, path, "the file") if text.strip() else []
        items = enumerate(whole if isinstance(whole, list) else [whole], start=1)
        where = "item"
    else:
        items = ((number, _parsed(line, path, f"line {number}"))
                 for number, line in enumerate(text.splitlines(), start=1) if line.strip())
        where = "line"
    for number, row in items:
        if not isinstance(row, dict):
            raise DatasetExportError(f"{path} {where} {number}: expected an instance object, got a JSON "
                                     f"{type(row).__name__}")
        yield row


def _parsed(text: str, path: Path, where: str) -> Any:
    try:
        return json.loads(text)
    except json.JSONDecodeError as exc:
        raise DatasetExportError(f"{path} {where}: not valid JSON: {exc.msg} (line {exc.lineno} column "
                                 f"{exc.colno})") from None


# --- checking and writing --------------------------------------------------------------------------------------


def _require_columns(location: DatasetLocation, columns: list[str]) -> None:
    missing = [column for column in REQUIRED_COLUMNS if column not in columns]
    if not missing:
        return
    where = location.name + (f" ({location.split})" if location.split else "")
    message = f"{where}: no column {', '.join(missing)}, which leafcost's loader needs"
    if set(missing) <= set(SWEBENCH5_COLUMNS):
        message += ("; these rows are in SWE-bench's layout from before swebench 5.0, which kept each instance's "
                    "evaluation in the package: export the dataset as published for swebench 5")
    raise DatasetExportError(message)


@dataclass
class _Written:
    ids: list[str]
    sha256: str
    refused: list[RefusedRow]


def _write_rows(rows: Iterable[dict[str, Any]], handle: IO[str]) -> _Written:
    """One JSON line per row; every row's instance_id checked present and unique."""
    ids: list[str] = []
    refused: list[RefusedRow] = []
    digest = hashlib.sha256()
    for number, row in enumerate(rows, start=1):
        instance_id = row.get("instance_id")
        if not isinstance(instance_id, str) or not instance_id:
            raise DatasetExportError(f"row {number}: no instance_id (got {instance_id!r}); every row needs one")
        ids.append(instance_id)
        line = _json_line(row, instance_id)
        digest.update(line.encode())
        handle.write(line)
        if problem := _loader_problem(row):
            refused.append(RefusedRow(instance_id=instance_id, error=problem))
    if not ids:
        raise DatasetExportError("the dataset has no rows")
    _refuse_duplicates(ids)
    return _Written(ids=ids, sha256=digest.hexdigest(), refused=refused)


def _json_line(row: dict[str, Any], instance_id: str) -> str:
    try:
        return json.dumps(row, ensure_ascii=False, default=_json_default) + "\n"
    except (TypeError, ValueError) as exc:
        raise DatasetExportError(f"instance {instance_id}: a value JSON cannot hold: {exc}") from None


def _json_default(value: Any) -> Any:
    if isinstance(value, (datetime, date, time)):
        return value.isoformat()
    raise TypeError(f"{type(value).__name__} is not JSON serializable")


def _loader_problem(row: dict[str, Any]) -> str | None:
    """Why leafcost's loader would refuse the row (the first problem), or None."""
    try:
        SWEBenchInstance.model_validate(row)
    except ValidationError as exc:
        first = exc.errors()[0]
        where = ".".join(str(part) for part in first["loc"]) or "(row)"
        return f"{where}: {first['msg'].removeprefix('Value error, ')}"
    return None


def _refuse_duplicates(ids: list[str]) -> None:
    repeated = [instance_id for instance_id, count in Counter(ids).items() if count > 1]
    if repeated:
        shown = ", ".join(repeated[:5]) + (f" and {len(repeated) - 5} more" if len(repeated) > 5 else "")
        raise DatasetExportError(f"{len(repeated)} instance id(s) appear more than once: {shown}; a dataset names "
                                 "each instance once")


@dataclass
class _Staged:
    handle: IO[str]


@contextmanager
def _staged(target: Path) -> Iterator[_Staged]:
    """A temporary file beside `target`, renamed onto it when the block ends without an error, else removed."""
    target.parent.mkdir(parents=True, exist_ok=True)
    descriptor, temporary = tempfile.mkstemp(prefix=f".{target.name}.", suffix=".partial", dir=target.parent)
    try:
        with open(descriptor, "w", encoding="utf-8") as handle:
            yield _Staged(handle)
        os.replace(temporary, target)
    finally:
        if os.path.exists(temporary):
            os.unlink(temporary)


def _file_sha256(path: Path) -> str:
    with path.open("rb") as handle:
        return hashlib.file_digest(handle, "sha256").hexdigest()


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip()
    return text.splitlines()[0] if text else type(exc).__name__
