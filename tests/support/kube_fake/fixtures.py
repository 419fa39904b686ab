"""pytest fixtures for any test module: `from support.kube_fake.fixtures import kube_instant, kube_containers`
(importing a fixture into a module makes it available there). Each yields a running `KubeFake` in namespace
`leafcost-test`, stopped after the test; `kube_containers` needs the Debian test images (so it is slow)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from support.kube_fake.launcher import KubeFake

__all__ = ["kube_containers", "kube_instant"]


@pytest.fixture
def kube_instant() -> Iterator[KubeFake]:
    with KubeFake(mode="instant") as kube:
        yield kube


@pytest.fixture
def kube_containers(container_images) -> Iterator[KubeFake]:
    with KubeFake(mode="container") as kube:
        yield kube
