"""The REST proxy of a real `roost up` node, driven by curl as a shell script would: v3 produce
(JSON, binary, Avro through the registry), v2 consumers (create, subscribe, read, commit, delete),
and what confluent-kafka's own deserializer makes of the schema-encoded records; then a brief
schemathesis fuzz of the proxy's operations (no 5xx)."""

from __future__ import annotations

import base64
import json
import os
import shutil
import subprocess
import time
import warnings
from typing import Any

import pytest

warnings.filterwarnings("ignore", category=DeprecationWarning)
from confluent_kafka import Consumer  # noqa: E402
from confluent_kafka.admin import AdminClient, NewTopic  # noqa: E402

from tests.support.procs import RoostProcess  # noqa: E402

pytestmark = [pytest.mark.timeout(300), pytest.mark.skipif(shutil.which("curl") is None, reason="needs curl")]
V2 = "application/vnd.kafka.v2+json"


def curl(url: str, method: str = "GET", body: Any = None, content_type: str = "application/json",
         accept: str | None = None, raw: str | None = None) -> tuple[int, Any]:
    command = ["curl", "-sS", "-X", method, "-o", "-", "-w", "\n%{http_code}", "--max-time", "60", url]
    if body is not None or raw is not None:
        command += ["-H", f"Content-Type: {content_type}", "--data-binary", raw if raw is not None else json.dumps(body)]
    if accept:
        command += ["-H", f"Accept: {accept}"]
    done = subprocess.run(command, capture_output=True, text=True, timeout=90, check=True)
    text, _, status = done.stdout.rpartition("\n")
    try:
        return int(status), json.loads(text)
    except ValueError:
        return int(status), text  # empty, or a stream of JSON objects


def url_of(node: RoostProcess) -> str:
    return "http://" + node.address("schema registry")


def test_v3_clusters_topics_and_partitions(node: RoostProcess) -> None:
    status, clusters = curl(url_of(node) + "/v3/clusters")
    assert status == 200 and clusters["kind"] == "KafkaClusterList"
    cluster = clusters["data"][0]["cluster_id"]
    status, topics = curl(f"{url_of(node)}/v3/clusters/{cluster}/topics")
    assert "events" in [t["topic_name"] for t in topics["data"]]
    status, partitions = curl(f"{url_of(node)}/v3/clusters/{cluster}/topics/events/partitions")
    assert [p["partition_id"] for p in partitions["data"]] == [0]
    assert curl(f"{url_of(node)}/v3/clusters/{cluster}/topics/nowhere")[0] == 404
    status, created = curl(f"{url_of(node)}/v3/clusters/{cluster}/topics", "POST",
                           {"topic_name": "made-by-curl", "partitions_count": 2, "replication_factor": 1})
    assert status == 201 and created["partitions_count"] == 2


def test_v2_brokers_topic_partitions_and_offsets(node: RoostProcess) -> None:
    base = url_of(node)
    status, brokers = curl(base + "/brokers")
    assert status == 200 and len(brokers["brokers"]) == 1 and isinstance(brokers["brokers"][0], int)
    cluster = curl(base + "/v3/clusters")[1]["data"][0]["cluster_id"]
    status, _ = curl(f"{base}/v3/clusters/{cluster}/topics", "POST",
                     {"topic_name": "v2-offsets", "partitions_count": 1, "replication_factor": 1,
                      "configs": [{"name": "retention.ms", "value": "3600000"}]})
    assert status == 201
    status, topic = curl(base + "/topics/v2-offsets")
    assert status == 200 and topic["name"] == "v2-offsets" and topic["configs"]["retention.ms"] == "3600000"
    leader = brokers["brokers"][0]
    assert topic["partitions"] == [{"partition": 0, "leader": leader,
                                    "replicas": [{"broker": leader, "leader": True, "in_sync": True}]}]
    assert curl(base + "/topics/v2-offsets/partitions") == (200, topic["partitions"])
    assert curl(base + "/topics/v2-offsets/partitions/0") == (200, topic["partitions"][0])
    assert curl(base + "/topics/v2-offsets/partitions/0/offsets") == (200, {"beginning_offset": 0, "end_offset": 0})
    status, produced = curl(base + "/topics/v2-offsets", "POST", {"records": [{"value": {"n": n}} for n in range(3)]},
                            "application/vnd.kafka.json.v2+json")
    assert status == 200 and [o["offset"] for o in produced["offsets"]] == [0, 1, 2], produced
    assert curl(base + "/topics/v2-offsets/partitions/0/offsets") == (200, {"beginning_offset": 0, "end_offset": 3})
    assert curl(base + "/topics/nowhere")[1]["error_code"] == 40401
    assert curl(base + "/topics/v2-offsets/partitions/7")[1]["error_code"] == 40402
    assert curl(base + "/topics/v2-offsets/partitions/x/offsets")[1]["error_code"] == 40402


def test_curl_produces_and_a_v2_consumer_reads_commits_and_leaves(node: RoostProcess) -> None:
    base = url_of(node)
    cluster = curl(base + "/v3/clusters")[1]["data"][0]["cluster_id"]
    records = f"{base}/v3/clusters/{cluster}/topics/events/records"
    status, first = curl(records, "POST", {"key": {"type": "STRING", "data": "k1"},
                                           "value": {"type": "JSON", "data": {"n": 1}}})
    assert status == 200 and first["error_code"] == 200 and first["offset"] == 0
    stream = "\n".join(json.dumps({"value": {"type": "JSON", "data": {"n": n}}}) for n in (2, 3))
    status, text = curl(records, "POST", raw=stream)  # a stream of records, one answer each
    assert status == 200 and [json.loads(line)["offset"] for line in text.splitlines()] == [1, 2]
    status, created = curl(f"{base}/consumers/curl-group", "POST",
                           {"name": "c1", "format": "json", "auto.offset.reset": "earliest"}, V2)
    assert status == 200 and created["base_uri"].endswith("/consumers/curl-group/instances/c1")
    instance = f"{base}/consumers/curl-group/instances/c1"
    assert curl(instance + "/subscription", "POST", {"topics": ["events"]}, V2)[0] == 204
    got: list[Any] = []
    deadline = time.monotonic() + 60
    while len(got) < 3 and time.monotonic() < deadline:
        status, batch = curl(instance + "/records?timeout=1000", accept="application/vnd.kafka.json.v2+json")
        assert status == 200
        got += batch
    assert [r["value"] for r in got[:3]] == [{"n": 1}, {"n": 2}, {"n": 3}]
    assert got[0]["key"] == "k1" or got[0]["key"] is not None
    assert curl(instance + "/offsets", "POST", {"offsets": [{"topic": "events", "partition": 0, "offset": 2}]},
                V2)[0] == 204
    status, committed = curl(instance + "/offsets", "GET")
    assert status == 200 and committed["offsets"][0]["offset"] == 2
    assert curl(instance + "/records", accept="application/vnd.kafka.binary.v2+json")[1]["error_code"] == 40601
    assert curl(instance, "DELETE")[0] == 204
    assert curl(instance + "/records")[1]["error_code"] == 40403


def test_binary_and_avro_records_through_the_registry(node: RoostProcess) -> None:
    from confluent_kafka.schema_registry import SchemaRegistryClient
    from confluent_kafka.schema_registry.avro import AvroDeserializer
    from confluent_kafka.serialization import MessageField, SerializationContext

    base = url_of(node)
    cluster = curl(base + "/v3/clusters")[1]["data"][0]["cluster_id"]
    schema = {"type": "record", "name": "Click", "fields": [{"name": "page", "type": "string"}]}
    schema_id = SchemaRegistryClient({"url": base}).register_schema(
        "avro-clicks-value", __import__("confluent_kafka.schema_registry", fromlist=["Schema"]).Schema(
            json.dumps(schema), "AVRO"))
    admin = AdminClient({"bootstrap.servers": node.address("kafka")})
    admin.create_topics([NewTopic("avro-clicks", 1, 1)])["avro-clicks"].result(30)
    records = f"{base}/v3/clusters/{cluster}/topics/avro-clicks/records"
    status, answer = curl(records, "POST", {"value": {"type": "AVRO", "schema_id": schema_id, "data": {"page": "/a"}}})
    assert status == 200 and answer["value"]["type"] == "AVRO"
    status, answer = curl(records, "POST", {"value": {"type": "AVRO", "data": {"page": "/b"}}})  # latest of the subject
    assert status == 200
    status, _ = curl(records, "POST", {"value": {"type": "AVRO", "schema_id": schema_id, "data": {"page": 5}}})
    assert status == 422
    status, _ = curl(records, "POST", {"value": {"type": "BINARY", "data": base64.b64encode(b"\x00raw").decode()}})
    assert status == 200
    consumer = Consumer({"bootstrap.servers": node.address("kafka"), "group.id": "avro-check",
                         "auto.offset.reset": "earliest"})
    consumer.subscribe(["avro-clicks"])
    deserialize = AvroDeserializer(SchemaRegistryClient({"url": base}))
    values: list[bytes] = []
    deadline = time.monotonic() + 60
    while len(values) < 3 and time.monotonic() < deadline:
        message = consumer.poll(0.5)
        if message is not None and not message.error():
            values.append(message.value())
    consumer.close()
    context = SerializationContext("avro-clicks", MessageField.VALUE)
    assert [deserialize(v, context) for v in values[:2]] == [{"page": "/a"}, {"page": "/b"}]
    assert values[2] == b"\x00raw"


PROXY_EXAMPLES = int(os.environ.get("ROOST_REGISTRY_FUZZ_EXAMPLES", "2"))


def test_a_brief_fuzz_of_the_proxy_operations_finds_no_5xx(node: RoostProcess) -> None:
    schemathesis = pytest.importorskip("schemathesis")
    from hypothesis import HealthCheck, given, settings

    from roost.registry.openapi import PROXY_OPERATIONS, document

    spec = document(with_proxy=True)
    spec["paths"] = {p: v for p, v in spec["paths"].items() if p in PROXY_OPERATIONS}
    schema = schemathesis.openapi.from_dict(spec)
    base = url_of(node)
    failures: list[str] = []
    for result in schema.get_all_operations():
        operation = result.ok()

        @given(case=operation.as_strategy())
        @settings(max_examples=PROXY_EXAMPLES, deadline=None, suppress_health_check=list(HealthCheck))
        def probe(case: Any) -> None:
            response = case.call(base_url=base, timeout=60)
            if response.status_code >= 500:
                failures.append(f"{case.method} {case.formatted_path}: {response.status_code} {response.text[:200]}")

        probe()
    assert not failures, failures[:5]
    assert curl(base + "/v3/clusters")[0] == 200  # still serving
