"""The Kubernetes stand-in (tests/support/kube_fake) with instant pods that answer what the kubernetes backend sends
(InstantPods), as its own process for bench/kube_scale.py, so its CPU is in no orchestrator figure. Once serving it
prints one JSON line, {"kubeconfig", "namespace"}; each line `seen` on its stdin is answered with one JSON line of
what it saw (pods stored now, the peaks, counts); it stops at the end of its stdin.

    python bench/kube_standin.py [--start-delay S] [--creation-delay S] [--deletion-delay S]
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(ROOT), str(ROOT / "tests")]  # tests/ holds the stand-in

from support.kube_fake import Faults, KubeFake  # noqa: E402
from support.kube_fake.instant_pod import InstantPods  # noqa: E402


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--start-delay", type=float, default=0.0, help="seconds a pod is Pending before it runs")
    parser.add_argument("--creation-delay", type=float, default=0.0, help="seconds each pod creation takes")
    parser.add_argument("--deletion-delay", type=float, default=0.0, help="seconds each pod deletion takes")
    args = parser.parse_args()
    faults = Faults(start_delay=args.start_delay, creation_delay=args.creation_delay,
                    deletion_delay=args.deletion_delay)
    with KubeFake(mode="instant", exec_handler=InstantPods(), faults=faults) as kube:
        print(json.dumps({"kubeconfig": str(kube.kubeconfig), "namespace": kube.namespace}), flush=True)
        for line in sys.stdin:
            if line.strip() == "seen":
                seen = kube.seen
                print(json.dumps({"live": seen.live, "max_live": seen.max_live, "max_creating": seen.max_creating,
                                  "max_deleting": seen.max_deleting, "created": len(seen.created),
                                  "deleted": len(seen.deleted), "execs": len(seen.execs)}), flush=True)


if __name__ == "__main__":
    main()
