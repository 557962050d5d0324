"""The keeper's persisted formats read back from hostile bytes: command batches (the Raft log's
entries), tree snapshots, and the touch messages followers send. Anything truncated, mutated or
arbitrary decodes to a value that encodes back to itself, or is refused with ZkCodecError, never
another exception. (Corruption on disk is the Raft storage's CRC's job: these decoders must
still never crash on what gets past it.)
"""

from __future__ import annotations

import struct
from pathlib import Path

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from roost.keeper.commands import BATCH_MAGIC, BATCH_MAGIC_V2, Batch, Command, CommandKind
from roost.keeper.core import TOUCH_MAGIC, decode_touches, encode_touches
from roost.keeper.tree import SNAPSHOT_MAGIC, SNAPSHOT_VERSION, DataTree
from roost.wire.zk.constants import Err
from roost.wire.zk.errors import ZkCodecError
from roost.wire.zk.records import MultiRequest, SetDataRequest
from tests.keeper.test_tree import SESSION, command, create, random_commands, replay

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
@given(st.binary(max_size=200), st.sampled_from([None, BATCH_MAGIC, BATCH_MAGIC_V2]))
def test_arbitrary_bytes_as_a_batch(blob: bytes, magic: int | None) -> None:
    decode_batch(blob if magic is None else struct.pack(">i", magic) + blob)


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


# ------------------------------------------------------------------- null data is not empty data

DATA = st.none() | st.binary(max_size=6)


@PROPERTIES
@given(st.lists(st.tuples(DATA, DATA, st.booleans()), min_size=1, max_size=6))
def test_null_and_empty_data_survive_the_log_and_snapshots(
        nodes: list[tuple[bytes | None, bytes | None, bool]]) -> None:
    """Each node is created with its first data, then set to its second (in a multi or alone);
    through a batch's bytes, the tree and its snapshot, None stays None and b"" stays b""."""
    commands = [Command(CommandKind.CREATE_SESSION, SESSION, timeout=4000, passwd=b"p" * 16)]
    for i, (first, second, in_multi) in enumerate(nodes):
        path = f"/n{i}"
        if in_multi:
            commands.append(command(MultiRequest([create(path, first), SetDataRequest(path, second, 0)])))
        else:
            commands += [command(create(path, first)), command(SetDataRequest(path, second, 0))]
    batch = Batch(1, 1, 0, 1, 1000, commands)
    decoded = Batch.decode(batch.encode())
    assert decoded == batch and not decoded.null_as_empty
    tree = DataTree()
    for cmd in decoded.commands:
        assert tree.apply(cmd, 1000).err == Err.OK
    restored = decode_tree(tree.snapshot())
    assert restored is not None
    for i, (_, second, _) in enumerate(nodes):
        for t in (tree, restored):
            node = t.get(f"/n{i}")
            assert node.data == second and (node.data is None) == (second is None)
            assert node.stat().data_length == len(second or b"")


def _format2_blobs() -> tuple[bytes, bytes]:
    lines = (Path(__file__).parent / "golden" / "format2_null_data.hex").read_text().splitlines()
    batch_hex, snapshot_hex = [line for line in lines if not line.startswith("#")]
    return bytes.fromhex(batch_hex), bytes.fromhex(snapshot_hex)


def test_a_format2_log_and_snapshot_load_as_their_keeper_left_them() -> None:
    """A batch and a snapshot written by the keeper before null data: the batch decodes as
    format 2 and re-encodes to the same bytes, replaying it rebuilds that keeper's snapshot byte
    for byte (null data applied as empty, as it was then), and the snapshot loads unchanged."""
    old_batch, old_snapshot = _format2_blobs()
    batch = Batch.decode(old_batch)
    assert batch.null_as_empty and batch.encode() == old_batch
    tree = DataTree()
    for cmd in batch.commands:
        assert tree.apply(cmd, batch.time_ms).err == Err.OK
    assert tree.snapshot() == old_snapshot
    loaded = DataTree.from_snapshot(old_snapshot)
    assert loaded.snapshot() == old_snapshot
    assert {p: loaded.get(p).data for p in ("/null", "/empty", "/full", "/m")} == dict.fromkeys(
        ("/null", "/empty", "/full", "/m"), b"")
    # The same commands in a new batch keep their null data.
    renewed = Batch.decode(Batch(1, 1, 0, 1, 1000, [
        Command(c.kind, c.session_id, c.xid, c.opcode, c.auth_ids, c.body, c.timeout, c.passwd)
        for c in batch.commands]).encode())
    assert not renewed.null_as_empty
    tree = DataTree()
    for cmd in renewed.commands:
        assert tree.apply(cmd, renewed.time_ms).err == Err.OK
    assert {p: tree.get(p).data for p in ("/null", "/empty", "/full", "/m")} == {
        "/null": None, "/empty": None, "/full": None, "/m": None}
