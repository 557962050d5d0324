"""An "app server" of the master election example.

It reads /clusterx/master_ip with a watch and caches the master's address; when the znode
changes or disappears, the watch tells it, and it reads again. While there is no master (the
old one died, no new one yet) it knows that too.

    python app_server.py --zk 127.0.0.1:2181 --name app-1

Prints one line per change: "<name>: master is <address>" or "<name>: no master".
"""

from __future__ import annotations

import argparse
import signal
import sys
import threading

from kazoo.client import KazooClient
from kazoo.exceptions import NoNodeError
from kazoo.protocol.states import EventType, WatchedEvent

MASTER_ZNODE = "/clusterx/master_ip"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--zk", required=True, help="keeper (or ZooKeeper) HOST:PORT[,HOST:PORT...]")
    parser.add_argument("--name", required=True)
    parser.add_argument("--session-timeout", type=float, default=4.0)
    args = parser.parse_args()

    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    client = KazooClient(hosts=args.zk, timeout=args.session_timeout)
    client.start(timeout=30)
    lock = threading.Lock()
    cached: list[str | None] = ["(unknown)"]

    def report(master: str | None) -> None:
        with lock:
            if master == cached[0]:
                return
            cached[0] = master
            print(f"{args.name}: " + ("no master" if master is None else f"master is {master}"), flush=True)

    def on_event(event: WatchedEvent) -> None:
        if event.type == EventType.DELETED:
            report(None)  # told: the master is gone, whatever happens next
        refresh()

    def refresh() -> None:
        while True:
            try:
                report(client.get(MASTER_ZNODE, watch=on_event)[0].decode())
                return
            except NoNodeError:
                if client.exists(MASTER_ZNODE, watch=on_event) is None:
                    report(None)
                    return

    refresh()
    while not stop.wait(0.5):
        pass
    client.stop()
    client.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
