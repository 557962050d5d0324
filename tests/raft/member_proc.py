"""One RaftReplicator member as a process, driven line by line over stdin/stdout (tests only).

    python -m tests.raft.member_proc --id 1 --peers 1=127.0.0.1:7001,2=...,3=... --dir DIR

Commands, one per line: `status`, `propose DATA`, `read`, `dump`; each answers one JSON line.
The state machine is the list of applied (index, data); small snapshots exercise catch-up.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
import threading

from roost.raft.node import RaftReplicator, ReplicatorConfig
from roost.raft.replicator import NoQuorum


async def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--id", type=int, required=True)
    parser.add_argument("--peers", required=True)
    parser.add_argument("--dir", required=True)
    args = parser.parse_args()
    peers = {}
    for item in args.peers.split(","):
        node, _, address = item.partition("=")
        host, _, port = address.rpartition(":")
        peers[int(node)] = (host, int(port))
    config = ReplicatorConfig(tick_interval=0.02, snapshot_entries=50, keep_entries=10)
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


if __name__ == "__main__":
    asyncio.run(main())
