"""With no authorizer, asked for authorized operations, a broker answers every operation of the
resource's type, as Kafka does (tests/referees/test_kafka_differential_groups.py compares
DescribeGroups' with Apache Kafka 3.9's): pure, no I/O."""

from __future__ import annotations

from roost.broker.handlers.open_operations import ALL, fill
from roost.broker.security.acl import ResourceType
from roost.wire.kafka import ApiKey

NOT_ASKED = -2147483648


def test_every_operation_of_the_type_as_a_bitfield() -> None:
    # Kafka 3.9 without an authorizer: READ(3), DELETE(6), DESCRIBE(8) on a group.
    assert ALL[ResourceType.GROUP] == 328
    assert ALL[ResourceType.TOPIC] == sum(1 << op for op in (3, 4, 5, 6, 7, 8, 10, 11))
    assert ALL[ResourceType.CLUSTER] == sum(1 << op for op in (5, 7, 8, 9, 10, 11, 12))


def test_filled_only_where_asked_and_answered() -> None:
    groups = {"groups": [{"error_code": 0, "authorized_operations": NOT_ASKED},
                         {"error_code": 69, "authorized_operations": NOT_ASKED}]}
    assert fill(ApiKey.DESCRIBE_GROUPS, 5, {"include_authorized_operations": False}, groups)["groups"][0][
        "authorized_operations"] == NOT_ASKED
    asked = fill(ApiKey.DESCRIBE_GROUPS, 5, {"include_authorized_operations": True}, groups)["groups"]
    assert [g["authorized_operations"] for g in asked] == [328, NOT_ASKED]

    metadata = {"topics": [{"error_code": 3, "name": "gone"}], "cluster_authorized_operations": NOT_ASKED}
    body = {"include_topic_authorized_operations": True, "include_cluster_authorized_operations": True}
    filled = fill(ApiKey.METADATA, 10, body, metadata)
    assert filled["topics"][0]["topic_authorized_operations"] == ALL[ResourceType.TOPIC]  # errors too, as Kafka
    assert filled["cluster_authorized_operations"] == ALL[ResourceType.CLUSTER]
    later = fill(ApiKey.METADATA, 12, body, {"topics": [], "cluster_authorized_operations": NOT_ASKED})
    assert later["cluster_authorized_operations"] == NOT_ASKED  # v11+ has DescribeCluster for it
