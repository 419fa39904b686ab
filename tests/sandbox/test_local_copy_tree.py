"""The local backend's copy of a built environment into an episode's workspace: done in-process for small trees, it
must make the copy `cp -a` makes (modes, owners, times, extended attributes, hard links; links never followed)."""

from __future__ import annotations

import asyncio
import os
import shutil
import socket
import stat
import subprocess
from pathlib import Path

import pytest

from sandbox.local import environment
from sandbox.local.environment import _copy_small_tree, _copy_tree

pytestmark = pytest.mark.skipif(shutil.which("cp") is None, reason="needs cp")


def _listing(root: Path) -> dict[str, tuple]:
    """Everything `cp -a` keeps, per path (atime left out: reading a source may move it)."""
    facts = {}
    for directory, names, files in os.walk(root):
        for name in names + files:
            path = Path(directory, name)
            info = os.lstat(path)
            kind = stat.S_IFMT(info.st_mode)
            facts[str(path.relative_to(root))] = (
                kind, stat.S_IMODE(info.st_mode), info.st_uid, info.st_gid, info.st_mtime_ns, info.st_nlink,
                os.readlink(path) if stat.S_ISLNK(info.st_mode) else None,
                path.read_bytes() if stat.S_ISREG(info.st_mode) else None,
                sorted((n, os.getxattr(path, n, follow_symlinks=False))
                       for n in os.listxattr(path, follow_symlinks=False)))
    top = os.lstat(root)
    facts["."] = (stat.S_IMODE(top.st_mode), top.st_mtime_ns)
    return facts


def _hostile_tree(base: Path) -> Path:
    source = base / "root"
    (source / "app" / "pkg").mkdir(parents=True)
    outside = base / "outside"
    outside.mkdir()
    (outside / "secret").write_text("not to be copied")
    (source / "app" / "pkg" / "tool").write_text("#!/bin/sh\n")
    os.chmod(source / "app" / "pkg" / "tool", 0o4755)
    (source / "app" / "big").write_bytes(os.urandom(200_000))
    (source / "app" / "readonly").mkdir()
    (source / "app" / "readonly" / "file").write_text("r")
    os.chmod(source / "app" / "readonly", 0o555)
    os.symlink(str(outside), source / "app" / "to-outside")  # a link to a directory: copied as the link
    os.symlink(str(outside / "secret"), source / "app" / "to-secret")
    os.symlink("../missing", source / "app" / "dangling")
    os.link(source / "app" / "pkg" / "tool", source / "app" / "hard")
    os.link(source / "app" / "to-secret", source / "app" / "hard-link-to-link", follow_symlinks=False)
    os.mkfifo(source / "app" / "fifo")
    with socket.socket(socket.AF_UNIX) as listener:
        listener.bind(str(source / "app" / "sock"))
    try:
        os.setxattr(source / "app" / "big", "user.leafcost", b"kept")
    except OSError:
        pass  # a file system without user attributes
    if os.geteuid() == 0:
        os.chown(source / "app" / "big", 1234, 4321)
        os.lchown(source / "app" / "to-secret", 55, 66)
    os.utime(source / "app" / "pkg", ns=(10**18, 2 * 10**18))
    os.utime(source / "app" / "dangling", ns=(10**18, 3 * 10**18), follow_symlinks=False)
    os.utime(source, ns=(10**18, 4 * 10**18))
    return source


def test_the_in_process_copy_is_the_copy_cp_makes(tmp_path):
    source = _hostile_tree(tmp_path)
    subprocess.run(["cp", "-a", str(source), str(tmp_path / "by-cp")], check=True)
    assert _copy_small_tree(source, tmp_path / "by-harness")
    copied, expected = _listing(tmp_path / "by-harness"), _listing(tmp_path / "by-cp")
    assert copied == expected
    assert len(copied) == 14
    here = tmp_path / "by-harness" / "app"
    assert os.lstat(here / "hard").st_ino == os.lstat(here / "pkg" / "tool").st_ino
    assert os.lstat(here / "hard-link-to-link").st_ino == os.lstat(here / "to-secret").st_ino
    assert os.readlink(here / "to-outside") == str(tmp_path / "outside")  # never followed
    assert not (tmp_path / "by-harness" / "outside").exists()
    os.chmod(here / "readonly", 0o755)
    os.chmod(tmp_path / "by-cp" / "app" / "readonly", 0o755)
    os.chmod(source / "app" / "readonly", 0o755)


def test_a_tree_over_the_limits_is_left_to_cp(tmp_path, monkeypatch):
    source = _hostile_tree(tmp_path)
    monkeypatch.setattr(environment, "COPY_IN_PROCESS_ENTRIES", 5)
    monkeypatch.setattr(environment, "_LARGE_TREES", set())
    assert not _copy_small_tree(source, tmp_path / "nothing")
    assert not (tmp_path / "nothing").exists()  # nothing written before the tree is known to be small

    asyncio.run(_copy_tree(source, tmp_path / "copied"))
    assert environment._LARGE_TREES == {source}  # asked once: the next copies go to cp directly
    assert _listing(tmp_path / "copied") == _listing(source)
    asyncio.run(_copy_tree(source, tmp_path / "again"))
    assert _listing(tmp_path / "again") == _listing(source)
    for tree in (source, tmp_path / "copied", tmp_path / "again"):
        os.chmod(tree / "app" / "readonly", 0o755)


def test_a_copy_that_fails_is_a_sandbox_error(tmp_path):
    from sandbox.protocol import SandboxError

    source = _hostile_tree(tmp_path)
    (tmp_path / "exists").mkdir()
    with pytest.raises(SandboxError, match="could not copy the environment"):
        asyncio.run(_copy_tree(source, tmp_path / "exists"))
    os.chmod(source / "app" / "readonly", 0o755)
