"""The runtime interface on Ray behaves as on threads and sim (tests/runtime/test_runtime_backends.py).

Every test runs on a real Ray cluster on loopback (the ``ray_runtime``
fixture, tests/ray/conftest.py); the behaviours are the ones the other
backends' contract tests use, shipped to Ray workers by value.
"""

from __future__ import annotations

import importlib.util
import sys
import time
from collections.abc import Callable
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

ray = pytest.importorskip("ray")

from loopback_audit import foreign_sockets

from gliding_actors.errors import (
    ActorCrashed,
    ActorUnavailable,
    ConflictError,
    InvalidInput,
    Timeout,
)
from gliding_actors.runtime import DEFERRED, IN_DRIVER, Context, create_runtime
from gliding_actors.runtime._ray import RayRuntime, decode_reply, encode_reply
from tools.ray_cluster import LocalRayCluster

pytestmark = pytest.mark.ray


def _load_contract() -> ModuleType:
    """The behaviours of the other backends' contract tests, loaded from their file
    (tests/ is not a package) under a name Ray workers can be sent by value."""
    path = Path(__file__).resolve().parents[1] / "runtime" / "test_runtime_backends.py"
    spec = importlib.util.spec_from_file_location("runtime_contract", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


contract = _load_contract()

ray.cloudpickle.register_pickle_by_value(contract)


class Relay:
    """Forwards numbered messages to ``ordered`` (actor-to-actor FIFO) and
    answers a 'wait' from a later message (a reply crossing processes)."""

    def __init__(self) -> None:
        self.parked: list[Any] = []

    def receive(self, message: Any, ctx: Context) -> Any:
        if message["t"] == "burst":
            for i in range(message["n"]):
                ctx.send("ordered", {"from": "relay", "i": i})
            return message["n"]
        if message["t"] == "wait":
            self.parked.append(ctx.defer_reply())
            return DEFERRED
        if message["t"] == "release":
            for token in self.parked:
                ctx.resolve(token, {"released": True, "tuple": (1, 2)})
            count, self.parked = len(self.parked), []
            return count
        if message["t"] == "arm":
            ctx.schedule(message["delay"], {"t": "fired"})
            return None
        if message["t"] == "fired":
            ctx.send("ordered", "timer fired")
            return None
        if message["t"] == "unsendable":
            return {"a set": {1, 2}}
        raise InvalidInput(f"unknown {message['t']}", path=("t",))


ray.cloudpickle.register_pickle_by_value(__import__(__name__))


@pytest.fixture(scope="module")
def ray_runtime(ray_cluster: LocalRayCluster) -> Any:
    """A driver on the module's two-node cluster (tests/ray/conftest.py), pinned to 127.0.0.1."""
    runtime = RayRuntime(ray_cluster.address, ask_timeout_s=30.0)
    yield runtime
    runtime.shutdown()


class DriverPlaced:
    """The runtime with the contract's receiving actors hosted in the driver
    (``placement=IN_DRIVER``) and ``relay`` on the cluster, so every test's
    traffic crosses between the driver and Ray workers in both directions."""

    IN_THE_DRIVER = frozenset({"counter", "sup", "deferring", "ordered"})

    def __init__(self, runtime: RayRuntime) -> None:
        self._runtime = runtime

    def spawn(self, name: str, factory: Any, **options: Any) -> Any:
        if name in self.IN_THE_DRIVER and options.get("placement") is None:
            options["placement"] = IN_DRIVER
        return self._runtime.spawn(name, factory, **options)

    def __getattr__(self, attribute: str) -> Any:
        return getattr(self._runtime, attribute)


@pytest.fixture(params=["on the cluster", "in the driver"])
def rt(ray_runtime: RayRuntime, request: pytest.FixtureRequest) -> Any:
    """The module's runtime, with every actor a test spawned stopped after it;
    run once with every actor on the cluster, once with some in the driver."""
    return ray_runtime if request.param == "on the cluster" else DriverPlaced(ray_runtime)


@pytest.fixture(autouse=True)
def _stop_spawned(ray_runtime: RayRuntime) -> Any:
    yield
    for name in ("counter", "sup", "deferring", "ordered", "relay", "timed"):
        ray_runtime.stop(name)


def test_ask_refusal_and_the_same_error_class(rt: Any) -> None:
    ref = rt.spawn("counter", contract.Counter)
    assert ref.ask({"t": "add", "n": 2}).get(20) == 2
    assert rt.lookup("counter").ask({"t": "add", "n": 3}).get(20) == 5
    with pytest.raises(ConflictError, match="negative"):
        ref.ask({"t": "add", "n": -1}).get(20)
    assert ref.ask({"t": "get"}).get(20) == 5  # the refusal changed nothing
    assert ref.is_alive()


def test_crash_fails_the_asker_notifies_the_supervisor_and_frees_the_name(
    rt: Any, eventually: Callable[..., None]
) -> None:
    supervisor = rt.spawn("sup", contract.Recorder)
    ref = rt.spawn("counter", contract.Counter, supervisor="sup")
    with pytest.raises(ActorCrashed) as info:
        ref.ask({"t": "boom"}).get(20)
    assert info.value.actor == "counter" and "RuntimeError: kaboom" in info.value.cause
    eventually(lambda: bool(supervisor.ask("seen").get(20)))
    assert supervisor.ask("seen").get(20) == [
        {"type": "actor.failed", "actor": "counter", "error": "RuntimeError: kaboom", "restarted": False}
    ]
    started = time.monotonic()
    with pytest.raises(ActorUnavailable):
        ref.ask({"t": "get"}).get(20)
    with pytest.raises(ActorUnavailable):
        rt.lookup("counter")
    assert time.monotonic() - started < 1.0, "a crashed actor must refuse at once, not hang"
    assert not ref.is_alive()


def test_restart_rebuilds_from_the_factory_in_the_worker(rt: Any) -> None:
    rt.spawn("sup", contract.Recorder)
    ref = rt.spawn("counter", contract.Counter, supervisor="sup", restart=True)
    ref.ask({"t": "add", "n": 7}).get(20)
    with pytest.raises(ActorCrashed):
        ref.ask({"t": "boom"}).get(20)
    assert ref.ask({"t": "get"}).get(20) == 0


def test_deferred_replies_crashes_and_stop_fail_every_open_ask(rt: Any) -> None:
    ref = rt.spawn("deferring", contract.Deferring)
    waiting = [ref.ask({"t": "wait"}) for _ in range(3)]
    assert ref.ask({"t": "release"}).get(20) == 3
    assert all(f.get(20).startswith("released ") for f in waiting)
    doomed = [ref.ask({"t": "wait"}) for _ in range(2)]
    with pytest.raises(ActorCrashed):
        ref.ask({"t": "boom"}).get(20)
    for future in doomed:
        with pytest.raises(ActorCrashed):
            future.get(20)
    ref = rt.spawn("deferring", contract.Deferring)  # the name is free again
    pending = ref.ask({"t": "wait"})
    with pytest.raises(Timeout):
        pending.get(0.3)  # never a hang: every wait has a timeout
    rt.stop("deferring")
    with pytest.raises(ActorUnavailable):
        pending.get(20)
    with pytest.raises(ActorUnavailable):
        ref.ask({"t": "wait"}).get(20)


def test_fifo_per_pair_from_the_driver_and_between_actors(
    rt: Any, eventually: Callable[..., None]
) -> None:
    """Ray does not promise call order to an async actor; the sequence numbers do."""
    ordered = rt.spawn("ordered", contract.Recorder)  # keeps every message in arrival order
    relay = rt.spawn("relay", Relay)
    for i in range(300):
        ordered.tell({"from": "driver", "i": i})
    assert relay.ask({"t": "burst", "n": 300}).get(20) == 300
    eventually(lambda: len(ordered.ask("seen").get(20)) == 600)
    seen = ordered.ask("seen").get(20)
    for source in ("driver", "relay"):
        numbers = [m["i"] for m in seen if m["from"] == source]
        assert numbers == list(range(300)), f"{source}'s messages arrived out of order"
    assert rt.status("ordered")["held"] == 0


def test_msgpack_on_the_wire_replies_and_errors(rt: Any) -> None:
    relay = rt.spawn("relay", Relay)
    parked = relay.ask({"t": "wait"})
    assert relay.ask({"t": "release"}).get(20) == 1
    assert parked.get(20) == {"released": True, "tuple": [1, 2]}  # msgpack: a tuple comes back a list
    with pytest.raises(InvalidInput, match="msgpack") as refused:
        relay.ask({"t": "unsendable"}).get(20)
    assert relay.is_alive()
    with pytest.raises(InvalidInput) as info:
        relay.ask({"t": "nope"}).get(20)
    assert info.value.path == ("t",) or list(info.value.path) == ["t"]  # attributes cross too
    with pytest.raises(InvalidInput, match="msgpack"):
        relay.ask({"t": "burst", "n": object()}).get(20)  # refused before anything is sent
    assert refused.value is not None


def test_timers_fire_on_the_system_clock_in_the_worker(
    rt: Any, eventually: Callable[..., None]
) -> None:
    ordered = rt.spawn("ordered", contract.Recorder)  # keeps every message in arrival order
    relay = rt.spawn("relay", Relay)
    relay.ask({"t": "arm", "delay": 0.05}).get(20)
    eventually(lambda: ordered.ask("seen").get(20) == ["timer fired"])


def test_names_and_spawn_errors_are_typed(rt: Any) -> None:
    with pytest.raises(ActorUnavailable):
        rt.lookup("nobody")
    with pytest.raises(InvalidInput):
        rt.spawn("@driver", contract.Counter)
    rt.spawn("counter", contract.Counter)
    with pytest.raises(InvalidInput, match="already running"):
        rt.spawn("counter", contract.Counter)


def test_placement_pins_an_actor_to_a_node_and_nothing_leaves_loopback(
    rt: Any, ray_cluster: LocalRayCluster
) -> None:
    nodes = rt.node_ids()
    assert sorted(nodes) == sorted(ray_cluster.node_ids())
    assert len(nodes) == 2
    for node in nodes:
        ref = rt.spawn("counter", contract.Counter, placement=node)
        assert ref.ask({"t": "add", "n": 1}).get(20) == 1
        rt.stop("counter")
    # pids() rescans /proc, so the workers Ray started for these actors are included
    assert foreign_sockets(ray_cluster.pids()) == []


def test_the_wire_codec_round_trips_errors_as_the_same_class() -> None:
    crash = ActorCrashed("dir:0", "KeyError: 'x'")
    with pytest.raises(ActorCrashed) as info:
        decode_reply(encode_reply(False, crash))
    assert (info.value.actor, info.value.cause) == ("dir:0", "KeyError: 'x'")
    with pytest.raises(ActorCrashed, match="ValueError"):
        decode_reply(encode_reply(False, ValueError("not ours")))
    assert decode_reply(encode_reply(True, {"k": [1, "two", None]})) == {"k": [1, "two", None]}


def test_a_clock_neither_the_system_nor_virtual_is_refused() -> None:
    """A VirtualClock is accepted (the driver-hosted actors' timers follow it,
    test_driver_placement.py); any other clock could not be honoured."""

    class Frozen:
        def now(self) -> float:
            return 0.0

    with pytest.raises(InvalidInput, match="system clock or a VirtualClock"):
        create_runtime("ray", clock=Frozen())


_LOCAL_RUN = """
import json, os
from gliding_actors.runtime._ray import RayRuntime
import importlib.util, sys
audit_spec = importlib.util.spec_from_file_location("loopback_audit", "tests/ray/loopback_audit.py")
audit = importlib.util.module_from_spec(audit_spec)
sys.modules[audit_spec.name] = audit
audit_spec.loader.exec_module(audit)
foreign_sockets = audit.foreign_sockets
spec = importlib.util.spec_from_file_location("runtime_contract", "tests/runtime/test_runtime_backends.py")
contract = importlib.util.module_from_spec(spec)
sys.modules[spec.name] = contract
spec.loader.exec_module(contract)
import ray
ray_started = ray.is_initialized()
rt = RayRuntime(ask_timeout_s=60.0)
ray.cloudpickle.register_pickle_by_value(contract)
ref = rt.spawn("counter", contract.Counter)
answer = ref.ask({"t": "add", "n": 41}).get(60) + 1
def below(pid):
    kids = []
    for name in os.listdir("/proc"):
        if name.isdigit():
            try:
                if int(open(f"/proc/{name}/stat").read().split(")")[-1].split()[1]) == pid:
                    kids += [int(name), *below(int(name))]
            except (OSError, ValueError, IndexError):
                pass
    return kids
cluster_pids = below(os.getpid())  # the processes Ray's local start made for this driver
foreign = foreign_sockets([os.getpid(), *cluster_pids])
rt.shutdown()
import time
def running(pid):
    try:
        return open(f"/proc/{pid}/stat").read().split(")")[-1].split()[0] not in "ZX"
    except OSError:
        return False
deadline = time.monotonic() + 30
while any(running(pid) for pid in cluster_pids) and time.monotonic() < deadline:
    time.sleep(0.1)
alive = [pid for pid in cluster_pids if running(pid)]
print(json.dumps({"before": ray_started, "answer": answer, "nodes": len(cluster_pids) > 0, "foreign": foreign, "alive": alive}))
"""


def test_without_an_address_the_runtime_starts_and_stops_its_own_loopback_cluster() -> None:
    """One driver per process: this runs in a fresh interpreter, as a user's script would. Ray's own
    local start makes the cluster; every socket of the driver and of what it started is on loopback,
    and no process of it is left after the runtime shuts down."""
    import json
    import subprocess

    root = Path(__file__).resolve().parents[2]
    done = subprocess.run(
        [sys.executable, "-c", _LOCAL_RUN], cwd=root, capture_output=True, text=True, timeout=300, check=False
    )
    assert done.returncode == 0, done.stderr[-3000:]
    outcome = json.loads(done.stdout.strip().splitlines()[-1])
    assert outcome == {"before": False, "answer": 42, "nodes": True, "foreign": [], "alive": []}
