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
  first, a dead loopback HTTP proxy the second (:data:`NO_OUTSIDE_HTTP_ENV`).
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
:func:`import_ray` says exactly what to install.
"""

from __future__ import annotations

import atexit
import dataclasses
import importlib
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
from types import TracebackType
from typing import Any, Self

from gliding_actors.clock import Clock, SystemClock
from gliding_actors.errors import ActorUnavailable, InvalidInput, Timeout

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

INSTALL_HINT = "pip install 'gliding-actors[ray]'"

#: the Python program each node runs. It forks: the child is Ray's own ``ray
#: start``, told to keep the node address it is given (``resolve_ip_for_localhost``
#: the identity, ``get_node_ip_address`` that address instead of a UDP probe of
#: 8.8.8.8) and to allow joining a cluster although the node's environment has
#: ``RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER=0`` (which makes every *other* Ray process
#: of the node take 127.0.0.1 for its own address instead of probing). When
#: ``ray start`` fails, its traceback is printed before the child leaves, so it
#: reaches the node's log and the error :class:`LocalRayCluster` raises. The
#: parent (the process we start and reap) is a child subreaper that forwards
#: SIGTERM/SIGINT to ``ray start`` and reaps every process of the node orphaned
#: below it, so stopping a node leaves no zombie for an init that may never
#: reap it; it exits with ``ray start``'s status once no child is left.
NODE_LAUNCHER = """\
import ctypes, os, signal, sys
ctypes.CDLL(None, use_errno=True).prctl(36, 1, 0, 0, 0)  # PR_SET_CHILD_SUBREAPER
child = os.fork()
if child == 0:
    import ray._private.ray_constants as ray_constants
    import ray._private.services as services
    host = os.environ["GLIDING_RAY_NODE_IP"]
    services.resolve_ip_for_localhost = lambda address: address
    services.get_node_ip_address = lambda address=None: host
    ray_constants.ENABLE_RAY_CLUSTER = True  # or `ray start --address` refuses to join
    import traceback
    sys.argv = ["ray", *sys.argv[1:]]
    status = 1
    try:
        from ray.scripts.scripts import main
        main()
        status = 0
    except SystemExit as exc:  # click's exit, with a message already printed for usage errors
        status = exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 1)
        if exc.code is not None and not isinstance(exc.code, int):
            print(exc.code, file=sys.stderr)
    except BaseException:
        traceback.print_exc()  # the reason a node did not start: it reaches the node's log
    finally:
        # a forked child leaves without the parent's atexit handlers and buffers,
        # after writing out its own
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(status)
def forward(sig, frame):
    try:
        os.kill(child, sig)
    except ProcessLookupError:
        pass
signal.signal(signal.SIGTERM, forward)
signal.signal(signal.SIGINT, forward)
code = 0
while True:
    try:
        pid, status = os.waitpid(-1, 0)
    except ChildProcessError:
        break
    if pid == child:
        code = os.waitstatus_to_exitcode(status)
sys.exit(code if code >= 0 else 128 - code)
"""

#: longest AF_UNIX socket path (sun_path is 108 bytes with the NUL)
_UNIX_PATH_MAX = 107
#: what Ray appends below a node's --temp-dir for its longest socket path:
#: /session_2026-11-30_22-04-13_558166_4194304/sockets/plasma_store (+ slack)
_RAY_SOCKET_SUFFIX = 72
#: ports per node besides the worker range (see NodePorts)
_NODE_FIXED_PORTS = 6
#: head-only ports (gcs, ray client server, dashboard, two metrics servers)
_HEAD_EXTRA_PORTS = 5
#: Ray refuses an object store under 75 MiB
_MIN_OBJECT_STORE_MB = 75
#: how often waits poll (seconds)
_POLL_S = 0.1
#: Ray's dashboard asks the cloud metadata service (169.254.169.254, and DNS for
#: metadata.google.internal) which cloud it runs on even with usage stats off.
#: Every plain-HTTP request Ray makes to a host that is not loopback goes to
#: this proxy instead: a closed port on 127.0.0.1, refused at once. Loopback
#: (Ray's own agents) is exempt, and gRPC is told to ignore the proxy.
NO_OUTSIDE_HTTP_ENV = {
    "http_proxy": "http://127.0.0.1:9",
    "HTTP_PROXY": "http://127.0.0.1:9",
    "https_proxy": "http://127.0.0.1:9",
    "HTTPS_PROXY": "http://127.0.0.1:9",
    "no_proxy": "127.0.0.1,localhost,::1",
    "NO_PROXY": "127.0.0.1,localhost,::1",
    "grpc_proxy": "",
    "no_grpc_proxy": "*",
}
#: the GCS asks each raylet every second and calls it dead after 5 misses: a
#: killed node is reported dead in ~5 s instead of Ray's ~15 s; a slow answer
#: (a busy machine) still has 5 s before it counts as a miss
NODE_HEALTH_ENV = {
    "RAY_health_check_period_ms": "1000",
    "RAY_health_check_timeout_ms": "5000",
    "RAY_health_check_failure_threshold": "5",
}


def import_ray() -> Any:
    """Ray, or :class:`InvalidInput` saying exactly what to install."""
    try:
        # through importlib: typed Any, so the package type-checks with or without the extra
        return importlib.import_module("ray")
    except ImportError as exc:
        raise InvalidInput(f"a Ray cluster needs Ray: {INSTALL_HINT}") from exc


# --------------------------------------------------------------------------- ports


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
        fixed = [
            self.node_manager,
            self.object_manager,
            self.dashboard_agent_listen,
            self.dashboard_agent_grpc,
            self.metrics_export,
            self.runtime_env_agent,
            self.gcs,
            self.ray_client_server,
            self.dashboard,
            self.autoscaler_metrics,
            self.dashboard_metrics,
        ]
        return [p for p in fixed if p] + list(range(self.min_worker, self.max_worker + 1))

    def flags(self) -> list[str]:
        """The ``ray start`` flags that pin these ports."""
        out = [
            f"--node-manager-port={self.node_manager}",
            f"--object-manager-port={self.object_manager}",
            f"--dashboard-agent-listen-port={self.dashboard_agent_listen}",
            f"--dashboard-agent-grpc-port={self.dashboard_agent_grpc}",
            f"--metrics-export-port={self.metrics_export}",
            f"--runtime-env-agent-port={self.runtime_env_agent}",
            f"--min-worker-port={self.min_worker}",
            f"--max-worker-port={self.max_worker}",
        ]
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
        fixed = {
            "node_manager": p,
            "object_manager": p + 1,
            "dashboard_agent_listen": p + 2,
            "dashboard_agent_grpc": p + 3,
            "metrics_export": p + 4,
            "runtime_env_agent": p + 5,
        }
        p += _NODE_FIXED_PORTS
        head: dict[str, int] = {}
        if i == 0:
            names = (
                "gcs",
                "ray_client_server",
                "dashboard",
                "autoscaler_metrics",
                "dashboard_metrics",
            )
            head = {name: p + k for k, name in enumerate(names)}
            if not ray_client:
                head["ray_client_server"] = 0
            p += _HEAD_EXTRA_PORTS
        out.append(NodePorts(**fixed, min_worker=p, max_worker=p + worker_ports - 1, **head))
        p += worker_ports
    return out


# --------------------------------------------------------------------------- /proc


def _proc_stat(pid: int) -> tuple[str, int, int, int, int] | None:
    """``(state, ppid, pgid, sid, starttime)`` of a live pid, None when gone."""
    try:
        raw = Path(f"/proc/{pid}/stat").read_text()
    except (OSError, ValueError):
        return None
    # comm may hold spaces and parentheses: the fields start after the last ')'
    fields = raw[raw.rfind(")") + 2 :].split()
    try:
        return fields[0], int(fields[1]), int(fields[2]), int(fields[3]), int(fields[19])
    except (IndexError, ValueError):
        return None


def _all_pids() -> list[int]:
    return [int(name) for name in os.listdir("/proc") if name.isdigit()]


def _running(pid: int, start: int) -> bool:
    """Whether the process we recorded as (pid, start) still runs (a zombie does not)."""
    stat = _proc_stat(pid)
    return stat is not None and stat[4] == start and stat[0] not in ("Z", "X")


# --------------------------------------------------------------------------- nodes


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
            with connect(cluster, namespace="test"):
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
        if isinstance(nodes, bool) or not isinstance(nodes, int) or nodes < 1:
            raise InvalidInput(f"nodes must be an int >= 1, not {nodes!r}", path=("nodes",))
        try:
            ipaddress.ip_address(host)
        except ValueError:
            raise InvalidInput(
                f"host must be an IP address literal, not {host!r}", path=("host",)
            ) from None
        if (
            isinstance(cpus_per_node, bool)
            or not isinstance(cpus_per_node, int)
            or cpus_per_node < 0
        ):
            raise InvalidInput(
                f"cpus_per_node must be an int >= 0, not {cpus_per_node!r}", path=("cpus_per_node",)
            )
        if (
            isinstance(object_store_mb, bool)
            or not isinstance(object_store_mb, int)
            or object_store_mb < _MIN_OBJECT_STORE_MB
        ):
            raise InvalidInput(
                f"object_store_mb must be an int >= {_MIN_OBJECT_STORE_MB} (Ray's minimum), not {object_store_mb!r}",
                path=("object_store_mb",),
            )
        if not timeout_s > 0 or not stop_grace_s >= 0:
            raise InvalidInput("timeout_s must be > 0 and stop_grace_s >= 0", path=("timeout_s",))
        if (
            isinstance(worker_ports_per_node, bool)
            or not isinstance(worker_ports_per_node, int)
            or worker_ports_per_node < 4
        ):
            raise InvalidInput(
                "worker_ports_per_node must be an int >= 4", path=("worker_ports_per_node",)
            )
        if isinstance(ray_start_args, str) or not all(
            isinstance(arg, str) for arg in ray_start_args
        ):
            raise InvalidInput(
                f"ray_start_args must be a sequence of strings, not {ray_start_args!r}",
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
        #: seconds the start took (head + every node alive), for reports
        self.startup_s: float | None = None

    # -- lifecycle -----------------------------------------------------------
    def __enter__(self) -> Self:
        self.start()
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
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
        began = self._clock.now()
        deadline = began + self._timeout_s
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
        self.startup_s = self._clock.now() - began
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

    def log_tail(self, index: int, lines: int = 40) -> str:
        """The end of node ``index``'s ``ray start`` output (for error messages)."""
        node = self._node(index)
        try:
            return "\n".join(node.log.read_text(errors="replace").splitlines()[-lines:])
        except OSError:
            return ""

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

    # -- internals -----------------------------------------------------------------
    def _node(self, index: int) -> _Node:
        if (
            isinstance(index, bool)
            or not isinstance(index, int)
            or not 0 <= index < len(self._nodes)
        ):
            raise InvalidInput(
                f"no node {index!r}: the cluster has {len(self._nodes)}", path=("index",)
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
            try:
                with socket.create_connection((self.host, port), timeout=0.5):
                    return
            except OSError:
                pass
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
            try:
                os.kill(pid, sig)
            except ProcessLookupError:
                pass

    def _signal_group(self, node: _Node, sig: int) -> None:
        # the leader is our unreaped child: its pid, hence the group id, cannot be reused yet
        if node.proc.returncode is None:
            try:
                os.killpg(node.proc.pid, sig)
            except (ProcessLookupError, PermissionError):
                pass

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
        try:
            node.proc.wait(timeout=5.0)
        except subprocess.TimeoutExpired:
            pass
        self._signal_group(node, signal.SIGKILL)
        for pid, start in list(node.seen.items()):
            self._signal(pid, start, signal.SIGKILL)
        self._reap_leader(node, 5.0)
        self._wait_gone(list(node.seen.items()), self._clock.now() + 5.0)


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

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
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
        raise InvalidInput(f"connect takes a LocalRayCluster or an address, not {cluster!r}")
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
