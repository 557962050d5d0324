"""The leader-epoch cache of one partition: at which offset each leader epoch began.

Followers truncate by it, never by the high watermark alone (KIP-101, KIP-279): asked for the
end of epoch E, the leader answers with the start of the first epoch after E (or its log end if
E is the latest), and a follower cuts its log there. It lives in memory as a list of
(epoch, start offset), both strictly increasing, and on disk as Kafka's `leader-epoch-checkpoint`:

    0               <- format version
    2               <- number of entries
    3 0             <- epoch start-offset
    5 1200

The file is replaced atomically and fsynced on every change (changes are rare: a leader change,
a truncation). A missing or unreadable file is rebuilt from the batches' leader epochs by the
log's recovery.
"""

from __future__ import annotations

import itertools
import logging
import re
from bisect import bisect_right
from pathlib import Path
from typing import NamedTuple

from roost.log.files import atomic_write

logger = logging.getLogger("roost.log.epochs")

CHECKPOINT_FILE = "leader-epoch-checkpoint"
FORMAT_VERSION = 0
UNDEFINED_EPOCH = -1
UNDEFINED_OFFSET = -1
_ENTRY = re.compile(r"^(\d+) (\d+)$")
MAX_ENTRIES = 1_000_000


class EpochEntry(NamedTuple):
    epoch: int
    start_offset: int


class LeaderEpochCache:
    def __init__(self, directory: Path, entries: list[EpochEntry] | None = None, *, persist: bool = True) -> None:
        self.directory = directory
        self.entries: list[EpochEntry] = list(entries or [])
        self._persist = persist
        self._check()

    @staticmethod
    def readable(directory: Path) -> bool:
        """The checkpoint in `directory` exists and parses."""
        try:
            parse_checkpoint((directory / CHECKPOINT_FILE).read_text())
        except (OSError, ValueError, UnicodeDecodeError):
            return False
        return True

    @classmethod
    def load(cls, directory: Path) -> LeaderEpochCache:
        """The cache of the checkpoint in `directory`; empty when there is none or it is unreadable."""
        path = directory / CHECKPOINT_FILE
        try:
            entries = parse_checkpoint(path.read_text())
        except FileNotFoundError:
            entries = []
        except (ValueError, UnicodeDecodeError) as error:
            logger.warning("ignoring unreadable %s (%s); rebuilding from the log", path, error)
            entries = []
        return cls(directory, entries)

    # questions --------------------------------------------------------------------------------
    @property
    def latest_epoch(self) -> int:
        return self.entries[-1].epoch if self.entries else UNDEFINED_EPOCH

    def end_offset_for(self, requested_epoch: int, log_end_offset: int) -> tuple[int, int]:
        """(epoch, end offset) for OffsetForLeaderEpoch and DivergingEpoch, Kafka's rules: the
        latest epoch ends at the log end; an older one at the start of the next higher epoch held
        here, with the epoch answered being the largest one <= the requested; a request below
        the first epoch gets (requested, the first epoch's start); an unknown epoch (-1, -1)."""
        if requested_epoch == UNDEFINED_EPOCH or not self.entries:
            return UNDEFINED_EPOCH, UNDEFINED_OFFSET
        if requested_epoch == self.latest_epoch:
            return requested_epoch, log_end_offset
        epochs = [e.epoch for e in self.entries]
        higher = bisect_right(epochs, requested_epoch)  # first entry with epoch > requested
        if higher == 0:
            return requested_epoch, self.entries[0].start_offset
        if higher == len(self.entries):
            return UNDEFINED_EPOCH, UNDEFINED_OFFSET  # above the latest: nothing known
        return self.entries[higher - 1].epoch, self.entries[higher].start_offset

    def epoch_for_offset(self, offset: int) -> int:
        """The epoch whose leader wrote `offset`: the last entry starting at or before it
        (Kafka's LeaderEpochFileCache.epochForOffset); UNDEFINED_EPOCH before the first entry."""
        starts = [e.start_offset for e in self.entries]
        at = bisect_right(starts, offset)
        return self.entries[at - 1].epoch if at else UNDEFINED_EPOCH

    # changes ----------------------------------------------------------------------------------
    def assign(self, epoch: int, start_offset: int) -> bool:
        """Epoch `epoch` starts at `start_offset` (a leader taking over at its log end, or a
        follower meeting the first batch of a new epoch). Entries that conflict with it (an
        equal or higher epoch, or a start at or past it) are dropped first, as Kafka does.
        Returns True when the cache changed."""
        assert epoch >= 0 and start_offset >= 0
        if self.entries:
            latest = self.entries[-1]
            if epoch == latest.epoch and start_offset >= latest.start_offset:
                return False  # more batches of the current epoch
        if self.entries and epoch < self.latest_epoch:
            # A follower replaying an older leader's batches after a truncation: the cache was
            # cut to below these batches, so this cannot happen unless the caller skipped that.
            logger.warning("%s: epoch %d at offset %d is older than the latest epoch %d; replacing",
                           self.directory, epoch, start_offset, self.latest_epoch)
        kept = [e for e in self.entries if e.epoch < epoch and e.start_offset < start_offset]
        self.entries = [*kept, EpochEntry(epoch, start_offset)]
        self._check()
        self._write()
        return True

    def truncate_from_end(self, end_offset: int) -> None:
        """The log was cut at `end_offset`: epochs starting at or after it are gone."""
        kept = [e for e in self.entries if e.start_offset < end_offset]
        if len(kept) != len(self.entries):
            self.entries = kept
            self._write()

    def truncate_from_start(self, start_offset: int) -> None:
        """The log now starts at `start_offset`: epochs wholly below it are gone, and the one
        it falls in now starts there."""
        below = [e for e in self.entries if e.start_offset <= start_offset]
        if len(below) <= 1 and (not below or below[0].start_offset == start_offset):
            return
        above = [e for e in self.entries if e.start_offset > start_offset]
        first = EpochEntry(below[-1].epoch, start_offset) if below else None
        self.entries = ([first] if first else []) + above
        self._check()
        self._write()

    def clear(self) -> None:
        if self.entries:
            self.entries = []
            self._write()

    # internals --------------------------------------------------------------------------------
    def _check(self) -> None:
        assert len(self.entries) <= MAX_ENTRIES
        for before, after in zip(self.entries, self.entries[1:], strict=False):
            assert before.epoch < after.epoch, f"epochs increase: {self.entries}"
            assert before.start_offset < after.start_offset, f"start offsets increase: {self.entries}"

    def save(self) -> None:
        """Write the checkpoint now (the changes above do it themselves)."""
        self._write()

    def _write(self) -> None:
        if self._persist:
            atomic_write(self.directory / CHECKPOINT_FILE, format_checkpoint(self.entries).encode())


def format_checkpoint(entries: list[EpochEntry]) -> str:
    lines = [str(FORMAT_VERSION), str(len(entries)), *(f"{e.epoch} {e.start_offset}" for e in entries)]
    return "\n".join(lines) + "\n"


def parse_checkpoint(text: str) -> list[EpochEntry]:
    """Raises ValueError naming what is wrong with the text."""
    lines = text.split("\n")
    if len(lines) < 3 or lines[-1] != "":
        raise ValueError("truncated leader-epoch-checkpoint")
    if lines[0] != str(FORMAT_VERSION):
        raise ValueError(f"unknown leader-epoch-checkpoint version {lines[0]!r}")
    if not lines[1].isdigit() or int(lines[1]) != len(lines) - 3 or int(lines[1]) > MAX_ENTRIES:
        raise ValueError(f"leader-epoch-checkpoint says {lines[1]!r} entries, has {len(lines) - 3}")
    entries = []
    for line in lines[2:-1]:
        match = _ENTRY.match(line)
        if match is None:
            raise ValueError(f"bad leader-epoch-checkpoint entry {line!r}")
        entries.append(EpochEntry(int(match[1]), int(match[2])))
    for before, after in itertools.pairwise(entries):
        if before.epoch >= after.epoch or before.start_offset >= after.start_offset:
            raise ValueError("leader-epoch-checkpoint entries do not increase")
    return entries
