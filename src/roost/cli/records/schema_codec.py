"""Keys and values in the Confluent wire format for `roost produce --value-schema/--key-schema`
and `roost consume --value-schema/--key-schema`, through a schema registry (Roost's own or
Confluent's) and confluent-kafka's own serializers, so what the CLI writes any Confluent client
reads and the other way round.

The wire format (docs/schema-registry.md): a magic byte 0, the schema id as 4 big-endian bytes,
then the Avro binary / the JSON text / (Protobuf) the message indexes as zigzag varints and the
message. Producing: each input key or value is JSON (for Protobuf, the JSON mapping of the
message); the schema is registered under the topic's subject (`TOPIC-value`, `TOPIC-key`, the
TopicNameStrategy) unless already there, and a value the schema refuses fails that record.
Consuming: each framed key or value is decoded with its writer's schema, looked up by its id,
and printed as compact JSON (Avro bytes as base64); one that is not framed is printed as it is,
with a warning on stderr.

Protobuf is decoded here rather than by confluent-kafka's ProtobufDeserializer, which needs the
generated class of the message beforehand: the writer's descriptor (format=serialized) and its
references make the class at run time.
"""

from __future__ import annotations

import base64
import json
import struct
from collections.abc import Callable
from decimal import Decimal
from pathlib import Path
from typing import Any

from roost.cli.client.client_options import CliError
from roost.cli.records.record_format import FormatError

MAGIC = 0
HEADER_BYTES = 5
TYPES = ("AVRO", "JSON", "PROTOBUF")
EXTENSION_TYPES = {".avsc": "AVRO", ".json": "JSON", ".desc": "PROTOBUF", ".pb": "PROTOBUF", ".proto": "PROTOBUF"}
MAX_REFERENCE_DEPTH = 32
DEFAULT_REGISTRY_URL = "http://127.0.0.1:8081"

Encode = Callable[[bytes | None], bytes | None]
Decode = Callable[[bytes | None, str], bytes | None]  # (data, topic)


def registry_client(url: str, user: str | None) -> Any:
    from confluent_kafka.schema_registry import SchemaRegistryClient

    conf: dict[str, Any] = {"url": url}
    if user:
        from roost.secret_ref import resolve_secret

        name, _, password = user.partition(":")
        try:
            conf["basic.auth.user.info"] = f"{name}:{resolve_secret(password)}"
        except ValueError as error:
            raise CliError(f"--registry-user: {error}") from None
    return SchemaRegistryClient(conf)


def _jsonable(value: Any) -> Any:
    """What json.dumps cannot print itself: Avro bytes/fixed (base64), decimals, dates, UUIDs."""
    if isinstance(value, bytes):
        return base64.b64encode(value).decode()
    if isinstance(value, Decimal):
        return str(value)
    return str(value)


def to_json_bytes(value: Any) -> bytes:
    return json.dumps(value, separators=(",", ":"), default=_jsonable).encode()


# ---- producing ----

def schema_type_of(path: Path, given: str | None) -> str:
    return (given or EXTENSION_TYPES.get(path.suffix.lower(), "AVRO")).upper()


def make_encoder(client: Any, topic: str, is_key: bool, path: Path, schema_type: str | None,
                 message_name: str | None) -> Encode:
    """A function from one input key or value (JSON text) to its framed bytes."""
    from confluent_kafka.serialization import MessageField, SerializationContext

    kind = schema_type_of(path, schema_type)
    context = SerializationContext(topic, MessageField.KEY if is_key else MessageField.VALUE)
    what = "key" if is_key else "value"
    conf = {"auto.register.schemas": True}
    if kind == "PROTOBUF":
        message_class = protobuf_class(path, message_name)
        from confluent_kafka.schema_registry.protobuf import ProtobufSerializer
        from google.protobuf import json_format

        serializer = ProtobufSerializer(message_class, client, {**conf, "use.deprecated.format": False})

        def to_message(text: str) -> Any:
            return json_format.Parse(text, message_class())
        convert: Callable[[str], Any] = to_message
    else:
        try:
            schema_text = path.read_text()
        except OSError as error:
            raise CliError(f"cannot read {path}: {error.strerror}") from None
        if kind == "AVRO":
            from confluent_kafka.schema_registry.avro import AvroSerializer

            serializer = AvroSerializer(client, schema_text, conf=conf)
        else:
            from confluent_kafka.schema_registry.json_schema import JSONSerializer

            serializer = JSONSerializer(schema_text, client, conf=conf)
        convert = json.loads

    def encode(raw: bytes | None) -> bytes | None:
        if raw is None:
            return None  # a tombstone stays one
        try:
            data = convert(raw.decode("utf-8"))
        except (ValueError, UnicodeDecodeError) as error:
            raise FormatError(f"the {what} is not JSON for a {kind} schema: {error}") from None
        try:
            return serializer(data, context)
        except Exception as error:  # the serializers raise SerializationError, ValueError, SchemaRegistryError
            raise FormatError(f"the {what} does not fit {path.name}: {error}") from None
    return encode


def protobuf_class(path: Path, message_name: str | None) -> Any:
    """The message class named `message_name` (default: the last file's first message) of the
    FileDescriptorSet at `path` (`protoc --include_imports -o FILE`), built at run time."""
    from google.protobuf import descriptor_pb2, descriptor_pool, message_factory
    from google.protobuf.message import DecodeError

    if path.suffix.lower() == ".proto":
        raise CliError(f"{path}: give a descriptor set (protoc --include_imports -o {path.stem}.desc {path.name})")
    files = descriptor_pb2.FileDescriptorSet()
    try:
        files.ParseFromString(path.read_bytes())
    except OSError as error:
        raise CliError(f"cannot read {path}: {error.strerror}") from None
    except DecodeError:
        raise CliError(f"{path}: not a FileDescriptorSet") from None
    if not files.file or not files.file[-1].message_type:
        raise CliError(f"{path}: no message in the descriptor set")
    pool = descriptor_pool.DescriptorPool()
    for proto in files.file:
        _add_with_known_imports(pool, proto)
    last = files.file[-1]
    name = message_name or ".".join(p for p in (last.package, last.message_type[0].name) if p)
    try:
        return message_factory.GetMessageClass(pool.FindMessageTypeByName(name))
    except KeyError:
        raise CliError(f"{path}: no message {name!r} (--value-message / --key-message name it in full)") from None


def _add_with_known_imports(pool: Any, proto: Any) -> None:
    """Add `proto`, first adding the well-known files it imports that the set left out."""
    from google.protobuf import descriptor_pb2

    for dependency in proto.dependency:
        try:
            pool.FindFileByName(dependency)
        except KeyError:
            known = _well_known(dependency)
            if known is None:
                continue  # the set itself holds it (added before), else Add below names it
            known_proto = descriptor_pb2.FileDescriptorProto()
            known.CopyToProto(known_proto)
            _add_with_known_imports(pool, known_proto)
    try:
        pool.FindFileByName(proto.name)
    except KeyError:
        try:
            pool.Add(proto)
        except (TypeError, ValueError) as error:
            raise CliError(f"{proto.name}: {error}") from None


def _well_known(name: str) -> Any:
    """google/protobuf/NAME.proto from protobuf's own modules (imported on demand: the default
    pool holds only the files whose _pb2 module was imported), else None."""
    import importlib

    from google.protobuf import descriptor_pool

    if name.startswith("google/protobuf/") and name.endswith(".proto"):
        module = "google.protobuf." + name.removeprefix("google/protobuf/").removesuffix(".proto").replace("/", ".")
        try:
            importlib.import_module(module + "_pb2")
        except ImportError:
            pass
    try:
        return descriptor_pool.Default().FindFileByName(name)
    except KeyError:
        return None


# ---- consuming ----

def split_frame(data: bytes) -> tuple[int, bytes] | None:
    """(schema id, the rest) of a framed key or value; None when it is not framed."""
    if len(data) < HEADER_BYTES or data[0] != MAGIC:
        return None
    return struct.unpack(">I", data[1:HEADER_BYTES])[0], data[HEADER_BYTES:]


def read_varint(data: bytes, at: int) -> tuple[int, int]:
    """A zigzag varint at `at`: (its value, the offset after it)."""
    shift = result = 0
    for _ in range(10):
        if at >= len(data):
            raise FormatError("the Protobuf message indexes end early")
        byte = data[at]
        at += 1
        result |= (byte & 0x7F) << shift
        if not byte & 0x80:
            return (result >> 1) ^ -(result & 1), at
        shift += 7
    raise FormatError("a Protobuf message index is longer than 10 bytes")


def message_indexes(payload: bytes) -> tuple[list[int], bytes]:
    """Confluent's message-index list before a Protobuf message ([0] written as one 0 byte)."""
    count, at = read_varint(payload, 0)
    if count < 0 or count > len(payload):
        raise FormatError(f"bad Protobuf message index count {count}")
    if count == 0:
        return [0], payload[at:]
    indexes = []
    for _ in range(count):
        index, at = read_varint(payload, at)
        indexes.append(index)
    return indexes, payload[at:]


class Decoder:
    """Decodes framed keys or values by their writer's schema (fetched once per id)."""

    def __init__(self, client: Any, is_key: bool, warn: Callable[[str], None]) -> None:
        self.client = client
        self.is_key = is_key
        self.warn = warn
        self._types: dict[int, str] = {}
        self._protobuf: dict[tuple[int, tuple[int, ...]], Any] = {}
        self._avro: Any = None
        self._json: Any = None

    def __call__(self, data: bytes | None, topic: str) -> bytes | None:
        if data is None:
            return None
        framed = split_frame(data)
        what = "key" if self.is_key else "value"
        if framed is None:
            self.warn(f"a {what} not in the Confluent wire format (magic byte 0 and a schema id): printed as it is")
            return data
        schema_id, payload = framed
        kind = self._type_of(schema_id)
        if kind == "PROTOBUF":
            indexes, body = message_indexes(payload)
            message = self._protobuf_class(schema_id, indexes)()
            from google.protobuf import json_format
            from google.protobuf.message import DecodeError

            try:
                message.ParseFromString(body)
            except DecodeError as error:
                raise FormatError(f"a {what} of schema {schema_id} is not its Protobuf message: {error}") from None
            return to_json_bytes(json_format.MessageToDict(message, preserving_proto_field_name=True))
        from confluent_kafka.serialization import MessageField, SerializationContext

        context = SerializationContext(topic, MessageField.KEY if self.is_key else MessageField.VALUE)
        try:
            return to_json_bytes(self._deserializer(kind)(data, context))
        except Exception as error:  # SerializationError, SchemaRegistryError
            raise FormatError(f"a {what} of schema {schema_id} cannot be decoded: {error}") from None

    def _type_of(self, schema_id: int) -> str:
        kind = self._types.get(schema_id)
        if kind is None:
            try:
                kind = self.client.get_schema(schema_id).schema_type or "AVRO"
            except Exception as error:
                raise FormatError(f"schema {schema_id}: {error}") from None
            self._types[schema_id] = kind
        return kind

    def _deserializer(self, kind: str) -> Any:
        # The writer's schema is the reader's: no subject lookups, so any naming strategy reads.
        conf = {"use.latest.version": False}
        if kind == "AVRO":
            if self._avro is None:
                from confluent_kafka.schema_registry.avro import AvroDeserializer

                self._avro = AvroDeserializer(self.client, conf=conf)
            return self._avro
        if self._json is None:
            from confluent_kafka.schema_registry.json_schema import JSONDeserializer

            self._json = JSONDeserializer(None, schema_registry_client=self.client, conf=conf)
        return self._json

    def _protobuf_class(self, schema_id: int, indexes: list[int]) -> Any:
        key = (schema_id, tuple(indexes))
        found = self._protobuf.get(key)
        if found is None:
            from google.protobuf import descriptor_pool, message_factory

            pool = descriptor_pool.DescriptorPool()
            schema = self.client.get_schema(schema_id, fmt="serialized")
            proto = self._add_schema(pool, schema, 0)
            descriptor = _message_at(pool, proto, indexes)
            found = self._protobuf[key] = message_factory.GetMessageClass(descriptor)
        return found

    def _add_schema(self, pool: Any, schema: Any, depth: int) -> Any:
        from google.protobuf import descriptor_pb2

        if depth > MAX_REFERENCE_DEPTH:
            raise FormatError("Protobuf references nested too deep")
        for reference in schema.references or []:
            try:
                pool.FindFileByName(reference.name)
                continue
            except KeyError:
                pass
            version = self.client.get_version(reference.subject, reference.version, True, "serialized")
            self._add_schema(pool, version.schema, depth + 1)
        proto = descriptor_pb2.FileDescriptorProto.FromString(base64.b64decode(schema.schema_str))
        _add_with_known_imports(pool, proto)
        return proto


def _message_at(pool: Any, proto: Any, indexes: list[int]) -> Any:
    """The message the indexes name: the first picks a top-level message, each next a nested one."""
    names = []
    messages = proto.message_type
    for index in indexes:
        if not 0 <= index < len(messages):
            raise FormatError(f"Protobuf message index {index} is out of range")
        names.append(messages[index].name)
        messages = messages[index].nested_type
    return pool.FindMessageTypeByName(".".join([proto.package, *names] if proto.package else names))


# ---- the commands' options ----

def registry_options(command: Any) -> Any:
    import os

    import click

    command = click.option("--registry-user", metavar="USER:PASSWORD",
                           help="basic auth for the schema registry (the password may be a ${file:} reference)")(command)
    return click.option("--registry", "registry_url", metavar="URL",
                        default=lambda: os.environ.get("ROOST_SCHEMA_REGISTRY_URL", DEFAULT_REGISTRY_URL),
                        show_default=DEFAULT_REGISTRY_URL,
                        help="the schema registry of --key-schema/--value-schema (or ROOST_SCHEMA_REGISTRY_URL)")(command)
