"""A group member's client host is written as Kafka writes it (Java's InetAddress.toString), so
DescribeGroups, ConsumerGroupDescribe and ShareGroupDescribe answer what Kafka answers
(tests/referees/test_kafka_differential_groups.py compares it against Kafka 3.9 over the wire)."""

from __future__ import annotations

import pytest

from roost.broker.net.request import java_address_text


@pytest.mark.parametrize(("socket_host", "kafka_text"), [
    ("127.0.0.1", "/127.0.0.1"),
    ("::1", "/0:0:0:0:0:0:0:1"),
    ("fe80::a:bc", "/fe80:0:0:0:0:0:a:bc"),
    ("fe80::1%lo", "/fe80:0:0:0:0:0:0:1%lo"),
    ("::ffff:127.0.0.1", "/127.0.0.1"),  # Java makes an Inet4Address of a v4-mapped address
    ("?", "?"),  # no address known (an in-process call): kept as it is
])
def test_a_member_host_is_java_s_text_of_the_address(socket_host: str, kafka_text: str) -> None:
    assert java_address_text(socket_host) == kafka_text
