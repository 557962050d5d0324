"""The dead-letter copies of rejected and delivery-limit records (broker/share/dead_letter.py):
key, value, headers and timestamp kept, origin and reason added, and replay undoes it."""

from __future__ import annotations

from roost.broker.share import dead_letter as dlt
from roost.broker.share.partition import (
    DELIVERY_LIMIT,
    REJECTED,
    AckBatch,
    AckType,
    LogBatch,
    ShareConfig,
    SharePartition,
)
from roost.wire.kafka.records import build_batch, iter_records


def test_rejected_and_exhausted_records_become_dead_letters_and_replay_back():
    log = [build_batch([(b"k0", b"v0", [("trace", b"t0")]), (b"k1", b"v1"), (None, b"v2")], timestamp_ms=1000,
                       base_offset=0)]
    part = SharePartition(0, ShareConfig(delivery_limit=2, lock_duration_ms=10))
    part.acquire("m", [LogBatch(0, 2)], now=0, max_records=10, high_watermark=3)
    result = part.acknowledge("m", [AckBatch(0, 2, (AckType.REJECT, AckType.RELEASE, AckType.ACCEPT))], now=1)
    part.complete(result.change)
    letters = list(result.change.dead_letters)
    part.acquire("m", [LogBatch(0, 2)], now=2, max_records=10, high_watermark=3)
    letters += part.tick(100).dead_letters  # offset 1's second delivery expired: the limit
    assert [(d.first_offset, d.reason) for d in letters] == [(0, REJECTED), (1, DELIVERY_LIMIT)]

    records = dlt.dead_letter_records("workers", "orders", 3, letters, log)
    assert [(r.key, r.value, r.timestamp) for r in records] == [(b"k0", b"v0", 1000), (b"k1", b"v1", 1000)]
    assert records[0].headers[0] == ("trace", b"t0")
    assert dict(records[1].headers) == {
        "roost.dlt.origin.topic": b"orders", "roost.dlt.origin.partition": b"3", "roost.dlt.origin.offset": b"1",
        "roost.dlt.group": b"workers", "roost.dlt.delivery.count": b"2", "roost.dlt.reason": b"delivery_limit"}

    # through a batch of the dead-letter topic and back
    written = list(iter_records(dlt.dead_letter_batch(records, now_ms=5000)))
    replayed = [dlt.replay_record(r) for r in written]
    assert [(o.topic, o.partition, o.offset) for o, _ in replayed] == [("orders", 3, 0), ("orders", 3, 1)]
    assert [(r.key, r.value, r.headers) for _, r in replayed] == [(b"k0", b"v0", [("trace", b"t0")]),
                                                                (b"k1", b"v1", [])]
    assert dlt.replay_record(iter_records(log[0]).__next__()) is None  # not a dead letter


def test_describe_configs_lists_the_dead_letter_topic_once_set():
    """DescribeConfigs of a share group (what the console's share group page reads): the
    dead-letter topic has no default, so it shows only when set; setting it once crashed the
    handler (an eager default lookup, KeyError), which the console's browser test found."""
    from roost.broker.share.group_configs import DEAD_LETTER_TOPIC, described_entries
    from roost.config import BrokerConfig

    broker = BrokerConfig.build([])
    unset = {key for key, _value, _own in described_entries({}, broker)}
    assert DEAD_LETTER_TOPIC not in unset and "share.auto.offset.reset" in unset
    entries = {key: (value, own) for key, value, own in described_entries({DEAD_LETTER_TOPIC: "jobs-dlq"}, broker)}
    assert entries[DEAD_LETTER_TOPIC] == ("jobs-dlq", True)
    assert entries["share.auto.offset.reset"] == ("latest", False)


def test_replay_reads_the_headers_the_broker_writes():
    """roost share-group replay (admin, which speaks to the servers over the wire only) repeats the
    dead-letter header names and the group config name: they must be the broker's."""
    from roost.admin import share_replay
    from roost.admin.share_groups import DEAD_LETTER_TOPIC_CONFIG
    from roost.broker.share.group_configs import DEAD_LETTER_TOPIC

    assert (share_replay.ORIGIN_TOPIC, share_replay.ORIGIN_PARTITION, share_replay.ORIGIN_OFFSET, share_replay.GROUP,
            share_replay.DELIVERY_COUNT, share_replay.REASON) == (
        dlt.ORIGIN_TOPIC, dlt.ORIGIN_PARTITION, dlt.ORIGIN_OFFSET, dlt.GROUP, dlt.DELIVERY_COUNT, dlt.REASON)
    assert DEAD_LETTER_TOPIC_CONFIG == dlt.DEAD_LETTER_TOPIC_CONFIG == DEAD_LETTER_TOPIC
