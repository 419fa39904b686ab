"""The host's only way into a sandbox's tree: every component resolved beneath the root without following links."""

from __future__ import annotations

import os

import pytest

from sandbox.shared import confined


@pytest.fixture
def tree(tmp_path):
    root, outside = tmp_path / "root", tmp_path / "outside"
    (root / "app" / "pkg").mkdir(parents=True)
    outside.mkdir()
    (outside / "secret.txt").write_text("host secret")
    os.symlink(outside, root / "app" / "link")
    os.symlink(outside / "secret.txt", root / "app" / "file-link")
    return root, outside


def test_a_symlinked_directory_is_never_followed(tree):
    root, outside = tree
    with pytest.raises(confined.ConfinementError, match="'link' is a symlink"):
        with confined.directory(root, "app/link/deeper", create=True):
            pass
    assert sorted(p.name for p in outside.iterdir()) == ["secret.txt"]
    assert confined.is_dir(root, "app/pkg") and not confined.is_dir(root, "app/link")


def test_dot_dot_is_refused(tree):
    root, _ = tree
    with pytest.raises(confined.ConfinementError, match=r"'\.\.' is not allowed"):
        with confined.directory(root, "app/../../outside"):
            pass


def test_copy_in_replaces_a_file_symlink_and_copies_links_as_links(tree, tmp_path):
    root, outside = tree
    source = tmp_path / "context"
    (source / "sub").mkdir(parents=True)
    (source / "sub" / "data.txt").write_text("data")
    os.symlink("/etc/passwd", source / "sub" / "rel-link")
    (source / "file-link").write_text("new content")
    confined.copy_in(source, root, "/app")
    assert (outside / "secret.txt").read_text() == "host secret"
    assert not (root / "app" / "file-link").is_symlink()
    assert (root / "app" / "file-link").read_text() == "new content"
    assert os.readlink(root / "app" / "sub" / "rel-link") == "/etc/passwd"
    assert (root / "app" / "sub" / "data.txt").read_text() == "data"


def test_copy_into_a_directory_reached_through_a_symlink_is_refused(tree, tmp_path):
    root, outside = tree
    source = tmp_path / "payload.txt"
    source.write_text("payload")
    with pytest.raises(confined.ConfinementError):
        confined.copy_in(source, root, "app/link/payload.txt")
    assert not (outside / "payload.txt").exists()


def test_read_capped_refuses_links_and_fifos_and_caps(tmp_path):
    (tmp_path / "big").write_bytes(b"x" * 5000)
    os.symlink("/etc/hostname", tmp_path / "link")
    os.mkfifo(tmp_path / "fifo")
    assert confined.read_capped(tmp_path, "big", limit=100) == b"x" * 100
    with pytest.raises(confined.ConfinementError, match="symlink"):
        confined.read_capped(tmp_path, "link")
    (tmp_path / "sub").mkdir()
    (tmp_path / "sub" / "f").write_text("inside")
    os.symlink(tmp_path / "sub", tmp_path / "sub-link")
    assert confined.read_capped(tmp_path, "sub/f") == b"inside"
    with pytest.raises(confined.ConfinementError, match="'sub-link' is a symlink"):
        confined.read_capped(tmp_path, "sub-link/f")
    with pytest.raises(confined.ConfinementError, match="not a regular file"):
        confined.read_capped(tmp_path, "fifo")
