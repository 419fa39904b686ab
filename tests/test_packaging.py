"""The wheel ships every package of the product and its subpackages, and none of the tests' stand-ins."""

from __future__ import annotations

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
