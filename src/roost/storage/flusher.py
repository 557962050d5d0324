"""Group commit: producers that need fsync before their acknowledgement share one fsync.

A request for durability joins the next flush round. While one round's fsyncs run on the
flusher's thread, new requests gather for the following round, so under load many appends (from
many producers and partitions) are covered by one fsync per file, and a lone producer waits for
only one fsync.

The thread is the committer's own and lives as long as it: a round is handed over with one queue
put and handed back with one `call_soon_threadsafe`. (`asyncio.to_thread` per round cost a task,
an executor work item, a copied context and two futures: about a third of the broker's CPU per
message at 5,000 unbatched messages a second with fsync before ack.)
"""

from __future__ import annotations

import asyncio
import logging
import os
import queue
import threading
from dataclasses import dataclass

from roost.log import PartitionLog

log = logging.getLogger("roost.storage.flusher")


@dataclass
class _Round:
    loop: asyncio.AbstractEventLoop
    # Per partition log: the log, the end offset its fds cover, and the futures waiting for it.
    entries: list[tuple[PartitionLog, int, list[asyncio.Future[None]]]]
    fds: list[list[int]]  # per entry: its fds, fsynced in order


_STOP = None


class GroupCommitter:
    def __init__(self) -> None:
        self._pending: dict[int, tuple[PartitionLog, list[asyncio.Future[None]]]] = {}
        self._in_flight = False
        self._rounds: queue.SimpleQueue[_Round | None] = queue.SimpleQueue()
        self._thread: threading.Thread | None = None
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
        if not self._in_flight:
            self._start_round()
        return future

    def close(self) -> None:
        """Stop the flusher's thread once the round in flight (if any) is done."""
        if self._thread is not None:
            self._rounds.put(_STOP)
            self._thread.join(timeout=30)
            self._thread = None

    def _start_round(self) -> None:
        assert not self._in_flight and self._pending
        batch, self._pending = list(self._pending.values()), {}
        entries: list[tuple[PartitionLog, int, list[asyncio.Future[None]]]] = []
        fds: list[list[int]] = []
        for plog, futures in batch:
            # Take the fds and end offsets now, on the loop thread: appends that land while the
            # fsync runs belong to the next round.
            log_fds, end_offset = plog.flush_handle()
            fds.append(log_fds)
            entries.append((plog, end_offset, futures))
        if self._thread is None:
            self._thread = threading.Thread(target=self._flush_rounds, name="roost-flusher", daemon=True)
            self._thread.start()
        self._in_flight = True
        self._rounds.put(_Round(asyncio.get_running_loop(), entries, fds))

    def _flush_rounds(self) -> None:
        """The flusher's thread: fsync each round's files in order, then hand the round back."""
        while (work := self._rounds.get()) is not _STOP:
            # Each log's own outcome: one failing disk does not fail the logs on the others.
            errors: list[OSError | None] = []
            for log_fds in work.fds:
                error: OSError | None = None
                try:
                    for fd in log_fds:
                        os.fsync(fd)
                except OSError as failure:
                    error = failure
                errors.append(error)
            try:
                work.loop.call_soon_threadsafe(self._finish_round, work, errors)
            except RuntimeError:
                return  # the loop is closed: nobody waits any more

    def _finish_round(self, work: _Round, errors: list[OSError | None]) -> None:
        self._in_flight = False
        self.rounds += 1
        for (plog, end_offset, futures), error, log_fds in zip(work.entries, errors, work.fds, strict=True):
            if error is not None:
                log.error("fsync of %s failed: %s", plog.directory, error)
            else:
                self.fsyncs += len(log_fds)
                plog.mark_flushed(end_offset)
            for future in futures:
                if future.done():
                    continue
                if error is None:
                    future.set_result(None)
                else:
                    future.set_exception(error)
        if self._pending:
            self._start_round()
