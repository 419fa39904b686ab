"""The wheel ships every package of the product and its subpackages, and none of the tests' stand-ins; `make
install` puts the virtual environment's `leafcost` on PATH."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tomllib
from pathlib import Path

from setuptools import find_packages

ROOT = Path(__file__).parents[1]


def test_every_subpackage_is_shipped_and_no_test_code_is():
    config = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]["packages"]["find"]
    shipped = set(find_packages(str(ROOT), include=config["include"]))
    on_disk = {str(p.parent.relative_to(ROOT)).replace("/", ".") for p in ROOT.glob("*/**/__init__.py")
               if p.parts[len(ROOT.parts)] in {"compare", "adapters", "sandbox", "reports"}
               and "suites" not in p.parts}
    assert on_disk <= shipped and {"compare.arms", "compare.ledger"} <= shipped
    assert not {p for p in shipped if p.split(".")[0] in {"tests", "bench", "support"}}


def make(*args: str, path: str) -> subprocess.CompletedProcess[str]:
    """The project's Makefile, as a user runs it (not as a sub-make of `make test`)."""
    environment = {k: v for k, v in os.environ.items() if k not in {"MAKEFLAGS", "MFLAGS", "MAKELEVEL"}}
    return subprocess.run(["make", "--no-print-directory", "-C", str(ROOT), *args], capture_output=True, text=True,
                          env={**environment, "PATH": path}, timeout=300)


def test_make_install_links_the_venvs_leafcost_into_bindir_and_says_what_to_add_to_path(tmp_path):
    assert shutil.which("make"), "make is not installed: apt-get install make"
    venv_leafcost = ROOT / ".venv" / "bin" / "leafcost"
    assert Path(sys.executable).with_name("leafcost") == venv_leafcost, "these tests run from the project's .venv"
    bindir, path = tmp_path / "bin", os.environ["PATH"]
    # The venv is current (make test built it): installing must not touch it.
    planned = make("-n", "install", f"BINDIR={bindir}", path=path)
    assert planned.returncode == 0 and "pip install" not in planned.stdout, "the venv is out of date: run make deps"

    for _ in range(2):  # a second run replaces the link with the same one
        installed = make("install", f"BINDIR={bindir}", path=path)
        assert installed.returncode == 0, installed.stderr
        assert (bindir / "leafcost").readlink() == venv_leafcost  # absolute: works from any folder
        assert f'{bindir} is not on your PATH: add it (export PATH="{bindir}:$PATH" in ~/.profile)' in installed.stdout
    help_text = subprocess.run(["leafcost", "--help"], capture_output=True, text=True, cwd=tmp_path, timeout=120,
                               env={**os.environ, "PATH": f"{bindir}:/usr/bin:/bin"})
    assert help_text.returncode == 0 and "Usage: leafcost" in help_text.stdout, help_text.stderr

    on_path = make("install", f"BINDIR={bindir}", path=f"{bindir}:{path}")
    assert on_path.returncode == 0 and "not on your PATH" not in on_path.stdout


def test_make_install_leaves_another_leafcost_alone(tmp_path):
    other = tmp_path / "leafcost"
    other.write_text("#!/bin/sh\necho another leafcost\n")
    refused = make("install", f"BINDIR={tmp_path}", path=os.environ["PATH"])
    assert refused.returncode != 0 and other.read_text() == "#!/bin/sh\necho another leafcost\n"
    assert f"{other} exists and is not a link: remove it, or choose another folder with BINDIR=DIR" in refused.stdout
