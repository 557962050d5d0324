"""Topic configs changed live: AlterConfigs (33) and IncrementalAlterConfigs (44) from
confluent-kafka's AdminClient and kafka-python's KafkaAdminClient, checked with DescribeConfigs and
by what the broker then does (retention deletes, oversized batches refused), without a restart;
kept across one; and refused with Kafka's error codes when wrong, changing nothing."""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from confluent_kafka import Consumer, KafkaError, KafkaException, Producer, TopicPartition
from confluent_kafka.admin import (
    AdminClient,
    AlterConfigOpType,
    ConfigEntry,
    ConfigResource,
    ConfigSource,
    NewTopic,
)
from kafka.admin import ConfigResource as KpConfigResource
from kafka.admin import ConfigResourceType, KafkaAdminClient

from roost.wire.kafka import ApiKey
from roost.wire.kafka.errors import ErrorCode
from roost.wire.kafka.records import build_batch
from tests.broker.conftest import FAST_GROUPS, StartBroker
from tests.support.cluster import LocalCluster
from tests.support.kafka_wire import WireClient
from tests.support.procs import RoostProcess, start_roost, wait_for

SET, DELETE, APPEND, SUBTRACT = (AlterConfigOpType.SET, AlterConfigOpType.DELETE, AlterConfigOpType.APPEND,
                                 AlterConfigOpType.SUBTRACT)
WEEK_MS = 7 * 24 * 3600 * 1000


class RestartableBroker:
    """One `roost up` (with its keeper) for the module, retention checked every 200 ms, that a
    test may restart on the same data directory."""

    def __init__(self, directory: Path) -> None:
        self.directory = directory
        self.process = self._start()

    def _start(self) -> RoostProcess:
        return start_roost(["up", "--data-dir", str(self.directory), "--kafka-port", "0",
                            "--log.retention.check.interval.ms", "200", *FAST_GROUPS], expect=("kafka", "keeper"))

    def restart(self) -> None:
        self.process.stop()
        self.process = self._start()

    @property
    def bootstrap(self) -> str:
        return self.process.address("kafka")

    def admin(self) -> AdminClient:
        return AdminClient({"bootstrap.servers": self.bootstrap})


@pytest.fixture(scope="module")
def broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RestartableBroker]:
    node = RestartableBroker(tmp_path_factory.mktemp("alter-configs"))
    yield node
    node.process.stop()


def create(admin: AdminClient, topic: str, **configs: str) -> None:
    admin.create_topics([NewTopic(topic, 1, 1, config=configs)])[topic].result(30)


def incremental(admin: AdminClient, topic: str, *changes: tuple[str, AlterConfigOpType, str | None],
                validate_only: bool = False) -> None:
    entries = [ConfigEntry(name, value, incremental_operation=op) for name, op, value in changes]
    resource = ConfigResource("topic", topic, incremental_configs=entries)
    admin.incremental_alter_configs([resource], validate_only=validate_only)[resource].result(30)


def described(admin: AdminClient, topic: str) -> dict[str, ConfigEntry]:
    return next(iter(admin.describe_configs([ConfigResource("topic", topic)]).values())).result(30)


def overrides(admin: AdminClient, topic: str) -> dict[str, str]:
    """The topic's own configs, as DescribeConfigs reports them (source DYNAMIC_TOPIC_CONFIG)."""
    return {name: entry.value for name, entry in described(admin, topic).items()
            if entry.source == ConfigSource.DYNAMIC_TOPIC_CONFIG.value}


def refused(action: Callable[[], object], code: int) -> str:
    with pytest.raises(KafkaException) as caught:
        action()
    error: KafkaError = caught.value.args[0]
    assert error.code() == code, error
    return error.str()


def low_watermark(bootstrap: str, topic: str) -> int:
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "alter-watermarks"})
    try:
        return consumer.get_watermark_offsets(TopicPartition(topic, 0), timeout=10)[0]
    finally:
        consumer.close()


def produce_one(bootstrap: str, topic: str, size: int) -> KafkaError | None:
    """One record of `size` bytes, not retried; the delivery error, if any."""
    outcome: list[KafkaError | None] = []
    producer = Producer({"bootstrap.servers": bootstrap, "retries": 0, "message.max.bytes": 10_000_000,
                         "linger.ms": 0})
    producer.produce(topic, b"x" * size, partition=0, on_delivery=lambda err, _msg: outcome.append(err))
    assert producer.flush(30) == 0
    return outcome[0]


def test_a_shorter_retention_deletes_old_records_without_a_restart(broker: RestartableBroker) -> None:
    admin, topic = broker.admin(), "alter-retention"
    create(admin, topic, **{"segment.bytes": "1024"})  # retention.ms: the broker's week
    producer = Producer({"bootstrap.servers": broker.bootstrap, "linger.ms": 0, "batch.size": 600})
    an_hour_ago = int(time.time() * 1000) - 3_600_000
    for n in range(60):
        producer.produce(topic, (f"old-{n}-" + "x" * 100).encode(), partition=0, timestamp=an_hour_ago)
        producer.poll(0)
    assert producer.flush(30) == 0
    assert low_watermark(broker.bootstrap, topic) == 0  # a week's retention keeps an hour-old record
    assert described(admin, topic)["retention.ms"].value == str(WEEK_MS)

    incremental(admin, topic, ("retention.ms", SET, "60000"))
    entry = described(admin, topic)["retention.ms"]
    assert (entry.value, entry.source) == ("60000", ConfigSource.DYNAMIC_TOPIC_CONFIG.value)
    # The retention loop (every 200 ms) now sees 60 s and deletes the closed, hour-old segments.
    wait_for(lambda: low_watermark(broker.bootstrap, topic) > 0, 30, what="retention under the new retention.ms")


def test_append_subtract_and_delete_on_cleanup_policy(broker: RestartableBroker) -> None:
    admin, topic = broker.admin(), "alter-policy"
    create(admin, topic)
    incremental(admin, topic, ("cleanup.policy", APPEND, "compact"))  # onto the default "delete"
    assert overrides(admin, topic) == {"cleanup.policy": "delete,compact"}
    incremental(admin, topic, ("cleanup.policy", APPEND, "compact"))  # already there: unchanged
    assert overrides(admin, topic) == {"cleanup.policy": "delete,compact"}
    incremental(admin, topic, ("cleanup.policy", SUBTRACT, "delete"), ("retention.ms", SET, "120000"))
    assert overrides(admin, topic) == {"cleanup.policy": "compact", "retention.ms": "120000"}
    # Only list configs take APPEND and SUBTRACT.
    message = refused(lambda: incremental(admin, topic, ("retention.ms", APPEND, "5")), KafkaError.INVALID_CONFIG)
    assert "retention.ms" in message
    incremental(admin, topic, ("cleanup.policy", DELETE, None))
    entry = described(admin, topic)["cleanup.policy"]
    assert (entry.value, entry.source) == ("delete", ConfigSource.DEFAULT_CONFIG.value)
    assert overrides(admin, topic) == {"retention.ms": "120000"}


def test_alter_configs_replaces_the_whole_set(broker: RestartableBroker) -> None:
    admin, topic = broker.admin(), "alter-replace"
    create(admin, topic, **{"retention.ms": "120000", "segment.bytes": "100000"})
    resource = ConfigResource("topic", topic, set_config={"max.message.bytes": "2000"})
    admin.alter_configs([resource])[resource].result(30)  # the AlterConfigs request (api 33)
    assert overrides(admin, topic) == {"max.message.bytes": "2000"}  # the others back to defaults
    # Applied at once: a batch over 2000 bytes is refused, one under it taken.
    assert produce_one(broker.bootstrap, topic, 5000).code() == KafkaError.MSG_SIZE_TOO_LARGE
    assert produce_one(broker.bootstrap, topic, 100) is None


def test_kafka_python_alter_and_describe(broker: RestartableBroker) -> None:
    topic = "alter-kafka-python"
    create(broker.admin(), topic)
    client = KafkaAdminClient(bootstrap_servers=broker.bootstrap)
    try:
        for incremental_api in (False, True):  # AlterConfigs, then IncrementalAlterConfigs
            value = "3600000" if incremental_api else "7200000"
            result = client.alter_configs(
                [KpConfigResource(ConfigResourceType.TOPIC, topic, configs={"retention.ms": value})],
                incremental=incremental_api)
            assert result == {"topic": {topic: "OK"}}, result
            modified = client.describe_configs([KpConfigResource(ConfigResourceType.TOPIC, topic)])
            assert {k: v["value"] for k, v in modified["topic"][topic].items()} == {"retention.ms": value}
            assert modified["topic"][topic]["retention.ms"]["config_source"] == "DYNAMIC_TOPIC_CONFIG"
    finally:
        client.close()


def test_the_non_flexible_versions(broker: RestartableBroker) -> None:
    """AlterConfigs v0 and IncrementalAlterConfigs v0 (the clients here send the flexible ones)."""
    admin, topic = broker.admin(), "alter-v0"
    create(admin, topic)
    client = WireClient(broker.bootstrap)
    try:
        answer = client.request(ApiKey.ALTER_CONFIGS, 0, {"validate_only": False, "resources": [
            {"resource_type": 2, "resource_name": topic, "configs": [{"name": "retention.ms", "value": "4000000"}]},
            {"resource_type": 2, "resource_name": "alter-v0-missing", "configs": []}]})
        assert [(r["resource_name"], r["error_code"]) for r in answer["responses"]] == [
            (topic, ErrorCode.NONE), ("alter-v0-missing", ErrorCode.UNKNOWN_TOPIC_OR_PARTITION)]
        answer = client.request(ApiKey.INCREMENTAL_ALTER_CONFIGS, 0, {"validate_only": False, "resources": [
            {"resource_type": 2, "resource_name": topic,
             "configs": [{"name": "segment.ms", "config_operation": 0, "value": "600000"}]}]})
        assert answer["responses"][0]["error_code"] == ErrorCode.NONE, answer
    finally:
        client.close()
    assert overrides(admin, topic) == {"retention.ms": "4000000", "segment.ms": "600000"}


def test_validate_only_and_bad_changes_change_nothing(broker: RestartableBroker) -> None:
    admin, topic = broker.admin(), "alter-refused"
    create(admin, topic, **{"retention.ms": "120000"})
    before = overrides(admin, topic)
    incremental(admin, topic, ("retention.ms", SET, "60000"), validate_only=True)
    assert overrides(admin, topic) == before
    message = refused(lambda: incremental(admin, topic, ("no.such.config", SET, "1")), KafkaError.INVALID_CONFIG)
    assert "no.such.config" in message
    message = refused(lambda: incremental(admin, topic, ("retention.ms", SET, "soon")), KafkaError.INVALID_CONFIG)
    assert "soon" in message
    refused(lambda: incremental(admin, topic, ("segment.bytes", SET, "10")), KafkaError.INVALID_CONFIG)  # < 100
    refused(lambda: incremental(admin, topic, ("cleanup.policy", SET, "sometimes")), KafkaError.INVALID_CONFIG)
    # A bad entry refuses the resource's whole change: the good one beside it is not made.
    refused(lambda: incremental(admin, topic, ("retention.ms", SET, "1000"), ("flush.ms", SET, "-5")),
            KafkaError.INVALID_CONFIG)
    legacy = ConfigResource("topic", topic, set_config={"retention.ms": "never"})
    refused(lambda: admin.alter_configs([legacy])[legacy].result(30), KafkaError.INVALID_CONFIG)
    refused(lambda: incremental(admin, "alter-no-such-topic", ("retention.ms", SET, "1000")),
            KafkaError.UNKNOWN_TOPIC_OR_PART)
    assert overrides(admin, topic) == before


def alter_broker(admin: AdminClient, broker_id: str, *changes: tuple[str, AlterConfigOpType, str | None]) -> None:
    entries = [ConfigEntry(name, value, incremental_operation=op) for name, op, value in changes]
    resource = ConfigResource("broker", broker_id, incremental_configs=entries)
    admin.incremental_alter_configs([resource])[resource].result(30)


def described_broker(admin: AdminClient, broker_id: str) -> dict[str, ConfigEntry]:
    return next(iter(admin.describe_configs([ConfigResource("broker", broker_id)]).values())).result(30)


def alter_raw(bootstrap: str, resource_type: int, name: str, config: str, value: str | None,
              operation: int = 0) -> dict:
    """IncrementalAlterConfigs v1 straight to one broker; its one resource's answer."""
    client = WireClient(bootstrap)
    try:
        answer = client.request(ApiKey.INCREMENTAL_ALTER_CONFIGS, 1, {"validate_only": False, "resources": [
            {"resource_type": resource_type, "resource_name": name,
             "configs": [{"name": config, "config_operation": operation, "value": value}]}]})
    finally:
        client.close()
    return answer["responses"][0]


def describe_raw(bootstrap: str, resource_type: int, name: str) -> list[dict]:
    """DescribeConfigs v3 straight to one broker; its one resource's configs."""
    client = WireClient(bootstrap)
    try:
        answer = client.request(ApiKey.DESCRIBE_CONFIGS, 3, {
            "resources": [{"resource_type": resource_type, "resource_name": name, "configuration_keys": None}],
            "include_synonyms": False, "include_documentation": False})
    finally:
        client.close()
    assert answer["results"][0]["error_code"] == ErrorCode.NONE, answer
    return answer["results"][0]["configs"]


def test_dynamic_broker_configs_are_the_defaults_of_topics(broker: RestartableBroker) -> None:
    admin, topic = broker.admin(), "alter-broker-wide"
    create(admin, topic)
    alter_broker(admin, "0", ("message.max.bytes", SET, "2500"))  # this broker's own layer
    entry = described_broker(admin, "0")["message.max.bytes"]
    assert (entry.value, entry.source, entry.is_read_only) == \
        ("2500", ConfigSource.DYNAMIC_BROKER_CONFIG.value, False)
    inherited = described(admin, topic)["max.message.bytes"]
    assert (inherited.value, inherited.source) == ("2500", ConfigSource.DYNAMIC_BROKER_CONFIG.value)
    assert produce_one(broker.bootstrap, topic, 5000).code() == KafkaError.MSG_SIZE_TOO_LARGE  # live

    # The cluster-wide layer (resource name ""); this broker's own layer wins over it.
    assert alter_raw(broker.bootstrap, 4, "", "log.retention.ms", "3600000")["error_code"] == ErrorCode.NONE
    assert alter_raw(broker.bootstrap, 4, "", "message.max.bytes", "100000")["error_code"] == ErrorCode.NONE
    configs = described_broker(admin, "0")
    assert (configs["log.retention.ms"].value, configs["log.retention.ms"].source) == \
        ("3600000", ConfigSource.DYNAMIC_DEFAULT_BROKER_CONFIG.value)
    assert configs["message.max.bytes"].value == "2500"
    assert described(admin, topic)["retention.ms"].value == "3600000"
    default_layer = describe_raw(broker.bootstrap, 4, "")
    assert {c["name"]: (c["value"], c["config_source"]) for c in default_layer} == {
        "log.retention.ms": ("3600000", 3), "message.max.bytes": ("100000", 3)}  # not this broker's 2500

    # Refusals: a setting only a restart changes, a bad value, another broker's configs.
    message = refused(lambda: alter_broker(admin, "0", ("num.partitions", SET, "3")), KafkaError.INVALID_REQUEST)
    assert "dynamically" in message
    assert described_broker(admin, "0")["num.partitions"].is_read_only
    refused(lambda: alter_broker(admin, "0", ("log.retention.ms", SET, "soon")), KafkaError.INVALID_CONFIG)
    assert alter_raw(broker.bootstrap, 4, "7", "log.retention.ms", "1")["error_code"] == ErrorCode.INVALID_REQUEST

    alter_broker(admin, "0", ("message.max.bytes", DELETE, None))  # back to the cluster-wide 100000
    assert described_broker(admin, "0")["message.max.bytes"].source == ConfigSource.DYNAMIC_DEFAULT_BROKER_CONFIG.value
    assert produce_one(broker.bootstrap, topic, 5000) is None
    assert alter_raw(broker.bootstrap, 4, "", "message.max.bytes", None, operation=1)["error_code"] == ErrorCode.NONE
    assert described_broker(admin, "0")["message.max.bytes"].source == ConfigSource.DEFAULT_CONFIG.value


def test_changes_survive_a_restart(broker: RestartableBroker) -> None:
    admin, topic = broker.admin(), "alter-restart"
    create(admin, topic)
    incremental(admin, topic, ("max.message.bytes", SET, "3000"), ("retention.ms", SET, "86400000"))
    alter_broker(admin, "0", ("log.segment.bytes", SET, "500000"))
    broker.restart()
    admin = broker.admin()
    assert overrides(admin, topic) == {"max.message.bytes": "3000", "retention.ms": "86400000"}
    assert produce_one(broker.bootstrap, topic, 6000).code() == KafkaError.MSG_SIZE_TOO_LARGE
    segment = described_broker(admin, "0")["log.segment.bytes"]
    assert (segment.value, segment.source) == ("500000", ConfigSource.DYNAMIC_BROKER_CONFIG.value)
    retention = described_broker(admin, "0")["log.retention.ms"]  # set cluster-wide by the test before
    assert (retention.value, retention.source) == ("3600000", ConfigSource.DYNAMIC_DEFAULT_BROKER_CONFIG.value)


def test_without_a_keeper_changes_apply_and_are_kept(start_broker: StartBroker) -> None:
    """`roost up --no-keeper` keeps topics in its data directory's catalog: so too their configs."""
    node = start_broker("--no-keeper", name="alone")
    admin, topic = AdminClient({"bootstrap.servers": node.address("kafka")}), "alter-alone"
    create(admin, topic, **{"retention.ms": "120000"})
    incremental(admin, topic, ("max.message.bytes", SET, "3000"), ("retention.ms", DELETE, None))
    assert overrides(admin, topic) == {"max.message.bytes": "3000"}
    assert produce_one(node.address("kafka"), topic, 6000).code() == KafkaError.MSG_SIZE_TOO_LARGE
    alter_broker(admin, "0", ("log.retention.ms", SET, "3600000"))
    node.stop()
    again = start_broker("--no-keeper", name="alone")
    admin = AdminClient({"bootstrap.servers": again.address("kafka")})
    assert overrides(admin, topic) == {"max.message.bytes": "3000"}
    assert produce_one(again.address("kafka"), topic, 6000).code() == KafkaError.MSG_SIZE_TOO_LARGE
    assert described(admin, topic)["retention.ms"].value == "3600000"  # the broker's dynamic default


def test_a_change_through_one_broker_is_applied_by_the_other(tmp_path: Path) -> None:
    """Broker 1 writes the change; broker 2, the partition's leader, must apply it from the
    notification: with min.insync.replicas=2 and broker 1 gone, acks=all is refused."""
    cluster = LocalCluster.start(tmp_path, brokers=2, keepers=1)
    try:
        topic = "alter-cluster"
        admin = cluster.admin()
        admin.create_topics([NewTopic(topic, 1, replica_assignment=[[2, 1]])])[topic].result(30)
        cluster.wait_for_isr(topic)
        through_one = WireClient(cluster.brokers[1].address)
        try:
            answer = through_one.request(ApiKey.INCREMENTAL_ALTER_CONFIGS, 1, {"validate_only": False, "resources": [
                {"resource_type": 2, "resource_name": topic,
                 "configs": [{"name": "min.insync.replicas", "config_operation": 0, "value": "2"}]}]})
        finally:
            through_one.close()
        assert answer["responses"][0]["error_code"] == ErrorCode.NONE, answer
        # The cluster-wide dynamic default, also written through broker 1, reaches broker 2 too.
        assert alter_raw(cluster.brokers[1].address, 4, "", "message.max.bytes", "2500")["error_code"] == 0
        leader = WireClient(cluster.brokers[2].address)
        try:
            def produce(value: bytes, acks: int) -> int:
                body = {"transactional_id": None, "acks": acks, "timeout_ms": 3000, "topic_data": [
                    {"name": topic, "partition_data": [{"index": 0, "records": build_batch(
                        [(b"k", value)], timestamp_ms=int(time.time() * 1000))}]}]}
                response = leader.request(ApiKey.PRODUCE, 9, body)
                return response["responses"][0]["partition_responses"][0]["error_code"]

            def produce_acks_all() -> int:
                return produce(b"v", -1)

            wait_for(lambda: produce(b"x" * 5000, 1) == ErrorCode.MESSAGE_TOO_LARGE, 20,
                     what="broker 2 refusing batches over the new cluster-wide message.max.bytes")
            cluster.stop_broker(1)
            wait_for(lambda: cluster.partitions(topic)[0][2] == [2], 30, what="the ISR shrunk to broker 2")

            # Broker 2 applies the change when it sees the notification (it may not have yet):
            # asked until refused, bounded; had it never applied it, every write would be taken.
            wait_for(lambda: produce_acks_all() == ErrorCode.NOT_ENOUGH_REPLICAS, 20,
                     what="acks=all refused under min.insync.replicas=2")
        finally:
            leader.close()
    finally:
        cluster.close()


def test_replication_throttles_are_set_described_and_deleted(broker: RestartableBroker) -> None:
    """Kafka's KIP-73 throttles are real configs (roost.broker.replica.throttle; the balancer's
    executor and kafka-reassign-partitions --throttle set them, --verify deletes them): a SET is
    taken and described, a DELETE puts the default back, and a malformed list is refused."""
    admin, topic = broker.admin(), "alter-throttles"
    create(admin, topic, **{"retention.ms": "120000"})
    before = overrides(admin, topic)
    incremental(admin, topic, ("leader.replication.throttled.replicas", SET, "0:0"),
                ("follower.replication.throttled.replicas", SET, "*"))
    assert overrides(admin, topic) == {**before, "leader.replication.throttled.replicas": "0:0",
                                       "follower.replication.throttled.replicas": "*"}
    incremental(admin, topic, ("leader.replication.throttled.replicas", DELETE, None),
                ("follower.replication.throttled.replicas", DELETE, None))
    assert overrides(admin, topic) == before
    alter_broker(admin, "0", ("leader.replication.throttled.rate", SET, "1000"))
    alter_broker(admin, "0", ("leader.replication.throttled.rate", DELETE, None),
                 ("follower.replication.throttled.rate", DELETE, None),
                 ("replica.alter.log.dirs.io.max.bytes.per.second", DELETE, None))
    message = refused(lambda: incremental(admin, topic, ("leader.replication.throttled.replicas", SET, "zero")),
                      KafkaError.INVALID_CONFIG)
    assert "partition:broker" in message
    assert overrides(admin, topic) == before
