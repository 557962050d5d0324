"""The keeper's persisted formats read back from hostile bytes: command batches (the Raft log's
entries), tree snapshots, and the touch messages followers send. Anything truncated, mutated or
arbitrary decodes to a value that encodes back to itself, or is refused with ZkCodecError, never
another exception. (Corruption on disk is the Raft storage's CRC's job: these decoders must
still never crash on what gets past it.)
"""

from __future__ import annotations

import struct

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from roost.keeper.commands import BATCH_MAGIC, Batch
from roost.keeper.core import TOUCH_MAGIC, decode_touches, encode_touches
from roost.keeper.tree import SNAPSHOT_MAGIC, SNAPSHOT_VERSION, DataTree
from roost.wire.zk.errors import ZkCodecError
from tests.keeper.test_tree import random_commands, replay

PROPERTIES = settings(max_examples=200, deadline=None, derandomize=True,
                      suppress_health_check=[HealthCheck.too_slow])
INT32 = st.integers(-(2**31), 2**31 - 1)
INT64 = st.integers(-(2**63), 2**63 - 1)


@st.composite
def batches(draw: st.DrawFn) -> Batch:
    commands = random_commands(draw(st.integers(0, 10_000)), draw(st.integers(0, 6)))
    return Batch(draw(INT32), draw(INT64), draw(INT64), draw(INT64), draw(INT64), commands)


def mutate(blob: bytes, data: st.DataObject) -> bytes:
    """`blob` with one edit: a cut, 1-4 bytes replaced, or bytes inserted."""
    edited = bytearray(blob)
    where = data.draw(st.integers(0, max(len(blob) - 1, 0)))
    kind = data.draw(st.sampled_from(["cut", "replace", "insert"]))
    if kind == "cut":
        del edited[where:]
    elif kind == "replace":
        edited[where:where + 4] = data.draw(st.binary(min_size=1, max_size=4))
    else:
        edited[where:where] = data.draw(st.binary(min_size=1, max_size=4))
    return bytes(edited)


def decode_batch(blob: bytes) -> Batch | None:
    try:
        batch = Batch.decode(blob)
    except ZkCodecError:
        return None
    assert Batch.decode(batch.encode()) == batch, "decoded to something that does not encode back"
    return batch


@PROPERTIES
@given(batches(), st.data())
def test_a_truncated_batch_is_refused(batch: Batch, data: st.DataObject) -> None:
    blob = batch.encode()
    assert decode_batch(blob) == batch
    assert decode_batch(blob[:data.draw(st.integers(0, len(blob) - 1))]) is None
    assert decode_batch(blob + data.draw(st.binary(min_size=1, max_size=8))) is None  # trailing bytes


@PROPERTIES
@given(batches(), st.data())
def test_a_mutated_batch_decodes_consistently_or_is_refused(batch: Batch, data: st.DataObject) -> None:
    decode_batch(mutate(batch.encode(), data))


@PROPERTIES
@given(st.binary(max_size=200), st.booleans())
def test_arbitrary_bytes_as_a_batch(blob: bytes, with_magic: bool) -> None:
    decode_batch(struct.pack(">i", BATCH_MAGIC) + blob if with_magic else blob)


def decode_tree(blob: bytes) -> DataTree | None:
    try:
        tree = DataTree.from_snapshot(blob)
    except ZkCodecError:
        return None
    assert DataTree.from_snapshot(tree.snapshot()).digest() == tree.digest()
    assert "/" in tree.nodes
    assert all((path.rsplit("/", 1)[0] or "/") in tree.nodes for path in tree.nodes if path != "/")
    return tree


@PROPERTIES
@given(st.integers(0, 10_000), st.integers(0, 60), st.data())
def test_a_damaged_tree_snapshot_is_refused_or_consistent(seed: int, count: int, data: st.DataObject) -> None:
    tree, _ = replay(random_commands(seed, count))
    blob = tree.snapshot()
    decoded = decode_tree(blob)
    assert decoded is not None and decoded.digest() == tree.digest()
    assert decode_tree(blob[:data.draw(st.integers(0, len(blob) - 1))]) is None
    decode_tree(mutate(blob, data))


@PROPERTIES
@given(st.binary(max_size=300), st.booleans())
def test_arbitrary_bytes_as_a_tree_snapshot(blob: bytes, with_header: bool) -> None:
    decode_tree(struct.pack(">ii", SNAPSHOT_MAGIC, SNAPSHOT_VERSION) + blob if with_header else blob)


@PROPERTIES
@given(st.lists(INT64, max_size=5), st.binary(max_size=60), st.booleans())
def test_touch_messages(ids: list[int], blob: bytes, with_magic: bool) -> None:
    assert decode_touches(encode_touches(ids)) == ids
    message = struct.pack(">i", TOUCH_MAGIC) + blob if with_magic else blob
    try:
        decoded = decode_touches(message)
    except ZkCodecError:
        return
    assert encode_touches(decoded) == message
