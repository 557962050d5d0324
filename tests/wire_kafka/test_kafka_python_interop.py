"""Our encoder and decoder against an independent implementation of the same protocol.

kafka-python 3 (a test dependency) interprets Kafka's message JSON with its own code. For every
(api, version), request and response: bodies it encodes must decode with ours to the same values,
and bodies we encode must survive its decoder (checked by sending its decoding back to ours).
"""

from __future__ import annotations

import importlib
import pkgutil
import random
from typing import Any

import pytest

from roost.wire.kafka.apis import message_codec
from roost.wire.kafka.primitives import Out, as_view
from roost.wire.kafka.schema import Field, Message
from tests.support import referees
from tests.wire_kafka.samples import every_api_version, message_of, normalized, sample_body

kafka_protocol = referees.import_or_skip("kafka.protocol", "kafka-python")
api_message = referees.import_or_skip("kafka.protocol.api_message", "kafka-python")


def _kafka_python_classes() -> dict[str, Any]:
    for module in pkgutil.walk_packages(kafka_protocol.__path__, "kafka.protocol."):
        if ".old" not in module.name:
            try:
                importlib.import_module(module.name)
            except ImportError:
                continue
    found: dict[str, Any] = {}
    stack = list(api_message.ApiMessage.__subclasses__())
    while stack:
        cls = stack.pop()
        stack.extend(cls.__subclasses__())
        if getattr(cls, "_class_version", None) is None:
            found[cls.__name__] = cls
    return found


CLASSES = _kafka_python_classes()
# kafka-python has no classes for the ZooKeeper-mode inter-broker APIs (Kafka 4.0 removed them);
# test_replication_messages.py checks those against hand-assembled bytes instead.
CASES = [(key, version, is_request) for key, version in every_api_version() for is_request in (True, False)
         if message_of(key, is_request).name in CLASSES]


def _pairs(cls: Any, fields: tuple[Field, ...], version: int) -> list[tuple[Field, str]]:
    """Our fields of `version` with kafka-python's name for each, matched by position.

    kafka-python patches a few fields (authorized-operations ints become "bitfield" sets, under
    another name); those are left out of the comparison: they are plain int32 on the wire.
    """
    theirs = cls._struct._fields
    assert [field.name.lower() for field in fields] == \
        [field.name.replace("_", "") for field in theirs] or len(fields) == len(theirs)
    return [(field, their.name) for field, their in zip(fields, theirs, strict=True)
            if version in field.versions and their.type_str != "bitfield"]


def _to_kafka_python(cls: Any, fields: tuple[Field, ...], version: int, body: dict[str, Any]) -> Any:
    values: dict[str, Any] = {}
    for field, their_name in _pairs(cls, fields, version):
        if field.key not in body:
            continue
        value = body[field.key]
        if field.is_struct and value is not None:
            nested = getattr(cls, field.element_type)
            value = ([_to_kafka_python(nested, field.fields, version, item) for item in value]
                     if field.is_array else _to_kafka_python(nested, field.fields, version, value))
        values[their_name] = value
    return cls(version=version, **values)


def _from_kafka_python(cls: Any, fields: tuple[Field, ...], version: int,
                       theirs: dict[str, Any]) -> dict[str, Any]:
    """kafka-python's to_dict() in our names; a tagged field it reports as None (absent from the
    wire) is left out, so that it is not sent again."""
    body: dict[str, Any] = {}
    for field, their_name in _pairs(cls, fields, version):
        value = theirs[their_name]
        if value is None and version in field.tagged:
            continue
        if field.is_struct and value is not None:
            nested = getattr(cls, field.element_type)
            value = ([_from_kafka_python(nested, field.fields, version, item) for item in value]
                     if field.is_array else _from_kafka_python(nested, field.fields, version, value))
        body[field.key] = value
    return body


def _comparable(cls: Any, fields: tuple[Field, ...], version: int, body: dict[str, Any]) -> dict[str, Any]:
    """`body` without the fields kafka-python cannot carry as is (see _pairs)."""
    kept: dict[str, Any] = {}
    for field, _ in _pairs(cls, fields, version):
        value = body[field.key]
        if field.is_struct and value is not None:
            nested = getattr(cls, field.element_type)
            value = ([_comparable(nested, field.fields, version, item) for item in value]
                     if field.is_array else _comparable(nested, field.fields, version, value))
        kept[field.key] = value
    return kept


def _ours_encode(api_key: int, version: int, is_request: bool, body: dict[str, Any]) -> bytes:
    codec, _ = message_codec(api_key, version, is_request)
    out = Out()
    codec.write(body, out)
    return out.getvalue()


def _ours_decode(api_key: int, version: int, is_request: bool, data: bytes) -> dict[str, Any]:
    codec, _ = message_codec(api_key, version, is_request)
    view = as_view(data)
    body, pos = codec.read(view, 0)
    assert pos == len(view), "bytes left over"
    return body


def _case_id(case: tuple[int, int, bool]) -> str:
    api_key, version, is_request = case
    return f"{api_key}-v{version}-{'request' if is_request else 'response'}"


@pytest.mark.parametrize("case", CASES, ids=_case_id)
def test_both_directions_agree_with_kafka_python(case: tuple[int, int, bool]) -> None:
    api_key, version, is_request = case
    message: Message = message_of(api_key, is_request)
    cls = CLASSES[message.name]
    rng = random.Random(f"interop-{case}")
    for _ in range(3):
        body = normalized(sample_body(message, version, rng))
        if message.name == "ApiVersionsResponse":
            body["error_code"] = 0  # kafka-python reads a failed one as the v0-shaped fallback
        expected = _comparable(cls, message.fields, version, body)

        # Theirs -> ours: every value, tagged fields included, arrives intact.
        theirs = _to_kafka_python(cls, message.fields, version, body).encode(version=version)
        decoded = normalized(_ours_decode(api_key, version, is_request, theirs))
        assert _comparable(cls, message.fields, version, decoded) == expected

        # Ours -> theirs -> ours: their decoder reads our bytes to the same values.
        ours = _ours_encode(api_key, version, is_request, body)
        parsed = _from_kafka_python(cls, message.fields, version,
                                    cls.decode(ours, version=version).to_dict(json=False))
        again = _to_kafka_python(cls, message.fields, version, parsed).encode(version=version)
        decoded = normalized(_ours_decode(api_key, version, is_request, again))
        assert _comparable(cls, message.fields, version, decoded) == expected
