"""Realistic bodies for any message at any version, generated from the schema, and the helpers
to compare what goes in with what comes out (buffers become bytes, record lists are joined)."""

from __future__ import annotations

import random
import uuid
from typing import Any

from roost.wire.kafka import request_has_client_id
from roost.wire.kafka.apis import APIS
from roost.wire.kafka.schema import Field, Message

INT_RANGES = {
    "int8": (-(2**7), 2**7 - 1), "int16": (-(2**15), 2**15 - 1), "int32": (-(2**31), 2**31 - 1),
    "int64": (-(2**63), 2**63 - 1), "uint16": (0, 2**16 - 1), "uint32": (0, 2**32 - 1),
}
STRINGS = ("", "orders", "topic-with-a-rather-long-name-" + "x" * 150, "ümlaut-ß-東京", "a")


def every_api_version() -> list[tuple[int, int]]:
    return [(key, version) for key, api in sorted(APIS.items())
            for version in range(api.request.versions.low, api.request.versions.high + 1)]


def client_id_for(api_key: int, version: int, client_id: str | None) -> str | None:
    """`client_id`, or None where the request header has none (ControlledShutdown v0)."""
    return client_id if request_has_client_id(api_key, version) else None


def message_of(api_key: int, is_request: bool) -> Message:
    api = APIS[api_key]
    return api.request if is_request else api.response


def sample_body(message: Message, version: int, rng: random.Random) -> dict[str, Any]:
    """A body with every field of `version` set: nulls, empty and long values, tagged fields."""
    return _sample_struct(message.fields, version, rng, depth=0)


def _sample_struct(fields: tuple[Field, ...], version: int, rng: random.Random, depth: int) -> dict[str, Any]:
    return {field.key: _sample_field(field, version, rng, depth)
            for field in fields if version in field.versions}


def _sample_field(field: Field, version: int, rng: random.Random, depth: int) -> Any:
    if version in field.nullable and rng.random() < 0.2:
        return None
    if field.is_array:
        count = rng.choice((0, 1, 2, 3)) if depth < 3 else rng.choice((0, 1))
        return [_sample_element(field, version, rng, depth + 1) for _ in range(count)]
    return _sample_element(field, version, rng, depth)


def _sample_element(field: Field, version: int, rng: random.Random, depth: int) -> Any:
    kind = field.element_type
    if field.is_struct:
        return _sample_struct(field.fields, version, rng, depth + 1)
    if kind == "bool":
        return rng.random() < 0.5
    if kind in INT_RANGES:
        low, high = INT_RANGES[kind]
        return rng.choice((0, -1 if low < 0 else 1, low, high, rng.randint(low, high)))
    if kind == "float64":
        return rng.uniform(-1e9, 1e9)
    if kind == "string":
        return rng.choice(STRINGS)
    if kind == "bytes":
        return rng.randbytes(rng.choice((0, 5, 200)))
    if kind == "uuid":
        return uuid.UUID(int=rng.getrandbits(128))
    assert kind == "records", kind
    shape = rng.choice(("small", "large", "list"))
    if shape == "small":
        return rng.randbytes(61)
    if shape == "large":
        return rng.randbytes(4096)
    # A fetch response's records: slices of segment files, as bytes, bytearray and memoryview.
    return [rng.randbytes(700), bytearray(rng.randbytes(1000)), memoryview(rng.randbytes(600)), b""]


def normalized(value: Any) -> Any:
    """Buffers as bytes and record lists joined, so encoded-then-decoded values compare equal."""
    if isinstance(value, dict):
        return {key: normalized(item) for key, item in value.items()}
    if isinstance(value, list) and value and all(isinstance(item, bytes | bytearray | memoryview)
                                                 for item in value):
        return b"".join(bytes(item) for item in value)
    if isinstance(value, list):
        return [normalized(item) for item in value]
    if isinstance(value, bytearray | memoryview):
        return bytes(value)
    return value


def nondefault_body(message: Message, version: int, rng: random.Random, *,
                    nulls: bool = False) -> dict[str, Any]:
    """A body with every field of `version` set to a value the decoder never reports by default:
    integers away from every default Kafka uses (0, -1, -2, 1, 60000, the extremes), the other
    boolean, non-empty strings, bytes and records, non-zero uuids, arrays of two elements, nested
    and tagged structs filled the same way. With `nulls`, every nullable field is null instead.

    A round trip of such a body shows that every field, tagged ones included, really crossed the
    wire: a field the encoder dropped would come back as its default and differ.
    """
    return _nondefault_struct(message.fields, version, rng, nulls)


def _nondefault_struct(fields: tuple[Field, ...], version: int, rng: random.Random,
                       nulls: bool) -> dict[str, Any]:
    return {field.key: _nondefault_field(field, version, rng, nulls)
            for field in fields if version in field.versions}


def _nondefault_field(field: Field, version: int, rng: random.Random, nulls: bool) -> Any:
    if nulls and version in field.nullable:
        return None
    if field.is_array:
        return [_nondefault_element(field, version, rng, nulls) for _ in range(2)]
    return _nondefault_element(field, version, rng, nulls)


def _nondefault_element(field: Field, version: int, rng: random.Random, nulls: bool) -> Any:
    kind = field.element_type
    if field.is_struct:
        return _nondefault_struct(field.fields, version, rng, nulls)
    if kind == "bool":
        return field.default is not True  # False only where the default is True
    if kind in INT_RANGES:
        low, high = INT_RANGES[kind]
        value = rng.randint(2, high - 1) * rng.choice((1, -1) if low < 0 else (1,))
        while value in (field.default, 60000):
            value = rng.randint(2, high - 1)
        return value
    if kind == "float64":
        return rng.uniform(1.0, 1e9)
    if kind == "string":
        return f"{field.key}-ü-{rng.randint(0, 999)}"
    if kind in ("bytes", "records"):
        return rng.randbytes(rng.choice((1, 9, 300)))
    assert kind == "uuid", kind
    return uuid.UUID(int=rng.getrandbits(128) | 1)


def has_nullable_field(message: Message, version: int) -> bool:
    stack = [field for field in message.fields if version in field.versions]
    while stack:
        field = stack.pop()
        if version in field.nullable:
            return True
        stack.extend(child for child in field.fields if version in child.versions)
    return False
