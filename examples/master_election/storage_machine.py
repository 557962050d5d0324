"""A "storage machine" of the master election example.

Every storage machine races to create the ephemeral znode /clusterx/master_ip holding its own
address. The one that succeeds is the master for as long as its session lives; the others watch
the znode and race again when it disappears (the master died and its session expired, or it
shut down). A machine that comes back after a crash finds the znode taken and becomes a follower.

    python storage_machine.py --zk 127.0.0.1:2181 --name storage-1 --address 10.0.0.1:7000

Prints one line per change of role: "<name>: master" or "<name>: follower of <address>".
"""

from __future__ import annotations

import argparse
import signal
import sys
import threading

from kazoo.client import KazooClient, KazooState
from kazoo.exceptions import NodeExistsError, NoNodeError

MASTER_ZNODE = "/clusterx/master_ip"


def say(line: str) -> None:
    print(line, flush=True)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--zk", required=True, help="keeper (or ZooKeeper) HOST:PORT[,HOST:PORT...]")
    parser.add_argument("--name", required=True, help="this machine's name, for the log")
    parser.add_argument("--address", required=True, help="the address other servers reach us at")
    parser.add_argument("--session-timeout", type=float, default=4.0, help="seconds (default 4)")
    args = parser.parse_args()

    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    changed = threading.Event()  # the master znode changed, or our session did
    client = KazooClient(hosts=args.zk, timeout=args.session_timeout)

    def on_state(state: str) -> None:
        if state == KazooState.LOST:
            # Our session expired: whatever we created is gone; campaign again.
            changed.set()

    client.add_listener(on_state)
    client.start(timeout=30)
    client.ensure_path("/clusterx")
    role = None
    while not stop.is_set():
        changed.clear()
        try:
            client.create(MASTER_ZNODE, args.address.encode(), ephemeral=True)
            new_role = "master"
        except NodeExistsError:
            # Watch the master's znode; if it vanished meanwhile, race again right away.
            if client.exists(MASTER_ZNODE, watch=lambda event: changed.set()) is None:
                continue
            try:
                master = client.get(MASTER_ZNODE)[0].decode()
            except NoNodeError:
                continue
            new_role = f"follower of {master}"
        if new_role != role:
            role = new_role
            say(f"{args.name}: {role}")
        while not stop.is_set() and not changed.wait(0.5):
            pass
    client.stop()
    client.close()
    say(f"{args.name}: stopped")
    return 0


if __name__ == "__main__":
    sys.exit(main())
