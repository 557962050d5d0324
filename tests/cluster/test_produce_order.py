"""A connection's produces reach a partition in the order they were sent, also when one of them
waits: a produce naming a topic that does not exist yet waits (bounded) for the auto-created
topic's leaders, and the produces pipelined behind it on the same connection wait their turn.

Overtaken, an idempotent producer's later batch would be appended first and its earlier one then
refused OUT_OF_ORDER_SEQUENCE_NUMBER; librdkafka answers that by renumbering the earlier batch
under a new epoch and sending it again, so a record is written twice (the fault runs saw
duplicates of that shape after restarts, when brokers do not know the topics yet)."""

from __future__ import annotations

import time
import uuid
from collections.abc import Iterator

import pytest
from confluent_kafka.admin import NewTopic

from roost.wire.kafka import ApiKey
from roost.wire.kafka.records import build_batch
from tests.support.cluster import LocalCluster
from tests.support.kafka_wire import WireClient

KNOWN = "order-known"


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalCluster]:
    # One broker and a default replication factor of 2: a topic auto-created with the defaults
    # cannot get its replicas, so a produce naming one waits the whole bounded while (3 s).
    cluster = LocalCluster.start(tmp_path_factory.mktemp("produce-order"), brokers=1, keepers=1,
                                 settings={"default.replication.factor": 2})
    try:
        admin = cluster.admin()  # kept: the futures fail if their client is collected first
        admin.create_topics([NewTopic(KNOWN, 1, 1)])[KNOWN].result(30)
        cluster.wait_for_isr(KNOWN)
        yield cluster
    finally:
        cluster.close()


def test_a_produce_behind_one_waiting_for_a_new_topic_is_appended_after_it(cluster: LocalCluster) -> None:
    (broker,) = cluster.brokers.values()
    client = WireClient(broker.address)
    try:
        init = client.request(ApiKey.INIT_PRODUCER_ID, 1, {"transactional_id": None, "transaction_timeout_ms": 60000})
        pid, epoch = init["producer_id"], init["producer_epoch"]
        now = int(time.time() * 1000)

        def batch(seq: int) -> bytes:
            return build_batch([(b"k", f"v{seq}".encode())], timestamp_ms=now, producer_id=pid,
                               producer_epoch=epoch, base_sequence=seq)

        def produce(topics: list[tuple[str, bytes]]) -> int:
            return client.send(ApiKey.PRODUCE, 7, {"transactional_id": None, "acks": -1, "timeout_ms": 30000,
                                                   "topic_data": [{"name": name, "partition_data": [
                                                       {"index": 0, "records": records}]} for name, records in topics]})

        new = f"order-new-{uuid.uuid4().hex[:8]}"  # the first produce waits for it to be created
        started = time.monotonic()
        first = produce([(new, build_batch([(b"k", b"elsewhere")], timestamp_ms=now)), (KNOWN, batch(0))])
        second = produce([(KNOWN, batch(1))])  # pipelined: sent before the first is answered
        answers = [client.receive(ApiKey.PRODUCE, 7, first), client.receive(ApiKey.PRODUCE, 7, second)]
        waited = time.monotonic() - started
    finally:
        client.close()
    on_known = [next(t for t in answer["responses"] if t["name"] == KNOWN)["partition_responses"][0]
                for answer in answers]
    assert [(p["error_code"], p["base_offset"]) for p in on_known] == [(0, 0), (0, 1)], on_known
    on_new = next(t for t in answers[0]["responses"] if t["name"] == new)["partition_responses"][0]
    assert on_new["error_code"] != 0, "the topic the first produce named could not be created"
    assert waited >= 2.5, f"the first produce answered after {waited:.2f} s: it did not wait for the topic"
