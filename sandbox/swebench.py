"""Loads SWE-bench instances (JSON or JSONL rows, as `swebench` 5 reads them) into `Task`s that run in SWE-bench's
own instance images and grade as SWE-bench grades them.

Since swebench 5.0, a dataset row carries its own evaluation: `image` (the instance image, where the repository sits
at /testbed at base_commit, installed in conda env `testbed` with the Python it needs), `eval_script`, `log_parser`
and `eval_type`. Each instance is materialized once as a Harbor task directory in the cache: the image as
`environment.docker_image`, the problem statement as the instruction, the gold patch as the oracle, and a separate
verifier (a fresh container from the same image) that applies the model's patch and runs the eval script as
SWE-bench's harness does; the host grades its log with SWE-bench's own parser and report (`swebench_grading`).
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import uuid
from datetime import datetime
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from sandbox import reward_hacking, swebench_grading
from sandbox.harbor import TaskFormatError, load_harbor_task
from sandbox.tasks import Suite, SuiteError, SWEBenchFacts, Task, TaskLoadError, parse_created_at

VERIFIER_TIMEOUT_SEC = 1800.0  # SWE-bench's default per-instance evaluation timeout
AGENT_TIMEOUT_SEC = 10800.0
WORKDIR = "/testbed"
DEFAULT_NAMESPACE = "swebench"
DEFAULT_TAG = "latest"
# What a row needs since swebench 5.0 moved each instance's evaluation out of the package into the dataset.
EVALUATION_FIELDS = ("eval_script", "log_parser")
# What swebench's harness reads of every row besides (`make_test_spec`: row["image"], row["eval_type"]): a row
# without them stops its evaluation with a KeyError; leafcost refuses that row alone.
HARNESS_FIELDS = ("image", "eval_type")


class SWEBenchImages(BaseModel):
    """Where the instance images come from: SWE-bench's naming (`<namespace>/sweb.eval.x86_64.<id>:<tag>`, `__` in
    the id written `_1776_`). Unset, a row's own `image` is used; set, every image is named with these (a mirror
    registry, another tag); namespace 'none' gives the names of images built locally by SWE-bench's tools."""

    model_config = ConfigDict(extra="forbid")

    namespace: str | None = Field(None, pattern=r"^[A-Za-z0-9][A-Za-z0-9._:/-]*$", max_length=200)
    tag: str | None = Field(None, pattern=r"^[A-Za-z0-9_][A-Za-z0-9_.-]{0,127}$")


class SWEBenchInstance(BaseModel):
    """One SWE-bench row as the published datasets spell it; other dataset columns are ignored."""

    model_config = ConfigDict(extra="ignore")

    instance_id: str = Field(pattern=r"^[A-Za-z0-9][A-Za-z0-9_.\-]*$", max_length=200)
    repo: str = Field(pattern=r"^[A-Za-z0-9_.\-]+/[A-Za-z0-9_.\-]+$")
    base_commit: str = Field(pattern=r"^[0-9a-fA-F]{7,64}$")
    version: str = ""
    problem_statement: str = Field(min_length=1)
    patch: str = Field(min_length=1)
    test_patch: str = Field(min_length=1)
    FAIL_TO_PASS: list[str] = Field(min_length=1)
    PASS_TO_PASS: list[str]
    image: str = Field(pattern=r"^[A-Za-z0-9][A-Za-z0-9._:/@-]*$", max_length=400)
    eval_script: str = Field(min_length=1)
    log_parser: str
    eval_type: str
    image_assets: Any = None
    created_at: datetime | None = None  # when the issue was posted; the published datasets have it

    @field_validator("created_at", mode="before")
    @classmethod
    def _lenient_date(cls, value: Any) -> datetime | None:
        return parse_created_at(value)

    @field_validator("FAIL_TO_PASS", "PASS_TO_PASS", mode="before")
    @classmethod
    def _json_encoded_list(cls, value: Any) -> Any:
        """The published datasets store these lists as JSON text."""
        if isinstance(value, str):
            try:
                return json.loads(value)
            except json.JSONDecodeError:
                raise ValueError("a string here must be a JSON list of test names") from None
        return value

    @field_validator("version", mode="before")
    @classmethod
    def _version_as_text(cls, value: Any) -> Any:
        if value is None:
            return ""
        if isinstance(value, (int, float)) and not isinstance(value, bool):
            return str(value)
        return value

    @field_validator("eval_script")
    @classmethod
    def _brackets_its_test_output(cls, value: str) -> str:
        constants = swebench_grading.swebench().constants
        missing = [m for m in (constants.START_TEST_OUTPUT, constants.END_TEST_OUTPUT) if m not in value]
        if missing:
            raise ValueError(f"has no {' and no '.join(repr(m) for m in missing)} marker, so SWE-bench's grading "
                             "cannot find the test output")
        return value

    @field_validator("log_parser")
    @classmethod
    def _known_parser(cls, value: str) -> str:
        if value not in swebench_grading.parser_names():
            raise ValueError(f"is not one of swebench {swebench_grading.SWEBENCH_VERSION}'s "
                             f"{len(swebench_grading.parser_names())} log parsers (parse_log_pytest, parse_log_django, "
                             "...)")
        return value

    @field_validator("eval_type")
    @classmethod
    def _known_eval_type(cls, value: str) -> str:
        if value not in swebench_grading.eval_type_names():
            raise ValueError(f"must be one of {', '.join(sorted(swebench_grading.eval_type_names()))}")
        return value

    @field_validator("image_assets")
    @classmethod
    def _no_binary_assets(cls, value: Any) -> Any:
        if value not in (None, "", {}, [], "{}"):
            raise ValueError("binary test assets (SWE-bench Multimodal) are not supported")
        return value


class _InstanceError(Exception):
    """One instance cannot become a task; the message says why and what to do."""


def load_swebench_suite(path: Path, cache_dir: Path | None = None, images: SWEBenchImages | None = None) -> Suite:
    """Every instance of the file as a task; a broken instance becomes a TaskLoadError and never stops the rest."""
    path = Path(path)
    swebench_grading.swebench()  # the pinned package, or one clear error for the whole suite
    if cache_dir is None:
        from sandbox.protocol import default_cache_dir

        cache_dir = default_cache_dir()
    cache_root = Path(cache_dir) / "swebench"
    images = images or SWEBenchImages()
    tasks: list[Task] = []
    errors: list[TaskLoadError] = []
    seen: set[str] = set()
    for where, raw in _read_records(path):
        label = raw.get("instance_id") if isinstance(raw, dict) else None
        task_id = label if isinstance(label, str) and label else where.replace(" ", "-")
        try:
            if isinstance(raw, _InstanceError):
                raise raw
            instance = _validate(raw, where)
            if instance.instance_id in seen:
                raise _InstanceError(f"instance {instance.instance_id} ({where}): duplicate instance_id")
            seen.add(instance.instance_id)
            tasks.append(_load_instance(instance, images, cache_root))
        except _InstanceError as exc:
            errors.append(TaskLoadError(task_id=task_id, path=f"{path}:{where}", error=str(exc)))
    return Suite(name=path.stem, tasks=tasks, errors=errors)


def image_name(instance_id: str, namespace: str | None = DEFAULT_NAMESPACE, tag: str = DEFAULT_TAG) -> str:
    """SWE-bench's instance image name: a registry's (`__` is not allowed there, so SWE-bench writes `_1776_`), or
    with namespace None that of an image its tools built locally."""
    key = f"sweb.eval.x86_64.{instance_id}:{tag}"
    if namespace is not None:
        key = f"{namespace}/{key}".replace("__", "_1776_")
    return key.lower()


def instance_image(instance: SWEBenchInstance, images: SWEBenchImages) -> str:
    """The row's own image unless the run names the images itself."""
    if images.namespace is None and images.tag is None:
        return instance.image
    namespace = images.namespace or DEFAULT_NAMESPACE
    return image_name(instance.instance_id, None if namespace == "none" else namespace, images.tag or DEFAULT_TAG)


def _read_records(path: Path) -> list[tuple[str, Any]]:
    """(where, raw object or _InstanceError) per instance: a JSON list or object, else JSON Lines."""
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise SuiteError(f"suite {str(path)!r}: cannot read the file: {exc}") from None
    if not text.strip():
        raise SuiteError(f"suite {str(path)!r}: the file is empty (expected SWE-bench instances as JSON or JSONL)")
    try:
        whole = json.loads(text)
    except json.JSONDecodeError as exc:
        whole_error = exc
    else:
        if isinstance(whole, dict):
            return [("item 1", whole)]
        if isinstance(whole, list):
            return [(f"item {i}", raw) for i, raw in enumerate(whole, start=1)]
        raise SuiteError(f"suite {str(path)!r}: expected a JSON list of SWE-bench instances, an instance "
                           f"object, or JSON Lines; got a JSON {type(whole).__name__}")
    records: list[tuple[str, Any]] = []
    parsed = 0
    for number, line in enumerate(text.splitlines(), start=1):
        if not line.strip():
            continue
        where = f"line {number}"
        try:
            records.append((where, json.loads(line)))
            parsed += 1
        except json.JSONDecodeError as exc:
            records.append((where, _InstanceError(f"{path.name} {where}: not valid JSON: {exc.msg} "
                                                  f"(column {exc.colno})")))
    if parsed == 0:
        raise SuiteError(f"suite {str(path)!r}: not JSON or JSON Lines ({whole_error.msg} at line "
                           f"{whole_error.lineno} column {whole_error.colno}); expected SWE-bench instances")
    return records


def _validate(raw: Any, where: str) -> SWEBenchInstance:
    if not isinstance(raw, dict):
        raise _InstanceError(f"{where}: expected an instance object, got a JSON {type(raw).__name__}")
    label = raw.get("instance_id")
    name = f"instance {label} ({where})" if isinstance(label, str) and label else where
    missing = [field for field in EVALUATION_FIELDS if not raw.get(field)]
    if missing:
        raise _InstanceError(
            f"{name}: no {' and no '.join(missing)}: this row is in SWE-bench's format from before swebench 5.0, "
            f"which kept each instance's test command and parser in the package; swebench "
            f"{swebench_grading.SWEBENCH_VERSION} reads them from the dataset. Export the current rows: "
            "leafcost swebench export verified --out verified.jsonl")
    if absent := [field for field in HARNESS_FIELDS if not raw.get(field)]:
        raise _InstanceError(
            f"{name}: no {' and no '.join(absent)}: swebench {swebench_grading.SWEBENCH_VERSION}'s harness refuses a "
            "row without it (make_test_spec reads every row's image and eval_type); export the rows again with "
            "every column of the published dataset")
    try:
        return SWEBenchInstance.model_validate(raw)
    except ValidationError as exc:
        raise _InstanceError(f"{name}: {_describe(exc)}") from None


def _load_instance(instance: SWEBenchInstance, images: SWEBenchImages, cache_root: Path) -> Task:
    facts = SWEBenchFacts(
        instance_id=instance.instance_id, repo=instance.repo, version=instance.version,
        image=instance_image(instance, images), log_parser=instance.log_parser, eval_type=instance.eval_type,
        fail_to_pass=instance.FAIL_TO_PASS, pass_to_pass=instance.PASS_TO_PASS,
        test_files=reward_hacking.touched_paths(instance.test_patch), created_at=instance.created_at)
    directory = cache_root / f"{instance.instance_id}-{_content_hash(instance, facts)}"
    if not (directory / "task.toml").is_file():
        _materialize(instance, facts, directory)
    try:
        task = load_harbor_task(directory)
    except (TaskFormatError, OSError) as exc:
        raise _InstanceError(f"instance {instance.instance_id}: the generated task in {directory} does not load: "
                             f"{exc}") from None
    return task.model_copy(update={"task_id": instance.instance_id, "source": "swebench", "swebench": facts,
                                   "created_at": instance.created_at})


def _materialize(instance: SWEBenchInstance, facts: SWEBenchFacts, directory: Path) -> None:
    """Writes the Harbor task in a staging directory and renames it into place: a crash leaves nothing half-made."""
    directory.parent.mkdir(parents=True, exist_ok=True)
    staging = directory.parent / f".building-{directory.name}-{uuid.uuid4().hex[:8]}"
    try:
        for relative, text in _task_files(instance, facts).items():
            target = staging / relative
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_text(text, encoding="utf-8")
        for script in ("tests/test.sh", "tests/eval.sh", "solution/solve.sh"):
            (staging / script).chmod(0o755)
        try:
            os.rename(staging, directory)
        except OSError:
            if not (directory / "task.toml").is_file():  # not another loader finishing first: a real failure
                raise
    except OSError as exc:
        raise _InstanceError(f"instance {instance.instance_id}: could not write its task to {directory}: "
                             f"{exc}") from None
    finally:
        shutil.rmtree(staging, ignore_errors=True)


def _task_files(instance: SWEBenchInstance, facts: SWEBenchFacts) -> dict[str, str]:
    return {
        "instruction.md": instance.problem_statement,
        "task.toml": _task_toml(instance, facts),
        "tests/test.sh": swebench_grading.verifier_script(WORKDIR),
        "tests/eval.sh": swebench_grading.eval_script(instance.eval_script),
        "solution/solve.sh": _SOLVE_SH,
        "solution/gold.patch": instance.patch,
    }


def _task_toml(instance: SWEBenchInstance, facts: SWEBenchFacts) -> str:
    metadata = {"benchmark": "swebench", "instance_id": instance.instance_id, "repo": instance.repo,
                "version": instance.version, "base_commit": instance.base_commit, "log_parser": facts.log_parser,
                "eval_type": facts.eval_type, "swebench": swebench_grading.SWEBENCH_VERSION}
    lines = ['schema_version = "1.1"', "", "[metadata]"]
    lines += [f"{key} = {toml_string(value)}" for key, value in metadata.items()]
    lines += ["", "[agent]", f"timeout_sec = {AGENT_TIMEOUT_SEC}",
              # SWE-bench grades the patch alone, in a fresh container from the instance image, as root.
              "", "[verifier]", f"timeout_sec = {VERIFIER_TIMEOUT_SEC}", 'environment_mode = "separate"',
              'user = "root"',
              "", "[environment]", f"docker_image = {toml_string(facts.image)}", f'workdir = "{WORKDIR}"',
              "allow_internet = false", ""]
    return "\n".join(lines)


_SOLVE_SH = f"""#!/bin/bash
# SWE-bench's gold patch, the oracle that proves the instance solvable.
set -e
cd {WORKDIR}
git apply -v /solution/gold.patch
"""


def _content_hash(instance: SWEBenchInstance, facts: SWEBenchFacts) -> str:
    """Changes with the instance, its image, and the code that writes and grades the task."""
    digest = hashlib.sha256(instance.model_dump_json().encode() + b"\0" + facts.model_dump_json().encode())
    for source in (Path(__file__), Path(swebench_grading.__file__)):
        digest.update(b"\0" + source.read_bytes())
    return digest.hexdigest()[:12]


def _describe(exc: ValidationError) -> str:
    parts = []
    for err in exc.errors():
        where = ".".join(str(part) for part in err["loc"]) or "(top level)"
        if err["type"] == "missing":
            parts.append(f"{where}: missing required field")
        else:
            shown = repr(err.get("input"))
            message = err["msg"].removeprefix("Value error, ")
            parts.append(f"{where}: {message} (got {shown[:80]})")
    return "; ".join(parts)


def toml_string(value: str) -> str:
    """A TOML basic string: quotes and backslashes escaped, control characters as \\uXXXX."""
    escaped = "".join("\\" + c if c in '"\\' else f"\\u{ord(c):04x}" if ord(c) < 0x20 or c == "\x7f" else c
                      for c in value)
    return f'"{escaped}"'
