"""A real multi-node Ray cluster on loopback, started and stopped by process id.

A test rig: the Ray tests and ``bench scaling`` need several Ray nodes on this
machine that talk only over addresses we chose (the package itself joins a
cluster by address, or has Ray start a one-node local one:
``gliding_actors.runtime._ray_connect``). Four things in Ray 2.60 stand in the
way, and this package is the answer to each:

* **Ray rewrites 127.0.0.1.** On Linux ``ray start --node-ip-address=127.0.0.1``
  passes the address through ``ray._private.services.resolve_ip_for_localhost``,
  which swaps a loopback address for the machine's external one; everything
  downstream then binds or connects there, and the gRPC servers of the GCS,
  raylet and dashboard agent listen on *every* interface, because they bind to
  127.0.0.1 only when the node IP is exactly 127.0.0.1. So each node runs Ray's
  own ``ray start`` command (``ray.scripts.scripts.main``) in a Python process
  that first makes that one function the identity (:data:`NODE_LAUNCHER`); the
  driver pins it too when it connects (``_ray_connect.pin_loopback``). With
  that, every listener of every node and the driver is on 127.0.0.1 (``ss``
  shows it; ``tests/ray/test_cluster.py`` checks with ``tests/ray/loopback_audit.py``).
* **Ray looks outside by itself.** Its processes learn their own address by
  routing a UDP socket to 8.8.8.8, and the dashboard asks the cloud metadata
  service which cloud it is on, even with usage stats off. Ray's own
  ``RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER=0`` ends the first, a dead loopback HTTP
  proxy the second (``_ray_connect.NO_OUTSIDE_HTTP_ENV``). What remains is a
  raylet's check that a worker port is free, a bind to 0.0.0.0 closed at once
  without listening (hard-wired, no flag).
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

Join a cluster with ``connect(cluster.address, host=cluster.host)`` or
``RayRuntime(cluster.address)``. Split by job: :mod:`._node` (the node's
program and /proc reads), :mod:`._ports`, :mod:`._harness` (:class:`LocalRayCluster`).
"""

from __future__ import annotations

from tools.ray_cluster._harness import LocalRayCluster
from tools.ray_cluster._node import NODE_LAUNCHER
from tools.ray_cluster._ports import NodePorts, ray_client_installed

__all__ = ["NODE_LAUNCHER", "LocalRayCluster", "NodePorts", "ray_client_installed"]
