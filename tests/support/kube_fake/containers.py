"""A pod's first container as an engine command line (`podman run -d ...`), honouring what the stand-in promises:
image (never pulled: no registry is reachable, a missing image is an image-pull failure), command → entrypoint,
args, workingDir, env values, resources.limits cpu and memory (requests are ignored: one node, no scheduling),
runAsUser/runAsGroup (container- over pod-level securityContext), emptyDir volumes (an empty world-writable
tmpfs at each mountPath, as a kubelet makes them 0777), and `--network none` unless the pod's annotation
NETWORK_ANNOTATION says `default`. Everything else in the spec is ignored."""

from __future__ import annotations

import json
import re
from typing import Any

__all__ = ["NETWORK_ANNOTATION", "SERVER_LABEL", "POD_LABEL", "memory_bytes", "cpu_cores", "run_args"]

NETWORK_ANNOTATION = "kube-fake/network"  # "default": the engine's default network; anything else: none
SERVER_LABEL = "kube-fake.server"  # which stand-in started the container (its removal finds them all)
POD_LABEL = "kube-fake.pod"  # namespace/name of the pod it runs
_QUANTITY = re.compile(r"^([0-9.]+)([A-Za-z]*)$")
_BINARY = {"Ki": 2**10, "Mi": 2**20, "Gi": 2**30, "Ti": 2**40, "Pi": 2**50, "Ei": 2**60}
_DECIMAL = {"": 1, "k": 10**3, "M": 10**6, "G": 10**9, "T": 10**12, "P": 10**15, "E": 10**18, "m": 10**-3}


def run_args(pod: dict[str, Any], *, name: str, server_id: str) -> tuple[list[str], dict[str, str]]:
    """Arguments of `<engine> run` for the pod's first container, and the environment the engine client needs
    (env values travel as `--env NAME`, read from the client's environment, never on the command line)."""
    spec = pod.get("spec") or {}
    container = (spec.get("containers") or [{}])[0]
    meta = pod.get("metadata") or {}
    from sandbox.container.engine import ULIMITS

    flags = ["-d", "--pull", "never", "--init", "--name", name, *ULIMITS,
             "--label", f"{SERVER_LABEL}={server_id}", "--label", f"{POD_LABEL}={meta.get('namespace')}/{meta['name']}"]
    limits = (container.get("resources") or {}).get("limits") or {}
    if "cpu" in limits:
        flags += ["--cpus", f"{cpu_cores(limits['cpu']):g}"]
    if "memory" in limits:
        memory = str(memory_bytes(limits["memory"]))
        flags += ["--memory", memory, "--memory-swap", memory]
    user = _user(spec.get("securityContext") or {}, container.get("securityContext") or {})
    if user:
        flags += ["--user", user]
    if container.get("workingDir"):
        flags += ["--workdir", container["workingDir"]]
    empty = {volume["name"] for volume in spec.get("volumes") or [] if "emptyDir" in volume}
    for mount in container.get("volumeMounts") or []:
        if mount.get("name") in empty:
            flags += ["--mount", f"type=tmpfs,destination={mount['mountPath']},tmpfs-mode=0777"]
    if (meta.get("annotations") or {}).get(NETWORK_ANNOTATION) != "default":
        flags += ["--network", "none"]
    env: dict[str, str] = {}
    for variable in container.get("env") or []:
        if "value" in variable:
            env[variable["name"]] = str(variable["value"])
            flags += ["--env", variable["name"]]
    if container.get("command"):
        flags += ["--entrypoint", json.dumps(container["command"])]
    return [*flags, container["image"], *(container.get("args") or [])], env


def cpu_cores(quantity: str | int | float) -> float:
    return _quantity(quantity)


def memory_bytes(quantity: str | int | float) -> int:
    return int(_quantity(quantity))


def _quantity(quantity: str | int | float) -> float:
    found = _QUANTITY.match(str(quantity).strip())
    if found is None or (found.group(2) not in _BINARY and found.group(2) not in _DECIMAL):
        raise ValueError(f"not a Kubernetes quantity: {quantity!r}")
    number, suffix = float(found.group(1)), found.group(2)
    return number * (_BINARY.get(suffix) or _DECIMAL[suffix])


def _user(pod_context: dict[str, Any], container_context: dict[str, Any]) -> str | None:
    uid = container_context.get("runAsUser", pod_context.get("runAsUser"))
    gid = container_context.get("runAsGroup", pod_context.get("runAsGroup"))
    if uid is None:
        return None
    return f"{uid}:{gid}" if gid is not None else str(uid)
