"""The one way the host touches files inside a tree that sandboxed code can write: every path is walked beneath a
directory fd, one component at a time, never following a symlink, so no name the sandbox controls can point the
host at its own files (openat2's RESOLVE_NO_SYMLINKS semantics, with plain openat and O_NOFOLLOW)."""

from __future__ import annotations

import errno
import os
import shutil
import stat
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path, PurePosixPath

_DIR_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC


class ConfinementError(OSError):
    """A path beneath the root would leave it: a symlink, a `..`, or something that is not a directory."""


@contextmanager
def directory(root: Path, relative: str | PurePosixPath = "", *, create: bool = False) -> Iterator[int]:
    """An fd of `root/relative`, reached without following any symlink; missing directories are made on the way
    when `create`. `root` itself is ours (the caller made it); everything below it may be hostile."""
    try:
        fd = os.open(root, _DIR_FLAGS)
    except OSError as exc:
        if exc.errno in (errno.ELOOP, errno.ENOTDIR):
            raise ConfinementError(f"{root} is a symlink or not a directory; not followed") from None
        raise
    try:
        for part in _parts(relative):
            parent, fd = fd, -1  # _step closes the parent whatever happens
            fd = _step(parent, part, create)
        yield fd
    finally:
        if fd >= 0:
            os.close(fd)


def lexists(root: Path, relative: str | PurePosixPath) -> bool:
    """Whether a name exists beneath root (as any kind of file, a symlink included), without following links."""
    *parents, name = _parts(relative) or [""]
    try:
        with directory(root, PurePosixPath(*parents) if parents else "") as fd:
            os.stat(name, dir_fd=fd, follow_symlinks=False)
        return True
    except (FileNotFoundError, NotADirectoryError, ConfinementError):
        return False


def is_dir(root: Path, relative: str | PurePosixPath) -> bool:
    """Whether `root/relative` is a directory reached without following any link."""
    try:
        with directory(root, relative):
            return True
    except (FileNotFoundError, NotADirectoryError, ConfinementError):
        return False


def copy_in(source: Path, root: Path, destination: str | PurePosixPath) -> None:
    """Copies a host file or directory tree to `root/destination` (a file's full destination path, or the
    directory whose contents a directory source is merged into, as Docker's COPY does). Symlinks in the source
    are copied as symlinks; an existing symlink or file at a destination name is replaced, never written through."""
    parts = _parts(destination)
    if source.is_dir() and not source.is_symlink():
        with directory(root, PurePosixPath(*parts) if parts else "", create=True) as fd:
            _copy_tree(source, fd)
        return
    if not parts:
        raise ConfinementError(f"cannot copy the file {source.name} onto the root itself")
    with directory(root, PurePosixPath(*parts[:-1]) if parts[:-1] else "", create=True) as fd:
        _copy_entry(source, fd, parts[-1])


def read_capped(root: Path, relative: str | PurePosixPath, limit: int = 1 << 20) -> bytes:
    """A regular file beneath `root` written by code we do not trust: no symlink is followed on the way or at the
    end, no FIFO or device is read (O_NONBLOCK: opening a FIFO never hangs), and at most `limit` bytes are read."""
    *parents, name = _parts(relative) or [""]
    with directory(root, PurePosixPath(*parents) if parents else "") as dir_fd:
        try:
            fd = os.open(name, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC, dir_fd=dir_fd)
        except OSError as exc:
            if exc.errno == errno.ELOOP:
                raise ConfinementError(f"{name} is a symlink; not followed") from None
            raise
    with os.fdopen(fd, "rb") as handle:
        if not stat.S_ISREG(os.fstat(fd).st_mode):  # fstat of what we opened: nothing left to race
            raise ConfinementError(f"{name} is not a regular file")
        return handle.read(limit)


def _parts(relative: str | PurePosixPath) -> list[str]:
    parts = [p for p in PurePosixPath(relative).parts if p not in ("/", ".")]
    if ".." in parts:
        raise ConfinementError(f"{relative}: '..' is not allowed beneath the root")
    return parts


def _step(fd: int, name: str, create: bool) -> int:
    """From a directory fd to its child directory `name`; closes `fd`."""
    try:
        if create:
            try:
                os.mkdir(name, 0o755, dir_fd=fd)
            except FileExistsError:
                pass
        try:
            return os.open(name, _DIR_FLAGS, dir_fd=fd)
        except OSError as exc:
            if exc.errno in (errno.ELOOP, errno.ENOTDIR):
                raise ConfinementError(f"{name!r} is a symlink or not a directory; not followed") from None
            raise
    finally:
        os.close(fd)


def _copy_tree(source: Path, dir_fd: int) -> None:
    for entry in sorted(os.scandir(source), key=lambda e: e.name):
        if not entry.is_dir(follow_symlinks=False):
            _copy_entry(Path(entry.path), dir_fd, entry.name)
            continue
        child = _subdirectory(dir_fd, entry.name)
        try:
            _copy_tree(Path(entry.path), child)
            os.chmod(child, stat.S_IMODE(entry.stat(follow_symlinks=False).st_mode))
        finally:
            os.close(child)


def _subdirectory(dir_fd: int, name: str) -> int:
    """A child directory's fd, made if missing; a symlink or file of that name is replaced first."""
    if _exists_at(dir_fd, name) and not _is_dir_at(dir_fd, name):
        os.unlink(name, dir_fd=dir_fd)
    return _step(os.dup(dir_fd), name, create=True)


def _copy_entry(source: Path, dir_fd: int, name: str) -> None:
    """One file or symlink into a directory fd, replacing whatever non-directory has that name."""
    info = source.lstat()
    if _exists_at(dir_fd, name) and not _is_dir_at(dir_fd, name):
        os.unlink(name, dir_fd=dir_fd)
    if stat.S_ISLNK(info.st_mode):
        os.symlink(os.readlink(source), name, dir_fd=dir_fd)
        return
    if not stat.S_ISREG(info.st_mode):
        raise ConfinementError(f"{source} is neither a file, a directory nor a symlink")
    flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC
    out = os.open(name, flags, stat.S_IMODE(info.st_mode), dir_fd=dir_fd)
    with open(source, "rb") as reader, os.fdopen(out, "wb") as writer:
        shutil.copyfileobj(reader, writer, 1 << 20)
        os.fchmod(writer.fileno(), stat.S_IMODE(info.st_mode))
        os.utime(writer.fileno(), ns=(info.st_atime_ns, info.st_mtime_ns))


def _exists_at(dir_fd: int, name: str) -> bool:
    try:
        os.stat(name, dir_fd=dir_fd, follow_symlinks=False)
        return True
    except FileNotFoundError:
        return False


def _is_dir_at(dir_fd: int, name: str) -> bool:
    try:
        return stat.S_ISDIR(os.stat(name, dir_fd=dir_fd, follow_symlinks=False).st_mode)
    except FileNotFoundError:
        return False


