"""confluent-kafka's ShareConsumer (librdkafka 2.16) against a three-broker Roost cluster: share
groups as a queue. One cluster for the module; group configs set through IncrementalAlterConfigs
on the GROUP resource, as confluent-kafka-python's own tests do (`share.auto.offset.reset=earliest`,
a short `share.record.lock.duration.ms` allowed by the cluster's
`group.share.min.record.lock.duration.ms=1000`)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time
import uuid
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import AcknowledgeType, KafkaException, Producer, ShareConsumer
from confluent_kafka.admin import NewTopic

from tests.support.cluster import LocalCluster
from tests.support.share_configs import set_group_configs

RECORDS = 20_000


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalCluster]:
    cluster = LocalCluster.start(tmp_path_factory.mktemp("share-e2e"), brokers=3, keepers=1, settings={
        "group.share.min.record.lock.duration.ms": 1000})
    yield cluster
    cluster.close()


def make_topic(cluster: LocalCluster, name: str, records: int, value_size: int = 20) -> None:
    admin = cluster.admin()
    for future in admin.create_topics([NewTopic(name, 1, 3)]).values():
        future.result(60)
    cluster.wait_for_isr(name)
    if records:
        produce(cluster, name, records, value_size)


def produce(cluster: LocalCluster, name: str, records: int, value_size: int = 20) -> None:
    # Batches of at most 100 records: a share fetch acquires whole log batches (Kafka's batch-optimized
    # mode), so one 5000-record batch would go to one consumer.
    producer = Producer({"bootstrap.servers": cluster.bootstrap, "linger.ms": 20, "acks": "all",
                         "batch.num.messages": 100, "batch.size": 4096})
    for i in range(records):
        producer.produce(name, value=str(i).encode().rjust(value_size, b"0"))
        if i % 5000 == 4999:
            producer.flush(60)
    assert producer.flush(60) == 0


def group_configs(cluster: LocalCluster, group: str, **configs: str) -> None:
    """Set (`share_auto_offset_reset` for `share.auto.offset.reset`) and wait until every broker has them."""
    set_group_configs(cluster.admin(), group, {key.replace("_", "."): value for key, value in configs.items()},
                      seen_by=cluster.running_addresses())


def share_consumer(cluster: LocalCluster, group: str, topic: str, **extra: Any) -> ShareConsumer:
    consumer = ShareConsumer({"bootstrap.servers": cluster.bootstrap, "group.id": group, **extra})
    consumer.subscribe([topic])
    return consumer


def poll_until(consumer: ShareConsumer, done: Any, timeout: float, on_message: Any) -> None:
    deadline = time.monotonic() + timeout
    while not done() and time.monotonic() < deadline:
        for message in consumer.poll(0.5) or []:
            if message.error() is None:
                on_message(message)


def test_five_consumers_on_one_partition_share_the_work_exactly_once(cluster: LocalCluster) -> None:
    topic, group = "share-e2e-work", f"workers-{uuid.uuid4().hex[:8]}"
    make_topic(cluster, topic, 0)
    group_configs(cluster, group, share_auto_offset_reset="earliest", share_record_lock_duration_ms="30000")
    joined = threading.Barrier(6)  # the five workers and the producer: all are in before the work comes
    seen: list[Counter[int]] = [Counter() for _ in range(5)]
    lock = threading.Lock()
    total = Counter[int]()

    def work(index: int) -> None:
        consumer = share_consumer(cluster, group, topic, **{"max.poll.records": 100})
        try:
            consumer.poll(1.0)  # joined, and its first fetch is parked on the empty partition
            joined.wait(60)

            def took(message: Any) -> None:
                with lock:
                    seen[index][message.offset()] += 1
                    total[message.offset()] += 1
                time.sleep(0.001)  # work (20 s in all): the queue outlasts a late member's join
            poll_until(consumer, lambda: len(total) >= RECORDS, 120, took)
            # The last poll's records are accepted implicitly by a commit (or the next poll);
            # close() alone releases what was not acknowledged (they would go to another member).
            consumer.commit_sync(30)
        finally:
            consumer.close()

    threads = [threading.Thread(target=work, args=(i,)) for i in range(5)]
    for thread in threads:
        thread.start()
    joined.wait(60)
    produce(cluster, topic, RECORDS)
    for thread in threads:
        thread.join(150)
    assert len(total) == RECORDS, f"{RECORDS - len(total)} records never delivered"
    assert all(count == 1 for count in total.values()), \
        f"delivered twice: {[o for o, c in total.items() if c > 1][:10]}"
    assert all(len(s) > 0 for s in seen), f"records per consumer: {[len(s) for s in seen]}"
    # Everything was accepted: a new member of the group finds nothing left to do.
    late = share_consumer(cluster, group, topic)
    try:
        leftovers: list[int] = []
        poll_until(late, lambda: False, 6, lambda m: leftovers.append(m.offset()))
    finally:
        late.close()
    assert leftovers == []


def test_explicit_accept_release_reject_with_commits_and_the_callback(cluster: LocalCluster) -> None:
    topic, group = "share-e2e-explicit", f"explicit-{uuid.uuid4().hex[:8]}"
    make_topic(cluster, topic, 30)
    group_configs(cluster, group, share_auto_offset_reset="earliest")
    consumer = share_consumer(cluster, group, topic, **{"share.acknowledgement.mode": "explicit"})
    committed: list[tuple[dict[Any, set[int]], Any]] = []
    consumer.set_acknowledgement_commit_callback(lambda offsets, error: committed.append((offsets, error)))
    verdict = {o: AcknowledgeType.ACCEPT if o < 10 else AcknowledgeType.RELEASE if o < 20 else AcknowledgeType.REJECT
               for o in range(30)}
    deliveries: dict[int, list[int]] = {}
    try:
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline and not all(o in deliveries for o in range(30)):
            batch = [m for m in consumer.poll(0.5) or [] if m.error() is None]
            for message in batch:
                deliveries.setdefault(message.offset(), []).append(message.delivery_count())
                consumer.acknowledge(message, verdict[message.offset()])
            if batch:
                results = consumer.commit_sync(30)
                assert results is not None
        # The released records come back (a second delivery), the accepted and rejected never.
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline and not all(len(deliveries[o]) >= 2 for o in range(10, 20)):
            for message in consumer.poll(0.5) or []:
                if message.error() is None:
                    deliveries[message.offset()].append(message.delivery_count())
                    consumer.acknowledge(message, AcknowledgeType.ACCEPT)
            consumer.commit_async()
        poll_until(consumer, lambda: False, 3, lambda m: deliveries[m.offset()].append(m.delivery_count()))
        consumer.commit_sync(30)
    finally:
        consumer.close()
    assert all(deliveries[o] == [1] for o in range(10)), {o: deliveries[o] for o in range(10)}
    assert all(deliveries[o] == [1, 2] for o in range(10, 20)), {o: deliveries[o] for o in range(10, 20)}
    assert all(deliveries[o] == [1] for o in range(20, 30)), {o: deliveries[o] for o in range(20, 30)}
    assert committed and all(error is None for _, error in committed), committed
    acknowledged = set().union(*(offsets for entry, _ in committed for offsets in entry.values()))
    assert acknowledged == set(range(30))


def test_a_record_released_every_time_is_archived_at_the_delivery_limit(cluster: LocalCluster) -> None:
    topic, group = "share-e2e-poison", f"poison-{uuid.uuid4().hex[:8]}"
    make_topic(cluster, topic, 1)
    group_configs(cluster, group, share_auto_offset_reset="earliest")
    consumer = share_consumer(cluster, group, topic, **{"share.acknowledgement.mode": "explicit"})
    counts: list[int] = []
    try:
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline and len(counts) < 5:
            for message in consumer.poll(0.5) or []:
                if message.error() is None:
                    counts.append(message.delivery_count())
                    consumer.acknowledge(message, AcknowledgeType.RELEASE)
            consumer.commit_sync(30)
        poll_until(consumer, lambda: False, 4, lambda m: counts.append(m.delivery_count()))
    finally:
        consumer.close()
    assert counts == [1, 2, 3, 4, 5]  # group.share.delivery.count.limit: then archived, never again


HOLDER = """
import sys, time
from confluent_kafka import ShareConsumer
consumer = ShareConsumer({"bootstrap.servers": sys.argv[1], "group.id": sys.argv[2],
                          "share.acknowledgement.mode": "explicit"})
consumer.subscribe([sys.argv[3]])
held = []
deadline = time.monotonic() + 60
while not held and time.monotonic() < deadline:
    held = [m.offset() for m in consumer.poll(0.5) or [] if m.error() is None]
print("HELD", ",".join(map(str, held)), flush=True)
time.sleep(600)  # holds its records until it is killed or stopped
"""


@pytest.mark.parametrize("how", ["kill", "stop"])
def test_records_of_a_dead_or_hung_consumer_reach_the_others(cluster: LocalCluster, tmp_path: Path,
                                                             how: str) -> None:
    """kill -9: the connection closes and the broker releases the member's records at once;
    SIGSTOP: the consumer stays connected, its records come back when their locks expire. Either
    way they reach another member with delivery count 2."""
    topic, group = f"share-e2e-holder-{how}", f"holder-{how}-{uuid.uuid4().hex[:8]}"
    make_topic(cluster, topic, 50)
    # kill: released when the connection drops, well before a 15 s lock would expire; stop: the
    # locks (3 s) expire.
    lock_ms = 15000 if how == "kill" else 3000
    group_configs(cluster, group, share_auto_offset_reset="earliest", share_record_lock_duration_ms=str(lock_ms))
    script = tmp_path / "holder.py"
    script.write_text(HOLDER)
    holder = subprocess.Popen([sys.executable, str(script), cluster.bootstrap, group, topic],
                              stdout=subprocess.PIPE, text=True, env=os.environ.copy())
    try:
        assert holder.stdout is not None
        line = holder.stdout.readline()
        assert line.startswith("HELD "), line
        held = {int(o) for o in line.split()[1].split(",") if o}
        assert held
        holder.send_signal(signal.SIGKILL if how == "kill" else signal.SIGSTOP)
        stopped_at = time.monotonic()
        other = share_consumer(cluster, group, topic)
        got: dict[int, int] = {}
        try:
            poll_until(other, lambda: held <= set(got), 60, lambda m: got.setdefault(m.offset(), m.delivery_count()))
        finally:
            other.close()
        waited = time.monotonic() - stopped_at
        assert held <= set(got), f"never redelivered: {sorted(held - set(got))}"
        assert all(got[o] == 2 for o in held), {o: got[o] for o in held}
        assert all(got[o] == 1 for o in set(got) - held)
        if how == "stop":
            assert waited >= lock_ms / 1000 * 0.8, f"redelivered after {waited:.1f} s, before the lock expired"
        else:
            assert waited < lock_ms / 1000, f"redelivered after {waited:.1f} s: not at the disconnect"
    finally:
        if holder.poll() is None:
            holder.send_signal(signal.SIGKILL)
        holder.wait(10)


def test_share_consumer_rejects_a_group_config_out_of_bounds(cluster: LocalCluster) -> None:
    with pytest.raises(KafkaException, match=r"share\.record\.lock\.duration\.ms"):
        group_configs(cluster, "bounds-group", share_record_lock_duration_ms="500")


def test_altered_offsets_reach_a_leader_on_another_broker(cluster: LocalCluster) -> None:
    """AlterShareGroupOffsets on the group's coordinator while the data partition's leader (another
    broker) still holds the old state in memory: the next share session there reloads it, and
    delivery resumes at the new start offset."""
    from roost.admin.errors import AdminError
    from roost.admin.share_groups import _coordinator, _topic_leaders
    from roost.admin.target import Target
    from roost.wire.kafka import ApiKey
    from tests.support.kafka_wire import WireClient

    topic = "share-e2e-altered"
    make_topic(cluster, topic, 8)
    target = Target(cluster.bootstrap)
    (leader,) = _topic_leaders(target, [topic])[topic].values()
    def coordinator_of(group: str) -> tuple[str, int]:
        deadline = time.monotonic() + 30
        while True:  # __consumer_offsets may still be on its way
            try:
                return _coordinator(target, group)
            except AdminError:
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.3)
    # A group whose coordinator is not the partition's leader (bounded search over names).
    group = next(g for g in (f"altered-{uuid.uuid4().hex[:8]}" for _ in range(60)) if coordinator_of(g) != leader)
    group_configs(cluster, group, share_auto_offset_reset="earliest")

    def take(count: int) -> list[int]:
        consumer = share_consumer(cluster, group, topic)
        got: list[int] = []
        poll_until(consumer, lambda: len(got) >= count, 30, lambda m: got.append(m.offset()))
        consumer.commit_sync(30)
        consumer.close()
        return sorted(got)
    assert take(8) == list(range(8))
    host, port = coordinator_of(group)
    raw = WireClient(f"{host}:{port}")
    try:
        deadline = time.monotonic() + 30
        answer: dict[str, Any] = {}
        while time.monotonic() < deadline:  # until the closed member has left the group
            answer = raw.request(ApiKey.ALTER_SHARE_GROUP_OFFSETS, 0, {"group_id": group, "topics": [
                {"topic_name": topic, "partitions": [{"partition_index": 0, "start_offset": 5}]}]})
            if answer["error_code"] == 0:
                break
            time.sleep(0.2)
        assert answer["error_code"] == 0 and answer["responses"][0]["partitions"][0]["error_code"] == 0, answer
    finally:
        raw.close()
    assert take(3) == [5, 6, 7], "the leader delivered from the state it held before the alteration"
