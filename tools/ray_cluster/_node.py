"""A Ray node as processes: the program and environment it starts with (why: see
:mod:`tools.ray_cluster`), and /proc reads telling which processes run."""

from __future__ import annotations

import os
from pathlib import Path

__all__ = ["NODE_HEALTH_ENV", "NODE_LAUNCHER"]

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

#: the GCS asks each raylet every second and calls it dead after 5 misses: a
#: killed node is reported dead in ~5 s instead of Ray's ~15 s; a slow answer
#: (a busy machine) still has 5 s before it counts as a miss
NODE_HEALTH_ENV = {
    "RAY_health_check_period_ms": "1000",
    "RAY_health_check_timeout_ms": "5000",
    "RAY_health_check_failure_threshold": "5",
}


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
