"""The in-memory view of a member's raft log, with its persistence and apply cursors.

Indices: `offset` is the index just before the first entry kept in memory (the compaction point;
0 for a fresh log), so `entries[k]` has index `offset + 1 + k`.

Cursors, in order: applied_handed <= commit, and persisted <= handed <= last_index:
- `handed`: the last index handed to the caller for persisting (in a Ready);
- `persisted`: the last index the caller has acknowledged as durable and that still matches;
- `applied_handed`: the last committed index handed to the caller for applying.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from roost.raft.messages import Entry, Snapshot


class RaftLog:
    def __init__(self, snapshot: Snapshot | None, entries: Sequence[Entry], commit: int) -> None:
        self.offset = snapshot.index if snapshot else 0
        self.offset_term = snapshot.term if snapshot else 0
        self.entries: list[Entry] = [e for e in entries if e.index > self.offset]
        for k, entry in enumerate(self.entries):
            assert entry.index == self.offset + 1 + k, "recovered log has a gap"
        self.commit = max(commit, self.offset)
        assert self.commit <= self.last_index, "commit index beyond the recovered log"
        self.persisted = self.last_index  # everything recovered from storage is durable
        self.handed = self.last_index
        self.applied_handed = self.offset  # the state machine starts from the snapshot

    # --- queries -----------------------------------------------------------------------------

    @property
    def last_index(self) -> int:
        return self.offset + len(self.entries)

    @property
    def last_term(self) -> int:
        return self.entries[-1].term if self.entries else self.offset_term

    def term(self, index: int) -> int | None:
        """The term of the entry at `index`, or None if it is compacted away or not there."""
        if index == self.offset:
            return self.offset_term
        if index < self.offset or index > self.last_index:
            return None
        return self.entries[index - self.offset - 1].term

    def entry(self, index: int) -> Entry:
        assert self.offset < index <= self.last_index, f"no entry {index} in ({self.offset}, {self.last_index}]"
        return self.entries[index - self.offset - 1]

    def match_term(self, index: int, term: int) -> bool:
        return self.term(index) == term

    def is_up_to_date(self, last_index: int, last_term: int) -> bool:
        """Raft §5.4.1: a candidate's log at least as up to date as ours gets our vote."""
        return last_term > self.last_term or (last_term == self.last_term and last_index >= self.last_index)

    def slice(self, lo: int, max_count: int, max_bytes: int) -> list[Entry]:
        """Entries from `lo` on, at most `max_count` and about `max_bytes` (at least one entry)."""
        assert lo > self.offset
        out: list[Entry] = []
        size = 0
        for index in range(lo, min(self.last_index, lo + max_count - 1) + 1):
            entry = self.entries[index - self.offset - 1]
            size += len(entry.data) + 32
            if out and size > max_bytes:
                break
            out.append(entry)
        return out

    def find_conflict_by_term(self, index: int, term: int) -> int:
        """The largest index <= `index` whose term is <= `term` (the fast back-off hint)."""
        index = min(index, self.last_index)
        while index > self.offset:
            entry_term = self.term(index)
            assert entry_term is not None
            if entry_term <= term:
                return index
            index -= 1
        return self.offset

    # --- mutation ----------------------------------------------------------------------------

    def append(self, entries: Iterable[Entry]) -> None:
        for entry in entries:
            assert entry.index == self.last_index + 1, "log append out of order"
            assert entry.term >= self.last_term, "log terms must not decrease"
            self.entries.append(entry)

    def append_from_leader(self, prev_index: int, entries: Sequence[Entry]) -> None:
        """Append a leader's entries after `prev_index` (which matched), truncating a conflicting
        suffix and skipping entries we already have (duplicates and reordered messages)."""
        for k, entry in enumerate(entries):
            assert entry.index == prev_index + 1 + k
            have = self.term(entry.index)
            if have == entry.term:
                continue
            if have is None and entry.index <= self.offset:
                continue  # compacted, therefore committed, therefore the same entry
            if have is not None:
                self.truncate_from(entry.index)
            self.append(entries[k:])
            return

    def truncate_from(self, index: int) -> None:
        assert index > self.commit, f"truncating committed entry {index} (commit {self.commit})"
        assert index > self.offset
        del self.entries[index - self.offset - 1:]
        self.persisted = min(self.persisted, index - 1)
        self.handed = min(self.handed, index - 1)

    def commit_to(self, index: int) -> bool:
        if index <= self.commit:
            return False
        assert index <= self.last_index, f"commit {index} beyond last index {self.last_index}"
        self.commit = index
        return True

    def take_unstable(self) -> list[Entry]:
        """Entries not yet handed out for persisting; hands them out."""
        out = self.entries[self.handed - self.offset:]
        self.handed = self.last_index
        return out

    def stable_to(self, index: int, term: int) -> None:
        """The caller made entries up to (index, term) durable."""
        if self.term(index) == term:
            self.persisted = max(self.persisted, min(index, self.handed))

    def take_committed(self) -> list[Entry]:
        """Committed entries not yet handed out for applying, limited to those handed out for
        persisting (the shell persists a Ready before it applies it)."""
        hi = min(self.commit, self.handed)
        if hi <= self.applied_handed:
            return []
        out = self.entries[self.applied_handed - self.offset:hi - self.offset]
        self.applied_handed = hi
        return out

    def restore(self, snapshot: Snapshot) -> None:
        """Replace the whole log by a snapshot received from the leader."""
        assert snapshot.index > self.commit
        self.offset = snapshot.index
        self.offset_term = snapshot.term
        self.entries = []
        self.commit = snapshot.index
        self.persisted = snapshot.index
        self.handed = snapshot.index
        self.applied_handed = snapshot.index

    def compact(self, index: int) -> None:
        """Forget entries up to `index` (they are in a snapshot)."""
        assert index <= self.applied_handed and index <= self.persisted
        if index <= self.offset:
            return
        term = self.term(index)
        assert term is not None
        del self.entries[:index - self.offset]
        self.offset = index
        self.offset_term = term
