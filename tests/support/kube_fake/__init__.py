"""A stand-in Kubernetes API server and kubelet that the official client talks to over a real socket, for the
`kubernetes` sandbox backend's tests: kmock's in-memory API server with its gaps filled (selectors, watch
timeouts and resumption, deletecollection, pod status), `pods/exec` over the websocket channel protocol, and
pods that are either instant (Running at once, exec answered by a script) or real containers of the container
backend's engine.

    with KubeFake(mode="instant") as kube:          # or mode="container"
        config.load_kube_config(config_file=str(kube.kubeconfig))
        ...; kube.seen.max_creating; kube.fail_image("*broken*"); kube.evict("pod-1")

Fixtures for any test module: `from support.kube_fake.fixtures import kube_instant, kube_containers`.

`launcher` runs it, `fixtures` wraps it for pytest, `apiserver` serves the objects, `kubelets` gives pods their
life, `exec_ws` speaks exec, `containers` turns a pod into engine flags, `status` writes pod statuses,
`selectors` parses selectors, `hub` fans out watch events, `recording` keeps what was seen.
"""

from support.kube_fake.exec_ws import ExecCall, ExecHandler, exit_status, scripted_exec
from support.kube_fake.kubelets import Faults
from support.kube_fake.launcher import KubeFake
from support.kube_fake.recording import Seen

__all__ = ["ExecCall", "ExecHandler", "Faults", "KubeFake", "Seen", "exit_status", "scripted_exec"]
