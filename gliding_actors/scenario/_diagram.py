"""A sequence diagram of a replay's protocol messages, as one offline HTML file.

``gliding-actors replay FILE --diagram OUT.html`` replays on the simulator,
which logs every delivery, reply, failure, dead letter, crash and timer
(:attr:`Simulator.log <gliding_actors.runtime.Simulator.log>`), and draws
them in order. Lifelines, left to right: the agents (their calls come from
outside the actor system, logged as ``@driver``), then their caches, the
directory shards (each the home of its lines: the L2 node map over L0), the
bus, the blackboard, the L1 session actors, the L3 actors, anything else, and
timers. Each scenario step is a band labelled with its op.

Which agent a call belongs to: a call to ``cache:ID`` or ``l1:ID`` is agent
ID's; any other call is the agent its message names (``agent``,
``publisher``, ``subscriber``), else the orchestrator's (the system's own
wiring). A reply goes back to the caller of the ask it answers: the
simulator numbers asks in the order they are made and each (sender,
receiver) channel is FIFO, so the k-th call delivered to an actor is the ask
with its k-th smallest request id among the replies that actor sends.

The page is self-contained — the data is inline JSON and a small inline
script draws an SVG from it; there is nothing to fetch, so it opens offline.
"""

from __future__ import annotations

import html
import json
from collections.abc import Iterable, Sequence
from typing import Any

from gliding_actors.runtime import LogEntry

__all__ = ["diagram_data", "render_html"]

DRIVER = "@driver"
TIMER = "@timer"
ORCHESTRATOR = "orchestrator"
#: asks the system makes of an agent's actors on its own account (inspect, recall, crash, ...)
_SYSTEM_ASKS = frozenset({"state", "inspect", "recall", "flush", "crash", "ready", "agents"})


def _label(message: Any) -> str:
    if isinstance(message, dict):
        kind = message.get("t") or message.get("type")
        parts = [str(kind)] if kind else []
        for key in ("iri", "topic", "resource", "task"):
            if isinstance(message.get(key), str):
                parts.append(message[key])
                break
        return " ".join(parts) or "message"
    return type(message).__name__


def _reply_label(kind: str, message: Any) -> str:
    if kind == "fail" and isinstance(message, list) and len(message) >= 2:
        return f"✗ {message[1]}"
    value = message[1] if isinstance(message, list) and len(message) == 2 else message
    if isinstance(value, dict):
        shown = ", ".join(f"{k}={v}" for k, v in value.items() if isinstance(v, (str, int, float, bool)))[:60]
        return f"↩ {shown}" if shown else "↩ reply"
    if value is None:
        return "↩ ok"
    return f"↩ {json.dumps(value, default=repr)[:60]}"


def _rank(name: str, agents: Sequence[str]) -> tuple[int, str]:
    if name.startswith("agent:"):
        return (0, f"{agents.index(name[6:]):06d}" if name[6:] in agents else name)
    order = [
        (ORCHESTRATOR, 1), ("cache:", 2), ("dir:", 3), ("bus", 4), ("blackboard", 5), ("l1:", 6), ("l3:", 7)
    ]
    for prefix, rank in order:
        if name.startswith(prefix):
            return (rank, name)
    return (9, name) if name == TIMER else (8, name)


def diagram_data(
    log: Iterable[LogEntry], steps: Sequence[tuple[int, str]] = (), title: str = ""
) -> dict[str, Any]:
    """The lifelines and arrows of ``log`` (``steps``: (log length when a step ended, label))."""
    entries = list(log)
    agents: list[str] = []
    for entry in entries:
        for name in (entry.src, entry.dst):
            if name.startswith("cache:") and name[6:] not in agents:
                agents.append(name[6:])

    def caller(dst: str, message: Any) -> str:
        if isinstance(message, dict) and message.get("t") in _SYSTEM_ASKS:
            return ORCHESTRATOR
        for prefix in ("cache:", "l1:"):
            if dst.startswith(prefix) and dst[len(prefix):] in agents:
                return "agent:" + dst[len(prefix):]
        if isinstance(message, dict):
            for key in ("agent", "publisher", "subscriber"):
                if message.get(key) in agents:
                    return f"agent:{message[key]}"
        return ORCHESTRATOR

    # k-th driver call delivered to X  <->  k-th smallest request id X answers
    calls: dict[str, list[str]] = {}
    rids: dict[str, list[int]] = {}
    for entry in entries:
        if entry.kind == "deliver" and entry.src == DRIVER:
            calls.setdefault(entry.dst, []).append(caller(entry.dst, entry.message))
        elif entry.kind in ("reply", "fail") and isinstance(entry.message, list) and entry.message:
            rids.setdefault(entry.src, []).append(int(entry.message[0]))
    asker: dict[tuple[str, int], str] = {}
    for actor, ids in rids.items():
        for rid, who in zip(sorted(ids), calls.get(actor, []), strict=False):
            asker[(actor, rid)] = who

    arrows: list[dict[str, Any]] = []
    for entry in entries:
        src, dst = entry.src, entry.dst
        if entry.kind == "deliver":
            if src == DRIVER:
                src = caller(dst, entry.message)
            label = _label(entry.message)
        elif entry.kind in ("reply", "fail"):
            rid = int(entry.message[0]) if isinstance(entry.message, list) and entry.message else -1
            dst = asker.get((src, rid), ORCHESTRATOR)
            label = _reply_label(entry.kind, entry.message)
        elif entry.kind == "dead":
            label = "dead letter: " + _label(entry.message)
        elif entry.kind == "crash":
            label = "crash"
        else:  # timer
            label = "timer: " + _label(entry.message)
        arrows.append(
            {
                "seq": entry.seq,
                "time": entry.time,
                "kind": entry.kind,
                "src": src,
                "dst": dst,
                "label": label,
                "detail": json.dumps(entry.message, default=repr, sort_keys=True)[:2000],
            }
        )
    names = {a["src"] for a in arrows} | {a["dst"] for a in arrows}
    lifelines = sorted(names, key=lambda n: _rank(n, agents))
    return {"title": title, "lifelines": lifelines, "arrows": arrows, "steps": [list(s) for s in steps]}


_PAGE = """<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8">
<title>__TITLE__</title>
<style>
body{font:13px system-ui,sans-serif;margin:0;color:#222}
header{position:sticky;top:0;background:#fff;border-bottom:1px solid #ccc;padding:6px 12px;z-index:2}
#detail{font:12px ui-monospace,monospace;white-space:pre-wrap;max-height:6em;overflow:auto;color:#444}
svg text{font:11px ui-monospace,monospace}
.life{font-weight:bold}
.msg line{stroke:#357;stroke-width:1.2}
.msg.reply line{stroke:#393;stroke-dasharray:4 3}
.msg.fail line,.msg.crash line,.msg.dead line{stroke:#c33}
.msg.timer line{stroke:#a70;stroke-dasharray:2 2}
.msg:hover text{fill:#06c}
.band{fill:#f4f6fa}
</style></head><body>
<header><b>__TITLE__</b> — <span id="summary">drawing…</span>
<div id="detail">Click an arrow to see its message.</div></header>
<div id="diagram"></div>
<script type="application/json" id="ga-data">__DATA__</script>
<script>
(function(){
  var data = JSON.parse(document.getElementById('ga-data').textContent);
  var NS = 'http://www.w3.org/2000/svg', COL = 170, ROW = 22, TOP = 40, LEFT = 250;
  var x = {}; data.lifelines.forEach(function(n, i){ x[n] = LEFT + i * COL; });
  var width = LEFT + data.lifelines.length * COL, height = TOP + (data.arrows.length + 1) * ROW + 20;
  var svg = document.createElementNS(NS, 'svg');
  svg.setAttribute('width', width); svg.setAttribute('height', height); svg.setAttribute('id', 'sequence');
  function el(tag, attrs, text){ var e = document.createElementNS(NS, tag);
    for (var k in attrs) e.setAttribute(k, attrs[k]); if (text !== undefined) e.textContent = text; return e; }
  var defs = el('defs', {}); var marker = el('marker', {id: 'arrow', viewBox: '0 0 10 10', refX: 10, refY: 5,
    markerWidth: 7, markerHeight: 7, orient: 'auto-start-reverse'});
  marker.appendChild(el('path', {d: 'M0,0L10,5L0,10z', fill: '#555'})); defs.appendChild(marker); svg.appendChild(defs);
  var start = 0, quiet = [], band = 0;
  data.steps.forEach(function(s){ var end = s[0];
    if (end === start) { quiet.push(s[1]); return; }  // no messages (a cache hit): named with the next band
    if (band++ % 2 === 0) svg.appendChild(el('rect', {'class': 'band', x: 0, y: TOP + start * ROW + 6, width: width, height: (end - start) * ROW}));
    quiet.concat([s[1]]).forEach(function(label, j){
      svg.appendChild(el('text', {x: 4, y: TOP + start * ROW + 18 + 13 * j, 'class': 'step'}, label + (j < quiet.length ? ' (no messages)' : ''))); });
    quiet = []; start = end; });
  quiet.forEach(function(label, j){ svg.appendChild(el('text', {x: 4, y: TOP + start * ROW + 18 + 13 * j, 'class': 'step'}, label + ' (no messages)')); });
  data.lifelines.forEach(function(n){
    svg.appendChild(el('line', {x1: x[n], y1: TOP, x2: x[n], y2: height, stroke: '#bbb'}));
    svg.appendChild(el('text', {x: x[n], y: 24, 'text-anchor': 'middle', 'class': 'life'}, n)); });
  var detail = document.getElementById('detail');
  data.arrows.forEach(function(a, i){
    var y = TOP + (i + 1) * ROW, g = el('g', {'class': 'msg ' + a.kind, 'data-seq': a.seq});
    var x1 = x[a.src], x2 = x[a.dst];
    if (x1 === x2) { g.appendChild(el('line', {x1: x1, y1: y - 6, x2: x1 + 30, y2: y - 6}));
      g.appendChild(el('line', {x1: x1 + 30, y1: y - 6, x2: x1 + 30, y2: y}));
      g.appendChild(el('line', {x1: x1 + 30, y1: y, x2: x1, y2: y, 'marker-end': 'url(#arrow)'})); }
    else g.appendChild(el('line', {x1: x1, y1: y, x2: x2, y2: y, 'marker-end': 'url(#arrow)'}));
    g.appendChild(el('text', {x: Math.min(x1, x2) + 6, y: y - 4}, '#' + a.seq + ' ' + a.label));
    g.appendChild(el('title', {}, a.kind + ' ' + a.src + ' → ' + a.dst + ' t=' + a.time + '\\n' + a.detail));
    g.addEventListener('click', function(){ detail.textContent = '#' + a.seq + ' ' + a.kind + ' ' + a.src + ' → ' + a.dst + ': ' + a.detail; });
    svg.appendChild(g); });
  document.getElementById('diagram').appendChild(svg);
  document.getElementById('summary').textContent = data.arrows.length + ' protocol messages, ' + data.lifelines.length + ' lifelines';
})();
</script>
<noscript>This diagram is drawn by an inline script; enable JavaScript to see it.</noscript>
</body></html>
"""


def render_html(data: dict[str, Any]) -> str:
    """The self-contained page for :func:`diagram_data`'s output."""
    # "<" only occurs inside JSON strings, where \u003c is the same character:
    # nothing in the data can close the script element or open a comment.
    payload = json.dumps(data, default=repr).replace("<", "\\u003c")
    title = html.escape(data.get("title") or "gliding-actors protocol")
    return _PAGE.replace("__TITLE__", title).replace("__DATA__", payload)
