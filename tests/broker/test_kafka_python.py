"""kafka-python against a real `roost up`: its default (idempotent) producer in every codec, a
group of three consumers, exactly once across the group, order per key, resume from commits."""

from __future__ import annotations

import pytest
from kafka import KafkaConsumer, KafkaProducer, TopicPartition
from kafka.admin import KafkaAdminClient, NewTopic
from kafka.consumer.subscription_state import AsyncConsumerRebalanceListener

from tests.broker.scenario import PARTITIONS, exactly_once_with_resume
from tests.support.groups import ClientOps
from tests.support.kafka_wire import stored_batch_codecs
from tests.support.procs import RoostProcess
from tests.support.workload import Received, messages


def create_topic(bootstrap: str, name: str, partitions: int) -> None:
    admin = KafkaAdminClient(bootstrap_servers=bootstrap, request_timeout_ms=30000)
    try:
        admin.create_topics([NewTopic(name, num_partitions=partitions, replication_factor=1)])
    finally:
        admin.close()


def produce(bootstrap: str, topic: str, codec: str, count: int, start: int) -> None:
    producer = KafkaProducer(bootstrap_servers=bootstrap, linger_ms=5,
                             compression_type=None if codec == "none" else codec)
    assert producer.config["enable_idempotence"], "kafka-python 3 is idempotent by default"
    futures = [producer.send(topic, value=m.value, key=m.key, headers=m.headers)
               for m in messages(count, codec, start=start)]
    producer.flush(60)
    for future in futures:
        future.get(timeout=60)
    producer.close(10)


class CommitOnRevoke(AsyncConsumerRebalanceListener):
    """Commit what the consumer received before its partitions go to another member. Async, as
    kafka-python 3 runs listeners on its IO loop; a failure is raised again from poll()."""

    def __init__(self, consumer: KafkaConsumer) -> None:
        self.consumer = consumer

    async def on_partitions_revoked(self, revoked: set[TopicPartition]) -> None:
        if revoked:
            await self.consumer.commit_async()

    async def on_partitions_assigned(self, assigned: set[TopicPartition]) -> None:
        pass


def kafka_python_ops(bootstrap: str, group: str, topic: str) -> ClientOps:
    def make() -> KafkaConsumer:
        consumer = KafkaConsumer(group_id=group, bootstrap_servers=bootstrap,
                                 auto_offset_reset="earliest", enable_auto_commit=False,
                                 heartbeat_interval_ms=500, session_timeout_ms=6000)
        consumer.subscribe([topic], listener=CommitOnRevoke(consumer))
        return consumer

    def poll(consumer: KafkaConsumer) -> list[Received]:
        out = []
        for records in consumer.poll(timeout_ms=200, max_records=500).values():
            out.extend(Received(r.key, r.value, r.partition, r.offset, tuple(r.headers)) for r in records)
        return out

    return ClientOps(make, poll, lambda c: c.commit(), lambda c: c.close(autocommit=False))


def committed_offsets(bootstrap: str, group: str, topic: str) -> dict[int, int]:
    probe = KafkaConsumer(group_id=group, bootstrap_servers=bootstrap, enable_auto_commit=False)
    try:
        found = {p: probe.committed(TopicPartition(topic, p)) for p in range(PARTITIONS)}
    finally:
        probe.close(autocommit=False)
    return {p: offset for p, offset in found.items() if offset is not None}


@pytest.mark.slow
def test_every_codec_exactly_once_across_a_group_and_resume_from_commits(shared_broker: RoostProcess) -> None:
    bootstrap = shared_broker.address("kafka")
    topic, group = "kp-events", "kp-group"
    create_topic(bootstrap, topic, PARTITIONS)
    exactly_once_with_resume(
        lambda codec, count, start: produce(bootstrap, topic, codec, count, start),
        kafka_python_ops(bootstrap, group, topic),
        lambda: committed_offsets(bootstrap, group, topic),
        lambda: stored_batch_codecs(bootstrap, topic, PARTITIONS),
    )
