"""Loads SWE-bench instances (JSON or JSONL) into `Task`s: each instance is materialized once as a Harbor task
directory in the cache (the repository at base_commit without history, hidden tests that apply the test patch
and grade the log with `swebench_grader.py`, the gold patch as the oracle) and loaded like any Harbor task."""

from __future__ import annotations

import hashlib
import json
import os
import re
import shlex
import shutil
import subprocess
import uuid
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from sandbox.harbor import TaskFormatError, load_harbor_task
from sandbox.tasks import Suite, Task, TaskLoadError

GRADER = Path(__file__).with_name("swebench_grader.py")
VERIFIER_TIMEOUT_SEC = 1800.0
AGENT_TIMEOUT_SEC = 10800.0
WORKDIR = "/testbed"
# SWE-bench's get_test_directives drops these from the files a test patch touches.
NON_TEST_SUFFIXES = (".json", ".png", "csv", ".txt", ".md", ".jpg", ".jpeg", ".pkl", ".yml", ".yaml", ".toml")


class SWEBenchInstance(BaseModel):
    """One SWE-bench instance as the public dataset spells it; extra dataset columns are ignored."""

    model_config = ConfigDict(extra="ignore")

    instance_id: str = Field(pattern=r"^[A-Za-z0-9][A-Za-z0-9_.\-]*$", max_length=200)
    repo: str = Field(pattern=r"^[A-Za-z0-9_.\-]+/[A-Za-z0-9_.\-]+$")
    base_commit: str = Field(pattern=r"^[^\s\-][^\s]*$")
    problem_statement: str = Field(min_length=1)
    patch: str = Field(min_length=1)
    test_patch: str = Field(min_length=1)
    FAIL_TO_PASS: list[str] = Field(min_length=1)
    PASS_TO_PASS: list[str]
    version: str | None = None
    test_cmd: str | None = None
    log_parser: Literal["pytest", "unittest"] = "pytest"

    @field_validator("FAIL_TO_PASS", "PASS_TO_PASS", mode="before")
    @classmethod
    def _json_encoded_list(cls, value: Any) -> Any:
        """The public dataset stores these lists as JSON text."""
        if isinstance(value, str):
            try:
                return json.loads(value)
            except json.JSONDecodeError:
                raise ValueError("a string here must be a JSON list of test names") from None
        return value

    @field_validator("version", mode="before")
    @classmethod
    def _version_as_text(cls, value: Any) -> Any:
        if isinstance(value, (int, float)) and not isinstance(value, bool):
            return str(value)
        return value

    @field_validator("log_parser", mode="before")
    @classmethod
    def _null_log_parser_is_default(cls, value: Any) -> Any:
        return "pytest" if value is None else value

    @field_validator("test_cmd")
    @classmethod
    def _blank_test_cmd_is_none(cls, value: str | None) -> str | None:
        return value if value and value.strip() else None


class _InstanceError(Exception):
    """One instance cannot become a task; the message says why and what to do."""


def load_swebench_suite(path: Path, repos: Path | None = None, cache_dir: Path | None = None) -> Suite:
    """Every instance of the file as a task; a broken instance becomes a TaskLoadError and never stops the rest."""
    path = Path(path)
    if cache_dir is None:
        from sandbox.protocol import default_cache_dir

        cache_dir = default_cache_dir()
    cache_root = Path(cache_dir) / "swebench"
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
            tasks.append(_load_instance(instance, repos, cache_root))
        except _InstanceError as exc:
            errors.append(TaskLoadError(task_id=task_id, path=f"{path}:{where}", error=str(exc)))
    return Suite(name=path.stem, tasks=tasks, errors=errors)


def find_repository(repos: Path | None, repo: str) -> Path:
    """`repos` itself when it is a git repository, else its mirror of `owner/name` in any of SWE-bench's layouts."""
    owner, name = repo.split("/", 1)
    fix = (f"pass --repos with a clone of {repo} (git clone https://github.com/{repo}) or a directory holding "
           f"clones named {owner}__{name}, {owner}/{name} or {name}")
    if repos is None:
        raise _InstanceError(f"no repository for {repo}: {fix}")
    repos = Path(repos).expanduser()
    if _is_git_repository(repos):
        return repos
    candidates = [repos / f"{owner}__{name}", repos / owner / name, repos / name]
    tried = [p for c in candidates for p in (c, c.with_name(c.name + ".git"))]
    for candidate in tried:
        if _is_git_repository(candidate):
            return candidate
    raise _InstanceError(f"no git repository for {repo}; tried {', '.join(str(p) for p in [repos, *tried])}: {fix}")


def patch_files(test_patch: str) -> list[str]:
    """Every file a patch touches, both sides of a rename, in order of appearance."""
    files: list[str] = []
    for old, new in _diff_paths(test_patch):
        for name in (new, old):
            if name not in files:
                files.append(name)
    return files


def default_test_cmd(test_patch: str) -> str:
    directives = list(dict.fromkeys(new for _, new in _diff_paths(test_patch) if not new.endswith(NON_TEST_SUFFIXES)))
    return " ".join(["python3 -m pytest -rA -p no:cacheprovider", *map(shlex.quote, directives)])


def image_name(instance_id: str) -> str:
    """The SWE-bench evaluation image on Docker Hub (`__` is not allowed there, so SWE-bench writes `_1776_`)."""
    return f"swebench/sweb.eval.x86_64.{instance_id.replace('__', '_1776_').lower()}:latest"


def _read_records(path: Path) -> list[tuple[str, Any]]:
    """(where, raw object or _InstanceError) per instance: a JSON list or object, else JSON Lines."""
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise _suite_error(f"suite {str(path)!r}: cannot read the file: {exc}") from None
    if not text.strip():
        raise _suite_error(f"suite {str(path)!r}: the file is empty (expected SWE-bench instances as JSON or JSONL)")
    try:
        whole = json.loads(text)
    except json.JSONDecodeError as exc:
        whole_error = exc
    else:
        if isinstance(whole, dict):
            return [("item 1", whole)]
        if isinstance(whole, list):
            return [(f"item {i}", raw) for i, raw in enumerate(whole, start=1)]
        raise _suite_error(f"suite {str(path)!r}: expected a JSON list of SWE-bench instances, an instance "
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
        raise _suite_error(f"suite {str(path)!r}: not JSON or JSON Lines ({whole_error.msg} at line "
                           f"{whole_error.lineno} column {whole_error.colno}); expected SWE-bench instances")
    return records


def _validate(raw: Any, where: str) -> SWEBenchInstance:
    if not isinstance(raw, dict):
        raise _InstanceError(f"{where}: expected an instance object, got a JSON {type(raw).__name__}")
    label = raw.get("instance_id")
    name = f"instance {label} ({where})" if isinstance(label, str) and label else where
    try:
        return SWEBenchInstance.model_validate(raw)
    except ValidationError as exc:
        raise _InstanceError(f"{name}: {_describe(exc)}") from None


def _load_instance(instance: SWEBenchInstance, repos: Path | None, cache_root: Path) -> Task:
    name = f"instance {instance.instance_id}"
    repository = find_repository(repos, instance.repo)
    commit = _resolve_commit(repository, instance.base_commit, name)
    directory = cache_root / f"{instance.instance_id}-{_content_hash(instance, commit)}"
    if not (directory / "task.toml").is_file():
        _materialize(instance, repository, commit, directory)
    try:
        task = load_harbor_task(directory)
    except (TaskFormatError, OSError) as exc:
        raise _InstanceError(f"{name}: the generated task in {directory} does not load: {exc}") from None
    return task.model_copy(update={"task_id": instance.instance_id, "source": "swebench"})


def _materialize(instance: SWEBenchInstance, repository: Path, commit: str, directory: Path) -> None:
    """Builds the Harbor task in a staging directory and renames it into place, so a crash leaves nothing half-made."""
    directory.parent.mkdir(parents=True, exist_ok=True)
    staging = directory.parent / f".building-{directory.name}-{uuid.uuid4().hex[:8]}"
    try:
        _export_tree(repository, commit, staging / "environment" / "repo", staging / "index",
                     f"instance {instance.instance_id}")
        (staging / "index").unlink()
        for relative, text in _task_files(instance, commit).items():
            target = staging / relative
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_text(text, encoding="utf-8")
        shutil.copy2(GRADER, staging / "tests" / "swebench_grader.py")
        for script in ("tests/test.sh", "solution/solve.sh"):
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


def _task_files(instance: SWEBenchInstance, commit: str) -> dict[str, str]:
    test_cmd = instance.test_cmd or default_test_cmd(instance.test_patch)
    log_parser = instance.log_parser if instance.test_cmd else "pytest"
    spec = {"instance_id": instance.instance_id, "repo": instance.repo, "fail_to_pass": instance.FAIL_TO_PASS,
            "pass_to_pass": instance.PASS_TO_PASS, "test_cmd": test_cmd, "log_parser": log_parser,
            "test_files": patch_files(instance.test_patch)}
    return {
        "instruction.md": instance.problem_statement,
        "task.toml": _task_toml(instance, commit),
        "environment/Dockerfile": _dockerfile(instance.instance_id),
        "tests/test.sh": _test_sh(instance, test_cmd),
        "tests/test.patch": instance.test_patch,
        "tests/spec.json": json.dumps(spec, indent=2) + "\n",
        "solution/solve.sh": _SOLVE_SH,
        "solution/gold.patch": instance.patch,
    }


def _task_toml(instance: SWEBenchInstance, commit: str) -> str:
    metadata = {"benchmark": "swebench", "repo": instance.repo, "instance_id": instance.instance_id,
                "base_commit": commit}
    if instance.version is not None:
        metadata["version"] = instance.version
    lines = ['version = "1.0"', "", "[metadata]"]
    lines += [f"{key} = {_toml_string(value)}" for key, value in metadata.items()]
    lines += ["", "[verifier]", f"timeout_sec = {VERIFIER_TIMEOUT_SEC}", "", "[agent]",
              f"timeout_sec = {AGENT_TIMEOUT_SEC}", "", "[environment]", "allow_internet = false", ""]
    return "\n".join(lines)


def _dockerfile(instance_id: str) -> str:
    return (f"# SWE-bench's evaluation image, recorded only: the local sandbox replays this file over its base root.\n"
            f"FROM {image_name(instance_id)}\n"
            f"WORKDIR {WORKDIR}\n"
            f"COPY repo/ {WORKDIR}/\n")


_TEST_SH = """#!/bin/bash
# SWE-bench verifier for {instance_id}: test files back to the baseline, the test patch, the tests, the grader.
LOGS=/logs/verifier
mkdir -p "$LOGS"
cd {workdir} || exit 1
# The agent's edits to the files the test patch touches are discarded, as SWE-bench does.
base=$(git rev-list --max-parents=0 HEAD 2>/dev/null | tail -n 1)
if [ -n "$base" ]; then
  for path in {files}; do
    if git cat-file -e "$base:$path" 2>/dev/null; then git checkout -q "$base" -- "$path"; else rm -rf -- "$path"; fi
  done
fi
if ! git apply -v /tests/test.patch > "$LOGS/apply_output.txt" 2>&1; then
  python3 /tests/swebench_grader.py --fail "the test patch does not apply to {workdir}" \\
    "$LOGS/reward.json" "$LOGS/apply_output.txt"
  exit 0
fi
(
{test_cmd}
) < /dev/null > "$LOGS/test_output.txt" 2>&1
echo "test command exit code: $?" > "$LOGS/test_exit_code.txt"
python3 /tests/swebench_grader.py /tests/spec.json "$LOGS/test_output.txt" "$LOGS/reward.json"
"""

_SOLVE_SH = f"""#!/bin/bash
# SWE-bench's gold patch, the oracle that proves the instance solvable.
set -e
cd {WORKDIR}
git apply -v /solution/gold.patch
"""


def _test_sh(instance: SWEBenchInstance, test_cmd: str) -> str:
    files = " ".join(shlex.quote(f) for f in patch_files(instance.test_patch)) or "''"
    return _TEST_SH.format(instance_id=instance.instance_id, workdir=WORKDIR, files=files, test_cmd=test_cmd)


def _export_tree(repository: Path, commit: str, destination: Path, index: Path, name: str) -> None:
    """The tree at `commit`, without history, through a private index so the user's repository is untouched.

    Not `git archive`: it honours `export-ignore` and `export-subst`, which drop test directories or rewrite
    version files in some repositories, so the tree would differ from the checkout SWE-bench's images hold."""
    destination.mkdir(parents=True)
    git_dir = _git(repository, ["rev-parse", "--absolute-git-dir"], name).strip()
    env = {"GIT_INDEX_FILE": str(index.resolve())}
    _git(repository, ["read-tree", commit], name, env=env)
    _git(repository, ["-c", "core.autocrlf=false", f"--git-dir={git_dir}", f"--work-tree={destination}",
                      "checkout-index", "--all", "--force"], name, env=env, cwd=destination)


def _resolve_commit(repository: Path, base_commit: str, name: str) -> str:
    try:
        return _git(repository, ["rev-parse", "--verify", "--quiet", f"{base_commit}^{{commit}}"], name).strip()
    except _InstanceError:
        raise _InstanceError(f"{name}: base_commit {base_commit} is not in {repository}; fetch it "
                             f"(git -C {repository} fetch origin {base_commit}) or point --repos at a "
                             "full clone") from None


def _git(repository: Path, args: list[str], name: str, *, env: dict[str, str] | None = None,
         cwd: Path | None = None) -> str:
    # The caller's GIT_DIR, GIT_INDEX_FILE, ... would redirect these commands to another repository.
    clean = {k: v for k, v in os.environ.items() if not k.startswith("GIT_")}
    argv = ["git", *args] if cwd else ["git", "-C", str(repository), *args]
    command = next(a for a in args if not a.startswith("-") and "=" not in a)
    try:
        result = subprocess.run(argv, capture_output=True, text=True, env={**clean, **(env or {})},
                                cwd=cwd, timeout=600)
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise _InstanceError(f"{name}: git {command} failed in {repository}: {exc}") from None
    if result.returncode != 0:
        raise _InstanceError(f"{name}: git {command} failed in {repository}: "
                             f"{result.stderr.strip()[-500:] or f'exit code {result.returncode}'}")
    return result.stdout


def _is_git_repository(path: Path) -> bool:
    """A work tree's top level or a bare repository: not merely a directory inside some other repository."""
    if (path / ".git").exists():
        return True
    return (path / "HEAD").is_file() and (path / "objects").is_dir() and (path / "refs").is_dir()


def _content_hash(instance: SWEBenchInstance, commit: str) -> str:
    """Changes with the instance, the resolved commit, and the code that writes and grades the task."""
    digest = hashlib.sha256(instance.model_dump_json().encode() + b"\0" + commit.encode())
    for source in (Path(__file__), GRADER):
        digest.update(b"\0" + source.read_bytes())
    return digest.hexdigest()[:12]


def _diff_paths(patch: str) -> list[tuple[str, str]]:
    """(a side, b side) of each `diff --git` header; SWE-bench passes the b side to the test runner."""
    paths = []
    for line in patch.splitlines():
        match = re.match(r'^diff --git (?:"a/(.+)"|a/(\S+)) (?:"b/(.+)"|b/(\S+))$', line)
        if match:
            paths.append((match.group(1) or match.group(2), match.group(3) or match.group(4)))
    return paths


def _describe(exc: ValidationError) -> str:
    parts = []
    for err in exc.errors():
        where = ".".join(str(part) for part in err["loc"]) or "(top level)"
        if err["type"] == "missing":
            parts.append(f"{where}: missing required field")
        else:
            shown = repr(err.get("input"))
            parts.append(f"{where}: {err['msg']} (got {shown[:80]})")
    return "; ".join(parts)


def _toml_string(value: str) -> str:
    """A TOML basic string: quotes and backslashes escaped, control characters as \\uXXXX."""
    escaped = "".join("\\" + c if c in '"\\' else f"\\u{ord(c):04x}" if ord(c) < 0x20 or c == "\x7f" else c
                      for c in value)
    return f'"{escaped}"'


def _suite_error(message: str) -> Exception:
    from sandbox.suites import SuiteError  # suites imports this module lazily; importing it at the top would cycle

    return SuiteError(message)
