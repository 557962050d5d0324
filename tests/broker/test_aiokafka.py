"""aiokafka against a real `roost up`: every codec, a group of three consumers, exactly once
across the group, order per key, resume from committed offsets."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from aiokafka import AIOKafkaConsumer, AIOKafkaProducer, TopicPartition
from aiokafka.abc import ConsumerRebalanceListener
from aiokafka.admin import AIOKafkaAdminClient, NewTopic

from tests.broker.scenario import PARTITIONS, exactly_once_with_resume
from tests.support.groups import ClientOps
from tests.support.kafka_wire import stored_batch_codecs
from tests.support.procs import RoostProcess
from tests.support.workload import Received, messages


async def create_topic(bootstrap: str, name: str, partitions: int) -> None:
    admin = AIOKafkaAdminClient(bootstrap_servers=bootstrap)
    await admin.start()
    try:
        await admin.create_topics([NewTopic(name, num_partitions=partitions, replication_factor=1)])
    finally:
        await admin.close()


async def produce(bootstrap: str, topic: str, codec: str, count: int, start: int) -> None:
    producer = AIOKafkaProducer(bootstrap_servers=bootstrap, linger_ms=5,
                                compression_type=None if codec == "none" else codec)
    await producer.start()
    try:
        pending = []
        for m in messages(count, codec, start=start):
            pending.append(await producer.send(topic, value=m.value, key=m.key, headers=m.headers))
        await asyncio.wait_for(asyncio.gather(*pending), 60)
    finally:
        await producer.stop()


class CommitOnRevoke(ConsumerRebalanceListener):
    """Commit what the consumer received before its partitions go to another member. aiokafka only
    logs a listener's exception, so failures are kept for the next poll to raise."""

    def __init__(self, owner: LoopThreadConsumer) -> None:
        self.owner = owner

    async def on_partitions_revoked(self, revoked: set[TopicPartition]) -> None:
        if revoked:
            try:
                await self.owner.consumer.commit()
            except Exception as error:
                self.owner.errors.append(f"commit on revoke: {error!r}")

    async def on_partitions_assigned(self, assigned: set[TopicPartition]) -> None:
        pass


class LoopThreadConsumer:
    """An AIOKafkaConsumer living on its own event loop, driven from the group harness thread."""

    def __init__(self, bootstrap: str, group: str, topic: str) -> None:
        self.loop = asyncio.new_event_loop()
        self.errors: list[str] = []

        async def create() -> AIOKafkaConsumer:  # aiokafka binds to the running loop
            consumer = AIOKafkaConsumer(group_id=group, bootstrap_servers=bootstrap,
                                        auto_offset_reset="earliest", enable_auto_commit=False,
                                        heartbeat_interval_ms=500, session_timeout_ms=6000)
            consumer.subscribe([topic], listener=CommitOnRevoke(self))
            await consumer.start()
            return consumer

        self.consumer = self.run(create())

    def run(self, coroutine: Any) -> Any:
        return self.loop.run_until_complete(asyncio.wait_for(coroutine, 60))

    def poll(self) -> list[Received]:
        batches = self.run(self.consumer.getmany(timeout_ms=200, max_records=500))
        assert not self.errors, self.errors
        return [Received(r.key, r.value, r.partition, r.offset, tuple(r.headers))
                for records in batches.values() for r in records]

    def close(self) -> None:
        try:
            self.run(self.consumer.stop())
        finally:
            self.loop.close()


def aiokafka_ops(bootstrap: str, group: str, topic: str) -> ClientOps:
    return ClientOps(lambda: LoopThreadConsumer(bootstrap, group, topic), lambda c: c.poll(),
                     lambda c: c.run(c.consumer.commit()), lambda c: c.close())


async def committed_offsets(bootstrap: str, group: str, topic: str) -> dict[int, int]:
    probe = AIOKafkaConsumer(group_id=group, bootstrap_servers=bootstrap, enable_auto_commit=False)
    await probe.start()
    try:
        found = {p: await probe.committed(TopicPartition(topic, p)) for p in range(PARTITIONS)}
    finally:
        await probe.stop()
    return {p: offset for p, offset in found.items() if offset is not None}


@pytest.mark.slow
def test_every_codec_exactly_once_across_a_group_and_resume_from_commits(shared_broker: RoostProcess) -> None:
    bootstrap = shared_broker.address("kafka")
    topic, group = "aio-events", "aio-group"
    asyncio.run(create_topic(bootstrap, topic, PARTITIONS))
    exactly_once_with_resume(
        lambda codec, count, start: asyncio.run(produce(bootstrap, topic, codec, count, start)),
        aiokafka_ops(bootstrap, group, topic),
        lambda: asyncio.run(committed_offsets(bootstrap, group, topic)),
        lambda: stored_batch_codecs(bootstrap, topic, PARTITIONS),
    )
