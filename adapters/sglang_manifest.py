"""FrogNano on SGLang inside a cluster: a Deployment and its Service, rendered as plain manifests (no client) for
`leafcost sglang manifest`. The container runs exactly `leafcost sglang command`'s launch, the metrics device
timer included; it asks for its GPUs on a node of the named GPU type, reads the weights from a volume, and is
ready when SGLang's /health answers. The pods carry `leafcost/deployment: NAME`, by which an arm with
`gpu: {from_deployment: NAME}` finds them."""

from __future__ import annotations

from typing import Any

from adapters.sglang import LAUNCH_ENV, launch_command

DEPLOYMENT_LABEL = "leafcost/deployment"
GPU_PRODUCT_LABEL = "nvidia.com/gpu.product"  # set on each node by NVIDIA's GPU feature discovery
WEIGHTS_MOUNT = "/models"
PORT_NAME = "http"


def sglang_manifests(*, name: str, namespace: str, image: str, model_path: str, weights_claim: str, gpus: int = 1,
                     gpu_type: str | None = None, port: int = 30000, context_length: int = 131072,
                     shm_gi: int = 16) -> list[dict[str, Any]]:
    """[Deployment, Service]. `model_path` is where the weights are inside the container (under WEIGHTS_MOUNT, from
    the PersistentVolumeClaim `weights_claim`), `gpus` the tensor-parallel size."""
    labels = {"app.kubernetes.io/name": "sglang", "app.kubernetes.io/instance": name, DEPLOYMENT_LABEL: name}
    health = {"httpGet": {"path": "/health", "port": PORT_NAME}}
    container = {
        "name": "sglang", "image": image,
        # python3: SGLang's images need not have a `python`; the arguments are `sglang command`'s, unchanged.
        "command": ["python3", *launch_command(model_path=model_path, port=port, context_length=context_length,
                                               tp=gpus)[1:]],
        "env": [{"name": key, "value": value} for key, value in LAUNCH_ENV.items()],
        "ports": [{"name": PORT_NAME, "containerPort": port}],
        "resources": {"requests": {"nvidia.com/gpu": str(gpus)}, "limits": {"nvidia.com/gpu": str(gpus)}},
        "volumeMounts": [{"name": "weights", "mountPath": WEIGHTS_MOUNT, "readOnly": True},
                         {"name": "shm", "mountPath": "/dev/shm"}],
        # Loading 4B of weights and capturing CUDA graphs takes minutes: up to 30 of them before liveness applies.
        "startupProbe": {**health, "periodSeconds": 10, "failureThreshold": 180},
        "readinessProbe": {**health, "periodSeconds": 10, "failureThreshold": 3},
        "livenessProbe": {**health, "periodSeconds": 30, "timeoutSeconds": 10, "failureThreshold": 5},
    }
    pod_spec: dict[str, Any] = {
        "containers": [container],
        "volumes": [{"name": "weights", "persistentVolumeClaim": {"claimName": weights_claim, "readOnly": True}},
                    # NCCL and SGLang's workers share memory through /dev/shm, which is 64 MB by default.
                    {"name": "shm", "emptyDir": {"medium": "Memory", "sizeLimit": f"{shm_gi}Gi"}}],
        "tolerations": [{"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}],
        "automountServiceAccountToken": False,
    }
    if gpu_type:
        pod_spec["nodeSelector"] = {GPU_PRODUCT_LABEL: gpu_type}
    deployment = {
        "apiVersion": "apps/v1", "kind": "Deployment",
        "metadata": {"name": name, "namespace": namespace, "labels": dict(labels)},
        "spec": {"replicas": 1, "strategy": {"type": "Recreate"},  # two servers never hold the GPUs at once
                 "selector": {"matchLabels": dict(labels)},
                 "template": {"metadata": {"labels": dict(labels)}, "spec": pod_spec}},
    }
    service = {
        "apiVersion": "v1", "kind": "Service",
        "metadata": {"name": name, "namespace": namespace, "labels": dict(labels)},
        "spec": {"type": "ClusterIP", "selector": dict(labels),
                 "ports": [{"name": PORT_NAME, "port": port, "targetPort": PORT_NAME}]},
    }
    return [deployment, service]


def service_url(name: str, namespace: str, port: int = 30000) -> str:
    """The arm's base_url inside the cluster (the runner pod's view); from outside, `kubectl port-forward`."""
    return f"http://{name}.{namespace}.svc:{port}/v1"
