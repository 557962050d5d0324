"""A group rebalances mid-stream: a 4th consumer joins, one leaves; nothing is lost and the
group ends up covering every partition."""

from __future__ import annotations

import json
import threading
import time

from confluent_kafka import Consumer, KafkaError, Producer
from confluent_kafka.admin import AdminClient, NewTopic

from tests.support.procs import RoostProcess, wait_for
from tests.support.workload import messages

PARTITIONS = 6
TOTAL = 30_000


class StreamingMember(threading.Thread):
    def __init__(self, bootstrap: str, group: str, topic: str, seen: set[int], lock: threading.Lock) -> None:
        super().__init__(daemon=True)
        self.consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": group,
                                  "auto.offset.reset": "earliest", "enable.auto.commit": True,
                                  "auto.commit.interval.ms": 200, "session.timeout.ms": 6000,
                                  "heartbeat.interval.ms": 300})
        self.consumer.subscribe([topic])
        self.seen, self.lock = seen, lock
        self.stop = threading.Event()
        self.count = 0
        self.errors: list[str] = []
        self.assignment: list[int] = []

    def run(self) -> None:
        deadline = time.monotonic() + 180
        try:
            while not self.stop.is_set() and time.monotonic() < deadline:
                for msg in self.consumer.consume(500, 0.1):
                    if msg.error():
                        if msg.error().code() != KafkaError._PARTITION_EOF:
                            self.errors.append(str(msg.error()))
                        continue
                    data = json.loads(msg.value())
                    with self.lock:
                        self.seen.add(data["n"])
                    self.count += 1
                self.assignment = sorted(tp.partition for tp in self.consumer.assignment())
        except Exception as error:
            self.errors.append(repr(error))
        finally:
            self.consumer.close()


def test_member_joins_and_leaves_mid_stream(broker: RoostProcess) -> None:
    bootstrap = broker.address("kafka")
    topic, group = "rebalance-events", "rebalance-group"
    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic(topic, num_partitions=PARTITIONS, replication_factor=1)])[topic].result(30)

    produced = threading.Event()
    producer_errors: list[str] = []

    def produce() -> None:
        producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 5})
        for i, message in enumerate(messages(TOTAL, "rb")):
            producer.produce(topic, message.value, message.key,
                             on_delivery=lambda e, _m: producer_errors.append(str(e)) if e else None)
            if i % 1000 == 999:
                producer.poll(0)
                time.sleep(0.2)  # a stream, not a burst: the rebalances happen while it flows
        assert producer.flush(60) == 0
        produced.set()

    seen: set[int] = set()
    lock = threading.Lock()
    members = [StreamingMember(bootstrap, group, topic, seen, lock) for _ in range(3)]
    producer_thread = threading.Thread(target=produce, daemon=True)
    for member in members:
        member.start()
    producer_thread.start()

    wait_for(lambda: len(seen) >= TOTAL // 5, timeout=60, what="first fifth consumed")
    fourth = StreamingMember(bootstrap, group, topic, seen, lock)
    fourth.start()
    members.append(fourth)
    wait_for(lambda: fourth.count > 0, timeout=60, what="the 4th member to receive records")
    leaving = members.pop(0)
    leaving.stop.set()
    leaving.join(60)
    # Both membership changes happened while messages were still being produced.
    assert not produced.is_set(), "the stream ended before the group changed; slow the producer down"
    assert leaving.count > 0

    wait_for(lambda: len(seen) >= TOTAL, timeout=120, what="every message consumed")
    producer_thread.join(60)
    assert produced.is_set() and not producer_errors, producer_errors[:3]

    # The three members that remain cover all partitions between them, each exactly once.
    def covered() -> bool:
        assigned = [p for m in members for p in m.assignment]
        return sorted(assigned) == list(range(PARTITIONS))

    wait_for(covered, timeout=60, what="the remaining members to cover every partition")
    assert fourth.count > 0 and all(not m.errors for m in [*members, leaving])
    assert seen == set(range(TOTAL))

    described = admin.describe_consumer_groups([group])[group].result(30)
    partitions = sorted(tp.partition for member in described.members
                        for tp in member.assignment.topic_partitions)
    assert partitions == list(range(PARTITIONS))
    assert len(described.members) == 3
    for member in members:
        member.stop.set()
    for member in members:
        member.join(60)
