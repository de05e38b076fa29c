"""Framing a gathered scope in another actor: what lets L3's worker pool spread across nodes.

A projection has two halves. **Gathering** reads the blackboard graph, the
line registry and the permissions — one service, in the process that opened
the memory — and yields a small scratch store of exactly what the role may
read. **Framing** runs the frame's SPARQL CONSTRUCT on that store, frames the
JSON-LD (pyld) and fits the budget (token counting): CPU work that needs
nothing but the scratch store, the frame and the counter.

With ``l3.framers`` (implied on Ray) each worker ``l3:worker:<i>`` gathers and
sends the scratch store, as N-Quads bytes, to its framer ``l3:framer:<i>``,
which may run on another node; the framer answers with the framed result and
the worker keeps the view (the view cache lives beside the graph). The worker
never waits: its caller's reply is deferred until the framer's answer comes.
A framer answers every job, with the error if framing failed (a frame that
fails is ``InvalidInput``, anything else ``ActorCrashed``), so no caller is
left hanging by a bad frame; a framer whose process is lost fails the jobs in
flight with ``ActorUnavailable`` and its worker frames by itself from then on.
"""

from __future__ import annotations

import contextlib
import dataclasses
from collections.abc import Callable, Mapping
from typing import Any

import pyoxigraph as ox

from gliding_actors import errors
from gliding_actors.errors import ActorCrashed, GlidingError, InvalidInput, show
from gliding_actors.l1._tokens import TokenCounter, get_counter
from gliding_actors.l2._jsonld import VOCAB
from gliding_actors.l3._frames import PREFIXES, Frame
from gliding_actors.l3._gather import query_scratch
from gliding_actors.l3._ontology import SCOPE_GRAPH
from gliding_actors.l3._shape import frame_nodes, iris_of, shape, to_jsonld_nodes
from gliding_actors.runtime import Context

__all__ = [
    "FRAME",
    "FRAMED",
    "FRAMER_PREFIX",
    "Framer",
    "FramerRecipe",
    "decode_failure",
    "frame_from_plain",
    "frame_to_plain",
    "run_frame",
]

FRAMER_PREFIX = "l3:framer:"
#: worker -> framer: ``{"t": FRAME, "id", "frame": {...}, "nquads": bytes, "graphs": [iri], "max_tokens"}``
FRAME = "l3.frame"
#: framer -> worker: ``{"t": FRAMED, "id", "ok": True, "value": {...}}`` or ``{"ok": False, "error": [type, text]}``
FRAMED = "l3.framed"

_SUMMARIES = f"""SELECT ?n ?summary WHERE {{
  GRAPH <{SCOPE_GRAPH}> {{ ?n a <https://gliding-actors.dev/l3#Member> }}
  ?n <{VOCAB}summary> ?summary }} ORDER BY ?n ?summary"""

Query = Callable[[str, dict[str, str]], Any]


def run_frame(query: Query, frame: Frame, budget: int | None, counter: TokenCounter) -> dict[str, Any]:
    """The framing half of a projection: ``{tokens, iris, jsonld, mode, full_tokens}``."""
    try:
        constructed = query(frame.sparql, PREFIXES)
        assert isinstance(constructed, ox.QueryTriples)  # checked at registration
        # In a canonical order: the store's own order depends on how it was filled
        # (gathered here, or loaded from N-Quads in a framer), and a projection must not.
        triples = sorted(constructed, key=str)
    except (SyntaxError, RuntimeError, ValueError, TypeError, OSError) as exc:
        raise InvalidInput(f"frame {show(frame.name)} failed: {exc}") from None
    try:
        nodes = frame_nodes(to_jsonld_nodes(triples), frame.frame, frame.priority)
    except Exception as exc:  # noqa: BLE001 - pyld raises its own errors; the caller gets a typed one
        raise InvalidInput(f"frame {show(frame.name)}: JSON-LD framing failed: {exc}") from None

    def summaries() -> dict[str, str]:
        out: dict[str, str] = {}
        rows = query(_SUMMARIES, PREFIXES)
        assert isinstance(rows, ox.QuerySolutions)
        for row in rows:
            subject, summary = row[0], row[1]
            if subject is not None and summary is not None:
                out.setdefault(str(subject.value), str(summary.value))
        return out

    shaped = shape(nodes, drop=frame.drop, max_tokens=budget, counter=counter, summaries=summaries)
    return {
        "tokens": shaped.tokens,
        "iris": iris_of(shaped.jsonld),
        "jsonld": shaped.jsonld,
        "mode": shaped.mode,
        "full_tokens": shaped.full_tokens,
    }


def frame_to_plain(frame: Frame) -> dict[str, Any]:
    """A frame as msgpack-plain data (it crosses to the framer with every job)."""
    return {
        "name": frame.name,
        "sparql": frame.sparql,
        "frame": dict(frame.frame),
        "priority": list(frame.priority),
        "drop": list(frame.drop),
    }


def frame_from_plain(plain: Mapping[str, Any]) -> Frame:
    """The frame a worker sent; InvalidInput if it is not what :func:`frame_to_plain` makes."""
    try:
        return Frame(
            name=str(plain["name"]),
            description="",
            sparql=str(plain["sparql"]),
            frame=dict(plain["frame"]),
            priority=tuple(str(p) for p in plain["priority"]),
            drop=tuple(str(d) for d in plain["drop"]),
        )
    except (KeyError, TypeError, ValueError) as exc:
        raise InvalidInput(f"{FRAME}: the frame is not a sent frame: {exc}", path=("frame",)) from None


def decode_failure(error: Any, framer: str) -> GlidingError:
    """The typed error a framer's failure answer stands for."""
    kind, text = (str(error[0]), str(error[1])) if isinstance(error, list) and len(error) == 2 else ("", repr(error))
    found = getattr(errors, kind, None)
    if isinstance(found, type) and issubclass(found, GlidingError) and found not in (ActorCrashed,):
        with contextlib.suppress(TypeError):  # an error class with a different constructor
            return found(text)
    return ActorCrashed(framer, f"{kind}: {text}")


class Framer:
    """Behaviour of ``l3:framer:<i>``: frames one gathered scope per message and answers it."""

    def __init__(self, counter: TokenCounter) -> None:
        self._counter = counter

    def receive(self, message: Any, ctx: Context) -> Any:
        kind = message.get("t") if isinstance(message, dict) else None
        if kind != FRAME or ctx.sender is None:
            raise InvalidInput(f"an L3 framer takes {show(FRAME)} jobs from its worker, not {show(message)}")
        job = message.get("id")
        try:
            nquads = message.get("nquads")
            graphs = message.get("graphs")
            if not isinstance(nquads, bytes) or not isinstance(graphs, list):
                raise InvalidInput(f"{FRAME}: nquads are bytes and graphs a list of IRIs", path=("nquads",))
            store = ox.Store()
            try:
                store.load(nquads, format=ox.RdfFormat.N_QUADS)
                data = [ox.NamedNode(str(g)) for g in graphs]
            except (SyntaxError, ValueError) as exc:
                raise InvalidInput(f"{FRAME}: the scope does not parse: {exc}", path=("nquads",)) from None
            frame = frame_from_plain(message.get("frame") or {})
            budget = message.get("max_tokens")
            value = run_frame(
                lambda sparql, prefixes: query_scratch(store, data, sparql, prefixes),
                frame,
                budget if isinstance(budget, int) else None,
                self._counter,
            )
            reply: dict[str, Any] = {"t": FRAMED, "id": job, "ok": True, "value": value}
        except Exception as exc:  # noqa: BLE001 - answered, not crashed: its worker's caller must not hang
            # a GlidingError keeps its class on the worker's side; anything else becomes ActorCrashed
            reply = {"t": FRAMED, "id": job, "ok": False, "error": [type(exc).__name__, str(exc)]}
        ctx.send(ctx.sender, reply)
        return None


@dataclasses.dataclass(frozen=True)
class FramerRecipe:
    """How to build a framer where it runs (picklable): the token counter by name."""

    counter: str

    def __call__(self) -> Framer:
        return Framer(get_counter(self.counter))
