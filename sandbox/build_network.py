"""The network a task's image is built in. A Dockerfile is the task's, and the task may be hostile: the builder
fetches `ADD http://...` itself, in its own network namespace, so a build run beside the host's services could read
one bound to the host's loopback (`ADD http://127.0.0.1:PORT/secret`), and a `RUN` on the engine's bridge reaches
the host through its gateway. With rootful Podman the whole build (the builder and every `RUN`) runs in a network
namespace of its own whose only way out is slirp4netns with the host's loopback disabled: it can pull `FROM`
images, install packages and fetch from the internet, never from the host's loopback. As in Harbor, a task's
`allow_internet` is about the agent's container, not its build (a Dockerfile may `apt-get install` whatever the
task allows at run time)."""

from __future__ import annotations

import asyncio
import os
import shutil
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from pathlib import Path

from sandbox.container_processes import keep_alive_binary
from sandbox.engine import Engine
from sandbox.protocol import BuildError

SLIRP_DNS = "10.0.2.3"  # slirp4netns's built-in DNS forwarder
_READY_TIMEOUT_SEC = 30.0


@dataclass(frozen=True)
class BuildNetwork:
    prefix: list[str] = field(default_factory=list)  # before the engine's argv: enters the namespace
    flags: list[str] = field(default_factory=list)  # for `build`: the network of its RUN steps


@asynccontextmanager
async def build_network(engine: Engine) -> AsyncIterator[BuildNetwork]:
    """The namespace for one build, removed afterwards; none where it cannot be made (Docker, whose builder is its
    daemon; rootless Podman, whose `RUN` steps already use slirp4netns without the host's loopback)."""
    if engine.name != "podman" or os.geteuid() != 0:
        yield BuildNetwork()
        return
    missing = [tool for tool in ("unshare", "nsenter", "slirp4netns") if shutil.which(tool) is None]
    if missing:
        raise BuildError(f"image builds run in a network namespace of their own, which needs {', '.join(missing)}: "
                         "apt-get install -y util-linux slirp4netns")
    holder = await asyncio.create_subprocess_exec("unshare", "--net", "--", str(keep_alive_binary()), "-P",
                                                  stdin=asyncio.subprocess.DEVNULL, stdout=asyncio.subprocess.DEVNULL,
                                                  stderr=asyncio.subprocess.PIPE, start_new_session=True)
    slirp: asyncio.subprocess.Process | None = None
    try:
        namespace = await _own_namespace(holder)
        slirp = await _slirp(holder.pid)
        flags = ["--network", "host"]  # the RUN steps share the builder's namespace, not the host's
        if _loopback_resolver():
            flags += ["--dns", SLIRP_DNS]  # the host's resolver on its loopback is out of reach, by design
        yield BuildNetwork(prefix=["nsenter", f"--net={namespace}", "--"], flags=flags)
    finally:
        for process in (slirp, holder):
            if process is not None and process.returncode is None:
                process.kill()
                await process.wait()


async def _own_namespace(holder: asyncio.subprocess.Process) -> str:
    """The holder's network namespace, once `unshare` has made it (its link differs from ours)."""
    ours, path = os.readlink("/proc/self/ns/net"), f"/proc/{holder.pid}/ns/net"
    loop = asyncio.get_running_loop()
    deadline = loop.time() + _READY_TIMEOUT_SEC
    while loop.time() < deadline:
        if holder.returncode is not None:
            break
        try:
            if os.readlink(path) != ours:
                return path
        except OSError:
            break
        await asyncio.sleep(0.01)
    assert holder.stderr is not None
    said = (await holder.stderr.read()).decode("utf-8", "replace").strip() if holder.returncode is not None else ""
    raise BuildError(f"the build's network namespace could not be made: {said or 'unshare --net did not start'}")


async def _slirp(pid: int) -> asyncio.subprocess.Process:
    read_end, write_end = os.pipe()
    try:
        slirp = await asyncio.create_subprocess_exec(
            "slirp4netns", "--configure", "--mtu=65520", "--disable-host-loopback", f"--ready-fd={write_end}",
            str(pid), "tap0", stdin=asyncio.subprocess.DEVNULL, stdout=asyncio.subprocess.DEVNULL,
            stderr=asyncio.subprocess.DEVNULL, pass_fds=(write_end,), start_new_session=True)
    finally:
        os.close(write_end)
    try:
        ready = await asyncio.wait_for(asyncio.to_thread(os.read, read_end, 1), _READY_TIMEOUT_SEC)
    except asyncio.TimeoutError:
        ready = b""
    finally:
        os.close(read_end)
    if ready != b"1":
        slirp.kill()
        await slirp.wait()
        raise BuildError("slirp4netns did not configure the build's network namespace")
    return slirp


def _loopback_resolver() -> bool:
    try:
        lines = Path("/etc/resolv.conf").read_text().splitlines()
    except OSError:
        return False
    servers = [line.split()[1] for line in lines if line.startswith("nameserver") and len(line.split()) > 1]
    return any(server.startswith("127.") or server == "::1" for server in servers)
