"""What a mined candidate's environment needs, read from what the project declares at the candidate's parent commit
(never by running the project's code): the Python version, the base image, the dependency files and their install
steps, the project's own install, and the test command. An `--env-hint` file overrides any of it."""

from __future__ import annotations

import configparser
import posixpath
import re
import shlex
import tomllib
from datetime import date, datetime
from pathlib import Path
from typing import Literal

from pydantic import BaseModel, Field

from sandbox.mining.errors import Dropped
from sandbox.mining.hints import EnvHint

VENV = "/opt/leafcost-venv"
DEFAULT_TEST_COMMAND = "pytest -rA -p no:cacheprovider"
# The first day each CPython minor was released (x.y.0 final): a fact table, the newest entry the newest leafcost mines.
CPYTHON_RELEASES = {
    (3, 6): date(2016, 12, 23), (3, 7): date(2018, 6, 27), (3, 8): date(2019, 10, 14), (3, 9): date(2020, 10, 5),
    (3, 10): date(2021, 10, 4), (3, 11): date(2022, 10, 24), (3, 12): date(2023, 10, 2), (3, 13): date(2024, 10, 7),
}
OLDEST_PREFERRED = (3, 8)  # older only when the project requires it: older images lack much of today's tooling
TEST_EXTRAS = ("test", "tests", "testing", "dev")
# pip's own default for a project without [build-system]
LEGACY_BUILD_REQUIRES = ["setuptools>=40.8.0", "wheel"]
_DEPENDENCY_FILE_CAP = 1 << 20


class ProjectFacts(BaseModel):
    """How to build and test one candidate's project. `dependency_files` (a path in the tree → its content, as the
    env image receives it) with `base_image`, `python`, `system_packages`, `env_install` and `env` key the env image
    that every candidate with the same dependency set shares; `install` runs in /testbed of each instance image."""

    kind: Literal["python"]
    python: str  # CPython minor, "3.11"
    base_image: str
    system_packages: list[str] = Field(default_factory=list)
    dependency_files: dict[str, str] = Field(default_factory=dict)
    env_install: list[str] = Field(default_factory=list)  # run beside the dependency files in the env image
    install: list[str] = Field(default_factory=list)  # run in /testbed of the instance image
    test_command: str = DEFAULT_TEST_COMMAND  # the touched test files are appended
    log_parser: str = "parse_log_pytest"
    env: dict[str, str] = Field(default_factory=dict)
    sources: list[str] = Field(default_factory=list)  # what was read: "pyproject.toml", "hint", ...


def detect_project(tree: Path, committed_at: datetime, hint: EnvHint | None) -> ProjectFacts:
    """The facts of the project checked out at `tree` as of `committed_at` (which picks its Python); the hint's
    settings win. Dropped("no_project") when there is neither a Python project nor a hint."""
    tree = Path(tree)
    python = _PythonProject.read(tree)
    if not python.found and hint is None:
        if _regular_file(tree, "package.json"):
            raise Dropped("no_project", "package.json found, but Node projects are not mined yet: leafcost mines "
                                        "Python projects (pyproject.toml, setup.py, setup.cfg, requirements files)")
        raise Dropped("no_project", "no pyproject.toml, setup.py, setup.cfg or requirements file at the parent "
                                    "commit, and no --env-hint: give one with install and test_command")
    hint = hint or EnvHint()
    version = hint.python or choose_python(python.requires_python, committed_at.date())
    facts = ProjectFacts(
        kind="python", python=version, base_image=hint.base_image or default_base_image(version),
        system_packages=list(hint.system_packages), test_command=hint.test_command or DEFAULT_TEST_COMMAND,
        env=dict(hint.env), sources=python.sources + (["hint"] if hint != EnvHint() else []))
    if hint.install is not None:  # the buyer's commands replace every detected step: the env has no dependencies
        return facts.model_copy(update={"install": list(hint.install)})
    return facts.model_copy(update={"dependency_files": python.dependency_files, "env_install": python.env_install(),
                                    "install": python.install()})


def choose_python(requires_python: str | None, on: date) -> str:
    """The newest CPython minor that satisfies `requires_python` and was out on `on`; never older than 3.8 unless
    the project requires it; the oldest that satisfies when none was out yet. Dropped when none satisfies."""
    fitting = [minor for minor in sorted(CPYTHON_RELEASES) if _satisfies(minor, requires_python)]
    if not fitting:
        raise Dropped("no_project", f"requires-python {requires_python!r} matches no CPython "
                                    f"{_name(min(CPYTHON_RELEASES))}-{_name(max(CPYTHON_RELEASES))}: set python in "
                                    "an --env-hint file")
    released = [minor for minor in fitting if CPYTHON_RELEASES[minor] <= on]
    chosen = released[-1] if released else fitting[0]
    if chosen < OLDEST_PREFERRED:
        chosen = next((minor for minor in fitting if minor >= OLDEST_PREFERRED), chosen)
    return _name(chosen)


def default_base_image(python: str) -> str:
    """Docker's official Python image for `python` on Debian bookworm (bullseye before 3.8, which has no bookworm
    build)."""
    minor = tuple(int(part) for part in python.split("."))
    return f"docker.io/library/python:{python}-slim-{'bookworm' if minor >= (3, 8) else 'bullseye'}"


class _PythonProject:
    """What the Python packaging files of a tree declare, read as text (setup.py is never run)."""

    def __init__(self, tree: Path):
        self.tree = tree
        self.sources: list[str] = []
        self.dependency_files: dict[str, str] = {}
        self.requires_python: str | None = None
        self.name: str | None = None
        self.dependencies: list[str] = []  # from pyproject/setup.cfg: installed in the env image
        self.extras: list[str] = []
        self.build_requires: list[str] = []
        self.installable = False
        self.requirement_files: list[str] = []

    @property
    def found(self) -> bool:
        return bool(self.sources)

    @classmethod
    def read(cls, tree: Path) -> _PythonProject:
        project = cls(tree)
        project._pyproject()
        project._setup_cfg()
        project._setup_py()
        project._requirements()
        return project

    def env_install(self) -> list[str]:
        """The env image's steps: build requirements, declared dependencies, then each requirements file."""
        steps = []
        if self.installable:  # --no-build-isolation builds with what the env holds
            steps.append(_pip_install(self.build_requires or LEGACY_BUILD_REQUIRES))
        own = _normalized(self.name) if self.name else None
        declared = [item for item in dict.fromkeys(self.dependencies) if _requirement_name(item) != own]
        if declared:
            steps.append(_pip_install(declared))
        steps += [f"pip install -r {shlex.quote(path)}" for path in self.requirement_files]
        return steps

    def install(self) -> list[str]:
        """The project's own install in /testbed: editable, with its test extras, built by the backend the env image
        already holds; a tree with nothing to install is put on the venv's path instead."""
        if not self.installable:
            return ["echo /testbed > \"$(python -c 'import sysconfig; print(sysconfig.get_paths()[\"purelib\"])')"
                    "/leafcost-testbed.pth\""]
        target = f".[{','.join(self.extras)}]" if self.extras else "."
        return [f"pip install --no-build-isolation -e {shlex.quote(target)}"]

    def _pyproject(self) -> None:
        text = self._keep("pyproject.toml")
        if text is None:
            return
        try:
            data = tomllib.loads(text)
        except tomllib.TOMLDecodeError:
            return
        project = data.get("project") if isinstance(data.get("project"), dict) else {}
        build = data.get("build-system") if isinstance(data.get("build-system"), dict) else {}
        self.installable = self.installable or bool(build) or bool(project)
        self.name = self.name or _string(project.get("name"))
        self.requires_python = self.requires_python or _string(project.get("requires-python"))
        self.dependencies += _strings(project.get("dependencies"))
        optional = project.get("optional-dependencies")
        self._add_extras(optional if isinstance(optional, dict) else {})
        groups = data.get("dependency-groups")  # PEP 735: plain strings only (include-group tables are skipped)
        for group in TEST_EXTRAS:
            self.dependencies += _strings(groups.get(group)) if isinstance(groups, dict) else []
        self.build_requires = _strings(build.get("requires")) or self.build_requires

    def _setup_cfg(self) -> None:
        text = self._keep("setup.cfg")
        if text is None:
            return
        parser = configparser.RawConfigParser()
        try:
            parser.read_string(text)
        except configparser.Error:
            return
        if parser.has_section("metadata") or parser.has_section("options"):
            self.installable = True
        self.name = self.name or (parser.get("metadata", "name", fallback="") or None)
        self.requires_python = self.requires_python or (parser.get("options", "python_requires", fallback="")
                                                        or None)
        self.dependencies += _lines(parser.get("options", "install_requires", fallback=""))
        if parser.has_section("options.extras_require"):
            self._add_extras({key: _lines(value) for key, value in parser.items("options.extras_require")})

    def _setup_py(self) -> None:
        text = self._keep("setup.py")
        if text is None:
            return
        self.installable = True
        found = re.search(r"""python_requires\s*=\s*(?P<q>['"])(?P<spec>[^'"\n]+)(?P=q)""", text)
        if found and self.requires_python is None:
            self.requires_python = found.group("spec")
        extras = _literal_dict(text, "extras_require")
        for name in TEST_EXTRAS:  # keys of a literal extras_require dict: pip ignores an extra that is not there
            if re.search(rf"""['"]{name}['"]\s*:""", extras) and name not in self.extras:
                self.extras.append(name)

    def _requirements(self) -> None:
        candidates = sorted(self.tree.glob("requirements*.txt")) + sorted(self.tree.glob("*-requirements.txt")) \
            + sorted(self.tree.glob("requirements/*.txt"))
        for path in candidates:
            relative = path.relative_to(self.tree).as_posix()
            if "doc" in relative.lower() or relative in self.requirement_files:
                continue  # documentation builds are not what the tests need
            if self._requirement_file(relative):
                self.requirement_files.append(relative)

    def _requirement_file(self, relative: str, depth: int = 0) -> bool:
        """Keeps a requirements file without its lines that install the project itself (the instance does), and the
        files it includes with -r/-c."""
        if relative in self.dependency_files:
            return True
        text = self._keep(relative, source=depth == 0)
        if text is None:
            return False
        kept = []
        for line in text.splitlines():
            included = re.match(r"\s*(?:-r|-c|--requirement|--constraint)[\s=]+(\S+)", line)
            if included and depth < 5:
                target = posixpath.normpath(posixpath.join(posixpath.dirname(relative), included.group(1)))
                self._requirement_file(target, depth + 1)
            kept.append("# (the project itself: installed in /testbed) " + line if _names_a_directory(line) else line)
        self.dependency_files[relative] = "\n".join(kept) + "\n"
        return True

    def _add_extras(self, extras: dict) -> None:
        for name in TEST_EXTRAS:
            if name in extras:
                self.dependencies += _strings(extras[name])
                if name not in self.extras:
                    self.extras.append(name)

    def _keep(self, relative: str, source: bool = True) -> str | None:
        """A dependency file's text, recorded; None when it is missing, a link or a directory, outside the tree,
        too big or not text (the tree is the buyer's: nothing outside it is ever read)."""
        if not _regular_file(self.tree, relative):
            return None
        path = self.tree / relative
        try:
            if path.stat().st_size > _DEPENDENCY_FILE_CAP:
                return None
            text = path.read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError):
            return None
        self.dependency_files[relative] = text
        if source:
            self.sources.append(relative)
        return text


def _regular_file(tree: Path, relative: str) -> bool:
    """Whether `relative` is a regular file inside `tree` reached through no link (a link may point anywhere on the
    host)."""
    parts = Path(relative).parts
    if not parts or ".." in parts or Path(relative).is_absolute():
        return False
    path = tree
    for part in parts:
        path = path / part
        if path.is_symlink():
            return False
    return path.is_file()


def _literal_dict(text: str, keyword: str) -> str:
    """The text of the `{...}` literal given to `keyword=` in setup.py, braces balanced; "" when it is no literal."""
    found = re.search(rf"\b{keyword}\s*=\s*\{{", text)
    if not found:
        return ""
    depth = 0
    for index in range(found.end() - 1, len(text)):
        depth += {"{": 1, "}": -1}.get(text[index], 0)
        if depth == 0:
            return text[found.end() - 1:index + 1]
    return ""


def _satisfies(minor: tuple[int, int], spec: str | None) -> bool:
    """Whether some release of CPython `minor` satisfies the PEP 440 specifier `spec` (None: any)."""
    clauses = [clause.strip() for clause in (spec or "").split(",") if clause.strip()]
    return any(all(_clause_allows(clause, (*minor, patch)) for clause in clauses) for patch in range(0, 30))


def _clause_allows(clause: str, version: tuple[int, ...]) -> bool:
    found = re.fullmatch(r"(===|==|!=|~=|>=|<=|>|<)\s*v?([0-9]+(?:\.[0-9]+)*)(\.\*)?\S*", clause)
    if not found:
        return True  # a clause leafcost cannot read does not rule a version out
    operator, text, wildcard = found.groups()
    wanted = tuple(int(part) for part in text.split("."))
    if wildcard and operator in ("==", "!=", "==="):
        matches = version[:len(wanted)] == wanted
        return matches if operator in ("==", "===") else not matches
    width = max(len(wanted), len(version))
    mine, theirs = version + (0,) * (width - len(version)), wanted + (0,) * (width - len(wanted))
    if operator == "~=":
        return mine >= theirs and version[:len(wanted) - 1] == wanted[:-1]
    return {"==": mine == theirs, "===": mine == theirs, "!=": mine != theirs, ">=": mine >= theirs,
            "<=": mine <= theirs, ">": mine > theirs, "<": mine < theirs}[operator]


def _name(minor: tuple[int, int]) -> str:
    return f"{minor[0]}.{minor[1]}"


def _pip_install(requirements: list[str]) -> str:
    return "pip install " + " ".join(shlex.quote(item) for item in requirements)


def _names_a_directory(line: str) -> bool:
    """A requirements line that installs a local directory (`.`, `-e .[test]`, `file:.`): not there in the env."""
    target = re.sub(r"^\s*(?:-e|--editable)[\s=]+", "", line).strip()
    return bool(re.match(r"(?:\.|\.\.|file:)(?:$|[/\[\s])", target) or target.startswith(("./", "../")))


def _requirement_name(requirement: str) -> str:
    found = re.match(r"\s*([A-Za-z0-9][A-Za-z0-9._-]*)", requirement)
    return _normalized(found.group(1)) if found else ""


def _normalized(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def _string(value: object) -> str | None:
    return value if isinstance(value, str) and value.strip() else None


def _strings(value: object) -> list[str]:
    return [item for item in value if isinstance(item, str) and item.strip()] if isinstance(value, list) else []


def _lines(value: str) -> list[str]:
    """setup.cfg's dangling list: one requirement a line, comments dropped."""
    return [line.split("#", 1)[0].strip() for line in value.splitlines() if line.split("#", 1)[0].strip()]
