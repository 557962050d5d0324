"""The Raft log and snapshot files read back from hostile bytes.

As the storage module documents, recovery keeps the records before the first torn or corrupt one
and cuts the file there: a damaged log loads exactly like the clean prefix it starts with, the
cut is reported, and nothing but StorageError ever escapes. A damaged snapshot file is skipped.
"""

from __future__ import annotations

import tempfile
from pathlib import Path

import crc32c
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from roost.raft.messages import Entry, EntryKind, HardState, Snapshot
from roost.raft.storage import LOG_NAME, DiskStorage, Recovered, StorageError, encode_entry, encode_hard_state

PROPERTIES = settings(max_examples=150, deadline=None, derandomize=True,
                      suppress_health_check=[HealthCheck.too_slow])
U64 = st.integers(0, 2**64 - 1)


@st.composite
def log_records(draw: st.DrawFn) -> list[bytes]:
    """The encoded records of a plausible log: entries (a later one may replace a suffix, as after
    a leader change) and hard states."""
    records: list[bytes] = []
    last = 0
    for _ in range(draw(st.integers(1, 12))):
        if draw(st.booleans()):
            index = draw(st.integers(1, last + 1))
            kind = draw(st.sampled_from(list(EntryKind)))
            records.append(encode_entry(Entry(draw(st.integers(0, 50)), index, draw(st.binary(max_size=40)), kind)))
            last = index
        else:
            records.append(encode_hard_state(HardState(draw(U64), draw(U64), draw(U64))))
    return records


def load_bytes(data: bytes, snapshot: bytes | None = None) -> Recovered:
    """What DiskStorage recovers from a directory holding `data` as its log (and a snapshot file)."""
    with tempfile.TemporaryDirectory() as directory:
        (Path(directory) / LOG_NAME).write_bytes(data)
        if snapshot is not None:
            (Path(directory) / f"snapshot-{7:020d}.snap").write_bytes(snapshot)
        storage = DiskStorage(directory, fsync=False)
        try:
            recovered = storage.load()
        finally:
            storage.close()
        # The file is cut where recovery stopped reading.
        assert (Path(directory) / LOG_NAME).stat().st_size == len(data) - recovered.truncated_bytes
        return recovered


def assert_same_state(got: Recovered, expected: Recovered) -> None:
    assert (got.entries, got.hard_state, got.snapshot) == (expected.entries, expected.hard_state, expected.snapshot)


def boundaries(records: list[bytes]) -> list[int]:
    """Byte offsets where each record starts, and the end."""
    offsets = [0]
    for record in records:
        offsets.append(offsets[-1] + len(record))
    return offsets


@PROPERTIES
@given(log_records(), st.data())
def test_a_torn_log_loads_as_its_whole_records(records: list[bytes], data: st.DataObject) -> None:
    blob = b"".join(records)
    cut = data.draw(st.integers(0, len(blob)))
    whole = max(b for b in boundaries(records) if b <= cut)
    got = load_bytes(blob[:cut])
    assert_same_state(got, load_bytes(blob[:whole]))
    assert got.truncated_bytes == cut - whole


@PROPERTIES
@given(log_records(), st.data())
def test_a_corrupted_log_is_cut_before_the_damaged_record(records: list[bytes], data: st.DataObject) -> None:
    blob = bytearray(b"".join(records))
    start = data.draw(st.integers(0, len(blob) - 1))
    replacement = data.draw(st.binary(min_size=1, max_size=min(4, len(blob) - start)))
    if bytes(blob[start:start + len(replacement)]) == replacement:
        return
    blob[start:start + len(replacement)] = replacement
    # Every record before the damaged one is kept; from it on, everything is cut (a length field
    # that now points elsewhere still fails the CRC).
    damaged = max(b for b in boundaries(records)[:-1] if b <= start)
    got = load_bytes(bytes(blob))
    assert_same_state(got, load_bytes(bytes(blob[:damaged])))
    assert got.truncated_bytes == len(blob) - damaged


@PROPERTIES
@given(st.binary(max_size=300))
def test_arbitrary_bytes_as_a_log(blob: bytes) -> None:
    try:
        load_bytes(blob)
    except StorageError:
        pass


@PROPERTIES
@given(st.lists(st.binary(max_size=40), min_size=1, max_size=6))
def test_checksummed_garbage_records(payloads: list[bytes]) -> None:
    """Records whose CRCs are right but whose contents are anything (only a bug writes those):
    recovered or refused with StorageError, never another exception."""
    blob = b"".join(len(p).to_bytes(4, "big") + crc32c.crc32c(p).to_bytes(4, "big") + p for p in payloads)
    try:
        load_bytes(blob)
    except StorageError:
        pass


def snapshot_file(index: int, term: int, data: bytes) -> bytes:
    with tempfile.TemporaryDirectory() as directory:
        storage = DiskStorage(directory, fsync=False)
        storage.save_snapshot(Snapshot(index, term, data))
        return (Path(directory) / f"snapshot-{index:020d}.snap").read_bytes()


@PROPERTIES
@given(st.binary(max_size=100), st.data())
def test_a_damaged_snapshot_file_is_skipped(data_bytes: bytes, data: st.DataObject) -> None:
    blob = bytearray(snapshot_file(7, 3, data_bytes))
    assert load_bytes(b"", bytes(blob)).snapshot == Snapshot(7, 3, data_bytes)
    if data.draw(st.booleans()):
        damaged = bytes(blob[:data.draw(st.integers(0, len(blob) - 1))])
    else:
        start = data.draw(st.integers(0, len(blob) - 1))
        replacement = data.draw(st.binary(min_size=1, max_size=min(4, len(blob) - start)))
        if bytes(blob[start:start + len(replacement)]) == replacement:
            return
        blob[start:start + len(replacement)] = replacement
        damaged = bytes(blob)
    assert load_bytes(b"", damaged).snapshot is None


@PROPERTIES
@given(st.binary(max_size=120))
def test_arbitrary_bytes_as_a_snapshot_file(blob: bytes) -> None:
    try:
        load_bytes(b"", blob)
    except StorageError:
        pass
