"""The one registry of sandbox backends (sandbox/backends.py): every name it lists opens a real sandbox through it,
the run spec refuses any other name in one line, the list of names is written nowhere else, and importing the
registry loads no container engine's or cluster's code."""

from __future__ import annotations

import ast
import asyncio
import json
import subprocess
import sys
from pathlib import Path

import pytest

from compare.spec import SandboxConfig, SpecError, parse_run_spec
from sandbox import (BACKENDS, SandboxOptions, backend_for, close_backend, open_sandbox, remove_leftovers,
                     require_backend)
from sandbox.backends import BACKEND_MODULES

ROOT = Path(__file__).parents[2]
SOURCE_DIRS = ("sandbox", "compare", "adapters", "reports", "tests", "bench")
UNKNOWN = "unknown backend 'vllm': choose one of local, podman, docker, kubernetes"
# Modules only a container engine or a cluster needs (the kubernetes client; ours, by name prefix, as they are named
# now and once each backend is a folder: sandbox.container.*, sandbox.kubernetes.*).
ENGINE_OR_CLUSTER = ("kubernetes", *(f"sandbox.{name}" for name in ("container", "kube", "engine", "images",
                                                                      "build_network", "watchdog", "backend_")))


def test_every_registered_name_loads_a_backend_that_answers_to_it():
    assert BACKENDS == tuple(BACKEND_MODULES) and len(set(BACKENDS)) == len(BACKENDS)
    for name in BACKENDS:
        backend = backend_for(name)
        assert name in backend.names
        assert set(backend.names) <= set(BACKENDS), backend.names  # a name a backend claims is registered to it
        for other in backend.names:
            assert backend_for(other) is backend
    assert backend_for("podman") is backend_for("docker")  # one backend, two engines


def test_the_local_backend_opens_a_real_bubblewrap_sandbox_through_the_registry(make_task, sandbox_options):
    spec, output = one_command(make_task(), sandbox_options)
    assert (spec.backend, spec.isolation) == ("local", "bwrap")
    assert output == "42\n"


def test_podman_opens_the_tasks_image_through_the_registry(make_task, sandbox_options, container_images):
    options = sandbox_options.model_copy(update={"backend": "podman"})
    spec, output = one_command(make_task(), options)
    assert (spec.backend, spec.isolation) == ("podman", "podman") and spec.image.startswith("sha256:")
    assert output == "42\n"


def test_kubernetes_opens_a_pod_through_the_registry(make_task, sandbox_options, kube_containers, tmp_path):
    from sandbox.container.engine import require_engine
    from sandbox.container.images import lock_images

    task = make_task()
    lock = tmp_path / "images.lock.json"
    asyncio.run(lock_images(require_engine("podman"), [task], lock))
    options = SandboxOptions(backend="kubernetes", kubeconfig=kube_containers.kubeconfig,
                             kube_namespace=kube_containers.namespace, images_lock=lock,
                             cache_dir=sandbox_options.cache_dir)
    spec, output = one_command(task, options)
    assert (spec.backend, spec.isolation) == ("kubernetes", "kubernetes")
    assert output == "42\n"
    assert len(kube_containers.seen.created) == 1


def test_the_spec_refuses_an_unknown_backend_in_one_line():
    raw = {"name": "x", "suite": "builtin", "sandbox": {"backend": "vllm"},
           "arms": [{"name": "o", "adapter": "oracle"}]}
    with pytest.raises(SpecError) as refused:
        parse_run_spec(raw)
    assert str(refused.value) == f"spec: sandbox.backend: {UNKNOWN}"
    with pytest.raises(ValueError, match=UNKNOWN):
        backend_for("vllm")
    with pytest.raises(ValueError, match=UNKNOWN):
        SandboxOptions(backend="vllm")


def test_the_schemas_still_list_every_backend():
    for model in (SandboxConfig, SandboxOptions):
        assert model.model_json_schema()["properties"]["backend"]["enum"] == list(BACKENDS)


def test_the_list_of_backends_is_written_only_in_the_registry():
    """Any tuple, list, set or Literal of string constants naming every backend, outside sandbox/backends.py."""
    registry = ROOT / "sandbox" / "backends.py"
    found = []
    for directory in SOURCE_DIRS:
        for path in sorted((ROOT / directory).rglob("*.py")):
            if path == registry:
                continue
            for node in ast.walk(ast.parse(path.read_text(), str(path))):
                if isinstance(node, (ast.Tuple, ast.List, ast.Set)) and set(BACKENDS) <= _strings(node.elts):
                    found.append(f"{path.relative_to(ROOT)}:{node.lineno}")
    assert found == []


def test_importing_the_registry_loads_no_engine_or_cluster_code():
    code = ("import json, sys; import sandbox.backends; print(json.dumps(sorted(name for name in sys.modules "
            f"if name.startswith({ENGINE_OR_CLUSTER!r}))))")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT, timeout=120)
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout) == []


def one_command(task, options: SandboxOptions):
    """Everything a run asks of a backend, through the registry only: (the sandbox's spec, a command's stdout)."""
    require_backend(options)
    assert isinstance(remove_leftovers(options, "registry-test"), list)  # synchronous: a run calls it in a thread

    async def attempt():
        try:
            opened = await open_sandbox(task, options, labels={"leafcost.run": "registry-test"})
            try:
                result = await opened.sandbox.exec("echo $((6 * 7))", timeout=60)
                assert result.ok, result.stderr
                return opened.spec, result.stdout
            finally:
                await opened.close()
        finally:
            await close_backend(options)

    return asyncio.run(attempt())


def _strings(nodes: list[ast.expr]) -> set[str]:
    return {node.value for node in nodes if isinstance(node, ast.Constant) and isinstance(node.value, str)}
