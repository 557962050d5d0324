"""The Avro reader/writer rules, case by case and in both directions, and each answer checked
against Apache Avro's own Python checker (`avro.compatibility`), which implements the same
algorithm as the Java one Confluent's registry uses."""

from __future__ import annotations

import json
from typing import Any

import pytest

from roost.registry import compat_avro, compatibility, schemas


def rec(*fields: dict[str, Any], name: str = "R", **extra: Any) -> dict[str, Any]:
    return {"type": "record", "name": name, "namespace": "t", "fields": list(fields), **extra}


def f(name: str, kind: Any, **extra: Any) -> dict[str, Any]:
    return {"name": name, "type": kind, **extra}


ENUM_AB = {"type": "enum", "name": "E", "symbols": ["A", "B"]}
ENUM_ABC = {"type": "enum", "name": "E", "symbols": ["A", "B", "C"]}
LIST = rec(f("value", "int"), f("next", ["null", "t.R"], default=None))

# (rule, reader, writer, compatible)
CASES: list[tuple[str, Any, Any, bool]] = [
    ("field added with a default: new reads old", rec(f("a", "int"), f("b", "int", default=0)), rec(f("a", "int")), True),
    ("field added with a default: old reads new", rec(f("a", "int")), rec(f("a", "int"), f("b", "int", default=0)), True),
    ("field added without a default: new cannot read old", rec(f("a", "int"), f("b", "int")), rec(f("a", "int")), False),
    ("field added without a default: old reads new", rec(f("a", "int")), rec(f("a", "int"), f("b", "int")), True),
    ("promotion int to long", "long", "int", True),
    ("no demotion long to int", "int", "long", False),
    ("promotion int to double", "double", "int", True),
    ("promotion long to float", "float", "long", True),
    ("no demotion float to long", "long", "float", False),
    ("promotion float to double", "double", "float", True),
    ("no demotion double to float", "float", "double", False),
    ("string read as bytes", "bytes", "string", True),
    ("bytes read as string", "string", "bytes", True),
    ("no int read as string", "string", "int", False),
    ("no string read as int", "int", "string", False),
    ("enum symbol added: new reads old", {**ENUM_ABC}, {**ENUM_AB}, True),
    ("enum symbol added: old cannot read new", {**ENUM_AB}, {**ENUM_ABC}, False),
    ("enum reader default covers a new symbol", {**ENUM_AB, "default": "A"}, {**ENUM_ABC}, True),
    ("fixed same size", {"type": "fixed", "name": "F", "size": 4}, {"type": "fixed", "name": "F", "size": 4}, True),
    ("fixed size changed", {"type": "fixed", "name": "F", "size": 8}, {"type": "fixed", "name": "F", "size": 4}, False),
    ("record renamed", rec(f("a", "int"), name="S"), rec(f("a", "int"), name="R"), False),
    ("record renamed, reader alias names the old", rec(f("a", "int"), name="S", aliases=["t.R"]),
     rec(f("a", "int"), name="R"), True),
    ("record renamed, alias only on the writer", rec(f("a", "int"), name="R"),
     rec(f("a", "int"), name="S", aliases=["t.R"]), False),
    ("field renamed with a reader alias", rec(f("b", "int", aliases=["a"])), rec(f("a", "int")), True),
    ("field renamed without an alias", rec(f("b", "int")), rec(f("a", "int")), False),
    ("union widened: nullable reads plain", ["null", "string"], "string", True),
    ("union narrowed: plain cannot read nullable", "string", ["null", "string"], False),
    ("union branch promoted", ["null", "long"], ["null", "int"], True),
    ("union branch removed", ["null", "int"], ["null", "int", "string"], False),
    ("array items promoted", {"type": "array", "items": "long"}, {"type": "array", "items": "int"}, True),
    ("array items demoted", {"type": "array", "items": "int"}, {"type": "array", "items": "long"}, False),
    ("map values promoted", {"type": "map", "values": "double"}, {"type": "map", "values": "float"}, True),
    ("map values changed", {"type": "map", "values": "int"}, {"type": "map", "values": "string"}, False),
    ("array is not map", {"type": "map", "values": "int"}, {"type": "array", "items": "int"}, False),
    ("nested record field type changed", rec(f("n", rec(f("x", "string"), name="N"))),
     rec(f("n", rec(f("x", "int"), name="N"))), False),
    ("recursive schema reads itself", LIST, LIST, True),
    ("logical type on a primitive reads the primitive", {"type": "int", "logicalType": "date"}, "int", True),
]


def parsed(schema: Any) -> schemas.ParsedSchema:
    return schemas.parse("AVRO", json.dumps(schema))


@pytest.mark.parametrize(("rule", "reader", "writer", "compatible"), CASES, ids=[c[0] for c in CASES])
def test_rule(rule: str, reader: Any, writer: Any, compatible: bool) -> None:
    found = compatibility.reader_can_read(parsed(reader), parsed(writer))
    assert (not found) == compatible, found


@pytest.mark.parametrize(("rule", "reader", "writer", "compatible"), CASES, ids=[c[0] for c in CASES])
def test_agrees_with_apache_avro(rule: str, reader: Any, writer: Any, compatible: bool) -> None:
    avro_schema = pytest.importorskip("avro.schema")
    avro_compat = pytest.importorskip("avro.compatibility")
    result = avro_compat.ReaderWriterCompatibilityChecker().get_compatibility(
        avro_schema.parse(json.dumps(reader)), avro_schema.parse(json.dumps(writer)))
    assert (result.compatibility == avro_compat.SchemaCompatibilityType.compatible) == compatible


V1 = rec(f("a", "int"))
V2 = rec(f("a", "int"), f("b", "int", default=0))  # adds b with a default
V3 = rec(f("a", "int"), f("b", "int", default=0), f("c", "string"))  # adds c without one
V4 = rec(f("a", "int"), f("c", "string", default=""))  # drops b (it had a default), adds c with one
V5 = rec(f("b", "int", default=0))  # drops a (it had none)
A_STRING, A_INT, A_LONG = rec(f("a", "string")), rec(f("a", "int")), rec(f("a", "long"))
B_REQUIRED, B_DEFAULTED = rec(f("a", "int"), f("b", "int")), rec(f("a", "int"), f("b", "int", default=0))


LEVEL_CASES = [
    ("NONE", [V1], rec(f("z", "string")), True),
    ("BACKWARD", [V1], V2, True),
    ("BACKWARD", [V1], V3, False),  # the new schema has no value for c in old data
    ("BACKWARD", [V1], V5, True),  # dropping a field is fine for a new reader
    ("FORWARD", [V2], V3, True),  # the old schema ignores c
    ("FORWARD", [V1], V5, False),  # the old schema needs a, which the new one no longer writes
    ("FULL", [V1], V2, True),
    ("FULL", [V2], V3, False),
    ("FULL", [V1], V5, False),
    ("BACKWARD", [A_STRING, A_INT], A_LONG, True),  # only against the latest
    ("BACKWARD_TRANSITIVE", [A_STRING, A_INT], A_LONG, False),  # cannot read the first version's string
    ("FORWARD", [B_REQUIRED, B_DEFAULTED], V1, True),
    ("FORWARD_TRANSITIVE", [B_REQUIRED, B_DEFAULTED], V1, False),  # the first version needs b
    ("FULL_TRANSITIVE", [V1, V2], V4, True),
    ("FULL_TRANSITIVE", [B_REQUIRED, B_DEFAULTED], V1, False),
]


@pytest.mark.parametrize(("level", "history", "new", "ok"), LEVEL_CASES,
                         ids=[f"{c[0]}-{i}-{'ok' if c[3] else 'refused'}" for i, c in enumerate(LEVEL_CASES)])
def test_levels(level: str, history: list[Any], new: Any, ok: bool) -> None:
    found = compatibility.check(level, parsed(new), [parsed(h) for h in history])
    assert (not found) == ok, found


def test_first_version_is_always_accepted() -> None:
    assert compatibility.check("FULL_TRANSITIVE", parsed(V1), []) == []


def test_another_schema_type_is_incompatible() -> None:
    json_schema = schemas.parse("JSON", '{"type": "object"}')
    assert compatibility.check("BACKWARD", json_schema, [parsed(V1)])


def test_the_answer_names_where() -> None:
    found = compat_avro.incompatibilities(parsed(V3).model.schema, {}, parsed(V2).model.schema, {})
    assert found == ["READER_FIELD_MISSING_DEFAULT_VALUE: c at /fields/2"]
