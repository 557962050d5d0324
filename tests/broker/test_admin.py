"""Topic administration through the clients' admin APIs: create, delete, add partitions,
configs, validation with Kafka's error codes, auto-creation switched off, groups listed."""

from __future__ import annotations

import pytest
from confluent_kafka import Consumer, KafkaError, KafkaException, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, ConfigResource, NewPartitions, NewTopic
from kafka.admin import KafkaAdminClient
from kafka.admin import NewPartitions as KpNewPartitions
from kafka.admin import NewTopic as KpNewTopic
from kafka.errors import InvalidPartitionsError, TopicAlreadyExistsError

from tests.broker.conftest import StartBroker
from tests.support.procs import RoostProcess


def create(admin: AdminClient, topic: NewTopic) -> None:
    admin.create_topics([topic])[topic.topic].result(30)


def error_of(future) -> KafkaError:
    with pytest.raises(KafkaException) as caught:
        future.result(30)
    return caught.value.args[0]


def test_create_validate_and_delete_topics(shared_broker: RoostProcess) -> None:
    admin = AdminClient({"bootstrap.servers": shared_broker.address("kafka")})
    create(admin, NewTopic("adm-a", num_partitions=3, replication_factor=1,
                           config={"retention.ms": "1000000", "cleanup.policy": "delete"}))
    assert len(admin.list_topics(timeout=30).topics["adm-a"].partitions) == 3

    futures = admin.create_topics([NewTopic("adm-a", 1, 1)])
    assert error_of(futures["adm-a"]).code() == KafkaError.TOPIC_ALREADY_EXISTS
    futures = admin.create_topics([NewTopic("bad name!", 1, 1)])
    assert error_of(futures["bad name!"]).code() == KafkaError.TOPIC_EXCEPTION
    futures = admin.create_topics([NewTopic("x" * 250, 1, 1)])
    assert error_of(futures["x" * 250]).code() == KafkaError.TOPIC_EXCEPTION
    futures = admin.create_topics([NewTopic("adm-rf", 1, replication_factor=3)])
    assert error_of(futures["adm-rf"]).code() == KafkaError.INVALID_REPLICATION_FACTOR
    futures = admin.create_topics([NewTopic("adm-cfg", 1, 1, config={"retention.ms": "soon"})])
    assert error_of(futures["adm-cfg"]).code() == KafkaError.INVALID_CONFIG
    futures = admin.create_topics([NewTopic("adm-cfg2", 1, 1, config={"no.such.config": "1"})])
    assert error_of(futures["adm-cfg2"]).code() == KafkaError.INVALID_CONFIG
    futures = admin.create_topics([NewTopic("adm-dry", 2, 1)], validate_only=True)
    futures["adm-dry"].result(30)
    assert "adm-dry" not in admin.list_topics(timeout=30).topics

    described = next(iter(admin.describe_configs([ConfigResource("topic", "adm-a")]).values())).result(30)
    assert described["retention.ms"].value == "1000000"
    assert not described["retention.ms"].is_default  # a topic override
    assert described["segment.bytes"].is_default and described["segment.bytes"].value == str(1 << 30)
    broker_configs = next(iter(admin.describe_configs([ConfigResource("broker", "0")]).values())).result(30)
    assert broker_configs["num.partitions"].value == "1"

    admin.delete_topics(["adm-a"])["adm-a"].result(30)
    assert "adm-a" not in admin.list_topics(timeout=30).topics
    assert error_of(admin.delete_topics(["adm-a"])["adm-a"]).code() == KafkaError.UNKNOWN_TOPIC_OR_PART
    # The name can be used again, and the new topic starts empty.
    create(admin, NewTopic("adm-a", num_partitions=1, replication_factor=1))
    consumer = Consumer({"bootstrap.servers": shared_broker.address("kafka"), "group.id": "adm"})
    assert consumer.get_watermark_offsets(TopicPartition("adm-a", 0), timeout=30) == (0, 0)
    consumer.close()


def test_create_partitions(shared_broker: RoostProcess) -> None:
    bootstrap = shared_broker.address("kafka")
    admin = AdminClient({"bootstrap.servers": bootstrap})
    create(admin, NewTopic("adm-grow", num_partitions=2, replication_factor=1))
    admin.create_partitions([NewPartitions("adm-grow", 5)])["adm-grow"].result(30)
    assert len(admin.list_topics(timeout=30).topics["adm-grow"].partitions) == 5
    assert error_of(admin.create_partitions([NewPartitions("adm-grow", 3)])["adm-grow"]).code() == \
        KafkaError.INVALID_PARTITIONS
    producer = Producer({"bootstrap.servers": bootstrap})
    producer.produce("adm-grow", b"to the new partition", partition=4)
    assert producer.flush(10) == 0

    kp = KafkaAdminClient(bootstrap_servers=bootstrap)
    try:
        with pytest.raises(TopicAlreadyExistsError):
            kp.create_topics([KpNewTopic("adm-grow", 1, 1)])
        with pytest.raises(InvalidPartitionsError):
            kp.create_partitions({"adm-grow": KpNewPartitions(total_count=2)})
    finally:
        kp.close()


def test_auto_create_can_be_switched_off(start_broker: StartBroker) -> None:
    broker = start_broker("--auto.create.topics.enable", "false")
    bootstrap = broker.address("kafka")
    errors: list[KafkaError] = []
    producer = Producer({"bootstrap.servers": bootstrap, "message.timeout.ms": 3000})
    producer.produce("never-made", b"x", on_delivery=lambda e, _m: errors.append(e))
    producer.flush(10)
    assert errors and errors[0] is not None
    admin = AdminClient({"bootstrap.servers": bootstrap})
    assert "never-made" not in admin.list_topics(timeout=30).topics


def test_groups_are_listed_and_described(shared_broker: RoostProcess) -> None:
    bootstrap = shared_broker.address("kafka")
    producer = Producer({"bootstrap.servers": bootstrap})
    producer.produce("adm-groups", b"x")
    assert producer.flush(10) == 0
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "adm-listed",
                         "auto.offset.reset": "earliest", "client.id": "lister"})
    consumer.subscribe(["adm-groups"])
    msg = None
    for _ in range(100):
        msg = consumer.poll(0.2)
        if msg is not None and not msg.error():
            break
    assert msg is not None and not msg.error()
    admin = AdminClient({"bootstrap.servers": bootstrap})
    listed = admin.list_consumer_groups().result(30)
    assert "adm-listed" in {g.group_id for g in listed.valid}
    described = admin.describe_consumer_groups(["adm-listed"])["adm-listed"].result(30)
    assert described.state.name == "STABLE"
    assert [m.client_id for m in described.members] == ["lister"]
    consumer.close()
    described = admin.describe_consumer_groups(["adm-listed"])["adm-listed"].result(30)
    assert described.state.name == "EMPTY" and not described.members
