"""Producer id allocation for InitProducerId, durable so ids are never handed out twice.

Ids are reserved in blocks before any id in a block is handed out, so after a crash allocation
resumes past every id ever given. A lone broker keeps the end of its block in a file (written
atomically and fsynced); the brokers of a cluster reserve their blocks in ZooKeeper, as Kafka's do
(`/latest_producer_id_block`, a conditional write per block), so no two brokers ever hand out the
same id — two producers sharing an id would break each other's sequence numbers.
"""

from __future__ import annotations

import asyncio
import json
import logging
from collections.abc import Awaitable
from pathlib import Path

from roost.log.files import atomic_write
from roost.zkclient import BadVersionError, NodeExistsError, NoNodeError, ZkClient

log = logging.getLogger("roost.broker.txn.producer_ids")

BLOCK_SIZE = 1000
BLOCK_PATH = "/latest_producer_id_block"
MAX_ATTEMPTS = 20


class ProducerIdAllocator:
    def __init__(self, path: Path) -> None:
        self._path = path
        self._next = int(path.read_text()) if path.exists() else 0
        self._block_end = self._next  # nothing reserved yet in this process

    def allocate(self) -> int:
        if self._next >= self._block_end:
            self._block_end = self._next + BLOCK_SIZE
            atomic_write(self._path, str(self._block_end).encode())
        producer_id = self._next
        self._next += 1
        return producer_id


class ZkProducerIdAllocator:
    """Blocks of ids reserved in ZooKeeper: `{"version":1,"broker":B,"block_start":"S","block_end":"E"}`
    (Kafka's ProducerIdBlockZNode). `allocate()` answers at once while the current block lasts."""

    def __init__(self, zk: ZkClient, broker_id: int, floor: int = 0) -> None:
        self._zk = zk
        self._broker_id = broker_id
        self._floor = floor  # ids below it were handed out before (by this broker, standalone)
        self._next = 0
        self._block_end = 0  # exclusive
        self._reserving: asyncio.Future[None] | None = None

    def raise_floor(self, floor: int) -> None:
        """Ids below `floor` are in use elsewhere (a cluster link mirrored batches of the source's
        producers with them): never hand them out; a reserved block below it is given up."""
        if floor > self._floor:
            self._floor = floor
            if self._next < floor:
                self._next = self._block_end  # the next allocation reserves a block past the floor

    def allocate(self) -> int | Awaitable[int]:
        if self._next < self._block_end:
            producer_id = self._next
            self._next += 1
            return producer_id
        return self._allocate_after_reserving()

    async def _allocate_after_reserving(self) -> int:
        while self._next >= self._block_end:
            if self._reserving is None:
                self._reserving = asyncio.ensure_future(self._reserve())
            reserving = self._reserving
            try:
                await asyncio.shield(reserving)
            finally:
                if self._reserving is reserving and reserving.done():
                    self._reserving = None
        producer_id = self._next
        self._next += 1
        return producer_id

    async def _reserve(self) -> None:
        for _ in range(MAX_ATTEMPTS):
            try:
                data, stat = await self._zk.get(BLOCK_PATH)
                last_end = int(json.loads(data)["block_end"]) if data else -1
                version = stat.version
            except NoNodeError:
                last_end, version = -1, None
            start = max(last_end + 1, self._floor)
            end = start + BLOCK_SIZE - 1  # Kafka's block ends are inclusive
            body = json.dumps({"version": 1, "broker": self._broker_id, "block_start": str(start),
                               "block_end": str(end)}).encode()
            try:
                if version is None:
                    await self._zk.create(BLOCK_PATH, body)
                else:
                    await self._zk.set(BLOCK_PATH, body, version)
            except (BadVersionError, NodeExistsError):
                continue  # another broker took that block: try the next
            self._next, self._block_end = start, end + 1
            log.info("reserved producer ids %d-%d", start, end)
            return
        raise RuntimeError(f"could not reserve a block of producer ids in {MAX_ATTEMPTS} attempts")
