"""The schema pages' and the message browser's pure part (roost.console.schema_view): Confluent's
wire format read, values decoded by Avro, JSON Schema and Protobuf schemas (and bytes that only
look like the format shown with a note, never an error), schema text shown pretty, the diff of
two versions."""

from __future__ import annotations

import base64
import io
import json
import struct

import fastavro
from google.protobuf import descriptor_pb2, descriptor_pool, message_factory

from roost.console.schema_view import (
    RegisteredSchema,
    decode_value,
    pretty_schema,
    protobuf_indexes,
    version_diff,
    wire_schema_id,
)

ORDER = {"type": "record", "name": "Order", "fields": [{"name": "id", "type": "int"},
                                                       {"name": "customer", "type": "string"},
                                                       {"name": "blob", "type": "bytes"}]}


def framed(schema_id: int, payload: bytes) -> bytes:
    return b"\x00" + struct.pack(">i", schema_id) + payload


def test_the_wire_format_is_the_magic_byte_and_a_positive_id():
    assert wire_schema_id(framed(42, b"x")) == 42
    assert wire_schema_id(framed(42, b"")) == 42
    assert wire_schema_id(b"\x00\x00\x00") is None  # too short
    assert wire_schema_id(b'{"json": 1}') is None
    assert wire_schema_id(framed(0, b"x")) is None and wire_schema_id(framed(-5, b"x")) is None
    assert wire_schema_id(None) is None


def test_an_avro_value_is_decoded_and_bytes_shown_as_base64():
    out = io.BytesIO()
    fastavro.schemaless_writer(out, fastavro.parse_schema(ORDER), {"id": 7, "customer": "<b>c</b>", "blob": b"\xff"})
    decoded = decode_value(RegisteredSchema(3, "AVRO", json.dumps(ORDER)), framed(3, out.getvalue()))
    assert json.loads(decoded["json"]) == {"id": 7, "customer": "<b>c</b>", "blob": "/w=="}
    assert decoded["schema_id"] == 3 and decoded["schema_type"] == "AVRO"


def test_bytes_that_are_not_the_schemas_record_are_a_note_not_an_error():
    schema = RegisteredSchema(3, "AVRO", json.dumps(ORDER))
    for junk in (b"", b"\x0e", b"\x0e\x02ab\x00extra", b"\xff" * 40):
        decoded = decode_value(schema, framed(3, junk))
        assert "json" not in decoded and decoded["error"].startswith("not decoded by schema 3"), junk
    assert "error" in decode_value(RegisteredSchema(4, "AVRO", "{not json"), framed(4, b"\x02"))
    assert "error" in decode_value(RegisteredSchema(5, "XML", "<x/>"), framed(5, b"<x/>"))


def test_a_json_schema_value_is_its_json():
    decoded = decode_value(RegisteredSchema(9, "JSON", '{"type": "object"}'), framed(9, b'{"a": "<script>"}'))
    assert json.loads(decoded["json"]) == {"a": "<script>"}


def order_proto() -> descriptor_pb2.FileDescriptorProto:
    proto = descriptor_pb2.FileDescriptorProto(name="console_test_order.proto", package="consoletest", syntax="proto3")
    first = proto.message_type.add(name="Ping")
    first.field.add(name="n", number=1, type=descriptor_pb2.FieldDescriptorProto.TYPE_INT32,
                    label=descriptor_pb2.FieldDescriptorProto.LABEL_OPTIONAL)
    order = proto.message_type.add(name="Order")
    order.field.add(name="id", number=1, type=descriptor_pb2.FieldDescriptorProto.TYPE_INT32,
                    label=descriptor_pb2.FieldDescriptorProto.LABEL_OPTIONAL)
    order.field.add(name="customer", number=2, type=descriptor_pb2.FieldDescriptorProto.TYPE_STRING,
                    label=descriptor_pb2.FieldDescriptorProto.LABEL_OPTIONAL)
    return proto


def test_a_protobuf_value_is_decoded_by_its_message_indexes():
    proto = order_proto()
    pool = descriptor_pool.DescriptorPool()
    pool.Add(proto)
    order_class = message_factory.GetMessageClass(pool.FindMessageTypeByName("consoletest.Order"))
    body = order_class(id=5, customer="ann").SerializeToString()
    text = base64.b64encode(proto.SerializeToString()).decode()
    # indexes [1] (the second message): a zigzag count 1 (0x02), then index 1 (0x02)
    decoded = decode_value(RegisteredSchema(11, "PROTOBUF", text), framed(11, b"\x02\x02" + body))
    assert json.loads(decoded["json"]) == {"type": "consoletest.Order", "message": {"id": 5, "customer": "ann"}}
    assert protobuf_indexes(b"\x00rest") == ([0], 1)
    assert "error" in decode_value(RegisteredSchema(11, "PROTOBUF", text), framed(11, b"\x02\x10" + body))
    assert "message_type" in pretty_schema("PROTOBUF", text) and "Order" in pretty_schema("PROTOBUF", text)


def test_schema_text_is_shown_pretty_and_versions_diffed_line_by_line():
    v1 = pretty_schema("AVRO", json.dumps(ORDER))
    assert v1.startswith("{\n  \"type\": \"record\"")
    assert pretty_schema("AVRO", "{cut") == "{cut"
    v2 = pretty_schema("AVRO", json.dumps({**ORDER, "fields": [*ORDER["fields"], {"name": "note", "type": "string"}]}))
    diff = version_diff(v1, v2, "s v1", "s v2")
    assert not diff["same"] and not diff["truncated"]
    assert [line["text"] for line in diff["lines"] if line["kind"] == "="] == ["--- s v1", "+++ s v2"]
    assert any(line["kind"] == "+" and '"note"' in line["text"] for line in diff["lines"])
    assert not any(line["kind"] == "-" for line in diff["lines"])
    assert version_diff(v1, v1, "a", "b") == {"lines": [], "truncated": False, "same": True}
