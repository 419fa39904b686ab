"""Harbor task directories load into `Task` as Harbor reads them: every field of its task.toml, unknown keys ignored
but reported, every problem of a task at once, and what leafcost cannot honour refused naming the field."""

from __future__ import annotations

from datetime import datetime, timezone
from pathlib import Path

import pytest

from sandbox import TaskFormatError, load_harbor_task, load_suite
from sandbox.suites import SuiteError
from sandbox.tasks import TaskConfig, unknown_keys

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "harbor"
RUNNABLE_FIXTURES = ("apt-user", "compose-service", "copy-top-file", "healthcheck", "multi-reward", "multi-stage",
                     "separate-verifier", "unknown-key", "workdir-env")

GOOD_TOML = """
version = "1.0"
[metadata]
difficulty = "easy"
[verifier]
timeout_sec = 30.0
[agent]
timeout_sec = 60.0
[environment]
cpus = 2
memory = "1G"
allow_internet = true
"""

# Harbor's current format, as `harbor tasks init` and Harbor's own examples write it.
HARBOR_TOML = """
schema_version = "1.2"

[task]
name = "acme/adder"
description = "add() subtracts"
authors = [{ name = "Ada", email = "ada@example.com" }, { name = "Bob" }]
keywords = ["python", "bug"]

[metadata]
difficulty = "easy"

[verifier]
timeout_sec = 120.0

[agent]
timeout_sec = 120.0

[environment]
build_timeout_sec = 600.0
cpus = 1
memory_mb = 2048
storage_mb = 10240
gpus = 0
mcp_servers = []

[verifier.env]

[environment.env]

[solution.env]
"""


def make_task(root: Path, name: str, toml: str = GOOD_TOML, skip: tuple[str, ...] = (),
              extra: dict[str, str] | None = None) -> Path:
    task = root / name
    files = {
        "task.toml": toml,
        "instruction.md": "# Bug\nadd() subtracts.\n",
        "environment/Dockerfile": "FROM python:3.11\nWORKDIR /app\nCOPY repo/ /app/\n",
        "environment/repo/m.py": "def add(a, b):\n    return a - b\n",
        "tests/test.sh": "echo 1 > /logs/verifier/reward.txt\n",
        "solution/solve.sh": "sed -i 's/a - b/a + b/' m.py\n",
        **(extra or {}),
    }
    for relative, text in files.items():
        if relative in skip:
            continue
        (task / relative).parent.mkdir(parents=True, exist_ok=True)
        (task / relative).write_text(text)
    return task


def refusal(tmp_path: Path, name: str, toml: str = HARBOR_TOML, **kwargs) -> str:
    with pytest.raises(TaskFormatError) as caught:
        load_harbor_task(make_task(tmp_path, name, toml, **kwargs))
    return str(caught.value)


# --- the fixtures: real task directories in Harbor's current format ------------------------------------------------


@pytest.mark.parametrize("name", RUNNABLE_FIXTURES)
def test_every_runnable_fixture_loads_as_harbor_writes_it(name):
    task = load_harbor_task(FIXTURES / name)
    assert task.task_id == name and task.source == "harbor"
    assert task.config.schema_version == "1.2"
    assert task.config.task.name == f"leafcost/{name}"
    assert task.config.task.authors[0].name == "leafcost"
    assert task.environment.gpus == 0 and task.environment.mcp_servers == []
    assert task.environment.allow_internet is False
    assert task.dockerfile == FIXTURES / name / "environment" / "Dockerfile"
    assert task.dockerfile.read_text().startswith("FROM localhost/debian:bookworm")
    assert task.solution_dir == FIXTURES / name / "solution"
    assert task.instruction.startswith("# ")
    if name != "unknown-key":
        assert task.warnings == []


def test_apt_user_fixture_carries_the_agent_user():
    task = load_harbor_task(FIXTURES / "apt-user")
    assert task.config.agent.user == "agent"
    assert task.config.verifier.user is None
    assert task.config.verifier_mode == "shared" and task.config.verifier_environment is None


def test_workdir_env_fixture_carries_workdir_and_both_environments():
    config = load_harbor_task(FIXTURES / "workdir-env").config
    assert config.environment.workdir == "/srv/work"
    assert config.environment.env == {"GREETING": "hi"}
    assert config.verifier.env == {"SECRET_FOR_TESTS": "only-the-verifier-sees-this"}
    assert config.solution.env == {}


def test_healthcheck_fixture_carries_every_healthcheck_option():
    task = load_harbor_task(FIXTURES / "healthcheck")
    check = task.environment.healthcheck
    assert (check.command, check.interval_sec, check.timeout_sec, check.start_period_sec, check.start_interval_sec,
            check.retries) == ("test -f /tmp/ready", 1.0, 5.0, 10.0, 1.0, 3)
    assert (task.build_context / "entrypoint.sh").is_file()


def test_separate_verifier_fixture_resolves_to_a_copy_of_the_environment():
    task = load_harbor_task(FIXTURES / "separate-verifier")
    config = task.config
    assert config.verifier.environment_mode == "separate" and config.verifier.environment is None
    assert config.verifier_mode == "separate"
    verifier_environment = config.verifier_environment
    assert verifier_environment == config.environment and verifier_environment is not config.environment
    assert config.artifacts == ["/tmp/answer.txt"]
    assert task.verifier_dockerfile == FIXTURES / "separate-verifier" / "tests" / "Dockerfile"


def test_fixtures_without_a_tests_dockerfile_have_no_verifier_dockerfile():
    assert load_harbor_task(FIXTURES / "multi-reward").verifier_dockerfile is None


def test_unknown_keys_are_ignored_and_reported_on_one_line():
    task = load_harbor_task(FIXTURES / "unknown-key")
    assert task.warnings == [
        "task unknown-key: task.toml keys Harbor does not know, ignored: environment.colour, owner"]
    assert not hasattr(task.environment, "colour")


def test_gpu_fixture_is_refused_naming_the_field():
    with pytest.raises(TaskFormatError, match=r"^task gpu-task: environment\.gpus = 1 is not supported "
                                              r"\(leafcost has no GPU/TPU backend\)$"):
        load_harbor_task(FIXTURES / "gpu-task")


def test_fixture_suite_loads_every_runnable_task_and_one_load_error():
    suite = load_suite(str(FIXTURES))
    assert sorted(t.task_id for t in suite.tasks) == sorted(RUNNABLE_FIXTURES)
    assert [(e.task_id, "environment.gpus" in e.error) for e in suite.errors] == [("gpu-task", True)]


# --- task.toml as Harbor reads it -----------------------------------------------------------------------------------


def test_harbor_current_format_loads_without_warnings(tmp_path):
    task = load_harbor_task(make_task(tmp_path, "adder", HARBOR_TOML))
    assert task.warnings == []
    assert task.config.task.name == "acme/adder" and task.config.task.keywords == ["python", "bug"]
    assert [(a.name, a.email) for a in task.config.task.authors] == [("Ada", "ada@example.com"), ("Bob", None)]
    assert task.environment.gpus == 0


def test_allow_internet_defaults_to_true_as_in_harbor(tmp_path):
    task = load_harbor_task(make_task(tmp_path, "online", "[environment]\ncpus = 1\n"))
    assert task.environment.allow_internet is True


def test_leafcost_defaults_where_harbor_leaves_resources_unset(tmp_path):
    config = load_harbor_task(make_task(tmp_path, "bare", "")).config
    env = config.environment
    assert (env.cpus, env.memory_mb, env.storage_mb, env.pids, env.build_timeout_sec) == (1, 2048, 10240, 1024, 600)
    assert (config.agent.timeout_sec, config.verifier.timeout_sec) == (10800, 600)
    assert config.schema_version == "1.2" and env.os == "linux" and config.artifacts == []


def test_harbor_task_loads_with_old_spellings_normalised(tmp_path):
    task = load_harbor_task(make_task(tmp_path, "adder"))
    assert task.task_id == "adder"
    assert task.instruction.startswith("# Bug")
    assert task.config.schema_version == "1.0"
    assert task.environment.memory_mb == 1024
    assert task.environment.cpus == 2
    assert task.environment.allow_internet is True
    assert task.config.verifier.timeout_sec == 30.0
    assert task.solution_dir == task.path / "solution"
    assert task.warnings == []


def test_leafcost_spellings_network_and_pids_stay_accepted(tmp_path):
    toml = '[environment]\nnetwork = false\npids = 64\nstorage = "4G"\nmemory = 512\n'
    task = load_harbor_task(make_task(tmp_path, "old", toml))
    env = task.environment
    assert (env.allow_internet, env.pids, env.storage_mb, env.memory_mb) == (False, 64, 4096, 512)
    assert task.warnings == []


def test_old_and_new_memory_spellings_that_disagree_are_an_error(tmp_path):
    message = refusal(tmp_path, "clash", '[environment]\nmemory = "4G"\nmemory_mb = 1024\n')
    assert "environment.memory: 4096 MB conflicts with memory_mb = 1024, keep only memory_mb" in message


def test_agent_and_verifier_users_accept_names_and_uids(tmp_path):
    toml = HARBOR_TOML.replace("[agent]\n", "[agent]\nuser = 1000\n")
    toml = toml.replace("[verifier]\n", '[verifier]\nuser = "qa"\n')
    config = load_harbor_task(make_task(tmp_path, "users", toml)).config
    assert (config.agent.user, config.verifier.user) == (1000, "qa")


def test_artifacts_are_paths_or_tables(tmp_path):
    toml = 'artifacts = ["/tmp/a", { source = "/out", destination = "out", exclude = ["*.log"] }]\n'
    artifacts = load_harbor_task(make_task(tmp_path, "artifacts", toml)).config.artifacts
    assert artifacts[0] == "/tmp/a"
    assert (artifacts[1].source, artifacts[1].destination, artifacts[1].exclude) == ("/out", "out", ["*.log"])


def test_a_verifier_environment_implies_separate_mode(tmp_path):
    toml = '[environment]\ncpus = 2\n[verifier.environment]\ncpus = 1\nallow_internet = false\n'
    config = load_harbor_task(make_task(tmp_path, "implied", toml)).config
    assert config.verifier.environment_mode is None and config.verifier_mode == "separate"
    assert config.verifier_environment is config.verifier.environment
    assert (config.verifier_environment.cpus, config.verifier_environment.allow_internet) == (1, False)


def test_shared_mode_with_a_verifier_environment_is_an_error(tmp_path):
    toml = '[verifier]\nenvironment_mode = "shared"\n[verifier.environment]\ncpus = 1\n'
    assert "task.toml: verifier: environment_mode = 'shared' conflicts with [verifier.environment]" in refusal(
        tmp_path, "conflict", toml)


def test_docker_image_makes_the_dockerfile_optional(tmp_path):
    toml = '[environment]\ndocker_image = "ubuntu:24.04"\n'
    task = load_harbor_task(make_task(tmp_path, "image", toml, skip=("environment/Dockerfile",)))
    assert task.dockerfile is None and task.environment.docker_image == "ubuntu:24.04"


def test_no_dockerfile_and_no_image_is_an_error(tmp_path):
    message = refusal(tmp_path, "no-docker", skip=("environment/Dockerfile",))
    assert message == ("task no-docker: missing required file environment/Dockerfile (or set "
                       "environment.docker_image)")


def test_models_stay_mutable_for_the_backends(tmp_path):
    task = load_harbor_task(make_task(tmp_path, "mutable", HARBOR_TOML))
    task.config.environment.workdir = "/srv/work"
    task.config.environment.env = {"A": "b"}
    assert (task.environment.workdir, task.environment.env) == ("/srv/work", {"A": "b"})


# --- unknown keys ---------------------------------------------------------------------------------------------------


def test_a_misspelt_table_is_a_warning_not_an_error(tmp_path):
    task = load_harbor_task(make_task(tmp_path, "typo", GOOD_TOML + "\n[verifer]\ntimeout_sec = 1\n"))
    assert task.warnings == ["task typo: task.toml keys Harbor does not know, ignored: verifer"]
    assert task.config.verifier.timeout_sec == 30.0


def test_unknown_keys_are_found_in_nested_tables_and_arrays_but_not_in_free_form_ones():
    raw = {"foo": 1, "version": "1.0", "metadata": {"anything": 1},
           "environment": {"colour": "blue", "memory": "1G", "network": True, "env": {"ANY": "x"},
                           "healthcheck": {"command": "true", "every": 3}},
           "verifier": {"environment": {"gpu": 1}},
           "artifacts": ["/a", {"source": "/b", "colour": "red"}],
           "steps": [{"name": "one", "agent": {"timeout": 3}}]}
    assert sorted(unknown_keys(raw)) == [
        "artifacts[1].colour", "environment.colour", "environment.healthcheck.every", "foo",
        "steps[0].agent.timeout", "verifier.environment.gpu"]


def test_keys_leafcost_models_but_harbor_does_not_are_not_reported():
    assert unknown_keys({"environment": {"pids": 10}}) == []
    assert TaskConfig.model_validate({"environment": {"pids": 10}}).environment.pids == 10


# --- every problem at once ------------------------------------------------------------------------------------------


def test_every_validation_error_and_missing_file_is_reported_at_once(tmp_path):
    toml = ('[task]\nname = "no-slash"\n[agent]\nuser = [1]\n'
            '[environment]\ncpus = "lots"\nmemory_mb = -1\nos = "plan9"\nmemory = "huge"\n')
    message = refusal(tmp_path, "many", toml, skip=("tests/test.sh", "environment/Dockerfile"))
    problems = message.removeprefix("task many: ").split("; ")
    assert problems == [
        "task.toml: task.name: must be 'org/name' (letters, digits, '.', '_' and '-', not starting with a dot, "
        "without '..') "
        "(got 'no-slash')",
        "task.toml: agent.user: Input should be a valid string or Input should be a valid integer (got [1])",
        "task.toml: environment.os: Input should be 'linux' or 'windows' (got 'plan9')",
        "task.toml: environment.cpus: Input should be a valid number, unable to parse string as a number "
        "(got 'lots')",
        "task.toml: environment.memory_mb: Input should be greater than 0 (got -1)",
        "task.toml: environment.memory: not a size like '4G' or '512M' (got 'huge')",
        "missing required file environment/Dockerfile (or set environment.docker_image)",
        "missing required file tests/test.sh",
    ]


def test_errors_inside_arrays_name_the_element(tmp_path):
    toml = 'artifacts = ["/a", { destination = "x" }]\n'
    assert "task.toml: artifacts[1].source: Field required" in refusal(tmp_path, "artifact", toml)


def test_malformed_toml_names_task_and_problem_and_still_checks_files(tmp_path):
    message = refusal(tmp_path, "broken", "[verifier\ntimeout_sec = 1", skip=("tests/test.sh",))
    assert message.startswith("task broken: task.toml is not valid TOML")
    assert message.endswith("; missing required file tests/test.sh")


def test_missing_test_sh_is_an_error(tmp_path):
    with pytest.raises(TaskFormatError, match=r"^task no-tests: missing required file tests/test.sh$"):
        load_harbor_task(make_task(tmp_path, "no-tests", skip=("tests/test.sh",)))


def test_empty_instruction_is_an_error(tmp_path):
    assert refusal(tmp_path, "quiet", extra={"instruction.md": "  \n"}) == "task quiet: instruction.md is empty"


def test_missing_instruction_is_an_error(tmp_path):
    message = refusal(tmp_path, "mute", skip=("instruction.md",))
    assert message == "task mute: missing required file instruction.md"


# --- what leafcost cannot honour ------------------------------------------------------------------------------------


def test_everything_leafcost_cannot_honour_is_listed_together(tmp_path):
    toml = HARBOR_TOML.replace("gpus = 0\nmcp_servers = []\n", (
        'gpus = 2\ngpu_types = ["H100"]\nskills_dir = "/skills"\nos = "Windows"\n'
        '[[environment.mcp_servers]]\nname = "m"\ntransport = "streamable-http"\nurl = "http://m:8000/mcp"\n'
        "[environment.tpu]\ntype = \"v6e\"\ntopology = \"2x4\"\n"
        '[[steps]]\nname = "one"\n'))
    message = refusal(tmp_path, "greedy", toml, extra={"environment/docker-compose.yaml": "services: {}\n"})
    assert message.removeprefix("task greedy: ").split("; ") == [
        "environment.gpus = 2 is not supported (leafcost has no GPU/TPU backend)",
        "environment.gpu_types is not supported (leafcost has no GPU/TPU backend)",
        "environment.tpu is not supported (leafcost has no GPU/TPU backend)",
        'environment.os = "windows" is not supported (leafcost runs Linux containers only)',
        "environment.mcp_servers is not supported (the agent would call the server's tools, and Leaf has five fixed "
        "tools and no MCP client)",
        "environment.skills_dir is not supported (skills are instructions an agent loads on demand, and Leaf's prompt "
        "and five tools have no place for them)",
        "[[steps]] is not supported (each step gives the agent a new instruction and its own verdict, and a Leaf "
        "episode is one instruction, five tools and one verdict)",
    ]


def test_a_gpu_for_the_separate_verifier_is_refused_too(tmp_path):
    toml = '[verifier.environment]\ngpus = 1\n'
    assert refusal(tmp_path, "gpu-verifier", toml) == (
        "task gpu-verifier: verifier.environment.gpus = 1 is not supported (leafcost has no GPU/TPU backend)")


def test_a_windows_task_is_named_so_rather_than_missing_test_sh(tmp_path):
    message = refusal(tmp_path, "bat", skip=("tests/test.sh",), extra={"tests/test.bat": "echo 1\r\n"})
    assert message == ("task bat: tests/test.bat without tests/test.sh is a Windows task (leafcost runs Linux "
                       "containers only)")


def test_a_multi_step_task_is_refused_as_such_not_for_its_missing_files(tmp_path):
    toml = '[[steps]]\nname = "create"\n[[steps]]\nname = "append"\n'
    message = refusal(tmp_path, "steps", toml, skip=("instruction.md", "tests/test.sh"),
                      extra={"steps/create/instruction.md": "create\n"})
    assert message == ("task steps: [[steps]] is not supported (each step gives the agent a new instruction and its "
                       "own verdict, and a Leaf episode is one instruction, five tools and one verdict)")


def test_a_yml_compose_file_is_read_but_does_not_replace_the_dockerfile(tmp_path):
    message = refusal(tmp_path, "compose", skip=("environment/Dockerfile",),
                      extra={"environment/docker-compose.yml": "services: {main: {build: .}}\n"})
    assert message == ("task compose: environment/docker-compose.yml: services.main.build is not supported (main is "
                       "the task's own container: its image, command and limits come from environment/Dockerfile and "
                       "task.toml); missing required file environment/Dockerfile (or set environment.docker_image)")


def test_what_leafcost_carries_for_the_backends_is_accepted(tmp_path):
    toml = 'artifacts = ["/tmp/out"]\n' + HARBOR_TOML + '[environment.healthcheck]\ncommand = "true"\n'
    toml = toml.replace("mcp_servers = []\n", 'mcp_servers = []\nworkdir = "/w"\ndocker_image = "x:1"\n')
    toml = toml.replace("[agent]\n", '[agent]\nuser = "agent"\n')
    toml = toml.replace("[verifier]\n", '[verifier]\nuser = "root"\nenvironment_mode = "separate"\n')
    task = load_harbor_task(make_task(tmp_path, "carried", toml))
    assert task.warnings == [] and task.config.artifacts == ["/tmp/out"]
    assert (task.environment.workdir, task.environment.docker_image, task.environment.healthcheck.command) == (
        "/w", "x:1", "true")
    assert (task.config.agent.user, task.config.verifier.user, task.config.verifier_mode) == (
        "agent", "root", "separate")


# --- suites ---------------------------------------------------------------------------------------------------------


def test_broken_task_never_stops_the_suite(tmp_path):
    make_task(tmp_path, "a-good")
    make_task(tmp_path, "b-broken", toml="not toml at all [")
    make_task(tmp_path, "c-missing", skip=("instruction.md",))
    make_task(tmp_path, "d-good")
    make_task(tmp_path, "e-gpu", toml="[environment]\ngpus = 1\n")
    suite = load_suite(str(tmp_path))
    assert [t.task_id for t in suite.tasks] == ["a-good", "d-good"]
    assert {e.task_id: e.error.split(":")[0] for e in suite.errors} == {
        "b-broken": "task b-broken", "c-missing": "task c-missing", "e-gpu": "task e-gpu"}


def test_unknown_suite_is_a_clear_error(tmp_path):
    with pytest.raises(SuiteError, match="no such directory or file"):
        load_suite(str(tmp_path / "nope"))


def test_builtin_suite_has_at_least_twelve_tasks_in_several_languages():
    suite = load_suite("builtin")
    assert not suite.errors
    assert len(suite.tasks) >= 12
    assert all(t.warnings == [] and t.environment.allow_internet is False for t in suite.tasks)
    languages = {t.config.metadata["tags"][0] for t in suite.tasks}
    assert len(languages - {"python"}) >= 2


def test_a_host_variable_in_the_agents_env_is_refused_and_allowed_for_the_verifier(tmp_path):
    toml = GOOD_TOML + '[environment.env]\nTOKEN = "${HOME}"\n[verifier.env]\nJUDGE_KEY = "${JUDGE_KEY}"\n'
    with pytest.raises(TaskFormatError) as refused:
        load_harbor_task(make_task(tmp_path, "agent-host-var", toml))
    assert "environment.env.TOKEN = '${HOME}' is not supported" in str(refused.value)
    verifier_only = GOOD_TOML + '[verifier.env]\nJUDGE_KEY = "${JUDGE_KEY}"\nMODEL = "${JUDGE_MODEL:-haiku}"\n'
    task = load_harbor_task(make_task(tmp_path, "judge", verifier_only))
    assert task.config.verifier.env == {"JUDGE_KEY": "${JUDGE_KEY}", "MODEL": "${JUDGE_MODEL:-haiku}"}


# --- a task without solution/solve.sh -------------------------------------------------------------------------------
def test_a_task_without_a_solution_is_invalid_before_anything_is_built_but_runs_for_a_model(make_task, tmp_path):
    """Harbor's copies of a task often leave solution/ out: it loads (a model's attempt needs none), `validate`
    says at once that it cannot be validated, and the oracle's attempt is refused before a build."""
    import asyncio

    from compare.validate import validate_task
    from conftest import exec_once
    from sandbox import SandboxOptions, open_sandbox

    task = make_task("no-solution", files={"solution/solve.sh": None})  # conftest's fixture, not this file's helper
    assert task.solution_dir is None
    options = SandboxOptions(cache_dir=tmp_path / "cache")
    result = asyncio.run(validate_task(task, options))
    assert not result.valid and result.oracle_resolved is None and result.empty_resolved is None
    assert result.error == ("task no-solution: no solution/solve.sh: validate needs the oracle's solution (add it to "
                            "the task)")
    with pytest.raises(FileNotFoundError, match="task no-solution has no solution/solve.sh"):
        asyncio.run(open_sandbox(task, options, solution=True))
    assert not (tmp_path / "cache" / "envs").exists()  # nothing was built for either
    assert asyncio.run(exec_once(task, options, "python3 -c 'import calc; print(calc.add(2, 3))'")).stdout == "-1\n"


@pytest.mark.parametrize("written, read", [
    ('"2023-04-12T13:45:02Z"', datetime(2023, 4, 12, 13, 45, 2, tzinfo=timezone.utc)),
    ("2023-04-12T15:45:02+02:00", datetime(2023, 4, 12, 13, 45, 2, tzinfo=timezone.utc)),  # a TOML date-time
    ("2023-04-12", datetime(2023, 4, 12, tzinfo=timezone.utc)),  # a TOML date
    (None, None)])
def test_metadata_created_at_is_the_tasks_date(tmp_path, written, read):
    dated = f'difficulty = "easy"\ncreated_at = {written}' if written is not None else 'difficulty = "easy"'
    make_task(tmp_path, "dated", toml=GOOD_TOML.replace('difficulty = "easy"', dated))
    assert load_harbor_task(tmp_path / "dated").created_at == read


def test_a_malformed_created_at_is_refused_naming_the_field(tmp_path):
    make_task(tmp_path, "undatable", toml=GOOD_TOML.replace('difficulty = "easy"', 'created_at = "the day before"'))
    with pytest.raises(TaskFormatError, match=r"task undatable: task.toml: metadata.created_at: not a date: give "
                                              r"ISO 8601, .* \(got 'the day before'\)"):
        load_harbor_task(tmp_path / "undatable")
