"""Harbor's `environment/docker-compose.yaml`: services (a database, a web server) beside the task's main container.

Harbor merges the task's Compose file over its own, in which the agent's container is the service `main`, and starts
them all on one network where each service is reached by its name. leafcost reads the same file into a
`ComposeEnvironment` (sandbox/tasks.py) and runs it the same way on every container backend: the services and the
main container share one network namespace (a holder container's on Podman, the pod's on Kubernetes), so a service is
reached at 127.0.0.1, and every service name (and `main`) resolves to 127.0.0.1. Only the keys leafcost implements
are honoured; any other key that changes behaviour (ports on the host, host paths, privileges, other networks) is
refused when the task loads, one line each, and harmless keys are listed as ignored.
"""

from __future__ import annotations

import hashlib
import os
import re
import shlex
from pathlib import Path
from typing import Any

import yaml

from sandbox.image_names import is_reference
from sandbox.tasks import ComposeEnvironment, ComposeService, HealthcheckConfig

COMPOSE_FILES = ("docker-compose.yaml", "docker-compose.yml")
MAIN = "main"
# A DNS label and a Kubernetes container name at once (a sidecar is named `service-<name>`).
SERVICE_NAME = re.compile(r"[a-z0-9](?:[-a-z0-9]{0,46}[a-z0-9])?")
IMPLEMENTED = ("image", "build", "environment", "entrypoint", "command", "user", "working_dir", "depends_on",
               "healthcheck", "cpus", "mem_limit", "deploy")
# Keys that change nothing leafcost guarantees: read, listed as ignored.
HARMLESS = frozenset({"container_name", "restart", "labels", "logging", "expose", "stop_grace_period", "stop_signal",
                      "tty", "stdin_open", "init", "hostname", "domainname", "platform", "pull_policy",
                      "mem_reservation", "cpu_shares"})
# Why a key that changes behaviour is refused, in the words of what it would do.
REFUSED = {
    "ports": "it publishes a port on the host",
    "volumes": "it mounts host paths or volumes into the sandbox",
    "volumes_from": "it mounts another container's volumes",
    "privileged": "a privileged container holds the host",
    "cap_add": "it grants capabilities",
    "devices": "it passes the host's devices",
    "device_cgroup_rules": "it passes the host's devices",
    "gpus": "leafcost has no GPU backend",
    "network_mode": "every service shares the attempt's one network namespace",
    "networks": "every service shares the attempt's one network namespace",
    "links": "services are reached by their names only",
    "external_links": "services are reached by their names only",
    "extra_hosts": "service names resolve to the attempt's own services only",
    "dns": "service names resolve to the attempt's own services only",
    "dns_search": "service names resolve to the attempt's own services only",
    "pid": "it shares a namespace of the host or another container",
    "ipc": "it shares a namespace of the host or another container",
    "userns_mode": "it shares a namespace of the host or another container",
    "uts": "it shares a namespace of the host or another container",
    "cgroup": "it shares a namespace of the host or another container",
    "cgroup_parent": "it places the container outside the attempt's limits",
    "security_opt": "it changes the container's confinement",
    "sysctls": "it changes kernel settings",
    "ulimits": "leafcost sets the limits",
    "runtime": "leafcost chooses the runtime",
    "env_file": "it reads files of this machine into the service",
    "configs": "it reads files of this machine into the service",
    "secrets": "it reads files of this machine into the service",
    "profiles": "services behind profiles are not started by Harbor either",
    "scale": "one container per service",
    "tmpfs": "leafcost sets the container's mounts",
    "shm_size": "leafcost sets the limits",
    "extends": "the service must be written out in this file",
}
# What the main container may take from the file: it is the task's own container otherwise.
MAIN_KEYS = frozenset({"depends_on", "environment"})
_DURATION = re.compile(r"(\d+(?:\.\d+)?)(us|ms|s|m|h)")
_SIZE = re.compile(r"(\d+(?:\.\d+)?)\s*([kmgt]?)b?", re.IGNORECASE)
_VARIABLE = re.compile(r"\$(?:\$|\{([A-Za-z_][A-Za-z0-9_]*)(?:(:?-)([^}]*))?\}|([A-Za-z_][A-Za-z0-9_]*))")


class ComposeProblem(ValueError):
    """One line: a key leafcost refuses (and why), or a value it cannot read."""


def compose_file(task_dir: Path) -> str | None:
    return next((name for name in COMPOSE_FILES if (task_dir / "environment" / name).is_file()), None)


def load_compose(task_dir: Path) -> tuple[ComposeEnvironment | None, list[str]]:
    """The task's Compose environment (None without a Compose file) and every problem found, one line each and
    each naming the file and the key, so one edit pass fixes the file."""
    name = compose_file(task_dir)
    if name is None:
        return None, []
    where = f"environment/{name}"
    try:
        data = yaml.safe_load((task_dir / "environment" / name).read_text(encoding="utf-8"))
    except (yaml.YAMLError, UnicodeDecodeError) as exc:
        return None, [f"{where} is not valid YAML: {_yaml_problem(exc)}"]
    problems: list[str] = []
    ignored: list[str] = []
    services = _top_level(data, problems, ignored)
    main: dict[str, Any] = services.pop(MAIN, None) or {}
    parsed = []
    for service_name, body in services.items():
        try:
            parsed.append(_service(task_dir, str(service_name), body, problems, ignored))
        except ComposeProblem as exc:
            problems.append(str(exc))
    main_environment, main_dependencies = _main(main, problems, ignored)
    known = {service.name for service in parsed}
    for service in parsed:
        problems += [f"services.{service.name}.depends_on: no service {dependency!r} in the file"
                     for dependency in service.depends_on if dependency not in known]
    problems += [f"services.main.depends_on: no service {dependency!r} in the file"
                 for dependency in main_dependencies if dependency not in known]
    ordered = _start_order(parsed, problems)
    problems = [f"{where}: {problem}" for problem in problems]
    if problems:
        return None, problems
    return ComposeEnvironment(file=name, services=ordered, main_environment=main_environment, ignored=ignored), []


def hosts_file(cache_dir: Path, names: list[str]) -> Path:
    """An /etc/hosts giving every name to the loopback, written once (by its content) under leafcost's cache and
    bound read-only into each container of an attempt: containers that join another's network namespace cannot get
    `--add-host` entries of their own, and a file of the host that the sandbox cannot write is what a pod's
    hostAliases give too."""
    text = "127.0.0.1\tlocalhost\n::1\tlocalhost\n" + f"127.0.0.1\t{' '.join(names)}\n"
    directory = Path(cache_dir) / "compose-hosts"
    directory.mkdir(parents=True, exist_ok=True)
    path = directory / f"{hashlib.sha256(text.encode()).hexdigest()[:24]}.hosts"
    if not path.is_file():
        temporary = directory / f".{path.name}.{os.getpid()}.tmp"
        temporary.write_text(text)
        temporary.chmod(0o644)
        os.replace(temporary, path)
    return path


def service_run_args(service: ComposeService, cpus: float, memory_mb: int, pids: int) -> tuple[list[str], list[str]]:
    """The engine `run` flags (without image and network) and the arguments after the image, as Compose would run
    the service: `entrypoint` replaces the image's (and its default command), `command` replaces the command."""
    flags = ["--init", "--cpus", f"{cpus:g}", "--memory", f"{memory_mb}m", "--memory-swap", f"{memory_mb}m",
             "--pids-limit", str(pids)]
    if service.user is not None:
        flags += ["--user", service.user]
    if service.working_dir:
        flags += ["--workdir", service.working_dir]
    arguments = list(service.command or [])
    if service.entrypoint is not None:
        flags += ["--entrypoint", service.entrypoint[0] if service.entrypoint else ""]
        arguments = service.entrypoint[1:] + arguments
    return flags, arguments


def _top_level(data: Any, problems: list[str], ignored: list[str]) -> dict[str, Any]:
    if not isinstance(data, dict) or not isinstance(data.get("services"), dict):
        problems.append("needs a `services:` mapping (Harbor's main container is the service `main`)")
        return {}
    for key in map(str, data):
        if key == "name" or key.startswith("x-"):
            ignored.append(key)
        elif key in _TOP_REFUSED:
            problems.append(f"{key} is not supported ({_TOP_REFUSED[key]})")
        elif key not in ("services", "version"):  # version: obsolete, Compose ignores it too
            problems.append(f"{key} is not a Compose key leafcost runs")
    return dict(data["services"])


_TOP_REFUSED = {"volumes": "services get no volumes and no host paths",
                "networks": "every service shares the attempt's one network namespace",
                "configs": REFUSED["configs"], "secrets": REFUSED["secrets"]}


def _service(task_dir: Path, name: str, body: Any, problems: list[str], ignored: list[str]) -> ComposeService:
    where = f"services.{name}"
    if not SERVICE_NAME.fullmatch(name) or name == "sandbox":
        raise ComposeProblem(f"{where}: the service name must be lowercase letters, digits and '-' (at most 48, not "
                             "'sandbox'): it becomes a host name and a container name")
    if not isinstance(body, dict):
        raise ComposeProblem(f"{where} must be a mapping of Compose keys")
    for key in body:
        _check_key(where, str(key), problems, ignored)
    image, context, dockerfile = _image(task_dir, where, body)
    cpus, memory_mb = _limits(where, body, problems)
    return ComposeService(
        name=name, image=image, build_context=context, dockerfile=dockerfile,
        environment=_environment(body.get("environment"), where),
        entrypoint=_words(body["entrypoint"], f"{where}.entrypoint") if "entrypoint" in body else None,
        command=_words(body["command"], f"{where}.command") if "command" in body else None,
        user=_text(body["user"], f"{where}.user") if body.get("user") is not None else None,
        working_dir=_text(body["working_dir"], f"{where}.working_dir") if body.get("working_dir") else None,
        depends_on=_depends_on(body.get("depends_on"), where),
        healthcheck=_healthcheck(body.get("healthcheck"), where), cpus=cpus, memory_mb=memory_mb)


def _check_key(where: str, key: str, problems: list[str], ignored: list[str]) -> None:
    if key in IMPLEMENTED:
        return
    if key in HARMLESS or key.startswith("x-"):
        ignored.append(f"{where}.{key}")
    elif key in REFUSED:
        problems.append(f"{where}.{key} is not supported ({REFUSED[key]})")
    else:
        problems.append(f"{where}.{key} is not a Compose key leafcost runs (it runs {', '.join(IMPLEMENTED)})")


def _main(main: Any, problems: list[str], ignored: list[str]) -> tuple[dict[str, str], list[str]]:
    """What the file may say of `main`: its environment and what it depends on. Its image, command and limits are
    the task's own (environment/Dockerfile or docker_image, task.toml), as in Harbor's base file."""
    if not isinstance(main, dict):
        problems.append("services.main must be a mapping of Compose keys")
        return {}, []
    for key in main:
        if key in MAIN_KEYS:
            continue
        if key in HARMLESS or str(key).startswith("x-"):
            ignored.append(f"services.main.{key}")
        elif key in REFUSED:
            problems.append(f"services.main.{key} is not supported ({REFUSED[key]})")
        else:
            problems.append(f"services.main.{key} is not supported (main is the task's own container: its image, "
                            "command and limits come from environment/Dockerfile and task.toml)")
    try:
        return _environment(main.get("environment"), "services.main"), _depends_on(main.get("depends_on"),
                                                                                  "services.main")
    except ComposeProblem as exc:
        problems.append(str(exc))
        return {}, []


def _image(task_dir: Path, where: str, body: dict[str, Any]) -> tuple[str | None, Path | None, Path | None]:
    """`build` (a context inside the task's folder) wins over `image`, as Compose builds and tags it."""
    build = body.get("build")
    if build is not None:
        spec = {"context": build} if isinstance(build, str) else build
        if not isinstance(spec, dict) or set(spec) - {"context", "dockerfile"}:
            extra = sorted(set(spec) - {"context", "dockerfile"}) if isinstance(spec, dict) else []
            raise ComposeProblem(f"{where}.build: only context and dockerfile are supported"
                                 + (f" (found {', '.join(map(str, extra))})" if extra else ""))
        root = task_dir.resolve()
        context = (task_dir / "environment" / _interpolate(str(spec.get("context", ".")), f"{where}.build")).resolve()
        if context != root and root not in context.parents:
            raise ComposeProblem(f"{where}.build.context {spec.get('context')!r} is outside the task's folder")
        dockerfile = (context / _interpolate(str(spec.get("dockerfile", "Dockerfile")), f"{where}.build")).resolve()
        if not dockerfile.is_file() or context not in dockerfile.parents:
            raise ComposeProblem(f"{where}.build: no file {spec.get('dockerfile', 'Dockerfile')!r} inside the build "
                                 "context")
        return None, context, dockerfile
    image = body.get("image")
    if not isinstance(image, str) or not is_reference(_interpolate(image, f"{where}.image")):
        raise ComposeProblem(f"{where} needs `image` (an image reference) or `build`")
    return _interpolate(image, f"{where}.image"), None, None


def _environment(value: Any, where: str) -> dict[str, str]:
    """A mapping or a list of NAME=value; a name without a value would copy a variable of this machine: refused."""
    if value is None:
        return {}
    if isinstance(value, list):
        pairs = [str(item).partition("=") for item in value]
        if bad := next((name for name, eq, _ in pairs if not eq), None):
            raise ComposeProblem(f"{where}.environment: {bad} has no value (it would copy a variable of this "
                                 "machine into the sandbox; write NAME=value)")
        value = {name: text for name, _, text in pairs}
    if not isinstance(value, dict):
        raise ComposeProblem(f"{where}.environment must be a mapping or a list of NAME=value")
    found = {}
    for name, text in value.items():
        if text is None:
            raise ComposeProblem(f"{where}.environment.{name} has no value (it would copy a variable of this "
                                 "machine into the sandbox; write the value)")
        if isinstance(text, bool):
            text = "true" if text else "false"
        found[str(name)] = _interpolate(str(text), f"{where}.environment.{name}")
    return found


def _words(value: Any, where: str) -> list[str]:
    if isinstance(value, str):
        return shlex.split(_interpolate(value, where))
    if isinstance(value, list) and all(isinstance(item, (str, int, float)) for item in value):
        return [_interpolate(str(item), where) for item in value]
    if value is None:
        return []
    raise ComposeProblem(f"{where} must be a string or a list of strings")


def _text(value: Any, where: str) -> str:
    if not isinstance(value, (str, int)) or isinstance(value, bool):
        raise ComposeProblem(f"{where} must be a string")
    return _interpolate(str(value), where)


def _depends_on(value: Any, where: str) -> list[str]:
    """A list of names, or names with `condition: service_started | service_healthy`; every service is started in
    order and waited for until healthy when it declares a healthcheck, which satisfies both conditions."""
    if value is None:
        return []
    if isinstance(value, list):
        return [str(item) for item in value]
    if not isinstance(value, dict):
        raise ComposeProblem(f"{where}.depends_on must be a list or a mapping")
    for name, condition in value.items():
        kind = (condition or {}).get("condition", "service_started") if isinstance(condition, dict) else None
        if kind not in ("service_started", "service_healthy"):
            raise ComposeProblem(f"{where}.depends_on.{name}: condition {kind!r} is not supported (leafcost starts "
                                 "services and waits for their healthchecks: service_started, service_healthy)")
    return [str(name) for name in value]


def _healthcheck(value: Any, where: str) -> HealthcheckConfig | None:
    """Compose's healthcheck as task.toml's: `test` as one shell command, durations in seconds."""
    if value is None or not isinstance(value, dict):
        if value is not None:
            raise ComposeProblem(f"{where}.healthcheck must be a mapping")
        return None
    if value.get("disable") is True:
        return None
    test = value.get("test")
    if isinstance(test, list) and test and test[0] == "NONE":
        return None
    if isinstance(test, str):
        command = test
    elif isinstance(test, list) and len(test) >= 2 and test[0] in ("CMD", "CMD-SHELL"):
        command = test[1] if test[0] == "CMD-SHELL" else shlex.join(str(word) for word in test[1:])
    else:
        raise ComposeProblem(f"{where}.healthcheck.test must be a string, [\"CMD\", ...] or [\"CMD-SHELL\", ...]")
    durations = {key: _seconds(value[key], f"{where}.healthcheck.{key}")
                 for key in ("interval", "timeout", "start_period", "start_interval") if key in value}
    extra = set(value) - {"test", "interval", "timeout", "start_period", "start_interval", "retries", "disable"}
    if extra:
        raise ComposeProblem(f"{where}.healthcheck.{sorted(extra)[0]} is not a healthcheck key leafcost reads")
    retries = value.get("retries", 3)
    if not isinstance(retries, int) or isinstance(retries, bool) or retries < 1:
        raise ComposeProblem(f"{where}.healthcheck.retries must be a whole number of at least 1 (got {retries!r})")
    return HealthcheckConfig(command=_interpolate(command, f"{where}.healthcheck.test"),
                             interval_sec=durations.get("interval", 30.0), timeout_sec=durations.get("timeout", 30.0),
                             start_period_sec=durations.get("start_period", 0.0),
                             start_interval_sec=durations.get("start_interval", 5.0),
                             retries=retries)


def _limits(where: str, body: dict[str, Any], problems: list[str]) -> tuple[float | None, int | None]:
    """`cpus` and `mem_limit`, or `deploy.resources.limits` (cpus, memory); nothing else of `deploy` is run."""
    cpus, memory = body.get("cpus"), body.get("mem_limit")
    deploy = body.get("deploy")
    if deploy is not None:
        resources = deploy.get("resources") if isinstance(deploy, dict) else None
        if not isinstance(deploy, dict) or set(deploy) - {"resources"} or not isinstance(resources, dict) \
                or set(resources) - {"limits"} or set(resources.get("limits") or {}) - {"cpus", "memory"}:
            problems.append(f"{where}.deploy: only deploy.resources.limits (cpus, memory) is supported")
            return None, None
        limits = resources.get("limits") or {}
        cpus, memory = limits.get("cpus", cpus), limits.get("memory", memory)
    try:
        return (float(cpus) if cpus is not None else None), (_megabytes(memory) if memory is not None else None)
    except (TypeError, ValueError):
        problems.append(f"{where}: cpus must be a number and mem_limit a size like '512m' (got {cpus!r}, {memory!r})")
        return None, None


def _start_order(services: list[ComposeService], problems: list[str]) -> list[ComposeService]:
    """Each service after those it depends on (file order otherwise); a cycle is a problem naming it."""
    by_name = {service.name: service for service in services}
    ordered: list[ComposeService] = []
    visiting: list[str] = []

    def visit(service: ComposeService) -> None:
        if service in ordered:
            return
        if service.name in visiting:
            problems.append(f"services: depends_on makes a cycle: {' -> '.join(visiting + [service.name])}")
            raise ComposeProblem("cycle")
        visiting.append(service.name)
        for dependency in service.depends_on:
            if dependency in by_name:
                visit(by_name[dependency])
        visiting.pop()
        ordered.append(service)

    try:
        for service in services:
            visit(service)
    except ComposeProblem:
        return []
    return ordered


def _interpolate(text: str, where: str) -> str:
    """Compose's variables: `$$` is a dollar, `${VAR:-default}` its default; a variable that would be read from this
    machine (`${VAR}`, `$VAR`) is refused, as in environment.env."""
    def value(match: re.Match[str]) -> str:
        if match.group(0) == "$$":
            return "$"
        if match.group(2) is not None:
            return match.group(3)
        raise ComposeProblem(f"{where} uses {match.group(0)}, a variable of this machine (never handed to the "
                             "sandbox): write the value")
    return _VARIABLE.sub(value, text)


def _yaml_problem(exc: Exception) -> str:
    """YAML's complaint in one line, with where it is: `line 3, column 5: mapping values are not allowed here`."""
    mark, problem = getattr(exc, "problem_mark", None), getattr(exc, "problem", None)
    if mark is not None and problem:
        return f"line {mark.line + 1}, column {mark.column + 1}: {problem}"
    return (str(exc).strip().splitlines() or [type(exc).__name__])[0]


def _seconds(value: Any, where: str) -> float:
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        return float(value)
    text = str(value).strip()
    parts = _DURATION.findall(text)
    if not parts or "".join(number + unit for number, unit in parts) != text:
        raise ComposeProblem(f"{where} must be a duration like '10s', '1m30s' or '500ms' (got {value!r})")
    scale = {"us": 1e-6, "ms": 1e-3, "s": 1.0, "m": 60.0, "h": 3600.0}
    return sum(float(number) * scale[unit] for number, unit in parts)


def _megabytes(value: Any) -> int:
    """Compose sizes: a number of bytes, or '512m', '1g', '1gb'."""
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        return max(1, int(value) >> 20)
    found = _SIZE.fullmatch(str(value).strip())
    if found is None:
        raise ValueError(value)
    scale = {"": 1 / (1 << 20), "k": 1 / 1024, "m": 1, "g": 1024, "t": 1 << 20}[found.group(2).lower()]
    return max(1, int(float(found.group(1)) * scale))
