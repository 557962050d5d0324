"""The closure codec: the test oracle of the generated codec (roost.wire.kafka.codegen).

It turns a declarative schema plus one version into a reader and writer made of closures, one call
per field, where codegen writes the same decisions out as straight-line source (about twice as
fast, bench/codec_bench.py). The two were written apart, so tests/wire_kafka/test_codegen.py holds
every message, version and malformed input against both: same bytes, same values, same errors.

Everything that depends on the schema is decided here, once per (struct, version): which fields
exist, which are tagged, compact or not, nullable or not, their defaults. The closures that come
out only index buffers and dicts. Consecutive fixed-width fields share one `struct.Struct`.

Readers have the shape `read(buf, pos) -> (value, new_pos)` over a flat memoryview; they check
every length against the bytes that remain *before* allocating, and may raise IndexError or
struct.error on truncated input, which the public entry points turn into KafkaCodecError.
Writers have the shape `write(value, out)` and append to an `Out`.
"""

from __future__ import annotations

import struct
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Final

from roost.wire.kafka.exceptions import KafkaCodecError
from roost.wire.kafka.primitives import (
    ATTACH_THRESHOLD,
    FIXED_FORMAT,
    INT16,
    INT32,
    Out,
    nbytes,
    read_uvarint,
    uvarint,
)
from roost.wire.kafka.schema import Field
from roost.wire.kafka.struct_codec import StructCodec, encode_default

Reader = Callable[[memoryview, int], tuple[Any, int]]
Writer = Callable[[Any, Out], None]
ReadStep = Callable[[memoryview, int, dict[str, Any]], int]
WriteStep = Callable[[dict[str, Any], Out], None]
LengthReader = Callable[[memoryview, int], tuple[int, int]]
LengthWriter = Callable[[int], bytes]



def _short(where: str) -> KafkaCodecError:
    return KafkaCodecError(f"{where}: length runs past the end of the data")


# ---------------------------------------------------------------- lengths (-1 means null)

def _read_int16_length(buf: memoryview, pos: int) -> tuple[int, int]:
    return INT16.unpack_from(buf, pos)[0], pos + 2


def _read_int32_length(buf: memoryview, pos: int) -> tuple[int, int]:
    return INT32.unpack_from(buf, pos)[0], pos + 4


def _read_compact_length(buf: memoryview, pos: int) -> tuple[int, int]:
    value, pos = read_uvarint(buf, pos)
    return value - 1, pos


def _compact_length(n: int) -> bytes:
    return uvarint(n + 1)


@dataclass(frozen=True, slots=True)
class _Lengths:
    read: LengthReader
    write: LengthWriter
    null: bytes
    limit: int  # the largest length the prefix can carry


_COMPACT: Final = _Lengths(_read_compact_length, _compact_length, b"\x00", 0x7FFFFFFE)
_INT16_LENGTHS: Final = _Lengths(_read_int16_length, INT16.pack, INT16.pack(-1), 0x7FFF)
_INT32_LENGTHS: Final = _Lengths(_read_int32_length, INT32.pack, INT32.pack(-1), 0x7FFFFFFF)


def _lengths(prefixed: str, compact: bool) -> _Lengths:
    """The length prefix of a "string", "bytes", "records" or "array" value."""
    if compact:
        return _COMPACT
    # Classic encoding: strings carry an int16 length, bytes/records/arrays an int32.
    return _INT16_LENGTHS if prefixed == "string" else _INT32_LENGTHS


# ---------------------------------------------------------------- primitive readers and writers

def _fixed_reader(type_name: str) -> Reader:
    st = struct.Struct(">" + FIXED_FORMAT[type_name])
    unpack, size = st.unpack_from, st.size

    def read(buf: memoryview, pos: int) -> tuple[Any, int]:
        return unpack(buf, pos)[0], pos + size
    return read


def _fixed_writer(type_name: str) -> Writer:
    pack = struct.Struct(">" + FIXED_FORMAT[type_name]).pack

    def write(value: Any, out: Out) -> None:
        out.cur += pack(value)
    return write


# A nullable struct is preceded by an int8: -1 null, 1 present (Kafka's MessageDataGenerator).
_INT8: Final = struct.Struct(">b")
_NULL_STRUCT: Final = _INT8.pack(-1)
_PRESENT_STRUCT: Final = _INT8.pack(1)


def _nullable_struct_reader(codec: StructCodec) -> Reader:
    read_struct, unpack = codec.read, _INT8.unpack_from

    def read(buf: memoryview, pos: int) -> tuple[dict[str, Any] | None, int]:
        marker = unpack(buf, pos)[0]
        if marker < 0:
            return None, pos + 1
        return read_struct(buf, pos + 1)
    return read


def _nullable_struct_writer(codec: StructCodec) -> Writer:
    write_struct = codec.write

    def write(value: dict[str, Any] | None, out: Out) -> None:
        if value is None:
            out.cur += _NULL_STRUCT
            return
        out.cur += _PRESENT_STRUCT
        write_struct(value, out)
    return write


def _string_reader(lengths: _Lengths, nullable: bool, where: str) -> Reader:
    read_length = lengths.read

    def read(buf: memoryview, pos: int) -> tuple[str | None, int]:
        n, pos = read_length(buf, pos)
        if n < 0:
            if nullable:
                return None, pos
            raise KafkaCodecError(f"{where}: null in a non-nullable string")
        end = pos + n
        if end > len(buf):
            raise _short(where)
        return str(buf[pos:end], "utf-8"), end
    return read


def _bytes_reader(lengths: _Lengths, nullable: bool, where: str) -> Reader:
    read_length = lengths.read

    def read(buf: memoryview, pos: int) -> tuple[memoryview | None, int]:
        n, pos = read_length(buf, pos)
        if n < 0:
            if nullable:
                return None, pos
            raise KafkaCodecError(f"{where}: null in a non-nullable bytes field")
        end = pos + n
        if end > len(buf):
            raise _short(where)
        return buf[pos:end], end  # a view of the frame: large payloads are never copied
    return read


def _uuid_reader(where: str) -> Reader:
    def read(buf: memoryview, pos: int) -> tuple[uuid.UUID, int]:
        end = pos + 16
        if end > len(buf):
            raise _short(where)
        return uuid.UUID(bytes=bytes(buf[pos:end])), end
    return read


def _string_writer(lengths: _Lengths, nullable: bool, where: str) -> Writer:
    write_length, null, limit = lengths.write, lengths.null, lengths.limit

    def write(value: str | None, out: Out) -> None:
        if value is None:
            if not nullable:
                raise KafkaCodecError(f"{where}: None in a non-nullable string")
            out.cur += null
            return
        data = value.encode("utf-8")
        if len(data) > limit:
            raise KafkaCodecError(f"{where}: string of {len(data)} bytes is too long")
        out.cur += write_length(len(data))
        out.cur += data
    return write


def _bytes_writer(lengths: _Lengths, nullable: bool, where: str) -> Writer:
    write_length, null = lengths.write, lengths.null

    def write(value: bytes | bytearray | memoryview | None, out: Out) -> None:
        if value is None:
            if not nullable:
                raise KafkaCodecError(f"{where}: None in a non-nullable bytes field")
            out.cur += null
            return
        out.cur += write_length(nbytes(value))
        out.cur += value
    return write


def _records_writer(lengths: _Lengths, nullable: bool, where: str) -> Writer:
    """Records: one buffer or a list of buffers, attached to the output without copying."""
    write_length, null, limit = lengths.write, lengths.null, lengths.limit

    def write(value: Any, out: Out) -> None:
        if value is None:
            if not nullable:
                raise KafkaCodecError(f"{where}: None in non-nullable records")
            out.cur += null
            return
        if isinstance(value, list | tuple):
            total = sum(nbytes(part) for part in value)
            if total > limit:
                raise KafkaCodecError(f"{where}: {total} bytes of records is too long")
            out.cur += write_length(total)
            for part in value:
                if nbytes(part):
                    out.attach(part)
            return
        size = nbytes(value)
        out.cur += write_length(size)
        if size < ATTACH_THRESHOLD:
            out.cur += value
        else:
            out.attach(value)
    return write


def _write_uuid(value: uuid.UUID, out: Out) -> None:
    out.cur += value.bytes


# ---------------------------------------------------------------- arrays

def _array_reader(lengths: _Lengths, nullable: bool, fixed_code: str | None, read_element: Reader,
                  where: str) -> Reader:
    read_length = lengths.read

    if fixed_code is not None:
        size = struct.calcsize(">" + fixed_code)

        def read_fixed(buf: memoryview, pos: int) -> tuple[list[Any] | None, int]:
            n, pos = read_length(buf, pos)
            if n < 0:
                if nullable:
                    return None, pos
                raise KafkaCodecError(f"{where}: null in a non-nullable array")
            end = pos + n * size
            if end > len(buf):
                raise _short(where)
            return list(struct.unpack_from(f">{n}{fixed_code}", buf, pos)), end
        return read_fixed

    def read(buf: memoryview, pos: int) -> tuple[list[Any] | None, int]:
        n, pos = read_length(buf, pos)
        if n < 0:
            if nullable:
                return None, pos
            raise KafkaCodecError(f"{where}: null in a non-nullable array")
        # Every element takes at least one byte, so a count beyond the remaining bytes is a lie;
        # refusing it here bounds both the loop and the list.
        if n > len(buf) - pos:
            raise _short(where)
        items: list[Any] = []
        append = items.append
        for _ in range(n):
            item, pos = read_element(buf, pos)
            append(item)
        return items, pos
    return read


def _array_writer(lengths: _Lengths, nullable: bool, fixed_code: str | None, write_element: Writer,
                  where: str) -> Writer:
    write_length, null = lengths.write, lengths.null

    def write(value: Any, out: Out) -> None:
        if value is None:
            if not nullable:
                raise KafkaCodecError(f"{where}: None in a non-nullable array")
            out.cur += null
            return
        n = len(value)
        out.cur += write_length(n)
        if fixed_code is not None:
            out.cur += struct.pack(f">{n}{fixed_code}", *value)
        else:
            for item in value:
                write_element(item, out)
    return write


# ---------------------------------------------------------------- one field at one version

def _decode_default(field: Field, version: int, struct_codec: StructCodec | None) -> Callable[[], Any]:
    """A factory of the value a decoder reports for an absent tagged field (fresh when mutable)."""
    if field.is_array:
        if field.default is None and version in field.nullable:
            return lambda: None
        return list
    if struct_codec is not None:
        if field.default is None and version in field.nullable:
            return lambda: None
        return struct_codec.defaults
    value = encode_default(field, version)
    return lambda: value


def _element_codec(field: Field, version: int, flexible: bool, nullable: bool,
                   where: str) -> tuple[Reader, Writer, StructCodec | None]:
    kind = field.element_type
    if field.is_struct:
        codec = compile_struct(where, field.fields, version, flexible)
        if nullable:
            return _nullable_struct_reader(codec), _nullable_struct_writer(codec), codec
        return codec.read, codec.write, codec
    if kind in FIXED_FORMAT:
        return _fixed_reader(kind), _fixed_writer(kind), None
    if kind == "uuid":
        return _uuid_reader(where), _write_uuid, None
    lengths = _lengths(kind, flexible)
    if kind == "string":
        return _string_reader(lengths, nullable, where), _string_writer(lengths, nullable, where), None
    if kind == "bytes":
        return _bytes_reader(lengths, nullable, where), _bytes_writer(lengths, nullable, where), None
    assert kind == "records", kind
    return _bytes_reader(lengths, nullable, where), _records_writer(lengths, nullable, where), None


def _field_codec(field: Field, version: int, flexible: bool,
                 where: str) -> tuple[Reader, Writer, StructCodec | None]:
    nullable = version in field.nullable
    if not field.is_array:
        return _element_codec(field, version, flexible, nullable, where)
    # Array elements are never null; only the array itself may be.
    read_element, write_element, _ = _element_codec(field, version, flexible, False, where)
    fixed_code = FIXED_FORMAT.get(field.element_type)
    lengths = _lengths("array", flexible)
    return (_array_reader(lengths, nullable, fixed_code, read_element, where),
            _array_writer(lengths, nullable, fixed_code, write_element, where), None)


# ---------------------------------------------------------------- steps of a struct

def _fixed_run_steps(run: list[Field], version: int) -> tuple[ReadStep, WriteStep]:
    """Consecutive fixed-width fields read and written with one struct.Struct."""
    st = struct.Struct(">" + "".join(FIXED_FORMAT[field.type] for field in run))
    unpack, pack, size = st.unpack_from, st.pack, st.size
    keys = tuple(field.key for field in run)
    defaults = tuple(encode_default(field, version) for field in run)
    if len(run) == 1:
        (key,), (default,) = keys, defaults

        def read_one(buf: memoryview, pos: int, d: dict[str, Any]) -> int:
            d[key] = unpack(buf, pos)[0]
            return pos + size

        def write_one(d: dict[str, Any], out: Out) -> None:
            out.cur += pack(d.get(key, default))
        return read_one, write_one

    def read_run(buf: memoryview, pos: int, d: dict[str, Any]) -> int:
        d.update(zip(keys, unpack(buf, pos), strict=True))
        return pos + size

    def write_run(d: dict[str, Any], out: Out) -> None:
        out.cur += pack(*map(d.get, keys, defaults))
    return read_run, write_run


def _value_steps(key: str, read: Reader, write: Writer, default: Any) -> tuple[ReadStep, WriteStep]:
    def read_step(buf: memoryview, pos: int, d: dict[str, Any]) -> int:
        d[key], pos = read(buf, pos)
        return pos

    def write_step(d: dict[str, Any], out: Out) -> None:
        write(d.get(key, default), out)
    return read_step, write_step


# ---------------------------------------------------------------- tagged fields

@dataclass(frozen=True, slots=True)
class _Tagged:
    tag: int
    key: str
    read: Reader
    write: Writer
    default_bytes: bytes  # the encoding of the default: a value encoding to it is not sent
    make_default: Callable[[], Any]


def _tag_reader(tagged: list[_Tagged], where: str) -> Callable[[memoryview, int, dict[str, Any]], int]:
    by_tag = {entry.tag: entry for entry in tagged}
    defaults = tuple((entry.key, entry.make_default) for entry in tagged)

    def read_tags(buf: memoryview, pos: int, d: dict[str, Any]) -> int:
        for key, make_default in defaults:
            d[key] = make_default()
        count, pos = read_uvarint(buf, pos)
        if count == 0:
            return pos
        if count > len(buf) - pos:
            raise _short(where + " tagged fields")
        for _ in range(count):
            tag, pos = read_uvarint(buf, pos)
            size, pos = read_uvarint(buf, pos)
            end = pos + size
            if end > len(buf):
                raise _short(f"{where} tag {tag}")
            entry = by_tag.get(tag)
            if entry is not None:
                # A view cut at the field's end: a lying field cannot read its neighbours.
                d[entry.key], used = entry.read(buf[:end], pos)
                if used != end:
                    raise KafkaCodecError(f"{where} tag {tag}: {size} bytes declared, {used - pos} used")
            pos = end  # unknown tags are skipped, as Kafka does
        return pos
    return read_tags


def _tag_writer(tagged: list[_Tagged]) -> Callable[[dict[str, Any], Out], None]:
    tagged_keys = frozenset(entry.key for entry in tagged)

    def write_tags(d: dict[str, Any], out: Out) -> None:
        if tagged_keys.isdisjoint(d):
            out.cur += b"\x00"
            return
        fields: list[tuple[int, bytes]] = []
        for entry in tagged:  # ascending tag order, as the protocol requires
            if entry.key in d:
                scratch = Out()
                entry.write(d[entry.key], scratch)
                data = scratch.getvalue()
                if data != entry.default_bytes:
                    fields.append((entry.tag, data))
        out.cur += uvarint(len(fields))
        for tag, data in fields:
            out.cur += uvarint(tag)
            out.cur += uvarint(len(data))
            out.cur += data
    return write_tags


# ---------------------------------------------------------------- structs

def compile_struct(where: str, fields: tuple[Field, ...], version: int, flexible: bool) -> StructCodec:
    """The reader and writer of a struct with these fields at `version`.

    `flexible` selects compact lengths and the tagged-field section after the struct.
    """
    present = [field for field in fields if version in field.versions]
    regular = [field for field in present if not (flexible and version in field.tagged)]
    tagged_fields = sorted((field for field in present if flexible and version in field.tagged),
                           key=lambda field: field.tag or 0)
    assert len({field.tag for field in tagged_fields}) == len(tagged_fields), f"{where}: duplicate tag"

    read_steps: list[ReadStep] = []
    write_steps: list[WriteStep] = []
    decode_defaults: list[tuple[str, Callable[[], Any]]] = []
    run: list[Field] = []

    def close_run() -> None:
        if run:
            read_step, write_step = _fixed_run_steps(run, version)
            read_steps.append(read_step)
            write_steps.append(write_step)
            run.clear()

    for field in regular:
        nested = None
        if not field.is_array and field.type in FIXED_FORMAT:
            run.append(field)
        else:
            close_run()
            read, write, nested = _field_codec(field, version, flexible, f"{where}.{field.name}")
            read_step, write_step = _value_steps(field.key, read, write, encode_default(field, version))
            read_steps.append(read_step)
            write_steps.append(write_step)
        decode_defaults.append((field.key, _decode_default(field, version, nested)))
    close_run()

    tagged: list[_Tagged] = []
    for field in tagged_fields:
        assert field.tag is not None
        read, write, nested = _field_codec(field, version, flexible, f"{where}.{field.name}")
        scratch = Out()
        write(encode_default(field, version), scratch)
        make_default = _decode_default(field, version, nested)
        tagged.append(_Tagged(field.tag, field.key, read, write, scratch.getvalue(), make_default))
        decode_defaults.append((field.key, make_default))

    all_keys = frozenset(field.key for field in fields)
    version_keys = frozenset(field.key for field in present)
    steps = tuple(read_steps)
    wsteps = tuple(write_steps)

    def check_keys(d: dict[str, Any]) -> None:
        unknown = sorted(key for key in d if key not in all_keys)
        if unknown:
            raise KafkaCodecError(f"{where}: unknown field(s) {unknown}")
        # Keys of fields absent from this version are skipped (Kafka's "ignorable").

    def defaults() -> dict[str, Any]:
        return {key: make() for key, make in decode_defaults}

    def write_plain(d: dict[str, Any], out: Out) -> None:
        if not version_keys.issuperset(d):
            check_keys(d)
        for step in wsteps:
            step(d, out)

    if not flexible:
        def read_plain(buf: memoryview, pos: int) -> tuple[dict[str, Any], int]:
            d: dict[str, Any] = {}
            for step in steps:
                pos = step(buf, pos, d)
            return d, pos
        return StructCodec(read_plain, write_plain, defaults)

    read_tags = _tag_reader(tagged, where)
    write_tags = _tag_writer(tagged)

    def read_flexible(buf: memoryview, pos: int) -> tuple[dict[str, Any], int]:
        d: dict[str, Any] = {}
        for step in steps:
            pos = step(buf, pos, d)
        return d, read_tags(buf, pos, d)

    def write_flexible(d: dict[str, Any], out: Out) -> None:
        write_plain(d, out)
        write_tags(d, out)
    return StructCodec(read_flexible, write_flexible, defaults)
