"""The :class:`LocalRayCluster` object: it starts the nodes, waits until Ray lists them
alive, and stops exactly the processes it owns. Overview: :mod:`tools.ray_cluster`."""

from __future__ import annotations

import atexit
import contextlib
import dataclasses
import ipaddress
import os
import random
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Self

from gliding_actors.clock import Clock, SystemClock
from gliding_actors.errors import ActorUnavailable, InvalidInput, Timeout, show
from gliding_actors.runtime._ray_connect import NO_OUTSIDE_HTTP_ENV, import_ray
from tools.ray_cluster._node import NODE_HEALTH_ENV, NODE_LAUNCHER, _all_pids, _proc_stat, _running
from tools.ray_cluster._ports import (
    _HEAD_EXTRA_PORTS,
    _NODE_FIXED_PORTS,
    NodePorts,
    _free_block,
    _plan_ports,
    ray_client_installed,
)

__all__ = ["LocalRayCluster"]

#: longest AF_UNIX socket path (sun_path is 108 bytes with the NUL)
_UNIX_PATH_MAX = 107
#: what Ray appends below a node's --temp-dir for its longest socket path:
#: /session_2026-11-30_22-04-13_558166_4194304/sockets/plasma_store (+ slack)
_RAY_SOCKET_SUFFIX = 72
#: Ray refuses an object store under 75 MiB
_MIN_OBJECT_STORE_MB = 75
#: how often waits poll (seconds)
_POLL_S = 0.1


def _int_at_least(value: object, low: int) -> bool:
    """Whether ``value`` is an int (a bool is not one) of at least ``low``."""
    return isinstance(value, int) and not isinstance(value, bool) and value >= low


@dataclasses.dataclass
class _Node:
    index: int
    ports: NodePorts
    temp_dir: Path
    log: Path
    proc: subprocess.Popen[bytes]
    #: pid -> start time (clock ticks since boot) of every process seen in the node
    seen: dict[int, int] = dataclasses.field(default_factory=dict)
    #: pid -> parent pid when last seen (children are stopped before parents)
    parent: dict[int, int] = dataclasses.field(default_factory=dict)
    node_id: str = ""
    killed: bool = False
    stopped: bool = False


class LocalRayCluster:
    """``nodes`` Ray nodes on this machine, all on ``host``, owned by pid.

    Use as a context manager (or :meth:`start` / :meth:`stop`)::

        with LocalRayCluster(nodes=2) as cluster:
            with connect(cluster.address, host=cluster.host, namespace="test"):
                ...  # ray.remote actors, pinned with NodeAffinitySchedulingStrategy

    ``temp_dir`` is where the private directory is made (default ``/tmp``:
    AF_UNIX socket paths must stay under 107 bytes); ``timeout_s`` bounds the
    start; ``worker_ports_per_node`` is how many worker processes a node may run
    at once (each Ray actor is one). ``env`` adds to every node's environment,
    e.g. ``{"RAY_health_check_period_ms": "500"}`` to notice a dead node sooner.
    ``ray_start_args`` are added to every node's ``ray start`` command, after
    the harness's own flags (e.g. ``["--resources={\"gpu_like\": 1}"]``).
    ``clock`` times the waits (injected; the system clock by default).

    A node that exits while starting raises :class:`ActorUnavailable` with the
    end of its ``ray start`` output, Ray's traceback included.
    """

    def __init__(
        self,
        nodes: int = 2,
        *,
        host: str = "127.0.0.1",
        temp_dir: str | os.PathLike[str] | None = None,
        cpus_per_node: int = 1,
        object_store_mb: int = 80,
        timeout_s: float = 60.0,
        worker_ports_per_node: int = 64,
        stop_grace_s: float = 5.0,
        env: dict[str, str] | None = None,
        clock: Clock | None = None,
        seed: int | None = None,
        ray_start_args: Sequence[str] = (),
    ) -> None:
        if not _int_at_least(nodes, 1):
            raise InvalidInput(f"nodes must be an int >= 1, not {show(nodes)}", path=("nodes",))
        try:
            ipaddress.ip_address(host)
        except ValueError:
            raise InvalidInput(
                f"host must be an IP address literal, not {show(host)}", path=("host",)
            ) from None
        if not _int_at_least(cpus_per_node, 0):
            raise InvalidInput(
                f"cpus_per_node must be an int >= 0, not {show(cpus_per_node)}", path=("cpus_per_node",)
            )
        if not _int_at_least(object_store_mb, _MIN_OBJECT_STORE_MB):
            raise InvalidInput(
                f"object_store_mb must be an int >= {_MIN_OBJECT_STORE_MB} (Ray's minimum), not {show(object_store_mb)}",
                path=("object_store_mb",),
            )
        if not timeout_s > 0 or not stop_grace_s >= 0:
            raise InvalidInput("timeout_s must be > 0 and stop_grace_s >= 0", path=("timeout_s",))
        if not _int_at_least(worker_ports_per_node, 4):
            raise InvalidInput(
                "worker_ports_per_node must be an int >= 4", path=("worker_ports_per_node",)
            )
        if isinstance(ray_start_args, str) or not all(
            isinstance(arg, str) for arg in ray_start_args
        ):
            raise InvalidInput(
                f"ray_start_args must be a sequence of strings, not {show(ray_start_args)}",
                path=("ray_start_args",),
            )
        parent = Path(temp_dir) if temp_dir is not None else Path("/tmp")
        if not parent.is_dir():
            raise InvalidInput(f"temp_dir {str(parent)!r} is not a directory", path=("temp_dir",))
        # mkdtemp adds "/ga-ray-" and 8 random characters (16 in all), each node "/n<index>" (3)
        longest = len(str(parent.resolve())) + 16 + 3 + len(str(nodes)) + _RAY_SOCKET_SUFFIX
        if longest > _UNIX_PATH_MAX:
            raise InvalidInput(
                f"temp_dir {str(parent)!r} is too long: Ray's socket paths below it would reach "
                f"{longest} bytes, over the AF_UNIX limit of {_UNIX_PATH_MAX}",
                path=("temp_dir",),
            )
        self.nodes_wanted = nodes
        self.host = host
        self._parent = parent
        self._cpus = cpus_per_node
        self._store_bytes = object_store_mb * 1024 * 1024
        self._timeout_s = float(timeout_s)
        self._worker_ports = worker_ports_per_node
        self._grace_s = float(stop_grace_s)
        self._extra_env = dict(env or {})
        self._ray_start_args = list(ray_start_args)
        self._clock: Clock = clock if clock is not None else SystemClock()
        self._rng = random.Random(seed)
        self._nodes: list[_Node] = []
        self._root: Path | None = None
        self._lock = threading.RLock()
        self._started = False
        self._stopped = False

    # -- lifecycle -----------------------------------------------------------
    def __enter__(self) -> Self:
        self.start()
        return self

    def __exit__(self, *_exc: object) -> None:
        self.stop()

    def start(self) -> Self:
        """Start the head, then the other nodes, and wait until Ray reports all alive.

        On any failure every process already started is stopped and the
        private directory removed before the error propagates.
        """
        with self._lock:
            if self._started:
                raise InvalidInput("this LocalRayCluster was already started; make a new one")
            self._started = True
        import_ray()  # a missing extra fails here, before anything is started
        # A process that ends without stop() (a memory never closed) must not leave
        # its cluster running: the nodes are sessions of their own and outlive it.
        atexit.register(self.stop)
        deadline = self._clock.now() + self._timeout_s
        self._root = Path(tempfile.mkdtemp(prefix="ga-ray-", dir=self._parent))
        try:
            per_node = _NODE_FIXED_PORTS + self._worker_ports
            size = per_node * self.nodes_wanted + _HEAD_EXTRA_PORTS
            plan = _plan_ports(
                _free_block(self.host, size, self._rng),
                self.nodes_wanted,
                self._worker_ports,
                ray_client=ray_client_installed(),
            )
            self._nodes.append(self._launch(0, plan[0]))
            self._wait_port(self._nodes[0], plan[0].gcs, deadline)
            for i in range(1, self.nodes_wanted):
                self._nodes.append(self._launch(i, plan[i]))
            self._wait_alive(deadline)
        except BaseException:
            self.stop()
            raise
        return self

    def stop(self) -> None:
        """Stop every process this cluster started (and only those); remove its directory.

        Idempotent. Nodes stop last-started first, the head last.
        """
        with self._lock:
            if self._stopped:
                return
            self._stopped = True
            nodes = list(reversed(self._nodes))
        atexit.unregister(self.stop)
        for node in nodes:
            self._stop_node(node)
        if self._root is not None:
            shutil.rmtree(self._root, ignore_errors=True)

    # -- what tests and the runtime read ----------------------------------------
    @property
    def address(self) -> str:
        """The head's GCS address, ``host:port`` (what ``ray.init(address=...)`` takes)."""
        if not self._nodes:
            raise ActorUnavailable("the Ray cluster is not started")
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"{host}:{self._nodes[0].ports.gcs}"

    @property
    def temp_dir(self) -> Path:
        """The cluster's private directory (each node's --temp-dir is below it)."""
        if self._root is None:
            raise ActorUnavailable("the Ray cluster is not started")
        return self._root

    def ports(self) -> list[NodePorts]:
        """Each node's pinned ports, in node order."""
        return [node.ports for node in self._nodes]

    def node_ids(self) -> list[str]:
        """Each node's Ray node id (hex), in node order (index 0 is the head)."""
        return [node.node_id for node in self._nodes]

    def pids(self) -> list[int]:
        """Every process id this cluster started or saw in its nodes, sorted.

        Rescans /proc first, so worker processes Ray started for a driver since
        the last call are included.
        """
        self._rescan()
        with self._lock:
            return sorted({pid for node in self._nodes for pid in node.seen})

    def log_tail(self, index: int, lines: int = 40) -> str:
        """The end of node ``index``'s ``ray start`` output (for error messages)."""
        node = self._node(index)
        try:
            return "\n".join(node.log.read_text(errors="replace").splitlines()[-lines:])
        except OSError:
            return ""

    # -- internals -----------------------------------------------------------------
    def _node(self, index: int) -> _Node:
        if not _int_at_least(index, 0) or index >= len(self._nodes):
            raise InvalidInput(
                f"no node {show(index)}: the cluster has {len(self._nodes)}", path=("index",)
            )
        return self._nodes[index]

    def _env(self, ports: NodePorts) -> dict[str, str]:
        # a RAY_ADDRESS of the caller's would point ray start at another cluster
        env = {k: v for k, v in os.environ.items() if k != "RAY_ADDRESS"}
        env.update(
            {
                # Ray 2.60: without it a second node cannot join unless the token is shared
                "RAY_AUTH_MODE": "disabled",
                # no usage report, no cloud-metadata probing for it
                "RAY_USAGE_STATS_ENABLED": "0",
                "PYTHONUNBUFFERED": "1",
                **NODE_HEALTH_ENV,
            }
        )
        env["GLIDING_RAY_NODE_IP"] = self.host
        if self.host == "127.0.0.1":
            # Ray's own switch: its processes take 127.0.0.1 for their address
            # instead of probing the route to 8.8.8.8 (a UDP socket to the outside)
            env["RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER"] = "0"
        env.update(NO_OUTSIDE_HTTP_ENV)
        env.update(ports.env())
        env.update(self._extra_env)
        return env

    def _launch(self, index: int, ports: NodePorts) -> _Node:
        assert self._root is not None
        temp_dir = self._root / f"n{index}"
        temp_dir.mkdir()
        log = self._root / f"n{index}.log"
        args = [
            sys.executable,
            "-c",
            NODE_LAUNCHER,
            "start",
            "--block",
            f"--node-ip-address={self.host}",
            f"--temp-dir={temp_dir}",
            f"--num-cpus={self._cpus}",
            f"--object-store-memory={self._store_bytes}",
            "--disable-usage-stats",
            "--log-style=record",
            *ports.flags(),
        ]
        if index == 0:
            args += ["--head", f"--dashboard-host={self.host}", "--include-dashboard=false"]
        else:
            args += [f"--address={self.address}"]
        args += self._ray_start_args
        with log.open("wb") as out:
            proc = subprocess.Popen(
                args,
                stdin=subprocess.DEVNULL,
                stdout=out,
                stderr=subprocess.STDOUT,
                env=self._env(ports),
                cwd=temp_dir,
                start_new_session=True,
            )
        node = _Node(index=index, ports=ports, temp_dir=temp_dir, log=log, proc=proc)
        self._scan(node)
        return node

    def _scan(self, node: _Node) -> None:
        """Record every process in the node's session or below its process.

        Only while the launcher is unreaped: its pid (the session and group id)
        cannot be recycled until we reap it, so nothing else can pass for ours.
        """
        if node.proc.poll() is not None:
            return
        leader = node.proc.pid
        table: dict[int, tuple[str, int, int, int, int]] = {}
        for pid in _all_pids():
            stat = _proc_stat(pid)
            if stat is not None:
                table[pid] = stat
        with self._lock:
            mine = {pid for pid, stat in table.items() if stat[3] == leader or stat[2] == leader}
            if leader in table:
                mine.add(leader)
            # descendants that left the session (a process may call setsid); a
            # recorded pid counts only while it is the same process (pids recycle)
            frontier = set(mine) | {
                pid for pid, start in node.seen.items() if pid in table and table[pid][4] == start
            }
            children: dict[int, list[int]] = {}
            for pid, stat in table.items():
                children.setdefault(stat[1], []).append(pid)
            while frontier:
                pid = frontier.pop()
                for child in children.get(pid, ()):
                    if child not in mine:
                        mine.add(child)
                        frontier.add(child)
            for pid in mine:
                stat = table[pid]
                known = node.seen.get(pid)
                if known is None or known != stat[4]:
                    node.seen[pid] = stat[4]
                node.parent[pid] = stat[1]

    def _rescan(self) -> None:
        for node in list(self._nodes):
            if not node.killed and not node.stopped:
                self._scan(node)

    def _wait_port(self, node: _Node, port: int, deadline: float) -> None:
        """Until the head's GCS accepts connections (the other nodes need it)."""
        while True:
            self._check_running(node)
            with contextlib.suppress(OSError), socket.create_connection((self.host, port), 0.5):
                return
            if self._clock.now() > deadline:
                raise Timeout(
                    f"the Ray head's GCS did not listen on {self.host}:{port} in time\n{self.log_tail(0)}"
                )
            time.sleep(_POLL_S)

    def _check_running(self, node: _Node) -> None:
        code = node.proc.poll()
        if code is not None:
            raise ActorUnavailable(
                f"Ray node {node.index} exited during start (code {code}):\n{self.log_tail(node.index)}"
            )

    def _wait_alive(self, deadline: float) -> None:
        """Until the GCS lists every node alive; learn each node's id by its port."""
        ray = import_ray()
        gcs_client = ray._raylet.GcsClient(address=self.address)
        by_port = {node.ports.node_manager: node for node in self._nodes}
        while True:
            for node in self._nodes:
                self._check_running(node)
            try:
                infos = gcs_client.get_all_node_info(timeout=2).values()
            except Exception:  # noqa: BLE001 - the GCS may still be starting: ask again
                infos = []
            alive = {}
            for info in infos:
                owner = by_port.get(info.node_manager_port)
                if owner is not None and info.state == 0 and info.node_manager_address == self.host:
                    alive[owner.index] = info.node_id.hex()
            if len(alive) == len(self._nodes):
                for node in self._nodes:
                    node.node_id = alive[node.index]
                    self._scan(node)
                return
            if self._clock.now() > deadline:
                missing = [i for i in range(len(self._nodes)) if i not in alive]
                tails = "\n".join(f"-- node {i}:\n{self.log_tail(i)}" for i in missing)
                raise Timeout(
                    f"Ray nodes {missing} were not alive within {self._timeout_s}s\n{tails}"
                )
            time.sleep(_POLL_S * 3)

    def _signal(self, pid: int, start: int, sig: int) -> None:
        if _running(pid, start):
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, sig)

    def _signal_group(self, node: _Node, sig: int) -> None:
        # the leader is our unreaped child: its pid, hence the group id, cannot be reused yet
        if node.proc.returncode is None:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(node.proc.pid, sig)

    def _reap_leader(self, node: _Node, timeout: float) -> None:
        try:
            node.proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            node.proc.kill()
            node.proc.wait()

    def _wait_gone(self, procs: Iterable[tuple[int, int]], until: float) -> bool:
        pending = list(procs)
        while True:
            pending = [(pid, start) for pid, start in pending if _running(pid, start)]
            if not pending:
                return True
            if self._clock.now() > until:
                return False
            time.sleep(_POLL_S / 2)

    def _stop_order(self, node: _Node) -> list[list[tuple[int, int]]]:
        """The node's processes (not the launcher) in batches: deepest
        first, and the GCS after its siblings, which report to it as they stop
        (the autoscaler monitor blocks on a dead GCS instead of exiting)."""
        leader = node.proc.pid

        def depth(pid: int) -> int:
            d = 0
            while pid != leader and pid in node.parent and d < 64:
                pid, d = node.parent[pid], d + 1
            return d

        def is_gcs(pid: int) -> bool:
            try:
                return (
                    Path(f"/proc/{pid}/cmdline")
                    .read_bytes()
                    .split(b"\0", 1)[0]
                    .endswith(b"/gcs_server")
                )
            except OSError:
                return False

        keyed: dict[tuple[int, bool], list[tuple[int, int]]] = {}
        for pid, start in node.seen.items():
            if pid != leader and _running(pid, start):
                keyed.setdefault((-depth(pid), is_gcs(pid)), []).append((pid, start))
        return [keyed[key] for key in sorted(keyed)]

    def _stop_node(self, node: _Node) -> None:
        """SIGTERM batch by batch (see :meth:`_stop_order`; ``ray start`` is the
        last batch); SIGKILL a batch that outlives the grace period; the launcher
        then reaps what is left and exits; last, SIGKILL anything recorded still
        running (the group while the launcher is unreaped, then each pid)."""
        with self._lock:
            if node.stopped:
                return
            node.stopped = True
        if not node.killed:
            self._scan(node)
        until = self._clock.now() + self._grace_s
        for batch in self._stop_order(node):
            for pid, start in batch:
                self._signal(pid, start, signal.SIGTERM)
            # ray start itself lingers for seconds on SIGTERM with nothing left to do
            last = all(node.parent.get(pid) == node.proc.pid for pid, _ in batch)
            grace_end = self._clock.now() + 0.5 if last else max(until, self._clock.now() + 0.5)
            if not self._wait_gone(batch, grace_end):
                for pid, start in batch:
                    self._signal(pid, start, signal.SIGKILL)
                self._wait_gone(batch, self._clock.now() + 5.0)
        self._finish(node)

    def _finish(self, node: _Node) -> None:
        """Let the launcher reap the node's processes and exit; SIGKILL what is left."""
        with contextlib.suppress(subprocess.TimeoutExpired):
            node.proc.wait(timeout=5.0)
        self._signal_group(node, signal.SIGKILL)
        for pid, start in list(node.seen.items()):
            self._signal(pid, start, signal.SIGKILL)
        self._reap_leader(node, 5.0)
        self._wait_gone(list(node.seen.items()), self._clock.now() + 5.0)
