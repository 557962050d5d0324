"""A compiled struct codec (the reader, writer and defaults of one struct at one version), and the
defaults a writer uses for the fields a caller leaves out: what the codec generator (codegen.py)
makes and the framing uses."""

from __future__ import annotations

import uuid
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Final

from roost.wire.kafka.primitives import FIXED_FORMAT, Out
from roost.wire.kafka.schema import UNSET, Field

ZERO_UUID: Final = uuid.UUID(int=0)
_EMPTY_STRUCT: Final[dict[str, Any]] = {}


@dataclass(frozen=True, slots=True)
class StructCodec:
    """The compiled reader and writer of one struct (or message body) at one version."""

    read: Callable[[memoryview, int], tuple[dict[str, Any], int]]
    write: Callable[[dict[str, Any], Out], None]
    # A fresh dict of every field's default at this version (what an absent tagged struct decodes to).
    defaults: Callable[[], dict[str, Any]]
    # The Python source behind `read` and `write` when they were generated (codegen.py), else None.
    source: str | None = None


def _natural_default(field: Field, nullable: bool) -> Any:
    """The default of a field whose schema gives none (or gives null where null is not allowed)."""
    kind = field.type
    if kind == "bool":
        return False
    if kind == "float64":
        return 0.0
    if kind in FIXED_FORMAT:
        return 0
    if kind == "string":
        return None if nullable else ""
    if kind == "bytes":
        return None if nullable else b""
    if kind == "records":
        return b""  # an empty record set is what Kafka sends; clients need not handle null
    if kind == "uuid":
        return ZERO_UUID
    raise AssertionError(f"no natural default for {field!r}")


def encode_default(field: Field, version: int) -> Any:
    """What the writer uses when the caller's dict omits the field (never mutated)."""
    nullable = version in field.nullable
    if field.is_array:
        return None if field.default is None and nullable else ()
    if field.is_struct:
        return None if field.default is None and nullable else _EMPTY_STRUCT
    if field.default is UNSET or (field.default is None and not nullable):
        return _natural_default(field, nullable)
    return field.default
