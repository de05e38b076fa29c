"""A real multi-node Ray cluster on loopback, started and stopped by process id.

The Ray tests, ``bench scaling`` and ``replay --runtime ray`` without an
address need Ray nodes on this machine that talk only over addresses we chose. Four things in Ray 2.60 stand in the way, and this module
is the answer to each:

* **Ray rewrites 127.0.0.1.** On Linux ``ray start --node-ip-address=127.0.0.1``
  and ``ray.init(address="127.0.0.1:PORT")`` both pass the address through
  ``ray._private.services.resolve_ip_for_localhost``, which swaps a loopback
  address for the machine's external one (deliberately: a loopback address is
  useless to a *remote* node). Everything downstream then binds or connects
  there, and the gRPC servers of the GCS, raylet and dashboard agent listen on
  *every* interface, because they bind to 127.0.0.1 only when the node IP is
  exactly 127.0.0.1. So each node runs Ray's own ``ray start`` command
  (``ray.scripts.scripts.main``) in a Python process that first makes that one
  function the identity (:data:`NODE_LAUNCHER`), and the driver does the same
  (:func:`pin_loopback`). With that, every listener of both nodes and the
  driver is on 127.0.0.1 (``ss`` shows it; ``tests/ray/test_cluster.py`` checks with
  ``tests/ray/loopback_audit.py``).
* **Ray looks outside by itself.** Its processes learn their own address by
  routing a UDP socket to 8.8.8.8, and the dashboard asks the cloud metadata
  service (169.254.169.254, after a DNS query) which cloud it is on, even with
  usage stats off. Ray's own ``RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER=0`` ends the
  first, a dead loopback HTTP proxy the second (:data:`~._ray_node.NO_OUTSIDE_HTTP_ENV`).
  What remains is a raylet's check that a worker port is free, a bind to
  0.0.0.0 closed at once without listening (hard-wired, no flag).
* **Ray picks ports.** Every port ``ray start`` accepts is pinned, from one
  block of free ports below the kernel's ephemeral range (so an outgoing
  connection cannot take one between our check and Ray's bind); the two fixed
  metrics ports Ray has no flag for (autoscaler 44217, dashboard 44227) are
  pinned by their environment variables, so two clusters never collide.
* **``ray stop`` ends every Ray process on the machine**, including other
  people's. Each node is started with ``start_new_session=True``; every process
  in that session or below the node's process in the /proc tree is recorded
  with its start time (so a recycled pid is never mistaken for ours), and only
  those are signalled: children before parents, then SIGKILL for what is left.
  The process we start is a child subreaper that reaps every orphan of its
  node, so a stopped cluster leaves not even a zombie.

The harness is for tests and ``bench scaling``; ``RayRuntime`` connects to the
:attr:`LocalRayCluster.address` it exposes. Ray is imported lazily: without it
:func:`import_ray` says exactly what to install. Split by job (:mod:`._ray_node`,
:mod:`._ray_ports`, :mod:`._ray_harness`); imported from here, where the driver side is.
"""

from __future__ import annotations

import importlib
import os
import threading
from typing import Any, Self

from gliding_actors.errors import InvalidInput, show
from gliding_actors.runtime._ray_harness import LocalRayCluster
from gliding_actors.runtime._ray_node import INSTALL_HINT, NODE_LAUNCHER, import_ray
from gliding_actors.runtime._ray_ports import NodePorts, ray_client_installed

__all__ = [
    "INSTALL_HINT",
    "NODE_LAUNCHER",
    "LocalRayCluster",
    "NodePorts",
    "RayConnection",
    "connect",
    "import_ray",
    "pin_loopback",
    "ray_client_installed",
    "unpin_loopback",
]


# --------------------------------------------------------------------------- driver

_pin_lock = threading.Lock()
_pin_depth = 0
_pin_saved: tuple[Any, Any] | None = None


def _ray_internals() -> tuple[Any, Any]:
    """Ray's ``services`` and ``ray_constants`` modules (typed Any: private API)."""
    return importlib.import_module("ray._private.services"), importlib.import_module(
        "ray._private.ray_constants"
    )


def pin_loopback() -> None:
    """Make this process's Ray keep a loopback address it is given.

    ``ray.init(address="127.0.0.1:P", _node_ip_address="127.0.0.1")`` otherwise
    rewrites both to the machine's external address and waits for a GCS there
    that is not listening (it hangs for minutes), and finds "its own" address by
    routing a UDP socket to 8.8.8.8. Pinned, ``resolve_ip_for_localhost`` keeps
    what it is given and Ray's own switch ``ENABLE_RAY_CLUSTER`` (the
    ``RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER`` variable) is off, so Ray takes
    127.0.0.1 for this process's address. Counted: each call needs one
    :func:`unpin_loopback`.
    """
    global _pin_depth, _pin_saved
    import_ray()
    services, constants = _ray_internals()
    with _pin_lock:
        if _pin_depth == 0:
            _pin_saved = (services.resolve_ip_for_localhost, constants.ENABLE_RAY_CLUSTER)
            services.resolve_ip_for_localhost = _keep_host
            constants.ENABLE_RAY_CLUSTER = False
        _pin_depth += 1


def unpin_loopback() -> None:
    """Undo one :func:`pin_loopback` (Ray's own behaviour comes back after the last)."""
    global _pin_depth, _pin_saved
    with _pin_lock:
        if _pin_depth == 0:
            return
        _pin_depth -= 1
        if _pin_depth == 0 and _pin_saved is not None:
            services, constants = _ray_internals()
            services.resolve_ip_for_localhost, constants.ENABLE_RAY_CLUSTER = _pin_saved
            _pin_saved = None


def _keep_host(host: str) -> str:
    if not host:
        raise ValueError(f"Malformed host: {host!r}")
    return host


class RayConnection:
    """This process connected to a cluster as a Ray driver (see :func:`connect`).

    :meth:`close` (or leaving the ``with`` block) calls ``ray.shutdown()`` and
    undoes the loopback pin.
    """

    def __init__(self, ray: Any, address: str, namespace: str, env_keys: list[str]) -> None:
        self.ray = ray
        self.address = address
        self.namespace = namespace
        self._env_keys = env_keys
        self._closed = False

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *_exc: object) -> None:
        self.close()

    def close(self) -> None:
        """Disconnect (idempotent)."""
        if self._closed:
            return
        self._closed = True
        try:
            self.ray.shutdown()
        finally:
            for key in self._env_keys:
                os.environ.pop(key, None)
            unpin_loopback()


def connect(
    cluster: LocalRayCluster | str,
    *,
    namespace: str = "gliding",
    host: str = "127.0.0.1",
    **init_options: Any,
) -> RayConnection:
    """Connect this process to ``cluster`` (or a ``host:port`` address) as a driver.

    The driver's own address is pinned to ``host`` (the cluster's host when a
    :class:`LocalRayCluster` is given), no dashboard, no worker logs streamed to
    this process; ``init_options`` are passed on to ``ray.init``. Refuses when
    this process is already a Ray driver (one connection per process).
    """
    ray = import_ray()
    if isinstance(cluster, LocalRayCluster):
        address, host = cluster.address, cluster.host
    elif isinstance(cluster, str) and cluster:
        address = cluster
    else:
        raise InvalidInput(f"connect takes a LocalRayCluster or an address, not {show(cluster)}")
    if ray.is_initialized():
        raise InvalidInput("this process is already connected to Ray: close that connection first")
    env = {"RAY_AUTH_MODE": "disabled", "RAY_USAGE_STATS_ENABLED": "0"}
    added = [key for key in env if key not in os.environ]
    pin_loopback()
    try:
        for key in added:
            os.environ[key] = env[key]
        options: dict[str, Any] = {
            "address": address,
            "_node_ip_address": host,
            "namespace": namespace,
            "include_dashboard": False,
            "log_to_driver": False,
            "configure_logging": False,
        }
        options.update(init_options)
        ray.init(**options)
    except BaseException:
        for key in added:
            os.environ.pop(key, None)
        unpin_loopback()
        raise
    return RayConnection(ray, address, namespace, added)
