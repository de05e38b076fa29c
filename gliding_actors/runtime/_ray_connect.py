"""Joining Ray as a driver, on loopback when asked: :func:`connect`, :func:`import_ray`.

``connect(address)`` joins a running cluster; ``connect(None)`` has Ray start
a local one-node cluster in this process's session (``ray.init``'s own local
start) and stop it on :meth:`RayConnection.close`. Either way the driver keeps
the address it is given, because three things in Ray 2.60 would otherwise
leave loopback:

* **Ray rewrites 127.0.0.1.** ``ray.init(address="127.0.0.1:PORT")`` and
  ``_node_ip_address="127.0.0.1"`` pass through
  ``ray._private.services.resolve_ip_for_localhost``, which swaps a loopback
  address for the machine's external one (deliberately: a loopback address is
  useless to a *remote* node), and the GCS, raylet and agents then listen on
  every interface. :func:`pin_loopback` makes that one function the identity
  while this process is a driver.
* **Ray looks outside by itself.** Its processes learn their own address by
  routing a UDP socket to 8.8.8.8 unless ``RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER``
  is 0, and the dashboard asks the cloud metadata service which cloud it is
  on. A local start runs with that variable at 0, no dashboard, and plain
  HTTP to anything but loopback sent to a closed local port
  (:data:`NO_OUTSIDE_HTTP_ENV`), set only while Ray starts its processes.
* **Usage stats and auth** are off for the session.

A cluster of several nodes on one machine (the Ray tests, ``bench scaling``)
is a test rig, not part of the package: ``tools/ray_cluster`` in a checkout
starts one on 127.0.0.1 and stops it by process id; join it by its address.
Ray is imported lazily: without it :func:`import_ray` says exactly what to
install.
"""

from __future__ import annotations

import contextlib
import importlib
import os
import threading
from collections.abc import Iterator
from typing import Any, Self

from gliding_actors.errors import InvalidInput, show

__all__ = [
    "INSTALL_HINT",
    "NO_OUTSIDE_HTTP_ENV",
    "RayConnection",
    "connect",
    "import_ray",
    "pin_loopback",
    "unpin_loopback",
]

INSTALL_HINT = "pip install 'gliding-actors[ray]'"

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
#: what a local start's processes inherit: each takes the node address it is given
_LOCAL_START_ENV = {**NO_OUTSIDE_HTTP_ENV, "RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER": "0"}


def import_ray() -> Any:
    """Ray, or :class:`InvalidInput` saying exactly what to install."""
    try:
        # through importlib: typed Any, so the package type-checks with or without the extra
        return importlib.import_module("ray")
    except ImportError as exc:
        raise InvalidInput(f"a Ray cluster needs Ray: {INSTALL_HINT}") from exc


@contextlib.contextmanager
def _environment(values: dict[str, str]) -> Iterator[None]:
    """``values`` in ``os.environ`` for the block (what Ray's processes inherit), then as before."""
    saved = {key: os.environ.get(key) for key in values}
    os.environ.update(values)
    try:
        yield
    finally:
        for key, old in saved.items():
            if old is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = old


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
    address: str | None,
    *,
    namespace: str = "gliding",
    host: str = "127.0.0.1",
    **init_options: Any,
) -> RayConnection:
    """Connect this process to the cluster at ``address`` (``host:port``) as a driver.

    ``address`` None starts a local one-node cluster (Ray's own local start,
    on ``host``), which :meth:`RayConnection.close` stops. The driver's own
    address is pinned to ``host``, no dashboard, no worker logs streamed to
    this process; ``init_options`` are passed on to ``ray.init``. Refuses when
    this process is already a Ray driver (one connection per process).
    """
    ray = import_ray()
    if address is not None and not (isinstance(address, str) and address):
        raise InvalidInput(f"connect takes a cluster address 'host:port' or None, not {show(address)}")
    if ray.is_initialized():
        raise InvalidInput("this process is already connected to Ray: close that connection first")
    env = {"RAY_AUTH_MODE": "disabled", "RAY_USAGE_STATS_ENABLED": "0"}
    added = [key for key in env if key not in os.environ]
    pin_loopback()
    try:
        for key in added:
            os.environ[key] = env[key]
        options: dict[str, Any] = {
            "address": "local" if address is None else address,  # local: a new cluster, never someone else's
            "_node_ip_address": host,
            "namespace": namespace,
            "include_dashboard": False,
            "log_to_driver": False,
            "configure_logging": False,
        }
        options.update(init_options)
        with _environment(_LOCAL_START_ENV if address is None else {}):
            ray.init(**options)
    except BaseException:
        for key in added:
            os.environ.pop(key, None)
        unpin_loopback()
        raise
    return RayConnection(ray, address or "local", namespace, added)
