"""Can a Protobuf reader schema read messages written with a writer schema? The rules of
Confluent's protobuf-provider diff (SchemaDiff, MessageSchemaDiff, FieldSchemaDiff): fields are
matched by tag number; the diff runs from an original (the writer) to an update (the reader).

Written here: no PyPI package diffs Protobuf schemas (Karapace carries its own). It reads the
linked descriptors of protobuf's DescriptorPool, so type names are resolved across imports.

Compatible: messages added, enums and their constants changed, fields added or removed, renamed,
string<->bytes, a oneof added or removed, a field added to a oneof, a oneof's field moved out of
it, a single field moved into a new oneof. Incompatible: package changed, message removed, a
field's kind changed (scalar / message / map), a scalar changed across wire-compatible groups, a
message or enum type changed, a numeric field's label changed (singular <-> repeated), a proto2
required field added or removed, a oneof's field removed, several fields moved into one new
oneof, a field moved into a oneof that already existed. Pure.
"""

from __future__ import annotations

from typing import Any

from google.protobuf.descriptor import FieldDescriptor as F

# scalars whose encodings read each other (Protobuf's "Updating A Message Type")
SCALAR_GROUPS: tuple[frozenset[int], ...] = (
    frozenset({F.TYPE_INT32, F.TYPE_INT64, F.TYPE_UINT32, F.TYPE_UINT64, F.TYPE_BOOL, F.TYPE_ENUM}),
    frozenset({F.TYPE_SINT32, F.TYPE_SINT64}),
    frozenset({F.TYPE_STRING, F.TYPE_BYTES}),
    frozenset({F.TYPE_FIXED32, F.TYPE_SFIXED32}),
    frozenset({F.TYPE_FIXED64, F.TYPE_SFIXED64}),
    frozenset({F.TYPE_FLOAT}),
    frozenset({F.TYPE_DOUBLE}),
)
LENGTH_DELIMITED = frozenset({F.TYPE_STRING, F.TYPE_BYTES, F.TYPE_MESSAGE})


def _group(kind: int) -> frozenset[int]:
    return next((group for group in SCALAR_GROUPS if kind in group), frozenset({kind}))


def _kind(field: Any) -> str:
    if field.type == F.TYPE_MESSAGE and field.message_type.GetOptions().map_entry:
        return "map"
    if field.type in (F.TYPE_MESSAGE, F.TYPE_GROUP):
        return "message"
    return "scalar"


def _messages(file: Any) -> dict[str, Any]:
    found: dict[str, Any] = {}

    def walk(message: Any) -> None:
        if message.GetOptions().map_entry:
            return
        found[message.full_name] = message
        for nested in message.nested_types:
            walk(nested)

    for message in file.message_types_by_name.values():
        walk(message)
    return found


class _Diff:
    def __init__(self) -> None:
        self.found: list[str] = []

    def fail(self, path: str, message: str) -> None:
        self.found.append(f"{message} at {path}")

    def compare_files(self, original: Any, update: Any) -> None:
        if original.package != update.package:
            self.fail("#/package", "PACKAGE_CHANGED")
        before, after = _messages(original), _messages(update)
        for name, message in before.items():
            if name not in after:
                self.fail(f"#/{name}", "MESSAGE_REMOVED")
                continue
            self.compare_messages(message, after[name], f"#/{name}")

    def compare_messages(self, original: Any, update: Any, path: str) -> None:
        before = original.fields_by_number
        after = update.fields_by_number
        for number, field in before.items():
            where = f"{path}/{number}"
            if number not in after:
                if field.containing_oneof is not None:
                    self.fail(where, "ONEOF_FIELD_REMOVED")
                if field.is_required:
                    self.fail(where, "REQUIRED_FIELD_REMOVED")
                continue
            self.compare_fields(field, after[number], where)
        for number, field in after.items():
            if number not in before and field.is_required:
                self.fail(f"{path}/{number}", "REQUIRED_FIELD_ADDED")
        self.compare_oneofs(original, update, path)

    def compare_fields(self, original: Any, update: Any, path: str) -> None:
        kind_before, kind_after = _kind(original), _kind(update)
        if kind_before != kind_after:
            self.fail(path, f"FIELD_KIND_CHANGED: {kind_before} -> {kind_after}")
            return
        if kind_before == "scalar":
            if update.type not in _group(original.type):
                self.fail(path, "FIELD_SCALAR_KIND_CHANGED")
            elif original.type == F.TYPE_ENUM and update.type == F.TYPE_ENUM \
                    and original.enum_type.full_name != update.enum_type.full_name:
                self.fail(path, "FIELD_NAMED_TYPE_CHANGED")
        elif kind_before == "message" and original.message_type.full_name != update.message_type.full_name:
            self.fail(path, "FIELD_NAMED_TYPE_CHANGED")
        elif kind_before == "map":
            self.compare_fields(original.message_type.fields_by_number[1], update.message_type.fields_by_number[1],
                                f"{path}/key")
            self.compare_fields(original.message_type.fields_by_number[2], update.message_type.fields_by_number[2],
                                f"{path}/value")
        if original.is_repeated != update.is_repeated and original.type not in LENGTH_DELIMITED:
            self.fail(path, "FIELD_NUMERIC_LABEL_CHANGED")
        if original.is_required != update.is_required:
            self.fail(path, "REQUIRED_FIELD_CHANGED")

    def compare_oneofs(self, original: Any, update: Any, path: str) -> None:
        existing = {oneof.name for oneof in original.oneofs}
        before = original.fields_by_number
        for oneof in update.oneofs:
            moved_in = [f.number for f in oneof.fields if f.number in before and before[f.number].containing_oneof is None]
            if oneof.name in existing and moved_in:
                self.fail(f"{path}/{oneof.name}", "FIELD_MOVED_TO_EXISTING_ONEOF")
            elif len(moved_in) > 1:
                self.fail(f"{path}/{oneof.name}", "MULTIPLE_FIELDS_MOVED_TO_ONEOF")


def incompatibilities(reader: Any, writer: Any) -> list[str]:
    """Why a message written with `writer` (a linked FileDescriptor) may be misread by `reader`."""
    diff = _Diff()
    diff.compare_files(writer, reader)
    return diff.found
