"""The messenger's notify workers as a share group: three ShareConsumers on a one-partition
topic all get work; every notification is pushed once; events refused by a push service that
is down are released and redelivered; a poison event is rejected into the dead-letter topic."""

from __future__ import annotations

import time
import uuid

from confluent_kafka import Consumer, Producer
from examples.messenger.events import MessageSent, encode
from examples.messenger.scenario import create_events_topic
from examples.messenger.share_workers import PushService, ShareNotifier, configure_share_group

from tests.support.procs import RoostProcess

EVENTS = 60


def test_share_group_notify_pool(roost_node: RoostProcess) -> None:
    bootstrap = roost_node.address("kafka")
    suffix = uuid.uuid4().hex[:8]
    topic, dead_letters, group = f"messenger.share.{suffix}", f"messenger.dlq.{suffix}", f"notifiers-{suffix}"
    create_events_topic(bootstrap, topic, partitions=1)
    create_events_topic(bootstrap, dead_letters, partitions=1)
    configure_share_group(bootstrap, group, dead_letters)
    push = PushService(refuse_first=3, seconds=0.02)
    pool = [ShareNotifier(bootstrap, group, topic, push, f"w{i}") for i in range(3)]
    for worker in pool:
        worker.start()
    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 0})
    try:
        ids = [f"m{i}" for i in range(EVENTS)]
        for i, message_id in enumerate(ids):
            producer.produce(topic, encode(MessageSent(message_id, "ann", f"user{i % 7}", i)), key=b"ann")
            producer.flush(10)  # a batch each: workers acquire a few records at a time
            if i == EVENTS // 2:
                producer.produce(topic, b"\xff not an event", key=b"ann")
        producer.flush(10)
        deadline = time.monotonic() + 60
        while len(push.delivered) < EVENTS or sum(w.rejected for w in pool) < 1:
            assert all(w.failure is None for w in pool), [w.failure for w in pool]
            assert time.monotonic() < deadline, f"{len(push.delivered)} of {EVENTS} pushed"
            time.sleep(0.05)
    finally:
        for worker in pool:
            worker.stop()
    assert sorted(n.message_id for _, n in push.delivered) == sorted(ids)  # each exactly once
    assert {name for name, _ in push.delivered} == {w.name for w in pool}  # all workers got work
    assert sum(w.released for w in pool) == 3 and push.refused == 3
    assert sum(w.rejected for w in pool) == 1
    reader = Consumer({"bootstrap.servers": bootstrap, "group.id": f"dlq-{suffix}", "auto.offset.reset": "earliest"})
    reader.subscribe([dead_letters])
    try:
        letter = None
        deadline = time.monotonic() + 20
        while letter is None and time.monotonic() < deadline:
            message = reader.poll(0.5)
            if message is not None and message.error() is None:
                letter = message
    finally:
        reader.close()
    assert letter is not None and letter.value() == b"\xff not an event"
    assert dict(letter.headers() or [])["roost.dlt.reason"] == b"rejected"
