"""The workload the kill harness SIGKILLs: a team of agents writing until it dies.

usage: python tools/reliability/_kill_child.py MEMORY_PATH JOURNAL_PATH SEED [honest|lying]

Opens ``MemorySystem.open(MEMORY_PATH)`` on the threads runtime, prints
``ready`` and runs, until killed:

* ``AGENTS`` writer threads, each one agent, writing lines of a shared pool
  (so lines change hands between caches): one write in three carries the
  critical tag ``confirmed_fact`` (write-through), the rest are write-back;
* one flusher thread calling ``memory.flush()`` every few milliseconds.

The journal is the child's promise list, one JSON object per line, each
appended with one ``os.write`` and fsync'd **after** the operation returned,
so a journal line on disk means the system had already acknowledged it:

* ``{"op": "wt", "iri", "v", "value"}`` — a write-through write returned;
* ``{"op": "wb", "iri", "v", "value"}`` — a write-back write returned (no
  durability promise: a kill may lose it, but its version is never reused);
* ``{"op": "flush", "lines": [[iri, v, value], ...]}`` — a flush returned; the
  lines are the write-back writes that had *completed before the flush
  began* (their newest completed version per line), which the flush's recall
  must have brought home and written down.

Versions are per line and never reused, even those of write-back writes a
kill lost: a line found in L0 at a journalled version must hold the
journalled value, and no two journal records give one (line, version) two
values; a higher version means a later write (of any kind) reached L0 too.

Mode ``lying`` journals every write-back write as flushed the moment it
returns, without waiting for a flush: a broken promise the harness must catch
(its own test, so the check is known to be able to fail).
"""

from __future__ import annotations

import json
import os
import random
import sys
import threading
import time
import traceback
from typing import Any

from gliding_actors import MemorySystem

AGENTS = (("w0", "PA"), ("w1", "DA"), ("w2", "CA"))
LINES = 24
CRITICAL = "confirmed_fact"


def line_iri(n: int) -> str:
    return f"urn:kill:line-{n}"


class Journal:
    """Append-only, fsync'd, one JSON object per line; shared by the threads."""

    def __init__(self, path: str) -> None:
        self._fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
        self._lock = threading.Lock()

    def append(self, record: dict[str, Any]) -> None:
        data = json.dumps(record, sort_keys=True).encode() + b"\n"
        with self._lock:
            os.write(self._fd, data)
            os.fsync(self._fd)


def main() -> None:
    memory_path, journal_path, seed = sys.argv[1], sys.argv[2], int(sys.argv[3])
    lying = len(sys.argv) > 4 and sys.argv[4] == "lying"
    memory = MemorySystem.open(memory_path)
    journal = Journal(journal_path)
    # write-back writes that completed: iri -> (version, value), newest version kept
    completed: dict[str, tuple[int, dict[str, Any]]] = {}
    completed_lock = threading.Lock()
    agents = [memory.agent(agent_id, role) for agent_id, role in AGENTS]

    def writer(index: int) -> None:
        agent = agents[index]
        rng = random.Random(seed * 100 + index)
        n = 0
        while True:
            n += 1
            iri = line_iri(rng.randrange(LINES))
            value = {"@id": iri, "writer": agent.id, "n": n, "seed": seed}
            if rng.random() < 1 / 3:
                result = agent.write(iri, value, tags=[CRITICAL])
                assert result["policy"] == "write_through", result
                journal.append({"op": "wt", "iri": iri, "v": result["version"], "value": value})
            else:
                result = agent.write(iri, value)
                assert result["policy"] == "write_back", result
                if lying:
                    journal.append({"op": "flush", "lines": [[iri, result["version"], value]]})
                    continue
                journal.append({"op": "wb", "iri": iri, "v": result["version"], "value": value})
                with completed_lock:
                    held = completed.get(iri)
                    if held is None or held[0] < result["version"]:
                        completed[iri] = (result["version"], value)

    def flusher() -> None:
        rng = random.Random(seed * 100 + 99)
        while True:
            time.sleep(rng.uniform(0.005, 0.03))
            with completed_lock:
                before = sorted((iri, v, value) for iri, (v, value) in completed.items())
            memory.flush()
            journal.append({"op": "flush", "lines": [list(line) for line in before]})

    def guarded(body: Any, *args: Any) -> None:
        try:
            body(*args)
        except BaseException:  # noqa: BLE001 - the parent must see a failure, not kill a half-dead child
            traceback.print_exc()
            sys.stderr.flush()
            os._exit(3)

    threads = [
        threading.Thread(target=guarded, args=(writer, i), daemon=True) for i in range(len(agents))
    ]
    threads.append(threading.Thread(target=guarded, args=(flusher,), daemon=True))
    for thread in threads:
        thread.start()
    sys.stdout.write("ready\n")
    sys.stdout.flush()
    for thread in threads:  # until SIGKILL; a thread that dies of an error ends the child early
        thread.join()


if __name__ == "__main__":
    main()
