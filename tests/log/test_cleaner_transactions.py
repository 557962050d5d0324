"""Compaction of transactional data, as Kafka's cleaner does it: aborted records go, committed
ones are compacted like any record, a marker goes once its transaction left no record and it is
older than delete.retention.ms, and no pass reaches an undecided transaction. Retention never
deletes a segment holding a record of an undecided transaction."""

from __future__ import annotations

from dataclasses import dataclass, field

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from roost.log import PartitionLog
from roost.log.cleaner_rules import AbortedRanges, OffsetMap, RecordFilter
from roost.log.producer_state import OK
from roost.log.transactions import AbortedTxn, build_marker
from roost.wire.kafka.records import build_batch, parse_header
from tests.log.compaction_checks import log_batches_with_headers, log_records
from tests.log.conftest import FakeClock, LogFactory

DAY = 86_400_000
ABORT_KEY = b"\x00\x00\x00\x00"  # a control record's key: version 0, type 0 (ABORT)
CONFIG = {"segment_bytes": 100_000}


@dataclass
class Producer:
    """A transactional producer writing straight into a log (sequences as a client keeps them)."""

    log: PartitionLog
    clock: FakeClock
    pid: int
    sequence: int = 0
    offsets: list[int] = field(default_factory=list)

    def send(self, *records: tuple[bytes, bytes | None]) -> int:
        data = build_batch(list(records), timestamp_ms=self.clock.now_ms, producer_id=self.pid, producer_epoch=0,
                           base_sequence=self.sequence, is_transactional=True)  # fmt: skip
        self.sequence += len(records)
        info = self.log.append(bytearray(data))
        return info.first_offset

    def end(self, *, commit: bool) -> int:
        marker = build_marker(self.pid, 0, commit=commit, coordinator_epoch=0, timestamp_ms=self.clock.now_ms)
        return self.log.append(bytearray(marker)).first_offset


def plain(log: PartitionLog, clock: FakeClock, key: bytes, value: bytes | None) -> int:
    return log.append(bytearray(build_batch([(key, value)], timestamp_ms=clock.now_ms))).first_offset


def read_committed(log: PartitionLog) -> list[tuple[int, bytes | None, bytes | None]]:
    """(offset, key, value) of what a read_committed consumer delivers reading from the log start,
    as Kafka's consumer decides it: the fetch's aborted transactions (producer id, first offset)
    put their producer on an "aborted" list once a batch reaches that first offset, every
    transactional batch of a listed producer is skipped, and its ABORT marker takes it off."""
    pending = sorted(log.aborted_transactions(log.log_start_offset, log.log_end_offset),
                     key=lambda entry: entry.first_offset)  # fmt: skip
    aborted_producers: set[int] = set()
    found = []
    for _base, header, records in log_batches_with_headers(log):
        if header.producer_id >= 0:
            while pending and pending[0].first_offset <= header.last_offset:
                aborted_producers.add(pending.pop(0).producer_id)
        if header.is_control:
            if records and records[0].key == ABORT_KEY:
                aborted_producers.discard(header.producer_id)
            continue
        if header.is_transactional and header.producer_id in aborted_producers:
            continue
        found += [(r.offset, r.key, r.value) for r in records if r.offset >= log.log_start_offset]
    return found


def latest_per_key(records: list[tuple[int, bytes | None, bytes | None]]) -> dict[bytes | None, bytes | None]:
    latest: dict[bytes | None, bytes | None] = {}
    for _offset, key, value in records:
        latest[key] = value
    return latest


def markers(log: PartitionLog) -> list[tuple[int, int]]:
    """(offset, producer id) of every control batch left."""
    return [(h.base_offset, h.producer_id) for _b, h, _r in log_batches_with_headers(log) if h.is_control]


def roll(log: PartitionLog, clock: FakeClock) -> None:
    log._roll(log.log_end_offset, clock.now_ms)


def test_aborted_records_go_committed_ones_are_compacted_markers_go_after_retention(
    logs: LogFactory, clock: FakeClock
) -> None:
    log = logs.open(**CONFIG)
    a, b = Producer(log, clock, pid=1), Producer(log, clock, pid=2)
    a.send((b"k1", b"a-aborted-1"), (b"k2", b"a-aborted-2"))  # 0-1
    b.send((b"k3", b"b-committed-old"))  # 2
    abort_marker = a.end(commit=False)  # 3
    b.send((b"k3", b"b-committed-new"), (b"k4", b"b-committed"))  # 4-5
    commit_b = b.end(commit=True)  # 6
    plain(log, clock, b"k4", b"plain-newer")  # 7: supersedes pid 2's k4
    a.send((b"k5", b"a-committed"))  # 8: pid 1's last batch (its sequence must survive)
    commit_a = a.end(commit=True)  # 9
    b.send((b"k6", b"b-last"))  # 10: pid 2's last batch, so 4-5 is not
    commit_b_last = b.end(commit=True)  # 11
    roll(log, clock)
    visible_before = latest_per_key(read_committed(log))

    stats = log.clean(clock.now_ms, delete_retention_ms=DAY)
    assert stats.cleaned
    kept = {offset: value for offset, _key, value in ((r.offset, r.key, r.value) for r in log_records(log))}
    assert 0 not in kept and 1 not in kept, "aborted records go"
    assert 2 not in kept and 5 not in kept, "committed records superseded by newer ones go"
    assert kept[4] == b"b-committed-new" and kept[8] == b"a-committed"
    assert latest_per_key(read_committed(log)) == visible_before
    assert [offset for offset, _pid in markers(log)] == [abort_marker, commit_b, commit_a, commit_b_last], "young"
    # The emptied aborted transaction's index entry went; its marker goes in a later pass.
    assert log.aborted_transactions(0, log.log_end_offset) == []
    assert all(h.is_transactional for _b, h, _r in log_batches_with_headers(log) if h.producer_id in (1, 2))

    # A day later the abort marker (nothing of its transaction left) goes; the commit markers of
    # transactions with records left stay.
    clock.advance(DAY + 1)
    stats = log.clean(clock.now_ms, delete_retention_ms=DAY)
    assert stats.cleaned and stats.markers_removed == 1
    assert [offset for offset, _pid in markers(log)] == [commit_b, commit_a, commit_b_last]
    assert latest_per_key(read_committed(log)) == visible_before

    # A rebuild of the producer state from the cleaned segments (no snapshot) finds no open
    # transaction, and pid 1's sequence goes on.
    log.close()
    for snapshot in log.directory.glob("*.snapshot"):
        snapshot.unlink()
    log = logs.open(**CONFIG)
    assert log.last_stable_offset(log.log_end_offset) == log.log_end_offset
    entry = log.producer_state.entry(1)
    assert entry is not None and entry.last_seq == 2


def test_an_aborted_record_never_hides_a_committed_one(logs: LogFactory, clock: FakeClock) -> None:
    log = logs.open(**CONFIG)
    a, b = Producer(log, clock, pid=1), Producer(log, clock, pid=2)
    b.send((b"k", b"committed"))
    b.end(commit=True)
    b.send((b"b-last", b"x"))  # pid 2's last batch: the record above has no reason to stay but its own
    b.end(commit=True)
    a.send((b"k", b"aborted"))  # newer, but aborted: it must not count as the key's latest value
    a.end(commit=False)
    a.send((b"other", b"x"))
    a.end(commit=True)
    roll(log, clock)
    log.clean(clock.now_ms, min_cleanable_ratio=0.0)
    assert latest_per_key(read_committed(log))[b"k"] == b"committed"
    assert b"aborted" not in [r.value for r in log_records(log)]


def test_a_producer_writing_on_after_an_abort_stays_visible_across_passes(
    logs: LogFactory, clock: FakeClock
) -> None:
    """The order of an emptied aborted transaction's index entry and marker: a consumer given the
    entry counts the producer's later batches as aborted until it meets an ABORT marker, so the
    entry must go no later than the marker (here one pass before)."""
    log = logs.open(**CONFIG)
    a = Producer(log, clock, pid=4)
    a.send((b"k", b"aborted"))
    a.end(commit=False)
    a.send((b"k", b"committed after the abort"))
    a.end(commit=True)
    a.send((b"last", b"x"))  # pid 4's last batch
    a.end(commit=True)
    roll(log, clock)
    clock.advance(2 * DAY)
    for _ in range(2):  # the first pass removes the records, the second the old marker
        log.clean(clock.now_ms, min_cleanable_ratio=0.0, delete_retention_ms=DAY)
        assert latest_per_key(read_committed(log))[b"k"] == b"committed after the abort"
    assert b"aborted" not in [r.value for r in log_records(log)]
    assert len(markers(log)) == 2, "the emptied ABORT marker went in the second pass"


def test_no_pass_reaches_an_undecided_transaction(logs: LogFactory, clock: FakeClock) -> None:
    log = logs.open(segment_bytes=300)
    old = plain(log, clock, b"k", b"old")
    open_txn = Producer(log, clock, pid=7)
    first_open = open_txn.send((b"t", b"undecided"))
    for n in range(12):  # newer values of k, in segments past the open transaction
        plain(log, clock, b"k", b"newer-%d" % n)
    roll(log, clock)
    assert len(log.segments) > 3

    log.clean(clock.now_ms, min_cleanable_ratio=0.0)
    kept = [r.offset for r in log_records(log)]
    # Nothing at or past the open transaction is mapped or cleaned, so "old" (below it) stays too:
    # its newer values lie past the limit.
    assert old in kept and first_open in kept
    assert all(offset in kept for offset in range(first_open, log.log_end_offset))

    open_txn.end(commit=True)
    plain(log, clock, b"end", b"x")
    roll(log, clock)
    log.clean(clock.now_ms, min_cleanable_ratio=0.0)
    kept = [r.offset for r in log_records(log)]
    assert old not in kept and first_open in kept


def test_a_transaction_decided_past_the_high_watermark_is_not_cleaned(
    logs: LogFactory, clock: FakeClock
) -> None:
    log = logs.open(**CONFIG)
    a = Producer(log, clock, pid=3)
    a.send((b"k", b"aborted"))
    plain(log, clock, b"k", b"plain")
    roll(log, clock)  # the transaction's records in a segment wholly below the high watermark
    marker = a.end(commit=False)
    a.send((b"z", b"z"))  # pid 3's last batch (kept for its sequence) comes after
    a.end(commit=True)
    roll(log, clock)
    # The marker is not replicated yet (high watermark at it): the transaction is still unstable
    # (a truncation may take its marker away), so its segment is not cleaned.
    log.clean(clock.now_ms, min_cleanable_ratio=0.0, high_watermark=marker)
    assert [r.value for r in log_records(log)][:2] == [b"aborted", b"plain"]
    log.clean(clock.now_ms, min_cleanable_ratio=0.0, high_watermark=log.log_end_offset)
    assert b"aborted" not in [r.value for r in log_records(log)]


def test_record_filter_core_on_transactions() -> None:
    """The filter alone: an aborted batch goes; its ABORT marker, which has an index entry, stays
    this pass (its entry goes first); a marker whose transaction kept records stays."""
    aborted = AbortedRanges([AbortedTxn(1, 0, 2, 3)])
    offset_map = OffsetMap(0, 100)
    batches = [
        build_batch([(b"a", b"x"), (b"b", b"y")], timestamp_ms=10, producer_id=1, producer_epoch=0,
                    base_sequence=0, is_transactional=True),
        build_marker(1, 0, commit=False, coordinator_epoch=0, timestamp_ms=10),
        build_batch([(b"c", b"z")], timestamp_ms=10, producer_id=2, producer_epoch=0, base_sequence=0,
                    is_transactional=True),
        build_marker(2, 0, commit=True, coordinator_epoch=0, timestamp_ms=10),
        build_marker(3, 0, commit=True, coordinator_epoch=0, timestamp_ms=50),
    ]
    offset = 0
    placed = []
    for data in batches:
        header = parse_header(data)
        count = header.records_count
        data = build_batch_at(data, offset)
        placed.append((parse_header(data), data))
        offset += count
    record_filter = RecordFilter(offset_map, tombstone_horizon_ms=20, producer_last_offsets={},
                                 max_kept_keys=100, aborted=aborted)  # fmt: skip
    verdicts = [record_filter.filter(h, memoryview(d), 0) for h, d in placed]
    assert [v.keep for v in verdicts] == [False, True, True, True, True]
    assert verdicts[0].batches == [] and verdicts[0].removed == 2
    # The ABORT marker is in the index: it stays this pass; its entry goes after the swaps.
    assert record_filter.emptied_aborts == [2] and record_filter.markers_removed == 0
    assert record_filter.oldest_kept_tombstone_ms == 10


def test_a_marker_without_an_index_entry_goes_when_old_and_empty() -> None:
    record_filter = RecordFilter(OffsetMap(0, 100), tombstone_horizon_ms=20, producer_last_offsets={},
                                 max_kept_keys=100)  # fmt: skip
    old, young = (build_batch_at(build_marker(pid, 0, commit=True, coordinator_epoch=0, timestamp_ms=ts), offset)
                  for offset, pid, ts in ((0, 2, 10), (1, 3, 50)))  # fmt: skip
    assert not record_filter.filter(parse_header(old), memoryview(old), 0).keep
    assert record_filter.filter(parse_header(young), memoryview(young), 0).keep
    assert record_filter.markers_removed == 1
    assert record_filter.oldest_kept_tombstone_ms == 50  # pid 3's empty marker, too young yet


def build_batch_at(data: bytes, base_offset: int) -> bytes:
    """`data` moved to `base_offset` (the base offset is outside the CRC)."""
    moved = bytearray(data)
    moved[0:8] = base_offset.to_bytes(8, "big", signed=True)
    return bytes(moved)


def test_retention_keeps_segments_with_an_undecided_transaction(logs: LogFactory, clock: FakeClock) -> None:
    log = logs.open(segment_bytes=300, retention_ms=1_000)
    for n in range(6):
        plain(log, clock, b"before", b"%d" % n)
    txn = Producer(log, clock, pid=9)
    first_open = txn.send((b"t", b"undecided"))
    for n in range(12):
        plain(log, clock, b"after", b"%d" % n)
    roll(log, clock)
    clock.advance(10_000)  # every segment is past retention.ms

    log.apply_retention(high_watermark=log.log_end_offset)
    assert log.log_start_offset <= first_open
    assert first_open in [r.offset for r in log_records(log)]

    txn.end(commit=True)
    plain(log, clock, b"end", b"x")
    roll(log, clock)
    log.apply_retention(high_watermark=log.log_end_offset)
    assert log.log_start_offset > first_open


# ---- random histories: two transactional producers and plain writes, cleans and rebuilds


@dataclass
class Written:
    offset: int
    key: bytes
    value: bytes
    pid: int | None  # None: a plain record
    outcome: str = "open"  # for transactional records: open, commit or abort


KEYS = [b"a", b"b", b"c"]
# Sends, ends and cleans weigh more: what the rules are about is a transaction's records, its
# marker and its index entry going in some order across passes while the producer writes on.
OPS = st.lists(
    st.one_of(
        st.tuples(st.just("send"), st.integers(1, 2), st.sampled_from(KEYS)),
        st.tuples(st.just("send"), st.integers(1, 2), st.sampled_from(KEYS)),
        st.tuples(st.just("end"), st.integers(1, 2), st.booleans()),
        st.tuples(st.just("end"), st.integers(1, 2), st.booleans()),
        # A whole short transaction (a send and its end): aborts followed by more of the same
        # producer's records, the case an entry outliving its marker breaks, come often.
        st.tuples(st.just("txn"), st.integers(1, 2), st.tuples(st.sampled_from(KEYS), st.booleans())),
        st.tuples(st.just("txn"), st.integers(1, 2), st.tuples(st.sampled_from(KEYS), st.booleans())),
        st.tuples(st.just("plain"), st.just(0), st.sampled_from(KEYS)),
        st.tuples(st.just("clean"), st.integers(0, 2), st.just(0)),
        st.tuples(st.just("clean"), st.integers(0, 2), st.just(0)),
        st.tuples(st.just("roll"), st.just(0), st.just(0)),
        st.tuples(st.just("rebuild"), st.just(0), st.just(0)),
    ),
    min_size=5,
    max_size=80,
)


@settings(max_examples=120, deadline=None)
@given(ops=OPS)
def test_random_histories_keep_the_read_committed_view(tmp_path_factory: pytest.TempPathFactory, ops: list) -> None:
    """Whatever the history (two transactional producers and plain writes), after every pass and
    every rebuild of the producer state from the cleaned segments alone: read_committed below the
    LSO sees, for every key, the latest plain or committed value; the LSO is where the earliest
    open transaction starts; every producer's next sequence is accepted."""
    clock = FakeClock()
    factory = LogFactory(tmp_path_factory.mktemp("txn-clean"), clock)
    log = factory.open(segment_bytes=250)
    producers = {pid: Producer(log, clock, pid) for pid in (1, 2)}
    written: list[Written] = []
    try:
        for op, who, arg in ops:
            clock.advance(1_000)
            if op in ("send", "txn"):
                key = arg[0] if op == "txn" else arg
                value = b"%d-%d" % (who, len(written))
                written.append(Written(producers[who].send((key, value)), key, value, who))
            if op in ("end", "txn"):
                commit = arg[1] if op == "txn" else arg
                producers[who].end(commit=commit)
                for w in written:
                    if w.pid == who and w.outcome == "open":
                        w.outcome = "commit" if commit else "abort"
            if op == "plain":
                written.append(Written(plain(log, clock, arg, b"p-%d" % len(written)), arg, b"p-%d" % len(written), None))
            elif op == "roll" and log.segments[-1].size:
                roll(log, clock)
            elif op == "clean":
                clock.advance(who * DAY)
                log.clean(clock.now_ms, min_cleanable_ratio=0.0, delete_retention_ms=DAY)
            elif op == "rebuild":
                log.close()
                for snapshot in log.directory.glob("*.snapshot"):
                    snapshot.unlink()
                log = factory.open(segment_bytes=250)
                for producer in producers.values():
                    producer.log = log
            check_view(log, written, producers)
    finally:
        log.close()


def check_view(log: PartitionLog, written: list[Written], producers: dict[int, Producer]) -> None:
    open_firsts = [w.offset for w in written if w.outcome == "open" and w.pid is not None]
    lso = log.last_stable_offset(log.log_end_offset)
    assert lso == min(open_firsts, default=log.log_end_offset)
    expected: dict[bytes, bytes] = {}
    for w in written:
        if w.offset < lso and (w.pid is None or w.outcome == "commit"):
            expected[w.key] = w.value
    assert latest_per_key([(o, k, v) for o, k, v in read_committed(log) if o < lso]) == expected
    for producer in producers.values():
        if producer.sequence:
            following = build_batch([(b"x", b"y")], timestamp_ms=1, producer_id=producer.pid, producer_epoch=0,
                                    base_sequence=producer.sequence, is_transactional=True)  # fmt: skip
            assert log.producer_state.check(parse_header(following)) is OK
