"""Random histories of acquire / acknowledge / release / lock expiry / write failure by several
members against the share-partition core, with the state writes settling later, in order, some
of them failing, and leader changes that rebuild the partition from what was written, checked
against what KIP-932 promises: a record is
never acquired by two members at once; an ACKNOWLEDGED or ARCHIVED record is never delivered
again; no record is delivered more than the delivery limit; SPSO never goes back; and once every
member acknowledges what it holds, every record ends accepted or archived."""

from __future__ import annotations

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from roost.broker.share.partition import (
    AckBatch,
    AckType,
    LogBatch,
    ShareConfig,
    SharePartition,
    StateBatch,
)
from roost.wire.kafka.errors import ErrorCode

MEMBERS = ("m1", "m2", "m3")
LOG_END = 60


def log_batches() -> list[LogBatch]:
    """A log of batches of 1..4 records."""
    out, offset, size = [], 0, 1
    while offset < LOG_END:
        last = min(offset + size, LOG_END) - 1
        out.append(LogBatch(offset, last))
        offset, size = last + 1, size % 4 + 1
    return out


LOG = log_batches()

op = st.one_of(
    st.tuples(st.just("acquire"), st.sampled_from(MEMBERS), st.integers(1, 12)),
    st.tuples(st.just("ack"), st.sampled_from(MEMBERS), st.sampled_from(list(AckType)[:4])),
    st.tuples(st.just("flush"), st.integers(1, 4), st.integers(0, 15)),
    st.tuples(st.just("release"), st.sampled_from(MEMBERS)),
    st.tuples(st.just("time"), st.integers(1, 1500)),
    st.tuples(st.just("reload")),
)


class Model:
    def __init__(self, config: ShareConfig) -> None:
        self.config = config
        self.part = SharePartition(0, config)
        self.now = 0
        self.holder: dict[int, str] = {}
        self.terminal: set[int] = set()
        self.accepted: set[int] = set()
        self.deliveries: dict[int, int] = {}
        self.durable: list[object] = []  # the changes written, in order: the coordinator's log
        # changes not written yet, in order: (change, the acknowledgement it answers or None, the
        # offsets it makes terminal, which count as terminal only once it is written)
        self.queue: list[tuple[object, object, set[int]]] = []
        self.last_start = 0

    def persist(self, change) -> None:
        """A change the shell writes in the background: durable once the writes before it are."""
        if change is not None:
            self.queue.append((change, None, set()))

    def flush(self, count: int, failures: int) -> None:
        """The persister writes the next `count` changes, in order; bit i of `failures` fails the
        i-th of them if it is an acknowledgement (its answer is an error)."""
        for i in range(count):
            if not self.queue:
                return
            change, acked, terminal = self.queue.pop(0)
            if acked is None:
                self.durable.append(change)
                self.terminal |= terminal
                continue
            if failures >> i & 1:
                self.part.fail(change)
                continue
            self.durable.append(change)
            self.part.complete(change)  # now the acknowledgement is answered
            member, first, last, kind = acked
            for offset in range(first, last + 1):
                assert self.holder.pop(offset) == member
                if kind != AckType.RELEASE or self.part.state_of(offset).terminal:
                    self.terminal.add(offset)
                if kind == AckType.ACCEPT:
                    self.accepted.add(offset)

    def read(self, member: str, max_records: int) -> None:
        start = self.part.fetch_offset()
        if start is None:
            return
        log = [b for b in LOG if b.last_offset >= start]
        result = self.part.acquire(member, log, now=self.now, max_records=max_records, high_watermark=LOG_END)
        self.persist(result.change)
        for r in result.ranges:
            for offset in range(r.first_offset, r.last_offset + 1):
                assert offset not in self.terminal, f"{offset} delivered again after it was terminal"
                assert offset not in self.holder, f"{offset} acquired by {member} while {self.holder[offset]} holds it"
                self.deliveries[offset] = self.deliveries.get(offset, 0) + 1
                assert r.delivery_count <= self.config.delivery_limit
                self.holder[offset] = member

    def expire(self) -> None:
        change = self.part.tick(self.now)
        self.persist(change)
        self.forget_released()

    def forget_released(self) -> None:
        """Drop what the members no longer hold (released, expired). A record archived by that
        (its delivery limit reached) is terminal once the change just queued is written: a leader
        that dies first loses the archive, and the record may be delivered again (KIP-932 persists
        delivery state with the state changes, not with each acquisition)."""
        for offset in list(self.holder):
            if self.part.holder(offset) != self.holder[offset]:
                del self.holder[offset]
                if self.part.state_of(offset).terminal and self.queue and self.queue[-1][1] is None:
                    self.queue[-1][2].add(offset)

    def ack(self, member: str, kind: AckType) -> None:
        writing = {o for _change, acked, _t in self.queue if acked is not None for o in range(acked[1], acked[2] + 1)}
        held = sorted(o for o, m in self.holder.items() if m == member and o not in writing)
        if not held:
            return
        first = held[0]
        last = first
        while last + 1 in held:
            last += 1
        result = self.part.acknowledge(member, [AckBatch(first, last, (int(kind),))], now=self.now)
        if result.error != ErrorCode.NONE:
            # its lock expired meanwhile, or an acknowledgement of it is being written
            assert result.error == ErrorCode.INVALID_RECORD_STATE
            return
        if result.change is not None:
            self.queue.append((result.change, (member, first, last, kind), set()))

    def reload(self) -> None:
        """A new leader: the partition rebuilt from the durable writes, merged as the share
        coordinator merges them."""
        self.queue.clear()  # unwritten changes die with the leader; their acknowledgements were never answered
        start, batches = 0, {}
        for change in self.durable:
            assert change.start_offset == -1 or change.start_offset >= start, "the persisted start went back"
            if change.start_offset != -1:
                start = change.start_offset
            for b in change.batches:
                for offset in range(b.first_offset, b.last_offset + 1):
                    batches[offset] = (b.delivery_state, b.delivery_count)
        state = [StateBatch(o, o, s, c) for o, (s, c) in sorted(batches.items()) if o >= start]
        self.part = SharePartition.load(start, state, self.config)
        self.holder.clear()  # acquisitions die with the leader
        # so do the counts of deliveries never persisted: the limit holds from the persisted count
        self.deliveries = {o: self.part.delivery_count(o) for o in self.deliveries if o >= start}

    def check(self) -> None:
        assert self.part.start_offset >= self.last_start, "SPSO went back"
        self.last_start = self.part.start_offset
        for offset, count in self.deliveries.items():
            assert count <= self.config.delivery_limit, f"{offset} delivered {count} times"


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(op, max_size=60), st.integers(2, 5), st.integers(8, 40), st.randoms(use_true_random=False))
def test_random_histories_keep_the_share_partition_promises(ops, limit, cap, rnd):
    model = Model(ShareConfig(delivery_limit=limit, max_record_locks=cap, lock_duration_ms=1000))
    for step in ops:
        kind = step[0]
        if kind == "acquire":
            model.read(step[1], step[2])
        elif kind == "ack":
            model.ack(step[1], step[2])
        elif kind == "flush":
            model.flush(step[1], step[2])
        elif kind == "release":
            model.persist(model.part.release_member(step[1], model.now))
            model.forget_released()
        elif kind == "time":
            model.now += step[1]
            model.expire()
        else:
            model.reload()
            model.last_start = model.part.start_offset  # the persisted start: checked below
        model.check()
    # drain: every write succeeds from now on; members accept everything they get until the log is done
    model.flush(len(model.queue), 0)
    for _round in range(LOG_END * (limit + 1)):
        if model.part.start_offset >= LOG_END:
            break
        member = MEMBERS[rnd.randrange(len(MEMBERS))]
        model.now += 1001
        model.expire()
        model.read(member, 10)
        model.ack(member, AckType.ACCEPT)
        model.flush(len(model.queue), 0)
        model.check()
    assert model.part.start_offset == LOG_END
    lost = sorted(set(range(LOG_END)) - model.terminal)
    assert not lost, f"records never accepted nor archived: {lost}"
    assert not model.holder
