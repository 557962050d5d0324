"""Schemas as the registry holds them: parsed with the field's libraries, one canonical string
per schema, and what compatibility checking and subject naming need.

- AVRO: parsed with fastavro (`parse_schema`, named types shared with the references'). The
  canonical string is the schema's JSON re-serialised compactly, keys in their given order
  (Confluent compares Java Avro's `Schema.toString()`, where whitespace and key order do not
  matter but doc, default, aliases and logical types do: so not Parsing Canonical Form).
  `normalize` sorts every object's keys too.
- JSON: checked against its draft's metaschema with jsonschema (`validator_for(...).check_schema`);
  canonical = compact JSON, key order kept; `normalize` sorts keys.
- PROTOBUF: the form confluent-kafka registers, a base64 `FileDescriptorProto`, parsed with the
  protobuf runtime and linked in a `DescriptorPool` together with the references' files and the
  well-known imports (google/protobuf/*, google/type/*, confluent/*), which resolve without
  references. Canonical = base64 of its deterministic serialisation. Text `.proto` is refused
  with 42201: no PyPI package offers a .proto parser as a library call short of running protoc
  (grpcio-tools); `roost schema register` compiles text files with protoc before sending.

Pure: no I/O; references arrive already resolved.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import json
from dataclasses import dataclass, field
from typing import Any

from roost.registry import errors

AVRO, JSON, PROTOBUF = "AVRO", "JSON", "PROTOBUF"
SCHEMA_TYPES = (AVRO, JSON, PROTOBUF)
MAX_SCHEMA_BYTES = 1 << 20  # one schema string; bigger is refused with 42209
MAX_REFERENCE_DEPTH = 32


@dataclass(frozen=True)
class Reference:
    name: str
    subject: str
    version: int

    def to_json(self) -> dict[str, Any]:
        return {"name": self.name, "subject": self.subject, "version": self.version}


@dataclass(frozen=True)
class ResolvedReference:
    """A reference with the schema it names, itself resolved (its own references first)."""

    name: str
    schema_type: str
    schema: str
    references: tuple[ResolvedReference, ...] = ()


@dataclass
class ParsedSchema:
    schema_type: str
    canonical: str
    record_name: str | None
    model: Any = field(repr=False)  # what the type's compatibility checker reads


def schema_type_of(value: object) -> str:
    schema_type = AVRO if value in (None, "") else str(value).upper()
    if schema_type not in SCHEMA_TYPES:
        raise errors.unprocessable(f"Unknown schema type {value!r}: one of AVRO, JSON, PROTOBUF")
    return schema_type


def parse(schema_type: str, text: str, references: tuple[ResolvedReference, ...] = (),
          normalize: bool = False) -> ParsedSchema:
    """The schema `text` of `schema_type`, parsed; 42201 when it is not one."""
    if not isinstance(text, str):
        raise errors.invalid_schema("the schema must be a string")
    if len(text.encode()) > MAX_SCHEMA_BYTES:
        raise errors.schema_too_large(MAX_SCHEMA_BYTES)
    if schema_type == AVRO:
        return _parse_avro(text, references, normalize)
    if schema_type == JSON:
        return _parse_json(text, normalize)
    if schema_type == PROTOBUF:
        return _parse_protobuf(text, references)
    raise errors.unprocessable(f"Unknown schema type {schema_type!r}")


def fingerprint(canonical: str, schema_type: str, references: list[Reference], metadata: Any, rule_set: Any) -> str:
    """Confluent's md5 (base64) over the schema and what is registered with it: the same string
    with other metadata or rules is another schema, with another id."""
    digest = hashlib.md5(usedforsecurity=False)
    digest.update(canonical.encode())
    digest.update(schema_type.encode())
    for reference in references:
        digest.update(json.dumps(reference.to_json(), sort_keys=True).encode())
    if metadata is not None:
        digest.update(json.dumps(metadata, sort_keys=True).encode())
    if rule_set is not None:
        digest.update(json.dumps(rule_set, sort_keys=True).encode())
    return base64.b64encode(digest.digest()).decode()


def guid_of(md5_b64: str) -> str:
    raw = base64.b64decode(md5_b64).hex()
    return f"{raw[:8]}-{raw[8:12]}-{raw[12:16]}-{raw[16:20]}-{raw[20:]}"


def _load_json(text: str) -> Any:
    try:
        return json.loads(text)
    except (ValueError, RecursionError) as error:
        raise errors.invalid_schema(f"{text[:200]!r}: not JSON: {error}") from None


def _dump(value: Any, normalize: bool) -> str:
    return json.dumps(value, separators=(",", ":"), sort_keys=normalize, ensure_ascii=False)


# ---- Avro ----

@dataclass
class AvroModel:
    schema: Any  # fastavro's parsed form: named types by full name
    named: dict[str, Any]


def _avro_named(references: tuple[ResolvedReference, ...], named: dict[str, Any], depth: int = 0) -> None:
    import fastavro

    if depth > MAX_REFERENCE_DEPTH:
        raise errors.invalid_schema("references nested too deep")
    for reference in references:
        _avro_named(reference.references, named, depth + 1)
        try:
            fastavro.parse_schema(json.loads(reference.schema), named_schemas=named)
        except Exception as error:
            raise errors.invalid_schema(f"reference {reference.name}: {error}") from None


def _parse_avro(text: str, references: tuple[ResolvedReference, ...], normalize: bool) -> ParsedSchema:
    import fastavro

    raw = _load_json(text)
    named: dict[str, Any] = {}
    _avro_named(references, named)
    try:
        parsed = fastavro.parse_schema(raw, named_schemas=named, _write_hint=False)
    except Exception as error:
        raise errors.invalid_schema(f"{text[:200]!r}: {type(error).__name__}: {error}") from None
    record_name = parsed.get("name") if isinstance(parsed, dict) and parsed.get("type") in ("record", "enum", "fixed") \
        else None
    return ParsedSchema(AVRO, _dump(_avro_canonical(raw), normalize), record_name,
                        AvroModel(_strip_fastavro(parsed), named))


AVRO_PRIMITIVES = frozenset({"null", "boolean", "int", "long", "float", "double", "bytes", "string"})


def _avro_canonical(schema: Any) -> Any:
    """As Java Avro's Schema.toString() prints it: a primitive given as {"type": "int"} is "int"."""
    if isinstance(schema, list):
        return [_avro_canonical(branch) for branch in schema]
    if not isinstance(schema, dict):
        return schema
    if set(schema) == {"type"} and schema["type"] in AVRO_PRIMITIVES:
        return schema["type"]
    out = {}
    for key, value in schema.items():
        if key in ("type", "items", "values"):
            out[key] = _avro_canonical(value)
        elif key == "fields" and isinstance(value, list):
            out[key] = [{k: (_avro_canonical(v) if k == "type" else v) for k, v in f.items()}
                        if isinstance(f, dict) else f for f in value]
        else:
            out[key] = value
    return out


def _strip_fastavro(schema: Any) -> Any:
    if isinstance(schema, dict):
        return {k: v for k, v in schema.items() if not k.startswith("__")}
    return schema


# ---- JSON Schema ----

def _parse_json(text: str, normalize: bool) -> ParsedSchema:
    import jsonschema
    from jsonschema.exceptions import SchemaError

    raw = _load_json(text)
    if not isinstance(raw, dict | bool):
        raise errors.invalid_schema(f"{text[:200]!r}: a JSON Schema is an object or a boolean")
    try:
        validator = jsonschema.validators.validator_for(raw, default=jsonschema.Draft7Validator)
        validator.check_schema(raw)
    except SchemaError as error:
        raise errors.invalid_schema(f"{text[:200]!r}: {error.message}") from None
    except Exception as error:
        raise errors.invalid_schema(f"{text[:200]!r}: {error}") from None
    title = raw.get("title") if isinstance(raw, dict) and isinstance(raw.get("title"), str) else None
    return ParsedSchema(JSON, _dump(raw, normalize), title, raw)


# ---- Protobuf ----

KNOWN_PREFIXES = ("google/protobuf/", "google/type/", "confluent/")


@dataclass
class ProtobufModel:
    file: Any  # descriptor_pb2.FileDescriptorProto, as registered
    descriptor: Any  # the FileDescriptor linked in its own DescriptorPool


def _known_file(name: str) -> bytes | None:
    """The serialized descriptor of a well-known import, from the protobuf runtime's own pool."""
    import importlib

    from google.protobuf import descriptor_pool

    module = name.removesuffix(".proto").replace("/", ".") + "_pb2"
    candidates = [module]
    if name.startswith("confluent/"):
        candidates.append("confluent_kafka.schema_registry." + module)
    for candidate in candidates:
        try:
            importlib.import_module(candidate)
        except ImportError:
            continue
        try:
            return bytes(descriptor_pool.Default().FindFileByName(name).serialized_pb)
        except KeyError:
            return None
    return None


def _decode_descriptor(text: str, what: str) -> Any:
    from google.protobuf import descriptor_pb2
    from google.protobuf.message import DecodeError

    try:
        raw = base64.b64decode(text.strip(), validate=True)
    except (binascii.Error, ValueError):
        raise errors.invalid_schema(
            f"{what}: not a base64 FileDescriptorProto (text .proto is not accepted: compile it with protoc, "
            "or register through `roost schema register`, which does)") from None
    proto = descriptor_pb2.FileDescriptorProto()
    try:
        proto.ParseFromString(raw)
    except DecodeError as error:
        raise errors.invalid_schema(f"{what}: {error}") from None
    if not proto.name:
        raise errors.invalid_schema(f"{what}: the FileDescriptorProto has no name")
    return proto


def _add_file(pool: Any, proto: Any, by_name: dict[str, ResolvedReference], added: set[str], depth: int) -> None:
    from google.protobuf import descriptor_pb2

    if proto.name in added:
        return
    if depth > MAX_REFERENCE_DEPTH:
        raise errors.invalid_schema("imports nested too deep")
    for dependency in proto.dependency:
        if dependency in added:
            continue
        reference = by_name.get(dependency)
        if reference is not None:
            nested = {r.name: r for r in reference.references}
            _add_file(pool, _decode_descriptor(reference.schema, dependency), {**by_name, **nested}, added, depth + 1)
            continue
        known = _known_file(dependency) if dependency.startswith(KNOWN_PREFIXES) else None
        if known is None:
            raise errors.invalid_schema(f"import {dependency!r} is neither a reference nor a well-known file")
        dep_proto = descriptor_pb2.FileDescriptorProto.FromString(known)
        _add_file(pool, dep_proto, by_name, added, depth + 1)
    try:
        pool.Add(proto)
    except Exception as error:
        raise errors.invalid_schema(f"{proto.name}: {error}") from None
    added.add(proto.name)


def _parse_protobuf(text: str, references: tuple[ResolvedReference, ...]) -> ParsedSchema:
    from google.protobuf import descriptor_pool

    proto = _decode_descriptor(text, "schema")
    pool = descriptor_pool.DescriptorPool()
    _add_file(pool, proto, {r.name: r for r in references}, set(), 0)
    try:
        descriptor = pool.FindFileByName(proto.name)
    except KeyError as error:
        raise errors.invalid_schema(f"{proto.name}: {error}") from None
    first = proto.message_type[0].name if proto.message_type else None
    record_name = (f"{proto.package}.{first}" if proto.package else first) if first else None
    canonical = base64.b64encode(proto.SerializeToString(deterministic=True)).decode()
    return ParsedSchema(PROTOBUF, canonical, record_name, ProtobufModel(proto, descriptor))
