"""The GPUs an SGLang Deployment holds, read from the cluster instead of typed by hand: its running pods (found by
the `leafcost/deployment` label `leafcost sglang manifest` puts on them), the GPUs each pod's containers are
given, and the GPU product of the node each runs on (the `nvidia.com/gpu.product` label of NVIDIA's GPU feature
discovery). An arm with `gpu: {from_deployment: NAME}` is leased for exactly that."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from pydantic import BaseModel

from adapters.base import AdapterError
from adapters.sglang_manifest import DEPLOYMENT_LABEL, GPU_PRODUCT_LABEL

GPU_RESOURCE = "nvidia.com/gpu"


class DeploymentPod(BaseModel):
    name: str
    node: str
    gpus: int
    started_at: datetime | None


class DeploymentGpus(BaseModel):
    """What the deployment holds now: `hardware` the nodes' GPU product, `count` the GPUs of all its pods."""

    deployment: str
    namespace: str
    hardware: str
    count: int
    pods: list[DeploymentPod]


def deployment_gpus(name: str, namespace: str, *, kubeconfig: str | None = None,
                    context: str | None = None) -> DeploymentGpus:
    """Raises AdapterError (configuration) naming what is missing: no running pod, no GPU, an unlabelled node."""
    from kubernetes import client, config
    from kubernetes.client.exceptions import ApiException

    configuration = client.Configuration()
    try:
        config.load_kube_config(config_file=kubeconfig, context=context, client_configuration=configuration)
    except Exception as exc:  # noqa: BLE001 - any kubeconfig problem is the user's to fix, named
        try:
            if kubeconfig or context:
                raise
            config.load_incluster_config(client_configuration=configuration)  # the runner is itself a pod
        except Exception:  # noqa: BLE001
            raise AdapterError("configuration", f"gpu.from_deployment: no cluster to read deployment {name} from: "
                               f"{exc}") from None
    core = client.CoreV1Api(client.ApiClient(configuration))
    try:
        listed = core.list_namespaced_pod(namespace, label_selector=f"{DEPLOYMENT_LABEL}={name}", _request_timeout=30)
        pods = [_pod(core.api_client.sanitize_for_serialization(p)) for p in listed.items]
        running = [p for p in pods if p is not None]
        if not running:
            raise AdapterError("configuration", f"gpu.from_deployment: deployment {name} has no running pod in "
                               f"namespace {namespace} (pods labelled {DEPLOYMENT_LABEL}={name})")
        products = {}
        for pod in running:
            node = core.api_client.sanitize_for_serialization(core.read_node(pod.node, _request_timeout=30))
            product = ((node.get("metadata") or {}).get("labels") or {}).get(GPU_PRODUCT_LABEL)
            if not product:
                raise AdapterError("configuration", f"gpu.from_deployment: node {pod.node} has no {GPU_PRODUCT_LABEL} "
                                   "label (NVIDIA's GPU feature discovery sets it); give gpu.type and gpu.count "
                                   "instead")
            products[pod.node] = product
    except ApiException as exc:
        raise AdapterError("configuration", f"gpu.from_deployment: reading deployment {name} in namespace "
                           f"{namespace}: HTTP {exc.status} {exc.reason}") from None
    count = sum(p.gpus for p in running)
    if count == 0:
        raise AdapterError("configuration", f"gpu.from_deployment: the pods of deployment {name} are given no "
                           f"{GPU_RESOURCE}")
    return DeploymentGpus(deployment=name, namespace=namespace, hardware="+".join(sorted(set(products.values()))),
                          count=count, pods=running)


def _pod(pod: dict[str, Any]) -> DeploymentPod | None:
    """A running pod with its node and GPUs (limits, as the scheduler counts extended resources), else None."""
    status, spec = pod.get("status") or {}, pod.get("spec") or {}
    if status.get("phase") != "Running" or not spec.get("nodeName"):
        return None
    gpus = 0
    for container in spec.get("containers") or []:
        resources = container.get("resources") or {}
        gpus += int((resources.get("limits") or resources.get("requests") or {}).get(GPU_RESOURCE, 0))
    started = status.get("startTime")
    return DeploymentPod(name=pod["metadata"]["name"], node=spec["nodeName"], gpus=gpus,
                         started_at=datetime.fromisoformat(started.replace("Z", "+00:00")) if started else None)
