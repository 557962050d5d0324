"""Declarative message schemas: our compact Python mirror of Kafka's message JSON files.

A schema is written once per message (see `schemas/`) as nested `Field`s carrying the same facts as
Kafka's `clients/src/main/resources/common/message/*.json`: name, type, the versions a field exists
in, the versions it may be null in, whether (and under which tag) it is a tagged field, and its
default. `codegen.py` turns a schema plus one version into a fast reader and writer.
"""

from __future__ import annotations

import re
from typing import Any, Final

# The highest version any API may ever reach; open ranges such as "3+" end here.
HIGHEST_VERSION: Final = 0x7FFF

FIXED_WIDTH_TYPES: Final = frozenset(
    {"bool", "int8", "int16", "int32", "int64", "uint16", "uint32", "float64"})
VARIABLE_TYPES: Final = frozenset({"string", "bytes", "records", "uuid"})
PRIMITIVE_TYPES: Final = FIXED_WIDTH_TYPES | VARIABLE_TYPES
# Types whose value may be null on the wire (when the field's nullableVersions say so).
NULLABLE_CAPABLE: Final = frozenset({"string", "bytes", "records"})

_RANGE = re.compile(r"^(\d+)(\+|-(\d+))?$")
_WORD_BOUNDARY = re.compile(r"(?<=[a-z0-9])(?=[A-Z])|(?<=[A-Z])(?=[A-Z][a-z])")


class UnsetType:
    """The type of `UNSET`: a field whose default is its type's natural default."""

    _instance: UnsetType | None = None

    def __new__(cls) -> UnsetType:
        if cls._instance is None:
            cls._instance = super().__new__(cls)
        return cls._instance

    def __repr__(self) -> str:
        return "UNSET"


UNSET: Final = UnsetType()


class VersionRange:
    """An inclusive range of versions, parsed from Kafka's notation: "3+", "0-12", "5" or "none"."""

    __slots__ = ("high", "low")

    def __init__(self, spec: str) -> None:
        if spec == "none":
            self.low, self.high = 1, 0  # empty
            return
        match = _RANGE.match(spec)
        if match is None:
            raise ValueError(f"bad version range {spec!r}")
        self.low = int(match[1])
        if match[2] is None:
            self.high = self.low
        elif match[2] == "+":
            self.high = HIGHEST_VERSION
        else:
            self.high = int(match[3])
        if self.high < self.low:
            raise ValueError(f"empty version range {spec!r}")

    def __contains__(self, version: object) -> bool:
        return isinstance(version, int) and self.low <= version <= self.high

    @property
    def empty(self) -> bool:
        return self.high < self.low

    def covers(self, other: VersionRange) -> bool:
        """Whether every version of `other` lies in this range."""
        return other.empty or (self.low <= other.low and other.high <= self.high)

    def __repr__(self) -> str:
        if self.empty:
            return "none"
        if self.high == HIGHEST_VERSION:
            return f"{self.low}+"
        return f"{self.low}-{self.high}"


def snake_case(kafka_name: str) -> str:
    """Kafka's JSON field name in Python style: "PartitionIndex" -> "partition_index"."""
    return _WORD_BOUNDARY.sub("_", kafka_name).lower()


class Field:
    """One field of a message or nested struct, as in Kafka's JSON (see the module docstring).

    `type` uses Kafka's spelling: a primitive ("int32", "string", "records", "uuid", ...), a struct
    name with `fields` ("LeaderIdAndEpoch"), or an array of either ("[]int32", "[]FetchTopic").
    `default` is the Python value (None for Kafka's "null"); UNSET means the type's natural default.
    """

    __slots__ = ("default", "element_type", "fields", "is_array", "is_struct", "key", "name",
                 "nullable", "tag", "tagged", "type", "versions")

    def __init__(self, name: str, type: str, versions: str, *, nullable: str = "none",
                 tag: int | None = None, tagged: str = "none", default: Any = UNSET,
                 fields: tuple[Field, ...] = ()) -> None:
        self.name = name
        self.key = snake_case(name)
        self.type = type
        self.versions = VersionRange(versions)
        self.nullable = VersionRange(nullable)
        self.tagged = VersionRange(tagged)
        self.tag = tag
        self.default = default
        self.fields = tuple(fields)
        self.is_array = type.startswith("[]")
        self.element_type = type[2:] if self.is_array else type
        self.is_struct = self.element_type not in PRIMITIVE_TYPES
        self._check()

    def _check(self) -> None:
        where = f"field {self.name}"
        assert not self.versions.empty, f"{where}: no versions"
        assert self.is_struct == bool(self.fields), f"{where}: struct types and only they have fields"
        assert self.is_struct or self.element_type in PRIMITIVE_TYPES, f"{where}: unknown type"
        assert (self.tag is None) == self.tagged.empty, f"{where}: a tag needs taggedVersions"
        assert self.versions.covers(self.tagged), f"{where}: tagged outside its versions"
        # A struct (not an array of them) may be null since Kafka 3.5 (a one-byte marker before it).
        may_be_null = self.is_array or self.is_struct or self.element_type in NULLABLE_CAPABLE
        if not self.nullable.empty:
            assert may_be_null, f"{where}: cannot be null"
        if self.default is None:
            assert may_be_null, f"{where}: null default"
        assert not (self.is_struct and not self.is_array and self.default is not UNSET
                    and not (self.default is None and not self.nullable.empty)), \
            f"{where}: struct defaults come from their fields (or are null where it may be null)"
        keys = [field.key for field in self.fields]
        assert len(keys) == len(set(keys)), f"{where}: two fields share a name"

    def __repr__(self) -> str:
        return f"Field({self.name!r}, {self.type!r}, {self.versions!r})"


class Message:
    """A request, a response, or an embedded struct (such as ConsumerProtocolSubscription).

    `versions` is the range this codec implements (which may be narrower than Kafka's
    validVersions); `flexible` is Kafka's flexibleVersions.
    """

    __slots__ = ("api_key", "fields", "flexible", "kind", "name", "versions")

    def __init__(self, name: str, *, api_key: int | None, kind: str, versions: str,
                 flexible: str, fields: tuple[Field, ...]) -> None:
        assert kind in ("request", "response", "data"), kind
        self.name = name
        self.api_key = api_key
        self.kind = kind
        self.versions = VersionRange(versions)
        self.flexible = VersionRange(flexible)
        self.fields = tuple(fields)
        keys = [field.key for field in self.fields]
        assert len(keys) == len(set(keys)), f"{name}: two fields share a name"
        for field in _walk(self.fields):
            assert self.flexible.covers(field.tagged), f"{name}.{field.name}: tagged outside flexible"

    def __repr__(self) -> str:
        return f"Message({self.name!r}, versions={self.versions!r})"


def _walk(fields: tuple[Field, ...]) -> list[Field]:
    found: list[Field] = []
    for field in fields:
        found.append(field)
        found.extend(_walk(field.fields))
    return found
