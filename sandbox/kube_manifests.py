"""The Kubernetes objects the `kubernetes` sandbox backend creates, as plain manifests: one pod per attempt from the
task's image by digest, the namespace's deny-all NetworkPolicy for pods without network, and the minimum RBAC
the runner needs. Rendered here, with no client, so every one is checked offline against the Kubernetes OpenAPI
schema (tests/sandbox/test_kube_manifests.py) and can be printed for an administrator to apply."""

from __future__ import annotations

import hashlib
import re
from typing import Any

from sandbox.tasks import EnvironmentConfig

# The Kubernetes release the manifests are validated against (kubernetes-validate's schemas; client 37.x ↔ 1.37).
KUBERNETES_VERSION = "1.37.0"
CONTAINER = "sandbox"  # the one container of an attempt's pod; exec and readiness name it
PREFIX = "leafcost"  # label and annotation prefix: leafcost/run, leafcost/arm, ...
NETWORK_LABEL = f"{PREFIX}/network"  # "none" on every pod the NetworkPolicy must cut off
DENY_POLICY = "leafcost-no-network"
RUNNER_ACCOUNT = "leafcost-runner"
SPEC_HASH_ANNOTATION = f"{PREFIX}/sandbox-spec-sha256"
# Harbor keeps a task's container alive with its ENTRYPOINT and this command, as the container backend does.
KEEP_ALIVE = ["sh", "-c", "sleep infinity"]
# Where the harness writes in a pod that runs as a non-root user: empty, writable directories of the pod's own
# (emptyDir), since the image's / belongs to root. Root pods write these in the image's filesystem, as Harbor does.
HARNESS_DIRS = {"leafcost-logs": "/logs", "leafcost-tests": "/tests", "leafcost-solution": "/solution",
                "leafcost-runner": "/.leafcost"}
_LABEL_VALUE = re.compile(r"([A-Za-z0-9]([-A-Za-z0-9_.]{0,61}[A-Za-z0-9])?)?")


def label_key(name: str) -> str:
    """The runner's attempt labels (`leafcost.run`, ...) as Kubernetes label keys (`leafcost/run`)."""
    return name.replace(".", "/", 1) if name.startswith(f"{PREFIX}.") else name


def label_value(value: str) -> str:
    """A label value Kubernetes accepts (63 characters of a narrow alphabet); anything else by its hash, the value
    itself kept in an annotation."""
    return value if _LABEL_VALUE.fullmatch(value) else "h-" + hashlib.sha256(value.encode()).hexdigest()[:40]


def attempt_pod(*, name: str, namespace: str, image: str, environment: EnvironmentConfig, workdir: str,
                labels: dict[str, str], spec_hash: str, deadline_sec: float, run_as: int | None = None) -> dict[str, Any]:
    """One attempt's pod. `image` is a reference by digest (the image lock), `deadline_sec` the attempt's whole
    budget (activeDeadlineSeconds: the kubelet kills a pod a crashed runner forgot), `run_as` a numeric non-root
    user when every command of the attempt may run as it (otherwise root, as Harbor runs its harness commands):
    then the pod drops every capability and gets empty directories of its own where the harness writes."""
    quantities = _resources(environment)
    security: dict[str, Any] = {"allowPrivilegeEscalation": False, "seccompProfile": {"type": "RuntimeDefault"}}
    if run_as:
        security |= {"runAsUser": run_as, "runAsNonRoot": True, "capabilities": {"drop": ["ALL"]}}
    container: dict[str, Any] = {
        "name": CONTAINER, "image": image, "args": KEEP_ALIVE, "workingDir": workdir,
        "env": [{"name": key, "value": value} for key, value in environment.env.items()],
        "resources": {"requests": quantities, "limits": quantities}, "securityContext": security,
        "stdin": False, "tty": False,
    }
    volumes = []
    if run_as:
        container["volumeMounts"] = [{"name": name, "mountPath": path} for name, path in HARNESS_DIRS.items()]
        volumes = [{"name": name, "emptyDir": {}} for name in HARNESS_DIRS]
    all_labels = {label_key(k): label_value(v) for k, v in labels.items()}
    all_labels |= {PREFIX: "1", NETWORK_LABEL: "allowed" if environment.allow_internet else "none"}
    annotations = {SPEC_HASH_ANNOTATION: spec_hash,
                   **{label_key(k): v for k, v in labels.items() if label_value(v) != v}}
    return {
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": name, "namespace": namespace, "labels": all_labels, "annotations": annotations},
        "spec": {
            "containers": [container], "restartPolicy": "Never",
            "activeDeadlineSeconds": max(1, int(deadline_sec + 0.999)),
            "automountServiceAccountToken": False,  # nothing in the sandbox may talk to the API server
            "enableServiceLinks": False,  # nor learn the cluster's services from its environment
            "terminationGracePeriodSeconds": 0,
            **({"volumes": volumes} if volumes else {}),
            **({"nodeSelector": {"nvidia.com/gpu.product": environment.gpu_types[0]}}
               if environment.gpus and environment.gpu_types else {}),
        },
    }


def deny_network_policy(namespace: str) -> dict[str, Any]:
    """No traffic in or out for every pod labelled `leafcost/network: none` (tasks with allow_internet = false).
    Enforced by the cluster's network plugin: one without NetworkPolicy support ignores it (docs/kubernetes.md)."""
    return {
        "apiVersion": "networking.k8s.io/v1", "kind": "NetworkPolicy",
        "metadata": {"name": DENY_POLICY, "namespace": namespace, "labels": {PREFIX: "1"}},
        "spec": {"podSelector": {"matchLabels": {NETWORK_LABEL: "none"}}, "policyTypes": ["Ingress", "Egress"],
                 "ingress": [], "egress": []},
    }


def runner_rbac(namespace: str) -> list[dict[str, Any]]:
    """The least the runner needs, in one namespace: its pods (and exec, logs), and the NetworkPolicy."""
    rules = [
        {"apiGroups": [""], "resources": ["pods"],
         "verbs": ["create", "get", "list", "watch", "delete", "deletecollection"]},
        {"apiGroups": [""], "resources": ["pods/exec"], "verbs": ["create", "get"]},
        {"apiGroups": [""], "resources": ["pods/log"], "verbs": ["get"]},
        {"apiGroups": ["networking.k8s.io"], "resources": ["networkpolicies"], "verbs": ["create", "get", "list"]},
    ]
    meta = {"name": RUNNER_ACCOUNT, "namespace": namespace, "labels": {PREFIX: "1"}}
    return [
        {"apiVersion": "v1", "kind": "ServiceAccount", "metadata": meta, "automountServiceAccountToken": True},
        {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "Role", "metadata": meta, "rules": rules},
        {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "RoleBinding", "metadata": meta,
         "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": RUNNER_ACCOUNT},
         "subjects": [{"kind": "ServiceAccount", "name": RUNNER_ACCOUNT, "namespace": namespace}]},
    ]


def _resources(environment: EnvironmentConfig) -> dict[str, str]:
    """requests = limits (the Guaranteed class: an attempt gets what the task asks, never more, on any node)."""
    quantities = {"cpu": f"{round(environment.cpus * 1000)}m", "memory": f"{environment.memory_mb}Mi",
                  "ephemeral-storage": f"{environment.storage_mb}Mi"}
    if environment.gpus:
        quantities["nvidia.com/gpu"] = str(environment.gpus)
    return quantities
