"""The directory controller of the MESI protocol (the home of every line), as a plain class.

A :class:`DirectoryController` orders the requests for the lines it is home of,
tracks who shares a line and who owns it, and reads / writes the line's data
through a :class:`Home` (in production: L2, and L0 for durable writes). Like
the cache controller it is a pure ``handle(src, msg) -> messages`` machine:
no blocking, no clock, no randomness, so an actor or a simulator hosts it.

Why the shape:

* **One transient state, per-line queues.** The only directory state that
  must wait is ``S_D`` (a GetS was forwarded to the owner and home has not got
  the data yet). GetS / GetM for that line wait in the line's own deferred queue;
  every other line keeps flowing, and Put* / WT / Data are never deferred (that
  is what keeps an evicting or write-through owner from deadlocking with us).
* **E and M are one directory state, EM.** The owner turns E into M silently,
  so the directory cannot know which it holds; it forwards to the owner either
  way, and a recall treats every EM line as possibly dirty.
* **Recall.** A multi-line reader (flush, SPARQL, projections) sends
  ``Recall`` with a set of IRIs (or None for every line this directory knows);
  each EM line gets a ``Fwd-GetS`` whose requester is the directory itself, so
  the owner keeps an S copy (reads still hit) and sends the data home once.
  ``Recall-Ack`` goes back when every line in scope is home (I or S).
"""

from __future__ import annotations

import dataclasses
from collections import deque
from collections.abc import Iterable, Mapping
from typing import Any, Protocol

from gliding_actors.coherence import _messages as m
from gliding_actors.coherence._messages import Meta, Msg, Value
from gliding_actors.coherence._states import D_EM, D_I, D_S, D_SD, DIR_STATES, ProtocolError
from gliding_actors.errors import StorageError

__all__ = ["DirectoryController", "Home"]

Out = list[tuple[str, Msg]]

class Home(Protocol):
    """Where a directory keeps the data of the lines it is home of.

    Both calls are synchronous and must not call back into the protocol.
    """

    def load(self, iri: str) -> tuple[Value, int]:
        """``(value, version)`` of the line; ``(None, 0)`` if it was never written."""
        ...

    def meta_of(self, iri: str) -> Meta:
        """``{"tags", "graph"}`` of the version home holds (None when unknown).

        Sent with the data, so a cache that fetched a line from home knows its
        tags and graph: a tag-less delete of a critical line stays write-through.
        """
        ...

    def store(self, iri: str, value: Value, version: int, durable: bool, meta: Meta) -> None:
        """Keep ``version`` of the line (``value`` None is a tombstone).

        ``durable``: a write-through write; it must be on stable storage (L2 and
        L0 with sync) when this returns. ``meta`` is
        ``{"tags": [...], "graph": str | None}`` of the write that made this
        version (None if unknown), for home's indexes. The directory only calls
        this with a version newer than the one home holds, or equal to it for
        a durable store.
        """
        ...

    def fence(self, iri: str) -> int:
        """Number the line's value above every version a crash may have lost; return the new version.

        Called when recovery serves the line from home in place of a dead
        cache's copy: that copy may have acknowledged versions home never saw,
        and the next write must not number its value with one of them. A home
        that cannot (a test's) returns the version it holds.
        """
        ...


@dataclasses.dataclass
class _DirLine:
    state: str = D_I
    owner: str | None = None
    sharers: set[str] = dataclasses.field(default_factory=set)
    #: In S_D: the old owner whose Data we wait for.
    fwd_from: str | None = None
    #: In S_D: the incarnation the requester's GetS carried (0 for a first life),
    #: for the Data home sends it if the old owner dies (see ``reclaim``).
    fwd_inc: int = 0
    deferred: deque[tuple[str, Msg]] = dataclasses.field(default_factory=deque)


@dataclasses.dataclass
class _Recall:
    src: str
    rid: int
    pending: set[str]
    fetched: list[str]
    msgs: int


@dataclasses.dataclass
class _Census:
    """A rebuild in progress: who is still to answer, what they said, what arrived meanwhile."""

    waiting: set[str]
    #: which census of this shard it is (1 for the first after a crash): an answer to another is stale
    number: int = 1
    #: the lines the dead directory had waiting in S_D (:meth:`DirectoryController.open_line` rows)
    open_lines: dict[str, list[Any]] = dataclasses.field(default_factory=dict)
    held: dict[str, dict[str, str]] = dataclasses.field(default_factory=dict)
    deferred: dict[str, dict[str, list[tuple[str, str]]]] = dataclasses.field(default_factory=dict)
    coming: dict[str, set[str]] = dataclasses.field(default_factory=dict)
    putting: dict[str, set[str]] = dataclasses.field(default_factory=dict)
    #: (sender or None for an outside request, message, the host's reply handle), in arrival order
    held_back: list[tuple[str | None, Any, object]] = dataclasses.field(default_factory=list)


class DirectoryController:
    """Home directory of a set of lines: orders requests, tracks owner and sharers.

    ``name`` is this directory's address (caches send to it; ``Fwd-GetS`` whose
    ``req`` is ``name`` is a recall).
    """

    def __init__(self, name: str, home: Home) -> None:
        self.name = name
        self.home = home
        self._lines: dict[str, _DirLine] = {}
        self._recalls: list[_Recall] = []
        #: ``(iri, version, served)`` each time recovery served a line from home
        #: in place of a dead cache's copy: writes newer than ``version`` died
        #: with it, and home now serves that value as version ``served``
        #: (:meth:`Home.fence`). Appended only by :meth:`reclaim` and
        #: :meth:`orphaned`; whoever keeps the record of completed writes reads
        #: it (and may clear it).
        self.fallbacks: list[tuple[str, int, int]] = []
        #: the rebuild after a crash, while it waits for the caches (None: serving)
        self._census: _Census | None = None
        #: copies the last rebuild could not place (transient at the crash)
        self.recovery_notes: list[str] = []

    # -- public surface -----------------------------------------------------
    def handle(self, src: str, msg: Msg) -> list[tuple[str, Msg]]:
        """Consume one message; return ``(destination, message)`` pairs to send."""
        out: Out = []
        kind = msg.get("t")
        if kind == m.RECALL:
            self._recall(src, msg, out)
            return out
        iri = msg.get("iri")
        if kind not in m.PROTOCOL_KINDS or not isinstance(iri, str):
            raise ProtocolError(f"{self.name}: not a protocol message for a directory: {msg!r}")
        line = self._line(iri)
        if kind in (m.GET_S, m.GET_M) and (line.state == D_SD or line.deferred):
            line.deferred.append((src, msg))
        else:
            self._dispatch(iri, line, src, msg, out)
        self._settle(iri, line, out)
        return out

    def inspect(self, iri: str) -> dict[str, Any]:
        """``{"directory": I|S|EM|S_D, "owner": str|None, "sharers": sorted ids}``."""
        line = self._lines.get(iri)
        if line is None:
            return {"directory": D_I, "owner": None, "sharers": []}
        return {"directory": line.state, "owner": line.owner, "sharers": sorted(line.sharers)}

    def l0_state(self, iri: str) -> str:
        """The line's state as L0 records it (``L0Entry.mesi_state``): the directory's view, in MESI letters.

        ``I``: no cache holds the line. ``S``: caches hold read-only copies of
        the version home holds (``S_D`` too: the old owner is turning into a
        sharer). ``M``: one cache owns the line and may write newer versions
        before home hears of them; the directory cannot tell E from M (E→M is
        silent), so it never records ``E``.
        """
        line = self._lines.get(iri)
        if line is None or line.state == D_I:
            return "I"
        return "M" if line.state == D_EM else "S"

    def lines(self) -> list[str]:
        """IRIs this directory currently tracks (not I, or with requests waiting), sorted."""
        return sorted(self._lines)

    @staticmethod
    def _row(iri: str, ln: _DirLine) -> list[Any]:
        return [
            iri,
            ln.state,
            ln.owner,
            sorted(ln.sharers),
            ln.fwd_from,
            [[s, d] for s, d in ln.deferred],
            *([ln.fwd_inc] if ln.fwd_inc else []),
        ]

    @staticmethod
    def _from_row(row: list[Any]) -> _DirLine:
        _iri, state, owner, sharers, fwd_from, deferred, *fwd_inc = row
        if state not in DIR_STATES:
            raise ValueError(f"unknown directory state {state!r}")
        return _DirLine(
            state, owner, set(sharers), fwd_from, fwd_inc[0] if fwd_inc else 0, deque((s, d) for s, d in deferred)
        )

    def open_line(self, iri: str) -> list[Any] | None:
        """``iri``'s snapshot row if it is waiting in S_D (an open transaction), else None.

        A line in S_D holds what no cache can tell a census: which owner's
        Data it waits for, for whom, and the requests queued behind it. The
        host keeps these rows where a crash of the directory cannot lose them
        (see :meth:`begin_census`).
        """
        line = self._lines.get(iri)
        return None if line is None or line.state != D_SD else self._row(iri, line)

    def open_lines(self) -> dict[str, list[Any]]:
        """Every line waiting in S_D, as :meth:`open_line` rows."""
        return {iri: self._row(iri, ln) for iri, ln in self._lines.items() if ln.state == D_SD}

    def snapshot(self) -> Msg:
        """The whole controller state as canonical plain data (not the home's contents)."""
        lines = [self._row(iri, ln) for iri, ln in sorted(self._lines.items())]
        recalls = [
            [r.src, r.rid, sorted(r.pending), list(r.fetched), r.msgs] for r in self._recalls
        ]
        return {"name": self.name, "lines": lines, "recalls": recalls}

    def restore(self, snap: Msg) -> None:
        """Replace the whole state with ``snap`` (from :meth:`snapshot`)."""
        if snap["name"] != self.name:
            raise ValueError(f"snapshot of {snap['name']!r} restored into {self.name!r}")
        self._lines = {row[0]: self._from_row(row) for row in snap["lines"]}
        self._recalls = [
            _Recall(src, rid, set(p), list(f), n) for src, rid, p, f, n in snap["recalls"]
        ]

    # -- recovery (a crashed cache, a crashed directory) ---------------------
    def reclaim(self, cache: str) -> list[tuple[str, Msg]]:
        """Forget every copy ``cache`` held: it crashed and restarted empty.

        Its exclusive lines go back to I, so the last version home holds comes
        back (a dirty copy it held is lost; the caller reports which); it
        leaves every sharer set; requests it had queued here are dropped. A
        line waiting in S_D for the Data this cache will never send is
        answered from home instead: that Data would have been the lost version.

        Also exact in the middle of a transaction, with the cache's host doing
        its part (``CacheActor``): the reborn cache answers the forwards and
        Invs its dead self never got (Inv-Ack; a Fwd-GetM becomes a ``Nack``,
        see :meth:`orphaned`; a Fwd-GetS is answered here, from home) and drops
        answers to its dead self's requests (``Reclaim-Ack`` and incarnations).
        Each line served from home in place of the dead copy is appended to
        :attr:`fallbacks`. Not recovered: (a) forwards and Invs the cache had
        *deferred* when it died (it was itself mid-transaction on that line):
        their requester keeps waiting; (b) a cache that died waiting for a
        GetM's Data or Inv-Acks: the line is freed here at once while other
        caches may still be giving it up (an Inv or Fwd-GetM to them in flight
        or deferred), so a new owner could meet a copy not yet surrendered.
        The fault injector (``tools.reliability._faults``) crashes a
        cache only outside (a) and (b).
        """
        out: Out = []
        for iri in sorted(self._lines):
            line = self._lines[iri]
            line.deferred = deque((s, d) for s, d in line.deferred if s != cache)
            if line.state == D_EM and line.owner == cache:
                line.owner, line.state = None, D_I
                self._fall_back(iri)
            elif line.state == D_S:
                line.sharers.discard(cache)
                if not line.sharers:
                    line.state = D_I
            elif line.state == D_SD:
                line.sharers.discard(cache)
                if line.fwd_from == cache:
                    line.fwd_from = None
                    self._fall_back(iri)
                    for sharer in sorted(line.sharers):
                        if sharer != self.name:
                            reply = self._from_home(iri, acks=0, excl=False, n=2)
                            out.append((sharer, m.with_inc(reply, line.fwd_inc)))
                    line.sharers.discard(self.name)
                    line.fwd_inc = 0
                    line.state = D_S if line.sharers else D_I
            self._settle(iri, line, out)
        return out

    def orphaned(self, iri: str, req: str, inc: int = 0) -> list[tuple[str, Msg]]:
        """A Fwd-GetM for ``req`` reached a cache reborn after a crash (its ``Nack``).

        The dead owner's data is gone and ``req`` still waits for it (nobody
        else will send it: the directory already made ``req`` the owner), so
        answer it from home, as the owner would have (no Inv-Acks: the line
        was exclusive). ``inc`` is the requester's incarnation from the
        forward: if the requester died too, its next life drops this Data.
        Recorded in :attr:`fallbacks`.
        """
        self._fall_back(iri)
        return [(req, m.with_inc(self._from_home(iri, acks=0, excl=False, n=3), inc))]

    def _fall_back(self, iri: str) -> None:
        """Serve ``iri`` from home from now on, fenced above the dead copy's versions."""
        version = self.home.load(iri)[1]
        self.fallbacks.append((iri, version, self.home.fence(iri)))

    # -- recovery after a crash: the census -----------------------------------
    def begin_census(
        self,
        caches: Iterable[str],
        *,
        number: int = 1,
        carried: Iterable[tuple[str, Msg]] = (),
        open_lines: Mapping[str, list[Any]] | None = None,
    ) -> list[tuple[str, Msg]]:
        """Start rebuilding this (reborn, empty) directory: ask each cache in ``caches`` what it holds.

        Returns the ``Census`` messages to send. Until every cache has answered
        (:meth:`census_answer`) :attr:`recovering` is true and the host hands
        every other message to :meth:`hold_back` instead of serving it. With no
        cache to ask, the directory is rebuilt (empty) at once.

        A directory that crashed *during* a census starts the next one with
        ``number`` one higher (its ``Census`` then carries ``n``, and an answer
        to the dead census is dropped) and ``carried``: the protocol messages
        the dead census had held back, ``(sender, message)`` in arrival order,
        which its host kept. Nothing was served meanwhile, so they are still
        requests no directory has seen, ahead of anything that arrives now.

        ``open_lines``: the lines the dead directory had waiting in S_D, as its
        host kept them (:meth:`open_line`). They are restored as they were,
        whatever the caches report of them: the owner's Data is still on its
        way (or its Fwd-GetS still is), and the requests queued behind them
        are served when it arrives.
        """
        census = _Census(waiting=set(caches), number=number, open_lines=dict(open_lines or {}))
        census.held_back = [(sender, message, None) for sender, message in carried]
        if not census.waiting:  # (then nothing was carried: only a cache sends protocol messages)
            self.recovery_notes = self.rebuild({}, deferred={}, coming={}, putting={}, open_lines=census.open_lines)
            return []
        self._census = census
        ask: Msg = {"t": m.CENSUS} if number == 1 else {"t": m.CENSUS, "n": number}
        return [(cache, dict(ask)) for cache in sorted(census.waiting)]

    @property
    def recovering(self) -> bool:
        """True from :meth:`begin_census` until the last cache has answered."""
        return self._census is not None

    def hold_back(self, sender: str | None, message: Any, reply: object = None) -> None:
        """Keep what arrived during the census, in arrival order, to be served after the rebuild.

        ``sender`` is a protocol message's sender, None for an outside request
        whose ``reply`` handle (opaque here) the host answers when it runs it.
        """
        census = self._census
        if census is None:
            raise ProtocolError(f"{self.name}: nothing to hold back, no census in progress")
        census.held_back.append((sender, message, reply))

    def census_answer(self, src: str, message: Msg) -> list[tuple[str | None, Any, object]] | None:
        """Take ``src``'s Census-Ack; once every cache has answered, rebuild.

        Returns None while answers are still awaited (or when ``src`` was not
        asked: nothing to rebuild from it); then everything held back, in
        arrival order, for the host to serve now that the directory is whole.
        """
        census = self._census
        if census is None or src not in census.waiting or message.get("n", 1) != census.number:
            return None  # not asked, or an answer to a census that died with its directory
        census.waiting.discard(src)
        census.held[src] = dict(message.get("lines") or {})
        census.deferred[src] = {
            str(iri): [(str(k), str(r)) for k, r in owed] for iri, owed in (message.get("deferred") or {}).items()
        }
        # Per-pair FIFO: what this cache sent before its answer is held back
        # here; a GetS / GetM among it is a request the dead directory never saw.
        before = [msg for sender, msg, _reply in census.held_back if sender == src and isinstance(msg, dict)]
        census.coming[src] = {str(msg.get("iri")) for msg in before if msg.get("t") in (m.GET_S, m.GET_M)}
        census.putting[src] = {str(msg.get("iri")) for msg in before if msg.get("t") in (m.PUT_M, m.PUT_E, m.WT)}
        if census.waiting:
            return None
        self._census = None
        self.recovery_notes = self.rebuild(
            census.held,
            deferred=census.deferred,
            coming=census.coming,
            putting=census.putting,
            open_lines=census.open_lines,
        )
        return census.held_back

    def rebuild(
        self,
        held: dict[str, dict[str, str]],
        *,
        deferred: dict[str, dict[str, list[tuple[str, str]]]] | None = None,
        coming: dict[str, set[str]] | None = None,
        putting: dict[str, set[str]] | None = None,
        open_lines: Mapping[str, list[Any]] | None = None,
    ) -> list[str]:
        """Take the sharers and owner of every line from what the caches hold.

        ``held`` is ``{cache: {iri: state}}`` for the lines whose home is this
        directory, as each cache reported it. A cache in E or M (or evicting
        one: ``MI_A``/``EI_A``, whose Put is still on its way here) is the
        owner; one in S (or ``SI_A``) a sharer.

        Without ``coming`` (a crash between transactions) a copy in another
        transient state is returned as a note and not placed. With it, the
        census also places copies caught mid-transaction. ``coming`` is
        ``{cache: {iri}}``: the lines whose GetS / GetM from that cache
        reached this directory before the cache's census answer, i.e. requests
        the dead directory never saw (per-pair FIFO); any other request of a
        waiting cache was processed and its answer is on its way from another
        cache. ``deferred`` is ``{cache: {iri: [(kind, requester)]}}``: a
        cache still owing a Fwd-GetM or an Inv-Ack is on its way out of the
        line. So: a processed GetM (IM_AD, SM_AD, IM_A, SM_A) makes the owner,
        a processed GetS (IS_D) a sharer, an upgrade still coming (SM_AD) keeps
        its S copy, a cache in MW_A is the owner (its WT is still coming).

        ``putting`` is ``{cache: {iri}}``: lines with a PutM / PutE / WT from
        that cache still coming. A cache that reports such a line in I, or in
        IS_D / IM_AD with that request still coming (its next life asks again),
        died after sending it: it was the owner, so when nobody else holds the
        line it is placed as owner and its Put, when it is replayed, takes the
        data home instead of being dropped as stale.

        ``open_lines`` (the dead directory's lines in S_D, see
        :meth:`begin_census`) are restored as they were, not placed from the
        caches. Its recalls are not restored: their askers failed with the
        crash, and the S_D lines they opened complete on their own.
        """
        self._lines = {}
        self._recalls = []
        notes: list[str] = []
        exact = coming is not None
        kept = open_lines or {}
        for cache in sorted(held):
            for iri, state in sorted(held[cache].items()):
                if iri in kept:
                    continue
                if exact:
                    owed = {kind for kind, _req in (deferred or {}).get(cache, {}).get(iri, [])}
                    processed = iri not in (coming or {}).get(cache, set())
                    if m.FWD_GET_S in owed:
                        notes.append(f"{cache} holds {iri} in {state} owing a Fwd-GetS")
                        continue
                    if owed or state in ("I", "II_A") or (state in ("IS_D", "IM_AD") and not processed):
                        continue  # on its way out, or not in the line yet
                    if state in ("IM_AD", "SM_AD", "IM_A", "SM_A", "MW_A") and (processed or state != "SM_AD"):
                        state = "M"  # the line is (about to be) its, exclusively
                    elif state in ("IS_D", "SM_AD"):
                        state = "S"  # a GetS answered by an owner's Data on its way, or an upgrade still coming
                if state in ("E", "M", "MI_A", "EI_A"):
                    line = self._line(iri)
                    if line.owner is not None or line.sharers:
                        raise ProtocolError(f"{self.name}: {iri} held exclusively by {cache} and others")
                    line.owner, line.state = cache, D_EM
                elif state in ("S", "SI_A"):
                    line = self._line(iri)
                    if line.owner is not None:
                        raise ProtocolError(f"{self.name}: {iri} shared by {cache} but owned by {line.owner}")
                    line.sharers.add(cache)
                    line.state = D_S
                elif state != "I":
                    notes.append(f"{cache} holds {iri} in transient state {state}")
        for cache in sorted(putting or {}):
            for iri in sorted((putting or {})[cache]):
                state = held.get(cache, {}).get(iri, "I")
                # No data of the line in the putter's copy: it is empty, or a later life of it
                # asks again (that request still coming), so the Put is its dead life's.
                empty = state == "I" or (state in ("IS_D", "IM_AD") and iri in (coming or {}).get(cache, set()))
                if empty and iri not in self._lines and iri not in kept:
                    line = self._line(iri)
                    line.owner, line.state = cache, D_EM
        for iri, row in kept.items():
            self._lines[iri] = self._from_row(row)
        return notes

    # -- internals ---------------------------------------------------------
    def _line(self, iri: str) -> _DirLine:
        line = self._lines.get(iri)
        if line is None:
            line = self._lines[iri] = _DirLine()
        return line

    def _settle(self, iri: str, line: _DirLine, out: Out) -> None:
        """After a line left S_D: answer recalls waiting on it, then run its deferred requests.

        Recalls go first: the data reached home at this very step, and a
        deferred GetM run next could take the line to EM again.
        """
        if line.state != D_SD and self._recalls:
            still: list[_Recall] = []
            for rec in self._recalls:
                rec.pending.discard(iri)
                if rec.pending:
                    still.append(rec)
                else:
                    out.append((rec.src, m.recall_ack(self.name, rec.rid, rec.fetched, rec.msgs)))
            self._recalls = still
        while line.deferred and line.state != D_SD:
            src, msg = line.deferred.popleft()
            self._dispatch(iri, line, src, msg, out)
        if line.state == D_I and not line.deferred:
            del self._lines[iri]

    def _take_home(self, iri: str, msg: Msg, durable: bool) -> None:
        """Store the data in ``msg`` at home if it is newer (or must become durable)."""
        _value, have = self.home.load(iri)
        version = msg["version"]
        if version < have:
            raise ProtocolError(
                f"{self.name}: data v{version} of {iri} is older than home's v{have}"
            )
        if version > have or durable:
            self.home.store(iri, msg["value"], version, durable, msg["meta"])

    def _from_home(self, iri: str, *, acks: int, excl: bool, n: int) -> Msg:
        value, version = self.home.load(iri)
        meta = self.home.meta_of(iri) if version else None
        return m.data(iri, self.name, value, version, meta, acks=acks, excl=excl, n=n)

    def _recall(self, src: str, msg: Msg, out: Out) -> None:
        iris = msg.get("iris")
        scope = sorted(self._lines) if iris is None else sorted(set(iris))
        rec = _Recall(src=src, rid=msg["rid"], pending=set(), fetched=[], msgs=2)
        for iri in scope:
            line = self._lines.get(iri)
            if line is None:
                continue
            if line.state == D_EM:
                owner = line.owner
                assert owner is not None
                out.append((owner, m.fwd_get_s(iri, self.name, self.name, 2)))
                line.sharers = {owner}
                line.fwd_from = owner
                line.owner = None
                line.state = D_SD
                rec.fetched.append(iri)
                rec.msgs += 2  # the Fwd-GetS and the owner's Data
                rec.pending.add(iri)
            elif line.state == D_SD:
                rec.pending.add(iri)
        if rec.pending:
            self._recalls.append(rec)
        else:
            out.append((src, m.recall_ack(self.name, rec.rid, rec.fetched, rec.msgs)))

    def _dispatch(self, iri: str, line: _DirLine, src: str, msg: Msg, out: Out) -> None:
        kind = msg["t"]
        st = line.state
        inc = m.inc_of(msg)
        if kind == m.GET_S:
            if st == D_I:
                out.append((src, m.with_inc(self._from_home(iri, acks=0, excl=True, n=2), inc)))
                line.owner, line.state = src, D_EM
                return
            if st == D_S:
                out.append((src, m.with_inc(self._from_home(iri, acks=0, excl=False, n=2), inc)))
                line.sharers.add(src)
                return
            if st == D_EM and line.owner != src:
                owner = line.owner
                assert owner is not None
                out.append((owner, m.with_inc(m.fwd_get_s(iri, self.name, src, 2), inc)))
                line.sharers = {owner, src}
                line.fwd_from, line.owner, line.state = owner, None, D_SD
                line.fwd_inc = inc
                return
        elif kind == m.GET_M:
            if st == D_I:
                out.append((src, m.with_inc(self._from_home(iri, acks=0, excl=False, n=2), inc)))
                line.owner, line.state = src, D_EM
                return
            if st == D_S:
                others = sorted(line.sharers - {src})
                reply = self._from_home(iri, acks=len(others), excl=False, n=2 + len(others))
                out.append((src, m.with_inc(reply, inc)))
                for sharer in others:
                    out.append((sharer, m.with_inc(m.inv(iri, self.name, src), inc)))
                line.sharers = set()
                line.owner, line.state = src, D_EM
                return
            if st == D_EM and line.owner != src:
                owner = line.owner
                assert owner is not None
                out.append((owner, m.with_inc(m.fwd_get_m(iri, self.name, src, 2), inc)))
                line.owner = src
                return
        elif kind == m.PUT_S:
            # From a sharer, or from a cache we already invalidated / never tracked
            # (its PutS raced an Inv): either way drop it from the sharers and ack.
            line.sharers.discard(src)
            if st == D_S and not line.sharers:
                line.state = D_I
            out.append((src, m.put_ack(iri, self.name)))
            return
        elif kind in (m.PUT_E, m.PUT_M):
            if st == D_EM and line.owner == src:
                if kind == m.PUT_M:
                    self._take_home(iri, msg, durable=False)
                line.owner, line.state = None, D_I
            else:
                # Stale: ownership moved on (a Fwd-GetM / Fwd-GetS overtook this Put);
                # the data already went where it belongs, so only acknowledge. One
                # exception: a PutM from the owner a recall's Fwd-GetS is waiting on
                # (S_D) carries exactly the version that Data will, so home takes it
                # now: if the owner dies before it answers, the Reclaim serves this
                # version from home instead of losing an acknowledged write.
                if kind == m.PUT_M and st == D_SD and src == line.fwd_from:
                    self._take_home(iri, msg, durable=False)
                line.sharers.discard(src)
                if st == D_S and not line.sharers:
                    line.state = D_I
            out.append((src, m.put_ack(iri, self.name)))
            return
        elif kind == m.DATA:
            if st == D_SD and src == line.fwd_from:
                self._take_home(iri, msg, durable=False)
                line.fwd_from, line.fwd_inc = None, 0
                line.state = D_S if line.sharers else D_I
                return
        elif kind == m.WT:
            # From the owner, which holds M and defers any Fwd until our ack, so
            # this is the newest version of the line whatever state we are in.
            try:
                self._take_home(iri, msg, durable=True)
            except StorageError as exc:
                # Home holds the version but L0 refused it: the owner must hear so (it
                # waits for an answer), and this directory goes on serving the line.
                out.append((src, m.wt_nack(iri, self.name, msg["version"], str(exc))))
                return
            out.append((src, m.wt_ack(iri, self.name, msg["version"])))
            return
        raise ProtocolError(f"{self.name}: {kind} from {src} for {iri} in state {st}: {msg!r}")
