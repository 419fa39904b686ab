"""The pieces of the kubernetes backend that run inside a pod, run here in a real shell: a harness command's
script (directory, environment, user, stdin cut off), the cgroup CPU reading, and what a failed pod says."""

from __future__ import annotations

import os
import subprocess

import pytest

from sandbox.kubernetes.pods import describe_failure, harness_script, locked_image, parse_cpu
from sandbox.protocol import BuildError, SandboxOptions


def sh(script: str, trailer: bytes = b"") -> subprocess.CompletedProcess:
    """As the backend runs it: `sh -s` reading the script, and whatever else our stream carries, from stdin."""
    return subprocess.run(["sh", "-s"], input=script.encode() + b"\nexit\n" + trailer, capture_output=True,
                          timeout=30)


def test_the_command_runs_in_its_directory_with_its_environment(tmp_path):
    value = "it's $HOME; `echo no` \"quoted\"\nsecond line"
    done = sh(harness_script('pwd; printf %s "$TOKENISH"; exit 7', str(tmp_path), {"TOKENISH": value}, None))
    assert done.returncode == 7
    assert done.stdout.decode() == f"{tmp_path}\n{value}"


def test_the_command_never_reads_the_rest_of_the_stream(tmp_path):
    done = sh(harness_script("cat; echo end", str(tmp_path), {}, None), trailer=b"NOT FOR THE COMMAND\n")
    assert done.stdout == b"end\n"


def test_a_missing_directory_is_an_error_not_a_command_run_elsewhere(tmp_path):
    done = sh(harness_script(f"touch {tmp_path}/ran", str(tmp_path / "missing"), {}, None))
    assert done.returncode == 1 and not (tmp_path / "ran").exists()


def test_a_bad_variable_name_is_refused_before_anything_runs():
    with pytest.raises(BuildError, match="not a valid name"):
        harness_script("true", "/", {"A B": "x"}, None)


@pytest.mark.skipif(os.geteuid() != 0, reason="switching users needs root, as in a pod")
def test_a_named_user_runs_the_command_without_roots_groups(tmp_path):
    done = sh(harness_script("id -u; id -G; echo $HOME", str(tmp_path), {}, "nobody"))
    uid, groups, home = done.stdout.decode().split("\n")[:3]
    assert done.returncode == 0, done.stderr
    assert uid == "65534" and "0" not in groups.split() and home != "/root"
    assert sh(harness_script("id -u", "/", {}, "0")).stdout == b"0\n"  # root by number stays root


def test_cpu_from_either_cgroup_version():
    assert parse_cpu("usage_usec 2500000\nuser_usec 2000000\nsystem_usec 500000\n") == 2.5
    assert parse_cpu("1500000000\n") == 1.5
    assert parse_cpu("") is None and parse_cpu("garbage") is None


def test_a_failed_pod_says_why():
    evicted = {"status": {"phase": "Failed", "reason": "Evicted",
                          "message": "The node was low on resource: memory."}}
    oom = {"status": {"phase": "Failed", "containerStatuses": [
        {"name": "sandbox", "state": {"terminated": {"reason": "OOMKilled", "exitCode": 137}}}]}}
    assert describe_failure(evicted) == "Evicted; The node was low on resource: memory."
    assert describe_failure(oom) == "container sandbox OOMKilled (exit 137)"


def test_images_come_from_the_lock_only(tmp_path):
    lock = tmp_path / "images.lock.json"
    lock.write_text('{"format": 1, "engine": "podman", "tasks": {'
                    '"pulled": {"image": "python:3.12", "id": "sha256:' + "1" * 64 + '", '
                    '"repo_digest": "docker.io/library/python@sha256:' + "2" * 64 + '"}, '
                    '"built": {"image": "leafcost-env:x", "id": "sha256:' + "3" * 64 + '"}}, '
                    '"verifiers": {"built": {"image": "leafcost-verifier:x", "id": "sha256:' + "4" * 64 + '"}}}')

    class Named:
        def __init__(self, task_id):
            self.task_id = task_id

    options = SandboxOptions(backend="kubernetes", images_lock=lock)
    assert locked_image(Named("pulled"), options) == ("docker.io/library/python@sha256:" + "2" * 64,
                                                      "IfNotPresent")
    assert locked_image(Named("built"), options) == ("sha256:" + "3" * 64, "Never")
    with pytest.raises(BuildError, match="not in the image lock"):
        locked_image(Named("other"), options)
    with pytest.raises(BuildError, match="by digest only"):
        locked_image(Named("pulled"), SandboxOptions(backend="kubernetes"))
    assert locked_image(Named("built"), options, kind="verifiers") == ("sha256:" + "4" * 64, "Never")
    with pytest.raises(BuildError, match="task pulled's verifier: not in the image lock"):
        locked_image(Named("pulled"), options, kind="verifiers")
