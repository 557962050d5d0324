"""The share coordinator's pure core and its records (broker/share/coordinator_core.py,
coordinator_records.py): Kafka's placement, record layouts, epochs and fencing, snapshots every
N updates, the replay a new coordinator loads with."""

from __future__ import annotations

import itertools
import uuid

import pytest
from hypothesis import given
from hypothesis import strategies as st

from roost.broker.share.coordinator_core import ShareCoordinatorCore, StateRecord, merge_batches
from roost.broker.share.coordinator_records import (
    ShareKey,
    decode_key,
    decode_value,
    encode_key,
    encode_value,
    parse_coordinator_key,
    share_partition_for,
    topic_id_text,
)
from roost.broker.share.partition import StateBatch
from roost.wire.kafka.errors import ErrorCode
from roost.wire.kafka.schemas.share_state import SHARE_SNAPSHOT_TYPE, SHARE_UPDATE_TYPE

TOPIC = uuid.UUID("6d1a2c3e-4f50-4a6b-8c7d-9e0f1a2b3c4d")
KEY = ShareKey("workers", TOPIC, 0)


def apply(core: ShareCoordinatorCore, decision, offset: int = -1):
    """What the shell does once the record is replicated."""
    assert decision.error == ErrorCode.NONE, decision
    if decision.record is not None:
        record = decision.record
        # through the bytes, as the log holds them
        value = None if record.value is None else decode_value(record.record_type,
                                                               encode_value(record.record_type, record.value))
        record_type, key = decode_key(encode_key(record.record_type, record.key))
        core.replay(StateRecord(record_type, key, value), offset)
    return decision


def test_placement_is_kafkas_hash_of_the_coordinator_key():
    key = ShareKey("g", uuid.UUID(bytes=bytes(range(16))), 3)
    assert key.coordinator_key() == "g:AAECAwQFBgcICQoLDA0ODw:3"
    # Java 17: "g:AAECAwQFBgcICQoLDA0ODw:3".hashCode() == -720837766, Math.abs(...) % 50 == 16
    assert share_partition_for(key, 50) == 16
    assert parse_coordinator_key("a:b:c:" + topic_id_text(TOPIC) + ":7") == ShareKey("a:b:c", TOPIC, 7)
    for bad in ("", "g:x", "g:notauuid:1", ":" + topic_id_text(TOPIC) + ":1", "g:" + topic_id_text(TOPIC) + ":x"):
        with pytest.raises(ValueError):
            parse_coordinator_key(bad)


def test_record_layouts_are_kafkas():
    key = encode_key(SHARE_UPDATE_TYPE, ShareKey("g", uuid.UUID(int=1), 2))
    # int16 type 1, string "g", 16 bytes of uuid, int32 partition
    assert key == b"\x00\x01" + b"\x00\x01g" + uuid.UUID(int=1).bytes + b"\x00\x00\x00\x02"
    value = encode_value(SHARE_SNAPSHOT_TYPE, {
        "snapshot_epoch": 1, "state_epoch": 2, "leader_epoch": 3, "start_offset": 4, "delivery_complete_count": 5,
        "create_timestamp": 6, "write_timestamp": 7, "state_batches": [
            {"first_offset": 4, "last_offset": 9, "delivery_state": 2, "delivery_count": 1}]})
    assert value[:2] == b"\x00\x00"  # value version 0
    assert value.endswith(b"\x01\x00\x04\x00\x00\x00\x05")  # tagged DeliveryCompleteCount (tag 0, 4 bytes)
    assert decode_value(SHARE_SNAPSHOT_TYPE, value)["delivery_complete_count"] == 5


def test_initialize_read_write_and_fencing():
    core = ShareCoordinatorCore()
    assert core.read(KEY, 0, now=0).error == ErrorCode.INVALID_REQUEST
    assert core.write(KEY, state_epoch=0, leader_epoch=0, start_offset=0, delivery_complete_count=0, batches=(),
                      now=0).error == ErrorCode.INVALID_REQUEST
    apply(core, core.initialize(KEY, 1, 100, now=5))
    state = core.states[KEY]
    assert (state.snapshot_epoch, state.state_epoch, state.leader_epoch, state.start_offset) == (0, 1, -1, 100)
    # a new leader's read records its epoch before it is answered
    read = apply(core, core.read(KEY, 4, now=6))
    assert read.record is not None and read.record.record_type == SHARE_UPDATE_TYPE
    assert core.states[KEY].leader_epoch == 4
    assert core.read(KEY, 4, now=7).record is None
    # the old leader is fenced, reading or writing
    assert core.read(KEY, 3, now=8).error == ErrorCode.FENCED_LEADER_EPOCH
    assert core.write(KEY, state_epoch=1, leader_epoch=3, start_offset=100, delivery_complete_count=0,
                      batches=(), now=8).error == ErrorCode.FENCED_LEADER_EPOCH
    assert core.summary(KEY, 3).error == ErrorCode.FENCED_LEADER_EPOCH
    apply(core, core.write(KEY, state_epoch=1, leader_epoch=4, start_offset=102, delivery_complete_count=1,
                           batches=(StateBatch(103, 103, 2, 1), StateBatch(104, 106, 0, 2)), now=9))
    state = core.states[KEY]
    assert state.start_offset == 102 and state.batches == (StateBatch(103, 103, 2, 1), StateBatch(104, 106, 0, 2))
    # -1 start offset leaves it; newer batches overwrite
    apply(core, core.write(KEY, state_epoch=1, leader_epoch=4, start_offset=-1, delivery_complete_count=2,
                           batches=(StateBatch(105, 105, 4, 3),), now=10))
    assert core.states[KEY].batches == (StateBatch(103, 103, 2, 1), StateBatch(104, 104, 0, 2),
                                        StateBatch(105, 105, 4, 3), StateBatch(106, 106, 0, 2))
    # a re-initialization (AlterShareGroupOffsets) with a newer state epoch fences the old state
    apply(core, core.initialize(KEY, 2, 500, now=11))
    assert core.write(KEY, state_epoch=1, leader_epoch=4, start_offset=600, delivery_complete_count=0,
                      batches=(), now=12).error == ErrorCode.FENCED_STATE_EPOCH
    assert core.initialize(KEY, 1, 0, now=12).error == ErrorCode.FENCED_STATE_EPOCH
    assert core.states[KEY].snapshot_epoch == 1 and core.states[KEY].batches == ()
    summary = core.summary(KEY, 4)
    assert summary.state.start_offset == 500 and summary.state.state_epoch == 2
    apply(core, core.delete(KEY))
    assert KEY not in core.states
    assert core.delete(KEY).error == ErrorCode.NONE and core.delete(KEY).record is None


def test_a_snapshot_every_n_updates_and_the_replay_from_the_log_agrees():
    core = ShareCoordinatorCore(updates_per_snapshot=3)
    log: list[tuple[StateRecord, int]] = []

    def step(decision):
        apply(core, decision, offset=len(log))
        if decision.record is not None:
            log.append((decision.record, len(log)))

    step(core.initialize(KEY, 0, 0, now=0))
    kinds = []
    for i in range(8):
        d = core.write(KEY, state_epoch=0, leader_epoch=1, start_offset=i, delivery_complete_count=0,
                       batches=(StateBatch(i, i + 2, 0, i % 3),), now=i)
        kinds.append(d.record.record_type)
        step(d)
    assert kinds == [1, 1, 1, 0, 1, 1, 1, 0]
    assert core.prune_offset([KEY]) == 8  # the last snapshot's offset
    # a new coordinator replays the log: the same state
    fresh = ShareCoordinatorCore(updates_per_snapshot=3)
    for record, offset in log:
        fresh.replay(record, offset)
    assert fresh.states == core.states
    # and from the last snapshot on only (what pruning keeps)
    pruned = ShareCoordinatorCore(updates_per_snapshot=3)
    for record, offset in log[8:]:
        pruned.replay(record, offset)
    assert pruned.states == core.states


batch = st.builds(lambda first, size, state, count: StateBatch(first, first + size, state, count),
                  st.integers(0, 40), st.integers(0, 6), st.sampled_from([0, 2, 4]), st.integers(0, 5))


@given(st.lists(st.tuples(st.integers(0, 30), st.lists(batch, max_size=4)), max_size=12))
def test_merging_is_last_write_wins_per_offset(writes):
    """The merged batches say, for every offset at or past the start, what the latest write
    covering it said."""
    merged: tuple[StateBatch, ...] = ()
    expected: dict[int, tuple[int, int]] = {}
    start = 0
    for new_start, batches in writes:
        start = max(start, new_start)
        for b in batches:
            for offset in range(b.first_offset, b.last_offset + 1):
                expected[offset] = (b.delivery_state, b.delivery_count)
        merged = merge_batches(merged, batches, start)
        got = {o: (b.delivery_state, b.delivery_count) for b in merged for o in range(b.first_offset, b.last_offset + 1)}
        assert got == {o: v for o, v in expected.items() if o >= start}
        for a, b in itertools.pairwise(merged):
            assert a.last_offset < b.first_offset
