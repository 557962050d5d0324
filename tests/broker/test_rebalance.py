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
CHUNK = 500
FIRST_PART = 6_000  # consumed before the 4th member joins
AFTER = 5_000  # produced after the group has changed
MAX_MESSAGES = 200_000  # bounds the stream if the group never finishes changing


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

    seen: set[int] = set()
    lock = threading.Lock()
    changed = threading.Event()  # the 4th member has joined and received records, the 1st has left
    produced: list[int] = []  # how many messages the stream held in the end
    producer_errors: list[str] = []

    def consumed(count: int) -> bool:
        with lock:
            return len(seen) >= count

    def produce() -> None:
        # A stream, not a burst, paced by progress instead of the clock: each chunk goes out once
        # the group has consumed the one before, and the stream goes on until the group has
        # changed, then carries AFTER more messages. So the join and the leave happen while it
        # flows whatever their duration, and the members left after them get records too.
        producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 5})
        sent = 0
        after = None
        while after is None or sent < after:
            assert sent < MAX_MESSAGES, "the group never finished changing"
            for message in messages(CHUNK, "rb", start=sent):
                producer.produce(topic, message.value, message.key,
                                 on_delivery=lambda e, _m: producer_errors.append(str(e)) if e else None)
            assert producer.flush(60) == 0
            sent += CHUNK
            wait_for(lambda count=sent: consumed(count), timeout=60, what=f"the group to consume {sent} messages")
            if after is None and changed.is_set():
                after = sent + AFTER
        produced.append(sent)

    members = [StreamingMember(bootstrap, group, topic, seen, lock) for _ in range(3)]
    producer_thread = threading.Thread(target=produce, daemon=True)
    for member in members:
        member.start()
    producer_thread.start()

    wait_for(lambda: consumed(FIRST_PART), timeout=60, what="the first part consumed")
    fourth = StreamingMember(bootstrap, group, topic, seen, lock)
    fourth.start()
    members.append(fourth)
    wait_for(lambda: fourth.count > 0, timeout=60, what="the 4th member to receive records")
    leaving = members.pop(0)
    leaving.stop.set()
    leaving.join(60)
    assert not leaving.is_alive() and leaving.count > 0
    changed.set()

    producer_thread.join(120)
    assert produced and not producer_errors, producer_errors[:3]
    total = produced[0]
    assert total >= FIRST_PART + AFTER
    assert seen == set(range(total))

    # The three members that remain cover all partitions between them, each exactly once.
    def covered() -> bool:
        assigned = [p for m in members for p in m.assignment]
        return sorted(assigned) == list(range(PARTITIONS))

    wait_for(covered, timeout=60, what="the remaining members to cover every partition")
    assert fourth.count > 0 and all(not m.errors for m in [*members, leaving])

    described = admin.describe_consumer_groups([group])[group].result(30)
    partitions = sorted(tp.partition for member in described.members
                        for tp in member.assignment.topic_partitions)
    assert partitions == list(range(PARTITIONS))
    assert len(described.members) == 3
    for member in members:
        member.stop.set()
    for member in members:
        member.join(60)
