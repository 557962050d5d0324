"""`roost zk`: a small znode shell over kazoo, for any ZooKeeper-protocol server.

    roost zk --server HOST:PORT ls PATH
    roost zk --server HOST:PORT get PATH
    roost zk --server HOST:PORT stat PATH
    roost zk --server HOST:PORT set PATH DATA [--version N]
    roost zk --server HOST:PORT create [-e] [-s] PATH [DATA]
    roost zk --server HOST:PORT delete [-r] PATH [--version N]
    roost zk --server HOST:PORT watch PATH [--events N] [--timeout SECONDS]

`watch` prints one line per event on PATH (its data and its children) until N events were seen
or the timeout passed. Errors print `roost zk: <error>` and exit with status 1.
"""

from __future__ import annotations

import argparse
import queue
import sys
import time
from typing import Any

ZNODE_STAT_FIELDS = ("czxid", "mzxid", "ctime", "mtime", "version", "cversion", "aversion",
                     "ephemeralOwner", "dataLength", "numChildren", "pzxid")


def register(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser("zk", help="a small znode shell (ls, get, set, create, delete, stat, watch)",
                                   description=__doc__,
                                   formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--server", default="127.0.0.1:2181", help="HOST:PORT[,HOST:PORT...] (default 127.0.0.1:2181)")
    parser.add_argument("--timeout", type=float, default=10.0, help="connect timeout in seconds")
    commands = parser.add_subparsers(dest="zk_command", metavar="COMMAND")
    commands.required = True
    ls = commands.add_parser("ls", help="list the children of PATH")
    ls.add_argument("path")
    get = commands.add_parser("get", help="print the data of PATH")
    get.add_argument("path")
    stat = commands.add_parser("stat", help="print the Stat of PATH")
    stat.add_argument("path")
    set_ = commands.add_parser("set", help="set the data of PATH")
    set_.add_argument("path")
    set_.add_argument("data")
    set_.add_argument("--version", type=int, default=-1, help="expected version (default any)")
    create = commands.add_parser("create", help="create PATH")
    create.add_argument("-e", "--ephemeral", action="store_true", help="ephemeral (gone when this command exits)")
    create.add_argument("-s", "--sequential", action="store_true", help="append a sequence number")
    create.add_argument("path")
    create.add_argument("data", nargs="?", default="")
    delete = commands.add_parser("delete", help="delete PATH")
    delete.add_argument("-r", "--recursive", action="store_true", help="delete its children too")
    delete.add_argument("path")
    delete.add_argument("--version", type=int, default=-1, help="expected version (default any)")
    watch = commands.add_parser("watch", help="print events on PATH")
    watch.add_argument("path")
    watch.add_argument("--events", type=int, default=0, help="stop after this many events (0: no limit)")
    watch.add_argument("--timeout", dest="watch_timeout", type=float, default=0.0,
                       help="stop after this many seconds (0: no limit)")
    parser.set_defaults(func=run)


def _stat_lines(stat: Any) -> list[str]:
    return [f"{name} = {value}" for name, value in zip(ZNODE_STAT_FIELDS, stat, strict=True)]


def run(args: argparse.Namespace) -> int:
    from kazoo.client import KazooClient
    from kazoo.exceptions import KazooException
    from kazoo.handlers.threading import KazooTimeoutError

    client = KazooClient(hosts=args.server, timeout=args.timeout)
    try:
        client.start(timeout=args.timeout)
    except KazooTimeoutError:
        print(f"roost zk: cannot connect to {args.server}", file=sys.stderr)
        return 1
    try:
        return _dispatch(client, args)
    except KazooException as exc:
        print(f"roost zk: {type(exc).__name__}: {args.path}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        return 130
    finally:
        client.stop()
        client.close()


def _dispatch(client: Any, args: argparse.Namespace) -> int:
    command = args.zk_command
    path = args.path
    if command == "ls":
        for child in sorted(client.get_children(path)):
            print(child)
    elif command == "get":
        data, _ = client.get(path)
        sys.stdout.write(data.decode("utf-8", errors="replace") + "\n")
    elif command == "stat":
        stat = client.exists(path)
        if stat is None:
            print(f"roost zk: NoNodeError: {path}", file=sys.stderr)
            return 1
        print("\n".join(_stat_lines(stat)))
    elif command == "set":
        stat = client.set(path, args.data.encode(), version=args.version)
        print(f"version = {stat.version}")
    elif command == "create":
        created = client.create(path, args.data.encode(), ephemeral=args.ephemeral,
                                sequence=args.sequential)
        print(created)
    elif command == "delete":
        client.delete(path, version=args.version, recursive=args.recursive)
    elif command == "watch":
        return _watch(client, path, args.events, args.watch_timeout)
    return 0


def _watch(client: Any, path: str, limit: int, timeout: float) -> int:
    # (is a change, line): the first report of the data and of the children is the current
    # state, not an event, and does not count towards --events.
    events: queue.Queue[tuple[bool, str]] = queue.Queue()
    deadline = time.monotonic() + timeout if timeout > 0 else None
    started = {"data": False, "children": False}

    def text(data: bytes) -> str:
        return data.decode("utf-8", errors="replace")

    def on_data(data: bytes | None, stat: Any) -> None:
        if not started["data"]:
            started["data"] = True
            events.put((False, f"data {path} {'(none)' if data is None else text(data)}"))
        elif data is None:
            events.put((True, f"deleted {path}"))
        else:
            events.put((True, f"changed {path} {text(data)}"))

    def on_children(children: list[str]) -> None:
        change = started["children"]
        started["children"] = True
        events.put((change, f"{'children changed' if change else 'children'} {path} {' '.join(sorted(children))}"))

    client.DataWatch(path, on_data)
    if client.exists(path) is not None:
        client.ChildrenWatch(path, on_children, allow_session_lost=True)
    seen = 0
    while True:
        wait = 1.0 if deadline is None else max(0.0, deadline - time.monotonic())
        try:
            change, line = events.get(timeout=wait)
        except queue.Empty:
            if deadline is not None and time.monotonic() >= deadline:
                return 0
            continue
        print(line, flush=True)
        if change:
            seen += 1
            if limit and seen >= limit:
                return 0
