"""Which sockets of a set of processes are not on loopback: the check that a
Ray cluster of the tests, and the driver talking to it, never leave 127.0.0.1.

Reads ``ss -tunapH`` (every socket with its owning processes), or /proc/net
and each process's file descriptors where ``ss`` is missing or shows no
owners (not root).
"""

from __future__ import annotations

import dataclasses
import ipaddress
import os
import re
import socket
import subprocess
from collections.abc import Callable, Iterable, Sequence
from pathlib import Path

#: the addresses a loopback cluster may use (a socket elsewhere is "foreign")
LOOPBACK: tuple[str, ...] = ("127.0.0.1", "::1")



@dataclasses.dataclass(frozen=True)
class SocketEntry:
    """One socket: protocol, state, local and peer ``host:port``, owning pids, and its source line."""

    proto: str
    state: str
    local: str
    peer: str
    pids: tuple[int, ...]
    line: str


_SS_PID = re.compile(r"pid=(\d+)")


def parse_ss(text: str) -> list[SocketEntry]:
    """The sockets of ``ss -tunapH`` output (Netid State Recv-Q Send-Q Local Peer [Process])."""
    out: list[SocketEntry] = []
    for line in text.splitlines():
        parts = line.split()
        if len(parts) < 6 or parts[0] not in ("tcp", "udp"):
            continue
        process = " ".join(parts[6:])
        pids = tuple(sorted({int(p) for p in _SS_PID.findall(process)}))
        out.append(SocketEntry(parts[0], parts[1], parts[4], parts[5], pids, line.strip()))
    return out


_TCP_STATES = {
    "01": "ESTAB",
    "02": "SYN-SENT",
    "03": "SYN-RECV",
    "04": "FIN-WAIT-1",
    "05": "FIN-WAIT-2",
    "06": "TIME-WAIT",
    "07": "UNCONN",
    "08": "CLOSE-WAIT",
    "09": "LAST-ACK",
    "0A": "LISTEN",
    "0B": "CLOSING",
}


def _hex_address(text: str) -> str:
    host_hex, port_hex = text.split(":")
    port = int(port_hex, 16)
    raw = bytes.fromhex(host_hex)
    if len(raw) == 4:
        host = socket.inet_ntop(socket.AF_INET, raw[::-1])
        return f"{host}:{port if port else '*'}"
    # /proc/net/tcp6 stores the address as four host-order 32-bit words
    words = b"".join(raw[i : i + 4][::-1] for i in range(0, 16, 4))
    host = socket.inet_ntop(socket.AF_INET6, words)
    return f"[{host}]:{port if port else '*'}"


def parse_proc_net(text: str, proto: str, owners: dict[int, tuple[int, ...]]) -> list[SocketEntry]:
    """The sockets of one /proc/net/{tcp,tcp6,udp,udp6} table; ``owners`` maps inode -> pids."""
    out: list[SocketEntry] = []
    for line in text.splitlines()[1:]:
        parts = line.split()
        if len(parts) < 10:
            continue
        try:
            local, peer = _hex_address(parts[1]), _hex_address(parts[2])
            inode = int(parts[9])
        except ValueError:
            continue
        state = _TCP_STATES.get(parts[3], parts[3]) if proto == "tcp" else "UNCONN"
        out.append(SocketEntry(proto, state, local, peer, owners.get(inode, ()), line.strip()))
    return out


def _proc_sockets(pids: Iterable[int]) -> list[SocketEntry]:
    """The sockets of ``pids`` from /proc (for a machine whose ``ss`` shows no owners)."""
    owners: dict[int, set[int]] = {}
    for pid in pids:
        try:
            fds = os.listdir(f"/proc/{pid}/fd")
        except OSError:
            continue
        for fd in fds:
            try:
                target = os.readlink(f"/proc/{pid}/fd/{fd}")
            except OSError:
                continue
            if target.startswith("socket:["):
                owners.setdefault(int(target[8:-1]), set()).add(pid)
    frozen = {inode: tuple(sorted(ps)) for inode, ps in owners.items()}
    out: list[SocketEntry] = []
    for name, proto in (("tcp", "tcp"), ("tcp6", "tcp"), ("udp", "udp"), ("udp6", "udp")):
        try:
            text = Path(f"/proc/net/{name}").read_text()
        except OSError:
            continue
        out += [entry for entry in parse_proc_net(text, proto, frozen) if entry.pids]
    return out


def _split(address: str) -> tuple[str, str]:
    host, _, port = address.rpartition(":")
    host = host.strip("[]")
    host = host.split("%", 1)[0]  # ss prints an interface scope as 127.0.0.53%lo
    if host.lower().startswith("::ffff:") and "." in host:
        host = host[7:]  # an IPv4 address on a dual-stack socket
    return host, port


def _allowed(host: str, allowed: Sequence[str]) -> bool:
    if host in ("*", "0.0.0.0", "::", ""):
        return False  # every interface: it would accept on the external one too
    try:
        return any(ipaddress.ip_address(host) == ipaddress.ip_address(a) for a in allowed)
    except ValueError:
        return False


def foreign_in(
    entries: Iterable[SocketEntry], pids: Iterable[int], allowed: Sequence[str] = LOOPBACK
) -> list[str]:
    """The lines of sockets owned by ``pids`` whose local or peer address is not in ``allowed``.

    A listener on a wildcard (``0.0.0.0``, ``::``, ``*``) counts as foreign: it
    would accept connections on every interface. A peer of ``*`` (a listener, an
    unconnected UDP socket) is not an address and is not judged.
    """
    wanted = set(pids)
    out: list[str] = []
    for entry in entries:
        if not wanted.intersection(entry.pids):
            continue
        local_host, _ = _split(entry.local)
        peer_host, peer_port = _split(entry.peer)
        bad_local = not _allowed(local_host, allowed)
        bad_peer = peer_port != "*" and not _allowed(peer_host, allowed)
        if bad_local or bad_peer:
            out.append(entry.line)
    return out


def foreign_sockets(
    pids: Iterable[int],
    *,
    allowed: Sequence[str] = LOOPBACK,
    include_self: bool = True,
    runner: Callable[[list[str]], str] | None = None,
) -> list[str]:
    """Every TCP/UDP socket of ``pids`` (and this process) not on an ``allowed`` address.

    Asks ``ss -tunapH`` (every socket with its owning processes); when ``ss``
    is missing or shows no owners (not root), reads /proc/net and each pid's
    fds instead.
    ``runner`` replaces running ``ss`` (it gets the argv, returns the output).
    """
    wanted = set(pids)
    if include_self:
        wanted.add(os.getpid())
    text: str | None
    try:
        if runner is not None:
            text = runner(["ss", "-tunapH"])
        else:
            text = subprocess.run(
                ["ss", "-tunapH"], check=True, capture_output=True, text=True, timeout=30
            ).stdout
    except (OSError, subprocess.SubprocessError):
        text = None
    entries = parse_ss(text) if text is not None else []
    if text is None or (entries and not any(entry.pids for entry in entries)):
        entries = _proc_sockets(wanted)
    return foreign_in(entries, wanted, allowed)
