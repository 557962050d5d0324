"""The client side's frame cutting: a response's size prefix is checked before anything is read."""

from __future__ import annotations

import pytest

from roost.wire.kafka import KafkaCodecError
from roost.wire.kafka.framing import SIZE_PREFIX, frame_size


def test_frame_size_reads_the_prefix_and_refuses_what_no_peer_should_send() -> None:
    assert frame_size(SIZE_PREFIX.pack(0), 10) == 0
    assert frame_size(SIZE_PREFIX.pack(10) + b"rest", 10) == 10
    with pytest.raises(KafkaCodecError, match="outside"):
        frame_size(SIZE_PREFIX.pack(11), 10)
    with pytest.raises(KafkaCodecError, match="outside"):
        frame_size(SIZE_PREFIX.pack(-1), 10)
