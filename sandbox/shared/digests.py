"""Content hashes of build contexts: what decides whether a built environment or image can be reused."""

from __future__ import annotations

import hashlib
import os
from functools import lru_cache
from pathlib import Path


def update_with_tree(digest: "hashlib._Hash", directory: Path) -> None:
    """Feeds every file and link under `directory` (relative name, mode, content or link target) into `digest`."""
    for path in sorted(p for p in directory.rglob("*") if p.is_file() or p.is_symlink()):
        relative = path.relative_to(directory).as_posix()
        digest.update(relative.encode() + b"\0" + oct(path.lstat().st_mode).encode() + b"\0")
        digest.update(os.readlink(path).encode() if path.is_symlink() else file_digest(path))


def file_digest(path: Path) -> bytes:
    """A file's sha256, read again only when its inode, size or mtime changed: every episode of a run opens its
    task's environment, and a SWE-bench repository is thousands of files."""
    st = path.stat()
    return _digest_of(str(path), st.st_ino, st.st_size, st.st_mtime_ns)


@lru_cache(maxsize=65536)
def _digest_of(path: str, inode: int, size: int, mtime_ns: int) -> bytes:
    with open(path, "rb") as handle:
        return hashlib.file_digest(handle, "sha256").digest()
