"""The loopback Ray cluster as the tests drive it: each node's processes, and a node lost at once.

``LocalRayCluster`` (the library's) starts and stops a loopback cluster and lists its processes; what
only tests need, which processes each node runs and killing a node as a
machine losing power would, lives here.
"""

from __future__ import annotations

import signal

from tools.ray_cluster import LocalRayCluster
from tools.ray_cluster._node import _running

__all__ = ["RigCluster"]


class RigCluster(LocalRayCluster):
    """A :class:`LocalRayCluster` that shows its processes and can lose a node."""

    def node_pids(self, index: int) -> list[int]:
        """The process ids recorded for node ``index``."""
        node = self._node(index)
        self._scan(node)
        return sorted(node.seen)

    def alive_pids(self) -> list[int]:
        """The recorded processes still running (the same process: pid and start time)."""
        with self._lock:
            recorded = [(pid, start) for node in self._nodes for pid, start in node.seen.items()]
        return sorted(pid for pid, start in recorded if _running(pid, start))

    def kill_node(self, index: int) -> None:
        """SIGKILL every Ray process of node ``index`` at once: a machine losing
        power, for recovery tests. The launcher then reaps them and exits; the
        node's process group gets SIGKILL for anything left.
        """
        node = self._node(index)
        self._scan(node)
        with self._lock:
            if node.killed or node.stopped:
                return
            node.killed = True
        for pid, start in list(node.seen.items()):
            if pid != node.proc.pid:
                self._signal(pid, start, signal.SIGKILL)
        self._finish(node)
