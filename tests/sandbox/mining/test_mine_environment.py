"""Reading a candidate's project: each packaging file, the Python chosen by requires-python and the commit's date,
the hint's overrides, and what is never read (a link out of the tree, setup.py's code)."""

from __future__ import annotations

from datetime import date, datetime, timezone
from pathlib import Path

import pytest

from sandbox.mining.environment import choose_python, default_base_image, detect_project
from sandbox.mining.errors import Dropped
from sandbox.mining.hints import EnvHint

LATE_2024 = datetime(2024, 12, 1, tzinfo=timezone.utc)


def tree_of(tmp_path: Path, files: dict[str, str]) -> Path:
    for relative, text in files.items():
        path = tmp_path / "tree" / relative
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    return tmp_path / "tree"


PYPROJECT = """
[build-system]
requires = ["hatchling>=1.18"]
build-backend = "hatchling.build"

[project]
name = "My_Pkg"
requires-python = ">=3.9,<3.12"
dependencies = ["requests>=2.31", "attrs"]

[project.optional-dependencies]
test = ["pytest>=7", "my-pkg[speedups]"]
docs = ["sphinx"]
dev = ["ruff"]
"""


def test_pyproject_gives_dependencies_extras_build_backend_and_python(tmp_path):
    facts = detect_project(tree_of(tmp_path, {"pyproject.toml": PYPROJECT}), LATE_2024, None)
    assert facts.kind == "python"
    assert facts.python == "3.11"  # 3.13 was out, but <3.12
    assert facts.base_image == "docker.io/library/python:3.11-slim-bookworm"
    assert facts.env_install == ["pip install 'hatchling>=1.18'",
                                 "pip install 'requests>=2.31' attrs 'pytest>=7' ruff"]  # not itself, not docs
    assert facts.install == ["pip install --no-build-isolation -e '.[test,dev]'"]
    assert facts.dependency_files == {"pyproject.toml": PYPROJECT}
    assert (facts.test_command, facts.log_parser) == ("pytest -rA -p no:cacheprovider", "parse_log_pytest")


SETUP_CFG = """
[metadata]
name = cfgpkg

[options]
python_requires = >=3.7
install_requires =
    click>=8  # the CLI
    six

[options.extras_require]
testing =
    pytest
    pytest-mock
"""


def test_setup_cfg_gives_install_requires_and_extras(tmp_path):
    facts = detect_project(tree_of(tmp_path, {"setup.cfg": SETUP_CFG}), LATE_2024, None)
    assert facts.python == "3.13"
    assert facts.env_install == ["pip install 'setuptools>=40.8.0' wheel",  # no [build-system]: pip's default
                                 "pip install 'click>=8' six pytest pytest-mock"]
    assert facts.install == ["pip install --no-build-isolation -e '.[testing]'"]


SETUP_PY = """
import os
from setuptools import setup
raise SystemExit("setup.py must never be run by detection")
setup(
    name="pypkg",
    python_requires='>=3.6, !=3.7.*, <3.9',
    extras_require={
        "tests": ["pytest"],
        "docs": ["sphinx"],
    },
)
"""


def test_setup_py_is_read_by_pattern_never_run(tmp_path):
    facts = detect_project(tree_of(tmp_path, {"setup.py": SETUP_PY}), LATE_2024, None)
    assert facts.python == "3.8"  # the only minor >=3.6, not 3.7, <3.9 that is 3.8 or newer
    assert facts.install == ["pip install --no-build-isolation -e '.[tests]'"]
    assert facts.env_install == ["pip install 'setuptools>=40.8.0' wheel"]


def test_setup_py_extras_on_one_line_and_a_dict_by_name(tmp_path):
    one_line = 'from setuptools import setup\nsetup(name="p", extras_require={"test": ["pytest"], "dev": []})\n'
    assert detect_project(tree_of(tmp_path, {"setup.py": one_line}), LATE_2024, None).install == \
        ["pip install --no-build-isolation -e '.[test,dev]'"]
    by_name = 'EXTRAS = {"test": ["pytest"]}\nsetup(name="p", extras_require=EXTRAS)  # not read: a name\n'
    (tmp_path / "tree" / "setup.py").write_text(by_name)
    assert detect_project(tmp_path / "tree", LATE_2024, None).install == ["pip install --no-build-isolation -e ."]


def test_requirements_files_with_includes_and_the_project_line_left_out(tmp_path):
    tree = tree_of(tmp_path, {
        "requirements.txt": "-e .\nflask==2.0\n",
        "requirements-dev.txt": "-r requirements/base.txt\npytest\n",
        "requirements/base.txt": "-c ../constraints.txt\njinja2\n",
        "requirements/docs.txt": "sphinx\n",
        "constraints.txt": "jinja2<4\n",
    })
    facts = detect_project(tree, LATE_2024, None)
    assert facts.env_install == ["pip install -r requirements-dev.txt", "pip install -r requirements.txt",
                                 "pip install -r requirements/base.txt"]
    assert facts.dependency_files["requirements.txt"] == \
        "# (the project itself: installed in /testbed) -e .\nflask==2.0\n"
    assert facts.dependency_files["constraints.txt"] == "jinja2<4\n"  # reached through base.txt's -c
    assert "requirements/docs.txt" not in facts.dependency_files
    # Nothing to install: the tree itself goes on the venv's path.
    assert facts.install == ["echo /testbed > \"$(python -c 'import sysconfig; "
                             "print(sysconfig.get_paths()[\"purelib\"])')/leafcost-testbed.pth\""]


def test_a_link_out_of_the_tree_is_never_read(tmp_path):
    secret = tmp_path / "secret.txt"
    secret.write_text("do-not-read\n")
    tree = tree_of(tmp_path, {"requirements.txt": "six\n"})
    (tree / "requirements").mkdir()
    (tree / "requirements" / "test.txt").symlink_to(secret)
    (tree / "requirements-ci.txt").write_text("-r ../secret.txt\n")
    facts = detect_project(tree, LATE_2024, None)
    assert "do-not-read" not in str(facts.dependency_files)
    assert "requirements/test.txt" not in facts.dependency_files


def test_nothing_to_detect_and_no_hint_is_dropped(tmp_path):
    with pytest.raises(Dropped) as caught:
        detect_project(tree_of(tmp_path, {"README.md": "hi\n"}), LATE_2024, None)
    assert caught.value.reason == "no_project"
    assert "--env-hint" in str(caught.value)


def test_a_python_project_with_a_package_json_is_mined_as_python(tmp_path):
    # Node projects are mined too (test_mine_node.py); Python's files come first when a tree has both.
    tree = tree_of(tmp_path, {"pyproject.toml": PYPROJECT, "package.json": '{"scripts": {"test": "jest"}}'})
    assert detect_project(tree, LATE_2024, None).kind == "python"


def test_a_hint_overrides_and_its_install_replaces_every_detected_step(tmp_path):
    hint = EnvHint(python="3.10", system_packages=["libpq-dev"], install=["make install"],
                   test_command="pytest -rA tests/unit", env={"TZ": "UTC"})
    facts = detect_project(tree_of(tmp_path, {"pyproject.toml": PYPROJECT}), LATE_2024, hint)
    assert (facts.python, facts.base_image) == ("3.10", "docker.io/library/python:3.10-slim-bookworm")
    assert (facts.install, facts.env_install, facts.dependency_files) == (["make install"], [], {})
    assert (facts.test_command, facts.env, facts.system_packages) == ("pytest -rA tests/unit", {"TZ": "UTC"},
                                                                      ["libpq-dev"])


def test_a_hint_alone_makes_a_project(tmp_path):
    hint = EnvHint(base_image="localhost/mine:1", install=["./build.sh"])
    facts = detect_project(tree_of(tmp_path, {"build.sh": "true\n"}), datetime(2021, 1, 1, tzinfo=timezone.utc),
                           hint)
    assert (facts.python, facts.base_image, facts.install) == ("3.9", "localhost/mine:1", ["./build.sh"])


@pytest.mark.parametrize("spec, on, expected", [
    (None, date(2024, 10, 6), "3.12"),  # the day before 3.13
    (None, date(2024, 10, 7), "3.13"),
    (None, date(2019, 1, 1), "3.8"),  # 3.7 was the newest, but nothing older than 3.8 unless required
    (None, date(2012, 1, 1), "3.8"),
    ("<3.8", date(2024, 1, 1), "3.7"),  # required
    (">=2.7, !=3.0.*, !=3.1.*, <3.7", date(2024, 1, 1), "3.6"),
    (">=3.12", date(2023, 1, 1), "3.12"),  # none out yet: the oldest that fits
    ("~=3.9", date(2024, 1, 1), "3.12"),
    ("~=3.9.2", date(2024, 1, 1), "3.9"),
    ("==3.10.*", date(2024, 1, 1), "3.10"),
    (">3.10", date(2024, 1, 1), "3.12"),  # 3.10.1 > 3.10, but 3.11 and 3.12 are newer
    ("<=3.9", date(2024, 1, 1), "3.9"),
])
def test_python_version_by_requires_python_and_date(spec, on, expected):
    assert choose_python(spec, on) == expected


def test_a_requires_python_nothing_satisfies_is_dropped():
    with pytest.raises(Dropped, match=r"requires-python '>=4' matches no CPython 3.6-3.13: set python") as caught:
        choose_python(">=4", date(2024, 1, 1))
    assert caught.value.reason == "no_project"


def test_base_image_before_38_is_bullseye():
    assert default_base_image("3.7") == "docker.io/library/python:3.7-slim-bullseye"
    assert default_base_image("3.12") == "docker.io/library/python:3.12-slim-bookworm"
