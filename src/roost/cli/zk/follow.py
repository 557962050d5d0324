"""`roost zk watch PATH`: follow a node's data and children, one line per change, until N
changes were seen or a timeout passed (kazoo's DataWatch and ChildrenWatch re-arm the one-shot
watches for us)."""

from __future__ import annotations

import queue
import time
from typing import Any

import click

from roost.cli.zk.kazoo_session import ZkSession


def follow(session: ZkSession, path: str, limit: int, timeout: float) -> None:
    # (is a change, line): the first report of the data and of the children is the current
    # state, not an event, and does not count towards `limit`.
    events: queue.Queue[tuple[bool, str]] = queue.Queue()
    deadline = time.monotonic() + timeout if timeout > 0 else None
    started = {"data": False, "children": False}
    client = session.client

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

    with session.errors(path):
        client.DataWatch(path, on_data)
        if session.wait(client.exists_async(path), path) is not None:
            client.ChildrenWatch(path, on_children, allow_session_lost=True)
    seen = 0
    while True:
        wait = 1.0 if deadline is None else max(0.0, deadline - time.monotonic())
        try:
            change, line = events.get(timeout=wait)
        except queue.Empty:
            if deadline is not None and time.monotonic() >= deadline:
                return
            continue
        click.echo(line)
        if change:
            seen += 1
            if limit and seen >= limit:
                return
