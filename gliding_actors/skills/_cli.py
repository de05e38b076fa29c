"""``gliding-actors skill import|sign|verify|list`` (wired into :mod:`gliding_actors.cli`).

Exit codes, as for ``replay``: 0 when everything asked for was done (every
skill verified), 1 when a skill was checked and refused (bad signature,
untrusted key, input not fitting its schema) — a verdict, not a malfunction —
and 2 when the command could not do its work: an unreadable or unconvertible
file (``FILE:LINE: what``), a bad keyring or key, a memory that refuses the
write. ``--json`` prints one JSON object instead of text.

Skills go into a memory through a ``system`` agent named ``skill-cli``, as
lines of the ``knowledge`` graph (``--graph``), flushed to L0 on close.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

from gliding_actors.errors import GlidingError, InvalidInput, SignatureError

__all__ = ["add_skill_parser", "run_skill"]

EXIT_OK, EXIT_REFUSED, EXIT_INVALID = 0, 1, 2
CLI_AGENT = "skill-cli"


def add_skill_parser(sub: Any) -> None:
    """Add ``skill`` and its four subcommands to the CLI's subparsers."""
    skill = sub.add_parser("skill", help="signed JSON-LD skills: import, sign, verify, list")
    verbs = skill.add_subparsers(dest="skill_command", required=True, metavar="ACTION")

    imp = verbs.add_parser("import", help="convert Markdown skill files (or check JSON nodes); store them in a memory")
    imp.add_argument("files", nargs="+", metavar="FILE", help=".md skill files or .json skill nodes")
    imp.add_argument("--memory", metavar="DIR", help="store the skills in the memory at DIR")
    imp.add_argument("--graph", default=None, help="named graph to store them in (default: knowledge)")
    imp.add_argument("-o", "--output", metavar="OUT.json", help="write the node (a list for several files)")
    imp.add_argument("--keyring", metavar="KEYRING.json", help="refuse skills not signed by one of these keys")
    imp.add_argument("--json", action="store_true", help="print one JSON object")

    sign = verbs.add_parser("sign", help="sign a skill (.md or .json) with an Ed25519 private key")
    sign.add_argument("file", metavar="FILE")
    sign.add_argument("--key", required=True, metavar="PRIVATE.pem", help="PKCS#8 PEM (openssl genpkey -algorithm ed25519)")
    sign.add_argument("--key-id", required=True, metavar="ID", help="the id verifiers know the key by")
    sign.add_argument("-o", "--output", metavar="OUT", help="write the signed skill (.md: Markdown, else JSON)")
    sign.add_argument("--json", action="store_true", help="print one JSON object")

    verify = verbs.add_parser("verify", help="verify skills against trusted keys (and an input against the schema)")
    verify.add_argument("targets", nargs="*", metavar="FILE|IRI", help="files; with --memory, IRIs (none: every skill)")
    verify.add_argument("--keyring", required=True, metavar="KEYRING.json", help='{"keys": {id: base64url}}')
    verify.add_argument("--memory", metavar="DIR", help="verify the skills stored in the memory at DIR")
    verify.add_argument("--input", metavar="INPUT.json", help="also validate this input (JSON) against each schema")
    verify.add_argument("--json", action="store_true", help="print one JSON object")

    ls = verbs.add_parser("list", help="list the skills in a memory")
    ls.add_argument("--memory", required=True, metavar="DIR")
    ls.add_argument("--keyring", metavar="KEYRING.json", help="also say whether each skill verifies")
    ls.add_argument("--json", action="store_true", help="print one JSON object")


def run_skill(args: argparse.Namespace) -> int:
    """Run ``skill <action>``; a typed error is printed as one clear line and exits 2."""
    handlers = {"import": _import, "sign": _sign, "verify": _verify, "list": _list}
    try:
        return handlers[args.skill_command](args)
    except GlidingError as exc:
        print(f"gliding-actors skill {args.skill_command}: {type(exc).__name__}: {exc}", file=sys.stderr)
        if getattr(args, "json", False):
            print(json.dumps({"ok": False, "error": {"type": type(exc).__name__, "message": str(exc)}}, indent=2))
        return EXIT_INVALID


def _memory(path: str) -> Any:
    """The memory at ``path``, opened (use it in ``with``: leaving the block closes it)."""
    from gliding_actors.system import MemorySystem

    return MemorySystem.open(path)


def _write(path: str, text: str) -> None:
    try:
        Path(path).write_text(text, encoding="utf-8")
    except OSError as exc:
        raise InvalidInput(f"{path}: cannot write: {exc}") from None


def _import(args: argparse.Namespace) -> int:
    from gliding_actors.skills import (
        SKILL_GRAPH,
        Keyring,
        Skill,
        load_skill_file,
        store_skill,
        verify_skill,
    )

    nodes = [load_skill_file(file) for file in args.files]  # all converted before anything is stored
    keyring = Keyring.load(args.keyring) if args.keyring else None
    if keyring is not None:
        for node in nodes:
            verify_skill(node, keyring)
    stored: list[dict[str, Any]] = []
    if args.memory:
        with _memory(args.memory) as memory:
            agent = memory.agent(CLI_AGENT, "system")
            for node in nodes:
                result = store_skill(agent, node, graph=args.graph or SKILL_GRAPH)
                stored.append({"iri": node["@id"], "version": result["version"]})
    if args.output:
        _write(args.output, json.dumps(nodes[0] if len(nodes) == 1 else nodes, indent=2, ensure_ascii=False) + "\n")
    if args.json:
        print(json.dumps({"ok": True, "skills": nodes, "stored": stored}, indent=2, ensure_ascii=False))
        return EXIT_OK
    if not args.memory and not args.output:  # a conversion: the nodes are the output
        print(json.dumps(nodes[0] if len(nodes) == 1 else nodes, indent=2, ensure_ascii=False))
        return EXIT_OK
    for i, (file, node) in enumerate(zip(args.files, nodes, strict=True)):
        skill = Skill.from_node(node)
        where = f" -> {args.memory} v{stored[i]['version']}" if stored else ""
        signed = f", signed by {skill.key_id}" if skill.key_id else ", unsigned"
        print(f"{file}: {skill.iri} ({skill.kind}, {len(skill.steps)} steps{signed}){where}")
    return EXIT_OK


def _sign(args: argparse.Namespace) -> int:
    from gliding_actors.skills import (
        load_private_key,
        load_skill_file,
        public_key_text,
        render_markdown,
        sign_skill,
    )

    node = load_skill_file(args.file)
    key = load_private_key(args.key)
    signed = sign_skill(node, key, args.key_id)
    as_json = json.dumps(signed, indent=2, ensure_ascii=False)
    public = public_key_text(key)
    if args.output:
        markdown = Path(args.output).suffix.lower() in (".md", ".markdown")
        _write(args.output, render_markdown(signed) if markdown else as_json + "\n")
    if args.json:
        print(json.dumps({"ok": True, "iri": signed["@id"], "key_id": args.key_id, "public_key": public,
                          "skill": signed}, indent=2, ensure_ascii=False))
    elif args.output:
        print(f"signed {signed['@id']} with key {args.key_id} -> {args.output}")
        print(f'trust it with the keyring entry: {{"keys": {{"{args.key_id}": "{public}"}}}}')
    else:
        print(as_json)
    return EXIT_OK


def _verify(args: argparse.Namespace) -> int:
    from gliding_actors.skills import Keyring, check_invocation, load_skill_file, verify_skill

    keyring = Keyring.load(args.keyring)
    inputs: Any = None
    if args.input:
        try:
            inputs = json.loads(Path(args.input).read_text(encoding="utf-8"))
        except (OSError, UnicodeDecodeError, ValueError) as exc:
            raise InvalidInput(f"{args.input}: cannot read the input: {exc}") from None
    targets: list[tuple[str, Any]] = []
    if args.memory:
        from gliding_actors.skills import list_skills

        with _memory(args.memory) as memory:
            agent = memory.agent(CLI_AGENT, "system")
            iris = args.targets or list_skills(agent)
            for iri in iris:
                value = agent.get(iri)
                if value is None:
                    raise InvalidInput(f"no skill at {iri} in {args.memory}")
                targets.append((iri, value))
    else:
        if not args.targets:
            raise InvalidInput("name the skill files to verify (or --memory DIR)")
        targets = [(file, load_skill_file(file)) for file in args.targets]
    results: list[dict[str, Any]] = []
    for label, node in targets:
        try:
            if args.input:
                key_id = check_invocation(node, inputs, keyring).key_id
            else:
                key_id = verify_skill(node, keyring)
            results.append({"target": label, "iri": node.get("@id"), "ok": True, "key_id": key_id})
        except (SignatureError, InvalidInput) as exc:
            results.append({"target": label, "iri": node.get("@id"), "ok": False, "error": type(exc).__name__,
                            "message": str(exc), "key_id": getattr(exc, "key_id", None),
                            "path": [*exc.path] if isinstance(exc, InvalidInput) else None})
    ok = all(r["ok"] for r in results)
    if args.json:
        print(json.dumps({"ok": ok, "results": results}, indent=2, ensure_ascii=False))
    else:
        for r in results:
            if r["ok"]:
                print(f"OK       {r['target']}: {r['iri']} signed by {r['key_id']}")
            else:
                print(f"REFUSED  {r['target']}: {r['error']}: {r['message']}")
    return EXIT_OK if ok else EXIT_REFUSED


def _list(args: argparse.Namespace) -> int:
    from rich.console import Console
    from rich.table import Table

    from gliding_actors.skills import Keyring, list_skills, read_skill, verify_skill

    keyring = Keyring.load(args.keyring) if args.keyring else None
    rows: list[dict[str, Any]] = []
    with _memory(args.memory) as memory:
        agent = memory.agent(CLI_AGENT, "system")
        for iri in list_skills(agent):
            try:
                skill = read_skill(agent, iri)
            except InvalidInput as exc:  # typed Skill but not our shape: say so, keep listing
                rows.append({"iri": iri, "valid": False, "problem": exc.message})
                continue
            row: dict[str, Any] = {
                "iri": iri, "valid": True, "kind": skill.kind, "name": skill.name, "steps": len(skill.steps),
                "signed_by": skill.key_id, "prerequisites": list(skill.prerequisites),
                "alternatives": list(skill.alternatives), "components": list(skill.components),
            }
            if keyring is not None:
                try:
                    verify_skill(skill.node, keyring)
                    row["verified"] = True
                except SignatureError as exc:
                    row["verified"], row["problem"] = False, exc.message
            rows.append(row)
    if args.json:
        print(json.dumps({"ok": True, "skills": rows}, indent=2, ensure_ascii=False))
        return EXIT_OK
    table = Table(title=f"skills in {args.memory}")
    for column in ("iri", "kind", "name", "steps", "signed by", "verified"):
        table.add_column(column, overflow="fold")
    for row in rows:
        verified = "-" if "verified" not in row else ("yes" if row["verified"] else "NO")
        if not row["valid"]:
            table.add_row(row["iri"], "invalid", row["problem"], "", "", "")
            continue
        table.add_row(row["iri"], row["kind"], row["name"], str(row["steps"]), row["signed_by"] or "-", verified)
    Console(highlight=False, soft_wrap=True, emoji=False).print(table)
    return EXIT_OK
