"""DescribeConfigs tells where a broker's settings come from as Kafka does: a value the operator
gave (the TOML file, --set, a flag) is STATIC_BROKER_CONFIG even when it equals the default, and
the listener settings `roost up` derives from its own flags (--host, --kafka-port; port 0 the
bound one) and the keeper it starts (zookeeper.connect) are reported with their values, as
STATIC_BROKER_CONFIG, where they used to show empty as DEFAULT_CONFIG. Read with confluent-kafka's
AdminClient against a real `roost up`."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from confluent_kafka.admin import AdminClient, ConfigResource, ConfigSource, ResourceType

from tests.support.procs import RoostProcess, start_roost


@pytest.fixture(scope="module")
def node(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RoostProcess]:
    directory = tmp_path_factory.mktemp("config-sources")
    # num.partitions given at its default (1); log.retention.ms given at another value.
    proc = start_roost(["up", "--data-dir", str(directory), "--kafka-port", "0", "--set", "num.partitions=1",
                        "--log.retention.ms", "3600000"], expect=("kafka", "keeper"))
    yield proc
    proc.stop()


@pytest.fixture(scope="module")
def broker_configs(node: RoostProcess) -> dict:
    admin = AdminClient({"bootstrap.servers": node.address("kafka")})
    resource = ConfigResource(ResourceType.BROKER, "0")
    return admin.describe_configs([resource], request_timeout=30)[resource].result(30)


def source(entry) -> ConfigSource:
    return ConfigSource(entry.source)


def test_the_listeners_roost_up_derived_from_its_flags_are_static(node: RoostProcess, broker_configs: dict) -> None:
    expected = f"PLAINTEXT://{node.address('kafka')}"
    for name in ("listeners", "advertised.listeners"):
        entry = broker_configs[name]
        assert entry.value == expected, name
        assert source(entry) == ConfigSource.STATIC_BROKER_CONFIG, name
        assert not entry.is_default, name


def test_the_keeper_roost_up_started_is_the_static_zookeeper_connect(node: RoostProcess, broker_configs: dict) -> None:
    entry = broker_configs["zookeeper.connect"]
    assert entry.value == node.address("keeper")
    assert source(entry) == ConfigSource.STATIC_BROKER_CONFIG


def test_a_value_given_is_static_even_at_its_default(broker_configs: dict) -> None:
    assert broker_configs["num.partitions"].value == "1"
    assert source(broker_configs["num.partitions"]) == ConfigSource.STATIC_BROKER_CONFIG
    assert broker_configs["log.retention.ms"].value == "3600000"
    assert source(broker_configs["log.retention.ms"]) == ConfigSource.STATIC_BROKER_CONFIG


def test_a_value_not_given_is_the_default(broker_configs: dict) -> None:
    for name in ("delete.topic.enable", "broker.rack", "message.max.bytes"):
        assert source(broker_configs[name]) == ConfigSource.DEFAULT_CONFIG, name
        assert broker_configs[name].is_default, name
