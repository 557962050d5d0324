"""The Protobuf rules (Confluent's diff, fields by tag number), each rule a case in both
directions, on descriptors built field by field (as protoc would make them)."""

from __future__ import annotations

import base64
import itertools
from typing import Any

import pytest
from google.protobuf import descriptor_pb2

from roost.registry import compatibility, schemas

T = descriptor_pb2.FieldDescriptorProto
OPTIONAL, REPEATED, REQUIRED = T.LABEL_OPTIONAL, T.LABEL_REPEATED, T.LABEL_REQUIRED
_names = itertools.count()


def proto(*fields: tuple[Any, ...], package: str = "p", messages: tuple[str, ...] = (), syntax: str = "proto3",
          oneofs: tuple[str, ...] = ()) -> schemas.ParsedSchema:
    """A file with message M of `fields` (name, number, type[, label[, type_name[, oneof index]]])
    plus empty messages `messages` and enum Color."""
    file = descriptor_pb2.FileDescriptorProto(name=f"f{next(_names)}.proto", package=package, syntax=syntax)
    message = file.message_type.add(name="M")
    for oneof in oneofs:
        message.oneof_decl.add(name=oneof)
    for spec in fields:
        name, number, kind = spec[:3]
        label = spec[3] if len(spec) > 3 else OPTIONAL
        field = message.field.add(name=name, number=number, type=kind, label=label)
        if len(spec) > 4 and spec[4]:
            field.type_name = spec[4]
        if len(spec) > 5 and spec[5] is not None:
            field.oneof_index = spec[5]
    for extra in ("Other", "Another", *messages):
        file.message_type.add(name=extra)
    enum = file.enum_type.add(name="Color")
    enum.value.add(name="RED", number=0)
    return schemas.parse("PROTOBUF", base64.b64encode(file.SerializeToString()).decode())


def ok(reader: schemas.ParsedSchema, writer: schemas.ParsedSchema) -> bool:
    return not compatibility.reader_can_read(reader, writer)


INT = ("f", 1, T.TYPE_INT32)


def test_field_added_and_removed_both_ways() -> None:
    one, two = proto(INT), proto(INT, ("g", 2, T.TYPE_STRING))
    assert ok(two, one) and ok(one, two)


def test_field_renamed() -> None:
    assert ok(proto(("renamed", 1, T.TYPE_INT32)), proto(INT))


@pytest.mark.parametrize(("before", "after", "compatible"), [
    (T.TYPE_INT32, T.TYPE_INT64, True), (T.TYPE_INT64, T.TYPE_UINT32, True), (T.TYPE_BOOL, T.TYPE_INT32, True),
    (T.TYPE_SINT32, T.TYPE_SINT64, True), (T.TYPE_STRING, T.TYPE_BYTES, True), (T.TYPE_FIXED32, T.TYPE_SFIXED32, True),
    (T.TYPE_FIXED64, T.TYPE_SFIXED64, True), (T.TYPE_INT32, T.TYPE_SINT32, False), (T.TYPE_INT32, T.TYPE_FIXED32, False),
    (T.TYPE_FLOAT, T.TYPE_DOUBLE, False), (T.TYPE_STRING, T.TYPE_INT32, False), (T.TYPE_FIXED32, T.TYPE_FIXED64, False),
])
def test_scalar_groups_both_ways(before: int, after: int, compatible: bool) -> None:
    old, new = proto(("f", 1, before)), proto(("f", 1, after))
    assert ok(new, old) == compatible
    assert ok(old, new) == compatible


def test_scalar_to_message_is_a_kind_change() -> None:
    assert not ok(proto(("f", 1, T.TYPE_MESSAGE, OPTIONAL, ".p.Other")), proto(INT))
    assert not ok(proto(INT), proto(("f", 1, T.TYPE_MESSAGE, OPTIONAL, ".p.Other")))


def test_message_type_changed() -> None:
    other = proto(("f", 1, T.TYPE_MESSAGE, OPTIONAL, ".p.Other"))
    another = proto(("f", 1, T.TYPE_MESSAGE, OPTIONAL, ".p.Another"))
    assert not ok(another, other) and not ok(other, another)


def test_numeric_label_change_is_incompatible_but_string_label_change_is_not() -> None:
    assert not ok(proto(("f", 1, T.TYPE_INT32, REPEATED)), proto(INT))
    assert not ok(proto(INT), proto(("f", 1, T.TYPE_INT32, REPEATED)))
    assert ok(proto(("s", 1, T.TYPE_STRING, REPEATED)), proto(("s", 1, T.TYPE_STRING)))


def test_package_changed() -> None:
    assert not ok(proto(INT, package="q"), proto(INT))


def test_message_removed_but_added_is_fine() -> None:
    with_extra = proto(INT, messages=("Extra",))
    assert not ok(proto(INT), with_extra)  # the reader lacks a message the writer had
    assert ok(with_extra, proto(INT))


def test_proto2_required_field_added_or_removed() -> None:
    base = proto(INT, syntax="proto2")
    with_required = proto(INT, ("r", 2, T.TYPE_INT32, REQUIRED), syntax="proto2")
    assert not ok(with_required, base)
    assert not ok(base, with_required)


def test_oneof_rules() -> None:
    plain = proto(INT, ("g", 2, T.TYPE_STRING))
    one_moved = proto(("f", 1, T.TYPE_INT32, OPTIONAL, None, 0), ("g", 2, T.TYPE_STRING), oneofs=("choice",))
    both_moved = proto(("f", 1, T.TYPE_INT32, OPTIONAL, None, 0), ("g", 2, T.TYPE_STRING, OPTIONAL, None, 0),
                       oneofs=("choice",))
    assert ok(one_moved, plain)  # a single field into a new oneof
    assert not ok(both_moved, plain)  # several fields into one oneof
    assert ok(plain, one_moved)  # a oneof's field moved out to the top level
    added_to = proto(("f", 1, T.TYPE_INT32, OPTIONAL, None, 0), ("g", 2, T.TYPE_STRING, OPTIONAL, None, 0),
                     oneofs=("choice",))
    assert not ok(added_to, one_moved)  # g moved into the existing oneof
    new_field_in_oneof = proto(("f", 1, T.TYPE_INT32, OPTIONAL, None, 0), ("g", 2, T.TYPE_STRING),
                               ("h", 3, T.TYPE_STRING, OPTIONAL, None, 0), oneofs=("choice",))
    assert ok(new_field_in_oneof, one_moved)  # a new field added to a oneof
    without_oneof_field = proto(("g", 2, T.TYPE_STRING), ("h", 3, T.TYPE_STRING, OPTIONAL, None, 0),
                                oneofs=("choice",))
    assert not ok(without_oneof_field, one_moved)  # a oneof's field removed


def test_text_proto_is_refused_with_42201() -> None:
    from roost.registry.errors import RegistryError

    with pytest.raises(RegistryError) as refused:
        schemas.parse("PROTOBUF", 'syntax = "proto3"; message M { int32 f = 1; }')
    assert refused.value.code == 42201


def test_unknown_import_is_refused_and_well_known_imports_resolve() -> None:
    from roost.registry.errors import RegistryError

    file = descriptor_pb2.FileDescriptorProto(name="imp.proto", package="p", syntax="proto3",
                                              dependency=["google/protobuf/timestamp.proto"])
    message = file.message_type.add(name="M")
    message.field.add(name="at", number=1, type=T.TYPE_MESSAGE, label=OPTIONAL, type_name=".google.protobuf.Timestamp")
    schemas.parse("PROTOBUF", base64.b64encode(file.SerializeToString()).decode())
    file.dependency.append("nowhere/else.proto")
    with pytest.raises(RegistryError) as refused:
        schemas.parse("PROTOBUF", base64.b64encode(file.SerializeToString()).decode())
    assert refused.value.code == 42201
