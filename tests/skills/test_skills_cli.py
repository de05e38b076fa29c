"""``gliding-actors skill import|sign|verify|list``: exit codes, --json, clear typed errors."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from cryptography.hazmat.primitives import serialization

from gliding_actors.cli import main
from gliding_actors.skills import parse_markdown, verify_skill
from skill_support import EXAMPLES, KEYRING, LEAD


@pytest.fixture
def keys(tmp_path: Path) -> tuple[Path, Path]:
    pem = tmp_path / "lead.pem"
    pem.write_bytes(LEAD.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                                       serialization.NoEncryption()))
    ring = tmp_path / "ring.json"
    ring.write_text(json.dumps(KEYRING.to_json()), encoding="utf-8")
    return pem, ring


def test_sign_verify_import_list_round(tmp_path: Path, keys: tuple[Path, Path], capsys: pytest.CaptureFixture[str]) -> None:
    pem, ring = keys
    source = EXAMPLES[0]
    signed_md = tmp_path / "signed.md"
    assert main(["skill", "sign", str(source), "--key", str(pem), "--key-id", "lead", "-o", str(signed_md)]) == 0
    assert "keyring entry" in capsys.readouterr().out
    assert verify_skill(parse_markdown(signed_md.read_text(encoding="utf-8")), KEYRING) == "lead"

    assert main(["skill", "verify", str(signed_md), "--keyring", str(ring), "--json"]) == 0
    report = json.loads(capsys.readouterr().out)
    assert report["ok"] and report["results"][0]["key_id"] == "lead"

    tampered = tmp_path / "tampered.md"
    tampered.write_text(signed_md.read_text(encoding="utf-8").replace("Build.", "Skip the build."), encoding="utf-8")
    assert main(["skill", "verify", str(tampered), "--keyring", str(ring)]) == 1
    assert "REFUSED" in capsys.readouterr().out

    memory = tmp_path / "mem"
    assert main(["skill", "import", str(signed_md), *map(str, EXAMPLES[1:]), "--memory", str(memory), "--json"]) == 0
    imported = json.loads(capsys.readouterr().out)
    assert [s["iri"] for s in imported["stored"]] == [s["@id"] for s in imported["skills"]]

    assert main(["skill", "list", "--memory", str(memory), "--keyring", str(ring), "--json"]) == 0
    rows = {row["iri"]: row for row in json.loads(capsys.readouterr().out)["skills"]}
    assert len(rows) == len(EXAMPLES)
    assert rows[parse_markdown(source.read_text(encoding="utf-8"))["@id"]]["verified"] is True
    assert sum(row["verified"] for row in rows.values()) == 1  # the others are unsigned

    assert main(["skill", "verify", "--memory", str(memory), "--keyring", str(ring)]) == 1  # unsigned ones refused
    out = capsys.readouterr().out
    assert out.count("OK ") == 1 and out.count("REFUSED") == len(EXAMPLES) - 1
    assert main(["skill", "list", "--memory", str(memory)]) == 0
    assert "skill:" in capsys.readouterr().out


def test_verify_with_an_input_reports_the_failing_path(tmp_path: Path, keys: tuple[Path, Path],
                                                      capsys: pytest.CaptureFixture[str]) -> None:
    pem, ring = keys
    signed = tmp_path / "s.json"
    revoke = next(p for p in EXAMPLES if p.name == "revoke-and-reissue.md")
    assert main(["skill", "sign", str(revoke), "--key", str(pem), "--key-id", "lead", "-o", str(signed)]) == 0
    capsys.readouterr()
    bad = tmp_path / "in.json"
    bad.write_text(json.dumps({"service": "auth", "key_ids": ["UPPER"]}), encoding="utf-8")
    assert main(["skill", "verify", str(signed), "--keyring", str(ring), "--input", str(bad), "--json"]) == 1
    result = json.loads(capsys.readouterr().out)["results"][0]
    assert result["path"] == ["key_ids", 0] and "$.key_ids[0]" in result["message"]


def test_typed_errors_exit_2_with_a_clear_message(tmp_path: Path, keys: tuple[Path, Path],
                                                  capsys: pytest.CaptureFixture[str]) -> None:
    pem, ring = keys
    bad = tmp_path / "bad.md"
    bad.write_text("---\nid: skill:x\n---\n\n# X\n\nWhat.\n\n## Steps\n\n1. **A** b\n", encoding="utf-8")
    memory = tmp_path / "mem"
    assert main(["skill", "import", str(EXAMPLES[0]), str(bad), "--memory", str(memory)]) == 2
    err = capsys.readouterr().err
    assert f"{bad}:5:" in err and "Trigger" in err
    assert not memory.exists()  # every file converts before anything is stored
    assert main(["skill", "verify", str(EXAMPLES[0]), "--keyring", str(tmp_path / "none.json")]) == 2
    assert "cannot read the keyring" in capsys.readouterr().err
    assert main(["skill", "sign", str(EXAMPLES[0]), "--key", str(ring), "--key-id", "lead"]) == 2
    assert "PEM" in capsys.readouterr().err
    assert main(["skill", "sign", str(EXAMPLES[0]), "--key", str(pem), "--key-id", "bad id", "--json"]) == 2
    assert json.loads(capsys.readouterr().out)["error"]["type"] == "InvalidInput"
    # import without a memory is a conversion: the node is printed
    assert main(["skill", "import", str(EXAMPLES[0])]) == 0
    assert json.loads(capsys.readouterr().out)["@id"].startswith("skill:")
