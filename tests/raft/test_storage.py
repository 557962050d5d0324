"""DiskStorage: what was saved comes back; a torn tail is cut; compaction keeps what it must."""

from __future__ import annotations

from pathlib import Path

import pytest

from roost.raft.core import Ready
from roost.raft.messages import Entry, EntryKind, HardState, Membership, Snapshot
from roost.raft.storage import LOG_NAME, DiskStorage


def entries(first: int, last: int, term: int) -> list[Entry]:
    return [Entry(term, i, b"e%d" % i) for i in range(first, last + 1)]


def save(storage: DiskStorage, es: list[Entry], hs: HardState | None = None,
         snapshot: Snapshot | None = None) -> None:
    storage.save(Ready(hard_state=hs, entries=es, snapshot=snapshot, must_sync=True))


def reopen(directory: Path) -> tuple[DiskStorage, object]:
    storage = DiskStorage(directory)
    return storage, storage.load()


def test_round_trip_with_overwritten_suffix(tmp_path: Path) -> None:
    storage = DiskStorage(tmp_path)
    assert storage.load().entries == []
    save(storage, entries(1, 5, 1), HardState(1, 2, 3))
    save(storage, entries(4, 6, 2), HardState(2, 3, 3))  # a new leader replaced 4 and 5
    storage.close()
    _, got = reopen(tmp_path)
    assert got.entries == entries(1, 3, 1) + entries(4, 6, 2)
    assert got.hard_state == HardState(2, 3, 3)
    assert got.snapshot is None


@pytest.mark.parametrize("cut", [1, 5, 9, 17, 27])
def test_torn_tail_is_cut_and_log_stays_appendable(tmp_path: Path, cut: int) -> None:
    storage = DiskStorage(tmp_path)
    storage.load()
    save(storage, entries(1, 3, 1), HardState(1, 1, 2))
    size = (tmp_path / LOG_NAME).stat().st_size
    save(storage, entries(4, 4, 1))
    storage.close()
    with (tmp_path / LOG_NAME).open("r+b") as handle:
        handle.truncate(size + cut)  # a crash in the middle of writing entry 4
    storage, got = reopen(tmp_path)
    assert got.entries == entries(1, 3, 1) and got.truncated_bytes == cut
    save(storage, entries(4, 5, 1))
    storage.close()
    assert reopen(tmp_path)[1].entries == entries(1, 5, 1)


def test_corrupt_record_is_cut(tmp_path: Path) -> None:
    storage = DiskStorage(tmp_path)
    storage.load()
    save(storage, entries(1, 2, 1), HardState(1, 1, 1))
    size = (tmp_path / LOG_NAME).stat().st_size
    save(storage, entries(3, 4, 1))
    storage.close()
    data = bytearray((tmp_path / LOG_NAME).read_bytes())
    data[size + 12] ^= 0xFF
    (tmp_path / LOG_NAME).write_bytes(bytes(data))
    assert reopen(tmp_path)[1].entries == entries(1, 2, 1)


def test_compaction_keeps_trailing_entries(tmp_path: Path) -> None:
    storage = DiskStorage(tmp_path)
    storage.load()
    save(storage, entries(1, 10, 1), HardState(1, 1, 10))
    snap = Snapshot(8, 1, b"state@8")
    storage.compact(snap, base_index=5, base_term=1, entries=entries(6, 10, 1))
    save(storage, entries(11, 12, 2), HardState(2, 1, 12))
    storage.close()
    _, got = reopen(tmp_path)
    assert got.snapshot == snap
    assert got.entries == entries(9, 10, 1) + entries(11, 12, 2)  # only what follows the snapshot
    assert got.hard_state == HardState(2, 1, 12)
    storage.compact(Snapshot(12, 2, b"state@12"), 12, 2, [])
    assert [p.name for p in tmp_path.glob("*.snap")] == [f"snapshot-{12:020d}.snap"]


def test_a_snapshot_keeps_its_configuration_and_config_entries_their_kind(tmp_path: Path) -> None:
    storage = DiskStorage(tmp_path)
    storage.load()
    membership = Membership(frozenset({1, 2, 3}), frozenset({4}), b'{"1": "a"}')
    config_entry = Entry(1, 11, Membership(frozenset({1, 2, 3, 4})).encode(), EntryKind.CONFIG)
    save(storage, [*entries(1, 10, 1), config_entry], HardState(1, 1, 11))
    snap = Snapshot(10, 1, b"state@10", membership)
    storage.compact(snap, base_index=10, base_term=1, entries=[config_entry])
    storage.close()
    _, got = reopen(tmp_path)
    assert got.snapshot == snap and got.snapshot.membership == membership
    assert got.entries == [config_entry]


def test_snapshot_from_leader_replaces_the_log(tmp_path: Path) -> None:
    storage = DiskStorage(tmp_path)
    storage.load()
    save(storage, entries(1, 4, 1), HardState(1, 1, 2))
    snap = Snapshot(20, 3, b"state@20")
    save(storage, entries(21, 22, 3), HardState(3, 0, 20), snapshot=snap)
    storage.close()
    _, got = reopen(tmp_path)
    assert got.snapshot == snap and got.entries == entries(21, 22, 3)
    assert got.hard_state == HardState(3, 0, 20)


def test_divergent_log_behind_a_snapshot_is_dropped(tmp_path: Path) -> None:
    """Crash after the leader's snapshot was saved but before the log was rewritten."""
    storage = DiskStorage(tmp_path)
    storage.load()
    save(storage, entries(1, 12, 1), HardState(1, 1, 2))
    storage.save_snapshot(Snapshot(10, 2, b"x"))  # term 2 at 10: our entries 3.. diverged
    storage.close()
    _, got = reopen(tmp_path)
    assert got.entries == [] and got.hard_state.commit == 10


def test_unreadable_snapshot_falls_back_to_older(tmp_path: Path) -> None:
    storage = DiskStorage(tmp_path)
    storage.load()
    save(storage, entries(1, 6, 1), HardState(1, 1, 6))
    storage.compact(Snapshot(4, 1, b"s4"), 4, 1, entries(5, 6, 1))
    (tmp_path / f"snapshot-{6:020d}.snap").write_bytes(b"garbage")
    storage.close()
    _, got = reopen(tmp_path)
    assert got.snapshot == Snapshot(4, 1, b"s4") and got.entries == entries(5, 6, 1)
