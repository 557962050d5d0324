"""Record keys and values as the REST proxy takes and gives them, encoded through the registry's
schemas in Confluent's wire format (magic 0, 4-byte big-endian id, payload; Protobuf adds the
message-index array, `[0]` written as the single byte 0). Pure apart from the registry's state."""

from __future__ import annotations

import base64
import io
import json
import struct
from typing import Any

from roost.registry import errors, schemas
from roost.registry.service import Registry

MAGIC = 0


def frame(schema_id: int, payload: bytes, protobuf: bool = False) -> bytes:
    return struct.pack(">bI", MAGIC, schema_id) + (b"\x00" if protobuf else b"") + payload


def unframe(data: bytes) -> tuple[int, bytes]:
    if len(data) < 5 or data[0] != MAGIC:
        raise ValueError("not in the schema registry's wire format (magic byte 0 and a schema id)")
    return struct.unpack(">I", data[1:5])[0], data[5:]


def _skip_indexes(payload: bytes) -> bytes:
    """Drop the Protobuf message-index array (zigzag varints: a count, then that many indexes)."""
    stream = io.BytesIO(payload)

    def varint() -> int:
        shift = result = 0
        while True:
            byte = stream.read(1)
            if not byte:
                raise ValueError("truncated message indexes")
            result |= (byte[0] & 0x7F) << shift
            if not byte[0] & 0x80:
                return (result >> 1) ^ -(result & 1)
            shift += 7
            if shift > 63:
                raise ValueError("a message index is too long")

    count = varint()
    if not 0 <= count <= 100:
        raise ValueError("too many message indexes")
    for _ in range(count):
        varint()
    return payload[stream.tell():]


def _message_class(parsed: schemas.ParsedSchema) -> Any:
    from google.protobuf import message_factory

    descriptor = parsed.model.descriptor
    if not descriptor.message_types_by_name:
        raise errors.invalid_schema("the Protobuf schema has no message")
    return message_factory.GetMessageClass(next(iter(descriptor.message_types_by_name.values())))


def encode_with_schema(registry: Registry, schema_id: int, data: Any) -> bytes:
    """`data` (JSON) encoded with the registered schema `schema_id`."""
    entry = registry.get_by_id(schema_id, None)
    parsed = schemas.parse(entry.schema_type, entry.schema, registry.resolve_references(entry.references))
    if entry.schema_type == schemas.AVRO:
        import fastavro

        out = io.BytesIO()
        try:
            fastavro.schemaless_writer(out, fastavro.parse_schema(json.loads(entry.schema),
                                                                  named_schemas=dict(parsed.model.named)), data)
        except (ValueError, TypeError, KeyError, AttributeError) as error:
            raise errors.RegistryError(422, 42205, f"the data does not match schema {schema_id}: {error}") from None
        return frame(schema_id, out.getvalue())
    if entry.schema_type == schemas.JSON:
        import jsonschema

        try:
            jsonschema.validate(data, parsed.model)
        except jsonschema.ValidationError as error:
            raise errors.RegistryError(422, 42205, f"the data does not match schema {schema_id}: "
                                                   f"{error.message}") from None
        return frame(schema_id, json.dumps(data).encode())
    from google.protobuf import json_format

    message = _message_class(parsed)()
    try:
        json_format.ParseDict(data, message)
    except json_format.ParseError as error:
        raise errors.RegistryError(422, 42205, f"the data does not match schema {schema_id}: {error}") from None
    return frame(schema_id, message.SerializeToString(), protobuf=True)


def decode_with_schema(registry: Registry, data: bytes) -> Any:
    """A framed record back to JSON through the schema its id names."""
    schema_id, payload = unframe(data)
    entry = registry.get_by_id(schema_id, None)
    parsed = schemas.parse(entry.schema_type, entry.schema, registry.resolve_references(entry.references))
    if entry.schema_type == schemas.AVRO:
        import fastavro

        schema = fastavro.parse_schema(json.loads(entry.schema), named_schemas=dict(parsed.model.named))
        return fastavro.schemaless_reader(io.BytesIO(payload), schema, None)
    if entry.schema_type == schemas.JSON:
        return json.loads(payload)
    from google.protobuf import json_format

    message = _message_class(parsed)()
    message.ParseFromString(_skip_indexes(payload))
    return json_format.MessageToDict(message)


def b64(data: bytes | None) -> str | None:
    return None if data is None else base64.b64encode(data).decode()
