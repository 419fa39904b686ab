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
import ipaddress
import os
import shutil
import subprocess
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from pathlib import Path

from sandbox.container.processes import keep_alive_binary
from sandbox.container.engine import Engine
from sandbox.protocol import BuildError, SandboxError

SLIRP_DNS = "10.0.2.3"  # slirp4netns's built-in DNS forwarder
SLIRP_NETWORK = ipaddress.ip_network("10.0.2.0/24")  # the link slirp4netns gives a namespace
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


# A SWE-bench verifier's network, as SWE-bench's harness grades with one: the internet through slirp4netns (the
# host's loopback disabled, no IPv6), and, before anything in the container runs, routes in its namespace that make
# every private and link-local range and each of this host's own addresses and networks unreachable: slirp4netns
# alone connects to the host's LAN address as to any other. The container has no CAP_NET_ADMIN to undo them.
OUTSIDE_ONLY_FLAGS = ["--network", "slirp4netns:allow_host_loopback=false,enable_ipv6=false", "--dns", SLIRP_DNS]
FENCED_RANGES = ("10.0.0.0/8", "172.16.0.0/12", "192.168.0.0/16", "169.254.0.0/16", "100.64.0.0/10")


def fences_host(engine: Engine) -> bool:
    """Whether leafcost can give a container the outside without the host: rootful Podman on this machine (the
    routes go into the container's namespace from here). Docker's daemon and rootless Podman: not here."""
    return engine.name == "podman" and os.geteuid() == 0 and shutil.which("nsenter") is not None \
        and shutil.which("ip") is not None


async def start_outside_only(engine: Engine, container: str) -> None:
    """Starts a container created with OUTSIDE_ONLY_FLAGS once its namespace is fenced: `init` makes the namespace
    and slirp4netns's link in it without running anything of the image, the routes go in, then `start`."""
    await engine.run("init", container, timeout=120)
    found = await engine.run("inspect", "--format", "{{.State.Pid}}", container)
    pid = found.text.strip()
    path = f"/proc/{pid}/ns/net"
    if not pid.isdigit() or pid == "0" or os.readlink(path) == os.readlink("/proc/self/ns/net"):
        raise SandboxError(f"container {container} has no network namespace of its own to fence (pid {pid!r})")
    batch = "".join(f"route add unreachable {network}\n" for network in fenced_networks())
    fenced = await asyncio.create_subprocess_exec("nsenter", f"--net={path}", "--", "ip", "-batch", "-",
                                                  stdin=asyncio.subprocess.PIPE, stdout=asyncio.subprocess.DEVNULL,
                                                  stderr=asyncio.subprocess.PIPE)
    _, said = await fenced.communicate(batch.encode())
    if fenced.returncode != 0:
        raise SandboxError(f"the routes that keep container {container} off this host's addresses could not be set: "
                         f"{said.decode('utf-8', 'replace').strip()[-300:]}")
    await engine.run("start", container, timeout=120)


def fenced_networks(listing: str | None = None) -> list[str]:
    """FENCED_RANGES, then every IPv4 address of this host (/32) and the network it is on, loopback aside. A host
    network over slirp4netns's own (a VirtualBox NAT's 10.0.2.0/24) is left to the container's link, where only
    slirp4netns answers: its route could not be replaced, and the host's own address still is."""
    if listing is None:  # `ip -o -4 addr show` of this host
        listing = subprocess.run(["ip", "-o", "-4", "addr", "show"], capture_output=True, text=True, check=True).stdout
    networks = list(FENCED_RANGES)
    for line in listing.splitlines():
        fields = line.split()
        if "inet" not in fields:
            continue
        interface = ipaddress.ip_interface(fields[fields.index("inet") + 1])
        if interface.is_loopback:
            continue
        networks.append(f"{interface.ip}/32")
        if not interface.network.overlaps(SLIRP_NETWORK):
            networks.append(str(interface.network))
    return list(dict.fromkeys(networks))
