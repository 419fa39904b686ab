"""Mining Node projects: what package.json says (the runner and its parser, the Node major from engines and the
commit's date, npm ci or npm install, the package managers and runners not mined yet), which changed files each
runner runs, the Dockerfiles, swebench's parsers on each runner's output; and, with Podman, node_modules reachable and
ignored in an instance image, then a zero-dependency project on Node's own test runner mined through `leafcost mine`
and validated with `leafcost validate`."""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
from datetime import date, datetime, timezone
from pathlib import Path

import pytest
from support.git_repos import CommitSpec, make_repo, run_git

from container_images import ULIMITS, ensure_mining_node_base_image, podman_argv
from sandbox import swebench_grading
from sandbox.mining.environment import ProjectFacts, choose_node, default_node_image, detect_project
from sandbox.mining.errors import Dropped
from sandbox.mining.hints import EnvHint
from sandbox.mining.images import build_instance_image, env_dockerfile, env_image_tag, instance_dockerfile

LEAFCOST = Path(sys.executable).with_name("leafcost")
EARLY_2023 = datetime(2023, 2, 1, tzinfo=timezone.utc)  # Node 18 the newest LTS
LATE_2024 = datetime(2024, 12, 1, tzinfo=timezone.utc)  # Node 22 the newest LTS


def tree_of(tmp_path: Path, files: dict[str, str]) -> Path:
    for relative, text in files.items():
        path = tmp_path / "tree" / relative
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    return tmp_path / "tree"


def package(**fields) -> str:
    return json.dumps({"name": "clampkit", "version": "1.0.0", **fields})


@pytest.mark.parametrize("fields, runner, command, parser", [
    ({"devDependencies": {"jest": "^29.7.0"}}, "jest", "npx --no-install jest --verbose", "parse_log_jest"),
    ({"devDependencies": {"vitest": "^1.2.0"}}, "vitest", "npx --no-install vitest run --reporter=verbose",
     "parse_log_vitest"),
    ({"dependencies": {"mocha": "10"}}, "mocha", "npx --no-install mocha --reporter tap", "parse_log_tap"),
    ({"scripts": {"test": "node --test test/"}}, "node", "node --test --test-reporter=tap", "parse_log_tap"),
    # scripts.test names the runner that runs, whatever else is a dependency
    ({"scripts": {"test": "jest --ci"}, "devDependencies": {"mocha": "10", "jest": "29"}}, "jest",
     "npx --no-install jest --verbose", "parse_log_jest"),
])
def test_each_runner_gives_its_command_and_swebench_parser(tmp_path, fields, runner, command, parser):
    facts = detect_project(tree_of(tmp_path, {"package.json": package(**fields)}), LATE_2024, None)
    assert (facts.kind, facts.runner, facts.test_command, facts.log_parser) == ("node", runner, command, parser)
    assert parser in swebench_grading.parser_names()
    assert (facts.version, facts.base_image) == ("node22", "docker.io/library/node:22-bookworm-slim")
    assert facts.env == {"NO_COLOR": "1"} and facts.install == []


def test_no_runner_declared_runs_node_test_when_its_files_exist(tmp_path):
    tree = tree_of(tmp_path, {"package.json": package(scripts={"test": 'echo "Error: no test specified" && exit 1'}),
                              "test/clamp.test.js": "require('node:test')\n"})
    assert detect_project(tree, LATE_2024, None).runner == "node"
    bare = tree_of(tmp_path / "bare", {"package.json": package(), "index.js": "module.exports = 1\n"})
    with pytest.raises(Dropped, match="names no test runner .* no file node --test runs") as caught:
        detect_project(bare, LATE_2024, None)
    assert caught.value.reason == "no_project"


@pytest.mark.parametrize("files, said", [
    ({"yarn.lock": "# yarn lockfile v1\n"}, "yarn projects are not mined yet"),
    ({"pnpm-lock.yaml": "lockfileVersion: '6.0'\n"}, "pnpm projects are not mined yet"),
    ({"package.json": package(packageManager="yarn@4.1.0")}, "yarn projects are not mined yet"),
    ({"package.json": package(workspaces=["packages/*"])}, "npm workspaces are not mined yet"),
    ({"package.json": package(devDependencies={"ava": "6"})}, "the tests run with ava, which is not mined yet"),
    ({"package.json": "[1, 2]"}, "package.json is not a JSON object"),
])
def test_what_is_not_mined_yet_is_dropped_by_name(tmp_path, files, said):
    tree = tree_of(tmp_path, {"package.json": package(devDependencies={"jest": "29"}), **files})
    with pytest.raises(Dropped, match=said) as caught:
        detect_project(tree, LATE_2024, None)
    assert caught.value.reason == "no_project" and "--env-hint" in str(caught.value)


def test_a_lockfile_installs_with_npm_ci_from_the_dependency_fields_alone(tmp_path):
    lock = json.dumps({"name": "clampkit", "lockfileVersion": 3, "packages": {}})
    manifest = package(scripts={"test": "jest", "prepare": "npm run build"}, devDependencies={"jest": "^29.7.0"},
                       engines={"node": ">=18"})
    facts = detect_project(tree_of(tmp_path, {"package.json": manifest, "package-lock.json": lock}), LATE_2024, None)
    assert facts.env_install == ["npm ci"] and facts.sources == ["package.json", "package-lock.json"]
    assert facts.dependency_files["package-lock.json"] == lock
    installed = json.loads(facts.dependency_files["package.json"])
    assert installed == {"name": "clampkit", "version": "1.0.0", "devDependencies": {"jest": "^29.7.0"},
                         "engines": {"node": ">=18"}}  # no scripts: the project's own `prepare` never runs there


def test_without_a_lockfile_npm_install_writes_none_and_no_dependencies_need_no_npm(tmp_path):
    facts = detect_project(tree_of(tmp_path, {"package.json": package(devDependencies={"mocha": "10"})}),
                           LATE_2024, None)
    assert facts.env_install == ["npm install --no-package-lock"] and list(facts.dependency_files) == ["package.json"]
    bare = detect_project(tree_of(tmp_path / "bare", {"package.json": package(scripts={"test": "node --test"})}),
                          LATE_2024, None)
    assert (bare.env_install, bare.dependency_files) == ([], {})


@pytest.mark.parametrize("engines, on, expected", [
    (None, date(2024, 10, 28), "20"),  # the day before 22 became LTS
    (None, date(2024, 10, 29), "22"),
    (None, date(2019, 1, 1), "14"),  # none was LTS yet: the oldest
    (">=16 <19", date(2024, 6, 1), "18"),
    ("^16.14.0", date(2024, 6, 1), "16"),
    ("14 || 16", date(2024, 6, 1), "16"),
    ("18.x", date(2024, 6, 1), "18"),
    ("~20.10", date(2024, 6, 1), "20"),
    (">= 20", date(2023, 1, 1), "20"),  # not LTS by then: the oldest that fits
    ("16.0.0 - 18", date(2024, 6, 1), "18"),
    ("<=18", date(2024, 6, 1), "18"),
    (">18", date(2024, 6, 1), "20"),
])
def test_node_major_by_engines_and_date(engines, on, expected):
    assert choose_node(engines, on) == expected


def test_engines_nothing_satisfies_is_dropped_and_old_majors_are_bullseye():
    with pytest.raises(Dropped, match=r"engines.node '>=30' matches no Node 14-22: set node") as caught:
        choose_node(">=30", date(2024, 1, 1))
    assert caught.value.reason == "no_project"
    assert default_node_image("16") == "docker.io/library/node:16-bullseye-slim"


def test_the_hint_chooses_node_and_its_test_command_the_parser(tmp_path):
    tree = tree_of(tmp_path, {"package.json": package(devDependencies={"jest": "29"}), "setup.py": "x = 1\n"})
    assert detect_project(tree, LATE_2024, None).kind == "python"  # Python's files first
    hint = EnvHint(node="20", test_command="npx vitest run --reporter=verbose --pool=forks", install=["npm run build"],
                   env={"TZ": "UTC"})
    facts = detect_project(tree, LATE_2024, hint)
    assert (facts.kind, facts.node, facts.runner, facts.log_parser) == ("node", "20", "vitest", "parse_log_vitest")
    assert (facts.install, facts.env_install, facts.dependency_files) == (["npm run build"], [], {})
    assert facts.env == {"NO_COLOR": "1", "TZ": "UTC"} and facts.sources == ["package.json", "hint"]
    with pytest.raises(Dropped, match='node --test, which Node 16 lacks: set node: "18"'):
        detect_project(tree_of(tmp_path / "old", {"package.json": package(scripts={"test": "node --test"})}),
                       LATE_2024, EnvHint(node="16"))


def test_a_hinted_install_mines_what_npm_would_refuse(tmp_path):
    tree = tree_of(tmp_path, {"package.json": package(devDependencies={"jest": "29"}, workspaces=["packages/*"]),
                              "yarn.lock": "# yarn lockfile v1\n"})
    facts = detect_project(tree, LATE_2024, EnvHint(node="20", install=["corepack yarn install"]))
    assert (facts.kind, facts.runner, facts.install, facts.env_install) == ("node", "jest", ["corepack yarn install"],
                                                                           [])
    with pytest.raises(Dropped, match="no package.json at the parent commit's root"):
        detect_project(tree_of(tmp_path / "none", {"index.js": "1\n"}), LATE_2024, EnvHint(node="20"))


CHANGED = ["src/clamp.js", "test/clamp.test.js", "test/fixtures/cases.js", "test/cases.json", "lib/__tests__/a.ts",
           "src/clamp.spec.mjs", "test_clamp.py", "tests/test_clamp.py", "node_modules/x/test/a.test.js",
           "scripts/clamp-test.js", "test.js"]


@pytest.mark.parametrize("kind, runner, runnable", [
    ("python", None, ["test_clamp.py", "tests/test_clamp.py"]),
    ("node", "jest", ["test/clamp.test.js", "lib/__tests__/a.ts", "src/clamp.spec.mjs", "test.js"]),
    ("node", "vitest", ["test/clamp.test.js", "src/clamp.spec.mjs"]),
    ("node", "mocha", ["test/clamp.test.js", "src/clamp.spec.mjs"]),
    ("node", "node", ["test/clamp.test.js", "test/fixtures/cases.js", "scripts/clamp-test.js", "test.js"]),
])
def test_runnable_tests_are_the_files_the_runner_runs(kind, runner, runnable):
    facts = ProjectFacts(kind=kind, python="3.11" if kind == "python" else None, node="20", runner=runner,
                         base_image="x")
    assert facts.runnable_tests(CHANGED) == runnable


def node_facts(**changes) -> ProjectFacts:
    base = ProjectFacts(kind="node", node="20", runner="jest", base_image="docker.io/library/node:20-bookworm-slim",
                        dependency_files={"package.json": "{}\n", "package-lock.json": "{}\n"}, env_install=["npm ci"],
                        test_command="npx jest --verbose", log_parser="parse_log_jest", env={"NO_COLOR": "1"})
    return base.model_copy(update=changes)


def test_node_env_dockerfile_installs_into_testbed_with_the_ca_for_build_steps_only():
    text = env_dockerfile(node_facts(), ca=True)
    assert text.startswith("# leafcost mine: the environment of every candidate with this dependency set (node 20)\n"
                           "FROM docker.io/library/node:20-bookworm-slim\n")
    assert "ARG NODE_EXTRA_CA_CERTS=/tmp/leafcost-build/ca.pem\nARG npm_config_cafile=/tmp/leafcost-build/ca.pem\n" \
        in text
    assert not [line for line in text.splitlines() if line.startswith("ENV") and "ca.pem" in line]
    assert "command -v git >/dev/null 2>&1 || missing=git" in text and 'ENV NO_COLOR="1"\n' in text
    assert "COPY deps/ /testbed/\nWORKDIR /testbed\nRUN npm ci\nWORKDIR /\nRUN rm -rf /tmp/leafcost-build\n" in text
    assert "pip" not in text and "venv" not in text
    bare = env_dockerfile(node_facts(dependency_files={}, env_install=[]), ca=False)
    assert "COPY deps" not in bare and "npm" not in bare.replace("npm_config", "")
    assert env_image_tag(node_facts(), "acme/clampkit") != env_image_tag(node_facts(node="18"), "acme/clampkit")


def test_node_instance_dockerfile_ignores_node_modules_in_the_setup_commit():
    text = instance_dockerfile("localhost/leafcost-mined/env-x:0123456789ab", node_facts(), ca=False)
    assert "COPY tree/ /testbed/\nWORKDIR /testbed\nRUN rm -rf /tmp/leafcost-build && if [ -d node_modules ]" in text
    last = text.split("\nRUN ")[-1]
    assert "check-ignore -q node_modules" in last and "printf '\\n/node_modules/\\n' >> .gitignore" in last
    assert last.index(".gitignore") < last.index(" add -A") < last.index("commit -q --allow-empty --no-verify")


# swebench's parsers on each runner's output as it prints it: a test's id carries no duration.
@pytest.mark.parametrize("parser, runs, expected", [
    ("parse_log_jest", ["PASS test/clamp.test.js\n  clamp\n    ✓ caps values (3 ms)\n    ✕ raises values (12 ms)\n",
                        "PASS test/clamp.test.js\n  clamp\n    ✓ caps values\n    ✕ raises values (1 ms)\n"],
     {"caps values": "PASSED", "raises values": "FAILED"}),
    ("parse_log_vitest", [" ✓ test/clamp.test.js > clamp > caps values 2ms\n"
                          " × test/clamp.test.js > clamp > raises 1ms\n",
                          " ✓ test/clamp.test.js > clamp > caps values\n"
                          " × test/clamp.test.js > clamp > raises 40ms\n"],
     {"test/clamp.test.js > clamp > caps values": "PASSED", "test/clamp.test.js > clamp > raises": "FAILED"}),
    ("parse_log_tap", ["TAP version 13\n# Subtest: caps values\nok 1 - caps values\n  ---\n  duration_ms: 0.64\n  ...\n"
                       "not ok 2 - raises values\n  ---\n  duration_ms: 0.88\n  ...\n1..2\n# duration_ms 333.8\n",
                       "TAP version 13\nok 1 - caps values\n  ---\n  duration_ms: 1.2\n  ...\n"
                       "not ok 2 - raises values\n"],
     {"- caps values": "PASSED", "- raises values": "FAILED"}),
    ("parse_log_tap", ["1..2\nok 1 clamp caps values\nnot ok 2 clamp raises values\n  Error: expected 0\n",
                       "1..2\nok 1 clamp caps values\nnot ok 2 clamp raises values\n"],  # mocha's tap reporter
     {"clamp caps values": "PASSED", "clamp raises values": "FAILED"}),
])
def test_swebench_parsers_read_each_runner_with_stable_ids(parser, runs, expected):
    parse = swebench_grading.swebench().log_parsers.PARSER_REGISTRY[parser]
    assert [parse(log, None) for log in runs] == [expected, expected]


# Containers from here on: Podman, the base built from Debian's nodejs 18.

@pytest.fixture(scope="module")
def node_base(container_images):
    """The stand-in for node:18-bookworm-slim; every image a test here builds is removed afterwards."""
    ensure_mining_node_base_image()
    built: list[str] = []
    yield built
    if built:
        subprocess.run([*podman_argv(), "rmi", "-f", *built], capture_output=True)


def in_image(image: str, command: str) -> str:
    done = subprocess.run([*podman_argv(), "run", "--rm", *ULIMITS, "--network", "none", image, "bash", "-c",
                           command], capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr + done.stdout
    return done.stdout.strip()


def test_node_modules_from_the_env_image_resolve_and_are_ignored(node_base, tmp_path):
    """npm is not here: the env image's install step writes a package into node_modules by hand, as npm would."""
    repo = make_repo(tmp_path / "clampkit", [CommitSpec(
        {"package.json": package(dependencies={"leftpad": "1"}), "index.js": "module.exports = require('leftpad')\n",
         ".gitignore": "coverage/\n"}, "base", "2023-02-01T10:00:00Z")])
    facts = node_facts(node="18", runner="node", base_image="docker.io/library/node:18-bookworm-slim",
                       dependency_files={"package.json": package(dependencies={"leftpad": "1"})},
                       env_install=["mkdir -p node_modules/leftpad && echo 'module.exports = 42' > "
                                    "node_modules/leftpad/index.js"])
    node_base.append(env_image_tag(facts, "tests/clampkit"))
    image = asyncio.run(build_instance_image("podman", facts, repo, "tests__clampkit-1a2b3c4", ca_bundle=None,
                                             timeout=600, repo="tests/clampkit"))
    node_base.append(image)
    assert in_image(image, "cd /testbed && node -e \"console.log(require('./index.js'))\"") == "42"
    shown = in_image(image, "cd /testbed && git status --porcelain && cat .gitignore && git log --format=%s "
                            "&& git diff --name-only HEAD^ HEAD")
    # status clean: node_modules is ignored by the tree's own .gitignore, changed in the set-up commit alone
    assert shown.splitlines() == ["coverage/", "", "/node_modules/", "leafcost: environment set-up", "base",
                                  ".gitignore"]


CLAMP_BUGGY = "function clamp(x, lo, hi) {\n  return Math.min(x, hi);\n}\nmodule.exports = { clamp };\n"
CLAMP_FIXED = "function clamp(x, lo, hi) {\n  return Math.max(lo, Math.min(x, hi));\n}\nmodule.exports = { clamp };\n"
FIRST_TEST = ("const test = require('node:test');\nconst assert = require('node:assert');\n"
              "const { clamp } = require('../src/clamp');\n\n"
              "test('caps values above the range', () => {\n  assert.strictEqual(clamp(5, 0, 3), 3);\n});\n")
FIX_TEST = FIRST_TEST + ("\ntest('raises values below the range', () => {\n"
                         "  assert.strictEqual(clamp(-1, 0, 3), 0);\n});\n")


@pytest.fixture(scope="module")
def mined_node(container_images, tmp_path_factory) -> dict:
    """A zero-dependency project on node --test (engines >=18 in early 2023: Node 18), mined through the CLI."""
    ensure_mining_node_base_image()
    manifest = package(engines={"node": ">=18"}, scripts={"test": "node --test"})
    repo = make_repo(tmp_path_factory.mktemp("mine-node") / "clampkit", [
        CommitSpec({"package.json": manifest, "src/clamp.js": CLAMP_BUGGY, "test/clamp.test.js": FIRST_TEST},
                   "Start clampkit with clamp and a first test", "2023-02-01T10:00:00Z"),
        CommitSpec({"src/clamp.js": CLAMP_FIXED, "test/clamp.test.js": FIX_TEST},
                   "clamp lets values below the range through\n\nclamp(-1, 0, 3) gives -1 where 0 is expected.",
                   "2023-02-02T10:00:00Z"),
        CommitSpec({"src/clamp.js": CLAMP_FIXED + "// the bounds are inclusive\n", "test/cases.json": "[[5, 0, 3]]\n"},
                   "Keep the clamp cases in a data file for later", "2023-02-03T10:00:00Z")])
    out = tmp_path_factory.mktemp("mined-node") / "out"
    done = subprocess.run([str(LEAFCOST), "mine", str(repo), "--out", str(out), "--repo-name", "acme/clampkit",
                           "--json"], capture_output=True, text=True, timeout=1800)
    assert done.returncode == 0, done.stderr[-3000:]
    rows = [json.loads(line) for line in (out / "tasks.jsonl").read_text().splitlines()]
    yield {"summary": json.loads(done.stdout), "rows": rows, "out": out, "repo": repo}
    images = {row["image"] for row in rows}
    subprocess.run([*podman_argv(), "rmi", "-f", *images], capture_output=True)


def test_a_node_fix_is_mined_with_its_tap_ids(mined_node):
    summary, [row] = mined_node["summary"], mined_node["rows"]
    assert summary["kept"] == 1 and summary["dropped"] == {"no_parent": 1, "tests_not_found": 1}, summary
    fix = run_git(mined_node["repo"], "log", "--format=%H", "--grep=^clamp lets").split()[0]
    assert row["mined_from"] == fix
    assert row["base_commit"] == run_git(mined_node["repo"], "rev-parse", f"{fix}^").strip()
    assert json.loads(row["FAIL_TO_PASS"]) == ["- raises values below the range"]
    assert json.loads(row["PASS_TO_PASS"]) == ["- caps values above the range"]
    assert (row["log_parser"], row["version"]) == ("parse_log_tap", "node18")
    assert "node --test --test-reporter=tap test/clamp.test.js" in row["eval_script"]
    assert in_image(row["image"], "node --version").startswith("v18.")
    assert in_image(row["image"], "cd /testbed && git status --porcelain && git log -1 --format=%s") == \
        "leafcost: environment set-up"


def test_the_mined_node_task_validates(mined_node):
    done = subprocess.run([str(LEAFCOST), "validate", str(mined_node["out"] / "tasks.jsonl"), "--backend", "podman",
                           "--json"], capture_output=True, text=True, timeout=900)
    report = json.loads(done.stdout)
    assert done.returncode == 0 and report["valid"] == 1 and report["invalid"] == 0, done.stdout + done.stderr
    [task] = report["tasks"]
    assert (task["oracle_resolved"], task["empty_resolved"]) == (True, False)
