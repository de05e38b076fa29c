"""``gliding-actors replay FILE --diagram OUT.html``: a self-contained sequence diagram."""

from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path

import pytest

from gliding_actors.cli import main
from gliding_actors.runtime import LogEntry
from gliding_actors.scenario._diagram import diagram_data, render_html

SCENARIO = """\
format: gliding-actors/scenario@1
name: two agents and a line
agents:
  - {id: pa, role: PA}
  - {id: ca, role: CA}
steps:
  - {op: write, agent: pa, iri: "task:x", value: {goal: "</script><b>g</b>"}}
  - {op: read, agent: ca, iri: "task:x", expect: {version: 1}}
  - {op: read, agent: ca, iri: "task:x"}
  - {op: publish, agent: pa, topic: t, message: {n: 1}}
"""

CHROMIUM = shutil.which("chromium") or ("/usr/bin/chromium" if Path("/usr/bin/chromium").exists() else None)


def _render(tmp_path: Path) -> tuple[Path, dict[str, object]]:
    from gliding_actors.scenario import load_scenario, replay

    scenario = tmp_path / "s.yaml"
    scenario.write_text(SCENARIO)
    out = tmp_path / "d.html"
    assert main(["replay", str(scenario), "--diagram", str(out)]) == 0
    run = replay(load_scenario(scenario), keep_log=True)
    return out, diagram_data(run.protocol_log, run.step_marks, "x")


def test_the_diagram_names_lifelines_and_gives_each_reply_back_to_its_caller(tmp_path: Path) -> None:
    out, data = _render(tmp_path)
    lifelines = data["lifelines"]
    assert isinstance(lifelines, list)
    assert lifelines[:2] == ["agent:pa", "agent:ca"]
    assert lifelines.index("cache:ca") < lifelines.index("dir:0") < lifelines.index("bus")
    arrows = data["arrows"]
    assert isinstance(arrows, list)
    store = next(a for a in arrows if a["label"].startswith("store task:x"))
    assert (store["src"], store["dst"]) == ("agent:pa", "cache:pa")
    reply = next(a for a in arrows if a["kind"] == "reply" and a["src"] == "cache:pa" and "version=1" in a["label"])
    assert reply["dst"] == "agent:pa"
    assert any(a["label"].startswith("GetM task:x") and a["dst"] == "dir:0" for a in arrows)
    assert [a["seq"] for a in arrows] == sorted(a["seq"] for a in arrows)  # in log order, nothing dropped
    steps = [label for _n, label in data["steps"]]  # type: ignore[attr-defined]
    assert steps[0] == "set-up" and "step 3: read ca" in steps
    html = out.read_text()
    assert "<script src" not in html and "http://" not in html.replace("http://www.w3.org/2000/svg", "")
    assert "</script><b>" not in html  # data cannot break out of its script element


def test_render_escapes_the_title() -> None:
    entry = LogEntry(1, 0.0, "deliver", "@driver", "bus", {"type": "drain", "subscriber": "x"})
    page = render_html(diagram_data([entry], (), "<i>t</i>"))
    assert "<title>&lt;i&gt;t&lt;/i&gt;</title>" in page


def test_the_diagram_needs_the_simulator(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    scenario = tmp_path / "s.yaml"
    scenario.write_text(SCENARIO)
    out = tmp_path / "d.html"
    assert main(["replay", str(scenario), "--runtime", "threads", "--diagram", str(out)]) == 2
    assert not out.exists()
    assert "--diagram needs --runtime sim" in capsys.readouterr().err


@pytest.mark.skipif(CHROMIUM is None, reason="chromium is not installed (apt-get install chromium; .ci/run does)")
def test_the_page_shows_every_message_in_headless_chromium(tmp_path: Path) -> None:
    out, data = _render(tmp_path)
    assert CHROMIUM is not None
    profile = tmp_path / "profile"
    done = subprocess.run(
        [
            CHROMIUM, "--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
            "--disable-component-update", "--disable-sync", "--no-first-run", f"--user-data-dir={profile}",
            "--virtual-time-budget=5000", "--dump-dom", out.resolve().as_uri(),
        ],
        capture_output=True, text=True, timeout=120, check=False,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    dom = done.stdout
    arrows = data["arrows"]
    assert isinstance(arrows, list)
    # the inline script ran and drew one group per protocol message
    assert f"{len(arrows)} protocol messages" in dom
    assert len(re.findall(r'<g class="msg ', dom)) == len(arrows)
    for label in ("store task:x", "GetM task:x", "Fwd-GetS task:x", "publish t", "step 2: read ca"):
        assert label in dom, label
