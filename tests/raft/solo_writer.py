"""A process for the kill -9 test: a LocalReplicator that prints what it recovered, then writes.

    python -m tests.raft.solo_writer DIR [--write]

Prints `applied INDEX DATA` for every entry applied during start(), then `ready`; with --write it
then proposes forever (8 in flight) and prints `acked INDEX DATA` after each proposal returns.
"""

from __future__ import annotations

import asyncio
import sys

from roost.raft.local import LocalReplicator


async def main(directory: str, write: bool) -> None:
    replicator = LocalReplicator(directory, fsync=True)
    replicator.set_state_machine(lambda index, data: print(f"applied {index} {data.decode()}"),
                                 lambda: b"", lambda index, blob: None)
    await replicator.start()
    print("ready", flush=True)
    if not write:
        await replicator.stop()
        return
    counter = 0

    async def writer(worker: int) -> None:
        nonlocal counter
        while True:
            counter += 1
            data = f"w{worker}-{counter}"
            index = await replicator.propose(data.encode())
            print(f"acked {index} {data}", flush=True)

    await asyncio.gather(*(writer(w) for w in range(8)))


if __name__ == "__main__":
    asyncio.run(main(sys.argv[1], "--write" in sys.argv))
