"""The leader-epoch cache: Kafka's endOffsetFor rules, its checkpoint file, and its life inside
the partition log (appends, truncation, log start moves, reopen, rebuild)."""

from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from roost.log.leader_epochs import (
    CHECKPOINT_FILE,
    EpochEntry,
    LeaderEpochCache,
    format_checkpoint,
    parse_checkpoint,
)
from tests.log.conftest import LogFactory, batch


def _cache(entries: list[tuple[int, int]]) -> LeaderEpochCache:
    return LeaderEpochCache(Path("/nonexistent"), [EpochEntry(*e) for e in entries], persist=False)


def test_end_offset_for_follows_kafka() -> None:
    cache = _cache([(2, 0), (4, 100), (7, 250)])
    assert cache.end_offset_for(7, 300) == (7, 300)  # the latest epoch ends at the log end
    assert cache.end_offset_for(4, 300) == (4, 250)  # an older one where the next begins
    assert cache.end_offset_for(5, 300) == (4, 250)  # unknown in between: the largest below
    assert cache.end_offset_for(1, 300) == (1, 0)  # below the first: the first one's start
    assert cache.end_offset_for(8, 300) == (-1, -1)  # above the latest: nothing known
    assert cache.end_offset_for(-1, 300) == (-1, -1)
    assert _cache([]).end_offset_for(3, 10) == (-1, -1)


def test_assign_ignores_later_batches_of_the_latest_epoch_and_drops_conflicts() -> None:
    cache = _cache([(1, 0), (3, 50)])
    assert not cache.assign(3, 60)
    assert cache.assign(3, 40)  # the same epoch, earlier: replaces it
    assert cache.entries == [EpochEntry(1, 0), EpochEntry(3, 40)]
    assert cache.assign(2, 30)  # an older epoch: entries at or above it (epoch or offset) go
    assert cache.entries == [EpochEntry(1, 0), EpochEntry(2, 30)]
    assert cache.assign(5, 30) and cache.entries == [EpochEntry(1, 0), EpochEntry(5, 30)]


def test_truncations() -> None:
    cache = _cache([(1, 0), (3, 50), (6, 90)])
    cache.truncate_from_end(90)
    assert cache.entries == [EpochEntry(1, 0), EpochEntry(3, 50)]
    cache.truncate_from_start(70)
    assert cache.entries == [EpochEntry(3, 70)]
    cache.truncate_from_start(10)
    assert cache.entries == [EpochEntry(3, 70)]


@given(st.lists(st.tuples(st.integers(0, 10**6), st.integers(0, 10**12)), max_size=20))
def test_checkpoint_round_trip(raw: list[tuple[int, int]]) -> None:
    entries: list[EpochEntry] = []
    for epoch, offset in sorted(set(raw)):
        if not entries or (epoch > entries[-1].epoch and offset > entries[-1].start_offset):
            entries.append(EpochEntry(epoch, offset))
    assert parse_checkpoint(format_checkpoint(entries)) == entries


@given(st.text(max_size=80))
def test_garbage_checkpoints_raise_value_error_only(text: str) -> None:
    try:
        entries = parse_checkpoint(text)
    except ValueError:
        return
    _cache([tuple(e) for e in entries])  # what parses satisfies the cache's invariants


@pytest.mark.parametrize("text", ["0\n1\n3 5", "1\n0\n", "0\n2\n1 0\n", "0\n2\n3 5\n2 9\n", "0\n1\nx y\n"])
def test_bad_checkpoints_are_refused(text: str) -> None:
    with pytest.raises(ValueError):
        parse_checkpoint(text)


def test_the_log_keeps_the_cache_through_appends_truncation_and_reopen(logs: LogFactory) -> None:
    log = logs.open()
    log.append(bytearray(batch([b"a", b"b"])), leader_epoch=0)
    log.append(bytearray(batch([b"c"])), leader_epoch=2)
    log.append(bytearray(batch([b"d"])), leader_epoch=2)
    log.append(bytearray(batch([b"e"])), leader_epoch=5)
    assert log.leader_epochs.entries == [EpochEntry(0, 0), EpochEntry(2, 2), EpochEntry(5, 4)]
    log.truncate_to(4)
    assert log.leader_epochs.entries == [EpochEntry(0, 0), EpochEntry(2, 2)]
    log.close()
    reopened = logs.open()
    assert reopened.leader_epochs.entries == [EpochEntry(0, 0), EpochEntry(2, 2)]
    reopened.delete_records_before(3)
    assert reopened.leader_epochs.entries == [EpochEntry(2, 3)]


def test_truncating_at_the_log_end_drops_an_epoch_that_holds_no_batch(logs: LogFactory) -> None:
    # This broker led in epoch 2 from offset 1 but appended nothing before it became a follower;
    # its new leader never had epoch 2 and says epoch 0 ends at 1: the cut at 1 keeps every batch
    # and must drop epoch 2, or the follower asks from epoch 2 forever.
    log = logs.open()
    log.append(bytearray(batch([b"a"])), leader_epoch=0)
    log.leader_epochs.assign(2, log.log_end_offset)
    log.truncate_to(1)
    assert log.log_end_offset == 1
    assert log.leader_epochs.entries == [EpochEntry(0, 0)]
    log.truncate_to(5)  # past the end: nothing changes
    assert log.leader_epochs.entries == [EpochEntry(0, 0)]


def test_a_lost_checkpoint_is_rebuilt_from_the_batches(logs: LogFactory) -> None:
    log = logs.open()
    log.append(bytearray(batch([b"a"])), leader_epoch=1)
    log.append(bytearray(batch([b"b", b"c"])), leader_epoch=4)
    directory = log.directory
    log.close()
    (directory / CHECKPOINT_FILE).unlink()
    reopened = logs.open()
    assert reopened.leader_epochs.entries == [EpochEntry(1, 0), EpochEntry(4, 1)]
    assert parse_checkpoint((directory / CHECKPOINT_FILE).read_text()) == reopened.leader_epochs.entries


def test_a_follower_append_records_the_epochs_of_the_leaders_batches(logs: LogFactory) -> None:
    leader = logs.open("leader-0")
    leader.append(bytearray(batch([b"a"])), leader_epoch=3)
    leader.append(bytearray(batch([b"b"])), leader_epoch=7)
    follower = logs.open("follower-0")
    data = leader.read(0, 1 << 20)
    follower.append(bytearray(b"".join(bytes(b) for b in data.buffers)), assign_offsets=False)
    assert follower.leader_epochs.entries == [EpochEntry(3, 0), EpochEntry(7, 1)]
