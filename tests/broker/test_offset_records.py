"""The __consumer_offsets record codec: round trips, Kafka's placement, and no surprise errors."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from roost.broker.group.offsets import (
    CommittedOffset,
    OffsetRecordError,
    decode_key,
    decode_value,
    encode_key,
    encode_value,
    offsets_partition_for,
)


@given(st.text(max_size=50), st.text(max_size=50), st.integers(0, 2**31 - 1))
def test_key_round_trip(group: str, topic: str, partition: int) -> None:
    assert decode_key(encode_key((group, topic, partition))) == (group, topic, partition)


@given(st.integers(-1, 2**63 - 1), st.integers(-1, 2**31 - 1), st.text(max_size=100), st.integers(0, 2**62))
def test_value_round_trip(offset: int, epoch: int, metadata: str, stamp: int) -> None:
    value = CommittedOffset(offset, epoch, metadata, stamp)
    assert decode_value(encode_value(value)) == value


@given(st.binary(max_size=200))
def test_arbitrary_bytes_raise_only_the_codec_error(data: bytes) -> None:
    for decode in (decode_key, decode_value):
        try:
            decode(data)
        except OffsetRecordError:
            pass


def test_group_placement_matches_kafka() -> None:
    # Kafka: Utils.abs(groupId.hashCode()) % partitions; Java's "hello".hashCode() == 99162322.
    assert offsets_partition_for("hello", 50) == 99162322 % 50
    assert offsets_partition_for("", 50) == 0
    # A group id whose hashCode is Integer.MIN_VALUE maps to partition 0 ("polygenelubricants").
    assert offsets_partition_for("polygenelubricants", 50) == 0
