"""Random appends (keyed, keyless, tombstones, compressed), cleans, truncations above the high
watermark, rolls and reopens, checked against a dict of the latest value per key."""

from __future__ import annotations

import os
import shutil
import tempfile
from pathlib import Path

from hypothesis import HealthCheck, Phase, event, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, initialize, invariant, rule

from roost.log import LogConfig, PartitionLog, RecordBatchTooLarge
from roost.log.producer_state import OK
from roost.wire.kafka.records import (
    COMPRESSION_GZIP,
    COMPRESSION_NONE,
    build_batch,
    iter_records,
    parse_header,
)
from tests.log.compaction_checks import (
    Appended,
    append_records,
    check_compacted_view,
    check_fully_compacted,
    log_records,
)
from tests.log.conftest import FakeClock, abandon

KEYS = [None, b"a", b"b", b"c", b"d", b"e", b"f"]
PRODUCER_ID = 1000
record_strategy = st.tuples(st.sampled_from(KEYS), st.booleans(), st.integers(0, 80))


class CompactionModel(RuleBasedStateMachine):
    def __init__(self) -> None:
        super().__init__()
        self.root = Path(tempfile.mkdtemp(prefix="roost-cleaner-model-"))
        self.clock = FakeClock()
        self.config = LogConfig()
        self.log: PartitionLog | None = None
        self.appended: list[Appended] = []
        self.committed = 0  # the highest high watermark a clean was given: never truncated below
        self.batch_ends: list[int] = [0]  # high watermarks and truncations fall on batch boundaries
        self.horizon: int | None = None  # tombstones older than this may be gone
        self.counter = 0
        self.next_sequence = 0  # of the idempotent producer PRODUCER_ID
        self.sequence_after: list[tuple[int, int]] = [(0, 0)]  # (batch end, next sequence then)

    @initialize(segment_bytes=st.integers(400, 2_000), index_interval=st.integers(0, 300))
    def start(self, segment_bytes: int, index_interval: int) -> None:
        self.config = LogConfig(segment_bytes=segment_bytes, index_interval_bytes=index_interval)
        self.log = PartitionLog.open(self.root / "model-0", self.config, self.clock)

    def teardown(self) -> None:
        if self.log is not None:
            self.log.close()
        shutil.rmtree(self.root, ignore_errors=True)

    @rule(
        records=st.lists(record_strategy, min_size=1, max_size=5),
        gzip=st.booleans(),
        idempotent=st.booleans(),
    )
    def append(self, records: list[tuple[bytes | None, bool, int]], gzip: bool, idempotent: bool) -> None:
        assert self.log is not None
        batch = []
        for key, tombstone, size in records:
            value = None if tombstone and key is not None else b"%d:" % self.counter + b"v" * size
            batch.append((key, value, self.clock.now_ms))
            self.counter += 1
        fields = {"compression": COMPRESSION_GZIP if gzip else COMPRESSION_NONE}
        if idempotent:
            fields |= {"producer_id": PRODUCER_ID, "producer_epoch": 0, "base_sequence": self.next_sequence}
            # However much was cleaned, the producer's next batch is in sequence.
            probe = build_batch([(b"k", b"v")] * len(batch), timestamp_ms=0, **fields)
            assert self.log.producer_state.check(parse_header(probe)) is OK
        try:
            self.appended += append_records(self.log, batch, **fields)
        except RecordBatchTooLarge:
            return  # larger than a segment: refused, nothing appended
        if idempotent:
            self.next_sequence += len(batch)
        self.sequence_after.append((self.log.log_end_offset, self.next_sequence))
        self.batch_ends.append(self.log.log_end_offset)
        self.clock.advance(500)

    def _boundary(self, fraction: float) -> int:
        """A batch boundary between the committed offset and the log end."""
        choices = [end for end in self.batch_ends if end >= self.committed]
        return choices[min(len(choices) - 1, int(len(choices) * fraction))]

    @rule(ms=st.integers(0, 20_000))
    def advance(self, ms: int) -> None:
        self.clock.advance(ms)

    @rule()
    def roll(self) -> None:
        assert self.log is not None
        if self.log.active.size:
            self.log._roll(self.log.log_end_offset, self.clock.now_ms)

    @rule(
        retention=st.sampled_from([0, 3_000, 30_000]),
        ratio=st.sampled_from([0.0, 0.5, 0.9]),
        max_keys=st.sampled_from([2, 5, 1_000]),
        hw_fraction=st.floats(0, 1),
        roll_first=st.booleans(),
    )
    def clean(
        self, retention: int, ratio: float, max_keys: int, hw_fraction: float, roll_first: bool
    ) -> None:
        assert self.log is not None
        if roll_first:
            self.roll()
        high_watermark = self._boundary(hw_fraction)
        stats = self.log.clean(
            self.clock.now_ms,
            delete_retention_ms=retention,
            min_cleanable_ratio=ratio,
            high_watermark=high_watermark,
            max_keys=max_keys,
        )
        event(
            "clean: "
            + ("removed records" if stats.records_removed else "ran" if stats.cleaned else "skipped")
        )
        self.committed = high_watermark
        horizon = self.clock.now_ms - retention
        self.horizon = horizon if self.horizon is None else max(self.horizon, horizon)

    @rule(retention=st.sampled_from([0, 3_000]))
    def clean_everything(self, retention: int) -> None:
        """A full pass (no bound, high watermark at the end) leaves nothing to remove."""
        assert self.log is not None
        self.roll()
        self.committed = self.log.log_end_offset
        self.log.cleaner_checkpoint = type(self.log.cleaner_checkpoint)()  # from the start
        self.log.clean(self.clock.now_ms, delete_retention_ms=retention, min_cleanable_ratio=0.0)
        horizon = self.clock.now_ms - retention
        self.horizon = horizon if self.horizon is None else max(self.horizon, horizon)
        check_fully_compacted(self.log, self.appended, tombstone_horizon_ms=horizon)

    @rule(fraction=st.floats(0, 1))
    def truncate_uncommitted(self, fraction: float) -> None:
        """A follower cuts what its leader never committed (never below the high watermark)."""
        assert self.log is not None
        target = self._boundary(fraction)
        self.log.truncate_to(target)
        assert self.log.log_end_offset == target
        self.appended = [a for a in self.appended if a.offset < target]
        self.batch_ends = [end for end in self.batch_ends if end <= target]
        self.sequence_after = [(end, seq) for end, seq in self.sequence_after if end <= target]
        self.next_sequence = self.sequence_after[-1][1]  # the producer retries from there

    @rule(crash=st.booleans(), lose_snapshots=st.booleans())
    def reopen(self, crash: bool, lose_snapshots: bool) -> None:
        assert self.log is not None
        if crash:
            self.log.flush()
            abandon(self.log)
        else:
            self.log.close()
        if lose_snapshots:  # the producer state is then rebuilt from batch headers alone
            for snapshot in (self.root / "model-0").glob("*.snapshot"):
                snapshot.unlink()
        self.log = PartitionLog.open(self.root / "model-0", self.config, self.clock)

    @rule(fraction=st.floats(0, 1))
    def delete_records(self, fraction: float) -> None:
        assert self.log is not None
        start = self.log.log_start_offset
        self.log.delete_records_before(start + int((self.committed - start) * fraction))

    @invariant()
    def log_matches_the_dict(self) -> None:
        if self.log is None:
            return
        check_compacted_view(self.log, self.appended, tombstone_horizon_ms=self.horizon)
        expected: dict[bytes, bytes] = {}
        for a in self.appended:
            if a.key is not None and a.offset >= self.log.log_start_offset:
                if a.value is None:
                    expected.pop(a.key, None)
                else:
                    expected[a.key] = a.value
        actual: dict[bytes, bytes] = {}
        for record in log_records(self.log):
            if record.key is not None and record.offset >= self.log.log_start_offset:
                if record.value is None:
                    actual.pop(record.key, None)
                else:
                    actual[record.key] = record.value
        assert actual == expected
        # Reads through the public API see the same records, gaps and all.
        offsets = [r.offset for r in log_records(self.log) if r.offset >= self.log.log_start_offset]
        if offsets:
            result = self.log.read(self.log.log_start_offset, 1 << 30)
            read = [r.offset for b in result.buffers for r in iter_records(b)]
            assert [o for o in read if o >= self.log.log_start_offset] == offsets


TestCompactionModel = CompactionModel.TestCase
TestCompactionModel.settings = settings(
    max_examples=int(os.environ.get("ROOST_CLEANER_EXAMPLES", "60")),
    stateful_step_count=30,
    deadline=None,
    phases=[Phase.explicit, Phase.reuse, Phase.generate, Phase.target, Phase.shrink],  # no slow explain
    suppress_health_check=[HealthCheck.too_slow],
)
