"""An exec handler for instant pods that answers what the kubernetes backend really sends, without running any of it
on this host (its scripts `mkdir /logs` and `kill -KILL` every process): each pod is emulated, its files in an
in-memory dict. It knows the set-up, kill and cgroup scripts, `put_file`/`put_tree` (N bytes read and checked by
their SHA-256 as the real script does), `get_file`, the harness commands (patch capture answers an empty patch, the
oracle writes nothing, the verifier writes reward 1) and the tool runner's JSON-lines protocol. Cheap per call, so
hundreds of pods measure the orchestrator, not the stand-in.

    pods = InstantPods()
    with KubeFake(mode="instant", exec_handler=pods) as kube: ...
"""

from __future__ import annotations

import hashlib
import io
import json
import re
import shlex
import tarfile

from support.kube_fake.exec_ws import ExecCall, scripted_exec

__all__ = ["InstantPods"]

REWARD = "/logs/verifier/reward.txt"
HEAD = "0" * 40  # the baseline commit the set-up reports
_HEAD_BYTES = re.compile(r"head -c (\d+)")
_DIGEST = re.compile(r"= ([0-9a-f]{64}) \]")
_MOVE = re.compile(r"mv -f \S+ (.+?) \|\|")
_UNTAR = re.compile(r"tar -xf \"\$t\" -C (.+?);")
_GET = re.compile(r"^cd (.+?) 2>/dev/null \|\| exit 3; \[ -e (.+?) \]")


class InstantPods:
    """The handler (call it with an ExecCall) and the pods' files: `files[(namespace, pod)][path] = bytes`."""

    def __init__(self, reward: str = "1") -> None:
        self.reward = reward
        self.files: dict[tuple[str, str], dict[str, bytes]] = {}

    async def __call__(self, call: ExecCall) -> int:
        command = call.command
        files = self.files.setdefault((call.namespace, call.pod_name), {})
        if command == ["sh", "-s"]:
            return await self._script(call, files, (await _read_all(call)).decode())
        if command[:2] == ["sh", "-c"] and len(command) == 3 and "head -c" in command[2]:
            return await self._put(call, files, command[2])
        if "/.leafcost/tool_runner.py" in command:
            return await _tool_runner(call, files)
        return await scripted_exec(call)

    async def _script(self, call: ExecCall, files: dict[str, bytes], script: str) -> int:
        if 'echo "workdir=$(pwd)"' in script:  # the set-up: the facts the backend parses
            await call.write_stdout(f"workdir=/app\nspare= 1:100 7:101\npython3=yes\nhead={HEAD}\n".encode())
            return 0
        reset = "rm -rf /tests /logs/verifier" in script  # set-up scripts start with the pod's RUN_AS=
        if "kill -KILL" in script or reset:
            if reset:  # the verifier's directories made afresh
                for path in [p for p in files if p.startswith(("/tests/", "/logs/verifier/"))]:
                    del files[path]
            return 0
        if "cpu.stat" in script:
            await call.write_stdout(b"usage_usec 12345\n")
            return 0
        if (got := _GET.match(script)) is not None:
            return await _get(call, files, shlex.split(got.group(1))[0], shlex.split(got.group(2))[0])
        return await self._harness(call, files, script)

    async def _harness(self, call: ExecCall, files: dict[str, bytes], script: str) -> int:
        """`harness_script` ends with `exec [python3 ... user] sh -c COMMAND </dev/null` (then the `exit` that
        `KubeCluster.run` appends)."""
        line = next((line for line in reversed(script.splitlines()) if line.startswith("exec ")), "")
        command = shlex.split(line)[-2] if line else ""
        if command.startswith("git ") or command == "bash /solution/solve.sh":
            return 0  # patch capture (an empty patch), git's staging and the oracle write nothing
        if command == "bash /tests/test.sh":
            files[REWARD] = f"{self.reward}\n".encode()
            return 0
        await call.write_stderr(f"instant pod: no answer for harness command {command!r}\n".encode())
        return 127

    async def _put(self, call: ExecCall, files: dict[str, bytes], script: str) -> int:
        size, digest = int(_HEAD_BYTES.search(script).group(1)), _DIGEST.search(script)
        data = (await _read_all(call))[:size]
        if digest is None or hashlib.sha256(data).hexdigest() != digest.group(1):
            await call.write_stderr(b"checksum mismatch after copy\n")
            return 1
        if (moved := _MOVE.search(script)) is not None:  # put_file
            files[shlex.split(moved.group(1))[0]] = data
            return 0
        target = shlex.split(_UNTAR.search(script).group(1))[0].rstrip("/")
        for path in [p for p in files if p.startswith(target + "/")]:
            del files[path]
        with tarfile.open(fileobj=io.BytesIO(data)) as archive:
            for member in archive.getmembers():
                if member.isreg():
                    handle = archive.extractfile(member)
                    files[f"{target}/{member.name.removeprefix('./')}"] = handle.read() if handle else b""
        return 0


async def _read_all(call: ExecCall) -> bytes:
    data = bytearray()
    while chunk := await call.read():
        data += chunk
    return bytes(data)


async def _get(call: ExecCall, files: dict[str, bytes], directory: str, name: str) -> int:
    """`get_file`: exit 3 when missing, else the SHA-256 on stderr and a one-member tar on stdout."""
    content = files.get(f"{directory.rstrip('/')}/{name}")
    if content is None:
        return 3
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w") as archive:
        member = tarfile.TarInfo(name)
        member.size = len(content)
        archive.addfile(member, io.BytesIO(content))
    await call.write_stderr(f"{hashlib.sha256(content).hexdigest()}  {name}\n".encode())
    await call.write_stdout(buffer.getvalue())
    return 0


async def _tool_runner(call: ExecCall, files: dict[str, bytes]) -> int:
    """The runner's protocol: a hello line, then one answer per request line, same id; EOF or shutdown ends it."""
    if "/.leafcost/tool_runner.py" not in files:  # the backend must have copied it in first, as in a real pod
        await call.write_stderr(b"python3: can't open file '/.leafcost/tool_runner.py'\n")
        return 2
    await call.write_stdout(b'{"ready": true, "pid": 42, "python": "3.12.0", "runner_version": "instant"}\n')
    pending = b""
    while chunk := await call.read():
        pending += chunk
        *lines, pending = pending.split(b"\n")
        for line in lines:
            request = json.loads(line)
            answer = {"id": request.get("id")}
            if request.get("op") == "tool":
                answer["output"] = f"instant pod: {request.get('name')} done"
            elif request.get("op") == "exec":
                answer.update(exit_code=0, stdout="", stderr="", timed_out=False, seconds=0.0, truncated_bytes=0)
            else:
                answer["ok"] = True
            await call.write_stdout(json.dumps(answer).encode() + b"\n")
            if request.get("op") == "shutdown":
                return 0
    return 0
