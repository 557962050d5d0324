"""Deleting the files of deleted partitions off the event loop.

A deleted partition's directory is first renamed to `<topic>-<partition>.<id>-deleted` (by the log
manager, on the loop: one rename, so the plain name is free at once for a topic created again);
this thread then removes the renamed directories. Removing a log's files and syncing the parent
directory cost about a millisecond per partition here, so a DeleteTopics or StopReplica of a
thousand partitions held a broker's event loop for 0.5-0.9 s when it was done inline (Kafka
likewise renames and deletes later, `file.delete.delay.ms`).

The thread takes every path queued so far as one round: one fsync of each parent directory makes
the round's renames durable, then the directories go, then one more fsync per parent makes the
removals durable. A directory still there at the next start (the process stopped first) is
removed then (`roost.storage.directories`).
"""

from __future__ import annotations

import contextlib
import logging
import queue
import shutil
import threading
from pathlib import Path

from roost.log.files import fsync_directory

log = logging.getLogger("roost.storage.log_deleter")

_STOP = None
FINISH_TIMEOUT_S = 30.0  # at close: how long the last deletions may take before the broker goes on


class LogDeleter:
    def __init__(self) -> None:
        self._queue: queue.SimpleQueue[Path | None] = queue.SimpleQueue()
        self._thread: threading.Thread | None = None
        self._idle = threading.Event()  # set while nothing is queued or being removed
        self._idle.set()
        self._queued = 0
        self._lock = threading.Lock()
        self.removed = 0

    def remove(self, directory: Path) -> None:
        """Remove `directory` (already renamed out of the live names) and its files, soon."""
        with self._lock:
            self._queued += 1
            self._idle.clear()
        if self._thread is None:
            self._thread = threading.Thread(target=self._run, name="roost-log-deleter", daemon=True)
            self._thread.start()
        self._queue.put(directory)

    def wait_idle(self, timeout: float) -> bool:
        """Block until every queued directory is gone (for tests and the broker's stop)."""
        return self._idle.wait(timeout)

    def close(self) -> None:
        """Finish the queued deletions (bounded) and stop the thread."""
        if self._thread is None:
            return
        self._queue.put(_STOP)
        self._thread.join(FINISH_TIMEOUT_S)
        if self._thread.is_alive():
            log.warning("log deletions still running after %.0f s; the next start finishes them",
                        FINISH_TIMEOUT_S)
        self._thread = None

    def _run(self) -> None:
        stopping = False
        while not stopping:
            taken = [self._queue.get()]  # a round: this one and all queued behind it
            with contextlib.suppress(queue.Empty):
                while True:
                    taken.append(self._queue.get_nowait())
            stopping = _STOP in taken
            directories = [directory for directory in taken if directory is not _STOP]
            if directories:
                self._remove_round(directories)

    def _remove_round(self, directories: list[Path]) -> None:
        parents = {directory.parent for directory in directories}
        try:
            for parent in parents:
                _sync_if_present(parent)  # the renames first: a deleted log never comes back
            for directory in directories:
                shutil.rmtree(directory, ignore_errors=True)
            for parent in parents:
                _sync_if_present(parent)
        except OSError as error:
            # A failed disk: what is left is removed at the next start; the directory's failure
            # is the log manager's to notice on its own writes.
            log.warning("removing deleted logs in %s: %s", ", ".join(map(str, parents)), error)
        finally:
            with self._lock:
                self._queued -= len(directories)
                self.removed += len(directories)
                assert self._queued >= 0
                if self._queued == 0:
                    self._idle.set()
        log.info("removed %d deleted partition log(s)", len(directories))


def _sync_if_present(directory: Path) -> None:
    if directory.is_dir():
        fsync_directory(directory)
