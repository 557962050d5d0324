"""What the group and the transaction coordinators share about the internal partitions they lead
(`__consumer_offsets`, `__transaction_state`): a led partition's load state, what requests for its
keys answer meanwhile, and the read of its whole log a new leader replays, a chunk at a time."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from enum import Enum
from typing import Protocol

from roost.broker.replica.partition import Partition
from roost.wire.kafka.errors import ErrorCode

# Bytes read per step when loading a partition; the event loop runs other work between steps.
# bench/group_load_bench.py: 16 KiB steps (about 250 commit records) held the loop at most 3 ms
# of CPU, bigger ones 12-140 ms, and the whole load costs about the same CPU (5 % more than 64 KiB).
LOAD_CHUNK_BYTES = 16 * 1024


class LoadState(Enum):
    LOADING = "loading"
    LOADED = "loaded"
    FAILED = "failed"  # the log could not be read: its keys answer NOT_COORDINATOR


class LedPartition(Protocol):
    """An internal partition this broker leads, as its coordinator tracks it."""

    partition: Partition
    state: LoadState


def coordinator_status(led: LedPartition | None) -> ErrorCode:
    """NONE when this broker coordinates the keys of `led` now (None: a partition it does not
    lead); else what their requests answer."""
    if led is None or led.state == LoadState.FAILED or not led.partition.is_leader:
        return ErrorCode.NOT_COORDINATOR
    if led.state == LoadState.LOADING:
        return ErrorCode.COORDINATOR_LOAD_IN_PROGRESS
    return ErrorCode.NONE


async def log_chunks(partition: Partition) -> AsyncIterator[bytes]:
    """The partition's batches from its log start to its log end, LOAD_CHUNK_BYTES or so at a
    time, letting requests and replication run between chunks. The log's OSError and
    OffsetOutOfRange pass through (the caller marks the load FAILED)."""
    position = partition.log_start_offset
    while position < partition.log_end_offset:
        position = max(position, partition.log_start_offset)  # DeleteRecords meanwhile
        chunk = partition.read_to_log_end(position, LOAD_CHUNK_BYTES)
        if not chunk.buffers:
            break
        yield b"".join(bytes(b) for b in chunk.buffers)
        assert chunk.next_offset > position, "reads make progress"
        position = chunk.next_offset
        await asyncio.sleep(0)
