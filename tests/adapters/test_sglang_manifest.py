"""`leafcost sglang manifest`: a Deployment and Service valid for the pinned Kubernetes release, running exactly the
launch `leafcost sglang command` prints (device timer included), on GPUs of the named type, ready on /health."""

from __future__ import annotations

import json
import shlex
import subprocess
import sys

import kubernetes_validate
import yaml

from adapters.sglang import LAUNCH_ENV
from adapters.sglang_manifest import DEPLOYMENT_LABEL, sglang_manifests
from sandbox.kubernetes.manifests import KUBERNETES_VERSION

IMAGE = "lmsysorg/sglang:v0.5.11-cu129"


def leafcost(*args):
    done = subprocess.run([sys.executable, "-m", "compare.cli", *args], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    return done.stdout


def test_the_printed_manifests_are_valid_and_run_the_printed_launch():
    documents = list(yaml.safe_load_all(leafcost("sglang", "manifest", "--image", IMAGE, "--namespace", "evals",
                                                 "--gpus", "2", "--gpu-type", "NVIDIA-H200")))
    assert [d["kind"] for d in documents] == ["Deployment", "Service"]
    for document in documents:
        kubernetes_validate.validate(document, KUBERNETES_VERSION, strict=True)
    deployment, service = documents
    (container,) = deployment["spec"]["template"]["spec"]["containers"]
    printed = shlex.split(leafcost("sglang", "command", "--tp", "2", "--model-path", "/models/FrogNano-4B-2609"))
    assignments = dict(word.split("=", 1) for word in printed if "=" in word and not word.startswith("-"))
    launch = [word for word in printed if word not in [f"{k}={v}" for k, v in assignments.items()]]
    assert container["command"] == ["python3", *launch[1:]] and launch[0] == "python"
    assert {e["name"]: e["value"] for e in container["env"]} == assignments == LAUNCH_ENV
    assert container["resources"]["limits"] == container["resources"]["requests"] == {"nvidia.com/gpu": "2"}
    assert deployment["spec"]["template"]["spec"]["nodeSelector"] == {"nvidia.com/gpu.product": "NVIDIA-H200"}
    assert service["spec"]["selector"][DEPLOYMENT_LABEL] == "frognano"
    assert deployment["spec"]["template"]["metadata"]["labels"].items() >= service["spec"]["selector"].items()


def test_probes_ask_sglang_health_and_the_weights_are_read_only():
    deployment, _ = sglang_manifests(name="frognano", namespace="evals", image=IMAGE, model_path="/models/fn",
                                     weights_claim="weights")
    spec = deployment["spec"]["template"]["spec"]
    container = spec["containers"][0]
    for probe in ("startupProbe", "readinessProbe", "livenessProbe"):
        assert container[probe]["httpGet"] == {"path": "/health", "port": "http"}
    assert {"name": "weights", "mountPath": "/models", "readOnly": True} in container["volumeMounts"]
    assert spec["volumes"][0] == {"name": "weights", "persistentVolumeClaim": {"claimName": "weights",
                                                                               "readOnly": True}}
    assert "nodeSelector" not in spec and deployment["spec"]["strategy"] == {"type": "Recreate"}


def test_json_output_is_the_same_objects():
    as_yaml = list(yaml.safe_load_all(leafcost("sglang", "manifest", "--image", IMAGE)))
    assert json.loads(leafcost("sglang", "manifest", "--image", IMAGE, "--json")) == as_yaml
