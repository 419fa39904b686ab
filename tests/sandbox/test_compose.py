"""Harbor's environment/docker-compose.yaml: read as Harbor reads it (the task's container is `main`, the other
services run beside it and are reached by name), refused key by key where it would change what leafcost guarantees,
and run on real Podman: the services in the attempt's one network namespace, removed with the attempt."""

from __future__ import annotations

import asyncio
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import kubernetes_validate
import pytest

from sandbox import BuildError, SandboxOptions, load_harbor_task, open_sandbox
from sandbox.container.containers import remove_container_leftovers
from sandbox.container.engine import engine
from sandbox.harbor import TaskFormatError
from sandbox.kubernetes.manifests import KUBERNETES_VERSION, attempt_pod
from sandbox.kubernetes.pods import close_clusters

FIXTURE = Path(__file__).resolve().parents[1] / "fixtures" / "harbor" / "compose-service"
LEAFCOST = Path(sys.executable).with_name("leafcost")
TOML = """schema_version = "1.2"
[environment]
cpus = 1
memory_mb = 1024
allow_internet = false
"""
SERVICE = "services:\n  web:\n    image: localhost/debian:bookworm\n    command: sleep 600\n"


def compose_task(tmp_path: Path, compose: str, *, toml: str = TOML, name: str = "composed") -> Path:
    """A Harbor task whose environment/ holds `compose` beside a Dockerfile (and a `web/` build context)."""
    task = tmp_path / name
    files = {"task.toml": toml, "instruction.md": "# Do it\n", "tests/test.sh": "echo 1 > /logs/verifier/reward.txt\n",
             "solution/solve.sh": "true\n", "environment/Dockerfile": "FROM localhost/debian:bookworm\n",
             "environment/web/Dockerfile": "FROM localhost/debian:bookworm\n",
             "environment/docker-compose.yaml": compose}
    for relative, text in files.items():
        (task / relative).parent.mkdir(parents=True, exist_ok=True)
        (task / relative).write_text(text)
    return task


def refused(tmp_path: Path, compose: str, **kwargs) -> str:
    with pytest.raises(TaskFormatError) as caught:
        load_harbor_task(compose_task(tmp_path, compose, **kwargs))
    return str(caught.value)


def run(coro):
    return asyncio.run(coro)


# --- reading the file as Harbor does --------------------------------------------------------------------------------


def test_the_fixture_loads_its_service_beside_main_in_harbors_format():
    task = load_harbor_task(FIXTURE)
    assert task.compose is not None and task.compose.file == "docker-compose.yaml"
    [web] = task.compose.services
    assert web.name == "web" and web.image is None
    assert web.build_context == FIXTURE / "environment" / "web" and web.dockerfile == web.build_context / "Dockerfile"
    assert web.command == ["sh", "/serve.sh"] and web.environment == {"GREETING": "hello-from-web"}
    assert web.healthcheck.command.startswith("python3 -c ") and web.healthcheck.interval_sec == 1.0
    assert (web.healthcheck.start_period_sec, web.healthcheck.start_interval_sec) == (30.0, 0.5)
    assert web.limits(task.environment) == (0.5, 256)
    assert task.compose.main_environment == {"WEB_URL": "http://web:8080"}
    assert task.compose.host_names == ["main", "web"]


def test_a_service_never_gets_more_cpu_or_memory_than_the_tasks_own_container(tmp_path):
    compose = SERVICE + "    cpus: 4\n    mem_limit: 8g\n  quiet:\n    image: localhost/debian:bookworm\n"
    task = load_harbor_task(compose_task(tmp_path, compose))
    greedy, quiet = task.compose.services
    assert greedy.limits(task.environment) == (1.0, 1024)
    assert quiet.limits(task.environment) == (1.0, 1024)  # unset: the task's


def test_services_start_after_what_they_depend_on(tmp_path):
    compose = ("services:\n  app:\n    image: localhost/debian:bookworm\n    depends_on: [db]\n"
               "  db:\n    image: localhost/debian:bookworm\n"
               "    depends_on:\n      cache: {condition: service_healthy}\n"
               "  cache:\n    build: ./web\n")
    task = load_harbor_task(compose_task(tmp_path, compose))
    assert [service.name for service in task.compose.services] == ["cache", "db", "app"]


@pytest.mark.parametrize("key, value, reason", [
    ("ports", '["8080:8080"]', "it publishes a port on the host"),
    ("volumes", '["/etc:/host-etc"]', "it mounts host paths or volumes into the sandbox"),
    ("privileged", "true", "a privileged container holds the host"),
    ("cap_add", "[SYS_ADMIN]", "it grants capabilities"),
    ("network_mode", "host", "every service shares the attempt's one network namespace"),
    ("networks", "[outside]", "every service shares the attempt's one network namespace"),
    ("devices", '["/dev/kvm:/dev/kvm"]', "it passes the host's devices"),
    ("pid", "host", "it shares a namespace of the host or another container"),
    ("env_file", "[.env]", "it reads files of this machine into the service"),
    ("security_opt", '["seccomp=unconfined"]', "it changes the container's confinement"),
])
def test_each_key_that_would_change_the_sandbox_is_refused_in_one_line_naming_it(tmp_path, key, value, reason):
    message = refused(tmp_path, SERVICE + f"    {key}: {value}\n")
    assert message == (f"task composed: environment/docker-compose.yaml: services.web.{key} is not supported "
                       f"({reason})")


def test_every_problem_of_the_file_is_reported_at_once_and_top_level_volumes_too(tmp_path):
    compose = (SERVICE + "    ports: ['80:80']\n    privileged: true\n"
               "  main:\n    ports: ['22:22']\nvolumes:\n  data: {}\n")
    problems = refused(tmp_path, compose).removeprefix("task composed: ").split("; ")
    assert problems == [
        "environment/docker-compose.yaml: volumes is not supported (services get no volumes and no host paths)",
        "environment/docker-compose.yaml: services.web.ports is not supported (it publishes a port on the host)",
        "environment/docker-compose.yaml: services.web.privileged is not supported (a privileged container holds "
        "the host)",
        "environment/docker-compose.yaml: services.main.ports is not supported (it publishes a port on the host)"]


def test_harmless_keys_are_ignored_and_listed_in_one_warning(tmp_path):
    task = load_harbor_task(compose_task(tmp_path, SERVICE + "    restart: always\n    container_name: w\n"
                                                   "    labels: {a: b}\n"))
    assert task.warnings == ["task composed: environment/docker-compose.yaml keys leafcost ignores: "
                             "services.web.restart, services.web.container_name, services.web.labels"]


def test_a_variable_of_this_machine_is_refused_but_defaults_and_dollars_are_read(tmp_path):
    message = refused(tmp_path, SERVICE + "    environment:\n      KEY: ${OPENAI_API_KEY}\n")
    assert message.endswith("services.web.environment.KEY uses ${OPENAI_API_KEY}, a variable of this machine (never "
                            "handed to the sandbox): write the value")
    assert "has no value" in refused(tmp_path, SERVICE + "    environment: [HOME]\n", name="bare")
    task = load_harbor_task(compose_task(tmp_path, SERVICE + "    environment:\n      PORT: ${PORT:-8080}\n"
                                                   "      PRICE: $$5\n", name="defaults"))
    assert task.compose.services[0].environment == {"PORT": "8080", "PRICE": "$5"}


def test_a_build_context_outside_the_task_and_impossible_dependencies_are_refused(tmp_path):
    outside = refused(tmp_path, "services:\n  web:\n    build: ../../..\n", name="outside")
    assert outside.endswith("services.web.build.context '../../..' is outside the task's folder")
    unknown = refused(tmp_path, SERVICE + "    depends_on: [db]\n", name="unknown")
    assert unknown.endswith("services.web.depends_on: no service 'db' in the file")
    cycle = refused(tmp_path, "services:\n  a: {image: x, depends_on: [b]}\n  b: {image: x, depends_on: [a]}\n",
                    name="cycle")
    assert cycle.endswith("services: depends_on makes a cycle: a -> b -> a")
    once = refused(tmp_path, SERVICE + "    depends_on:\n      main: {condition: service_completed_successfully}\n",
                   name="once")
    assert "condition 'service_completed_successfully' is not supported" in once


def test_broken_yaml_is_one_line_saying_where(tmp_path):
    message = refused(tmp_path, "services:\n  web:\n    image: x\n  bad: : [\n")
    assert message == ("task composed: environment/docker-compose.yaml is not valid YAML: line 4, column 8: mapping "
                       "values are not allowed here")


def test_an_mcp_task_with_its_server_as_a_service_is_refused_for_mcp_alone(tmp_path):
    """Harbor's MCP examples run the server as a Compose service: the service would run, the agent could not use it."""
    toml = TOML + '[[environment.mcp_servers]]\nname = "m"\ntransport = "sse"\nurl = "http://web:8000/sse"\n'
    assert refused(tmp_path, SERVICE, toml=toml) == (
        "task composed: environment.mcp_servers is not supported (the agent would call the server's tools, and Leaf "
        "has five fixed tools and no MCP client)")


def test_the_local_backend_refuses_a_compose_task_in_one_line(tmp_path):
    task = load_harbor_task(compose_task(tmp_path, SERVICE))
    with pytest.raises(BuildError) as caught:
        run(open_sandbox(task, SandboxOptions(backend="local", cache_dir=tmp_path / "cache")))
    message = str(caught.value)
    assert "\n" not in message
    assert message.startswith("task composed: the local backend cannot honour environment/docker-compose.yaml "
                              "(its services are containers beside the task's; --backend kubernetes runs them "
                              "too): the task needs --backend podman")


# --- running it on Podman -------------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def podman(container_images, tmp_path_factory) -> SandboxOptions:
    return SandboxOptions(backend="podman", cache_dir=tmp_path_factory.mktemp("podman-cache"))


def containers(label: str) -> list[dict]:
    listed = subprocess.run(engine("podman").command("ps", "-a", "--format", "json", "--filter", f"label={label}"),
                            capture_output=True, text=True, check=True)
    return json.loads(listed.stdout or "[]")


def test_the_fixture_is_valid_through_podman_as_a_user_runs_it(podman, tmp_path):
    """The oracle resolves by talking to the service by its name; doing nothing does not."""
    result = subprocess.run([str(LEAFCOST), "validate", str(FIXTURE), "--backend", "podman", "--json"],
                            capture_output=True, text=True, timeout=900, cwd=tmp_path)
    [verdict] = json.loads(result.stdout)["tasks"]
    assert (verdict["oracle_resolved"], verdict["empty_resolved"], verdict["valid"]) == (True, False, True), verdict
    assert result.returncode == 0


def test_the_services_share_the_attempts_network_only_and_go_with_it(podman):
    task = load_harbor_task(FIXTURE)
    labels = {"leafcost.run": "compose-test-run"}

    async def look():
        opened = await open_sandbox(task, podman, labels=labels)
        try:
            names = await opened.sandbox.exec("for n in web main; do set -- $(getent hosts $n); echo $n=$1; done; "
                                              "echo \"$WEB_URL\"", timeout=30)
            outside = await opened.sandbox.exec("getent ahosts deb.debian.org || echo unreachable", timeout=30)
            during = containers("leafcost.run=compose-test-run")
            [web] = [c for c in during if c["Labels"]["leafcost.role"] == "service"]
            inspected = json.loads(subprocess.run(engine("podman").command("inspect", web["Id"]),
                                                  capture_output=True, text=True, check=True).stdout)[0]
            return names.stdout, outside.stdout, during, inspected, opened.spec.image
        finally:
            await opened.close()

    names, outside, during, inspected, spec_image = run(look())
    assert names.split() == ["web=127.0.0.1", "main=127.0.0.1", "http://web:8080"]
    assert outside.strip() == "unreachable"  # allow_internet = false: the shared namespace has the loopback only
    roles = sorted(c["Labels"]["leafcost.role"] for c in during)
    assert roles == ["agent", "network", "service"]
    [web] = [c for c in during if c["Labels"]["leafcost.role"] == "service"]
    assert web["Labels"]["leafcost.service"] == "web" and web["Labels"]["leafcost.owner"]
    assert inspected["HostConfig"]["Memory"] == 256 << 20 and inspected["HostConfig"]["NanoCpus"] == 500_000_000
    assert not inspected["HostConfig"]["Privileged"]
    [hosts] = inspected["HostConfig"]["Binds"]  # the only path of this host it sees: the names, read-only
    assert hosts.split(":")[1:3] == ["/etc/hosts", "ro,rprivate,rbind"]
    assert " web=sha256:" in spec_image  # the service's image is part of the sandbox spec
    assert containers("leafcost.run=compose-test-run") == []


def test_grading_kills_the_agents_processes_while_the_services_live_on(podman):
    task = load_harbor_task(FIXTURE)
    fetch = ("bash -c 'exec 3<>/dev/tcp/web/8080 && printf \"GET /token HTTP/1.0\\r\\n\\r\\n\" >&3 && "
             "sed \"1,/^\\r$/d\" <&3'")
    sleepers = "for c in /proc/[0-9]*/comm; do cat $c; done 2>/dev/null | grep -c '^sleep$' || true"

    async def grade():
        opened = await open_sandbox(task, podman)
        try:
            await opened.sandbox.exec("nohup sleep 900 >/dev/null 2>&1 &", timeout=30)
            before = (await opened.sandbox.exec(fetch, timeout=30)).stdout
            running = (await opened.sandbox.exec(sleepers, timeout=30)).stdout
            await opened.quiesce()
            after = (await opened.sandbox.exec(fetch, timeout=30)).stdout
            left = (await opened.sandbox.exec(sleepers, timeout=30)).stdout
            return before, running, after, left
        finally:
            await opened.close()

    before, running, after, left = run(grade())
    assert running.strip() == "1" and left.strip() == "0"
    assert before.startswith("hello-from-web-") and after == before  # the same service process, never restarted


def test_a_service_that_dies_at_start_is_a_task_error_naming_it(podman, tmp_path):
    compose = ("services:\n  web:\n    image: localhost/debian:bookworm\n"
               "    command: sh -c 'echo no config >&2; exit 3'\n")
    task = load_harbor_task(compose_task(tmp_path, compose))
    with pytest.raises(BuildError) as caught:
        run(open_sandbox(task, podman, labels={"leafcost.run": "compose-dies"}))
    assert str(caught.value) == "task composed: service web exited as it started: no config"
    assert containers("leafcost.run=compose-dies") == []


@pytest.mark.parametrize("access", ["api", "cli"])
@pytest.mark.parametrize("healthcheck", ["", "    healthcheck:\n      test: [\"CMD\", \"true\"]\n"
                                         "      interval: 1s\n      start_period: 0s\n      start_interval: 100ms\n"])
def test_a_service_that_dies_at_start_is_caught_however_its_state_was_first_read(podman, tmp_path, monkeypatch,
                                                                                access, healthcheck):
    """The engine's wait on the service's exit decides, not a state read that may come before the exit lands:
    with a healthcheck that passes while it lives too, and through the API as through the command line."""
    if access == "cli":
        monkeypatch.setenv("LEAFCOST_CONTAINER_API", "cli")
    compose = ("services:\n  web:\n    image: localhost/debian:bookworm\n"
               "    command: sh -c 'echo no config >&2; exit 3'\n" + healthcheck)
    task = load_harbor_task(compose_task(tmp_path, compose))
    with pytest.raises(BuildError) as caught:
        run(open_sandbox(task, podman, labels={"leafcost.run": f"compose-dies-{access}"}))
    assert str(caught.value) == "task composed: service web exited as it started: no config"
    assert containers(f"leafcost.run=compose-dies-{access}") == []


def test_with_an_image_lock_the_services_images_are_held_to_it_too(podman, tmp_path):
    lock = tmp_path / "images.lock.json"
    done = subprocess.run([str(LEAFCOST), "images", "lock", str(FIXTURE), "-o", str(lock)], capture_output=True,
                          text=True, timeout=900)
    assert done.returncode == 0, done.stderr
    locked = json.loads(lock.read_text())
    options = podman.model_copy(update={"images_lock": lock})
    task = load_harbor_task(FIXTURE)

    async def spec_image():
        opened = await open_sandbox(task, options)
        await opened.close()
        return opened.spec.image

    web = locked["services"]["compose-service"]["web"]
    assert run(spec_image()) == f"{locked['tasks']['compose-service']['id']} web={web['id']}"
    web["id"] = "sha256:" + "0" * 64
    lock.write_text(json.dumps(locked))
    with pytest.raises(BuildError, match="service web's image .* but the image lock .* says sha256:000000000000"):
        run(open_sandbox(task, options))
    del locked["services"]["compose-service"]
    lock.write_text(json.dumps(locked))
    with pytest.raises(BuildError, match="service web is not in the image lock"):
        run(open_sandbox(task, options))


DRIVER = """
import asyncio, sys
from sandbox import SandboxOptions, load_harbor_task, open_sandbox

async def main():
    options = SandboxOptions(backend="podman", cache_dir=sys.argv[2])
    opened = await open_sandbox(load_harbor_task(sys.argv[1]), options, labels={"leafcost.run": "compose-killed"})
    print("open", flush=True)
    await asyncio.sleep(3600)

asyncio.run(main())
"""


def test_a_killed_runners_services_and_holder_go_without_waiting_for_the_next_run(podman, tmp_path):
    driver = tmp_path / "driver.py"
    driver.write_text(DRIVER)
    repo = Path(__file__).resolve().parents[2]
    runner = subprocess.Popen([sys.executable, str(driver), str(FIXTURE), str(podman.cache_dir)], cwd=repo,
                              env={**os.environ, "PYTHONPATH": str(repo)}, stdout=subprocess.PIPE,
                              stderr=subprocess.PIPE, text=True)
    try:
        assert runner.stdout.readline().strip() == "open", runner.stderr.read()
        assert len(containers("leafcost.run=compose-killed")) == 3  # the holder, the service, the main container
        runner.send_signal(signal.SIGKILL)
        runner.wait()
        deadline = time.monotonic() + 60  # a safety bound, not what is asserted
        while time.monotonic() < deadline and containers("leafcost.run=compose-killed"):
            time.sleep(0.5)
        assert containers("leafcost.run=compose-killed") == []  # the watchdog's second pass takes the holder
    finally:
        if runner.poll() is None:
            runner.kill()
        remove_container_leftovers(podman)


def test_a_dead_owners_network_holder_and_its_services_are_all_removed(podman):
    podman_cli = engine("podman")
    base = ["--ulimit", "nofile=1024:1024", "--ulimit", "nproc=4096:4096", "--label", "leafcost=1",
            "--label", "leafcost.owner=999999999-7"]
    holder = subprocess.run(podman_cli.command("run", "-d", *base, "--network", "none", "localhost/debian:bookworm",
                                               "sleep", "600"),
                            capture_output=True, text=True, check=True).stdout.strip()
    joined = subprocess.run(podman_cli.command("run", "-d", *base, "--network", f"container:{holder}",
                                               "localhost/debian:bookworm", "sleep", "600"),
                            capture_output=True, text=True, check=True).stdout.strip()
    try:
        remove_container_leftovers(podman)
        assert containers("leafcost.owner=999999999-7") == []
    finally:
        subprocess.run(podman_cli.command("rm", "-f", "-t", "0", joined), capture_output=True)
        subprocess.run(podman_cli.command("rm", "-f", "-t", "0", holder), capture_output=True)



# --- the same environment as one pod on Kubernetes ------------------------------------------------------------------


def sidecar_pod(task, services):
    return attempt_pod(name="leafcost-0123456789abcdef", namespace="evals",
                       image="registry.example/t@sha256:" + "a" * 64, environment=task.environment, workdir="/app",
                       labels={"leafcost.run": "r"}, spec_hash="f" * 64, deadline_sec=600, services=services)


def test_the_services_are_sidecars_of_the_attempts_pod_started_in_order_and_probed(tmp_path):
    compose = ("services:\n  db:\n    image: localhost/debian:bookworm\n    user: '999:999'\n    mem_limit: 8g\n"
               "    healthcheck: {test: [CMD-SHELL, 'test -e /tmp/up'], interval: 2s, retries: 4, start_period: 10s}\n"
               "  web:\n    build: ./web\n    depends_on: [db]\n    entrypoint: [python3, -m]\n"
               "    command: http.server\n    environment: {MODE: test}\n")
    task = load_harbor_task(compose_task(tmp_path, compose))
    db, web = task.compose.services
    manifest = sidecar_pod(task, [(db, "sha256:" + "b" * 64, "Never"), (web, "reg.example/w@sha256:" + "c" * 64,
                                                                        "IfNotPresent")])
    kubernetes_validate.validate(manifest, KUBERNETES_VERSION, strict=True)
    spec = manifest["spec"]
    first, second = spec["initContainers"]
    assert (first["name"], second["name"]) == ("service-db", "service-web")  # the kubelet starts them in this order
    assert first["restartPolicy"] == second["restartPolicy"] == "Always"  # native sidecars: they live beside main
    assert first["startupProbe"] == {"exec": {"command": ["sh", "-c", "test -e /tmp/up"]}, "periodSeconds": 2,
                                     "timeoutSeconds": 30, "failureThreshold": 9}
    assert first["resources"]["limits"] == first["resources"]["requests"] == {"cpu": "1000m", "memory": "1024Mi"}
    assert first["securityContext"] == {**spec["containers"][0]["securityContext"], "runAsUser": 999,
                                        "runAsGroup": 999}
    assert (second["command"], second["args"], second["env"]) == (["python3", "-m"], ["http.server"],
                                                                   [{"name": "MODE", "value": "test"}])
    assert second["imagePullPolicy"] == "IfNotPresent" and "startupProbe" not in second
    assert spec["hostAliases"] == [{"ip": "127.0.0.1", "hostnames": ["main", "db", "web"]}]


def test_a_service_user_by_name_cannot_be_a_pods_and_says_so(tmp_path):
    task = load_harbor_task(compose_task(tmp_path, SERVICE + "    user: postgres\n"))
    with pytest.raises(BuildError, match=r"services.web.user 'postgres' must be numeric \(UID or UID:GID\) on "):
        sidecar_pod(task, [(task.compose.services[0], "sha256:" + "b" * 64, "Never")])


def test_the_fixture_runs_as_one_pod_with_its_service_beside_it_in_the_stand_in(kube_containers, tmp_path):
    """Locked as a user would lock it, then opened through the official client against the stand-in API server: the
    pod it creates carries the service's locked image as a sidecar and its name as a host alias."""
    kube, lock = kube_containers, tmp_path / "images.lock.json"
    done = subprocess.run([str(LEAFCOST), "images", "lock", str(FIXTURE), "-o", str(lock)], capture_output=True,
                          text=True, timeout=900)
    assert done.returncode == 0, done.stderr
    locked = json.loads(lock.read_text())
    options = SandboxOptions(backend="kubernetes", kubeconfig=kube.kubeconfig, kube_namespace=kube.namespace,
                             images_lock=lock)
    task = load_harbor_task(FIXTURE)

    async def pod():
        try:
            opened = await open_sandbox(task, options, labels={"leafcost.run": "compose-kube"})
            try:
                env = await opened.sandbox.exec("echo \"$WEB_URL\"", timeout=30)
                return kube.pod(opened.pod), opened.pod, env.stdout, opened.spec.image
            finally:
                await opened.close()
        finally:
            await close_clusters()

    made, name, env, spec_image = run(pod())
    [sidecar] = made["spec"]["initContainers"]
    assert sidecar["name"] == "service-web" and sidecar["image"] == locked["services"]["compose-service"]["web"]["id"]
    assert sidecar["startupProbe"]["exec"]["command"][:2] == ["sh", "-c"]
    assert made["spec"]["hostAliases"] == [{"ip": "127.0.0.1", "hostnames": ["main", "web"]}]
    assert [c["name"] for c in made["spec"]["containers"]] == ["sandbox"]
    assert env == "http://web:8080\n"  # services.main.environment reaches the task's container
    assert spec_image.endswith(" web=" + locked["services"]["compose-service"]["web"]["id"])
    assert kube.pod(name) is None or kube.pod(name)["metadata"].get("deletionTimestamp")

    # A service image the cluster cannot pull is a task error naming that image and its sidecar, at once (not
    # "pod not ready" after the build timeout): the kubelet reports it on the init container's status.
    service = locked["services"]["compose-service"]["web"]["id"]
    kube.fail_image(service, "manifest unknown")
    with pytest.raises(BuildError, match=rf"image {service} cannot be had: ErrImagePull: manifest unknown "
                                         r"\(sidecar service-web\)"):
        run(pod())
