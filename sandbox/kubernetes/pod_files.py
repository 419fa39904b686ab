"""Files into and out of a pod, as tar over exec (the API server has no file API), each checked by its SHA-256 on
both sides: the tool runner and a task's tests/ and solution/ in, a verifier's reward out, and a separate
verifier's artifacts from the agent's pod to the verifier's. Nothing is ever opened on the host by a name the pod
chose: what comes out is parsed in memory (or a temporary file of ours) and checked before it goes anywhere."""

from __future__ import annotations

import asyncio
import hashlib
import io
import posixpath
import shlex
import tarfile
import tempfile
import uuid
from pathlib import Path
from typing import IO, TYPE_CHECKING

from sandbox.container.containers import ARTIFACT_CAP_BYTES
from sandbox.protocol import SandboxError, file_from_tar

if TYPE_CHECKING:
    from sandbox.kubernetes.pods import KubeCluster

_SPOOL_BYTES = 8 << 20  # an artifact's tar stays in memory up to this, then in a temporary file of ours
_CHUNK = 1 << 20


async def put_file(cluster: KubeCluster, pod: str, path: str, data: bytes) -> None:
    """One file into the pod as root, replaced whole, checked by its SHA-256 there."""
    digest = hashlib.sha256(data).hexdigest()
    target, temporary = shlex.quote(path), shlex.quote(f"{path}.{uuid.uuid4().hex[:8]}")
    script = (f'mkdir -p "$(dirname {target})" && head -c {len(data)} > {temporary} && '
              f'[ "$(sha256sum < {temporary} | cut -d" " -f1)" = {digest} ] && mv -f {temporary} {target} '
              f'|| {{ rm -f {temporary}; echo "{path}: checksum mismatch after copy" >&2; exit 1; }}')
    result = await cluster.run(pod, script, timeout=120, data=data)
    if not result.ok:
        raise SandboxError(f"copying {path} into pod {pod} failed: {result.stderr.strip()[-300:]}")


async def put_tree(cluster: KubeCluster, pod: str, source: Path, target: str) -> None:
    """A host directory of the task (tests/, solution/) into the pod at `target` (made afresh), as one tar."""
    archive_file = io.BytesIO()
    with tarfile.open(fileobj=archive_file, mode="w") as archive:
        for child in sorted(Path(source).iterdir()):  # not "." itself: `target` may be a mount point not ours
            archive.add(child, arcname=child.name, filter=_owned_by_root)
    await _put_tar(cluster, pod, archive_file, target, replace=True, what=f"{source.name}/")


async def _put_tar(cluster: KubeCluster, pod: str, archive_file: IO[bytes], target: str, *, replace: bool,
                   what: str) -> None:
    """A tar (from the start of `archive_file`) unpacked in the pod under `target`, as root, once its SHA-256
    there matches ours; `replace` empties `target` first."""
    size, digest = _size_and_digest(archive_file)
    where = shlex.quote(target)
    # A directory of the pod's own (emptyDir, in a non-root pod) can only be emptied; a link is removed.
    empty = f"{{ rm -rf {where} 2>/dev/null || {{ [ -d {where} ] && [ ! -L {where} ]; }}; }} && " if replace else ""
    script = (f"{empty}mkdir -p {where} && t=$(mktemp) && "
              f'head -c {size} > "$t" && [ "$(sha256sum < "$t" | cut -d" " -f1)" = {digest} ] && '
              f'tar -xf "$t" -C {where}; r=$?; rm -f "$t"; exit $r')
    result = await cluster.run(pod, script, timeout=300, data=archive_file)
    if not result.ok:
        raise SandboxError(f"copying {what} into pod {pod} at {target} failed: {result.stderr.strip()[-300:]}")


async def copy_artifact(cluster: KubeCluster, source_pod: str, target_pod: str, path: str) -> None:
    """Harbor's separate mode: `path` (a file or a directory) from the agent's pod, whose processes are all gone,
    into the verifier's at the same path. The agent wrote what is there, and the tar it comes in was made by the
    agent's pod (whose `tar` the agent may have replaced): only regular files and directories under `path` go on,
    since a link, a device or a name outside `path` would let the agent write where the verifier reads its tests
    or its reward. Where the agent left nothing, or nothing whole (a tar that does not read, a checksum that does
    not match, more than ARTIFACT_CAP_BYTES), the verifier gets nothing there, as Harbor skips a missing one.
    A sparse file is left out too (its map could claim any size on the verifier's disk), and what crosses over
    loses its setuid, setgid and sticky bits, its extended headers and its owner names."""
    parent, base = posixpath.split(posixpath.normpath(posixpath.join("/", path)))
    if not base:
        raise SandboxError(f"artifact {path!r} names no file or directory")
    with tempfile.SpooledTemporaryFile(_SPOOL_BYTES) as raw, tempfile.SpooledTemporaryFile(_SPOOL_BYTES) as clean:
        script = (f"cd {shlex.quote(parent)} 2>/dev/null || exit 3; [ -e {shlex.quote(base)} ] || exit 3; "
                  f't=$(mktemp) && tar -cf "$t" -- {shlex.quote(base)} && sha256sum < "$t" >&2 && cat "$t"; '
                  f'r=$?; rm -f "$t"; exit $r')
        code, stderr = await _run_into(cluster, source_pod, script, raw, cap=ARTIFACT_CAP_BYTES)
        said = stderr.strip().splitlines()[-1].split()[0] if stderr.strip() else ""
        if code != 0 or said != _size_and_digest(raw)[1]:
            return
        if await asyncio.to_thread(_only_files_under, raw, clean, base) is None:
            return
        await _put_tar(cluster, target_pod, clean, parent, replace=False, what=f"artifact {path}")


def _only_files_under(raw: IO[bytes], clean: IO[bytes], base: str) -> list[str] | None:
    """The agent's tar rewritten into `clean` with its regular files and directories under `base` only, each as a
    fresh plain member (permission bits only, numeric owner, no extended headers); sparse files are left out:
    the names left out, or None when the tar does not read."""
    left_out = []
    raw.seek(0)
    try:
        with tarfile.open(fileobj=raw, mode="r:") as source, tarfile.open(fileobj=clean, mode="w") as target:
            for member in source:
                name = posixpath.normpath(member.name)
                inside = name == base or name.startswith(base + "/")
                kind_ok = (member.isreg() and not member.issparse()) or member.isdir()
                if not inside or ".." in name.split("/") or not kind_ok:
                    left_out.append(member.name)
                    continue
                target.addfile(_plain(member, name), source.extractfile(member) if member.isreg() else None)
    except tarfile.TarError:
        return None
    return left_out


def _plain(member: tarfile.TarInfo, name: str) -> tarfile.TarInfo:
    """A regular file's or directory's member as a new one: its name, size, time, numeric owner and permission
    bits (never setuid, setgid or sticky: the verifier may run as root where the agent could not)."""
    plain = tarfile.TarInfo(name)
    plain.type = tarfile.DIRTYPE if member.isdir() else tarfile.REGTYPE
    plain.size = 0 if member.isdir() else member.size
    plain.mode, plain.mtime = member.mode & 0o777, member.mtime
    plain.uid, plain.gid = member.uid, member.gid
    return plain


def _size_and_digest(data: IO[bytes]) -> tuple[int, str]:
    """Size and SHA-256 of everything in `data`; it is left at its start for reading."""
    data.seek(0)
    digest, size = hashlib.sha256(), 0
    while chunk := data.read(_CHUNK):
        digest.update(chunk)
        size += len(chunk)
    data.seek(0)
    return size, digest.hexdigest()


async def _run_into(cluster: KubeCluster, pod: str, script: str, into: IO[bytes], *,
                    cap: int) -> tuple[int | None, str]:
    """`script` by `sh -s`, its stdout written to `into`: (exit code, stderr); exit code None when the output
    went over `cap` bytes (the rest is not read)."""
    stream = await cluster.exec(pod, ["sh", "-s"], stdin=True)
    written = 0
    try:
        await stream.write(script.encode() + b"\nexit\n")
        await stream.close_stdin()
        while chunk := await stream.stdout.read(_CHUNK):
            written += len(chunk)
            if written > cap:
                return None, ""
            into.write(chunk)
        code = await asyncio.wait_for(stream.wait(), 60)
    finally:
        await stream.close()
    return code, bytes(stream.stderr).decode("utf-8", "replace")


async def get_file(cluster: KubeCluster, pod: str, path: str, limit: int) -> bytes | None:
    """A regular file out of the pod (never a link), at most `limit` bytes, as tar over exec with its SHA-256
    taken in the pod; None when it does not exist."""
    directory, name = posixpath.split(path)
    where, quoted = shlex.quote(directory), shlex.quote(name)
    script = (f"cd {where} 2>/dev/null || exit 3; [ -e {quoted} ] || [ -L {quoted} ] || exit 3; "
              f"[ -f {quoted} ] && [ ! -L {quoted} ] || {{ echo 'not a regular file' >&2; exit 4; }}; "
              f"sha256sum -- {quoted} >&2 && tar -cf - -- {quoted}")
    out = io.BytesIO()
    code, stderr = await _run_into(cluster, pod, script, out, cap=limit + 64 * 1024)  # the file, header, padding
    if code == 3:
        return None
    if code is None:
        raise OSError(f"{name} is larger than {limit} bytes")
    if code != 0:
        raise OSError(f"{name}: {stderr.strip()[-300:] or f'exit {code}'}")
    data = out.getvalue()
    content = file_from_tar(data, name, limit)
    said = stderr.split()[0] if stderr.split() else ""
    if said != hashlib.sha256(content).hexdigest():
        raise OSError(f"{name}: checksum mismatch between the pod and the copy")
    return content


def _owned_by_root(member: tarfile.TarInfo) -> tarfile.TarInfo:
    member.uid = member.gid = 0
    member.uname = member.gname = "root"
    return member


