"""SWE-bench instances end to end through the podman backend, in instance images built here from fixture repositories
(tests/swebench_images.py; no registry is reachable): every parser family validates, each verdict is swebench's
own report on the very log the container printed, and nothing but the patch reaches the verifier."""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
from pathlib import Path

import pytest

from sandbox import load_suite, open_sandbox, run_oracle, verify, write_file
from sandbox.swebench_grading import PATCH_PATH, TEST_OUTPUT, grade_log

ROWS = Path(__file__).parents[1] / "fixtures" / "swebench" / "instances.jsonl"
LEAFCOST = Path(sys.executable).with_name("leafcost")
SRCLAYOUT = "leafcost-fixtures__srclayout-1"


def run(coro):
    return asyncio.run(coro)


@pytest.fixture(scope="module")
def instance_images(container_images):
    from swebench_images import ensure_swebench_instance_images

    return ensure_swebench_instance_images(ROWS)


@pytest.fixture(scope="module")
def podman(sandbox_options):
    return sandbox_options.model_copy(update={"backend": "podman"})


@pytest.fixture(scope="module")
def suite(podman):
    loaded = load_suite(str(ROWS), cache_dir=podman.cache_dir)
    assert not loaded.errors, loaded.errors
    return {task.task_id: task for task in loaded.tasks}


def rows() -> dict[str, dict]:
    return {row["instance_id"]: row for row in map(json.loads, ROWS.read_text().splitlines())}


async def graded(task, options, *, agent=None, oracle: bool = False):
    """One attempt: `agent(sandbox)` (or the oracle) acts, then leafcost grades; also the verifier's own log."""
    opened = await open_sandbox(task, options, solution=oracle)
    try:
        if oracle:
            assert (await run_oracle(opened.sandbox, task)).ok
        if agent is not None:
            await agent(opened.sandbox)
        verification = await verify(opened, task)
        log = await opened.read_verifier_file(TEST_OUTPUT, 1 << 26)
        return verification, log
    finally:
        await opened.close()


def test_rows_of_every_parser_family_validate_through_podman(instance_images, tmp_path):
    """`leafcost validate` on the JSONL as a user runs it: the gold patch resolves, no patch does not."""
    assert set(instance_images) == set(rows())
    result = subprocess.run([str(LEAFCOST), "validate", str(ROWS), "--backend", "podman", "--json", "--workers", "2"],
                            capture_output=True, text=True, timeout=1800, cwd=tmp_path,
                            env={"PATH": "/usr/sbin:/usr/bin:/bin", "HOME": str(tmp_path),
                                 "LEAFCOST_CACHE": str(tmp_path / "cache")})
    report = json.loads(result.stdout)
    assert result.returncode == 0, [t["error"] for t in report["tasks"] if not t["valid"]]
    assert report["valid"] == 4 and report["invalid"] == 0
    assert {t["task_id"] for t in report["tasks"]} == set(rows())
    assert all(t["oracle_resolved"] is True and t["empty_resolved"] is False for t in report["tasks"])


@pytest.mark.parametrize("instance_id", sorted(rows()))
def test_the_verdict_is_swebench_report_on_the_log_the_container_printed(instance_id, instance_images, suite,
                                                                        podman):
    from sandbox.swebench_grading import swebench

    task, row = suite[instance_id], rows()[instance_id]
    verification, log = run(graded(task, podman, oracle=True))
    report = verification.reward_document
    assert verification.grade.resolved and verification.grade.reward == 1.0, verification.grade
    assert report["resolved"] and report["patch_successfully_applied"]
    status = report["tests_status"]
    assert status["FAIL_TO_PASS"] == {"success": json.loads(row["FAIL_TO_PASS"]), "failure": []}
    assert status["PASS_TO_PASS"] == {"success": json.loads(row["PASS_TO_PASS"]), "failure": []}
    # The same log through swebench's functions called directly, with a TestSpec made from the row itself.
    modules = swebench()
    spec = modules.types.TestSpec(instance_id=instance_id, image=row["image"], eval_script_list=[], repo=row["repo"],
                                  version=row["version"], FAIL_TO_PASS=json.loads(row["FAIL_TO_PASS"]),
                                  PASS_TO_PASS=json.loads(row["PASS_TO_PASS"]), log_parser=row["log_parser"],
                                  eval_type=row["eval_type"])
    path = Path(f"/tmp/leafcost-test-{instance_id}.log")
    path.write_bytes(log)
    try:
        direct = modules.grading.get_eval_report(spec, {"instance_id": instance_id, "model_name_or_path": "x",
                                                        "model_patch": verification.patch}, str(path), True)
    finally:
        path.unlink()
    assert direct[instance_id] == report
    assert verification.patch.startswith("diff --git")  # the oracle's own change, captured Leaf's way


def test_a_wrong_test_list_is_named_by_validate(instance_images, podman, tmp_path):
    """An instance whose PASS_TO_PASS names a test that does not exist: the oracle cannot resolve it, and the
    message says which test, in SWE-bench's words."""
    from compare.validate import validate_task

    row = dict(rows()[SRCLAYOUT], PASS_TO_PASS=json.dumps(["tests/test_punctuation.py::test_keeps_digits",
                                                           "tests/test_punctuation.py::test_no_such_test"]))
    (tmp_path / "one.jsonl").write_text(json.dumps(row) + "\n")
    task = load_suite(str(tmp_path / "one.jsonl"), cache_dir=podman.cache_dir).tasks[0]
    result = run(validate_task(task, podman))
    assert not result.valid and result.oracle_resolved is False and result.empty_resolved is False
    assert ("PASS_TO_PASS failed or missing from the log: tests/test_punctuation.py::test_no_such_test"
            in result.error)
    assert "test_keeps_digits" not in result.error.split("the verifier's last lines")[0]


def test_only_the_patch_reaches_the_verifier(instance_images, suite, podman):
    """An agent (root in its container, as in SWE-bench's images) that makes the tests pass there without changing
    the repository: it plants a module and a .pth file in the env's site-packages that replace the buggy function at
    every interpreter start, and proves it works by running the instance's new tests in its own container. The
    verifier is a fresh container from the image: none of it counts, and the empty patch resolves nothing."""
    task, row = suite[SRCLAYOUT], rows()[SRCLAYOUT]
    fix = ("import re, unicodedata, slugkit, slugkit.text\n"
           "def fixed(text, separator='-'):\n"
           "    plain = unicodedata.normalize('NFKD', text).encode('ascii', 'ignore').decode('ascii')\n"
           "    return separator.join(w for w in re.split(r'[^a-z0-9]+', plain.lower()) if w)\n"
           "slugkit.slugify = slugkit.text.slugify = fixed\n")
    env = ". /opt/miniconda3/bin/activate && conda activate testbed && "
    seen = {}

    async def agent(sandbox):
        site = (await sandbox.exec(env + "python -c 'import site; print(site.getsitepackages()[0])'",
                                   timeout=60)).stdout.strip()
        await sandbox.run_tool("Write", {"file_path": f"{site}/leafcost_plant.py", "content": fix})
        # .pth files run their `import` lines at start-up, in name order: after the editable install's.
        await sandbox.run_tool("Write", {"file_path": f"{site}/zz-plant.pth", "content": "import leafcost_plant\n"})
        await write_file(sandbox, "/tmp/tests.diff", row["test_patch"].encode())
        here = await sandbox.exec(env + "git apply /tmp/tests.diff && python -m pytest -q tests/test_punctuation.py",
                                  timeout=120)
        seen["agent's tests"] = (here.exit_code, here.stdout[-2000:])
        await sandbox.exec("git checkout -q -- . && git clean -fdq", timeout=60)
        seen["status"] = (await sandbox.exec("git status --porcelain", timeout=60)).stdout

    verification, log = run(graded(task, podman, agent=agent))
    assert seen["agent's tests"][0] == 0, seen  # the plant works where the agent is
    assert seen["status"] == ""  # and the repository itself is clean
    assert verification.patch == ""
    assert not verification.grade.resolved and verification.grade.reward == 0.0
    report = verification.reward_document
    assert report["tests_status"]["FAIL_TO_PASS"]["failure"] == json.loads(row["FAIL_TO_PASS"])
    assert "FAIL_TO_PASS failed or missing from the log" in verification.grade.detail


def test_a_patch_that_prints_its_own_passes_is_not_resolved(instance_images, suite, podman):
    """The model's patch adds a conftest.py that prints `PASSED <id>` for every FAIL_TO_PASS test once pytest has
    printed everything (its last hook), while the tests really fail: the forged lines win the parse, so the log
    claims no failure, and swebench's exit-code cross-check refuses it."""
    task = suite[SRCLAYOUT]
    f2p = json.loads(rows()[SRCLAYOUT]["FAIL_TO_PASS"])
    conftest = ("def pytest_unconfigure(config):\n"
                f"    for test in {f2p!r}:\n"
                "        print('PASSED ' + test, flush=True)\n")

    async def agent(sandbox):
        await sandbox.run_tool("Write", {"file_path": "conftest.py", "content": conftest})

    verification, log = run(graded(task, podman, agent=agent))
    assert "conftest.py" in verification.patch
    assert all(f"PASSED {test}".encode() in log for test in f2p)  # the forgery is in the log, after the real lines
    assert b">>>>> Test Exit Code: 1" in log
    from sandbox.swebench_grading import swebench

    parsed = swebench().log_parsers.PARSER_REGISTRY["parse_log_pytest"](log.decode(), None)
    assert all(parsed[test] == "PASSED" for test in f2p)  # the parse alone is fooled: the forged lines came last
    assert not verification.grade.resolved
    assert verification.reward_document["patch_successfully_applied"] is False
    assert verification.grade.detail.startswith("the patch did not apply, or the log holds no test results")


async def verifier_on(task, options, patch: str) -> tuple[bytes, dict]:
    """The verifier's steps alone, on a patch of our choosing (capture only ever yields patches that apply)."""
    opened = await open_sandbox(task, options)
    try:
        await opened.start_verifier()
        await write_file(opened.sandbox, PATCH_PATH, patch.encode(), user="root")
        await opened.sandbox.exec("bash /tests/test.sh", timeout=600, user="root")
        await opened.stop()
        log = await opened.read_verifier_file(TEST_OUTPUT, 1 << 26)
    finally:
        await opened.close()
    return log, grade_log(task.swebench, log, patch)


def test_the_verifier_applies_patches_with_swebench_chain(instance_images, suite, podman):
    task, gold = suite[SRCLAYOUT], rows()[SRCLAYOUT]["patch"]
    # A context line that no longer matches and no blob ids: git apply refuses it, patch --fuzz takes it.
    fuzzy = "\n".join(line for line in gold.splitlines() if not line.startswith("index ")).replace(
        ' """`text` as a slug: accents dropped,', ' """`text` as a slug, accents dropped,') + "\n"
    log, report = run(verifier_on(task, podman, fuzzy))
    assert report["resolved"], log[-3000:]
    nonsense = ("diff --git a/src/slugkit/text.py b/src/slugkit/text.py\n--- a/src/slugkit/text.py\n"
                "+++ b/src/slugkit/text.py\n@@ -1,2 +1,2 @@\n-no such line\n-nor this one\n+x\n+y\n")
    log, report = run(verifier_on(task, podman, nonsense))
    assert log.startswith(b">>>>> Patch Apply Failed\n")
    assert not report["resolved"] and not report["patch_successfully_applied"]


@pytest.mark.parametrize("verifier_network, recorded", [(None, "outside"), ("none", "none")])
def test_leafcost_run_records_swebench_report_with_each_attempt(instance_images, podman, tmp_path, verifier_network,
                                                                recorded):
    """Each attempt's trajectory holds SWE-bench's report and the network its verifier had: SWE-bench's (the
    outside, never this host) unless the spec's sandbox says `verifier_network: none`."""
    sandbox = {"backend": "podman", **({"verifier_network": verifier_network} if verifier_network else {})}
    spec = {"name": "swebench-oracle", "suite": str(ROWS), "seeds": 1, "workers": 2, "sandbox": sandbox,
            "arms": [{"name": "oracle", "adapter": "oracle"}],
            **({"tasks": [SRCLAYOUT]} if verifier_network else {})}
    (tmp_path / "spec.yaml").write_text(json.dumps(spec))
    result = subprocess.run([str(LEAFCOST), "run", str(tmp_path / "spec.yaml"), "--json", "--db",
                             str(tmp_path / "ledger.duckdb")], capture_output=True, text=True, timeout=1800,
                            cwd=tmp_path, env={"PATH": "/usr/sbin:/usr/bin:/bin", "HOME": str(tmp_path),
                                               "LEAFCOST_CACHE": str(podman.cache_dir)})
    assert result.returncode == 0, result.stderr[-3000:]
    arms = {arm["arm"]: arm for arm in json.loads(result.stdout)["arms"]}
    count = 1 if verifier_network else 4
    assert arms["oracle"]["resolved"] == count
    trajectories = sorted((tmp_path / "trajectories").rglob("*.json"))
    assert len(trajectories) == count
    for path in trajectories:
        trajectory = json.loads(path.read_text())
        rewards = trajectory["rewards"]
        assert rewards["resolved"] is True and rewards["tests_status"]["FAIL_TO_PASS"]["failure"] == []
        assert trajectory["output_patch"].startswith("diff --git")
        assert trajectory["grade"]["verifier_network"] == recorded


def test_the_image_lock_pins_every_instance_image_and_its_verifier(instance_images, tmp_path):
    env = {"PATH": "/usr/sbin:/usr/bin:/bin", "HOME": str(tmp_path), "LEAFCOST_CACHE": str(tmp_path / "cache")}
    lock = tmp_path / "swebench.lock.json"
    done = subprocess.run([str(LEAFCOST), "images", "lock", str(ROWS), "--backend", "podman", "-o", str(lock),
                           "--json"], capture_output=True, text=True, timeout=600, cwd=tmp_path, env=env)
    assert done.returncode == 0, done.stderr[-2000:]
    written = json.loads(lock.read_text())
    for name in ("tasks", "verifiers"):  # the verifier is a fresh container from the very same image
        assert {task: entry["id"].removeprefix("sha256:") for task, entry in written[name].items()} == instance_images
    assert {entry["image"] for entry in written["tasks"].values()} == {row["image"] for row in rows().values()}


def test_a_patch_over_the_capture_cap_gives_no_verdict_and_starts_no_verifier(instance_images, suite, podman):
    """SWE-bench grades the patch alone: with none kept (over the cap), there is nothing to grade, so no verdict,
    and no verifier container is started for nothing."""
    async def scenario():
        opened = await open_sandbox(suite[SRCLAYOUT], podman)
        try:
            await opened.sandbox.exec("head -c 7000000 /dev/urandom | base64 > big.txt", timeout=120)
            verification = await verify(opened, suite[SRCLAYOUT])
            return verification, list(opened.containers)
        finally:
            await opened.close()

    verification, containers = run(scenario())
    assert verification.patch == "" and "not kept" in verification.patch_error
    assert verification.grade.error == "patch_unavailable" and verification.grade.resolved is False
    assert verification.grade.detail.startswith("no patch to grade: the patch exceeds")
    assert len(containers) == 1  # the agent's only


def test_every_instance_validates_through_pods_each_graded_in_a_verifier_pod_of_its_own(instance_images, tmp_path):
    """The same rows through the kubernetes backend (the stand-in API server, whose pods are real containers of
    the locked instance images): each attempt is an agent's pod and a separate verifier pod from the same image,
    swebench's verdicts are those Podman gives, and no pod is left."""
    from support.kube_fake import KubeFake

    env = {"PATH": "/usr/sbin:/usr/bin:/bin", "HOME": str(tmp_path), "LEAFCOST_CACHE": str(tmp_path / "cache")}
    lock = tmp_path / "images.lock.json"
    locked = subprocess.run([str(LEAFCOST), "images", "lock", str(ROWS), "-o", str(lock)], capture_output=True,
                            text=True, timeout=600, cwd=tmp_path, env=env)
    assert locked.returncode == 0, locked.stderr
    assert set(json.loads(lock.read_text())["verifiers"]) == set(rows())
    with KubeFake(mode="container") as kube:
        result = subprocess.run([str(LEAFCOST), "validate", str(ROWS), "--backend", "kubernetes", "--images",
                                 str(lock), "--kube-namespace", kube.namespace, "--workers", "2", "--json"],
                                capture_output=True, text=True, timeout=1800, cwd=tmp_path,
                                env={**env, "KUBECONFIG": str(kube.kubeconfig)})
        report = json.loads(result.stdout)
        created, left = kube.seen.created, [p for p in kube.pods() if not p["metadata"].get("deletionTimestamp")]
    assert result.returncode == 0, [t["error"] for t in report["tasks"] if not t["valid"]]
    assert (report["valid"], report["invalid"]) == (4, 0)
    assert all(t["oracle_resolved"] is True and t["empty_resolved"] is False for t in report["tasks"])
    verifiers = [name for name in created if name.endswith("-verifier")]
    assert len(created) == 16 and len(verifiers) == 8  # instances × (gold, empty) × (agent, verifier)
    assert left == []


# Run inside a sandbox: its interfaces and routes, its capabilities, and a TCP connect to each address given.
NETWORK_PROBE = r"""
import json, socket, sys
interfaces = [line.split(":")[0].strip() for line in open("/proc/net/dev").read().splitlines()[2:]]
routes = [line.split() for line in open("/proc/net/route").read().splitlines()[1:]]
caps = int(next(l.split()[1] for l in open("/proc/self/status") if l.startswith("CapEff")), 16)
reached = {}
for target in sys.argv[1:]:
    host, port = target.rsplit(":", 1)
    s = socket.socket()
    s.settimeout(5)
    try:
        s.connect((host, int(port)))
        reached[target] = "connected"
    except OSError as exc:
        reached[target] = type(exc).__name__
    s.close()
print(json.dumps({"interfaces": interfaces, "default_route": any(r[1] == "00000000" for r in routes),
                  "net_admin": bool(caps >> 12 & 1), "reached": reached}))
"""


class HostServers:
    """TCP listeners on this host's 127.0.0.1 and on its non-loopback IPv4 address, each accepting and closing."""

    def __enter__(self):
        import re
        import socket
        import threading

        listed = subprocess.run(["ip", "-o", "-4", "addr", "show", "scope", "global"], capture_output=True, text=True)
        lan = re.search(r"inet (\d+\.\d+\.\d+\.\d+)/", listed.stdout)
        assert lan, f"this host has no non-loopback IPv4 address: {listed.stdout!r}"
        self.sockets = []
        for address in ("127.0.0.1", lan.group(1)):
            server = socket.create_server((address, 0))
            self.sockets.append(server)
            threading.Thread(target=self._serve, args=(server,), daemon=True).start()
        self.loopback, self.lan = (f"{s.getsockname()[0]}:{s.getsockname()[1]}" for s in self.sockets)
        for target in (self.loopback, self.lan):  # both answer from this host: a refusal inside is the sandbox's
            host, port = target.rsplit(":", 1)
            socket.create_connection((host, int(port)), timeout=5).close()
        return self

    @staticmethod
    def _serve(server):
        while True:
            try:
                connection, _ = server.accept()
            except OSError:
                return
            connection.close()

    def __exit__(self, *exc):
        for server in self.sockets:
            server.close()


async def probed(task, options, targets: list[str]) -> tuple[dict, dict, object]:
    """The probe in the agent's container, then in the verifier's; then an attempt graded (no patch)."""
    import shlex

    command = f"python3 -c {shlex.quote(NETWORK_PROBE)} {' '.join(targets)}"
    opened = await open_sandbox(task, options)
    try:
        agent = await opened.sandbox.exec(command, timeout=60)
        await opened.quiesce()
        await opened.start_verifier()
        verifier = await opened.sandbox.exec(command, timeout=60)
        assert agent.ok and verifier.ok, (agent.stderr, verifier.stderr)
    finally:
        await opened.close()
    verification, _ = await graded(task, options)
    return json.loads(agent.stdout), json.loads(verifier.stdout), verification


def test_the_swebench_verifier_has_network_but_never_this_host(instance_images, suite, podman):
    """SWE-bench's harness grades with network (flask's eval script runs `pip install -e .`): the verifier's
    container has an interface and a default route out, yet neither this host's loopback (directly or through
    slirp4netns's gateway) nor its LAN address answers it, and it cannot change its routes. The agent's container
    keeps the task's none, and the attempt records what the verifier had."""
    from container_images import podman_argv

    task = suite[SRCLAYOUT]
    with HostServers() as servers:
        port = servers.loopback.rsplit(":", 1)[1]
        targets = [servers.loopback, f"10.0.2.2:{port}", servers.lan, f"{servers.lan.rsplit(':', 1)[0]}:{port}"]
        agent, verifier, verification = run(probed(task, podman, targets))
        # The control: plain slirp4netns without leafcost's routes reaches the host's LAN address.
        image = instance_images[SRCLAYOUT]
        control = subprocess.run(
            [*podman_argv(), "run", "--rm", "--ulimit", "nofile=1024:1024", "--ulimit", "nproc=4096:4096",
             "--network", "slirp4netns:allow_host_loopback=false", image, "python3", "-c", NETWORK_PROBE,
             servers.lan], capture_output=True, text=True, timeout=120)
    assert agent["interfaces"] == ["lo"] and not agent["default_route"]
    assert set(agent["reached"].values()) <= {"OSError", "ConnectionRefusedError"} and "connected" not in str(agent)
    assert [i for i in verifier["interfaces"] if i != "lo"] and verifier["default_route"]
    assert not verifier["net_admin"]
    assert "connected" not in verifier["reached"].values(), verifier["reached"]
    assert json.loads(control.stdout)["reached"] == {servers.lan: "connected"}, control.stderr
    assert verification.grade.verifier_network == "outside" and verification.grade.resolved is False


def test_the_swebench_verifier_grades_offline_when_the_options_say_none(instance_images, suite, podman):
    task = suite[SRCLAYOUT]
    offline = podman.model_copy(update={"verifier_network": "none"})
    agent, verifier, verification = run(probed(task, offline, []))
    assert agent["interfaces"] == verifier["interfaces"] == ["lo"] and not verifier["default_route"]
    assert verification.grade.verifier_network == "none" and verification.grade.error is None
