"""Producer id allocation for InitProducerId, durable so ids are never handed out twice.

Ids are reserved in blocks: the end of the current block is written (atomically, fsynced) before
any id in it is handed out, so after a crash allocation resumes past every id ever given.
"""

from __future__ import annotations

from pathlib import Path

from roost.log.files import atomic_write

BLOCK_SIZE = 1000


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
