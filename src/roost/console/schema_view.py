"""The schema registry's pages and the message browser's schema ids, the pure part: Confluent's
wire format read (magic byte 0, then the schema id as a big-endian int32, then the payload;
Protobuf puts its message indexes first), a value decoded by its schema (Avro with fastavro,
JSON Schema as the JSON it is, Protobuf with the protobuf runtime over the registry's own
parsing of the schema), schema text shown pretty, and the line diff of two versions (difflib).

Every input here is attacker-controlled (message bytes, schema text, subject names): decoding is
bounded by what the caller read (the browser's display bound), failures become a note rather
than an error, and nothing here makes markup (the page puts text in with textContent)."""

from __future__ import annotations

import base64
import difflib
import io
import json
from dataclasses import dataclass
from typing import Any

MAGIC = 0
HEADER_BYTES = 5  # the magic byte and the schema id
MAX_DIFF_LINES = 2000  # of one version diff shown; the rest is said to be cut
MAX_MESSAGE_INDEXES = 64  # a Protobuf value's path to its message type, at most this deep


@dataclass(frozen=True)
class RegisteredSchema:
    schema_id: int
    schema_type: str  # AVRO, JSON or PROTOBUF
    text: str


def wire_schema_id(data: bytes | None) -> int | None:
    """The schema id of a value in Confluent's wire format, or None when it is not in it."""
    if data is None or len(data) < HEADER_BYTES or data[0] != MAGIC:
        return None
    schema_id = int.from_bytes(data[1:HEADER_BYTES], "big", signed=True)
    return schema_id if schema_id > 0 else None


def pretty_schema(schema_type: str, text: str) -> str:
    """Avro and JSON Schema as indented JSON; Protobuf (which Roost's registry keeps as a base64
    FileDescriptorProto) as the descriptor's text format; anything that does not parse as given."""
    if schema_type in ("AVRO", "JSON"):
        try:
            return json.dumps(json.loads(text), indent=2, ensure_ascii=False)
        except ValueError:
            return text
    if schema_type == "PROTOBUF":
        from google.protobuf import descriptor_pb2, text_format

        try:
            proto = descriptor_pb2.FileDescriptorProto()
            proto.ParseFromString(base64.b64decode(text.strip(), validate=True))
            return text_format.MessageToString(proto)
        except Exception:  # .proto text (another registry), or not a descriptor: shown as it is
            return text
    return text


def version_diff(old: str, new: str, old_label: str, new_label: str) -> dict[str, Any]:
    """A unified diff of two schema texts, line by line: each line's kind (`+`, `-`, ` `, `@`
    for a hunk header, `=` for the file names) and text, cut at MAX_DIFF_LINES."""
    lines = []
    for line in difflib.unified_diff(old.splitlines(), new.splitlines(), old_label, new_label, lineterm="", n=3):
        kind = "=" if line.startswith(("---", "+++")) else line[:1] or " "
        lines.append({"kind": kind, "text": line})
    return {"lines": lines[:MAX_DIFF_LINES], "truncated": len(lines) > MAX_DIFF_LINES, "same": not lines}


def _varint(data: bytes, at: int) -> tuple[int, int]:
    shift = value = 0
    while True:
        if at >= len(data) or shift > 63:
            raise ValueError("a cut varint")
        byte = data[at]
        value |= (byte & 0x7F) << shift
        at += 1
        if not byte & 0x80:
            return value, at
        shift += 7


def _zigzag(data: bytes, at: int) -> tuple[int, int]:
    raw, at = _varint(data, at)
    return (raw >> 1) ^ -(raw & 1), at


def protobuf_indexes(data: bytes) -> tuple[list[int], int]:
    """A Protobuf value's message indexes (which message of the schema file, nested types by
    index; [0] is the first) and where its message bytes begin: Confluent writes a zigzag count,
    then each index, or a single 0 for [0]."""
    count, at = _zigzag(data, 0)
    if count == 0:
        return [0], at
    if not 0 < count <= MAX_MESSAGE_INDEXES:
        raise ValueError(f"{count} message indexes")
    indexes = []
    for _ in range(count):
        index, at = _zigzag(data, at)
        indexes.append(index)
    return indexes, at


def _json_safe(value: Any) -> Any:
    if isinstance(value, bytes):
        return base64.b64encode(value).decode()
    if isinstance(value, dict):
        return {str(k): _json_safe(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_json_safe(v) for v in value]
    if isinstance(value, (str, int, float, bool)) or value is None:
        return value
    return str(value)  # decimals, dates, uuids: as their text


def _decode_avro(text: str, payload: bytes) -> Any:
    import fastavro

    parsed = fastavro.parse_schema(json.loads(text))
    reader = io.BytesIO(payload)
    decoded = fastavro.schemaless_reader(reader, parsed, None)
    if reader.tell() != len(payload):
        raise ValueError(f"{len(payload) - reader.tell()} bytes left over after the record")
    return decoded


def _decode_protobuf(text: str, payload: bytes) -> Any:
    from google.protobuf import json_format, message_factory

    from roost.registry.schemas import parse

    indexes, at = protobuf_indexes(payload)
    model = parse("PROTOBUF", text).model
    descriptor = model.descriptor.message_types_by_name[model.file.message_type[indexes[0]].name]
    for index in indexes[1:]:
        descriptor = descriptor.nested_types[index]
    message = message_factory.GetMessageClass(descriptor)()
    message.ParseFromString(payload[at:])
    return {"type": descriptor.full_name, "message": json_format.MessageToDict(message)}


def decode_value(schema: RegisteredSchema, data: bytes) -> dict[str, Any]:
    """The value `data` (in Confluent's wire format, its id `schema`'s) decoded as the page shows
    it: {"schema_id", "schema_type", "json"} or {"schema_id", "schema_type", "error"}."""
    found: dict[str, Any] = {"schema_id": schema.schema_id, "schema_type": schema.schema_type}
    payload = data[HEADER_BYTES:]
    try:
        if schema.schema_type == "AVRO":
            decoded = _decode_avro(schema.text, payload)
        elif schema.schema_type == "JSON":
            decoded = json.loads(payload)
        elif schema.schema_type == "PROTOBUF":
            decoded = _decode_protobuf(schema.text, payload)
        else:
            raise ValueError(f"schema type {schema.schema_type}")
    except Exception as error:  # bytes from anyone: any failure is the message's, shown, never raised
        found["error"] = f"not decoded by schema {schema.schema_id}: {type(error).__name__}: {error}"[:500]
        return found
    found["json"] = json.dumps(_json_safe(decoded), indent=2, ensure_ascii=False)
    return found
