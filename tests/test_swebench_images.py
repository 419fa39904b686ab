"""The SWE-bench-like instance images tests/swebench_images.py builds: one per fixture row, under the row's own
SWE-bench image name, with /testbed a git repository at the row's base_commit (a commit anyone can make again from
the fixture's files) and a `testbed` env that activates as SWE-bench's eval scripts activate it."""

from __future__ import annotations

import json
import subprocess
import pytest

from container_images import ULIMITS, ImageSetupError, podman_argv
from swebench_images import FIXTURES, ROWS, ensure_swebench_instance_images, image_name, make_build_context

pytestmark = pytest.mark.slow  # end to end: make test-fast leaves it out

ROW_LIST = [json.loads(line) for line in ROWS.read_text().splitlines() if line.strip()]
BY_ID = {row["instance_id"]: row for row in ROW_LIST}
LABEL = ["--label", "leafcost.test=swebench-images"]  # finds this file's leftovers, should a run be killed


@pytest.fixture(scope="module")
def instance_images() -> dict[str, str]:
    return ensure_swebench_instance_images()


def test_every_fixture_has_a_row_and_every_row_a_fixture():
    assert sorted(BY_ID) == sorted(path.name for path in FIXTURES.iterdir() if path.is_dir())
    assert {row["log_parser"] for row in ROW_LIST} == {"parse_log_pytest", "parse_log_pytest_options",
                                                        "parse_log_django", "parse_log_sympy"}


def test_each_image_is_tagged_with_its_rows_swebench_name_and_the_short_name_finds_it(instance_images):
    assert set(instance_images) == set(BY_ID)
    for instance_id, image_id in instance_images.items():
        row = BY_ID[instance_id]
        short = row["image"]
        assert short == f"swebench/sweb.eval.x86_64.{instance_id.replace('__', '_1776_')}:latest".lower()
        for name in (image_name(row), short):  # SWE-bench's harness names the short one
            assert podman("image", "inspect", "--format", "{{.Id}}", name).stdout.strip() == image_id, name


@pytest.mark.parametrize("instance_id", sorted(BY_ID))
def test_testbed_is_a_clean_checkout_of_the_base_commit(instance_images, instance_id):
    row = BY_ID[instance_id]
    done = run_in(row["image"], "git rev-parse HEAD^ && git log -1 --format=%s && "
                  "git status --porcelain --untracked-files=all")
    assert done.returncode == 0, done.stderr
    parent, subject, *changes = done.stdout.splitlines()
    # SWE-bench's images commit their set-up on top of the base commit; the eval script resets tests to the base.
    assert parent == row["base_commit"] == row["environment_setup_commit"] and subject == "SWE-bench"
    assert changes == []  # an install's leftovers (egg-info) are ignored by the fixture's .gitignore


def test_the_base_commit_is_made_again_from_the_fixture_files_whatever_the_hosts_git_says(tmp_path, monkeypatch):
    instance_id = "leafcost-fixtures__djangolike-3"  # has an executable (tests/runtests.py): modes are in the hash
    first = make_build_context(FIXTURES / instance_id, tmp_path / "first")
    for name, value in {"GIT_AUTHOR_NAME": "someone else", "GIT_COMMITTER_DATE": "2001-01-01T00:00:00+0000",
                        "GIT_AUTHOR_DATE": "2001-01-01T00:00:00+0000"}.items():
        monkeypatch.setenv(name, value)  # the host's own git identity and dates must not leak into the commit
    second = make_build_context(FIXTURES / instance_id, tmp_path / "second")
    assert first == second == BY_ID[instance_id]["base_commit"]
    assert (tmp_path / "second" / "Dockerfile").read_bytes() == (FIXTURES / instance_id / "Dockerfile").read_bytes()


def test_the_testbed_env_activates_and_holds_the_installed_src_layout_package(instance_images):
    image = BY_ID["leafcost-fixtures__srclayout-1"]["image"]
    activated = run_in(image, "source /opt/miniconda3/bin/activate && conda activate testbed && cd / && "
                              "python -c 'import slugkit; print(slugkit.__file__)' && command -v python pytest")
    assert activated.returncode == 0, activated.stderr
    env = "/opt/miniconda3/envs/testbed/bin"
    assert activated.stdout.splitlines() == ["/testbed/src/slugkit/__init__.py", f"{env}/python", f"{env}/pytest"]
    # Only the env has it: the src/ layout is importable once installed, not from /testbed itself.
    assert run_in(image, "/usr/bin/python3 -c 'import slugkit'").returncode != 0


def test_ensuring_again_rebuilds_nothing(instance_images):
    created = {iid: podman("image", "inspect", "--format", "{{.Created}}", image_name(BY_ID[iid])).stdout
               for iid in instance_images}
    assert ensure_swebench_instance_images() == instance_images
    assert {iid: podman("image", "inspect", "--format", "{{.Created}}", image_name(BY_ID[iid])).stdout
            for iid in instance_images} == created


def test_a_row_whose_base_commit_the_files_do_not_make_is_refused_naming_both(instance_images, tmp_path):
    row = dict(BY_ID["leafcost-fixtures__sympylike-4"], base_commit="0" * 40)
    rows = tmp_path / "instances.jsonl"
    rows.write_text(json.dumps(row) + "\n")
    with pytest.raises(ImageSetupError, match=f"is {BY_ID[row['instance_id']]['base_commit']}.*is {'0' * 40}"):
        ensure_swebench_instance_images(rows)
    # Refused before building: the image of the real row is still the one built for it.
    assert podman("image", "inspect", "--format", "{{.Id}}", image_name(row)).stdout.strip() == \
        instance_images[row["instance_id"]]


def run_in(image: str, script: str) -> subprocess.CompletedProcess[str]:
    """`script` run by bash as root in /testbed, in a fresh offline container of `image`."""
    return podman("run", "--rm", "--network", "none", *ULIMITS, *LABEL, "--user", "root", "-w", "/testbed", image,
                  "bash", "-c", script)


def podman(*args: str, timeout: float = 300) -> subprocess.CompletedProcess[str]:
    return subprocess.run([*podman_argv(), *args], capture_output=True, text=True, timeout=timeout)
