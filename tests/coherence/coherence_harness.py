"""A small deterministic network for the coherence controllers, and the invariants.

:class:`Net` hosts real :class:`CacheController` / :class:`DirectoryController`
objects, keeps one FIFO queue per (sender, receiver) pair, and delivers a
message only when told which channel to take: the tests (hypothesis, the
exhaustive explorer, plain unit tests) choose the interleaving. It also keeps
the ground truth the invariants need: every completed write of every line
(``history``), what each agent has seen, and which ops completed how often.

``check()`` asserts the always-on invariants; ``check_quiescent()`` the ones
that hold once nothing is in flight; ``drain()`` delivers everything.
"""

from __future__ import annotations

import copy
import dataclasses
from collections import deque
from typing import Any

import msgpack
from dict_home import DictHome
from mutants import cache_controller, directory_controller

from gliding_actors.coherence import _messages as m
from gliding_actors.coherence import directory_shard
from gliding_actors.coherence._states import CACHE_STABLE, LEAVING, READABLE

CRITICAL = "critical"
READER = "@reader"

Msg = dict[str, Any]


class InvariantViolation(AssertionError):
    """An invariant does not hold; the message says which and where."""


@dataclasses.dataclass
class OpRecord:
    agent: str
    kind: str
    iri: str
    req: Msg
    #: Latest completed version of the line when the op was issued (a read must see it).
    floor: int
    completions: int = 0
    result: Msg | None = None


class Net:
    """Controllers wired through FIFO channels; delivery order chosen by the caller."""

    def __init__(
        self,
        agents: list[str],
        *,
        directories: int = 1,
        capacity: int | dict[str, int] = 8,
        critical: frozenset[str] = frozenset({CRITICAL}),
        bugs: frozenset[str] = frozenset(),
        check_msgpack: bool = True,
        keep_log: int = 60,
        rights: dict[str, Any] | None = None,
    ) -> None:
        directory_class, cache_class = directory_controller(bugs), cache_controller(bugs)
        self.agents = list(agents)
        self.home = DictHome()
        names = ["dir"] if directories == 1 else [f"dir{i}" for i in range(directories)]
        self.dir_names = names
        self.dirs = {
            n: directory_class(n, self.home)
            for n in names
        }
        directory_for: Any = (
            names[0] if directories == 1 else (lambda iri: directory_shard(iri, names))
        )
        self.directory_for: Any = (lambda iri: names[0]) if directories == 1 else directory_for
        self.caches = {
            a: cache_class(
                a,
                directory_for,
                capacity[a] if isinstance(capacity, dict) else capacity,
                critical,
                may=(rights or {}).get(a),
                role=a,
            )
            for a in self.agents
        }
        self.critical = critical
        self.rights = dict(rights or {})
        self.channels: dict[tuple[str, str], deque[Msg]] = {}
        self.ops: dict[int, OpRecord] = {}
        self.next_op = 1
        #: history[iri][v] = value of completed version v (history[iri][0] is None).
        self.history: dict[str, list[Any]] = {}
        #: Highest version each agent has observed per line.
        self.seen: dict[tuple[str, str], int] = {}
        #: rid -> (directory, scope, floors) of recalls in flight.
        self.recalls: dict[int, tuple[str, list[str] | None, dict[str, int]]] = {}
        self.recalls_done: dict[int, Msg] = {}
        self.next_rid = 1
        self.check_msgpack = check_msgpack
        self.log: deque[str] = deque(maxlen=keep_log)
        self.delivered = 0

    # -- ground truth --------------------------------------------------------
    def latest(self, iri: str) -> tuple[Any, int]:
        h = self.history.get(iri, [None])
        return h[-1], len(h) - 1

    # -- issuing --------------------------------------------------------------
    def issue(self, agent: str, req: Msg) -> int:
        """Hand a client request to ``agent``'s cache now; returns its op id."""
        op = req.get("op")
        if op is None:
            op = self.next_op
            req = dict(req, op=op)
        self.next_op = max(self.next_op, op + 1)
        assert op not in self.ops, f"op id {op} reused"
        iri = req["iri"]
        self.ops[op] = OpRecord(agent, req["t"], iri, copy.deepcopy(req), floor=self.latest(iri)[1])
        self.log.append(f"{agent} <- @client {req}")
        self._route(agent, self.caches[agent].handle(m.CLIENT, req))
        return op

    def load(self, agent: str, iri: str) -> int:
        return self.issue(agent, {"t": "load", "iri": iri})

    def store(self, agent: str, iri: str, value: Msg, tags: list[str] | None = None) -> int:
        return self.issue(agent, {"t": "store", "iri": iri, "value": value, "tags": tags or []})

    def cas(
        self, agent: str, iri: str, version: int, value: Msg, tags: list[str] | None = None
    ) -> int:
        return self.issue(
            agent, {"t": "cas", "iri": iri, "version": version, "value": value, "tags": tags or []}
        )

    def delete(self, agent: str, iri: str) -> int:
        return self.issue(agent, {"t": "delete", "iri": iri})

    def evict(self, agent: str, iri: str) -> int:
        return self.issue(agent, {"t": "evict", "iri": iri})

    def recall(self, directory: str, iris: list[str] | None) -> int:
        """Send a Recall from the reader to ``directory`` now (handled at once)."""
        rid = self.next_rid
        self.next_rid += 1
        scope = iris if iris is not None else sorted(self.history)
        floors = {iri: self.latest(iri)[1] for iri in scope}
        self.recalls[rid] = (directory, iris, floors)
        msg = m.recall(READER, rid, iris)
        self._check_msg(msg)
        self.log.append(f"{directory} <- {READER} {msg}")
        self._route(directory, self.dirs[directory].handle(READER, msg))
        return rid

    # -- delivery -------------------------------------------------------------
    def pending_channels(self) -> list[tuple[str, str]]:
        return sorted(ch for ch, q in self.channels.items() if q)

    def in_flight(self) -> int:
        return sum(len(q) for q in self.channels.values())

    def deliver(self, channel: tuple[str, str]) -> None:
        src, dst = channel
        msg = self.channels[channel].popleft()
        if not self.channels[channel]:
            del self.channels[channel]
        self.log.append(f"{dst} <- {src} {msg}")
        self.delivered += 1
        target: Any = self.caches[dst] if dst in self.caches else self.dirs[dst]
        self._route(dst, target.handle(src, msg))

    def drain(self, limit: int = 100_000) -> None:
        """Deliver until nothing is in flight, always taking the first pending channel."""
        steps = 0
        while True:
            chans = self.pending_channels()
            if not chans:
                return
            self.deliver(chans[steps % len(chans)])
            steps += 1
            if steps > limit:
                raise InvariantViolation(f"no quiescence after {limit} deliveries (livelock?)")

    def _check_msg(self, msg: Msg) -> None:
        if self.check_msgpack:
            packed = msgpack.packb(msg)
            back = msgpack.unpackb(packed)
            assert back == msg, f"message does not survive msgpack: {msg!r}"

    def _route(self, src: str, out: list[tuple[str, Msg]]) -> None:
        for dst, msg in out:
            self._check_msg(msg)
            if dst == m.CLIENT:
                self.log.append(f"@client <- {src} {msg}")
                self._complete(src, msg)
            elif dst == READER:
                self.log.append(f"{READER} <- {src} {msg}")
                self._recall_done(src, msg)
            else:
                assert dst in self.caches or dst in self.dirs, f"message to unknown {dst}: {msg}"
                self.channels.setdefault((src, dst), deque()).append(msg)

    # -- completions and their checks -----------------------------------------
    def _fail(self, text: str) -> None:
        tail = "\n  ".join(self.log)
        raise InvariantViolation(f"{text}\nlast messages:\n  {tail}")

    def _complete(self, agent: str, msg: Msg) -> None:
        rec = self.ops.get(msg["op"])
        if rec is None or rec.agent != agent:
            self._fail(f"{agent} completed unknown op {msg}")
            return
        rec.completions += 1
        if rec.completions > 1:
            self._fail(f"op {msg['op']} completed twice: {msg}")
        rec.result = msg
        iri = rec.iri
        key = (agent, iri)
        _latest_value, latest_v = self.latest(iri)
        if msg["t"] == "failed":
            if msg["error"] == "PermissionDenied" and agent in self.rights and rec.kind != "load":
                return  # judged by the agent's rights; what it changed is checked by the caller
            if rec.kind == "modify" and msg["error"] in ("ModifyFailed", "InvalidInput"):
                return  # its function refused the value it found: nothing was written (history unchanged)
            if rec.kind != "cas" or msg["error"] != "ConflictError":
                self._fail(f"op {msg['op']} ({rec.kind}) failed: {msg}")
            if rec.req["version"] == latest_v:
                self._fail(f"cas {msg['op']} failed although version {latest_v} is current")
            return
        res = msg["result"]
        if rec.kind == "load":
            v = res["version"]
            if v < rec.floor:
                self._fail(
                    f"read {msg['op']} by {agent} saw v{v}, but v{rec.floor} completed before it began"
                )
            if v < self.seen.get(key, 0):
                self._fail(f"{agent}'s version of {iri} went back: v{v} after v{self.seen[key]}")
            hist = self.history.get(iri, [None])
            if v >= len(hist) or hist[v] != res["value"]:
                self._fail(
                    f"read {msg['op']} returned {res['value']!r} v{v}, never written as such"
                )
            if res["state"] not in ("S", "E", "M"):
                self._fail(f"read {msg['op']} left state {res['state']}")
            self.seen[key] = v
        elif rec.kind in ("store", "cas", "delete", "modify"):
            v = res["version"]
            if v != latest_v + 1:
                self._fail(
                    f"write {msg['op']} by {agent} made v{v}, but the last completed write is v{latest_v}"
                )
            if rec.kind == "cas" and rec.req["version"] != latest_v:
                self._fail(
                    f"cas {msg['op']} expected v{rec.req['version']} but succeeded over v{latest_v}"
                )
            value = None if rec.kind == "delete" else rec.req["value"] if rec.kind != "modify" else res["value"]
            if rec.kind == "modify" and res["value"] != rec.req["fn"](copy.deepcopy(_latest_value)):
                self._fail(f"modify {msg['op']} made {res['value']!r}, not fn of the latest completed v{latest_v}")
            self.history.setdefault(iri, [None]).append(value)
            self.seen[key] = v
            tags = set(rec.req.get("tags") or [])
            if rec.kind != "delete":
                want = "write_through" if tags & self.critical else "write_back"
                if res["policy"] != want:
                    self._fail(f"write {msg['op']} policy {res['policy']}, want {want}")
            if res["policy"] == "write_through":
                durable = self.home.l0.get(iri, (None, 0))
                if durable[1] < v:
                    self._fail(f"write-through {msg['op']} completed before home held v{v} durably")
            if res["state"] != "M":
                self._fail(f"write {msg['op']} completed in state {res['state']}")
        elif rec.kind == "evict" and res["state"] != "I":
            self._fail(f"evict {msg['op']} left {res['state']}")

    def _recall_done(self, directory: str, msg: Msg) -> None:
        rid = msg["rid"]
        if rid not in self.recalls or rid in self.recalls_done:
            self._fail(f"unexpected or repeated Recall-Ack {msg}")
        self.recalls_done[rid] = msg
        _d, _scope, floors = self.recalls[rid]
        for iri, floor in floors.items():
            if self.directory_for(iri) != directory:
                continue
            have = self.home.load(iri)[1]
            if have < floor:
                self._fail(
                    f"recall {rid} acked but home has v{have} of {iri}, v{floor} completed before"
                )

    # -- invariants --------------------------------------------------------------
    def iris(self) -> list[str]:
        found = set(self.history)
        for c in self.caches.values():
            found.update(c._lines)
        for d in self.dirs.values():
            found.update(d._lines)
        return sorted(found)

    def _in_flight_to(self, dst: str, iri: str, kinds: set[str]) -> bool:
        for (_s, d), q in self.channels.items():
            if d == dst and any(x.get("iri") == iri and x["t"] in kinds for x in q):
                return True
        line = self.caches[dst]._lines.get(iri)
        return line is not None and any(x["t"] in kinds for _s, x in line.deferred)

    def check(self) -> None:
        """The invariants that hold in every reachable state."""
        for iri in self.iris():
            value, version = self.latest(iri)
            d = self.dirs[self.directory_for(iri)]
            info = d.inspect(iri)
            dstate, owner, sharers = info["directory"], info["owner"], set(info["sharers"])
            writers, readers = [], []
            for a, c in self.caches.items():
                hit = c.lookup(iri)
                if hit is None:
                    continue
                st, v, n = hit
                if (v, n) != (value, version):
                    self._fail(
                        f"{a} holds {iri} in {st} as v{n} {v!r}; last completed write is v{version} {value!r}"
                    )
                (writers if st in ("E", "M") else readers).append(a)
                # No untracked copy: the directory knows of it, or a message revoking it is on its way.
                if st in ("E", "M"):
                    tracked = owner == a or (dstate == "S_D" and a in sharers)
                    if not tracked and not self._in_flight_to(a, iri, {m.FWD_GET_M, m.FWD_GET_S}):
                        self._fail(f"{a} holds {iri} in {st} untracked (directory {info})")
                else:
                    # (an upgrade the directory already ordered makes ``a`` the owner)
                    tracked = (a in sharers and dstate in ("S", "S_D")) or owner == a
                    # (an upgrade already overtaken by another GetM gets a Fwd-GetM next)
                    revoking = {m.INV, m.FWD_GET_M, m.FWD_GET_S}
                    if not tracked and not self._in_flight_to(a, iri, revoking):
                        self._fail(f"{a} holds {iri} in S untracked (directory {info})")
            if len(writers) > 1 or (writers and readers):
                self._fail(f"single writer broken on {iri}: E/M at {writers}, S at {readers}")
            # Directory shape.
            if dstate == "I" and (owner is not None or sharers):
                self._fail(f"directory I of {iri} with owner/sharers: {info}")
            if dstate == "EM" and (owner is None or sharers):
                self._fail(f"directory EM of {iri} malformed: {info}")
            if dstate == "S" and (owner is not None or not sharers):
                self._fail(f"directory S of {iri} malformed: {info}")
            if dstate == "S_D" and owner is not None:
                self._fail(f"directory S_D of {iri} with an owner: {info}")
            if dstate in ("I", "S") and writers:
                self._fail(f"{writers} hold {iri} E/M while directory is {dstate}")
            # Home never ahead of the truth; current whenever no cache may own the line.
            hv, hn = self.home.load(iri)
            # A write-through write applied (MW_A) but not yet acked may already be home.
            wt_pending = any(c.state(iri) == "MW_A" for c in self.caches.values())
            if wt_pending and dstate in ("I", "S"):
                self._fail(f"a write-through of {iri} is in flight while directory is {dstate}")
            if hn > version + (1 if wt_pending else 0):
                self._fail(f"home has v{hn} of {iri}, newer than the last completed v{version}")
            if dstate in ("I", "S") and (hv, hn) != (value, version):
                self._fail(
                    f"directory {dstate} but home has v{hn} of {iri}, last completed v{version}"
                )
        for a, c in self.caches.items():
            for iri, line in c._lines.items():
                if line.state in CACHE_STABLE and line.deferred:
                    self._fail(f"{a} has requests deferred on {iri} in stable {line.state}")
            self._check_capacity_books(a, c)

    def _check_capacity_books(self, agent: str, cache: Any) -> None:
        """The cache's O(1) capacity bookkeeping says what a scan of its lines says."""
        lines = cache._lines
        away = {i for i, ln in lines.items() if ln.state == "I" or ln.state in LEAVING}
        if cache._away != away:
            self._fail(f"{agent}: lines in I or leaving are {sorted(away)}, its books say {sorted(cache._away)}")
        if cache._held() != len(lines) - len(away):
            self._fail(f"{agent}: holds {len(lines) - len(away)} slots, its books say {cache._held()}")
        if set(cache._lru) | cache._untouched != set(lines) or set(cache._lru) & cache._untouched:
            self._fail(f"{agent}: LRU order {list(cache._lru)} + untouched {cache._untouched} != lines {sorted(lines)}")
        if [ln.used for ln in (lines[i] for i in cache._lru)] != sorted(lines[i].used for i in cache._lru):
            self._fail(f"{agent}: LRU order {list(cache._lru)} is not the order of use")
        idle = [(ln.used, i) for i, ln in lines.items() if ln.state in ("S", "E", "M") and not ln.ops and not ln.busy]
        scanned = min(idle)[1] if idle else None
        if cache._victim() != scanned:
            self._fail(f"{agent}: the least recently used idle line is {scanned}, its books say {cache._victim()}")

    def check_quiescent(self) -> None:
        """With nothing in flight: stable states everywhere and directory <-> caches agreement."""
        if self.in_flight():
            self._fail(f"not quiescent: {self.in_flight()} messages in flight")
        self.check()
        for a, c in self.caches.items():
            for iri, line in c._lines.items():
                if line.state not in CACHE_STABLE or line.ops or line.deferred:
                    self._fail(
                        f"{a} stuck on {iri}: {line.state}, ops {list(line.ops)}, deferred {list(line.deferred)}"
                    )
        for a, c in self.caches.items():
            held = [iri for iri, line in c._lines.items() if line.state in ("S", "E", "M")]
            if len(held) > c.capacity:
                self._fail(f"{a} holds {held} at quiescence, capacity {c.capacity}")
        for name, d in self.dirs.items():
            for iri, dl in d._lines.items():
                if dl.state == "S_D" or dl.deferred:
                    self._fail(f"{name} stuck on {iri}: {dl}")
            if d._recalls:
                self._fail(f"{name} has unanswered recalls")
        for iri in self.iris():
            info = self.dirs[self.directory_for(iri)].inspect(iri)
            states = {a: c.state(iri) for a, c in self.caches.items()}
            held = {a: s for a, s in states.items() if s != "I"}
            if info["directory"] == "I" and held:
                self._fail(f"directory I of {iri} but caches {held}")
            if info["directory"] == "S" and held != {a: "S" for a in info["sharers"]}:
                self._fail(f"directory S{info['sharers']} of {iri} but caches {held}")
            if info["directory"] == "EM" and (
                len(held) != 1 or held.get(info["owner"]) not in ("E", "M")
            ):
                self._fail(f"directory EM({info['owner']}) of {iri} but caches {held}")
        missing = [op for op, r in self.ops.items() if r.completions != 1]
        if missing:
            self._fail(
                f"ops not completed exactly once: {[(op, self.ops[op].req) for op in missing]}"
            )
        open_recalls = sorted(set(self.recalls) - set(self.recalls_done))
        if open_recalls:
            self._fail(f"recalls never acked: {open_recalls}")

    def all_readable(self) -> set[str]:
        return READABLE

    # -- snapshot / restore (exhaustive exploration) ---------------------------
    def snapshot(self) -> list[Any]:
        """Everything that decides the future of this net, as canonical plain data."""
        return [
            [c.snapshot() for _a, c in sorted(self.caches.items())],
            [d.snapshot() for _n, d in sorted(self.dirs.items())],
            self.home.snapshot(),
            [[s, d, list(q)] for (s, d), q in sorted(self.channels.items()) if q],
            [
                [op, r.agent, r.kind, r.iri, r.req, r.floor, r.completions]
                for op, r in sorted(self.ops.items())
            ],
            [[k, v] for k, v in sorted(self.history.items())],
            [[a, i, v] for (a, i), v in sorted(self.seen.items())],
            [[rid, d, s, sorted(f.items())] for rid, (d, s, f) in sorted(self.recalls.items())],
            sorted(self.recalls_done),
            self.next_op,
            self.next_rid,
        ]

    def restore(self, snap: list[Any]) -> None:
        caches, dirs, home, chans, ops, history, seen, recalls, rdone, next_op, next_rid = snap
        for c, cs in zip((c for _a, c in sorted(self.caches.items())), caches, strict=True):
            c.restore(cs)
        for d, ds in zip((d for _n, d in sorted(self.dirs.items())), dirs, strict=True):
            d.restore(ds)
        self.home.restore(home)
        self.channels = {(s, d): deque(q) for s, d, q in chans}
        self.ops = {
            op: OpRecord(agent, kind, iri, req, floor, completions)
            for op, agent, kind, iri, req, floor, completions in ops
        }
        self.history = {k: list(v) for k, v in history}
        self.seen = {(a, i): v for a, i, v in seen}
        self.recalls = {rid: (d, s, dict(f)) for rid, d, s, f in recalls}
        self.recalls_done = {rid: {} for rid in rdone}
        self.next_op = next_op
        self.next_rid = next_rid
        self.log.clear()
