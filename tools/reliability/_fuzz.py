"""Fuzzing every input surface: only typed errors, and a refused input changes nothing.

The "bad input" promise (docs/RELIABILITY.md, promise 13), checked by machine instead of by example. The
surfaces are the places text or data from outside enters the library:

* ``jsonld`` — values an agent writes (``write``, ``cas``), publishes, or
  registers as an L3 frame: nested dicts and lists, every JSON-LD keyword,
  ``@context`` of every shape (remote ones among them), non-finite and huge
  numbers, non-string keys, bytes, surrogates, deep nesting;
* ``iri`` — every agent method taking an IRI (read, write, cas, delete,
  evict, attach_to_task, reload, turn ``cites``, intent) and the system's
  ``inspect`` and scoped ``flush``: empty, relative, whitespace, control
  characters, ``<>``, unicode, lone surrogates, 200 kB long, not a string;
* ``sparql`` — ``Agent.query`` with garbage, valid-looking queries, UPDATE
  attempts, ``SERVICE``/``LOAD`` aimed at a live local server, and bindings;
* ``scenario`` — the scenario loader on random YAML and on text- and
  data-level mutations of the repository's own scenarios;
* ``trace`` — ``gliding-actors convert`` (the CLI entry point itself) on
  mutations of a trace recorded at start-up (docs/RECORDING.md);
* ``config`` — :meth:`Config.from_dict` / :meth:`Config.merged` on mappings
  with unknown keys, wrong types, out-of-range, non-finite and huge values;
* ``answer`` — an LLM's reply given to ``Agent.turn_from``: the answer object
  with values of every type, fenced, wrapped in prose, mutated, not text;
* ``dataset`` — ``MemorySystem.import_dataset`` on text mutations of the
  memory's own N-Quads and JSON-LD exports, as every role.

The oracle, the same for every input: the call either returns or raises a
:class:`~gliding_actors.errors.GlidingError`. Anything else — and also
``ActorCrashed``/``ActorUnavailable``/``Timeout``, which are typed but mean the
input broke an actor or hung a wait — is an *untyped error*. When a call on the
memory is refused, :func:`memory_snapshot` taken before and after must be equal
(L0 with versions, graph quads, graph lines, the line → graph registry, every
agent's cache via the board, the registered L3 frames); a lost
compare-and-set (``ConflictError``: a race, not bad input) may only have
moved cache copies. More checks ride along because they are cheap: an
accepted line value reads back equal, an accepted config survives
``to_dict``/``from_dict`` and holds only finite numbers, and after the run a
full flush succeeds and L0 holds every line (``serves_after``: an accepted
input that L0 or the graph refuses later would poison the memory for good).

Remote fetches: a :class:`RemoteServer` on 127.0.0.1 (ephemeral port) that
*would* answer with a valid JSON-LD context or SPARQL result counts every
request; fuzzed ``@context``/``@import``/scoped contexts, frames and
``SERVICE``/``LOAD`` clauses point at it. Any request it receives is a failure
(``remote_fetches``).

Determinism: the generators (``gen_*``) draw every choice from a
``random.Random``. :func:`run_fuzz` gives each surface its own
``random.Random("gliding-actors fuzz <seed> <surface>")`` (string seeds hash
the same in every process), and the memory runs on the simulator with the same
seed and a virtual clock, so a seed repeats the same inputs
(``inputs_digest``, SHA-256 over every input's description) with the same
outcomes. A plain ``Random`` is the bench's driver because a hypothesis draw
costs about a millisecond, and a case takes dozens of choices; the tests
drive the same generators with hypothesis's ``st.randoms()``, so hypothesis
explores and shrinks them there. The oracle never raises: it records, so a
failure is counted and the run goes on.

Entry point for the bench: :func:`run_fuzz`.
"""

from __future__ import annotations

import contextlib
import copy
import hashlib
import io
import json
import math
import random
import reprlib
import tempfile
import threading
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

from gliding_actors.bus import MESSAGE_IRI_PREFIX
from gliding_actors.config import Config
from gliding_actors.errors import ActorUnavailable, ConflictError, GlidingError, Timeout
from gliding_actors.system import MemorySystem

__all__ = [
    "SURFACES",
    "FuzzStats",
    "Fuzzer",
    "RemoteServer",
    "gen_case",
    "memory_snapshot",
    "run_fuzz",
    "snapshot_diff",
]

#: Every input surface, in the order :func:`run_fuzz` drives them.
SURFACES = ("jsonld", "iri", "sparql", "scenario", "trace", "config", "answer", "dataset")

#: Share of the inputs each surface gets in :func:`run_fuzz`. The loaders
#: parse YAML in pure Python (~100 ms a scenario), the memory surfaces take a
#: few milliseconds an input: this spends the time budget evenly-ish.
_WEIGHTS = {"jsonld": 4, "iri": 3, "sparql": 3, "scenario": 1, "trace": 1, "config": 3, "answer": 2, "dataset": 1}

#: Failures kept verbatim in a report (the counts go on past it).
MAX_FAILURES = 20

_ROLES = ("SA", "PA", "DA", "CA", "AA", "system")
_AGENT_OF_ROLE = {role: f"fz-{role.lower()}" for role in _ROLES}
#: Lines jsonld cases write to (a small pool keeps snapshots cheap and makes rewrites, cas and moves likely).
_POOL = ("ex:fuzz/a", "ex:fuzz/b", "task:fuzz-1", "https://example.org/fuzz#c", "urn:fuzz:d")
_GRAPHS = ("shared", "plan", "execution", "review", "decision", "knowledge")
_FRAME_SPARQL = "CONSTRUCT { ?s ?p ?o } WHERE { GRAPH l3:scope { ?s a l3:Member } ?s ?p ?o }"

_SHORT = reprlib.Repr()
_SHORT.maxlevel = 4
_SHORT.maxstring = 60
_SHORT.maxother = 60
_SHORT.maxdict = 5
_SHORT.maxlist = 5
_LONG = reprlib.Repr()
_LONG.maxlevel = 40
_LONG.maxstring = 2000
_LONG.maxother = 2000
_LONG.maxdict = 50
_LONG.maxlist = 50


def _short(value: Any) -> str:
    """A one-line description, safe for any depth (reprlib stops at ``maxlevel``)."""
    return _SHORT.repr(value)


# --------------------------------------------------------------------------- snapshot


def memory_snapshot(memory: MemorySystem) -> dict[str, Any]:
    """Everything a refused call must leave alone, as comparable plain data.

    Messages in flight are delivered first (``quiesce``), so background work an
    earlier call started is not mistaken for the effect of the next one. Parts:
    ``l0`` (every LevelDB key and value: nodes with versions, indexes,
    tombstones, access records), ``graph`` (every quad, N-Quads), ``lines``
    (the graph's node cache: IRI, version, graph, value), ``registry`` (line →
    graph and version, what permission checks read), ``caches`` (each agent's
    published cache lines: state, value, version) and ``frames`` (L3's
    registered frame names).
    """
    memory.quiesce()
    return {
        "l0": memory.l0.raw_items(),
        "graph": memory.graph.dump(),
        "lines": [(n.iri, n.version, n.graph, n.value) for n in memory.graph.lines()],
        "registry": memory.line_graphs.snapshot(),
        "caches": memory.board.holders(),
        "frames": memory.l3.frames.names(),
    }


def snapshot_diff(before: Mapping[str, Any], after: Mapping[str, Any]) -> list[str]:
    """The names of the parts that differ (empty: nothing changed)."""
    return sorted(key for key in set(before) | set(after) if before.get(key) != after.get(key))


# --------------------------------------------------------------------------- remote server


class RemoteServer:
    """A real HTTP server on 127.0.0.1 that would serve anything asked, and counts every request.

    It answers GET and POST with a valid JSON-LD context (and a valid SPARQL
    JSON result for ``/sparql``), so a fetch would *succeed* and change what a
    call returns — a leak cannot hide behind a connection error. Start it with
    ``with RemoteServer() as server``; it stops on exit.
    """

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._paths: list[str] = []
        counter = self

        class Handler(BaseHTTPRequestHandler):
            def _answer(self) -> None:
                counter._record(self.path)
                if self.path.startswith("/sparql"):
                    body = json.dumps({"head": {"vars": ["s"]}, "results": {"bindings": []}}).encode()
                    kind = "application/sparql-results+json"
                else:
                    body = json.dumps({"@context": {"leak": "http://example.org/leak#"}}).encode()
                    kind = "application/ld+json"
                self.send_response(200)
                self.send_header("Content-Type", kind)
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def do_GET(self) -> None:  # noqa: N802 - http.server's naming
                self._answer()

            def do_POST(self) -> None:  # noqa: N802
                self._answer()

            def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 - the base signature
                return

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._server.daemon_threads = True
        self._thread = threading.Thread(target=self._server.serve_forever, name="fuzz-remote", daemon=True)

    def _record(self, path: str) -> None:
        with self._lock:
            self._paths.append(path)

    def __enter__(self) -> RemoteServer:
        self._thread.start()
        return self

    def __exit__(self, *exc_info: object) -> None:
        self._server.shutdown()
        self._server.server_close()
        self._thread.join(timeout=5)

    @property
    def port(self) -> int:
        return int(self._server.server_address[1])

    def url(self, path: str) -> str:
        """An absolute URL on this server (``path`` without a leading slash)."""
        return f"http://127.0.0.1:{self.port}/{path}"

    @property
    def requests(self) -> int:
        with self._lock:
            return len(self._paths)

    @property
    def paths(self) -> list[str]:
        with self._lock:
            return list(self._paths)


# --------------------------------------------------------------------------- generators
#
# Every generator takes a ``random.Random``. The bench passes a plain seeded
# one (fast: ~2 µs a choice, where a hypothesis draw costs ~1 ms, which would
# make 2,000 inputs take minutes); the tests pass ``st.randoms()`` from
# hypothesis, whose every choice is a hypothesis draw, so hypothesis explores
# and shrinks the same generators. One set of generators, two drivers.

_KEYWORDS = (
    "@id", "@context", "@type", "@value", "@language", "@json", "@graph", "@list", "@set",
    "@reverse", "@included", "@nest", "@index", "@direction", "@base", "@vocab", "@import",
    "@version", "@protected", "@propagate", "@container", "@none",
)  # fmt: skip
_TERMS = ("name", "status", "summary", "dependsOn", "p", "task", "verdict", "http://example.org/p", "ex:q")
_BAD_IRIS = (
    "", " ", "rel", "rel/path", "ex:a b", "ex:\x00", "ex:\x7f", "ex:\t", "\n", "ex:<>", "<ex:a>", "ex:\"",
    "ex:{x}", "ex:a\\b", "ex:a^b", "ex:`", "ex:|", "ex:\u00e9", "ex:\u202e", "ex:\ud800", "ex:\udfff",
    ":nothing", "1ex:a", "ex:", "http://", "http://x/%zz", "urn:gliding-actors:message:1",
    "memory:session-", "memory:session-x/turn-1", "_:b0", "ex:a\u2028b", "ex:\ufeff", "ex:a#b#c",
)  # fmt: skip
_HUGE_INTS = (2**63 - 1, 2**63, -(2**63), -(2**63) - 1, 2**64 - 1, 2**64, 10**30, -(10**400), 10**400)
_ODD_FLOATS = (math.nan, math.inf, -math.inf, -0.0, 1e308, 5e-324, 1e-7, 0.1)
_NOT_STRINGS: tuple[Any, ...] = (None, 5, 1.5, b"ex:a", ["ex:a"], {"@id": "ex:a"}, True)
_SPECIAL_CHARS = "<>\"{}|\\^`#@:/?%&=;, \t\n\r'[]()*+$!~"


def _pick(rnd: random.Random, items: Sequence[Any]) -> Any:
    return items[rnd.randrange(len(items))]


def _char(rnd: random.Random, surrogates: bool = True) -> str:
    roll = rnd.random()
    if roll < 0.5:
        return chr(rnd.randrange(0x20, 0x7F))
    if roll < 0.62:
        return str(_pick(rnd, _SPECIAL_CHARS))
    if roll < 0.7:
        return chr(_pick(rnd, (*range(0x20), 0x7F, 0x85, 0xA0, 0x2028, 0x202E, 0xFEFF)))
    if roll < 0.88:
        return chr(rnd.randrange(0xA1, 0xD800))
    if roll < 0.95 or not surrogates:
        return chr(rnd.randrange(0x10000, 0x110000))
    return chr(rnd.randrange(0xD800, 0xE000))


def gen_text(rnd: random.Random, max_size: int = 16, *, surrogates: bool = True) -> str:
    return "".join(_char(rnd, surrogates) for _ in range(rnd.randrange(max_size + 1)))


def gen_iri(rnd: random.Random, remote: Sequence[str] = ()) -> Any:
    """IRIs good and bad, and things that are not strings at all."""
    roll = rnd.randrange(9)
    if roll == 0:
        return _pick(rnd, _BAD_IRIS)
    if roll == 1:
        return _pick(rnd, _POOL)
    if roll == 2:
        scheme = _pick(rnd, ("ex", "http", "https", "urn", "task", "x-y.z+w", "EX", "1x", ""))
        return f"{scheme}:{gen_text(rnd, 24)}"
    if roll == 3:
        return "ex:" + "".join(chr(rnd.randrange(0x21, 0x7F)) for _ in range(rnd.randrange(1, 20)))
    if roll == 4:
        return gen_text(rnd, 30)
    if roll == 5:
        return "ex:" + "a" * rnd.randrange(1_000, 200_000)
    if roll == 6 and remote:
        return _pick(rnd, remote)
    if roll == 7:
        return _pick(rnd, _NOT_STRINGS)
    return "ex:fuzz/" + "".join(_pick(rnd, "abc/#-_.~%") for _ in range(rnd.randrange(1, 8)))


def gen_scalar(rnd: random.Random, remote: Sequence[str] = ()) -> Any:
    roll = rnd.randrange(11)
    if roll == 0:
        return None
    if roll == 1:
        return rnd.random() < 0.5
    if roll == 2:
        return rnd.randrange(-1000, 1000)
    if roll == 3:
        return _pick(rnd, _HUGE_INTS)
    if roll == 4:
        return _pick(rnd, _ODD_FLOATS)
    if roll == 5:
        return rnd.uniform(-1e6, 1e6)
    if roll in (6, 7):
        return gen_text(rnd, 16)
    if roll == 8:
        return _pick(rnd, ("\ud800", "\x00", "a\x00b", "@id", "@type", "_:b1", "ex:x", ""))
    if roll == 9:
        return bytes(rnd.randrange(256) for _ in range(rnd.randrange(4)))
    return gen_iri(rnd, remote)


def gen_key(rnd: random.Random) -> Any:
    roll = rnd.randrange(10)
    if roll < 4:
        return _pick(rnd, _KEYWORDS)
    if roll < 7:
        return _pick(rnd, _TERMS)
    if roll < 9:
        return gen_text(rnd, 8)
    return _pick(rnd, (1, None, 2.5, b"k", True, ("t",), "\ud800"))


def gen_context(rnd: random.Random, remote: Sequence[str] = ()) -> Any:
    """``@context`` values of every shape, remote ones (URL, ``@import``, scoped) among them."""
    url = _pick(rnd, remote) if remote else "http://127.0.0.1:9/unused"
    roll = rnd.randrange(9)
    if roll == 0:
        return url
    if roll == 1:
        return {"@import": url}
    if roll == 2:
        term = _pick(rnd, _TERMS[:5])
        return {term: {"@id": "http://example.org/" + term, "@context": url}}
    if roll == 3:
        return None
    if roll == 4:
        return gen_scalar(rnd, remote)
    if roll == 5:
        return [gen_context(rnd, remote) for _ in range(rnd.randrange(4))]
    local: dict[Any, Any] = {}
    for _ in range(rnd.randrange(1, 5)):
        key = _pick(rnd, (*_TERMS, "@vocab", "@base", "@language", "@version", "@protected", "@propagate",
                          "@direction", "@type"))
        if rnd.random() < 0.5:
            definition: Any = {"@id": gen_iri(rnd, remote) if rnd.random() < 0.7 else _pick(rnd, _KEYWORDS)}
            for extra, options in (
                ("@type", ("@id", "@json", "@vocab", "xsd:integer", "@none", 5)),
                ("@container", ("@list", "@set", "@index", "@language", "@graph", "@id", "bad")),
                ("@reverse", (True, False)),
                ("@protected", (True, 1)),
            ):
                if rnd.random() < 0.2:
                    definition[extra] = _pick(rnd, options)
            if rnd.random() < 0.1:
                definition["@context"] = url
        else:
            definition = gen_scalar(rnd, remote)
        local[key] = definition
    return local


def gen_json(rnd: random.Random, remote: Sequence[str] = (), depth: int = 0) -> Any:
    """Nested JSON-ish data (including what JSON cannot hold)."""
    roll = rnd.random()
    if depth >= 4 or roll < 0.5:
        return gen_scalar(rnd, remote)
    if roll < 0.7:
        return [gen_json(rnd, remote, depth + 1) for _ in range(rnd.randrange(4))]
    if roll < 0.95:
        return {gen_key(rnd): gen_json(rnd, remote, depth + 1) for _ in range(rnd.randrange(4))}
    return {"@context": gen_context(rnd, remote)}


def _deep(depth: int, kind: str) -> dict[str, Any]:
    """An object nested exactly ``depth`` levels (dicts, or lists inside one dict)."""
    value: Any = {"leaf": 1}
    for _ in range(depth - 1 if kind == "dict" else depth - 2):
        value = {"a": value} if kind == "dict" else [value]
    return value if kind == "dict" else {"a": value}


def gen_value(rnd: random.Random, remote: Sequence[str] = ()) -> Any:
    """What an agent might try to write as a line's value: mostly objects, sometimes not."""
    roll = rnd.randrange(12)
    if roll == 0:
        return _deep(_pick(rnd, (99, 100, 101, 102, 500, 2000, rnd.randrange(2, 3000))), _pick(rnd, ("dict", "list")))
    if roll == 1:
        return gen_json(rnd, remote)
    value: dict[Any, Any] = {}
    if rnd.random() < 0.4:
        value["@context"] = gen_context(rnd, remote)
    for _ in range(rnd.randrange(4)):
        value[gen_key(rnd)] = gen_json(rnd, remote, 1)
    extras: tuple[tuple[str, Callable[[], Any]], ...] = (
        ("@id", lambda: gen_iri(rnd, remote)),
        ("@type", lambda: _pick(rnd, ("Task", "Review", "@json", "", 5, ["Task", "Step"], "ex:T\x00"))),
        ("summary", lambda: {"@value": gen_scalar(rnd, remote), "@language": _pick(rnd, ("en", "en-US", "not a tag", "", 5))}),
        ("data", lambda: {"@value": gen_json(rnd, remote, 1), "@type": "@json"}),
        ("items", lambda: {"@list": [gen_json(rnd, remote, 2) for _ in range(rnd.randrange(3))]}),
        ("status", lambda: gen_scalar(rnd, remote)),
        ("@graph", lambda: [gen_json(rnd, remote, 2) for _ in range(rnd.randrange(3))]),
    )
    for key, make in extras:
        if rnd.random() < 0.25:
            value[key] = make()
    if roll == 2 and value:
        return value  # sometimes keep only what was drawn
    return value


_SPARQL_FORMS = (
    "SELECT * WHERE { BODY } LIMIT N",
    "SELECT ?s (COUNT(*) AS ?c) WHERE { BODY } GROUP BY ?s",
    "ASK { BODY }",
    "CONSTRUCT { ?s ?p ?o } WHERE { BODY }",
    "DESCRIBE ?s WHERE { BODY }",
    "PREFIX ex: <http://example.org/> SELECT ?s FROM <URL> WHERE { BODY } ORDER BY ?s",
    "SELECT * FROM NAMED gag:plan WHERE { GRAPH ?g { BODY } }",
    "SELECT * WHERE { SERVICE <URL> { BODY } }",
    "SELECT * WHERE { SERVICE SILENT <URL> { BODY } }",
    "select * where { service <URL> { BODY } }",
    "SELECT * WHERE { # a comment\n SeRvIcE <URL> { BODY } }",
    "SELECT * WHERE { BODY SERVICE ?endpoint { ?x ?y ?z } } VALUES ?endpoint { <URL> }",
    "INSERT DATA { <ex:a> <ex:p> 1 }",
    "DELETE WHERE { BODY }",
    "CLEAR ALL",
    "DROP GRAPH gag:plan",
    "LOAD <URL>",
    "LOAD <URL> INTO GRAPH gag:shared",
    "CREATE GRAPH <ex:g>",
    "INSERT { ?s ga:leak 1 } WHERE { SERVICE <URL> { ?s ?p ?o } }",
    "SELECT * WHERE { BODY FILTER(regex(str(?o), \"TEXT\")) }",
    "SELECT * WHERE { BODY BIND(<URL> AS ?u) }",
    "SELECT ?s WHERE { ?s ga:summary \"TEXT\" }",
    "SELECT * WHERE { ?s (ga:dependsOn|^ga:dependsOn)* ?o }",
    "SELECT * WHERE { ?s ?p ?o FILTER(?o = TEXT) }",
    "TEXT",
)
_SPARQL_BODIES = ("?s ?p ?o", "?s a ga:Task", "GRAPH ?g { ?s ?p ?o }", "?s ga:status ?st . ?st ?x ?y", "", "TEXT")


def gen_sparql(rnd: random.Random, remote: Sequence[str] = ()) -> Any:
    """SPARQL: garbage, valid-looking queries, updates, and network clauses aimed at ``remote``."""
    roll = rnd.randrange(10)
    if roll == 0:
        return gen_text(rnd, 60)
    if roll == 1:
        return _pick(rnd, (None, 5, b"ASK {}", "", "   ", ["ASK {}"]))
    url = _pick(rnd, remote) if remote else "http://127.0.0.1:9/unused"
    text = gen_text(rnd, 20)
    n = _pick(rnd, (str(rnd.randrange(-5, 10**6)), "x", "1e400", ""))
    body = _pick(rnd, _SPARQL_BODIES).replace("TEXT", text)
    query = (
        _pick(rnd, _SPARQL_FORMS).replace("BODY", body).replace("URL", url).replace("TEXT", text).replace(" N", " " + n)
    )
    for _ in range(rnd.randrange(3) if roll < 5 else 0):  # splice junk in
        at = rnd.randrange(len(query) + 1)
        junk = _pick(rnd, ("}", "{", "\"", "<", ">", "#", "\\u0053ERVICE", "\x00", gen_text(rnd, 6)))
        query = query[:at] + junk + query[at:]
    return query


def gen_bindings(rnd: random.Random) -> Any:
    roll = rnd.randrange(8)
    if roll == 0:
        return None
    if roll == 1:
        return _pick(rnd, ([], "s", 5))
    out: dict[Any, Any] = {}
    for _ in range(rnd.randrange(1, 4)):
        name = _pick(rnd, ("s", "?s", "$o", "p", "g", 1, None, gen_text(rnd, 5)))
        kind = rnd.randrange(6)
        if kind == 0:
            value: Any = {"@id": gen_iri(rnd)}
        elif kind == 1:
            value = {"@value": gen_scalar(rnd), "@language": gen_scalar(rnd)}
        elif kind == 2:
            value = {"@value": gen_scalar(rnd), "@type": gen_iri(rnd)}
        elif kind == 3:
            value = {gen_key(rnd): gen_scalar(rnd) for _ in range(rnd.randrange(3))}
        elif kind == 4:
            value = [gen_scalar(rnd)]
        else:
            value = gen_scalar(rnd)
        out[name] = value
    return out


_CONFIG_ODD: tuple[Any, ...] = (
    math.nan, math.inf, -math.inf, -1, 0, -0.0, 1e308, 1e-320, True, False, "1", "", None, [], {}, [1, 2],
    {"a": 1}, 2**63, 10**400, -(10**400), "auto", "cl100k_base", "estimate-v1", "hash", "rrf", "onnx",
    ["hash"], ["nope"], "*", "crud", "rx", 1, 2, 256, 257, 0.5, 1.0, 1.5,
)


def gen_config(rnd: random.Random) -> Any:
    """Config overrides: the real key tree with wrong types, bad ranges, unknown keys."""
    defaults = Config().to_dict()
    leaves = [(section, key) for section, body in defaults.items() if isinstance(body, dict) for key in body]

    def odd() -> Any:
        roll = rnd.randrange(4)
        if roll == 0:
            return rnd.randrange(-10, 10**6)
        if roll == 1:
            return rnd.uniform(-10, 10)
        if roll == 2:
            return gen_text(rnd, 8)
        return _pick(rnd, _CONFIG_ODD)

    if rnd.random() < 0.05:
        return _pick(rnd, ([], "config", 5, b"x", None))
    out: dict[Any, Any] = {}
    for _ in range(rnd.randrange(5)):
        section, key = _pick(rnd, leaves)
        out.setdefault(section, {})[key] = odd()
    if rnd.random() < 0.2:
        where: dict[Any, Any] = out.setdefault(_pick(rnd, sorted(defaults)), {}) if rnd.random() < 0.5 else out
        if isinstance(where, dict):
            where[_pick(rnd, ("l9", "nope", "", 5, None, gen_text(rnd, 6)))] = odd()
    if rnd.random() < 0.3:
        roles = ("SA", "PA", "DA", "CA", "AA", "system", "XX", "", 5)
        perms: Any = {
            _pick(rnd, roles): (
                {_pick(rnd, (*_GRAPHS, "*", "", 3, "a\x00")): _pick(rnd, ("", "r", "crud", "rx", "*", "RW", odd()))
                 for _ in range(rnd.randrange(3))}
                if rnd.random() < 0.8 else odd()
            )
            for _ in range(rnd.randrange(3))
        }
        out["permissions"] = perms if rnd.random() < 0.9 else odd()
    if rnd.random() < 0.1:
        out["l1"] = {"roles": {_pick(rnd, ("DA", "XX", "")): {_pick(rnd, ("token_budget", "beta", "nope")): odd()}}}
    return out


# -- text and data mutations (scenarios and traces) ------------------------------------------

_JUNK = ("\n", ": ", "- ", "{", "}", "[", "]", "&a ", "*a", "!!python/object:os.system ", "\t", "\"", "'", "#",
         "? ", "%YAML 1.1\n", "---\n", "...\n", "<<: *a", "!!binary ", "\x00", "\ud800", "\ufeff", ",", "null")


def gen_text_edits(rnd: random.Random) -> list[tuple[int, int, int, str]]:
    return [
        (rnd.randrange(5), rnd.randrange(10**6), rnd.randrange(60),
         _pick(rnd, _JUNK) if rnd.random() < 0.6 else gen_text(rnd, 10))
        for _ in range(rnd.randrange(1, 5))
    ]


def _payload(rnd: random.Random) -> Any:
    if rnd.random() < 0.5:
        return gen_json(rnd, (), 2)
    return _pick(rnd, ("write", "read", "parallel", "crash", "quiesce", "advance", "op", "agent", "expect",
                       "format", "gliding-actors/scenario@1", "gliding-actors/trace@1", "kind", "issued",
                       "completed", "pending", "error", "result", "args", "t_issued", "lock", "turn", "query",
                       "inspect", "flush", -1, 10**30, math.nan, math.inf, 0, 1.5, True, None, [], {}))


def gen_data_edits(rnd: random.Random) -> list[tuple[int, int, Any]]:
    return [(rnd.randrange(4), rnd.randrange(10**6), _payload(rnd)) for _ in range(rnd.randrange(1, 5))]


def _apply_text_edits(text: str, edits: list[tuple[int, int, int, str]]) -> str:
    """Insert, delete, replace, duplicate a line or upper-case a span, at positions given as raw integers."""
    for kind, at, span, junk in edits:
        i = at % (len(text) + 1)
        j = min(len(text), i + span)
        if kind == 0:
            text = text[:i] + junk + text[i:]
        elif kind == 1:
            text = text[:i] + text[j:]
        elif kind == 2:
            text = text[:i] + junk + text[j:]
        elif kind == 3:
            lines = text.splitlines(keepends=True)
            if lines:
                lines.insert(at % len(lines), lines[(at + span) % len(lines)])
                text = "".join(lines)
        else:
            text = text[:i] + text[i:j].upper() + text[j:]
    return text


def _paths(data: Any, prefix: tuple[Any, ...] = ()) -> Iterator[tuple[Any, ...]]:
    yield prefix
    if isinstance(data, dict):
        for key, value in data.items():
            yield from _paths(value, (*prefix, key))
    elif isinstance(data, list):
        for index, value in enumerate(data):
            yield from _paths(value, (*prefix, index))


def _apply_data_edits(data: Any, edits: list[tuple[int, int, Any]]) -> Any:
    """Replace, delete, copy under a new key or wrap, at nodes picked by raw integers."""
    data = copy.deepcopy(data)
    for kind, at, payload in edits:
        paths = list(_paths(data))
        path = paths[at % len(paths)]
        if not path:
            if kind == 0:
                data = payload
            continue
        parent = data
        for step in path[:-1]:
            parent = parent[step]
        last = path[-1]
        if kind == 0:
            parent[last] = payload
        elif kind == 1:
            del parent[last]
        elif kind == 2 and isinstance(parent, dict):
            parent[payload if isinstance(payload, str) else str(payload)[:12]] = copy.deepcopy(parent[last])
        else:
            parent[last] = [parent[last]]
    return data


# --------------------------------------------------------------------------- cases


def _as_json_text(value: Any, *, ascii_only: bool = True) -> str:
    """``value`` as a model would print it: JSON where it can be, its repr where it cannot (bytes keys...)."""
    try:
        return json.dumps(value, ensure_ascii=ascii_only, default=repr)
    except (TypeError, ValueError):
        return repr(value)


def gen_case(
    surface: str, rnd: random.Random, *, remote: Sequence[str] = (), scenarios: int = 1
) -> dict[str, Any]:
    """One input of ``surface`` as a plain ``dict`` case :meth:`Fuzzer.run` understands."""
    role = _pick(rnd, _ROLES)

    def tags() -> Any:
        return _pick(rnd, (None, [], ["note"], ["confirmed_fact"], ["", "x"], "note", [1], [None], ["a\x00"],
                           ["user_intent", "note"], ["\ud800"], [gen_text(rnd, 6)]))

    def graph() -> Any:
        return _pick(rnd, (None, None, *_GRAPHS, "", "a b", "new-graph", "\x00", 5, gen_text(rnd, 6)))

    if surface == "jsonld":
        return {
            "op": _pick(rnd, ("write", "write", "write", "cas", "publish", "frame")),
            "role": role,
            "iri": _pick(rnd, _POOL),
            "value": gen_value(rnd, remote),
            "tags": tags(),
            "graph": graph(),
            "version": _pick(rnd, (rnd.randrange(-2, 7), True, 2**70, "1", None)),
        }
    if surface == "iri":
        return {
            "op": _pick(rnd, ("read", "write", "cas", "delete", "evict", "attach", "reload", "inspect", "flush",
                              "intent", "cites", "value_id")),
            "role": role,
            "iri": gen_iri(rnd, remote),
            "graph": graph(),
        }
    if surface == "sparql":
        return {"op": _pick(rnd, ("query", "query", "bindings")), "role": role, "sparql": gen_sparql(rnd, remote),
                "bindings": gen_bindings(rnd)}
    if surface == "scenario":
        kind = _pick(rnd, ("text", "data", "data", "random", "bytes"))
        case: dict[str, Any] = {"op": kind, "base": rnd.randrange(max(1, scenarios))}
        if kind == "text":
            case.update(edits=gen_text_edits(rnd), name=_pick(rnd, ("fuzz.yaml", "fuzz.yml")))
        elif kind == "data":
            case.update(edits=gen_data_edits(rnd), name=_pick(rnd, ("fuzz.json", "fuzz.json", "fuzz.yaml")))
        elif kind == "random":
            case.update(text=gen_text(rnd, 200), name="fuzz.yaml")
        else:
            case.update(raw=bytes(rnd.randrange(256) for _ in range(rnd.randrange(80))),
                        name=_pick(rnd, ("fuzz.yaml", "fuzz.json", "fuzz.txt")))
        return case
    if surface == "trace":
        kind = _pick(rnd, ("data", "data", "text", "lines"))
        case = {"op": kind, "time_resolution": _pick(rnd, ("1", "1", "0", "0.5", "1e400", "-1", "nan")),
                "output": _pick(rnd, ("out.json", "out.json", "out.yaml"))}
        if kind == "data":
            case.update(edits=gen_data_edits(rnd), drop=rnd.randrange(10**6) if rnd.random() < 0.3 else None)
        elif kind == "text":
            case.update(edits=gen_text_edits(rnd))
        else:
            case.update(lines=[gen_json(rnd, (), 1) for _ in range(rnd.randrange(4))])
        return case
    if surface == "config":
        return {"op": _pick(rnd, ("from_dict", "from_dict", "merged", "yaml")), "mapping": gen_config(rnd)}
    if surface == "answer":  # an LLM's reply, as Agent.turn_from takes it
        kind = _pick(rnd, ("json", "json", "text", "edits", "object"))
        answer = {k: gen_json(rnd, (), 1) if rnd.random() < 0.3 else gen_text(rnd, 40)
                  for k in ("thought", "content", "summary") if rnd.random() < 0.85}
        if kind == "json":
            fence = _pick(rnd, ("", "```json\n", "Sure: ", "```\n"))
            reply: Any = fence + _as_json_text(answer, ascii_only=rnd.random() < 0.5) + _pick(rnd, ("", "\n```", " ok."))
        elif kind == "text":
            reply = gen_text(rnd, 120)
        elif kind == "edits":
            reply = _apply_text_edits(_as_json_text(answer), gen_text_edits(rnd))
        else:
            reply = _pick(rnd, (answer, [answer], 7, None, b"{}"))
        return {"op": "turn_from", "role": role, "reply": reply, "relevance": _pick(rnd, (None, 0.5, 2, "x"))}
    if surface == "dataset":  # a dataset file given to MemorySystem.import_dataset
        return {"op": _pick(rnd, ("nquads", "jsonld", "jsonld")), "role": role, "edits": gen_text_edits(rnd)}
    raise ValueError(f"unknown fuzz surface {surface!r}; surfaces are {', '.join(SURFACES)}")


# --------------------------------------------------------------------------- the oracle


class FuzzStats:
    """Counts, kept per run; :meth:`report` is :func:`run_fuzz`'s answer."""

    def __init__(self) -> None:
        self.inputs = 0
        self.untyped = 0
        self.changed = 0
        self.mismatches = 0
        self.by_surface: dict[str, int] = dict.fromkeys(SURFACES, 0)
        self.outcomes: dict[str, int] = {"ok": 0, "refused": 0}
        self.errors: dict[str, int] = {}
        self.failures: list[str] = []
        self.failure_count = 0
        self._digest = hashlib.sha256()

    def note_input(self, surface: str, case: Mapping[str, Any], port: int | None = None) -> None:
        self.inputs += 1
        self.by_surface[surface] = self.by_surface.get(surface, 0) + 1
        text = _LONG.repr(dict(case))
        if port is not None:  # the remote server's ephemeral port differs from run to run
            text = text.replace(f"127.0.0.1:{port}", "127.0.0.1:PORT")
        self._digest.update(f"{surface}|{text}\n".encode("utf-8", "backslashreplace"))

    def fail(self, text: str) -> None:
        self.failure_count += 1
        if len(self.failures) < MAX_FAILURES:
            self.failures.append(text)

    @property
    def digest(self) -> str:
        return self._digest.hexdigest()


#: Typed errors that still mean the input broke something (an actor crashed, a wait hung).
_BROKEN = (ActorUnavailable, Timeout)


class Fuzzer:
    """Runs fuzz cases against one memory (and the file-level loaders), applying the oracle.

    ``memory`` should be fresh and is used for every memory-bound surface; the
    agents (one per role) and a few seed lines, a task and an archived turn
    are made here so that IRIs and queries hit real data.
    """

    def __init__(self, memory: MemorySystem, workdir: Path, *, server: RemoteServer | None = None) -> None:
        self.memory = memory
        self.workdir = workdir
        self.server = server
        self.stats = FuzzStats()
        self.agents = {role: memory.agent(agent_id, role) for role, agent_id in _AGENT_OF_ROLE.items()}
        self._frames = 0
        self._files = 0
        #: the seeded memory's export per dataset format, what dataset cases edit
        self._exports: dict[str, str] = {}
        system = self.agents["system"]
        for index, graph in enumerate(_GRAPHS):
            system.write(f"ex:seed/{graph}", {"@type": "Task", "summary": f"seed {index}", "status": "open"}, graph=graph)
        system.write("task:fuzz-1", {"@type": "Task", "summary": "fuzz", "dependsOn": {"@id": "ex:seed/plan"}},
                     graph="plan", tags=["confirmed_fact"])
        self.agents["PA"].write("ex:fuzz/a", {"note": "held in M by PA"})
        self.agents["PA"].create_task("fuzz-task")
        self.archive = str(self.agents["DA"].turn("seeded a turn", thought="t", content="c")["archive_iri"])
        memory.quiesce()
        self.scenarios = _scenario_texts()
        self._parsed: dict[int, Any] = {}
        self.trace = _record_trace(workdir / "seed-trace.jsonl")

    @property
    def remote(self) -> tuple[str, ...]:
        if self.server is None:
            return ()
        return (self.server.url("ctx"), self.server.url("ctx.jsonld"), self.server.url("sparql"))

    def case(self, surface: str, rnd: random.Random) -> dict[str, Any]:
        """One generated input of ``surface`` aimed at this fuzzer's memory and remote server."""
        return gen_case(surface, rnd, remote=self.remote, scenarios=len(self.scenarios))

    # -- the oracle -----------------------------------------------------------------------
    def attempt(self, surface: str, case: Mapping[str, Any], call: Callable[[], Any], *, memory: bool) -> Any:
        """Run ``call``; record an untyped error, or a change made by a refused call.

        Returns what the call returned, or None when it raised.
        """
        before = memory_snapshot(self.memory) if memory else None
        fetched = self.server.requests if self.server is not None else 0
        what = f"{surface} {case.get('op')}: {_short(dict(case))}"
        result: Any = None
        try:
            result = call()
        except _BROKEN as exc:
            self.stats.untyped += 1
            self.stats.fail(f"{type(exc).__name__} ({exc}) on {what}"[:400])
        except GlidingError as exc:
            self.stats.outcomes["refused"] += 1
            name = type(exc).__name__
            self.stats.errors[name] = self.stats.errors.get(name, 0) + 1
            if before is not None:
                after = memory_snapshot(self.memory)
                changed = snapshot_diff(before, after)
                if isinstance(exc, ConflictError):
                    # A lost compare-and-set is a race, not bad input: the cache
                    # fetched the line to compare (coherence traffic), but no
                    # value, version or durable state may have moved.
                    changed = [part for part in changed if part != "caches"]
                if changed:
                    self.stats.changed += 1
                    self.stats.fail(f"refused ({name}) but changed {', '.join(changed)}: {what}"[:400])
        except Exception as exc:  # noqa: BLE001 - the very thing being looked for
            self.stats.untyped += 1
            self.stats.fail(f"untyped {type(exc).__name__} ({_short(str(exc))}) on {what}"[:400])
        else:
            self.stats.outcomes["ok"] += 1
        if self.server is not None and self.server.requests != fetched:
            self.stats.fail(f"remote fetch {self.server.paths[fetched:]} on {what}"[:400])
        return result

    def _mismatch(self, text: str) -> None:
        self.stats.mismatches += 1
        self.stats.fail(text[:400])

    def run(self, surface: str, case: Mapping[str, Any]) -> None:
        """Apply one case of ``surface`` (as :func:`gen_case` makes them)."""
        self.stats.note_input(surface, case, None if self.server is None else self.server.port)
        getattr(self, "_run_" + surface)(case)

    # -- surfaces -------------------------------------------------------------------------
    def _run_jsonld(self, case: Mapping[str, Any]) -> None:
        agent = self.agents[case["role"]]
        op, iri, value = case["op"], case["iri"], case["value"]
        if op == "write":
            done = self.attempt("jsonld", case, lambda: agent.write(iri, value, tags=case["tags"], graph=case["graph"]),
                                memory=True)
            if done is not None:
                back = self.agents["system"].read(iri)
                if back["value"] != value:
                    self._mismatch(f"jsonld write: accepted {_short(value)} but read back {_short(back['value'])}")
        elif op == "cas":
            self.attempt("jsonld", case, lambda: agent.cas(iri, case["version"], value, tags=case["tags"],
                                                            graph=case["graph"]), memory=True)
        elif op == "publish":
            self.attempt("jsonld", case, lambda: agent.publish("fuzz", value), memory=True)
        else:
            self._frames += 1
            name = f"fuzz-frame-{self._frames}"
            self.attempt("jsonld", case, lambda: self.memory.l3.register_frame(name, _FRAME_SPARQL, value),
                         memory=True)

    def _run_answer(self, case: Mapping[str, Any]) -> None:
        agent = self.agents[case["role"]]
        done = self.attempt("answer", case, lambda: agent.turn_from(case["reply"], relevance=case["relevance"]),
                            memory=True)
        if done is not None and agent.reload(done["archive_iri"])["content"] != done["answer"]["content"]:
            self._mismatch(f"answer: archived content differs from the parsed one: {_short(dict(case))}")

    def _run_dataset(self, case: Mapping[str, Any]) -> None:
        fmt = case["op"]
        if fmt not in self._exports:
            self._exports[fmt] = self.memory.export(fmt)
        text = _apply_text_edits(self._exports[fmt], case["edits"])
        self.attempt("dataset", case, lambda: self.memory.import_dataset(text, fmt, role=case["role"]), memory=True)

    def _run_iri(self, case: Mapping[str, Any]) -> None:
        agent = self.agents[case["role"]]
        iri, op = case["iri"], case["op"]
        memory = self.memory
        calls: dict[str, Callable[[], Any]] = {
            "read": lambda: agent.read(iri),
            "write": lambda: agent.write(iri, {"summary": "fuzzed iri"}, graph=case["graph"]),
            "cas": lambda: agent.cas(iri, 0, {"summary": "fuzzed iri"}),
            "delete": lambda: agent.delete(iri),
            "evict": lambda: agent.evict(iri),
            "attach": lambda: agent.attach_to_task("fuzz-task", [iri]),
            "reload": lambda: agent.reload(iri),
            "inspect": lambda: memory.inspect(iri),
            "flush": lambda: memory.submit_flush([iri]).get(),
            "intent": lambda: agent.submit_intent([iri]).get(),
            "cites": lambda: agent.turn("fuzzed citation", cites=[iri]),
            "value_id": lambda: agent.write("ex:fuzz/b", {"@id": iri, "summary": "an @id"}),
        }
        self.attempt("iri", case, calls[op], memory=True)

    def _run_sparql(self, case: Mapping[str, Any]) -> None:
        agent = self.agents[case["role"]]
        sparql = case["sparql"]
        if case["op"] == "bindings":
            self.attempt("sparql", case, lambda: agent.query(sparql, case["bindings"]), memory=True)
        else:
            self.attempt("sparql", case, lambda: agent.query(sparql), memory=True)

    def _run_scenario(self, case: Mapping[str, Any]) -> None:
        from gliding_actors.scenario import load_scenario, load_scenario_text

        op, name = case["op"], case["name"]
        if op == "bytes":
            self._files += 1
            path = self.workdir / f"s{self._files % 8}-{name}"
            path.write_bytes(case["raw"])
            self.attempt("scenario", case, lambda: load_scenario(path), memory=False)
            return
        if op == "random":
            text = case["text"]
        else:
            base = self.scenarios[case["base"] % len(self.scenarios)]
            if op == "text":
                text = _apply_text_edits(base, case["edits"])
            else:
                data = _apply_data_edits(self._scenario_data(case["base"]), case["edits"])
                text = _json_text(data)
        self.attempt("scenario", case, lambda: load_scenario_text(text, name), memory=False)

    def _scenario_data(self, index: int) -> Any:
        """Scenario ``index`` parsed (once: the YAML parser is slow)."""
        index %= len(self.scenarios)
        if index not in self._parsed:
            self._parsed[index] = _yaml_data(self.scenarios[index])
        return self._parsed[index]

    def _run_trace(self, case: Mapping[str, Any]) -> None:
        from gliding_actors.cli import main

        header, *rest = self.trace
        if case["op"] == "data":
            lines = _apply_data_edits([header, *rest], case["edits"])
            if isinstance(lines, list) and len(lines) > 1 and case["drop"] is not None:
                del lines[1 + case["drop"] % (len(lines) - 1)]
            text = "\n".join(_json_text(line) for line in lines) if isinstance(lines, list) else _json_text(lines)
        elif case["op"] == "text":
            text = _apply_text_edits("\n".join(json.dumps(line) for line in self.trace), case["edits"])
        else:
            text = "\n".join([_json_text(header)] + [_json_text(line) for line in case["lines"]])
        self._files += 1
        path = self.workdir / f"trace-{self._files % 8}.jsonl"
        path.write_text(text, encoding="utf-8", errors="surrogatepass")
        out = self.workdir / f"trace-{self._files % 8}-{case['output']}"
        argv = ["convert", str(path), "-o", str(out), "--time-resolution", case["time_resolution"]]

        def convert() -> int:
            sink = io.StringIO()
            with contextlib.redirect_stdout(sink), contextlib.redirect_stderr(sink):
                try:
                    return main(argv)
                except SystemExit as exc:  # argparse refusing an option value: a usage error, exit 2
                    return int(exc.code or 0)

        code = self.attempt("trace", case, convert, memory=False)
        if code not in (None, 0, 1, 2):
            self._mismatch(f"trace: convert exited {code!r}")

    def _run_config(self, case: Mapping[str, Any]) -> None:
        mapping = case["mapping"]
        op = case["op"]
        if op == "yaml":
            self._files += 1
            path = self.workdir / f"config-{self._files % 8}.yaml"
            path.write_text(_json_text(mapping), encoding="utf-8", errors="surrogatepass")
            made = self.attempt("config", case, lambda: Config.from_yaml(path), memory=False)
        elif op == "merged":
            made = self.attempt("config", case, lambda: Config().merged(mapping), memory=False)
        else:
            made = self.attempt("config", case, lambda: Config.from_dict(mapping), memory=False)
        if isinstance(made, Config):
            try:
                again = Config.from_dict(made.to_dict())
            except Exception as exc:  # noqa: BLE001 - any failure here is the finding
                self._mismatch(f"config: accepted {_short(mapping)} but its to_dict() is refused: {exc!r}")
            else:
                if again != made:
                    self._mismatch(f"config: accepted {_short(mapping)} does not survive to_dict/from_dict")
                odd = [number for number in _numbers(made.to_dict()) if not math.isfinite(number)]
                if odd:
                    self._mismatch(f"config: accepted {_short(mapping)} holding {odd}")

    def serves_after(self) -> bool:
        """After all the input: a full flush succeeds and L0 then holds every line the graph holds.

        A refused input that poisoned a line (accepted, then refused by L0 at
        write-down) would make this flush fail for ever; counted as a failure.
        """
        memory = self.memory
        try:
            memory.flush()
            memory.quiesce()
            graph = {  # the bus's kept messages live in L2 only (docs/L2.md): not lines
                n.iri: n.version
                for n in memory.graph.lines()
                if n.value is not None and not n.iri.startswith(MESSAGE_IRI_PREFIX)
            }
            l0 = {e.iri: e.version for e in memory.l0.query()}
            missing = sorted(iri for iri, version in graph.items() if l0.get(iri, 0) < version)
            problems = memory.l0.verify()
        except Exception as exc:  # noqa: BLE001 - any failure here is the finding
            self.stats.fail(f"after fuzzing the memory cannot flush: {type(exc).__name__}: {_short(str(exc))}")
            return False
        if missing or problems:
            self.stats.fail(f"after fuzzing and a flush, L0 lacks {_short(missing)}; verify: {_short(problems)}")
            return False
        return True

    # -- report -------------------------------------------------------------------------------
    def report(self, seconds: float) -> dict[str, Any]:
        s = self.stats
        return {
            "fuzz_inputs": s.inputs,
            "untyped_errors": s.untyped,
            "changed_on_refusal": s.changed,
            "remote_fetches": self.server.requests if self.server is not None else 0,
            "mismatches": s.mismatches,
            "by_surface": dict(s.by_surface),
            "outcomes": dict(s.outcomes),
            "errors": dict(sorted(s.errors.items())),
            "failures": list(s.failures),
            "failure_count": s.failure_count,
            "inputs_digest": s.digest,
            "seconds": round(seconds, 2),
        }


# --------------------------------------------------------------------------- seeds of mutation


def _numbers(data: Any) -> Iterator[float]:
    """Every float in plain nested data."""
    if isinstance(data, dict):
        for value in data.values():
            yield from _numbers(value)
    elif isinstance(data, list):
        for value in data:
            yield from _numbers(value)
    elif isinstance(data, float):
        yield data


def _json_text(data: Any) -> str:
    """JSON text of generated data, whatever it holds: odd keys and values become their repr
    (NaN and infinities stay the non-standard tokens Python writes; the readers must cope)."""

    def plain(value: Any) -> Any:
        if isinstance(value, dict):
            return {k if isinstance(k, (str, int, float, bool)) or k is None else repr(k): plain(v) for k, v in value.items()}
        if isinstance(value, (list, tuple)):
            return [plain(v) for v in value]
        return value

    return json.dumps(plain(data), default=repr)


def _scenario_texts() -> list[str]:
    """The repository's scenarios (``scenarios/**.yaml``), or one small built-in one when not in a checkout."""
    root = Path(__file__).resolve().parents[2] / "scenarios"
    texts = [p.read_text(encoding="utf-8") for p in sorted(root.rglob("*.yaml"))] if root.is_dir() else []
    return texts or [
        "format: gliding-actors/scenario@1\nname: tiny\nagents:\n  - {id: a, role: SA}\nsteps:\n"
        "  - {op: write, agent: a, iri: 'ex:x', value: {v: 1}, expect: {version: 1}}\n"
        "  - {op: read, agent: a, iri: 'ex:x', expect: {value: {v: 1}}}\n"
    ]


def _yaml_data(text: str) -> Any:
    from ruamel.yaml import YAML

    return YAML(typ="safe", pure=True).load(text)


def _record_trace(path: Path) -> list[dict[str, Any]]:
    """Record a short real run (every kind of op line: results, errors, locks, tasks) and read it back."""
    with MemorySystem.open(runtime="sim", record=path) as memory:
        pa, ca = memory.agent("pa", "PA"), memory.agent("ca", "CA")
        pa.write("task:a", {"@type": "Task", "summary": "x"}, tags=["confirmed_fact"], graph="plan")
        ca.read("task:a")
        pa.cas("task:a", 1, {"@type": "Task", "summary": "y"}, graph="plan")
        pa.create_task("t1")
        ca.subscribe("top")
        pa.publish("top", {"x": 1})
        ca.inbox()
        pa.query("SELECT ?s WHERE { ?s a ga:Task }")
        with contextlib.suppress(GlidingError):
            ca.write("task:a", {"a": 1})
        pa.lock("r1")
        pa.unlock("r1")
        pa.turn("did x", cites=["task:a"])
        pa.complete_task("t1")
        memory.flush()
        memory.inspect("task:a")
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]


# --------------------------------------------------------------------------- entry point


def _schedule(examples: int) -> list[str]:
    """``examples`` surfaces interleaved by weight (a smooth weighted round-robin).

    Interleaved, not one surface after another: a refused query or IRI then
    meets lines the value writes just left dirty in agents' caches, which is
    when "a refusal changes nothing" is worth checking.
    """
    total = sum(_WEIGHTS.values())
    credit = dict.fromkeys(SURFACES, 0)
    out: list[str] = []
    for _ in range(examples):
        for surface in SURFACES:
            credit[surface] += _WEIGHTS[surface]
        chosen = max(SURFACES, key=lambda s: credit[s])
        credit[chosen] -= total
        out.append(chosen)
    return out


def run_fuzz(*, examples: int, seed: int, progress: Callable[[int], None] | None = None) -> dict[str, Any]:
    """Fuzz every surface with about ``examples`` inputs in all (split evenly), from ``seed``.

    Returns ``{"fuzz_inputs", "untyped_errors", "changed_on_refusal",
    "remote_fetches", "mismatches", "serves_after", "by_surface": {surface:
    inputs}, "outcomes": {"ok", "refused"}, "errors": {error name: count},
    "failures": [at most 20 short descriptions], "failure_count",
    "inputs_digest", "seconds"}``. A clean run has ``failure_count`` 0 (every
    failure kind counted) and ``serves_after`` true: after all the bad input
    the memory still flushes every line to L0 and agrees with it. The same
    ``seed`` draws the same inputs (``inputs_digest``) with the same outcomes.
    ``progress(inputs so far)`` is called after each input.
    """
    if isinstance(examples, bool) or not isinstance(examples, int) or examples < 1:
        raise ValueError(f"examples is an integer >= 1, not {examples!r}")
    # One stream per surface, so a surface's inputs do not depend on how many the others drew.
    streams = {surface: random.Random(f"gliding-actors fuzz {seed} {surface}") for surface in SURFACES}
    started = time.perf_counter()
    with tempfile.TemporaryDirectory(prefix="gliding-fuzz-") as tmp, RemoteServer() as server:
        work = Path(tmp) / "work"
        work.mkdir()
        memory = MemorySystem.open(Path(tmp) / "memory", runtime="sim", seed=seed)
        try:
            fuzzer = Fuzzer(memory, work, server=server)
            for surface in _schedule(examples):
                fuzzer.run(surface, fuzzer.case(surface, streams[surface]))
                if progress is not None:
                    progress(fuzzer.stats.inputs)
            serves = fuzzer.serves_after()
            report = fuzzer.report(time.perf_counter() - started)
            report["serves_after"] = serves
            return report
        finally:
            memory.close(flush=False)
