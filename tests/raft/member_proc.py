"""One RaftReplicator member as a process, driven line by line over stdin/stdout (tests only).

    python -m tests.raft.member_proc --id 1 --peers 1=127.0.0.1:7001,2=...,3=... --dir DIR [--no-fsync]

Commands, one per line: `status`, `propose DATA`, `read`, `dump`; each answers one JSON line.
The state machine is the list of applied (index, data); small snapshots exercise catch-up.
`Member` runs one from a test and talks to it.
"""

from __future__ import annotations

import argparse
import asyncio
import dataclasses
import json
import os
import queue
import subprocess
import sys
import threading
import time
from pathlib import Path

from roost.raft.node import RaftReplicator, ReplicatorConfig
from roost.raft.replicator import NoQuorum

ROOT = Path(__file__).resolve().parents[2]


async def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--id", type=int, required=True)
    parser.add_argument("--peers", required=True)
    parser.add_argument("--dir", required=True)
    parser.add_argument("--no-fsync", action="store_true", help="never fsync the log (tests of the tests)")
    args = parser.parse_args()
    peers = {}
    for item in args.peers.split(","):
        node, _, address = item.partition("=")
        host, _, port = address.rpartition(":")
        peers[int(node)] = (host, int(port))
    config = ReplicatorConfig(tick_interval=0.02, snapshot_entries=50, keep_entries=10)
    if args.no_fsync:
        config = dataclasses.replace(config, fsync=False)
    member = RaftReplicator(args.id, peers, args.dir, config)
    applied: list[tuple[int, str]] = []

    def restore(index: int, blob: bytes) -> None:
        applied[:] = [(i, d) for i, d in json.loads(blob)]

    member.set_state_machine(lambda i, e: applied.append((i, e.decode())),
                             lambda: json.dumps(applied).encode(), restore)
    await member.start()
    loop = asyncio.get_running_loop()
    lines: asyncio.Queue[str | None] = asyncio.Queue()

    def pump() -> None:
        for line in sys.stdin:
            loop.call_soon_threadsafe(lines.put_nowait, line)
        loop.call_soon_threadsafe(lines.put_nowait, None)

    threading.Thread(target=pump, daemon=True).start()
    print(json.dumps({"started": args.id}), flush=True)

    def answer(obj: object) -> None:
        print(json.dumps(obj), flush=True)

    async def propose(data: str) -> None:
        try:
            answer({"ok": await member.propose(data.encode(), timeout=10)})
        except NoQuorum as exc:
            answer({"error": str(exc)})

    while (line := await lines.get()) is not None:
        command, _, rest = line.strip().partition(" ")
        if command == "status":
            answer({"leader": member.leader_id, "is_leader": member.is_leader, "applied": member.last_applied})
        elif command == "propose":
            await propose(rest)
        elif command == "read":
            try:
                await member.read_barrier(timeout=10)
                answer({"ok": member.last_applied})
            except NoQuorum as exc:
                answer({"error": str(exc)})
        elif command == "dump":
            answer({"entries": applied})
    await member.stop()


class Member:
    """A member process started by a test, asked one command at a time."""

    def __init__(self, node_id: int, peers: str, directory: Path, *flags: str) -> None:
        self.id = node_id
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "tests.raft.member_proc", "--id", str(node_id), "--peers", peers,
             "--dir", str(directory), *flags],
            cwd=ROOT, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True,
            env={**os.environ, "PYTHONUNBUFFERED": "1"},
        )
        self.lines: queue.Queue[str] = queue.Queue()
        threading.Thread(target=self._pump, daemon=True).start()
        assert "started" in self._next(60)

    def _pump(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            self.lines.put(line)

    def _next(self, timeout: float) -> dict:
        return json.loads(self.lines.get(timeout=timeout))

    def ask(self, command: str, timeout: float = 30.0) -> dict:
        assert self.proc.stdin is not None
        self.proc.stdin.write(command + "\n")
        self.proc.stdin.flush()
        return self._next(timeout)

    def kill9(self) -> None:
        self.proc.kill()
        self.proc.wait(30)

    def stop(self) -> None:
        if self.proc.poll() is None:
            try:
                assert self.proc.stdin is not None
                self.proc.stdin.close()
                self.proc.wait(30)
            except (subprocess.TimeoutExpired, OSError):
                self.proc.kill()
                self.proc.wait(30)


def wait_for_leader(members: list[Member], timeout: float = 30.0) -> Member:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        statuses = {m.id: m.ask("status") for m in members}
        leaders = {s["leader"] for s in statuses.values()}
        if len(leaders) == 1:
            (leader,) = leaders
            if leader in statuses and statuses[leader]["is_leader"]:
                return next(m for m in members if m.id == leader)
        time.sleep(0.05)
    raise AssertionError(f"no agreed leader among {[m.id for m in members]}")


if __name__ == "__main__":
    asyncio.run(main())
