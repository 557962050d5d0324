"""The JSON Schema rules (Confluent's diff, STRICT), each rule a case, in both directions: the
`reader` is the new schema for BACKWARD (it must accept everything the `writer` accepted)."""

from __future__ import annotations

import json
from typing import Any

import pytest

from roost.registry import compatibility, schemas


def obj(properties: dict[str, Any], *, required: list[str] | None = None, extra: Any = None) -> dict[str, Any]:
    schema: dict[str, Any] = {"type": "object", "properties": properties}
    if required:
        schema["required"] = required
    if extra is not None:
        schema["additionalProperties"] = extra
    return schema


S = {"type": "string"}
N = {"type": "number"}
I = {"type": "integer"}  # noqa: E741 - the JSON type's name

# (rule, reader, writer, compatible)
CASES: list[tuple[str, Any, Any, bool]] = [
    ("optional property added to a closed model", obj({"a": S, "b": S}, extra=False), obj({"a": S}, extra=False), True),
    ("property removed from a closed model", obj({"a": S}, extra=False), obj({"a": S, "b": S}, extra=False), False),
    ("typed property added to an open model", obj({"a": S, "b": S}), obj({"a": S}), False),
    ("property removed into an open model", obj({"a": S}), obj({"a": S, "b": S}), True),
    ("untyped property added to an open model", obj({"a": S, "b": {}}), obj({"a": S}), True),
    ("required property added to a closed model without a default",
     obj({"a": S, "b": S}, required=["b"], extra=False), obj({"a": S}, extra=False), False),
    ("required property added to a closed model with a default",
     obj({"a": S, "b": {**S, "default": "x"}}, required=["b"], extra=False), obj({"a": S}, extra=False), True),
    ("required removed", obj({"a": S}), obj({"a": S}, required=["a"]), True),
    ("required added", obj({"a": S}, required=["a"]), obj({"a": S}), False),
    ("additionalProperties false to true", obj({"a": S}, extra=True), obj({"a": S}, extra=False), True),
    ("additionalProperties true to false", obj({"a": S}, extra=False), obj({"a": S}, extra=True), False),
    ("type widened integer to number", N, I, True),
    ("type narrowed number to integer", I, N, False),
    ("type extended by a union", {"type": ["string", "null"]}, S, True),
    ("type narrowed from a union", S, {"type": ["string", "null"]}, False),
    ("type changed", S, N, False),
    ("enum extended", {"enum": ["a", "b", "c"]}, {"enum": ["a", "b"]}, True),
    ("enum narrowed", {"enum": ["a"]}, {"enum": ["a", "b"]}, False),
    ("maxLength increased", {**S, "maxLength": 10}, {**S, "maxLength": 5}, True),
    ("maxLength decreased", {**S, "maxLength": 5}, {**S, "maxLength": 10}, False),
    ("maxLength removed", S, {**S, "maxLength": 5}, True),
    ("maxLength added", {**S, "maxLength": 5}, S, False),
    ("minimum decreased", {**N, "minimum": 0}, {**N, "minimum": 5}, True),
    ("minimum increased", {**N, "minimum": 5}, {**N, "minimum": 0}, False),
    ("maxItems increased", {"type": "array", "maxItems": 5}, {"type": "array", "maxItems": 2}, True),
    ("minItems increased", {"type": "array", "minItems": 3}, {"type": "array", "minItems": 1}, False),
    ("pattern removed", S, {**S, "pattern": "^a"}, True),
    ("pattern added", {**S, "pattern": "^a"}, S, False),
    ("array items widened", {"type": "array", "items": N}, {"type": "array", "items": I}, True),
    ("array items narrowed", {"type": "array", "items": I}, {"type": "array", "items": N}, False),
    ("oneOf extended", {"oneOf": [S, N, {"type": "null"}]}, {"oneOf": [S, N]}, True),
    ("oneOf narrowed", {"oneOf": [S]}, {"oneOf": [S, N]}, False),
    ("anyOf extended", {"anyOf": [S, N]}, {"anyOf": [S]}, True),
    ("anyOf narrowed", {"anyOf": [S]}, {"anyOf": [S, N]}, False),
    ("allOf narrowed (fewer constraints)", {"allOf": [S]}, {"allOf": [S, {"maxLength": 3}]}, True),
    ("allOf extended (more constraints)", {"allOf": [S, {"maxLength": 3}]}, {"allOf": [S]}, False),
    ("nested property type narrowed", obj({"n": obj({"x": N})}), obj({"n": obj({"x": I})}), True),
    ("nested property type changed", obj({"n": obj({"x": S})}), obj({"n": obj({"x": N})}), False),
    ("a schema that accepts nothing", False, S, False),
    ("true accepts everything", True, S, True),
]


def parsed(schema: Any) -> schemas.ParsedSchema:
    return schemas.parse("JSON", json.dumps(schema))


@pytest.mark.parametrize(("rule", "reader", "writer", "compatible"), CASES, ids=[c[0] for c in CASES])
def test_rule(rule: str, reader: Any, writer: Any, compatible: bool) -> None:
    found = compatibility.reader_can_read(parsed(reader), parsed(writer))
    assert (not found) == compatible, found


def test_backward_and_forward_swap_roles() -> None:
    closed_v1 = parsed(obj({"a": S}, extra=False))
    closed_v2 = parsed(obj({"a": S, "b": S}, extra=False))
    assert compatibility.check("BACKWARD", closed_v2, [closed_v1]) == []
    assert compatibility.check("FORWARD", closed_v2, [closed_v1]) != []
    assert compatibility.check("FORWARD", closed_v1, [closed_v2]) == []
    assert compatibility.check("FULL", closed_v2, [closed_v1]) != []


def test_invalid_json_schema_is_42201() -> None:
    from roost.registry.errors import RegistryError

    with pytest.raises(RegistryError) as refused:
        schemas.parse("JSON", '{"type": 5}')
    assert refused.value.code == 42201
    with pytest.raises(RegistryError):
        schemas.parse("JSON", "[1, 2]")
