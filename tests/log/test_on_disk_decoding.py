"""The partition log's small on-disk files decoded from hostile bytes: producer state snapshots and
the cleaner checkpoint. Arbitrary, truncated or corrupted bytes give the module's one answer for a
damaged file (ValueError for a snapshot, None for a checkpoint), never another exception and never
a silently different state.
"""

from __future__ import annotations

import re
import struct

import crc32c
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from roost.log.cleaner import NEVER, CleanerCheckpoint
from roost.log.producer_state import BATCHES_KEPT, BatchMetadata, ProducerEntry, ProducerStateManager

PROPERTIES = settings(max_examples=300, deadline=None, derandomize=True,
                      suppress_health_check=[HealthCheck.too_slow])

INT16 = st.integers(-(2**15), 2**15 - 1)
INT32 = st.integers(-(2**31), 2**31 - 1)
INT64 = st.integers(-(2**63), 2**63 - 1)


# ------------------------------------------------------------------ producer state snapshots


@st.composite
def producer_states(draw: st.DrawFn) -> ProducerStateManager:
    state = ProducerStateManager()
    state.map_end_offset = draw(st.integers(0, 2**63 - 1))
    for pid in draw(st.lists(st.integers(0, 2**63 - 1), max_size=6, unique=True)):
        entry = ProducerEntry(pid, draw(INT16), last_timestamp=draw(INT64))
        for _ in range(draw(st.integers(0, BATCHES_KEPT))):
            entry.batches.append(BatchMetadata(draw(INT32), draw(INT32), draw(INT64), draw(INT64), draw(INT64)))
        state.producers[pid] = entry
    return state


def same_state(a: ProducerStateManager, b: ProducerStateManager) -> bool:
    return a.map_end_offset == b.map_end_offset and a.producers == b.producers


def decode_snapshot(data: bytes) -> ProducerStateManager | None:
    """The decoded state, or None when the decoder refused it with its error type."""
    try:
        return ProducerStateManager.from_bytes(data)
    except ValueError:
        return None


@PROPERTIES
@given(producer_states())
def test_producer_snapshot_round_trip(state: ProducerStateManager) -> None:
    decoded = decode_snapshot(state.to_bytes())
    assert decoded is not None and same_state(decoded, state)


@PROPERTIES
@given(producer_states(), st.data())
def test_truncated_producer_snapshot_is_refused(state: ProducerStateManager, data: st.DataObject) -> None:
    blob = state.to_bytes()
    cut = data.draw(st.integers(0, len(blob) - 1))
    assert decode_snapshot(blob[:cut]) is None


@PROPERTIES
@given(producer_states(), st.data())
def test_corrupted_producer_snapshot_is_refused(state: ProducerStateManager, data: st.DataObject) -> None:
    # Any change within 4 consecutive bytes is a burst of at most 32 bits: CRC-32C finds them all.
    blob = bytearray(state.to_bytes())
    start = data.draw(st.integers(0, len(blob) - 1))
    replacement = data.draw(st.binary(min_size=1, max_size=min(4, len(blob) - start)))
    before = bytes(blob[start:start + len(replacement)])
    blob[start:start + len(replacement)] = replacement
    if before != replacement:
        assert decode_snapshot(bytes(blob)) is None


@PROPERTIES
@given(st.binary(max_size=200))
def test_arbitrary_bytes_as_producer_snapshot(blob: bytes) -> None:
    decode_snapshot(blob)  # only ValueError may escape


@PROPERTIES
@given(st.binary(max_size=200), st.integers(-3, 3))
def test_checksummed_garbage_decodes_to_exactly_what_it_says_or_is_refused(body: bytes, count: int) -> None:
    """A body with a valid CRC (only a writer's bug makes one that is malformed): whatever the
    decoder accepts must encode back to the same bytes, so nothing was dropped or invented."""
    body = struct.pack(">qi", 0, count) + body if count else body
    blob = struct.pack(">hI", 1, crc32c.crc32c(body)) + body
    decoded = decode_snapshot(blob)
    if decoded is not None:
        assert decoded.to_bytes() == blob


@PROPERTIES
@given(st.integers(0, 2**63 - 1), st.lists(st.tuples(st.integers(0, 2**63 - 1), st.integers(-2, 12)),
                                            min_size=1, max_size=4))
def test_checksummed_snapshot_with_impossible_counts_is_refused(end: int, producers: list[tuple[int, int]]) -> None:
    """Repeated producer ids, or more batches than a producer keeps (or fewer than none), are
    refused rather than silently merged or cut."""
    body = bytearray(struct.pack(">qi", end, len(producers)))
    for pid, batches in producers:
        body += struct.pack(">qhqb", pid, 0, 0, batches)
        body += struct.pack(">iiqqq", 0, 0, 0, 0, 0) * max(batches, 0)
    blob = struct.pack(">hI", 1, crc32c.crc32c(body)) + bytes(body)
    valid = (len({pid for pid, _ in producers}) == len(producers)
             and all(0 <= batches <= BATCHES_KEPT for _, batches in producers))
    decoded = decode_snapshot(blob)
    assert (decoded is not None) == valid, (producers, decoded and decoded.producers)


# ------------------------------------------------------------------------- cleaner checkpoint

# The documented format: two integers and a newline, the clean point not negative.
CHECKPOINT = re.compile(rb"(-?[0-9]+) (-?[0-9]+)\n")


def reference_checkpoint(data: bytes) -> CleanerCheckpoint | None:
    match = CHECKPOINT.fullmatch(data)
    if match is None or int(match[1]) < 0:
        return None
    return CleanerCheckpoint(int(match[1]), int(match[2]))


# Numbers with odd signs and spacing around them: near misses of the format, where parsers slip.
near_numbers = st.tuples(st.sampled_from(["", "-", "--", "+", " ", "0"]),
                         st.text(alphabet="0123456789", max_size=4)).map("".join)
checkpoint_bytes = st.one_of(
    st.binary(max_size=40),
    st.text(alphabet="0123456789- +\n\t", max_size=30).map(str.encode),
    st.tuples(st.integers(-5, 2**63), st.integers(-(2**63), 2**63)).map(lambda t: b"%d %d\n" % t),
    st.tuples(near_numbers, st.sampled_from([" ", "  ", "\t", ""]), near_numbers,
              st.sampled_from(["\n", "", "\n\n", " \n", "\r\n"])).map(lambda t: "".join(t).encode()),
)


@PROPERTIES
@given(checkpoint_bytes)
def test_cleaner_checkpoint_reads_exactly_the_documented_format(data: bytes) -> None:
    assert CleanerCheckpoint.from_bytes(data) == reference_checkpoint(data)


@PROPERTIES
@given(st.integers(0, 2**63 - 1), st.one_of(st.just(NEVER), INT64), st.data())
def test_torn_cleaner_checkpoint_never_parses(clean_point: int, oldest: int, data: st.DataObject) -> None:
    blob = CleanerCheckpoint(clean_point, oldest).to_bytes()
    assert CleanerCheckpoint.from_bytes(blob) == CleanerCheckpoint(clean_point, oldest)
    cut = data.draw(st.integers(0, len(blob) - 1))
    assert CleanerCheckpoint.from_bytes(blob[:cut]) is None
