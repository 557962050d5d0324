"""ApiVersions as a whole (issue 8, item 9): what a broker advertises is exactly what it serves,
and the clients' version inference recognises the Kafka release the README names.

- Every (api, version) a real broker advertises is answered: a request with Kafka's defaults for
  every field, at every advertised version, gets a response of that version (a handler exists
  for it, and its schema encodes and decodes both ways); each range lies within the schema's.
- kafka-python with `api_version=None` infers Kafka 3.7 from the ranges, standalone and in a
  cluster; librdkafka's feature detection enables every feature a Kafka 3.7 broker gives it but
  SASL's (Roost has no SASL).
- The README's table of advertised ranges is this broker's, and the release it names for each
  API is the first whose range (by kafka-python's table of releases) reaches the advertised
  highest version.
"""

from __future__ import annotations

import logging
import re
from pathlib import Path

import pytest
from confluent_kafka import Producer
from kafka import KafkaConsumer
from kafka.protocol.broker_version_data import BROKER_API_VERSIONS

from roost.broker.broker import CLUSTER_VERSIONS
from roost.broker.dispatcher import ADVERTISED_VERSIONS
from roost.wire.kafka import API_NAMES, SUPPORTED_VERSIONS
from tests.broker.conftest import StartBroker
from tests.support.kafka_wire import WireClient
from tests.support.procs import RoostProcess

PRODUCE, API_VERSIONS, CONTROLLED_SHUTDOWN = 0, 18, 7
README = Path(__file__).resolve().parents[2] / "README.md"
INFERRED_RELEASE = (3, 7)
# What librdkafka enables against Kafka 3.7 and must enable here too (its rdkafka_feature.c);
# Sasl, SaslHandshake and SaslAuthReq need SASL, which Roost does not have.
LIBRDKAFKA_FEATURES = {"MsgVer1", "MsgVer2", "ApiVersion", "BrokerGroupCoordinator", "BrokerBalancedConsumer",
                       "ThrottleTime", "LZ4", "OffsetTime", "IdempotentProducer", "ZSTD"}


def advertised(bootstrap: str) -> dict[int, tuple[int, int]]:
    raw = WireClient(bootstrap)
    try:
        answer = raw.request(API_VERSIONS, 3, {"client_software_name": "audit", "client_software_version": "1"})
    finally:
        raw.close()
    assert answer["error_code"] == 0
    return {entry["api_key"]: (entry["min_version"], entry["max_version"]) for entry in answer["api_keys"]}


@pytest.fixture(scope="module")
def clustered(tmp_path_factory: pytest.TempPathFactory) -> RoostProcess:
    from tests.support.procs import start_roost

    directory = tmp_path_factory.mktemp("audit-broker")
    proc = start_roost(["up", "--data-dir", str(directory), "--kafka-port", "0"], expect=("kafka", "keeper"))
    yield proc
    proc.stop()


def test_a_cluster_member_advertises_the_client_and_cluster_apis_within_their_schemas(clustered: RoostProcess) -> None:
    ranges = advertised(clustered.address("kafka"))
    assert ranges == {int(k): v for k, v in {**ADVERTISED_VERSIONS, **CLUSTER_VERSIONS}.items()}
    for key, (low, high) in ranges.items():
        codec_low, codec_high = SUPPORTED_VERSIONS[key]
        assert codec_low <= low <= high <= codec_high, (API_NAMES[key], (low, high), (codec_low, codec_high))


def test_every_advertised_version_is_answered(clustered: RoostProcess) -> None:
    bootstrap = clustered.address("kafka")
    ranges = advertised(bootstrap)
    unanswered = []
    for key, (low, high) in sorted(ranges.items()):
        for version in range(low, high + 1):
            # ControlledShutdown v0's request header has no client id (Kafka's exception).
            raw = WireClient(bootstrap, timeout=30,
                             client_id=None if (key, version) == (CONTROLLED_SHUTDOWN, 0) else "audit")
            try:
                # Kafka's defaults for every field: an empty or harmless request of each kind
                # (Produce with acks=1: acks=0, the default, is never answered).
                answer = raw.request(key, version, {"acks": 1} if key == PRODUCE else {})
            except Exception as error:
                unanswered.append(f"{API_NAMES[key]} v{version}: {type(error).__name__}: {error}")
            else:
                assert isinstance(answer, dict)
            finally:
                raw.close()
    assert unanswered == []


def test_a_broker_without_a_keeper_advertises_only_the_client_apis(start_broker: StartBroker) -> None:
    proc = start_broker("--no-keeper")
    assert advertised(proc.address("kafka")) == {int(k): v for k, v in ADVERTISED_VERSIONS.items()}


@pytest.mark.parametrize("mode", ["cluster", "standalone"])
def test_kafka_python_infers_the_release(mode: str, clustered: RoostProcess, start_broker: StartBroker) -> None:
    proc = clustered if mode == "cluster" else start_broker("--no-keeper")
    consumer = KafkaConsumer(bootstrap_servers=proc.address("kafka"), api_version=None)
    try:
        assert consumer.config["api_version"] == INFERRED_RELEASE
    finally:
        consumer.close()


def test_librdkafka_enables_the_features_of_a_kafka_broker(clustered: RoostProcess) -> None:
    lines: list[str] = []

    class Collect(logging.Handler):
        def emit(self, record: logging.LogRecord) -> None:
            lines.append(record.getMessage())

    logger = logging.getLogger("audit.librdkafka")
    logger.addHandler(Collect())
    logger.setLevel(logging.DEBUG)
    producer = Producer({"bootstrap.servers": clustered.address("kafka"), "debug": "feature", "logger": logger})
    producer.list_topics(timeout=30)
    producer.poll(0.5)
    del producer
    enabled = {m[1] for line in lines if (m := re.search(r"Enabling feature (\w+)", line))}
    disabled = {m[1] for line in lines if (m := re.search(r"Disabling feature (\w+)", line))}
    assert enabled >= LIBRDKAFKA_FEATURES, LIBRDKAFKA_FEATURES - enabled
    # Disabled: SASL's, and the KIP-848 entry of BrokerBalancedConsumer (its classic entry is enabled).
    assert disabled <= {"Sasl", "SaslHandshake", "SaslAuthReq", "BrokerBalancedConsumer"}, disabled


def readme_table() -> dict[str, tuple[int, tuple[int, int], str]]:
    """{api name: (key, (min, max), release)} from the README's table of advertised ranges, and
    the security page's table of the SASL and SCRAM APIs (same columns)."""
    rows = table_rows(README.read_text())
    rows.update(table_rows((README.parent / "docs" / "security.md").read_text()))
    return rows


def table_rows(text: str) -> dict[str, tuple[int, tuple[int, int], str]]:
    start = text.index("| API | key | advertised | Kafka release |")
    rows = {}
    for line in text[start:].splitlines()[2:]:
        if not line.startswith("|"):
            break
        name, key, versions, release = (cell.strip() for cell in line.strip("|").split("|"))
        low, _, high = versions.partition("-")
        rows[name.strip("`")] = (int(key), (int(low), int(high or low)), release)
    return rows


def first_release_reaching(key: int, version: int) -> str:
    for release in sorted(BROKER_API_VERSIONS):
        found = BROKER_API_VERSIONS[release].get(key)
        if found is not None and found[1] >= version:
            return ".".join(map(str, release))
    return "none"


def test_the_readme_table_is_what_the_broker_advertises() -> None:
    rows = readme_table()
    every = {int(k): v for k, v in {**ADVERTISED_VERSIONS, **CLUSTER_VERSIONS}.items()}
    assert {key for key, _, _ in rows.values()} == set(every)
    for name, (key, versions, release) in rows.items():
        assert API_NAMES[key] == name
        assert versions == every[key], name
        assert release == first_release_reaching(key, versions[1]), (name, release)
