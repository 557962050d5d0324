"""Random sequences of appends, rolls, retention, truncation, DeleteRecords, reopen and reads,
compared against a simple in-memory model of batches."""

from __future__ import annotations

import shutil
import tempfile
from dataclasses import dataclass
from pathlib import Path

import pytest
from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, initialize, invariant, precondition, rule

from roost.log import LogConfig, OffsetOutOfRange, PartitionLog, RecordBatchTooLarge
from roost.wire.kafka.records import Record, build_batch, iter_records, validate_batches
from tests.log.conftest import FakeClock, abandon


@dataclass
class ModelBatch:
    base_offset: int
    values: list[bytes]
    timestamps: list[int]
    size: int

    @property
    def last_offset(self) -> int:
        return self.base_offset + len(self.values) - 1


class LogModel(RuleBasedStateMachine):
    def __init__(self) -> None:
        super().__init__()
        self.root = Path(tempfile.mkdtemp(prefix="roost-log-model-"))
        self.clock = FakeClock()
        self.batches: list[ModelBatch] = []
        self.log_start = 0
        self.log_end = 0
        self.log: PartitionLog | None = None
        self.config = LogConfig()
        self.counter = 0

    @initialize(
        segment_bytes=st.integers(300, 3_000),
        index_interval=st.integers(0, 600),
        retention_ms=st.sampled_from([-1, 5_000, 60_000]),
        retention_bytes=st.sampled_from([-1, 1_500, 6_000]),
    )
    def start(self, segment_bytes: int, index_interval: int, retention_ms: int, retention_bytes: int) -> None:
        self.config = LogConfig(
            segment_bytes=segment_bytes,
            index_interval_bytes=index_interval,
            retention_ms=retention_ms,
            retention_bytes=retention_bytes,
            segment_ms=20_000,
        )
        self.log = PartitionLog.open(self.root / "model-0", self.config, self.clock)

    def teardown(self) -> None:
        if self.log is not None:
            self.log.close()
        shutil.rmtree(self.root, ignore_errors=True)

    # ---- operations

    @rule(count=st.integers(1, 6), size=st.integers(0, 200), jitter=st.integers(-3_000, 3_000))
    def append(self, count: int, size: int, jitter: int) -> None:
        assert self.log is not None
        values = []
        for _ in range(count):
            values.append(b"%d:" % self.counter + b"v" * size)
            self.counter += 1
        timestamps = [self.clock.now_ms + jitter + i for i in range(count)]
        data = build_batch(
            [Record(None, v, [], t) for v, t in zip(values, timestamps, strict=True)], timestamp_ms=0
        )
        if len(data) > self.config.segment_bytes:
            with pytest.raises(RecordBatchTooLarge):
                self.log.append(bytearray(data))
            return
        info = self.log.append(bytearray(data))
        assert info.first_offset == self.log_end
        self.batches.append(ModelBatch(self.log_end, values, timestamps, len(data)))
        self.log_end += count

    @rule(ms=st.integers(0, 30_000))
    def time_passes(self, ms: int) -> None:
        assert self.log is not None
        self.clock.advance(ms)
        self.log.roll_if_due()

    @rule()
    def retention(self) -> None:
        assert self.log is not None
        self.log.apply_retention()
        self._log_start_moved_to(self.log.log_start_offset)

    @precondition(lambda self: self.log_end > self.log_start)
    @rule(data=st.data())
    def delete_records(self, data: st.DataObject) -> None:
        assert self.log is not None
        target = data.draw(st.integers(self.log_start, self.log_end))
        assert self.log.delete_records_before(target) == max(target, self.log_start)
        self._log_start_moved_to(max(target, self.log_start))

    @precondition(lambda self: self.log_end > self.log_start)
    @rule(data=st.data())
    def truncate(self, data: st.DataObject) -> None:
        assert self.log is not None
        target = data.draw(st.integers(self.log_start, self.log_end))
        self.log.truncate_to(target)
        straddling = [b for b in self.batches if b.base_offset < target <= b.last_offset]
        expected_end = straddling[0].base_offset if straddling else target
        if expected_end < self.log_start:
            # Nothing at or after the log start would be left: the log restarts empty at target.
            self.batches = []
            self.log_start = self.log_end = target
        else:
            self.batches = [b for b in self.batches if b.last_offset < expected_end]
            self.log_end = expected_end

    @rule(clean=st.booleans())
    def reopen(self, clean: bool) -> None:
        assert self.log is not None
        if clean:
            self.log.close()
        else:
            abandon(self.log)  # a process crash: what was written is in the page cache
        self.log = PartitionLog.open(self.root / "model-0", self.config, self.clock)

    @precondition(lambda self: self.log_end > self.log_start)
    @rule(data=st.data(), max_bytes=st.integers(1, 3_000), min_one=st.booleans())
    def read(self, data: st.DataObject, max_bytes: int, min_one: bool) -> None:
        assert self.log is not None
        offset = data.draw(st.integers(self.log_start, self.log_end))
        limit = data.draw(st.one_of(st.just(self.log_end), st.integers(self.log_start, self.log_end)))
        result = self.log.read(offset, max_bytes, max_offset=limit, min_one_batch=min_one)
        expected: list[ModelBatch] = []
        total = 0
        for batch in self.batches:
            if batch.last_offset < offset:
                continue
            if batch.last_offset >= limit:
                break
            if total + batch.size > max_bytes and not (min_one and not expected):
                break
            expected.append(batch)
            total += batch.size
        assert result.size == total == sum(len(b) for b in result.buffers)
        got = [(r.offset, r.value) for b in result.buffers for r in iter_records(b)]
        want = [(b.base_offset + i, v) for b in expected for i, v in enumerate(b.values)]
        assert got == want
        for buffer in result.buffers:
            validate_batches(buffer)
        if expected:
            assert (result.first_offset, result.next_offset) == (
                expected[0].base_offset,
                expected[-1].last_offset + 1,
            )
        else:
            assert result.buffers == []

    @rule(data=st.data())
    def read_out_of_range(self, data: st.DataObject) -> None:
        assert self.log is not None
        offset = data.draw(
            st.one_of(st.integers(-5, self.log_start - 1), st.integers(self.log_end + 1, self.log_end + 5))
        )
        try:
            self.log.read(offset, 100)
        except OffsetOutOfRange:
            return
        raise AssertionError(f"offset {offset} outside [{self.log_start}, {self.log_end}] was served")

    @rule(delta=st.integers(-5_000, 5_000))
    def offset_for_timestamp(self, delta: int) -> None:
        assert self.log is not None
        target = self.clock.now_ms + delta
        expected = None
        for batch in self.batches:
            for i, timestamp in enumerate(batch.timestamps):
                if batch.base_offset + i >= self.log_start and timestamp >= target:
                    expected = (batch.base_offset + i, timestamp)
                    break
            if expected:
                break
        assert self.log.offset_for_timestamp(target) == expected

    # ---- helpers and invariants

    def _log_start_moved_to(self, new_start: int) -> None:
        assert new_start >= self.log_start
        assert new_start <= self.log_end
        self.log_start = new_start
        self.batches = [b for b in self.batches if b.last_offset >= new_start]

    @invariant()
    def offsets_agree(self) -> None:
        if self.log is None:
            return
        assert self.log.log_end_offset == self.log_end
        assert self.log.log_start_offset == self.log_start
        assert self.log.recovery_point <= self.log.log_end_offset
        bases = [s.base_offset for s in self.log.segments]
        assert bases == sorted(bases) and len(set(bases)) == len(bases)


LogModel.TestCase.settings = settings(
    max_examples=40,
    stateful_step_count=30,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much],
)
TestLogModel = LogModel.TestCase
