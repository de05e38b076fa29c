"""Actors hosted in the driver on Ray (``placement=IN_DRIVER`` / ``DRIVER_ONLY``, runtime/_ray_driver.py).

The contract tests (test_runtime_ray.py) run once with their receivers in
the driver; these pin what is particular to it: the actor really runs in
this process, the cluster reaches it by name through its relay (an ask from
another driver included), it hears of a lost peer, names stay unique across
both kinds of host, and nothing it adds leaves loopback; a ``DRIVER_ONLY``
actor has no relay; quiescence counts every pair; a VirtualClock drives the
driver-hosted actors' timers.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator
from typing import Any

import pytest

ray = pytest.importorskip("ray")

from loopback_audit import foreign_sockets

from gliding_actors.clock import VirtualClock
from gliding_actors.errors import ActorUnavailable, ConflictError, InvalidInput
from gliding_actors.runtime import DRIVER_ONLY, IN_DRIVER, RUNTIME_SENDER, Context
from gliding_actors.runtime._ray import RayRuntime, decode_reply
from gliding_actors.runtime._ray_wire import pack
from tools.ray_cluster import LocalRayCluster

pytestmark = pytest.mark.ray


class Where:
    """Answers with its process id; forwards ``{"t": "to", "to", "what"}``;
    keeps what it was sent and the peer-lost notices it heard."""

    receives_peer_lost = True

    def __init__(self) -> None:
        self.seen: list[Any] = []

    def receive(self, message: Any, ctx: Context) -> Any:
        if message == "pid":
            return os.getpid()
        if message == "seen":
            return self.seen
        if isinstance(message, dict) and message.get("t") == "to":
            ctx.send(message["to"], message["what"])
            return None
        if isinstance(message, dict) and message.get("t") == "peer.lost":
            assert ctx.sender == RUNTIME_SENDER
            self.seen.append({"lost": message["actor"]})
            return None
        if message == "refuse":
            raise ConflictError("refused")
        if isinstance(message, dict) and message.get("t") == "later":
            ctx.schedule(float(message["after"]), {"t": "tick"})
            return None
        if isinstance(message, dict) and message.get("t") == "bounce":
            # a chain of messages between two actors: quiescence must wait for all of them
            if message["left"] > 0:
                ctx.send(message["to"], {"t": "bounce", "to": ctx.name, "left": message["left"] - 1})
            else:
                self.seen.append("bounced")
            return None
        self.seen.append({"from": ctx.sender, "message": message})
        return None


ray.cloudpickle.register_pickle_by_value(__import__(__name__))


@pytest.fixture(scope="module")
def rt(ray_cluster: LocalRayCluster) -> Iterator[RayRuntime]:
    runtime = RayRuntime(ray_cluster.address, ask_timeout_s=30.0, monitor_s=0.5)
    yield runtime
    runtime.shutdown()


@pytest.fixture(autouse=True)
def _stop_spawned(rt: RayRuntime) -> Iterator[None]:
    yield
    for name in ("home", "away", "other", "quiet"):
        rt.stop(name)


def test_a_driver_hosted_actor_runs_here_and_the_cluster_reaches_it_by_name(
    rt: RayRuntime, eventually: Callable[..., None]
) -> None:
    home = rt.spawn("home", Where, placement=IN_DRIVER)
    away = rt.spawn("away", Where)
    assert home.ask("pid").get(20) == os.getpid()
    assert away.ask("pid").get(20) != os.getpid()
    # cluster -> driver (through the relay) and driver -> cluster (a plain Ray call)
    away.tell({"t": "to", "to": "home", "what": "from away"})
    home.tell({"t": "to", "to": "away", "what": "from home"})
    eventually(lambda: home.ask("seen").get(20) == [{"from": "away", "message": "from away"}])
    eventually(lambda: away.ask("seen").get(20) == [{"from": "home", "message": "from home"}])
    assert rt.status("home")["alive"] and rt.status("home")["held"] == 0


def test_an_ask_from_another_process_goes_through_the_relay(rt: RayRuntime) -> None:
    """Actors only tell each other; a second driver's ask reaches the relay's ``ask``."""
    rt.spawn("home", Where, placement=IN_DRIVER)
    relay = ray.get_actor("home", namespace=rt.namespace)
    stranger = "@driver:another"
    answer = ray.get(relay.ask.remote(stranger, 0, pack("pid")), timeout=30)
    assert answer[-1] is True  # the actor still runs
    assert decode_reply(answer[:-1]) == os.getpid()
    refused = ray.get(relay.ask.remote(stranger, 1, pack("refuse")), timeout=30)
    with pytest.raises(ConflictError, match="refused"):
        decode_reply(refused[:-1])


def test_a_driver_hosted_actor_hears_that_a_peer_lost_its_process(
    rt: RayRuntime, eventually: Callable[..., None]
) -> None:
    home = rt.spawn("home", Where, placement=IN_DRIVER)
    rt.spawn("away", Where)
    ray.kill(ray.get_actor("away", namespace=rt.namespace), no_restart=True)
    eventually(lambda: {"lost": "away"} in home.ask("seen").get(20))
    with pytest.raises(ActorUnavailable):
        rt.lookup("away")


def test_names_are_unique_across_the_driver_and_the_cluster(rt: RayRuntime) -> None:
    rt.spawn("home", Where, placement=IN_DRIVER)
    rt.spawn("away", Where)
    with pytest.raises(InvalidInput, match="already running"):
        rt.spawn("home", Where)
    with pytest.raises(InvalidInput, match="already running"):
        rt.spawn("home", Where, placement=IN_DRIVER)
    with pytest.raises(InvalidInput, match="already running"):
        rt.spawn("away", Where, placement=IN_DRIVER)
    rt.stop("home")
    with pytest.raises(ActorUnavailable):
        rt.lookup("home").ask("pid").get(20)
    again = rt.spawn("home", Where, placement=IN_DRIVER)  # the name is free again
    assert again.ask("pid").get(20) == os.getpid()


def test_a_factory_that_fails_in_the_driver_is_a_typed_error_and_leaves_no_relay(
    rt: RayRuntime, eventually: Callable[..., None]
) -> None:
    def broken() -> Where:
        raise RuntimeError("cannot build")

    with pytest.raises(ActorUnavailable, match="cannot build"):
        rt.spawn("other", broken, placement=IN_DRIVER)
    eventually(lambda: _no_actor_named("other", rt.namespace))
    assert rt.spawn("other", Where, placement=IN_DRIVER).ask("pid").get(20) == os.getpid()


def _no_actor_named(name: str, namespace: str) -> bool:
    try:
        ray.get_actor(name, namespace=namespace)
    except ValueError:
        return True
    return False


def test_relays_stay_on_loopback(
    rt: RayRuntime, ray_cluster: LocalRayCluster, eventually: Callable[..., None]
) -> None:
    rt.spawn("home", Where, placement=IN_DRIVER)
    rt.spawn("away", Where)
    rt.lookup("away").tell({"t": "to", "to": "home", "what": 1})
    eventually(lambda: len(rt.lookup("home").ask("seen").get(20)) == 1)
    assert foreign_sockets(ray_cluster.pids()) == []


def test_a_driver_only_actor_has_no_relay_and_the_cluster_cannot_reach_it(
    rt: RayRuntime, eventually: Callable[..., None]
) -> None:
    quiet = rt.spawn("quiet", Where, placement=DRIVER_ONLY)
    home = rt.spawn("home", Where, placement=IN_DRIVER)
    away = rt.spawn("away", Where)
    assert quiet.ask("pid").get(20) == os.getpid()
    assert _no_actor_named("quiet", rt.namespace)  # no Ray actor (relay) under its name
    home.tell({"t": "to", "to": "quiet", "what": "from the driver"})  # driver-hosted actors reach it
    eventually(lambda: quiet.ask("seen").get(20) == [{"from": "home", "message": "from the driver"}])
    away.tell({"t": "to", "to": "quiet", "what": "from the cluster"})  # a dead letter
    eventually(lambda: rt.status("away")["dead_letters"] == 1)
    assert quiet.ask("seen").get(20) == [{"from": "home", "message": "from the driver"}]
    rt.stop("quiet")
    with pytest.raises(ActorUnavailable):
        rt.lookup("quiet")


def test_wait_quiescent_waits_for_a_chain_of_messages_between_processes(rt: RayRuntime) -> None:
    home = rt.spawn("home", Where, placement=IN_DRIVER)
    rt.spawn("away", Where)
    home.tell({"t": "bounce", "to": "away", "left": 41})  # 41 hops between the driver and the cluster
    rt.wait_quiescent(30.0)
    seen = home.ask("seen").get(20) + rt.lookup("away").ask("seen").get(20)
    assert seen.count("bounced") == 1
    assert rt.is_quiescent()


def test_driver_hosted_timers_follow_a_virtual_clock(ray_cluster: LocalRayCluster) -> None:
    clock = VirtualClock()
    runtime = RayRuntime(ray_cluster.address, clock=clock, ask_timeout_s=30.0, monitor_s=0)
    try:
        ticker = runtime.spawn("ticker", Where, placement=DRIVER_ONLY)
        ticker.ask({"t": "later", "after": 5.0}).get(20)
        assert runtime.next_timer() == clock.now() + 5.0
        runtime.wait_quiescent(10.0)
        assert ticker.ask("seen").get(20) == []  # real time passes, virtual time does not
        clock.advance(5.0)
        runtime.wait_quiescent(10.0)
        assert ticker.ask("seen").get(20) == [{"from": None, "message": {"t": "tick"}}]
        assert runtime.next_timer() is None
    finally:
        runtime.shutdown()
