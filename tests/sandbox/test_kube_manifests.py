"""Every manifest the Kubernetes backend renders is valid for the pinned Kubernetes release (strict: no field the
API server would drop), and says what the backend promises: requests = limits, no service-account token, no
restarts, a deadline, labels a selector can find, the network cut where the task has none."""

from __future__ import annotations

import kubernetes_validate
import pytest

from sandbox.kubernetes.manifests import (CONTAINER, DENY_POLICY, KUBERNETES_VERSION, NETWORK_LABEL, OUTSIDE_POLICY,
                                          SPEC_HASH_ANNOTATION, attempt_pod, deny_network_policy, label_key,
                                          label_value, outside_only_policy, runner_rbac)
from sandbox.tasks import EnvironmentConfig

LABELS = {"leafcost.run": "demo-20261204-0455-ab12", "leafcost.arm": "frognano", "leafcost.task": "cron-next-run",
          "leafcost.seed": "0", "leafcost.attempt": "1"}


def pod(**changes):
    arguments = dict(name="leafcost-0123456789abcdef", namespace="evals",
                     image="registry.example/task@sha256:" + "a" * 64,
                     environment=EnvironmentConfig(cpus=1.5, memory_mb=512, storage_mb=2048, allow_internet=False,
                                                   env={"LANG": "C.UTF-8"}),
                     workdir="/app", labels=LABELS, spec_hash="f" * 64, deadline_sec=1800.2)
    return attempt_pod(**{**arguments, **changes})


def valid(manifest):
    kubernetes_validate.validate(manifest, KUBERNETES_VERSION, strict=True)
    return manifest


def test_an_attempt_pod_is_valid_and_guaranteed():
    manifest = valid(pod())
    spec = manifest["spec"]
    (container,) = spec["containers"]
    assert container["name"] == CONTAINER and container["image"].endswith("@sha256:" + "a" * 64)
    assert container["resources"]["requests"] == container["resources"]["limits"] == {
        "cpu": "1500m", "memory": "512Mi", "ephemeral-storage": "2048Mi"}
    assert (spec["restartPolicy"], spec["automountServiceAccountToken"], spec["enableServiceLinks"]) == (
        "Never", False, False)
    assert spec["activeDeadlineSeconds"] == 1801  # rounded up: the kubelet never kills an attempt inside its budget
    assert container["args"] == ["sh", "-c", "sleep infinity"] and "command" not in container  # ENTRYPOINT kept
    assert container["env"] == [{"name": "LANG", "value": "C.UTF-8"}]


def test_labels_find_the_attempt_and_the_spec_hash_rides_along():
    metadata = valid(pod())["metadata"]
    assert {k: v for k, v in metadata["labels"].items() if k != NETWORK_LABEL and k != "leafcost"} == {
        "leafcost/run": "demo-20261204-0455-ab12", "leafcost/arm": "frognano", "leafcost/task": "cron-next-run",
        "leafcost/seed": "0", "leafcost/attempt": "1"}
    assert metadata["annotations"] == {SPEC_HASH_ANNOTATION: "f" * 64}


def test_a_value_no_label_may_hold_goes_by_its_hash_and_is_kept_in_an_annotation():
    long_task = "astropy__astropy-" + "x" * 80  # longer than 63
    metadata = valid(pod(labels={**LABELS, "leafcost.task": long_task, "leafcost.arm": "a/b"}))["metadata"]
    assert metadata["labels"]["leafcost/task"] == label_value(long_task) != long_task
    assert len(metadata["labels"]["leafcost/task"]) <= 63 and metadata["labels"]["leafcost/arm"].startswith("h-")
    assert metadata["annotations"]["leafcost/task"] == long_task and metadata["annotations"]["leafcost/arm"] == "a/b"
    assert label_value(long_task) != label_value(long_task + "y")  # distinct values stay distinct


@pytest.mark.parametrize("value, kept", [("frognano", True), ("a.b_c-d", True), ("-x", False), ("x-", False),
                                         ("", True), ("x" * 63, True), ("x" * 64, False), ("é", False)])
def test_label_values_follow_the_api_servers_rule(value, kept):
    assert (label_value(value) == value) is kept
    valid(pod(labels={"leafcost.task": value}))


def test_no_network_is_a_label_the_deny_all_policy_selects():
    offline, online = pod(), pod(environment=EnvironmentConfig(allow_internet=True))
    policy = valid(deny_network_policy("evals"))
    selector = policy["spec"]["podSelector"]["matchLabels"]
    assert selector.items() <= offline["metadata"]["labels"].items()
    assert not selector.items() <= online["metadata"]["labels"].items()
    assert policy["spec"]["egress"] == policy["spec"]["ingress"] == [] and policy["metadata"]["name"] == DENY_POLICY
    assert set(policy["spec"]["policyTypes"]) == {"Ingress", "Egress"}


def test_a_swebench_verifier_pod_reaches_the_outside_but_no_private_or_cluster_address():
    """SWE-bench grades with network: its verifier pod (network "outside", though its task has none) is not under
    the deny-all policy but under one that lets it out to any address except the private, link-local and loopback
    ranges (the cluster's pods, services and nodes, the metadata server), with DNS to kube-dns only."""
    verifier, agent = pod(network="outside"), pod()
    deny, outside = valid(deny_network_policy("evals")), valid(outside_only_policy("evals"))
    labels = valid(verifier)["metadata"]["labels"]
    assert not deny["spec"]["podSelector"]["matchLabels"].items() <= labels.items()
    assert outside["spec"]["podSelector"]["matchLabels"].items() <= labels.items()
    assert not outside["spec"]["podSelector"]["matchLabels"].items() <= agent["metadata"]["labels"].items()
    assert outside["metadata"] == {"name": OUTSIDE_POLICY, "namespace": "evals", "labels": {"leafcost": "1"}}
    assert set(outside["spec"]["policyTypes"]) == {"Ingress", "Egress"} and outside["spec"]["ingress"] == []
    everywhere, dns = outside["spec"]["egress"]
    blocks = {b["ipBlock"]["cidr"]: set(b["ipBlock"]["except"]) for b in everywhere["to"]}
    assert blocks["0.0.0.0/0"] >= {"10.0.0.0/8", "172.16.0.0/12", "192.168.0.0/16", "169.254.0.0/16", "127.0.0.0/8"}
    assert blocks["::/0"] >= {"fc00::/7", "fe80::/10", "::1/128"} and "ports" not in everywhere
    (resolver,) = dns["to"]
    assert resolver["podSelector"] == {"matchLabels": {"k8s-app": "kube-dns"}} and "ipBlock" not in resolver
    assert {p["port"] for p in dns["ports"]} == {53}
    assert pod(network="outside", environment=EnvironmentConfig(allow_internet=True))["metadata"]["labels"][
        NETWORK_LABEL] == "outside"


def test_non_root_where_the_task_allows_it_and_never_privilege_escalation():
    as_root = valid(pod())["spec"]["containers"][0]["securityContext"]
    as_user = valid(pod(run_as=1000))["spec"]["containers"][0]["securityContext"]
    assert as_root["allowPrivilegeEscalation"] is False and "runAsUser" not in as_root
    assert as_user | {} == {**as_root, "runAsUser": 1000, "runAsNonRoot": True, "capabilities": {"drop": ["ALL"]}}
    # Where the harness writes, the non-root pod has empty directories of its own; the root pod has none.
    user_spec, root_spec = valid(pod(run_as=1000))["spec"], valid(pod())["spec"]
    mounts = {m["mountPath"] for m in user_spec["containers"][0]["volumeMounts"]}
    assert mounts == {"/logs", "/tests", "/solution", "/.leafcost"}
    assert all(v["emptyDir"] == {} for v in user_spec["volumes"]) and len(user_spec["volumes"]) == 4
    assert "volumes" not in root_spec and "volumeMounts" not in root_spec["containers"][0]


def test_a_gpu_task_asks_for_its_gpus_on_a_node_of_its_type():
    spec = valid(pod(environment=EnvironmentConfig(gpus=2, gpu_types=["NVIDIA-H200"])))["spec"]
    assert spec["containers"][0]["resources"]["limits"]["nvidia.com/gpu"] == "2"
    assert spec["nodeSelector"] == {"nvidia.com/gpu.product": "NVIDIA-H200"}


def test_the_runner_rbac_is_the_minimum_in_one_namespace():
    objects = [valid(o) for o in runner_rbac("evals")]
    assert [o["kind"] for o in objects] == ["ServiceAccount", "Role", "RoleBinding"]
    assert {o["metadata"]["namespace"] for o in objects} == {"evals"}  # a Role, never a ClusterRole
    rules = {(tuple(r["apiGroups"]), r["resources"][0]): set(r["verbs"]) for r in objects[1]["rules"]}
    assert rules == {(("",), "pods"): {"create", "get", "list", "watch", "delete", "deletecollection"},
                     (("",), "pods/exec"): {"create", "get"}, (("",), "pods/log"): {"get"},
                     (("networking.k8s.io",), "networkpolicies"): {"create", "get", "list"}}
    assert all("*" not in verbs for verbs in rules.values())


def test_the_validator_refuses_what_the_api_server_would_drop():
    broken = pod()
    broken["spec"]["containers"][0]["runAsUser"] = 0  # belongs in securityContext
    with pytest.raises(kubernetes_validate.ValidationError):
        valid(broken)


def test_label_keys_carry_the_prefix():
    assert label_key("leafcost.run") == "leafcost/run" and label_key("other") == "other"


def test_leafcost_kubernetes_rbac_prints_what_an_administrator_applies():
    import subprocess
    import sys

    import yaml

    done = subprocess.run([sys.executable, "-m", "compare.cli", "kubernetes", "rbac", "--namespace", "evals"],
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    printed = [valid(d) for d in yaml.safe_load_all(done.stdout)]
    assert printed == [*runner_rbac("evals"), deny_network_policy("evals"), outside_only_policy("evals")]
