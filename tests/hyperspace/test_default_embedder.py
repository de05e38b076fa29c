"""The default text embedder is MiniLM: found by meaning out of the box, with its own similarity floor."""

from __future__ import annotations

import pytest

from gliding_actors.config import Config
from gliding_actors.errors import ConfigError
from gliding_actors.system import MemorySystem

MINILM = "onnx/all-MiniLM-L6-v2-int8"


@pytest.mark.parametrize("runtime", ["sim", "threads"])
def test_the_default_embedder_finds_by_meaning_without_a_shared_word(runtime: str) -> None:
    with MemorySystem.open(runtime=runtime) as m:
        pa = m.agent("pa", "PA")
        pa.write("note:pet", {"summary": "the cat slept on the windowsill all afternoon"}, graph="plan")
        pa.write("note:money", {"summary": "quarterly revenue grew by five percent"}, graph="plan")
        found = pa.search("kitten", 5)
        assert found["iris"] == ["note:pet"] and found["embedders"] == [MINILM]
        assert m.hyperspace.stats()["embedders"][0] == MINILM


def test_the_default_floor_is_the_embedders_and_a_configured_one_overrides_it() -> None:
    with MemorySystem.open(runtime="sim") as m:
        pa = m.agent("pa", "PA")
        pa.write("note:pet", {"summary": "the cat slept on the windowsill all afternoon"}, graph="plan")
        assert pa.search("interest rates of government bonds", 5)["iris"] == []  # below MiniLM's 0.25
    with MemorySystem.open(runtime="sim", config={"hyperspace": {"min_similarity": -1}}) as m:
        pa = m.agent("pa", "PA")
        pa.write("note:pet", {"summary": "the cat slept on the windowsill all afternoon"}, graph="plan")
        assert pa.search("interest rates of government bonds", 5)["iris"] == ["note:pet"]  # every node kept
    for bad in (2, "high", True):
        with pytest.raises(ConfigError, match="min_similarity"):
            Config.from_dict({"hyperspace": {"min_similarity": bad}})
