"""The CLI answers hostile arguments and files with an exit code and a message, never a traceback.

Each subcommand that reads input (replay, convert, repair, skill import/sign/verify/list,
bench with a bad suite) is given bad option values (inf, NaN, huge and negative
numbers, lone surrogates, NUL, empty strings) and bad files (missing, a folder,
empty, binary, not UTF-8, deeply nested, not the expected shape). Every run must
end in an exit code (argparse's 2 included) with no Python exception escaping
``main``: an escaped exception is what a user would see as a traceback.
"""

from __future__ import annotations

import itertools
from pathlib import Path

import pytest

from gliding_actors.cli import main

#: "\udcff" is how Python hands over a command-line byte that is not UTF-8; "\ud800" no shell can send
BAD_VALUES = ["inf", "nan", "-1", "1e400", str(2**70), "\udcff", "\ud800", "a\x00b", "", "x" * 5000]



@pytest.fixture(autouse=True)
def _in_a_scratch_folder(tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch) -> None:
    """A hostile value is often a good relative path: whatever it makes lands in a scratch folder."""
    monkeypatch.chdir(tmp_path_factory.mktemp("cwd"))

def _files(tmp: Path) -> list[str]:
    files = {
        "empty.yaml": b"",
        "binary.yaml": bytes(range(256)),
        "latin1.yaml": "caf\xe9: [".encode("latin-1"),
        "nested.json": b"[" * 20_000 + b"]" * 20_000,
        "list.yaml": b"- 1\n- 2\n",
        "scalar.json": b"5",
        "trace.jsonl": b'{"format": "gliding-actors/trace@1"}\n{"op": "data", "t": 1e999}\n',
        "skill.md": b"---\nid: \xff\n---\n# x\n",
    }
    for name, data in files.items():
        (tmp / name).write_bytes(data)
    (tmp / "folder.yaml").mkdir()
    return [str(tmp / name) for name in (*files, "folder.yaml", "missing.yaml")]


def _commands(tmp: Path) -> list[list[str]]:
    out = str(tmp / "out")
    files = _files(tmp)
    commands: list[list[str]] = []
    for path in [*files, *BAD_VALUES]:
        commands += [
            ["replay", path],
            ["convert", path, "-o", out + ".yaml"],
            ["skill", "import", path],
            ["skill", "sign", path, "--key", path, "--key-id", "k"],
            ["skill", "verify", path, "--keyring", path],
            ["skill", "list", "--memory", path],
            ["repair", path],
            ["repair", path, "--in-place", "--json"],
        ]
    demo = str(Path(__file__).parents[2] / "scenarios" / "demo")
    scenario = min(Path(demo).glob("*.yaml"))
    for value in BAD_VALUES:
        commands += [
            ["replay", str(scenario), "--seed", value],
            ["replay", str(scenario), "--seeds", value],
            ["replay", str(scenario), "--timeout", value],
            ["replay", str(scenario), "--runtime", value],
            ["bench", value],
            ["bench", "agents", "--agents", value],
            ["demo", "--seed", value],
        ]
    return commands


def test_every_cli_command_refuses_hostile_input_with_an_exit_code(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    escaped: list[str] = []
    for argv in _commands(tmp_path):
        try:
            code = main(argv)
        except SystemExit as exit_:  # argparse refuses a bad option value with exit 2
            code = exit_.code if isinstance(exit_.code, int) else 2
        except BaseException as exc:  # noqa: BLE001 - collected: the defect this test looks for
            escaped.append(f"{argv!r:.120}: {type(exc).__name__}: {exc!s:.120}")
            continue
        assert isinstance(code, int), argv
    capsys.readouterr()
    assert escaped == []


def test_the_hostile_commands_cover_every_input_reading_subcommand(tmp_path: Path) -> None:
    seen = {tuple(itertools.takewhile(lambda a: not a.startswith("-") and "/" not in a, argv))[:2] for argv in _commands(tmp_path)}
    assert {("replay",), ("convert",), ("repair",), ("skill", "import"), ("skill", "sign"), ("skill", "verify"), ("skill", "list")} <= {
        s[:2] if s[0] == "skill" else s[:1] for s in seen
    }
