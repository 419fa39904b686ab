"""Pod status as a kubelet reports it, in each state the stand-in can put a pod in: Pending (scheduled, its
container creating or its image not pullable), Running and Ready, terminated (Succeeded or Failed with the
container's exit code and reason), evicted or past its deadline. Each function returns a whole `status`."""

from __future__ import annotations

import datetime
from typing import Any

__all__ = ["NODE", "evicted", "image_failure", "now", "pending", "running", "terminated"]

NODE = "kube-fake-node"  # the one node every pod is scheduled on


def now() -> str:
    return datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


def pending(pod: dict[str, Any], *, waiting_reason: str = "ContainerCreating", message: str | None = None,
            created: str | None = None) -> dict[str, Any]:
    waiting = {"reason": waiting_reason, **({"message": message} if message else {})}
    return {"phase": "Pending", "hostIP": "127.0.0.1", "startTime": created or now(), "qosClass": _qos(pod),
            "conditions": _conditions(ready=False, scheduled=True),
            "containerStatuses": [_container(c, ready=False, state={"waiting": waiting}) for c in _containers(pod)]}


def image_failure(pod: dict[str, Any], reason: str, message: str, image: str | None = None) -> dict[str, Any]:
    """ErrImagePull or ImagePullBackOff: the pod stays Pending with the reason on the container of `image` (default:
    the first). A sidecar's (an init container with restartPolicy Always) holds its pod's containers at
    PodInitializing, as a kubelet does."""
    sidecars = (pod.get("spec") or {}).get("initContainers") or []
    if not any(c.get("image") == image for c in sidecars):
        return pending(pod, waiting_reason=reason, message=message, created=_started(pod))
    status = pending(pod, waiting_reason="PodInitializing", created=_started(pod))
    waiting = {"reason": reason, "message": message}
    initializing = {"reason": "PodInitializing"}
    status["initContainerStatuses"] = [
        _container(c, ready=False, state={"waiting": waiting if c.get("image") == image else initializing})
        for c in sidecars]
    return status


def running(pod: dict[str, Any], *, container_id: str, image_id: str = "") -> dict[str, Any]:
    started = now()
    return {"phase": "Running", "hostIP": "127.0.0.1", "podIP": "10.88.0.2", "startTime": _started(pod) or started,
            "qosClass": _qos(pod), "conditions": _conditions(ready=True, scheduled=True),
            "containerStatuses": [
                _container(c, ready=True, state={"running": {"startedAt": started}}, container_id=container_id,
                           image_id=image_id) for c in _containers(pod)]}


def terminated(pod: dict[str, Any], *, exit_code: int, reason: str | None = None,
               message: str | None = None) -> dict[str, Any]:
    """The container ended: Succeeded on 0, else Failed (restartPolicy Never: the pod ends with its container)."""
    finished = now()
    previous = (pod.get("status") or {}).get("containerStatuses") or [{}]
    running_state = (previous[0].get("state") or {}).get("running") or {}
    state = {"terminated": {"exitCode": exit_code, "reason": reason or ("Completed" if exit_code == 0 else "Error"),
                            "startedAt": running_state.get("startedAt", finished), "finishedAt": finished,
                            **({"message": message} if message else {}),
                            **({"containerID": previous[0]["containerID"]} if previous[0].get("containerID") else {})}}
    return {**_base(pod), "phase": "Succeeded" if exit_code == 0 else "Failed",
            "conditions": _conditions(ready=False, scheduled=True),
            "containerStatuses": [{**_container(c, ready=False, state=state), **_ids(previous[0])}
                                  for c in _containers(pod)]}


def evicted(pod: dict[str, Any], *, reason: str = "Evicted", message: str = "The node was low on resource: memory.",
            exit_code: int = 137, container_reason: str = "Error") -> dict[str, Any]:
    """What the kubelet leaves of an evicted pod (or one past activeDeadlineSeconds): Failed with a pod-level
    reason and message, the container killed."""
    status = terminated(pod, exit_code=exit_code, reason=container_reason)
    return {**status, "phase": "Failed", "reason": reason, "message": message}


def _base(pod: dict[str, Any]) -> dict[str, Any]:
    return {"hostIP": "127.0.0.1", "startTime": _started(pod) or now(), "qosClass": _qos(pod)}


def _started(pod: dict[str, Any]) -> str | None:
    return (pod.get("status") or {}).get("startTime")


def _containers(pod: dict[str, Any]) -> list[dict[str, Any]]:
    return (pod.get("spec") or {}).get("containers") or []


def _ids(previous: dict[str, Any]) -> dict[str, Any]:
    return {key: previous[key] for key in ("containerID", "imageID") if previous.get(key)}


def _container(spec: dict[str, Any], *, ready: bool, state: dict[str, Any], container_id: str = "",
               image_id: str = "") -> dict[str, Any]:
    status = {"name": spec.get("name"), "image": spec.get("image"), "imageID": image_id, "ready": ready,
              "started": "running" in state, "restartCount": 0, "state": state}
    if container_id:
        status["containerID"] = container_id
    return status


def _conditions(*, ready: bool, scheduled: bool) -> list[dict[str, Any]]:
    stamp = now()
    flag = "True" if ready else "False"
    return [{"type": kind, "status": value, "lastTransitionTime": stamp, "lastProbeTime": None}
            for kind, value in (("PodScheduled", "True" if scheduled else "False"), ("Initialized", "True"),
                                ("ContainersReady", flag), ("Ready", flag))]


def _qos(pod: dict[str, Any]) -> str:
    """Guaranteed when every container's requests equal its limits for cpu and memory; BestEffort with none."""
    containers = _containers(pod)
    resources = [c.get("resources") or {} for c in containers]
    if not any(r.get("requests") or r.get("limits") for r in resources):
        return "BestEffort"
    guaranteed = all((r.get("limits") or {}).get(k) and (r.get("requests") or r.get("limits") or {}).get(k)
                     == (r.get("limits") or {}).get(k) for r in resources for k in ("cpu", "memory"))
    return "Guaranteed" if guaranteed else "Burstable"
