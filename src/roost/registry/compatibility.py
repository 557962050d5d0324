"""Compatibility levels, as Confluent's CompatibilityChecker applies them: which earlier versions a
new schema is checked against, and in which direction.

BACKWARD: the new schema reads data written with the latest (reader = new, writer = old).
FORWARD: the latest reads data written with the new (reader = old, writer = new). FULL: both.
The _TRANSITIVE forms check every earlier (undeleted) version instead of only the latest. NONE
checks nothing. A schema of another type than an earlier one is incompatible with it. Pure.
"""

from __future__ import annotations

from roost.registry import compat_avro, compat_json, compat_protobuf, errors
from roost.registry.schemas import AVRO, JSON, ParsedSchema

LEVELS = ("NONE", "BACKWARD", "BACKWARD_TRANSITIVE", "FORWARD", "FORWARD_TRANSITIVE", "FULL", "FULL_TRANSITIVE")
DEFAULT_LEVEL = "BACKWARD"


def level_of(value: object) -> str:
    level = str(value).upper() if isinstance(value, str) else ""
    if level not in LEVELS:
        raise errors.invalid_compatibility(value)
    return level


def reader_can_read(reader: ParsedSchema, writer: ParsedSchema) -> list[str]:
    """Why `reader` cannot read what `writer` wrote ([] when it can)."""
    if reader.schema_type != writer.schema_type:
        return [f"TYPE_CHANGED: {writer.schema_type} -> {reader.schema_type}"]
    if reader.schema_type == AVRO:
        return compat_avro.incompatibilities(reader.model.schema, reader.model.named,
                                             writer.model.schema, writer.model.named)
    if reader.schema_type == JSON:
        return compat_json.incompatibilities(reader.model, writer.model)
    return compat_protobuf.incompatibilities(reader.model.descriptor, writer.model.descriptor)


def check(level: str, new: ParsedSchema, earlier: list[ParsedSchema]) -> list[str]:
    """Why `new` may not follow `earlier` (oldest first, undeleted only) under `level`; [] when it may."""
    if level == "NONE" or not earlier:
        return []
    against = earlier if level.endswith("_TRANSITIVE") else earlier[-1:]
    backward = level.startswith(("BACKWARD", "FULL"))
    forward = level.startswith(("FORWARD", "FULL"))
    found: list[str] = []
    for old in reversed(against):
        if backward:
            found += [f"{{newSchemaReadsOld: {m}}}" for m in reader_can_read(new, old)]
        if forward:
            found += [f"{{oldSchemaReadsNew: {m}}}" for m in reader_can_read(old, new)]
    return found
