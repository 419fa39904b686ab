"""The Kubernetes objects the `kubernetes` sandbox backend creates, as plain manifests: one pod per attempt from the
task's image by digest, the namespace's deny-all NetworkPolicy for pods without network, and the minimum RBAC
the runner needs. Rendered here, with no client, so every one is checked offline against the Kubernetes OpenAPI
schema (tests/sandbox/test_kube_manifests.py) and can be printed for an administrator to apply."""

from __future__ import annotations

import hashlib
import re
from collections.abc import Sequence
from typing import Any

from sandbox.protocol import BuildError
from sandbox.tasks import ComposeService, EnvironmentConfig

# The Kubernetes release the manifests are validated against (kubernetes-validate's schemas; client 37.x ↔ 1.37).
KUBERNETES_VERSION = "1.37.0"
CONTAINER = "sandbox"  # the one container of an attempt's pod; exec and readiness name it
PREFIX = "leafcost"  # label and annotation prefix: leafcost/run, leafcost/arm, ...
NETWORK_LABEL = f"{PREFIX}/network"  # "none" on every pod the NetworkPolicy must cut off
DENY_POLICY = "leafcost-no-network"
# A SWE-bench verifier's pod (`leafcost/network: outside`): egress to the internet, never to a private, link-local
# or loopback range, where the cluster's pods, services and nodes and the cloud's metadata server live.
OUTSIDE_POLICY = "leafcost-outside-only"
PRIVATE_RANGES = ("10.0.0.0/8", "172.16.0.0/12", "192.168.0.0/16", "169.254.0.0/16", "127.0.0.0/8", "100.64.0.0/10")
PRIVATE_RANGES_V6 = ("fc00::/7", "fe80::/10", "::1/128")
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
                labels: dict[str, str], spec_hash: str, deadline_sec: float, run_as: int | None = None,
                network: str | None = None, services: Sequence[tuple[ComposeService, str, str]] = ()) -> dict[str, Any]:
    """One attempt's pod. `image` is a reference by digest (the image lock), `deadline_sec` the attempt's whole
    budget (activeDeadlineSeconds: the kubelet kills a pod a crashed runner forgot), `run_as` a numeric non-root
    user when every command of the attempt may run as it (otherwise root, as Harbor runs its harness commands):
    then the pod drops every capability and gets empty directories of its own where the harness writes. `network`
    "outside" labels the pod for OUTSIDE_POLICY (a SWE-bench verifier); otherwise the environment's allow_internet
    decides. `services` (a Compose task's: each with its image and pull policy) become sidecars (`service_container`)
    in start order, and every service name (and `main`) a host alias of 127.0.0.1."""
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
    reach = "outside" if network == "outside" else "allowed" if environment.allow_internet else "none"
    all_labels |= {PREFIX: "1", NETWORK_LABEL: reach}
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
            **({"initContainers": [service_container(service, image, pull, environment, security)
                                   for service, image, pull in services],
                "hostAliases": [{"ip": "127.0.0.1", "hostnames": ["main", *(s.name for s, _, _ in services)]}]}
               if services else {}),
            **({"nodeSelector": {"nvidia.com/gpu.product": environment.gpu_types[0]}}
               if environment.gpus and environment.gpu_types else {}),
        },
    }


def service_container(service: ComposeService, image: str, pull_policy: str, environment: EnvironmentConfig,
                      security: dict[str, Any]) -> dict[str, Any]:
    """A Compose service as a native sidecar (an init container that keeps running, Kubernetes 1.29+): the kubelet
    starts the sidecars in order and each one's startupProbe (its healthcheck) must pass before the next, and the
    task's container, start, as depends_on and Harbor's `up --wait` do. Same securityContext as the task's container;
    its CPU and memory as the Compose file asks, never more than the task's container gets (requests = limits)."""
    cpus, memory_mb = service.limits(environment)
    quantities = {"cpu": f"{round(cpus * 1000)}m", "memory": f"{memory_mb}Mi"}
    container: dict[str, Any] = {
        "name": f"service-{service.name}", "image": image, "imagePullPolicy": pull_policy, "restartPolicy": "Always",
        "env": [{"name": key, "value": value} for key, value in service.environment.items()],
        "resources": {"requests": quantities, "limits": quantities}, "securityContext": dict(security),
    }
    arguments = list(service.command or [])
    if service.entrypoint is not None:  # Compose's entrypoint is Kubernetes' command ([]: the command runs alone)
        command = service.entrypoint or arguments
        arguments = arguments if service.entrypoint else []
        if command:
            container["command"] = command
    if arguments:
        container["args"] = arguments
    if service.working_dir:
        container["workingDir"] = service.working_dir
    if service.user is not None:
        container["securityContext"] |= _numeric_user(service)
    if (check := service.healthcheck) is not None:
        period = max(1, round(check.interval_sec))
        container["startupProbe"] = {
            "exec": {"command": ["sh", "-c", check.command]}, "periodSeconds": period,
            "timeoutSeconds": max(1, round(check.timeout_sec)),
            "failureThreshold": check.retries + int(check.start_period_sec // period)}
    return container


def deny_network_policy(namespace: str) -> dict[str, Any]:
    """No traffic in or out for every pod labelled `leafcost/network: none` (tasks with allow_internet = false).
    Enforced by the cluster's network plugin: one without NetworkPolicy support ignores it (docs/kubernetes.md)."""
    return {
        "apiVersion": "networking.k8s.io/v1", "kind": "NetworkPolicy",
        "metadata": {"name": DENY_POLICY, "namespace": namespace, "labels": {PREFIX: "1"}},
        "spec": {"podSelector": {"matchLabels": {NETWORK_LABEL: "none"}}, "policyTypes": ["Ingress", "Egress"],
                 "ingress": [], "egress": []},
    }


def outside_only_policy(namespace: str) -> dict[str, Any]:
    """For every pod labelled `leafcost/network: outside`: nothing in; out, any address but the private, link-local
    and loopback ranges, plus DNS to the cluster's resolver (kube-dns in kube-system, by its usual labels). Like
    every NetworkPolicy it is enforced by the network plugin, and a cluster whose pod or service range is public
    must add that range to `except` (docs/verification.md)."""
    blocks = [{"ipBlock": {"cidr": "0.0.0.0/0", "except": list(PRIVATE_RANGES)}},
              {"ipBlock": {"cidr": "::/0", "except": list(PRIVATE_RANGES_V6)}}]
    dns = {"to": [{"namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": "kube-system"}},
                   "podSelector": {"matchLabels": {"k8s-app": "kube-dns"}}}],
           "ports": [{"protocol": "UDP", "port": 53}, {"protocol": "TCP", "port": 53}]}
    return {
        "apiVersion": "networking.k8s.io/v1", "kind": "NetworkPolicy",
        "metadata": {"name": OUTSIDE_POLICY, "namespace": namespace, "labels": {PREFIX: "1"}},
        "spec": {"podSelector": {"matchLabels": {NETWORK_LABEL: "outside"}}, "policyTypes": ["Ingress", "Egress"],
                 "ingress": [], "egress": [{"to": blocks}, dns]},
    }


def network_policies(namespace: str) -> list[dict[str, Any]]:
    """The namespace's NetworkPolicies: deny-all for pods without network, outside-only for SWE-bench verifiers."""
    return [deny_network_policy(namespace), outside_only_policy(namespace)]


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


def _numeric_user(service: ComposeService) -> dict[str, int]:
    """Compose's `user` ("999" or "999:999") as runAsUser/runAsGroup: a pod cannot name a user of the image."""
    user, _, group = str(service.user).partition(":")
    if not user.isdigit() or (group and not group.isdigit()):
        raise BuildError(f"services.{service.name}.user {service.user!r} must be numeric (UID or UID:GID) on "
                         "kubernetes, which cannot look a name up in the image")
    return {"runAsUser": int(user), **({"runAsGroup": int(group)} if group else {})}


def _resources(environment: EnvironmentConfig) -> dict[str, str]:
    """requests = limits (the Guaranteed class: an attempt gets what the task asks, never more, on any node)."""
    quantities = {"cpu": f"{round(environment.cpus * 1000)}m", "memory": f"{environment.memory_mb}Mi",
                  "ephemeral-storage": f"{environment.storage_mb}Mi"}
    if environment.gpus:
        quantities["nvidia.com/gpu"] = str(environment.gpus)
    return quantities
