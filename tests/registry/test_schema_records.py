"""`roost produce --value-schema/--key-schema` and `roost consume --value-schema/--key-schema`
(real CLI processes) against a `roost up` node's registry, checked against confluent-kafka's own
Avro, JSON Schema and Protobuf serializers and deserializers in both directions: what the CLI
writes Confluent's clients read, and what they write the CLI prints."""

from __future__ import annotations

import json
import subprocess
import uuid
import warnings
from pathlib import Path
from typing import Any

import pytest

warnings.filterwarnings("ignore", category=DeprecationWarning)
pytest.importorskip("confluent_kafka.schema_registry.avro")
from confluent_kafka import OFFSET_BEGINNING, Consumer, Producer, TopicPartition  # noqa: E402
from confluent_kafka.admin import AdminClient, NewTopic  # noqa: E402
from confluent_kafka.schema_registry import SchemaRegistryClient  # noqa: E402
from confluent_kafka.schema_registry.avro import AvroDeserializer, AvroSerializer  # noqa: E402
from confluent_kafka.schema_registry.json_schema import JSONDeserializer, JSONSerializer  # noqa: E402
from confluent_kafka.schema_registry.protobuf import ProtobufDeserializer, ProtobufSerializer  # noqa: E402
from confluent_kafka.serialization import MessageField, SerializationContext  # noqa: E402

from tests.cli.kafka_cli import run_in_process  # noqa: E402
from tests.registry.cluster_support import protobuf_classes  # noqa: E402
from tests.support.procs import ROOST, RoostProcess  # noqa: E402

pytestmark = pytest.mark.timeout(240)

PAGE_VIEW = {"type": "record", "name": "PageView", "namespace": "roost.cli",
             "fields": [{"name": "page", "type": "string"}, {"name": "ms", "type": "long"},
                        {"name": "referrer", "type": ["null", "string"], "default": None}]}
ACCOUNT_KEY = {"$schema": "http://json-schema.org/draft-07/schema#", "title": "AccountKey", "type": "object",
               "properties": {"account": {"type": "integer", "minimum": 1}}, "required": ["account"],
               "additionalProperties": False}
PAYMENT = {"$schema": "http://json-schema.org/draft-07/schema#", "title": "Payment", "type": "object",
           "properties": {"cents": {"type": "integer"}, "note": {"type": "string"}}, "required": ["cents"]}


EPOCH_2026_12_02_10H = int(__import__("datetime").datetime(2026, 12, 2, 10, tzinfo=__import__("datetime").UTC)
                           .timestamp())


def registry_url(node: RoostProcess) -> str:
    return "http://" + node.address("schema registry")


def new_topic(node: RoostProcess, prefix: str) -> str:
    name = f"{prefix}-{uuid.uuid4().hex[:8]}"
    admin = AdminClient({"bootstrap.servers": node.address("kafka")})  # kept alive until its answer is in
    admin.create_topics([NewTopic(name, 1, 1)])[name].result(30)
    return name


def cli(node: RoostProcess, *args: str, stdin: str = "") -> subprocess.CompletedProcess[str]:
    """`roost ARGS -b KAFKA --registry URL` to completion, `stdin` its input."""
    return subprocess.run([*ROOST, *args, "-b", node.address("kafka"), "--registry", registry_url(node)],
                          input=stdin, capture_output=True, text=True, timeout=90)


def read_all(node: RoostProcess, topic: str, count: int) -> list[Any]:
    """The first `count` messages of partition 0 (assigned, no group), within 60 s."""
    consumer = Consumer({"bootstrap.servers": node.address("kafka"), "group.id": "unused", "enable.auto.commit": False})
    consumer.assign([TopicPartition(topic, 0, OFFSET_BEGINNING)])
    messages: list[Any] = []
    try:
        for _ in range(300):
            if len(messages) >= count:
                break
            message = consumer.poll(0.2)
            if message is not None and not message.error():
                messages.append(message)
    finally:
        consumer.close()
    assert len(messages) == count, f"{len(messages)} of {count} records read back"
    return messages


def produce_framed(node: RoostProcess, topic: str, serialize: Any, values: list[Any], key: Any = None) -> None:
    producer = Producer({"bootstrap.servers": node.address("kafka")})
    for value in values:
        producer.produce(topic, key=key, value=serialize(value, SerializationContext(topic, MessageField.VALUE)))
    assert producer.flush(30) == 0


def consumed_json(node: RoostProcess, topic: str, *flags: str, fmt: str = "%v\\n") -> list[Any]:
    done = cli(node, "consume", topic, "-o", ":end", "-f", fmt, *flags)
    assert done.returncode == 0, done.stderr
    return [json.loads(line) for line in done.stdout.splitlines() if line]


def test_avro_values_the_cli_writes_confluents_deserializer_reads_and_back(node: RoostProcess, tmp_path: Path) -> None:
    topic = new_topic(node, "cli-avro")
    schema = tmp_path / "page_view.avsc"
    schema.write_text(json.dumps(PAGE_VIEW))
    values = [{"page": "/a", "ms": 1, "referrer": None}, {"page": "/b", "ms": 2, "referrer": "/a"}]
    # the last line does not fit the schema: the run fails there, with one line, the others delivered
    done = cli(node, "produce", topic, "--value-schema", str(schema),
               stdin="".join(json.dumps(v) + "\n" for v in values) + '{"page": 5}\n')
    assert done.returncode == 1 and "does not fit page_view.avsc" in done.stderr, done.stderr
    assert "Traceback" not in done.stderr and "2 records before it delivered" in done.stderr, done.stderr
    sr = SchemaRegistryClient({"url": registry_url(node)})
    registered = sr.get_latest_version(f"{topic}-value")  # TopicNameStrategy, as Confluent's serializers name it
    assert json.loads(registered.schema.schema_str)["name"] == "PageView"
    deserialize = AvroDeserializer(sr)
    messages = read_all(node, topic, 2)
    assert [deserialize(m.value(), SerializationContext(topic, MessageField.VALUE)) for m in messages] == values
    assert all(m.value()[0] == 0 and int.from_bytes(m.value()[1:5], "big") == registered.schema_id for m in messages)
    # Confluent's serializer writes a third record; the CLI prints all three as JSON
    produce_framed(node, topic, AvroSerializer(sr, json.dumps(PAGE_VIEW)), [{"page": "/c", "ms": 3, "referrer": None}])
    assert consumed_json(node, topic, "--value-schema") == [*values, {"page": "/c", "ms": 3, "referrer": None}]


def test_json_schema_keys_and_values_both_ways(node: RoostProcess, tmp_path: Path) -> None:
    topic = new_topic(node, "cli-json")
    key_schema, value_schema = tmp_path / "key.json", tmp_path / "payment.json"
    key_schema.write_text(json.dumps(ACCOUNT_KEY))
    value_schema.write_text(json.dumps(PAYMENT))
    # the key schema is enforced: the last key, account 0, breaks its minimum
    done = cli(node, "produce", topic, "-f", "%k\\t%v\\n", "--key-schema", str(key_schema), "--value-schema",
               str(value_schema), stdin='{"account": 7}\t{"cents": 250, "note": "tea"}\n{"account": 8}\t{"cents": 1}\n'
                                        '{"account": 0}\t{"cents": 1}\n')
    assert done.returncode == 1 and "the key does not fit key.json" in done.stderr, done.stderr
    sr = SchemaRegistryClient({"url": registry_url(node)})
    assert sr.get_latest_version(f"{topic}-key").schema.schema_type == "JSON"
    keys = JSONDeserializer(None, schema_registry_client=sr)
    values = JSONDeserializer(None, schema_registry_client=sr)
    messages = read_all(node, topic, 2)
    assert [keys(m.key(), SerializationContext(topic, MessageField.KEY)) for m in messages] == \
        [{"account": 7}, {"account": 8}]
    assert [values(m.value(), SerializationContext(topic, MessageField.VALUE)) for m in messages] == \
        [{"cents": 250, "note": "tea"}, {"cents": 1}]
    produce_framed(node, topic, JSONSerializer(json.dumps(PAYMENT), sr), [{"cents": 3}])
    plain = Producer({"bootstrap.servers": node.address("kafka")})
    plain.produce(topic, value=b'"plain"')  # not in the wire format: printed as it is, with a warning
    assert plain.flush(30) == 0
    done = cli(node, "consume", topic, "-o", ":end", "--value-schema", "--key-schema", "-Z", "null", "-f", "[%k,%v]\\n")
    assert done.returncode == 0, done.stderr
    assert [json.loads(line) for line in done.stdout.splitlines()] == [
        [{"account": 7}, {"cents": 250, "note": "tea"}], [{"account": 8}, {"cents": 1}], [None, {"cents": 3}],
        [None, "plain"]]
    assert "not in the Confluent wire format" in done.stderr


def _shop_files() -> list[Any]:
    from google.protobuf import descriptor_pb2

    money = descriptor_pb2.FileDescriptorProto(name="roost_cli/money.proto", package="roost.cli", syntax="proto3")
    message = money.message_type.add(name="Money")
    message.field.add(name="units", number=1, type=3, label=1)  # int64
    message.field.add(name="currency", number=2, type=9, label=1)  # string
    order = descriptor_pb2.FileDescriptorProto(name="roost_cli/order.proto", package="roost.cli", syntax="proto3",
                                               dependency=["roost_cli/money.proto", "google/protobuf/timestamp.proto"])
    message = order.message_type.add(name="Order")
    message.field.add(name="id", number=1, type=9, label=1)
    message.field.add(name="total", number=2, type=11, label=1, type_name=".roost.cli.Money")
    message.field.add(name="at", number=3, type=11, label=1, type_name=".google.protobuf.Timestamp")
    line = message.nested_type.add(name="Line")
    line.field.add(name="sku", number=1, type=9, label=1)
    return [money, order]


def test_protobuf_values_from_a_descriptor_set_both_ways(node: RoostProcess, tmp_path: Path,
                                                         capsys: pytest.CaptureFixture[str]) -> None:
    from google.protobuf import descriptor_pb2, timestamp_pb2

    topic = new_topic(node, "cli-proto")
    files = _shop_files()
    descriptor_set = descriptor_pb2.FileDescriptorSet(file=files)  # as protoc --include_imports -o writes it,
    path = tmp_path / "order.desc"                                   # less the well-known timestamp.proto
    path.write_bytes(descriptor_set.SerializeToString())
    values = [{"id": "o1", "total": {"units": "5", "currency": "EUR"}, "at": "2026-12-02T10:00:00Z"}, {"id": "o2"}]
    done = cli(node, "produce", topic, "--value-schema", str(path), stdin="".join(json.dumps(v) + "\n" for v in values))
    assert done.returncode == 0, done.stderr
    sr = SchemaRegistryClient({"url": registry_url(node)})
    latest = sr.get_latest_version(f"{topic}-value")
    assert latest.schema.schema_type == "PROTOBUF"
    assert [r.name for r in latest.schema.references] == ["roost_cli/money.proto"]  # the import, registered apart
    assert timestamp_pb2.Timestamp
    classes = protobuf_classes(files)
    Order, Money = classes["Order"], classes["Money"]
    deserialize = ProtobufDeserializer(Order, {"use.deprecated.format": False})
    got = [deserialize(m.value(), SerializationContext(topic, MessageField.VALUE)) for m in read_all(node, topic, 2)]
    assert got[0].id == "o1" and got[0].total == Money(units=5, currency="EUR") and got[0].at.seconds == EPOCH_2026_12_02_10H
    assert got[1] == Order(id="o2")
    # a nested message written by Confluent's serializer: the CLI follows its message indexes ([0, 0])
    produce_framed(node, topic, ProtobufSerializer(Order.Line, sr, {"use.deprecated.format": False}),
                   [Order.Line(sku="s-1")])
    printed = consumed_json(node, topic, "--value-schema")
    assert printed == [{"id": "o1", "total": {"units": "5", "currency": "EUR"}, "at": "2026-12-02T10:00:00Z"},
                       {"id": "o2"}, {"sku": "s-1"}]
    bad = run_in_process(capsys, "produce", topic, "-b", node.address("kafka"), "--value-schema", str(path),
                         "--value-message", "roost.cli.Order.Nope")
    assert bad.returncode != 0 and "no message 'roost.cli.Order.Nope'" in bad.stderr, bad.stderr
