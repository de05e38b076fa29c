"""Child process of test_l0_kill: applies kill_ops(seed) forever, acknowledging
each completed operation by appending its index to an ack file (one unbuffered
write, so an ack on disk means the store call had returned).

usage: python l0_kill_child.py DB_PATH ACK_PATH SEED
"""

from __future__ import annotations

import os
import sys

from l0_support import apply_op, kill_ops

from gliding_actors.clock import VirtualClock
from gliding_actors.l0 import L0Store


def main() -> None:
    db_path, ack_path, seed = sys.argv[1], sys.argv[2], int(sys.argv[3])
    clock = VirtualClock(1_000.0)
    store = L0Store(db_path, clock=clock, access_flush_every=25)
    fd = os.open(ack_path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
    sys.stdout.write("ready\n")
    sys.stdout.flush()
    for i, op in enumerate(kill_ops(seed)):
        clock.advance(1.0)
        apply_op(store, op)
        os.write(fd, b"%d\n" % i)


if __name__ == "__main__":
    main()
