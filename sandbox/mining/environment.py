"""What a mined candidate's environment needs, read from what the project declares at the candidate's parent commit
(never by running the project's code): the Python or Node version, the base image, the dependency files and their
install steps, the project's own install, the test command and its log parser. Python projects (pyproject.toml,
setup.cfg, setup.py, requirements files) come first; a tree with none of them and a package.json at its root is a
Node project. An `--env-hint` file overrides any of it."""

from __future__ import annotations

import configparser
import json
import os
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
_LOCKFILE_CAP = 32 << 20  # a large project's package-lock.json runs to megabytes
# The day each Node major became LTS ("Active LTS start"): a fact table, the newest entry the newest leafcost mines.
NODE_LTS_RELEASES = {14: date(2020, 10, 27), 16: date(2021, 10, 26), 18: date(2022, 10, 25), 20: date(2023, 10, 24),
                     22: date(2024, 10, 29)}
NODE_TEST_RUNNER_MAJOR = 18  # `node --test --test-reporter=tap` (18.15 on; Docker's node:18 images are 18.20)
# vitest colours its marks when a CI variable is set; the log parsers read plain text.
NODE_IMAGE_ENV = {"NO_COLOR": "1"}
# Each runner's command (the touched test files are appended), swebench's parser for its output, and the files it
# runs by default (a regex on the whole path), so a candidate is tested only on files its runner would run.
# `npx --no-install` runs the project's own node_modules/.bin copy or fails: a plain npx with no TTY fetches the
# registry's newest release of a runner node_modules lacks (jest 30 for a jest 29 project, on a run here) and grades
# with it. npm 6's flag; npm 7 and later read it as --yes=false (their `npx --no jest` ran npm itself).
_SCRIPT_EXT = r"\.[cm]?[jt]sx?"
_JS_EXT = r"\.[cm]?js"


class NodeRunner(BaseModel):
    """How one Node test runner is run, read and told which files are tests."""

    command: str
    log_parser: str
    test_file: str  # regex on the whole path, fullmatch
    described: str  # the rule, as a dropped candidate's detail names it


NODE_RUNNERS = {
    "jest": NodeRunner(command="npx --no-install jest --verbose", log_parser="parse_log_jest",
                       test_file=rf"(?:.*/)?__tests__/.*{_SCRIPT_EXT}|(?:.*/)?(?:[^/]*\.)?(?:test|spec){_SCRIPT_EXT}",
                       described="jest's testMatch: __tests__/*, *.test.*, *.spec.*"),
    "vitest": NodeRunner(command="npx --no-install vitest run --reporter=verbose", log_parser="parse_log_vitest",
                         test_file=rf"(?:.*/)?[^/]*\.(?:test|spec){_SCRIPT_EXT}",
                         described="vitest's include: *.test.*, *.spec.*"),
    "mocha": NodeRunner(command="npx --no-install mocha --reporter tap", log_parser="parse_log_tap",
                        test_file=rf"(?:.*/)?(?:test|tests|spec)/(?!(?:.*/)?(?:fixtures?|helpers?|support)/)[^/].*"
                                  rf"{_JS_EXT}|(?:.*/)?[^/]*\.(?:test|spec){_JS_EXT}",
                        described="mocha's spec files: test/*.js, *.test.js, *.spec.js"),
    "node": NodeRunner(command="node --test --test-reporter=tap", log_parser="parse_log_tap",
                       test_file=rf"(?:.*/)?test/.*{_JS_EXT}|(?:.*/)?(?:[^/]+[.\-_]test|test-[^/]+|test){_JS_EXT}",
                       described="node --test's files: test/**/*.js, *.test.js, *-test.js, *_test.js, test-*.js"),
}
# Runners leafcost has no log parser wiring for: a project using one is dropped with its name.
_OTHER_RUNNERS = ("ava", "tap", "tape", "jasmine", "karma", "uvu", "@playwright/test", "cypress", "qunit", "@hapi/lab",
                  "lab", "bun", "react-scripts")
_NPM_PLACEHOLDER_TEST = "no test specified"  # `npm init`'s scripts.test


class ProjectFacts(BaseModel):
    """How to build and test one candidate's project. `dependency_files` (a path in the tree → its content, as the
    env image receives it) with `base_image`, `python` or `node`, `system_packages`, `env_install` and `env` key the
    env image that every candidate with the same dependency set shares; `install` runs in /testbed of each instance
    image."""

    kind: Literal["python", "node"]
    python: str | None = None  # CPython minor, "3.11" (a Python project)
    node: str | None = None  # Node major, "20" (a Node project)
    runner: str | None = None  # a Node project's test runner: a key of NODE_RUNNERS
    base_image: str
    system_packages: list[str] = Field(default_factory=list)
    dependency_files: dict[str, str] = Field(default_factory=dict)
    env_install: list[str] = Field(default_factory=list)  # run beside the dependency files in the env image
    install: list[str] = Field(default_factory=list)  # run in /testbed of the instance image
    test_command: str = DEFAULT_TEST_COMMAND  # the touched test files are appended
    log_parser: str = "parse_log_pytest"
    env: dict[str, str] = Field(default_factory=dict)
    sources: list[str] = Field(default_factory=list)  # what was read: "pyproject.toml", "hint", ...

    @property
    def version(self) -> str:
        """The runtime the project was built for: the row's `version` ("3.11", or "node20")."""
        return self.python if self.kind == "python" and self.python else f"node{self.node}"

    def runnable_tests(self, paths: list[str]) -> list[str]:
        """The files among `paths` the project's test runner runs by default: pytest's test modules (test_*.py,
        *_test.py; a conftest.py or a data file named on its command line makes it run nothing), or the Node
        runner's test files (never under node_modules)."""
        if self.kind == "python":
            return [path for path in paths if re.fullmatch(r"test_.*\.py|.*_test\.py", Path(path).name)]
        pattern = NODE_RUNNERS[self.runner or "node"].test_file
        return [path for path in paths if "node_modules" not in Path(path).parts and re.fullmatch(pattern, path)]

    def test_files_described(self) -> str:
        """Which files `runnable_tests` keeps, in words."""
        if self.kind == "python":
            return "test modules pytest collects (test_*.py, *_test.py)"
        return NODE_RUNNERS[self.runner or "node"].described


def detect_project(tree: Path, committed_at: datetime, hint: EnvHint | None) -> ProjectFacts:
    """The facts of the project checked out at `tree` as of `committed_at` (which picks its Python); the hint's
    settings win. Dropped("no_project") when there is neither a Python project nor a hint."""
    tree = Path(tree)
    python = _PythonProject.read(tree)
    hinted = hint or EnvHint()
    if (hinted.node is not None and hinted.python is None) or (
            not python.found and hinted.python is None and _regular_file(tree, "package.json")):
        return _node_facts(tree, committed_at, hint)
    if not python.found and hint is None:
        raise Dropped("no_project", "no pyproject.toml, setup.py, setup.cfg, requirements file or package.json at "
                                    "the parent commit, and no --env-hint: give one with install and test_command")
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


def choose_node(engines_node: str | None, on: date) -> str:
    """The newest Node LTS major that satisfies `engines_node` (package.json's engines.node, a semver range) and was
    LTS on `on`; the oldest that satisfies when none was yet. Dropped when none satisfies."""
    fitting = [major for major in sorted(NODE_LTS_RELEASES) if _semver_allows_major(engines_node, major)]
    if not fitting:
        raise Dropped("no_project", f"engines.node {engines_node!r} matches no Node {min(NODE_LTS_RELEASES)}-"
                                    f"{max(NODE_LTS_RELEASES)}: set node in an --env-hint file")
    released = [major for major in fitting if NODE_LTS_RELEASES[major] <= on]
    return str(released[-1] if released else fitting[0])


def default_node_image(node: str) -> str:
    """Docker's official Node image for `node` on Debian bookworm (bullseye before 18, which has no bookworm
    build)."""
    return f"docker.io/library/node:{node}-{'bookworm' if int(node) >= 18 else 'bullseye'}-slim"


def _node_facts(tree: Path, committed_at: datetime, hint: EnvHint | None) -> ProjectFacts:
    """A Node project's facts from its package.json (and lockfile), the hint's settings winning."""
    hint = hint or EnvHint()
    package = _NodeProject.read(tree, own_install=hint.install is not None)
    node = hint.node or choose_node(package.engines_node, committed_at.date())
    runner = _runner_named_in(hint.test_command or "") or package.runner()
    if runner == "node" and int(node) < NODE_TEST_RUNNER_MAJOR:
        raise Dropped("no_project", f"the tests run with node --test, which Node {node} lacks: set node: "
                                    f"\"{NODE_TEST_RUNNER_MAJOR}\" or later in an --env-hint file")
    facts = ProjectFacts(
        kind="node", node=node, runner=runner, base_image=hint.base_image or default_node_image(node),
        system_packages=list(hint.system_packages), test_command=hint.test_command or NODE_RUNNERS[runner].command,
        log_parser=NODE_RUNNERS[runner].log_parser, env={**NODE_IMAGE_ENV, **hint.env},
        sources=package.sources + (["hint"] if hint != EnvHint() else []))
    if hint.install is not None:
        return facts.model_copy(update={"install": list(hint.install)})
    return facts.model_copy(update={"dependency_files": package.dependency_files(),
                                    "env_install": package.env_install()})


class _NodeProject:
    """What a tree's package.json (and npm lockfile) declare, read as JSON (no script of it is ever run)."""

    def __init__(self, tree: Path, manifest: dict, sources: list[str], lockfile: tuple[str, str] | None):
        self.tree = tree
        self.manifest = manifest
        self.sources = sources
        self.lockfile = lockfile  # (its name, its text)

    @classmethod
    def read(cls, tree: Path, *, own_install: bool = False) -> _NodeProject:
        """The project at `tree`; with `own_install` (a hint's install replaces npm's) any package manager and
        workspaces are accepted, since nothing of them is installed."""
        if not _regular_file(tree, "package.json"):
            raise Dropped("no_project", "no package.json at the parent commit's root (or it is a link): give install "
                                        "and test_command in an --env-hint file")
        text = _read_capped(tree, "package.json", _DEPENDENCY_FILE_CAP)
        try:
            manifest = json.loads(text) if text is not None else None
        except json.JSONDecodeError:
            manifest = None
        if not isinstance(manifest, dict):
            raise Dropped("no_project", "package.json is not a JSON object (or is over 1 MiB): fix it, or give "
                                        "install and test_command in an --env-hint file")
        if not own_install:
            _refuse_other_managers(tree, manifest)
        if manifest.get("workspaces") and not own_install:
            raise Dropped("no_project", "npm workspaces are not mined yet (each workspace's package.json would be "
                                        "needed to install): give install and test_command in an --env-hint file")
        for name in ("package-lock.json", "npm-shrinkwrap.json"):
            lock = _read_capped(tree, name, _LOCKFILE_CAP)
            if lock is not None:
                return cls(tree, manifest, ["package.json", name], (name, lock))
        return cls(tree, manifest, ["package.json"], None)

    @property
    def engines_node(self) -> str | None:
        engines = self.manifest.get("engines")
        return _string(engines.get("node")) if isinstance(engines, dict) else None

    def dependencies(self) -> dict[str, object]:
        found: dict[str, object] = {}
        for table in ("dependencies", "devDependencies", "optionalDependencies"):
            value = self.manifest.get(table)
            found.update(value if isinstance(value, dict) else {})
        return found

    def dependency_files(self) -> dict[str, str]:
        """package.json as the env image's install needs it (its dependency fields, no scripts: the project's own
        lifecycle scripts never run there, and a change to a script builds no new env image), and the lockfile.
        None when nothing is to be installed: every such candidate shares one env image."""
        if not self.dependencies():
            return {}
        kept = {key: self.manifest[key] for key in _MANIFEST_INSTALL_KEYS if key in self.manifest}
        files = {"package.json": json.dumps(kept, indent=2) + "\n"}
        if self.lockfile is not None:
            files[self.lockfile[0]] = self.lockfile[1]
        return files

    def env_install(self) -> list[str]:
        """`npm ci` from the lockfile, else `npm install` (writing no lockfile into the tree); nothing (and no npm)
        when nothing is declared."""
        if not self.dependencies():
            return []
        return ["npm ci" if self.lockfile is not None else "npm install --no-package-lock"]

    def runner(self) -> str:
        """The test runner: the one scripts.test names, else the one among the dependencies (vitest, jest, mocha),
        else Node's own runner when scripts.test says `node --test` or no runner is declared and the tree has a file
        it runs. Dropped for another runner, or nothing to run."""
        script = self._test_script()
        declared = self.dependencies()
        named = _runner_named_in(script)
        if named:
            return named
        for runner in ("vitest", "jest", "mocha"):
            if runner in declared:
                return runner
        other = next((name for name in _OTHER_RUNNERS if name in declared or re.search(
            rf"(?<![\w@/-]){re.escape(name)}(?![\w/-])", script)), None)
        if other:
            raise Dropped("no_project", f"the tests run with {other}, which is not mined yet (jest, vitest, mocha and "
                                        "node --test are): give test_command in an --env-hint file")
        if _has_node_test_file(self.tree):
            return "node"
        raise Dropped("no_project", "package.json names no test runner (jest, vitest, mocha, node --test) and the "
                                    "tree has no file node --test runs: give test_command in an --env-hint file")

    def _test_script(self) -> str:
        scripts = self.manifest.get("scripts")
        script = _string(scripts.get("test")) if isinstance(scripts, dict) else None
        return "" if script is None or _NPM_PLACEHOLDER_TEST in script else script


# What `npm ci`/`npm install` read from package.json.
_MANIFEST_INSTALL_KEYS = ("name", "version", "dependencies", "devDependencies", "optionalDependencies",
                          "peerDependencies", "peerDependenciesMeta", "bundleDependencies", "bundledDependencies",
                          "overrides", "engines")


def _runner_named_in(command: str) -> str | None:
    """The runner a test command runs (`jest --ci`, `npx vitest run`, `node --test`), None when it names none."""
    if re.search(r"\bnode\b[^;&|]*\s--test\b", command):
        return "node"
    return next((name for name in ("vitest", "jest", "mocha") if re.search(rf"(?<![\w@/-]){name}(?![\w-])",
                                                                           command)), None)


def _refuse_other_managers(tree: Path, manifest: dict) -> None:
    """yarn, pnpm and bun projects are dropped: their lockfiles are not npm's, and their installs are not wired."""
    declared = _string(manifest.get("packageManager")) or ""
    for lockfile, manager in (("yarn.lock", "yarn"), ("pnpm-lock.yaml", "pnpm"), ("bun.lockb", "bun"),
                              ("bun.lock", "bun")):
        if _regular_file(tree, lockfile) or declared.startswith(f"{manager}@"):
            raise Dropped("no_project", f"{manager} projects are not mined yet (npm's are): give install and "
                                        "test_command in an --env-hint file")


def _has_node_test_file(tree: Path) -> bool:
    """Whether the tree holds a file `node --test` runs by default (node_modules and .git left out; no link
    followed)."""
    pattern = NODE_RUNNERS["node"].test_file
    for directory, subdirectories, files in os.walk(tree):
        subdirectories[:] = [name for name in subdirectories if name not in ("node_modules", ".git")]
        relative = Path(directory).relative_to(tree)
        if any(re.fullmatch(pattern, (relative / name).as_posix()) for name in files):
            return True
    return False


def _semver_allows_major(spec: str | None, major: int) -> bool:
    """Whether some release of Node `major` satisfies the npm semver range `spec` (None, "" or "*": any); a range
    leafcost cannot read rules nothing out."""
    if not spec or not spec.strip():
        return True
    versions = [(major, minor, patch) for minor in range(0, 40) for patch in (0, 1, 50)]
    return any(_semver_set_allows(alternative, version) for alternative in spec.split("||") for version in versions)


def _semver_set_allows(alternative: str, version: tuple[int, int, int]) -> bool:
    text = re.sub(r"(>=|<=|>|<|=|\^|~)\s+", r"\1", alternative.strip())
    hyphen = re.fullmatch(r"(\S+)\s+-\s+(\S+)", text)
    comparators = [f">={hyphen.group(1)}", f"<={hyphen.group(2)}"] if hyphen else text.split()
    return all(_semver_comparator_allows(comparator, version) for comparator in comparators)


def _semver_comparator_allows(comparator: str, version: tuple[int, int, int]) -> bool:
    found = re.fullmatch(r"(>=|<=|>|<|=|\^|~)?v?(\d+|[xX*])(?:\.(\d+|[xX*]))?(?:\.(\d+|[xX*]))?(?:[-+]\S*)?",
                         comparator)
    if not found:
        return True
    operator, *parts = found.groups()
    given: list[int] = []
    for part in parts:  # up to the first wildcard or missing part: 18.x.x is 18
        if part is None or not part.isdigit():
            break
        given.append(int(part))
    if not given:
        return True
    low = tuple(given + [0] * (3 - len(given)))
    if operator == "^":
        return low <= version < _bumped(given, next((i for i, part in enumerate(given) if part), len(given) - 1))
    if operator == "~":
        return low <= version < _bumped(given, 0 if len(given) == 1 else 1)
    if operator in (None, "=") and len(given) < 3:  # an x-range: 18, 18.x, 18.2
        return low <= version < _bumped(given, len(given) - 1)
    return {None: version == low, "=": version == low, ">=": version >= low, "<=": version <= _top(given),
            ">": version > _top(given), "<": version < low}[operator]


def _bumped(given: list[int], index: int) -> tuple[int, ...]:
    """The first version past a range: part `index` raised by one, the later parts zero."""
    return tuple(given[:index] + [given[index] + 1] + [0] * (2 - index))


def _top(given: list[int]) -> tuple[int, ...]:
    """The highest version a partial one covers (`<=18` allows every 18.x.y; `>18` starts at 19)."""
    return tuple(given + [10 ** 6] * (3 - len(given)))


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


def _read_capped(tree: Path, relative: str, cap: int) -> str | None:
    """A file's UTF-8 text when it is a regular file in `tree` (no link) of at most `cap` bytes, else None."""
    if not _regular_file(tree, relative):
        return None
    path = tree / relative
    try:
        return path.read_text(encoding="utf-8") if path.stat().st_size <= cap else None
    except (OSError, UnicodeDecodeError):
        return None


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
