"""The SWE-bench-like instance images the SWE-bench tests run: one per fixture in tests/fixtures/swebench, each
tagged with its row's `image` as SWE-bench names them (`swebench/sweb.eval.x86_64.<id>:latest`), with the
fixture's repository at /testbed as a git repository at the row's base_commit, with SWE-bench's set-up commit on top;
and copies of the fixture instances under other ids (copy_instances: one more tag on the same image).

The fixture repositories are kept as plain files; the one commit made of them is deterministic (fixed names,
dates and message, no host git configuration), so its hash can be written in the rows. An image is rebuilt only
when the fixture's files, its Dockerfile, the base image or the row's base_commit change (their hash is a label).
Standard library only, like container_images.py.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import subprocess
import tempfile
from collections.abc import Mapping
from pathlib import Path

from container_images import ULIMITS, ImageSetupError, _machine_lock, _podman, ensure_swebench_base_image, podman_argv

FIXTURES = Path(__file__).parent / "fixtures" / "swebench"
ROWS = FIXTURES / "instances.jsonl"
CONTENT_LABEL = "leafcost.test.swebench-fixture-sha256"
# Files a test run or an editable install can leave in a fixture's repo/ on the host; never part of the commit.
_JUNK_DIRS = {"__pycache__", ".pytest_cache", ".git"}
_JUNK_SUFFIXES = (".pyc", ".egg-info")
_COMMIT_IDENTITY = {
    "GIT_AUTHOR_NAME": "leafcost fixtures", "GIT_AUTHOR_EMAIL": "fixtures@leafcost.invalid",
    "GIT_AUTHOR_DATE": "2024-01-01T00:00:00+0000",
    "GIT_COMMITTER_NAME": "leafcost fixtures", "GIT_COMMITTER_EMAIL": "fixtures@leafcost.invalid",
    "GIT_COMMITTER_DATE": "2024-01-01T00:00:00+0000",
}
COMMIT_MESSAGE = "leafcost SWE-bench fixture: the repository at its base commit"


def ensure_swebench_instance_images(rows: Path = ROWS) -> dict[str, str]:
    """{instance_id: image id} for every row of `rows` that has a fixture directory, each image built (or found
    already built from the same content) and tagged `docker.io/<row image>`."""
    instances = [row for row in _read_rows(rows) if (FIXTURES / row["instance_id"]).is_dir()]
    base_id = _image_id(ensure_swebench_base_image())  # before the lock: it takes the same lock itself
    wanted = {row["instance_id"]: (row, _content_hash(row, base_id)) for row in instances}
    found = {iid: _current_image(row, digest) for iid, (row, digest) in wanted.items()}
    if all(found.values()):
        return {iid: image_id for iid, image_id in found.items() if image_id}
    images = {}
    with _machine_lock():
        for iid, (row, digest) in wanted.items():
            images[iid] = _current_image(row, digest) or _build_instance(row, digest, rows)
    return images


def copy_instances(copies: Mapping[str, str], rows: Path = ROWS) -> list[dict]:
    """Rows for `copies` ({new instance id: fixture instance id}), in that order: the fixture's row under the new id,
    its `image` named as SWE-bench names the new id's image, and that name tagged onto the fixture's image (a
    `podman tag`, no build: a copy is the same image under another name). The fixture images are built first if
    they are missing or stale. Callers change what else should differ (problem statement, created_at)."""
    by_id = {row["instance_id"]: row for row in _read_rows(rows)}
    unknown = sorted(set(copies.values()) - set(by_id))
    if unknown:
        raise ImageSetupError(f"copy_instances: no fixture row {', '.join(unknown)} in {rows}")
    images = ensure_swebench_instance_images(rows)
    copied = []
    for new_id, original in copies.items():
        row = dict(by_id[original], instance_id=new_id, image=_copy_image(by_id[original]["image"], original, new_id))
        if _current_image(row, None) != images[original]:
            _podman("tag", images[original], image_name(row))
        copied.append(row)
    return copied


def make_build_context(instance_dir: Path, destination: Path) -> str:
    """Writes `instance_dir`'s Dockerfile and its repo/ made a git repository of one deterministic commit into
    `destination` (an empty or missing directory); returns that commit's hash."""
    repo = destination / "repo"
    repo.mkdir(parents=True)
    for relative in _fixture_files(instance_dir / "repo"):
        target = repo / relative
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(instance_dir / "repo" / relative, target)
        # git records only whether a file is executable; nothing else of the host's mode should matter.
        target.chmod(0o755 if os.access(instance_dir / "repo" / relative, os.X_OK) else 0o644)
    shutil.copyfile(instance_dir / "Dockerfile", destination / "Dockerfile")
    _git(repo, "init", "--quiet", "--template=", "--initial-branch=main")
    _git(repo, "add", "--all")
    _git(repo, "-c", "commit.gpgsign=false", "commit", "--quiet", "--no-verify", "-m", COMMIT_MESSAGE)
    return _git(repo, "rev-parse", "HEAD").strip()


def image_name(row: dict) -> str:
    """The fully qualified name a row's `image` is tagged with; podman resolves the short name to it."""
    return f"docker.io/{row['image']}"


def _copy_image(image: str, original: str, new_id: str) -> str:
    """The row's image name with the original instance's id (as SWE-bench writes it, `__` as `_1776_`) replaced by
    the copy's."""
    written = original.replace("__", "_1776_")
    if written not in image:
        raise ImageSetupError(f"copy_instances: {original}'s image {image} does not name its instance id")
    return image.replace(written, new_id.replace("__", "_1776_"))


def _read_rows(rows: Path) -> list[dict]:
    return [json.loads(line) for line in rows.read_text().splitlines() if line.strip()]


def _current_image(row: dict, digest: str | None) -> str | None:
    """The image ID when the row's image exists and was built from this content (from any, for None)."""
    found = subprocess.run([*podman_argv(), "image", "inspect", "--format",
                            f'{{{{.Id}}}} {{{{index .Labels "{CONTENT_LABEL}"}}}}', image_name(row)],
                           capture_output=True, text=True)
    image_id, _, label = found.stdout.strip().partition(" ")
    return image_id if found.returncode == 0 and digest in (None, label) else None


def _build_instance(row: dict, digest: str, rows: Path) -> str:
    instance_dir = FIXTURES / row["instance_id"]
    with tempfile.TemporaryDirectory(prefix=f"swebench-{row['instance_id']}-") as scratch:
        context = Path(scratch) / "context"
        commit = make_build_context(instance_dir, context)
        if commit != row["base_commit"]:
            raise ImageSetupError(
                f"{row['instance_id']}: the commit made of {instance_dir / 'repo'} is {commit}, but the row's "
                f"base_commit is {row['base_commit']}: the fixture's files changed, so write {commit} as its "
                f"base_commit (and environment_setup_commit and the eval_script's) in {rows}, or undo the change")
        before = _current_image(row, None)
        _podman("build", *ULIMITS, "--pull=never", "--label", f"{CONTENT_LABEL}={digest}",
                "--label", f"leafcost.test.swebench-instance={row['instance_id']}",
                "-t", image_name(row), str(context), timeout=1800)
    image_id = _image_id(image_name(row))
    if before and before != image_id:
        # The superseded build has no name left; it stays only while a container uses it.
        subprocess.run([*podman_argv(), "rmi", before], capture_output=True)
    return image_id


def _content_hash(row: dict, base_id: str) -> str:
    """sha256 over the fixture's files (path, executable bit, bytes), its Dockerfile, the base image's ID and the
    row's base_commit (a row that names another commit must be checked against the files again)."""
    instance_dir = FIXTURES / row["instance_id"]
    digest = hashlib.sha256(f"base {base_id}\ncommit {row['base_commit']}\n".encode())
    for relative in [Path("Dockerfile"), *(Path("repo") / name for name in _fixture_files(instance_dir / "repo"))]:
        path = instance_dir / relative
        data = path.read_bytes()
        digest.update(f"{relative.as_posix()} {int(os.access(path, os.X_OK))} {len(data)}\n".encode() + data)
    return digest.hexdigest()


def _fixture_files(root: Path) -> list[Path]:
    """The fixture repository's files relative to `root`, sorted, without what tests or installs leave behind."""
    files = []
    for directory, subdirs, names in os.walk(root):
        subdirs[:] = sorted(name for name in subdirs if name not in _JUNK_DIRS and not name.endswith(_JUNK_SUFFIXES))
        files += [Path(directory, name).relative_to(root) for name in names if not name.endswith(_JUNK_SUFFIXES)]
    return sorted(files)


def _git(repo: Path, *args: str) -> str:
    # The host's GIT_* variables and git configuration (hooks, filters, autocrlf, signing) could change the commit.
    env = {key: value for key, value in os.environ.items() if not key.startswith("GIT_")}
    env.update(_COMMIT_IDENTITY, GIT_CONFIG_GLOBAL=os.devnull, GIT_CONFIG_NOSYSTEM="1", GIT_CONFIG_SYSTEM=os.devnull)
    done = subprocess.run(["git", *args], cwd=repo, env=env, capture_output=True, text=True)
    if done.returncode != 0:
        raise ImageSetupError(f"`git {' '.join(args)}` in {repo} failed (exit {done.returncode}): {done.stderr[-800:]}")
    return done.stdout


def _image_id(name: str) -> str:
    return _podman("image", "inspect", "--format", "{{.Id}}", name).strip()
