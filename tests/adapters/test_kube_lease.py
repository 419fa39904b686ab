"""`gpu: {from_deployment: NAME}`: an SGLang arm's lease read from the cluster (the official client against the
stand-in API server over a real socket): the Deployment's running pods, their GPUs and their nodes' GPU product,
instead of a GPU type and count typed by hand."""

from __future__ import annotations

import asyncio

import pytest
from kubernetes import client, config
from support.sglang_fake import ScriptedServer

from adapters.base import AdapterError
from adapters.kube_lease import deployment_gpus
from compare.spec import parse_run_spec

NODE = "kube-fake-node"  # where the stand-in's instant kubelet puts every pod


def pod(name: str, gpus: int, deployment: str = "frognano") -> dict:
    return {"apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": name, "labels": {"leafcost/deployment": deployment}},
            "spec": {"containers": [{"name": "sglang", "image": "sglang",
                                     "resources": {"limits": {"nvidia.com/gpu": str(gpus)}}}]}}


def cluster(kube, *, product: str | None = "NVIDIA-H200", pods=(("frognano-a", 2), ("frognano-b", 1))):
    config.load_kube_config(config_file=str(kube.kubeconfig))
    core = client.CoreV1Api()
    labels = {"nvidia.com/gpu.product": product} if product else {}
    core.create_node({"apiVersion": "v1", "kind": "Node", "metadata": {"name": NODE, "labels": labels}})
    for name, gpus in pods:
        core.create_namespaced_pod(kube.namespace, pod(name, gpus))
    core.create_namespaced_pod(kube.namespace, pod("someone-else", 8, deployment="other"))


def arm(kube, **gpu):
    return parse_run_spec({"name": "k", "suite": "builtin", "arms": [
        {"name": "frognano", "adapter": "sglang", "model": "frognano-4b", "max_retries": 0,
         "gpu": {"from_deployment": "frognano", "namespace": kube.namespace, "kubeconfig": str(kube.kubeconfig),
                 "usd_per_hour": 3.5, **gpu}}]}).arms[0]


def test_the_lease_is_what_the_deployment_holds(kube_instant):
    cluster(kube_instant)
    held = deployment_gpus("frognano", kube_instant.namespace, kubeconfig=str(kube_instant.kubeconfig))
    assert (held.hardware, held.count) == ("NVIDIA-H200", 3)  # the other deployment's 8 GPUs are not ours
    assert sorted(p.name for p in held.pods) == ["frognano-a", "frognano-b"]
    assert all(p.node == NODE and p.started_at is not None for p in held.pods)


def test_an_arm_from_a_deployment_starts_with_that_lease_and_records_where_it_came_from(kube_instant):
    cluster(kube_instant)

    async def start(adapter):
        try:
            return await adapter.start()
        finally:
            await adapter.stop()

    with ScriptedServer({"turns": [{"content": "hi"}]}) as server:
        spec = arm(kube_instant).model_copy(update={"base_url": server.base_url})
        started = asyncio.run(start(spec.build_adapter()))
    assert (started.lease.hardware, started.lease.count, started.lease.usd_per_hour) == ("NVIDIA-H200", 3, 3.5)
    assert started.config["gpu_from_deployment"]["deployment"] == "frognano"


def test_without_a_base_url_the_arm_talks_to_the_deployments_service(kube_instant):
    assert arm(kube_instant).base_url == f"http://frognano.{kube_instant.namespace}.svc:30000/v1"


@pytest.mark.parametrize("setup, message", [
    ({"pods": ()}, "has no running pod"),
    ({"product": None}, "has no nvidia.com/gpu.product label"),
    ({"pods": (("frognano-a", 0),)}, "are given no nvidia.com/gpu"),
])
def test_what_the_cluster_lacks_is_named(kube_instant, setup, message):
    cluster(kube_instant, **setup)
    with pytest.raises(AdapterError, match=message) as caught:
        deployment_gpus("frognano", kube_instant.namespace, kubeconfig=str(kube_instant.kubeconfig))
    assert caught.value.kind == "configuration"


@pytest.mark.parametrize("gpu, message", [
    ({"type": "H200"}, "type and count come from the cluster"),
    ({"count": 2}, "type and count come from the cluster"),
])
def test_a_typed_gpu_and_a_deployment_do_not_mix(kube_instant, gpu, message):
    with pytest.raises(Exception, match=message):
        arm(kube_instant, **gpu)


def test_a_typed_lease_still_needs_its_type_and_an_endpoint():
    with pytest.raises(Exception, match="give the GPU type"):
        parse_run_spec({"name": "k", "suite": "builtin", "arms": [
            {"name": "f", "adapter": "sglang", "model": "m", "base_url": "http://h/v1", "gpu": {"usd_per_hour": 1}}]})
    with pytest.raises(Exception, match="base_url"):
        parse_run_spec({"name": "k", "suite": "builtin", "arms": [
            {"name": "f", "adapter": "sglang", "model": "m", "gpu": {"type": "H200", "usd_per_hour": 1}}]})
    typed = parse_run_spec({"name": "k", "suite": "builtin", "arms": [
        {"name": "f", "adapter": "sglang", "model": "m", "base_url": "http://h/v1",
         "gpu": {"type": "H200", "usd_per_hour": 1}}]}).arms[0]
    assert typed.gpu.count == 1
