"""Port planning for the loopback Ray cluster: one free block, carved into each node's
pinned ports, so two clusters on one machine never collide. Pure, testable without Ray."""

from __future__ import annotations

import dataclasses
import importlib
import random
import socket
from pathlib import Path

from gliding_actors.errors import InvalidInput, Timeout

__all__ = ["NodePorts", "ray_client_installed"]

#: ports per node besides the worker range (see NodePorts)
_NODE_FIXED_PORTS = 6
#: head-only ports (gcs, ray client server, dashboard, two metrics servers)
_HEAD_EXTRA_PORTS = 5


@dataclasses.dataclass(frozen=True)
class NodePorts:
    """Every TCP port one node listens on, all pinned.

    ``gcs``, ``ray_client_server``, ``dashboard``, ``autoscaler_metrics`` and
    ``dashboard_metrics`` are the head's only (0 on other nodes). Workers (and
    the driver, on the head) each bind one port of ``min_worker..max_worker``.
    ``ray_client_server`` is 0 also when Ray Client (``ray[client]``) is not
    installed: then ``ray start`` runs no client server, and refuses the flag.
    """

    node_manager: int
    object_manager: int
    dashboard_agent_listen: int
    dashboard_agent_grpc: int
    metrics_export: int
    runtime_env_agent: int
    min_worker: int
    max_worker: int
    gcs: int = 0
    ray_client_server: int = 0
    dashboard: int = 0
    autoscaler_metrics: int = 0
    dashboard_metrics: int = 0

    def all(self) -> list[int]:
        """Every port of the node (the worker range expanded)."""
        fixed = [getattr(self, name) for name in _FIELDS if not name.endswith("_worker")]
        return [p for p in fixed if p] + list(range(self.min_worker, self.max_worker + 1))

    def flags(self) -> list[str]:
        """The ``ray start`` flags that pin these ports."""
        # every node's: --node-manager-port=..., ..., --min-worker-port=..., --max-worker-port=...
        every_node = _FIELDS[: _NODE_FIXED_PORTS + 2]
        out = [f"--{name.replace('_', '-')}-port={getattr(self, name)}" for name in every_node]
        if self.gcs:
            out += [f"--port={self.gcs}", f"--dashboard-port={self.dashboard}"]
        if self.ray_client_server:
            out.append(f"--ray-client-server-port={self.ray_client_server}")
        return out

    def env(self) -> dict[str, str]:
        """The two metrics ports Ray has no flag for (head only)."""
        if not self.gcs:
            return {}
        return {
            "AUTOSCALER_METRIC_PORT": str(self.autoscaler_metrics),
            "DASHBOARD_METRIC_PORT": str(self.dashboard_metrics),
        }


#: the port names in declaration order: the node's fixed ones, its worker range, the head's
_FIELDS = tuple(field.name for field in dataclasses.fields(NodePorts))


def _ephemeral_low() -> int:
    try:
        return int(Path("/proc/sys/net/ipv4/ip_local_port_range").read_text().split()[0])
    except (OSError, ValueError, IndexError):
        return 32768


def _port_free(host: str, port: int) -> bool:
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    with socket.socket(family, socket.SOCK_STREAM) as s:
        try:
            s.bind((host, port))
        except OSError:
            return False
    return True


def _free_block(host: str, size: int, rng: random.Random, attempts: int = 200) -> int:
    """The first port of ``size`` consecutive ports free on ``host``.

    Searched below the ephemeral range, where the kernel never hands a port to
    an outgoing connection, so a port found free stays free until Ray binds it
    unless another program binds it on purpose.
    """
    low, high = 10_240, _ephemeral_low() - size
    if high <= low:
        raise InvalidInput(
            f"no room for {size} ports below the ephemeral range ({_ephemeral_low()})"
        )
    for _ in range(attempts):
        base = rng.randrange(low, high)
        if all(_port_free(host, p) for p in range(base, base + size)):
            return base
    raise Timeout(f"found no {size} consecutive free ports on {host} in {attempts} tries")


def ray_client_installed() -> bool:
    """Whether this environment has Ray Client (``ray[client]``), asked as Ray asks.

    Nothing here uses Ray Client (drivers join by the GCS address), but where
    it is installed the head starts its server anyway, on 10001 unless told
    otherwise, so the harness pins that port too; where it is not, Ray refuses
    the port flag.
    """
    utils = importlib.import_module("ray._private.utils")
    return utils.get_ray_client_dependency_error() is None


def _plan_ports(
    base: int, nodes: int, worker_ports: int, *, ray_client: bool = True
) -> list[NodePorts]:
    """Carve the block at ``base`` into each node's ports (head first).

    The head's block always holds a Ray Client port, so the layout does not
    depend on what is installed; without ``ray_client`` it is left unused.
    """
    out: list[NodePorts] = []
    p = base
    for i in range(nodes):
        fixed = {name: p + k for k, name in enumerate(_FIELDS[:_NODE_FIXED_PORTS])}
        p += _NODE_FIXED_PORTS
        head: dict[str, int] = {}
        if i == 0:
            head = {name: p + k for k, name in enumerate(_FIELDS[-_HEAD_EXTRA_PORTS:])}
            if not ray_client:
                head["ray_client_server"] = 0
            p += _HEAD_EXTRA_PORTS
        out.append(NodePorts(**fixed, min_worker=p, max_worker=p + worker_ports - 1, **head))
        p += worker_ports
    return out
