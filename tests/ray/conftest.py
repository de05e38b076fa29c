"""Fixtures of the Ray tests: a real two-node cluster on loopback.

The cluster is a :class:`RigCluster` (``cluster_rig.py``: the library's
:class:`LocalRayCluster`, plus what only tests need: its processes and losing a
node). Each node is a ``ray start`` in its own session, every port pinned, every
address 127.0.0.1, and it is stopped by
the process ids it recorded — never ``ray stop``, which would end every Ray
process on the machine, other people's included. Starting one takes seconds, so
a test module shares one. These tests carry the ``ray`` marker: the default run
leaves them out and CI runs them as their own step (``pytest -m ray tests/ray``).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator

import pytest
from cluster_rig import RigCluster

from gliding_actors.runtime._ray_connect import RayConnection, connect
from tools.ray_cluster import LocalRayCluster


@pytest.fixture(scope="module")
def ray_cluster() -> Iterator[LocalRayCluster]:
    """Two Ray nodes (head + one) for one test module, stopped by pid after it."""
    pytest.importorskip("ray")
    with RigCluster(nodes=2, cpus_per_node=1, timeout_s=120.0) as cluster:
        yield cluster


@pytest.fixture(scope="module")
def ray_driver(ray_cluster: LocalRayCluster) -> Iterator[RayConnection]:
    """This test process connected to ``ray_cluster`` as its Ray driver."""
    conn = connect(ray_cluster.address, host=ray_cluster.host, namespace="tests-ray")
    try:
        yield conn
    finally:
        conn.close()


@pytest.fixture
def eventually() -> Callable[..., None]:
    """``eventually(check, within=20.0)``: poll ``check()`` until it holds; fail
    the test if it has not within ``within`` seconds (Ray delivers asynchronously)."""

    def wait(check: Callable[[], bool], within: float = 20.0) -> None:
        deadline = time.monotonic() + within
        while not check():
            assert time.monotonic() < deadline, "condition never held"
            time.sleep(0.02)

    return wait
