"""Group commit: producers that need fsync before their acknowledgement share one fsync.

A request for durability joins the next flush round. While one round's fsyncs run on a worker
thread, new requests gather for the following round, so under load many appends (from many
producers and partitions) are covered by one fsync per file, and a lone producer waits for only
one fsync.
"""

from __future__ import annotations

import asyncio
import logging
import os

from roost.log import PartitionLog

log = logging.getLogger("roost.broker.flusher")


class GroupCommitter:
    def __init__(self) -> None:
        self._pending: dict[int, tuple[PartitionLog, list[asyncio.Future[None]]]] = {}
        self._running: asyncio.Task[None] | None = None
        self.rounds = 0
        self.fsyncs = 0

    def request(self, partition_log: PartitionLog) -> asyncio.Future[None]:
        """A future resolved once everything appended to `partition_log` so far is on disk."""
        future: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        entry = self._pending.get(id(partition_log))
        if entry is None:
            self._pending[id(partition_log)] = (partition_log, [future])
        else:
            entry[1].append(future)
        if self._running is None:
            self._running = asyncio.ensure_future(self._run())
        return future

    async def _run(self) -> None:
        try:
            while self._pending:
                batch = list(self._pending.values())
                self._pending = {}
                # Take the fds and end offsets now, on the loop thread: appends that land while
                # the fsync runs belong to the next round.
                handles = [(plog, plog.flush_handle()) for plog, _ in batch]
                error: BaseException | None = None
                try:
                    await asyncio.to_thread(_fsync_all, [fd for _, (fds, _) in handles for fd in fds])
                except OSError as failure:
                    error = failure
                    log.error("fsync failed: %s", failure)
                self.rounds += 1
                for (plog, (fds, end_offset)), (_, futures) in zip(handles, batch, strict=True):
                    if error is None:
                        self.fsyncs += len(fds)
                        plog.mark_flushed(end_offset)
                    for future in futures:
                        if future.done():
                            continue
                        if error is None:
                            future.set_result(None)
                        else:
                            future.set_exception(error)
        finally:
            self._running = None


def _fsync_all(fds: list[int]) -> None:
    for fd in fds:
        os.fsync(fd)
