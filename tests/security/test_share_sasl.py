"""confluent-kafka's ShareConsumer over SASL_PLAINTEXT (PLAIN) against a broker with the authorizer
on: share groups are GROUP resources as Kafka 4.2 checks them. Without READ on the group the
consumer gets GROUP_AUTHORIZATION_FAILED; with READ on the group but not the topic nothing is
delivered; with both it consumes and its acknowledgements are durable (the start offset moves).

The shared `secured` node runs without an authorizer (its tests need none), so this module starts
one small node of its own: PLAINTEXT for set-up as a super user, SASL_PLAINTEXT for the consumer."""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import KafkaException, Producer, ShareConsumer
from confluent_kafka.admin import (
    AclBinding,
    AclOperation,
    AclPermissionType,
    AdminClient,
    AlterConfigOpType,
    ConfigEntry,
    ConfigResource,
    NewTopic,
    ResourcePatternType,
    ResourceType,
)

from roost.admin.share_groups import describe_share_offsets
from roost.admin.target import Target
from roost.testing.node import RoostNode

USER, PASSWORD = "worker", "worker-secret"
TOPIC, GROUP, RECORDS = "sasl-jobs", "sasl-workers", 5


@pytest.fixture(scope="module")
def node(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[str, str]]:
    """(PLAINTEXT address, SASL_PLAINTEXT address) of one node with the authorizer on."""
    root: Path = tmp_path_factory.mktemp("share-sasl")
    started = RoostNode.start(root / "data", {
        "listeners": "PLAINTEXT://127.0.0.1:0,SASL_PLAINTEXT://127.0.0.1:0",
        "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,SASL_PLAINTEXT:SASL_PLAINTEXT",
        "inter.broker.listener.name": "PLAINTEXT",
        "sasl.jaas.config": f'org.apache.kafka.common.security.plain.PlainLoginModule required user_{USER}="{PASSWORD}";',
        "authorizer.class.name": "kafka.security.authorizer.AclAuthorizer",
        "super.users": "User:ANONYMOUS",  # the PLAINTEXT set-up clients
    })
    try:
        assert started.process is not None
        found = started.process.wait_listening(["kafka listener plaintext", "kafka listener sasl-plaintext"])
        yield (f"127.0.0.1:{found['kafka listener plaintext'][1]}",
               f"127.0.0.1:{found['kafka listener sasl-plaintext'][1]}")
    finally:
        started.stop()


def grant(admin: AdminClient, resource: ResourceType, name: str, operation: AclOperation) -> None:
    binding = AclBinding(resource, name, ResourcePatternType.LITERAL, f"User:{USER}", "*", operation,
                         AclPermissionType.ALLOW)
    for future in admin.create_acls([binding]).values():
        future.result(30)


def attempt(sasl: str, seconds: float) -> tuple[list[Any], list[str]]:
    """What one share consumer (explicit ACCEPTs, committed) got in `seconds`: records, error names."""
    consumer = ShareConsumer({"bootstrap.servers": sasl, "group.id": GROUP, "security.protocol": "sasl_plaintext",
                              "sasl.mechanism": "PLAIN", "sasl.username": USER, "sasl.password": PASSWORD,
                              "share.acknowledgement.mode": "explicit"})
    consumer.subscribe([TOPIC])
    got: list[Any] = []
    errors: list[str] = []
    deadline = time.monotonic() + seconds
    try:
        while len(got) < RECORDS and not errors and time.monotonic() < deadline:
            try:
                for message in consumer.poll(0.5) or []:
                    if message.error() is not None:
                        errors.append(message.error().name())
                    else:
                        got.append(message)
                        consumer.acknowledge(message)
            except KafkaException as error:
                errors.append(error.args[0].name())
        if got:
            results = consumer.commit_sync(30)
            errors += [tp.error.name() for tp in results or {} if tp.error is not None]
    finally:
        consumer.close()
    return got, errors


def test_share_consumer_needs_read_on_group_and_topic(node: tuple[str, str]) -> None:
    plain, sasl = node
    admin = AdminClient({"bootstrap.servers": plain})
    for future in admin.create_topics([NewTopic(TOPIC, 1, 1)]).values():
        future.result(30)
    producer = Producer({"bootstrap.servers": plain})
    for i in range(RECORDS):
        producer.produce(TOPIC, f"job {i}".encode())
    assert producer.flush(30) == 0
    config = ConfigResource(ResourceType.GROUP, GROUP, incremental_configs=[
        ConfigEntry("share.auto.offset.reset", "earliest", incremental_operation=AlterConfigOpType.SET)])
    for future in admin.incremental_alter_configs([config]).values():
        future.result(30)

    # No ACL, then only DESCRIBE on the topic: the heartbeat is refused for the group.
    got, errors = attempt(sasl, 15)
    assert (got, errors) == ([], ["GROUP_AUTHORIZATION_FAILED"])
    grant(admin, ResourceType.TOPIC, TOPIC, AclOperation.DESCRIBE)
    got, errors = attempt(sasl, 15)
    assert (got, errors) == ([], ["GROUP_AUTHORIZATION_FAILED"])

    # READ on the group: it joins, but ShareFetch delivers nothing of a topic it may not read.
    grant(admin, ResourceType.GROUP, GROUP, AclOperation.READ)
    got, errors = attempt(sasl, 4)
    assert (got, errors) == ([], [])

    # READ on the topic too: every record, accepted, and the acceptances are durable.
    grant(admin, ResourceType.TOPIC, TOPIC, AclOperation.READ)
    got, errors = attempt(sasl, 20)
    assert errors == []
    assert sorted(m.offset() for m in got) == list(range(RECORDS))
    deadline = time.monotonic() + 20
    rows: list[dict[str, Any]] = []
    while time.monotonic() < deadline:
        rows = describe_share_offsets(Target(plain), GROUP)
        if [r["start_offset"] for r in rows if r["topic"] == TOPIC] == [RECORDS]:
            break
        time.sleep(0.2)
    assert [r["start_offset"] for r in rows if r["topic"] == TOPIC] == [RECORDS], rows
