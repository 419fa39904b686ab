"""Harbor's separate verifier mode through the kubernetes backend: the verifier gets a pod of its own from its
locked image, and only the task's artifacts cross over from the agent's pod, as regular files and directories
under the artifact's path, whatever tar the agent's pod hands over."""

from __future__ import annotations

import asyncio
import io
import json
import os
import shutil
import subprocess
import sys
import tarfile
from pathlib import Path

import pytest

from sandbox import SandboxOptions, load_suite, open_sandbox, verify, write_file
from sandbox.kubernetes.pod_files import _only_files_under
from sandbox.kubernetes.pods import close_clusters

FIXTURE = Path(__file__).parents[1] / "fixtures" / "harbor" / "separate-verifier"
LEAFCOST = Path(sys.executable).with_name("leafcost")
LABELS = {"leafcost.run": "kube-separate", "leafcost.arm": "oracle", "leafcost.task": "separate-verifier",
          "leafcost.seed": "0", "leafcost.attempt": "1"}


def _tar(*members: tuple[str, str, bytes | str]) -> io.BytesIO:
    """A tar of (name, kind, content): kind "file" (content its bytes), "dir", "symlink" or "link" (content the
    target)."""
    data = io.BytesIO()
    with tarfile.open(fileobj=data, mode="w") as archive:
        for name, kind, content in members:
            info = tarfile.TarInfo(name)
            if kind == "file":
                info.size = len(content)
                archive.addfile(info, io.BytesIO(content))  # type: ignore[arg-type]
                continue
            info.type = {"dir": tarfile.DIRTYPE, "symlink": tarfile.SYMTYPE, "link": tarfile.LNKTYPE}[kind]
            info.linkname = content if isinstance(content, str) else ""
            archive.addfile(info)
    data.seek(0)
    return data


def test_only_regular_files_and_directories_under_the_artifact_cross_over():
    raw = _tar(("artifacts", "dir", b""), ("artifacts/log.txt", "file", b"kept"),
               ("artifacts/sub", "dir", b""), ("artifacts/sub/deep.txt", "file", b"deep"),
               ("artifacts/to-verifier", "symlink", "/logs/verifier"),
               ("artifacts/to-verifier/reward.txt", "file", b"1"),
               ("artifacts/hard", "link", "artifacts/log.txt"),
               ("artifacts/../verifier/reward.txt", "file", b"1"), ("/logs/verifier/reward.json", "file", b"{}"),
               ("artifacts-evil/x", "file", b"prefix, not the path"), ("tests/test.sh", "file", b"exit 0"))
    clean = io.BytesIO()
    left_out = _only_files_under(raw, clean, "artifacts")
    assert left_out is not None
    clean.seek(0)
    with tarfile.open(fileobj=clean) as archive:
        kept = {m.name: (m.type, archive.extractfile(m).read() if m.isreg() else None) for m in archive}
    # The file "behind" the planted link stays a file under the artifact: without the link, tar makes a directory.
    assert kept == {"artifacts": (tarfile.DIRTYPE, None), "artifacts/log.txt": (tarfile.REGTYPE, b"kept"),
                    "artifacts/sub": (tarfile.DIRTYPE, None), "artifacts/sub/deep.txt": (tarfile.REGTYPE, b"deep"),
                    "artifacts/to-verifier/reward.txt": (tarfile.REGTYPE, b"1")}
    assert sorted(left_out) == ["/logs/verifier/reward.json", "artifacts-evil/x", "artifacts/../verifier/reward.txt",
                                "artifacts/hard", "artifacts/to-verifier", "tests/test.sh"]


def test_every_member_kind_is_rewritten_plain_and_sparse_files_and_special_bits_are_dropped(tmp_path):
    """Every kind a tar can hold, as GNU tar and Python's tarfile write them: only plain regular files and
    directories cross, without setuid, setgid or sticky bits; GNU and PAX sparse files (whose map can claim any
    size on the verifier's disk), FIFOs, devices and links never do."""
    if shutil.which("tar") is None:
        pytest.skip("GNU tar is needed to write sparse members")
    kinds = io.BytesIO()
    with tarfile.open(fileobj=kinds, mode="w", format=tarfile.GNU_FORMAT) as archive:
        for name, kind, mode in [("artifacts", tarfile.DIRTYPE, 0o755), ("artifacts/suid", tarfile.REGTYPE, 0o4755),
                                 ("artifacts/sgid-dir", tarfile.DIRTYPE, 0o2775),
                                 ("artifacts/sticky", tarfile.DIRTYPE, 0o1777),
                                 ("artifacts/contiguous", tarfile.CONTTYPE, 0o6644),
                                 ("artifacts/fifo", tarfile.FIFOTYPE, 0o644), ("artifacts/chr", tarfile.CHRTYPE, 0o666),
                                 ("artifacts/blk", tarfile.BLKTYPE, 0o660)]:
            info = tarfile.TarInfo(name)
            info.type, info.mode, info.uname = kind, mode, "root"
            content = b"#!/bin/sh\nid\n" if kind in (tarfile.REGTYPE, tarfile.CONTTYPE) else b""
            info.size = len(content)
            if kind in (tarfile.CHRTYPE, tarfile.BLKTYPE):
                info.devmajor, info.devminor = 8, 0
            info.pax_headers = {}
            archive.addfile(info, io.BytesIO(content) if content else None)
    whole = tmp_path / "whole.tar"
    whole.write_bytes(kinds.getvalue())
    for form in ("gnu", "pax"):
        tree = tmp_path / form / "artifacts"
        tree.mkdir(parents=True)
        with open(tree / f"sparse-{form}.bin", "wb") as handle:
            handle.truncate(1 << 20)  # holes: the map, not the bytes, is in the tar
            handle.write(b"x")
        sparse = tmp_path / f"{form}.tar"
        subprocess.run(["tar", "--sparse", f"--format={form}", "-C", str(tmp_path / form), "-cf", str(sparse),
                        "artifacts/" + f"sparse-{form}.bin"], check=True)
        subprocess.run(["tar", "-Af", str(whole), str(sparse)], check=True)
    with tarfile.open(whole) as archive:
        assert {m.name for m in archive if m.issparse()} == {"artifacts/sparse-gnu.bin", "artifacts/sparse-pax.bin"}
    clean = io.BytesIO()
    left_out = _only_files_under(io.BytesIO(whole.read_bytes()), clean, "artifacts")
    clean.seek(0)
    with tarfile.open(fileobj=clean) as archive:
        kept = {m.name: (m.type, m.mode, m.pax_headers, archive.extractfile(m).read() if m.isreg() else None)
                for m in archive}
    assert kept == {"artifacts": (tarfile.DIRTYPE, 0o755, {}, None),
                    "artifacts/suid": (tarfile.REGTYPE, 0o755, {}, b"#!/bin/sh\nid\n"),
                    "artifacts/sgid-dir": (tarfile.DIRTYPE, 0o775, {}, None),
                    "artifacts/sticky": (tarfile.DIRTYPE, 0o777, {}, None),
                    "artifacts/contiguous": (tarfile.REGTYPE, 0o644, {}, b"#!/bin/sh\nid\n")}
    assert sorted(left_out or []) == ["artifacts/blk", "artifacts/chr", "artifacts/fifo", "artifacts/sparse-gnu.bin",
                                      "artifacts/sparse-pax.bin"]


@pytest.fixture(scope="module")
def separate_suite(container_images, tmp_path_factory) -> tuple[Path, Path]:
    """The separate-verifier fixture as a one-task suite, its agent and verifier images locked by ID."""
    root = tmp_path_factory.mktemp("separate")
    shutil.copytree(FIXTURE, root / "suite" / "separate-verifier")
    lock = root / "images.lock.json"
    done = subprocess.run([str(LEAFCOST), "images", "lock", str(root / "suite"), "-o", str(lock)],
                          capture_output=True, text=True, timeout=1800)
    assert done.returncode == 0, done.stderr
    return root / "suite", lock


def test_the_separate_verifier_fixture_validates_through_two_pods_each(kube_containers, separate_suite, tmp_path):
    kube, (suite, lock) = kube_containers, separate_suite
    done = subprocess.run([str(LEAFCOST), "validate", str(suite), "--backend", "kubernetes", "--images", str(lock),
                           "--kube-namespace", kube.namespace, "--json"], capture_output=True, text=True,
                          timeout=1800, cwd=tmp_path, env={**os.environ, "KUBECONFIG": str(kube.kubeconfig)})
    report = json.loads(done.stdout)
    assert done.returncode == 0, done.stderr[-2000:]
    assert report["tasks"][0]["oracle_resolved"] is True and report["tasks"][0]["empty_resolved"] is False
    verifier_images = {json.loads(lock.read_text())["verifiers"]["separate-verifier"]["id"]}
    created = kube.seen.created
    assert len(created) == 4 and sum(name.endswith("-verifier") for name in created) == 2
    assert [p for p in kube.pods() if not p["metadata"].get("deletionTimestamp")] == []
    assert verifier_images != {json.loads(lock.read_text())["tasks"]["separate-verifier"]["id"]}


def test_a_forged_tar_in_the_agents_pod_plants_nothing_in_the_verifiers(kube_containers, separate_suite):
    """The agent (root in its pod) writes the right answer, then replaces `tar` with a program that hands over an
    archive of its own: a link into /logs/verifier with a reward behind it, a path climbing out of /tmp, and a
    file named like the artifact but longer. The verifier's pod gets the answer and nothing else."""
    kube, (suite, lock) = kube_containers, separate_suite
    the_task = load_suite(str(suite)).tasks[0]
    options = SandboxOptions(backend="kubernetes", kubeconfig=kube.kubeconfig, kube_namespace=kube.namespace,
                             images_lock=lock)
    forged = _tar(("answer.txt", "file", b"separate verifier ok\n"), ("answer.txt.d", "symlink", "/logs/verifier"),
                  ("answer.txt.d/reward.txt", "file", b"1\n"), ("../etc/planted", "file", b"planted\n"),
                  ("answer.txt-more", "file", b"longer name\n")).getvalue()
    fake_tar = '#!/bin/sh\nwhile [ "$1" != -cf ]; do shift; done\ncp /tmp/forged.tar "$2"\n'
    seen = {}

    async def attempt():
        opened = await open_sandbox(the_task, options, labels=LABELS)
        try:
            sandbox = opened.sandbox
            await sandbox.exec("printf 'separate verifier ok\\n' > /tmp/answer.txt", timeout=30)
            await write_file(sandbox, "/tmp/forged.tar", forged)
            await write_file(sandbox, "/usr/local/bin/tar", fake_tar.encode())
            await sandbox.exec("chmod +x /usr/local/bin/tar", timeout=30)
            seen["which"] = (await sandbox.exec("command -v tar", timeout=30, user="root")).stdout.strip()
            seen["verdict"] = await verify(opened, the_task)
            container = kube.container_of(f"{opened.pod}-verifier")
            seen["verifier"] = subprocess.run(
                ["podman", "exec", container, "sh", "-c", "cat /tmp/answer.txt; echo =; ls -A /tmp; echo =; "
                 "ls -A /logs/verifier; echo =; test -e /etc/planted && echo PLANTED"], capture_output=True, text=True, timeout=60).stdout
        finally:
            await opened.close()
            await close_clusters()

    asyncio.run(attempt())
    assert seen["which"] == "/usr/local/bin/tar"  # the agent's program is the one the copy ran
    answer, in_tmp, in_logs, planted = seen["verifier"].split("=\n")
    assert answer == "separate verifier ok\n"
    assert in_tmp.split() == ["answer.txt"] and planted == ""
    assert in_logs.split() == ["reward.txt"]  # test.sh's own, and nothing else
    assert seen["verdict"].grade.resolved  # the right answer still counts: the copy did not fail the attempt
