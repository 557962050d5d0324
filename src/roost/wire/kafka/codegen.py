"""Generates Python source for one reader and one writer per (struct, version) with the whole layout
inlined, and compiles it once: the specialised twin of the closure codec that the tests hold it
against (tests/wire_kafka/closure_codec.py).

The closure codec's `compile_struct` builds a chain of closures, one call per field (or per run of fixed-width
fields) and per nested element; that walk costs more than the bytes it moves for the small messages
a broker mostly sees. `generate_struct` decides the same things once, at generation time, and writes
them down as straight-line code: a run of fixed-width fields is one `struct` unpack into locals,
compact lengths are read inline (one-byte varints without a call), nested arrays are loops inside
the same function, and the decoded dict is one dict display. Tagged-field sections take a fast path
when empty (the usual case) and call a generated helper per section otherwise.

The behaviour is the closure codec's, to the byte and to the error: same output bytes and output
buffers (records attached uncopied on the same rule), same decoded dicts (keys in the same order,
the same defaults, memoryview slices of the frame), the same exceptions with the same messages.
tests/wire_kafka/test_codegen.py checks this with hypothesis for every message and version.

The generated source is kept on the codec (`StructCodec.source`, `generated_source`) and registered
with `linecache`, so tracebacks through it show the generated lines. Names in it follow the schema:
a field's local is its snake_case key (prefixed by its array's key when nested), a struct helper is
named after the field path.
"""

from __future__ import annotations

import builtins
import keyword
import linecache
import math
import re
import struct
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any, Final

from roost.wire.kafka.exceptions import KafkaCodecError
from roost.wire.kafka.primitives import (
    ATTACH_THRESHOLD,
    FIXED_FORMAT,
    SMALL_UVARINTS,
    Out,
    read_uvarint,
    uvarint,
)
from roost.wire.kafka.schema import Field
from roost.wire.kafka.struct_codec import ZERO_UUID, StructCodec, encode_default

# Length prefixes: the largest value each can carry (as the closure codec's _Lengths.limit).
_COMPACT_LIMIT: Final = 0x7FFFFFFE
_INT16_LIMIT: Final = 0x7FFF
_INT32_LIMIT: Final = 0x7FFFFFFF

# Names the generated code uses for its own purposes; a field never gets one of them as its local.
_FIXED_LOCALS: Final = frozenset({
    "buf", "pos", "buf_len", "n", "end", "d", "out", "cur", "data", "scratch", "fields", "part",
    "total", "count", "tag", "size", "tag_end", "tag_start", "tbuf", "tbuf_len", "value", "_",
})
_RESERVED: Final = frozenset(keyword.kwlist) | frozenset(dir(builtins)) | _FIXED_LOCALS


# ---------------------------------------------------------------- run-time helpers of generated code

def _check_keys(d: dict[str, Any], all_keys: frozenset[str], where: str) -> None:
    """Refuse keys no version of the struct has (keys of other versions are skipped, as Kafka does)."""
    unknown = sorted(key for key in d if key not in all_keys)
    if unknown:
        raise KafkaCodecError(f"{where}: unknown field(s) {unknown}")


def _skip_tags(buf: memoryview, pos: int, where: str) -> int:
    """A tagged-field section of a struct that knows no tags: every field is skipped."""
    count, pos = read_uvarint(buf, pos)
    if count == 0:
        return pos
    if count > len(buf) - pos:
        raise KafkaCodecError(f"{where} tagged fields: length runs past the end of the data")
    for _ in range(count):
        tag, pos = read_uvarint(buf, pos)
        size, pos = read_uvarint(buf, pos)
        end = pos + size
        if end > len(buf):
            raise KafkaCodecError(f"{where} tag {tag}: length runs past the end of the data")
        pos = end
    return pos


# Fixed-width arrays are usually short: their packers and unpackers are made once per count below this.
_ARRAY_STRUCTS_BELOW: Final = 16

_RUNTIME: Final[dict[str, Any]] = {
    "_KafkaCodecError": KafkaCodecError,
    "_Out": Out,
    "_UUID": uuid.UUID,
    # uuid.UUID(bytes=b) for a 16-byte b checks its arguments and fills the two slots below; the
    # decoder, which has checked the length, fills them directly (the same object, a fifth of the time).
    "_new_object": object.__new__,
    "_int_from_bytes": int.from_bytes,
    # The slots' member descriptors, from the class's __dict__ (the checker knows them as Any).
    "_set_uuid_int": uuid.UUID.__dict__["int"].__set__,
    "_set_uuid_is_safe": uuid.UUID.__dict__["is_safe"].__set__,
    "_UUID_SAFETY_UNKNOWN": uuid.SafeUUID.unknown,
    "_ZERO_UUID": ZERO_UUID,
    "_EMPTY_STRUCT": {},  # never mutated: a missing struct field writes its fields' defaults
    "_LIST_OR_TUPLE": (list, tuple),
    "_read_uvarint": read_uvarint,
    "_uvarint": uvarint,
    "_UVARINTS": SMALL_UVARINTS,
    "_check_keys": _check_keys,
    "_skip_tags": _skip_tags,
    "_struct_pack": struct.pack,
    "_struct_unpack_from": struct.unpack_from,
}
assert len(SMALL_UVARINTS) == 1024  # the inline `x < 1024` tests below rely on it


# ---------------------------------------------------------------- source building

class _Function:
    """The lines of one generated function and the local names it has handed out."""

    def __init__(self, signature: str, taken: set[str]) -> None:
        self.lines = [signature]
        self.depth = 1
        self._taken = taken  # the module's globals and the reserved names, shared
        self._locals: set[str] = set()

    def fresh(self, base: str) -> str:
        """A new local name starting with `base`, unused in this function and among the globals."""
        base = re.sub(r"\W", "_", base)
        name, counter = base, 1
        while name in self._taken or name in self._locals:
            counter += 1
            name = f"{base}_{counter}"
        self._locals.add(name)
        return name

    def line(self, text: str) -> None:
        self.lines.append("    " * self.depth + text)

    @contextmanager
    def block(self, header: str) -> Iterator[None]:
        self.line(header)
        self.depth += 1
        try:
            yield
        finally:
            self.depth -= 1

    @contextmanager
    def unless_null(self, condition: str, on_null: str | None, error: str) -> Iterator[None]:
        """Code for a value that is not null (`condition` true means null): on null, `on_null` runs
        where the value may be null, and KafkaCodecError(`error`) is raised where it may not."""
        if on_null is None:
            with self.block(f"if {condition}:"):
                self.line(f"raise _KafkaCodecError({error!r})")
            yield
            return
        with self.block(f"if {condition}:"):
            self.line(on_null)
        with self.block("else:"):
            yield


class _Module:
    """The generated module: its functions, the names it uses, and the globals it needs."""

    def __init__(self) -> None:
        self.functions: list[_Function] = []
        self.names: set[str] = set(_RESERVED) | set(_RUNTIME)
        self.namespace: dict[str, Any] = dict(_RUNTIME)
        self._constants: dict[tuple[type, Any], str] = {}
        # Filled after exec: global name -> (writer function name, value whose encoding it holds).
        self.default_encodings: list[tuple[str, str, Any]] = []

    def function(self, signature: str) -> _Function:
        function = _Function(signature, self.names)
        self.functions.append(function)
        return function

    def fresh(self, base: str) -> str:
        """A new global name starting with `base` (globals start with "_", locals never do)."""
        base = re.sub(r"\W", "_", base)
        name, counter = base, 1
        while name in self.names:
            counter += 1
            name = f"{base}_{counter}"
        self.names.add(name)
        return name

    def constant(self, value: Any, hint: str = "_const") -> str:
        """An expression for `value`: a literal where exact, else a global (named from `hint`)."""
        if value is None or isinstance(value, bool | int | str | bytes):
            return repr(value)
        if isinstance(value, float) and math.isfinite(value):
            return repr(value)
        if value == () and type(value) is tuple:
            return "()"
        if value is ZERO_UUID:
            return "_ZERO_UUID"
        if isinstance(value, dict) and not value:
            return "_EMPTY_STRUCT"
        # Key sets by value and name (equal sets of two structs get their own names, for the reader).
        key = (type(value), (hint, value) if isinstance(value, frozenset) else id(value))
        name = self._constants.get(key)
        if name is None:
            name = self.fresh(hint)
            self.namespace[name] = value
            self._constants[key] = name
        return name

    def array_structs(self, kind: str, code: str) -> str:
        """A tuple of the bound `unpack_from` or `pack` of ">{n}{code}" for n below _ARRAY_STRUCTS_BELOW."""
        name = f"_{kind}_arrays_{code.replace('?', 'bool')}"
        if name not in self.namespace:
            compiled = [struct.Struct(f">{count}{code}") for count in range(_ARRAY_STRUCTS_BELOW)]
            self.namespace[name] = tuple(item.unpack_from if kind == "unpack" else item.pack for item in compiled)
            self.names.add(name)
        return name

    def struct_function(self, kind: str, code: str) -> str:
        """The bound `unpack_from` or `pack` of the big-endian struct with format `code`."""
        name = f"_{kind}_{code.replace('?', 'bool').replace('x', '_pad')}"
        if name not in self.namespace:
            compiled = struct.Struct(">" + code)
            self.namespace[name] = compiled.unpack_from if kind == "unpack" else compiled.pack
            self.names.add(name)
        return name

    def source(self) -> str:
        return "\n\n".join("\n".join(function.lines) for function in self.functions) + "\n"


def _split(fields: tuple[Field, ...], version: int, flexible: bool) -> tuple[list[Field], list[Field]]:
    """The fields of `version`: regular ones in schema order, tagged ones in tag order (as the closure codec)."""
    present = [field for field in fields if version in field.versions]
    regular = [field for field in present if not (flexible and version in field.tagged)]
    tagged = sorted((field for field in present if flexible and version in field.tagged),
                    key=lambda field: field.tag or 0)
    return regular, tagged


def _fixed_runs(regular: list[Field]) -> Iterator[list[Field]]:
    """The regular fields grouped as the closure codec groups them: runs of consecutive fixed-width
    fields, and every other field alone."""
    run: list[Field] = []
    for field in regular:
        if not field.is_array and field.type in FIXED_FORMAT:
            run.append(field)
            continue
        if run:
            yield run
            run = []
        yield [field]
    if run:
        yield run


def _is_fixed_run(group: list[Field]) -> bool:
    return not group[0].is_array and group[0].type in FIXED_FORMAT


def _dict_display(entries: list[tuple[str, str]]) -> str:
    return "{" + ", ".join(f"{key!r}: {expr}" for key, expr in entries) + "}"


class _Generator:
    """Writes the functions of one struct at one version into a `_Module`."""

    def __init__(self, module: _Module, version: int, flexible: bool) -> None:
        self.module = module
        self.version = version
        self.flexible = flexible

    # ------------------------------------------------------------ defaults

    def decode_default(self, field: Field) -> str:
        """An expression for what a decoder reports for an absent field (fresh when mutable)."""
        if field.is_array:
            return "None" if field.default is None and self.version in field.nullable else "[]"
        if field.is_struct:
            if field.default is None and self.version in field.nullable:
                return "None"
            return self.struct_defaults(field.fields)
        return self.module.constant(encode_default(field, self.version))

    def struct_defaults(self, fields: tuple[Field, ...]) -> str:
        regular, tagged = _split(fields, self.version, self.flexible)
        return _dict_display([(field.key, self.decode_default(field)) for field in regular + tagged])

    # ------------------------------------------------------------ readers

    def read_length(self, f: _Function, prefixed: str, buf: str) -> None:
        """Leaves the length (-1 for null) in `n` and `pos` after the prefix."""
        if self.flexible:
            f.line(f"n = {buf}[pos] - 1")
            with f.block("if n < 127:"):
                f.line("pos += 1")
            with f.block("else:"):
                f.line(f"n, pos = _read_uvarint({buf}, pos)")
                f.line("n -= 1")
        elif prefixed == "string":
            f.line(f"n = {self.module.struct_function('unpack', 'h')}({buf}, pos)[0]")
            f.line("pos += 2")
        else:
            f.line(f"n = {self.module.struct_function('unpack', 'i')}({buf}, pos)[0]")
            f.line("pos += 4")

    def read_struct(self, f: _Function, fields: tuple[Field, ...], where: str, prefix: str,
                    buf: str, buf_len: str) -> str:
        """Reads a struct's fields into locals; returns the dict display that assembles them."""
        regular, tagged = _split(fields, self.version, self.flexible)
        entries: list[tuple[str, str]] = []
        for group in _fixed_runs(regular):
            if _is_fixed_run(group):
                names = [f.fresh(prefix + field.key) for field in group]
                code = "".join(FIXED_FORMAT[field.type] for field in group)
                unpack = self.module.struct_function("unpack", code)
                f.line("# " + ", ".join(f"{field.name} {field.type}" for field in group))
                if len(group) == 1:
                    f.line(f"{names[0]} = {unpack}({buf}, pos)[0]")
                else:
                    f.line(f"{', '.join(names)} = {unpack}({buf}, pos)")
                f.line(f"pos += {struct.calcsize('>' + code)}")
                entries.extend((field.key, name) for field, name in zip(group, names, strict=True))
                continue
            (field,) = group
            name = f.fresh(prefix + field.key)
            self.read_value(f, field, f"{where}.{field.name}", name, buf, buf_len)
            entries.append((field.key, name))
        if self.flexible:
            names = [f.fresh(prefix + field.key) for field in tagged]
            f.line(f"# tagged fields of {where}" + (
                f": {', '.join(f'{field.tag} {field.name}' for field in tagged)}" if tagged else ""))
            with f.block(f"if {buf}[pos] == 0:"):
                f.line("pos += 1")
                for field, name in zip(tagged, names, strict=True):
                    f.line(f"{name} = {self.decode_default(field)}")
            with f.block("else:"):
                if tagged:
                    reader = self.tag_reader(tagged, where, prefix)
                    f.line(f"{', '.join(names)}, pos = {reader}({buf}, pos)")
                else:
                    f.line(f"pos = _skip_tags({buf}, pos, {where!r})")
            entries.extend((field.key, name) for field, name in zip(tagged, names, strict=True))
        return _dict_display(entries)

    def tag_reader(self, tagged: list[Field], where: str, prefix: str) -> str:
        """A function reading a non-empty tagged-field section: (values in tag order..., pos)."""
        name = self.module.fresh("_read_tags_" + where.replace(".", "_"))
        f = self.module.function(f"def {name}(buf, pos):")
        names = [f.fresh(prefix + field.key) for field in tagged]
        f.line("# defaults, replaced by the fields the section carries")
        for field, local in zip(tagged, names, strict=True):
            f.line(f"{local} = {self.decode_default(field)}")
        f.line("count, pos = _read_uvarint(buf, pos)")
        with f.block("if count:"):
            f.line("buf_len = len(buf)")
            with f.block("if count > buf_len - pos:"):
                f.line(f"raise _KafkaCodecError({where + ' tagged fields: length runs past the end of the data'!r})")
            with f.block("for _ in range(count):"):
                f.line("tag, pos = _read_uvarint(buf, pos)")
                f.line("size, pos = _read_uvarint(buf, pos)")
                f.line("tag_end = pos + size")
                with f.block("if tag_end > buf_len:"):
                    f.line(f"raise _KafkaCodecError({where!r} + f' tag {{tag}}: length runs past the end of the data')")
                for index, (field, local) in enumerate(zip(tagged, names, strict=True)):
                    with f.block(f"{'if' if index == 0 else 'elif'} tag == {field.tag}:  # {field.name}"):
                        # A view cut at the field's end: a lying field cannot read its neighbours.
                        f.line("tag_start = pos")
                        f.line("tbuf = buf[:tag_end]")
                        f.line("tbuf_len = tag_end")
                        self.read_value(f, field, f"{where}.{field.name}", local, "tbuf", "tbuf_len")
                        with f.block("if pos != tag_end:"):
                            f.line(f"raise _KafkaCodecError({where!r} + f' tag {{tag}}: {{size}} bytes declared, "
                                   "{pos - tag_start} used')")
                f.line("pos = tag_end  # unknown tags are skipped, as Kafka does")
        f.line(f"return {', '.join(names)}, pos")
        return name

    def describe(self, f: _Function, field: Field) -> None:
        nullable = self.version in field.nullable
        f.line(f"# {field.name}: {field.type}" + (" (nullable)" if nullable else ""))

    def read_value(self, f: _Function, field: Field, where: str, target: str, buf: str, buf_len: str) -> None:
        nullable = self.version in field.nullable
        self.describe(f, field)
        if not field.is_array:
            self.read_element(f, field, where, target, buf, buf_len, nullable)
            return
        self.read_length(f, "array", buf)
        with f.unless_null("n < 0", f"{target} = None" if nullable else None,
                           f"{where}: null in a non-nullable array"):
            code = FIXED_FORMAT.get(field.element_type)
            if code is not None:
                f.line(f"end = pos + n * {struct.calcsize('>' + code)}")
                with f.block(f"if end > {buf_len}:"):
                    f.line(f"raise _KafkaCodecError({where + ': length runs past the end of the data'!r})")
                f.line(f"if n < {_ARRAY_STRUCTS_BELOW}:")
                f.line(f"    {target} = list({self.module.array_structs('unpack', code)}[n]({buf}, pos))")
                f.line("else:")
                f.line(f"    {target} = list(_struct_unpack_from('>%d{code}' % n, {buf}, pos))")
                f.line("pos = end")
                return
            # Every element takes at least one byte, so a count beyond the remaining bytes is a lie;
            # refusing it here bounds both the loop and the list.
            with f.block(f"if n > {buf_len} - pos:"):
                f.line(f"raise _KafkaCodecError({where + ': length runs past the end of the data'!r})")
            f.line(f"{target} = []")
            # A countdown: cheaper than making a range for the short arrays most messages carry.
            left = f.fresh(field.key + "_left")
            f.line(f"{left} = n")
            with f.block(f"while {left}:"):
                f.line(f"{left} -= 1")
                if field.is_struct:
                    element = self.read_struct(f, field.fields, where, field.key + "_", buf, buf_len)
                else:
                    element = f.fresh(field.key + "_item")
                    self.read_element(f, field, where, element, buf, buf_len, False)
                f.line(f"{target}.append({element})")

    def read_element(self, f: _Function, field: Field, where: str, target: str, buf: str, buf_len: str,
                     nullable: bool) -> None:
        kind = field.element_type
        if field.is_struct and nullable:
            # An int8 before it (as the closure codec's _nullable_struct_reader): below zero, null.
            f.line(f"if {self.module.struct_function('unpack', 'b')}({buf}, pos)[0] < 0:")
            f.line("    pos += 1")
            f.line(f"    {target} = None")
            with f.block("else:"):
                f.line("pos += 1")
                element = self.read_struct(f, field.fields, where, field.key + "_", buf, buf_len)
                f.line(f"{target} = {element}")
            return
        if field.is_struct:
            element = self.read_struct(f, field.fields, where, field.key + "_", buf, buf_len)
            f.line(f"{target} = {element}")
            return
        code = FIXED_FORMAT.get(kind)
        if code is not None:
            f.line(f"{target} = {self.module.struct_function('unpack', code)}({buf}, pos)[0]")
            f.line(f"pos += {struct.calcsize('>' + code)}")
            return
        short = f"raise _KafkaCodecError({where + ': length runs past the end of the data'!r})"
        if kind == "uuid":
            f.line("end = pos + 16")
            with f.block(f"if end > {buf_len}:"):
                f.line(short)
            f.line(f"{target} = _new_object(_UUID)  # uuid.UUID(bytes=...), see _RUNTIME")
            f.line(f"_set_uuid_int({target}, _int_from_bytes({buf}[pos:end], 'big'))")
            f.line(f"_set_uuid_is_safe({target}, _UUID_SAFETY_UNKNOWN)")
            f.line("pos = end")
            return
        self.read_length(f, kind, buf)
        what = "string" if kind == "string" else "bytes field"
        with f.unless_null("n < 0", f"{target} = None" if nullable else None,
                           f"{where}: null in a non-nullable {what}"):
            f.line("end = pos + n")
            with f.block(f"if end > {buf_len}:"):
                f.line(short)
            if kind == "string":
                # Same result and errors as str(view, "utf-8"), through the codec's fast path.
                f.line(f"{target} = {buf}[pos:end].tobytes().decode()")
            else:  # bytes and records: a view of the frame, large payloads are never copied
                f.line(f"{target} = {buf}[pos:end]")
            f.line("pos = end")

    # ------------------------------------------------------------ writers

    def write_length(self, f: _Function, prefixed: str, count: str) -> None:
        """Appends the length prefix of `count` (a local) to `cur`."""
        if self.flexible:
            f.line(f"cur += _UVARINTS[{count} + 1] if {count} < 1023 else _uvarint({count} + 1)")
        elif prefixed == "string":
            f.line(f"cur += {self.module.struct_function('pack', 'h')}({count})")
        else:
            f.line(f"cur += {self.module.struct_function('pack', 'i')}({count})")

    def null_bytes(self, prefixed: str) -> str:
        if self.flexible:
            return repr(b"\x00")
        return repr(struct.pack(">h" if prefixed == "string" else ">i", -1))

    def write_struct(self, f: _Function, fields: tuple[Field, ...], where: str, d: str, out: str,
                     prefix: str) -> None:
        """Writes the struct held in local `d` to `cur` (the current buffer of Out `out`)."""
        regular, tagged = _split(fields, self.version, self.flexible)
        slug = where.replace(".", "_")
        version_keys = self.module.constant(frozenset(field.key for field in regular + tagged),
                                            f"_keys_{slug}_v{self.version}")
        all_keys = self.module.constant(frozenset(field.key for field in fields), f"_any_version_keys_{slug}")
        with f.block(f"if not {version_keys}.issuperset({d}):"):
            f.line(f"_check_keys({d}, {all_keys}, {where!r})")
        get = f.fresh(prefix + "get")
        if regular:
            f.line(f"{get} = {d}.get")
        groups = list(_fixed_runs(regular))
        for index, group in enumerate(groups):
            if _is_fixed_run(group):
                code = "".join(FIXED_FORMAT[field.type] for field in group)
                comment = ", ".join(f"{field.name} {field.type}" for field in group)
                if self.flexible and not tagged and index == len(groups) - 1:
                    # The struct's empty tagged-field section packed with its last fields: a zero
                    # count is a pad byte.
                    code += "x"
                    comment += ", no tagged fields"
                pack = self.module.struct_function("pack", code)
                values = ", ".join(
                    f"{get}({field.key!r}, {self.module.constant(encode_default(field, self.version))})"
                    for field in group)
                f.line("# " + comment)
                f.line(f"cur += {pack}({values})")
                continue
            (field,) = group
            name = f.fresh(prefix + field.key)
            self.describe(f, field)
            f.line(f"{name} = {get}({field.key!r}, {self.module.constant(encode_default(field, self.version))})")
            self.write_value(f, field, f"{where}.{field.name}", name, out, described=True)
        if not self.flexible:
            return
        if not tagged:
            if not (groups and _is_fixed_run(groups[-1])):
                f.line(f"# no tagged fields in {where}")
                f.line("cur += b'\\x00'")
            return
        f.line(f"# tagged fields of {where}")
        # Whether `d` has any tagged key: what frozenset.isdisjoint(d) says for a dict, cheaper.
        absent = " and ".join(f"{field.key!r} not in {d}" for field in tagged)
        with f.block(f"if {absent}:"):
            f.line("cur += b'\\x00'")
        with f.block("else:"):
            f.line(f"{self.tag_writer(tagged, where, prefix)}({d}, {out})")

    def tag_writer(self, tagged: list[Field], where: str, prefix: str) -> str:
        """A function writing the tagged-field section of a struct that has some tagged key set."""
        field_writers = [self.tagged_field_writer(field, f"{where}.{field.name}", prefix) for field in tagged]
        name = self.module.fresh("_write_tags_" + where.replace(".", "_"))
        f = self.module.function(f"def {name}(d, out):")
        f.line("fields = []")
        for field, (writer, default_encoding) in zip(tagged, field_writers, strict=True):
            with f.block(f"if {field.key!r} in d:"):
                f.line("scratch = _Out()")
                f.line(f"{writer}(d[{field.key!r}], scratch)")
                f.line("data = scratch.getvalue()")
                with f.block(f"if data != {default_encoding}:  # a default is not sent"):
                    f.line(f"fields.append(({field.tag}, data))")
        f.line("cur = out.cur")
        f.line("cur += _uvarint(len(fields))")
        with f.block("for tag, data in fields:  # ascending tag order, as the protocol requires"):
            f.line("cur += _uvarint(tag)")
            f.line("cur += _uvarint(len(data))")
            f.line("cur += data")
        return name

    def tagged_field_writer(self, field: Field, where: str, prefix: str) -> tuple[str, str]:
        """A function writing one tagged field's value, and the global holding its default's bytes."""
        name = self.module.fresh(f"_write_{where.replace('.', '_')}")
        f = self.module.function(f"def {name}(value, out):")
        f.line("cur = out.cur")
        self.write_value(f, field, where, "value", "out")
        default_encoding = self.module.fresh(f"_default_{where.replace('.', '_')}")
        self.module.default_encodings.append((default_encoding, name, encode_default(field, self.version)))
        return name, default_encoding

    def write_value(self, f: _Function, field: Field, where: str, value: str, out: str,
                    described: bool = False) -> None:
        nullable = self.version in field.nullable
        if not described:
            self.describe(f, field)
        if not field.is_array:
            self.write_element(f, field, where, value, out, nullable)
            return
        with f.unless_null(f"{value} is None", f"cur += {self.null_bytes('array')}" if nullable else None,
                           f"{where}: None in a non-nullable array"):
            f.line(f"n = len({value})")
            self.write_length(f, "array", "n")
            code = FIXED_FORMAT.get(field.element_type)
            if code is not None:
                f.line(f"if n < {_ARRAY_STRUCTS_BELOW}:")
                f.line(f"    cur += {self.module.array_structs('pack', code)}[n](*{value})")
                f.line("else:")
                f.line(f"    cur += _struct_pack('>%d{code}' % n, *{value})")
                return
            item = f.fresh(field.key + "_item")
            with f.block(f"for {item} in {value}:"):
                if field.is_struct:
                    self.write_struct(f, field.fields, where, item, out, field.key + "_")
                else:
                    self.write_element(f, field, where, item, out, False)

    def write_element(self, f: _Function, field: Field, where: str, value: str, out: str,
                      nullable: bool) -> None:
        kind = field.element_type
        if field.is_struct and nullable:
            with f.block(f"if {value} is None:"):
                f.line("cur += b'\\xff'  # a null struct (as the closure codec's _nullable_struct_writer)")
            with f.block("else:"):
                f.line("cur += b'\\x01'")
                self.write_struct(f, field.fields, where, value, out, field.key + "_")
            return
        if field.is_struct:
            self.write_struct(f, field.fields, where, value, out, field.key + "_")
            return
        code = FIXED_FORMAT.get(kind)
        if code is not None:
            f.line(f"cur += {self.module.struct_function('pack', code)}({value})")
            return
        if kind == "uuid":
            # UUID.bytes is int.to_bytes(16) behind a property; anything else goes through .bytes.
            f.line(f"cur += {value}.int.to_bytes(16, 'big') if type({value}) is _UUID else {value}.bytes")
            return
        what = {"string": "a non-nullable string", "bytes": "a non-nullable bytes field",
                "records": "non-nullable records"}[kind]
        with f.unless_null(f"{value} is None", f"cur += {self.null_bytes(kind)}" if nullable else None,
                           f"{where}: None in {what}"):
            if kind == "string":
                limit = _COMPACT_LIMIT if self.flexible else _INT16_LIMIT
                f.line(f"data = {value}.encode('utf-8')")
                f.line("n = len(data)")
                with f.block(f"if n > {limit}:"):
                    f.line(f"raise _KafkaCodecError({where!r} + f': string of {{n}} bytes is too long')")
                self.write_length(f, kind, "n")
                f.line("cur += data")
            elif kind == "bytes":
                f.line(f"n = {value}.nbytes if type({value}) is memoryview else len({value})")
                self.write_length(f, kind, "n")
                f.line(f"cur += {value}")
            else:
                self.write_records(f, where, value, out)

    def write_records(self, f: _Function, where: str, value: str, out: str) -> None:
        """Records: one buffer or a list of buffers, attached to the output without copying."""
        limit = _COMPACT_LIMIT if self.flexible else _INT32_LIMIT
        with f.block(f"if isinstance({value}, _LIST_OR_TUPLE):"):
            f.line("total = 0")
            with f.block(f"for part in {value}:"):
                f.line("total += part.nbytes if type(part) is memoryview else len(part)")
            with f.block(f"if total > {limit}:"):
                f.line(f"raise _KafkaCodecError({where!r} + f': {{total}} bytes of records is too long')")
            self.write_length(f, "records", "total")
            with f.block(f"for part in {value}:"), \
                    f.block("if part.nbytes if type(part) is memoryview else len(part):"):
                f.line(f"{out}.attach(part)")
            f.line(f"cur = {out}.cur")
        with f.block("else:"):
            f.line(f"n = {value}.nbytes if type({value}) is memoryview else len({value})")
            self.write_length(f, "records", "n")
            with f.block(f"if n < {ATTACH_THRESHOLD}:  # copying a small buffer beats a list slot"):
                f.line(f"cur += {value}")
            with f.block("else:"):
                f.line(f"{out}.attach({value})")
                f.line(f"cur = {out}.cur")


# ---------------------------------------------------------------- entry point

_cache: dict[tuple[str, tuple[Field, ...], int, bool], StructCodec] = {}


def generate_struct(where: str, fields: tuple[Field, ...], version: int, flexible: bool) -> StructCodec:
    """The generated reader and writer of a struct with these fields at `version` (cached).

    Same signature and same behaviour as the closure codec's `compile_struct` (tests/wire_kafka/closure_codec.py).
    """
    key = (where, fields, version, flexible)
    found = _cache.get(key)
    if found is None:
        found = _generate(where, fields, version, flexible)
        _cache[key] = found
    return found


def generated_source(codec: StructCodec) -> str:
    """The Python source of a generated codec (for reading and debugging)."""
    assert codec.source is not None, "not a generated codec"
    return codec.source


def _generate(where: str, fields: tuple[Field, ...], version: int, flexible: bool) -> StructCodec:
    module = _Module()
    generator = _Generator(module, version, flexible)
    slug = re.sub(r"\W", "_", where)
    read_name = module.fresh(f"read_{slug}_v{version}")
    write_name = module.fresh(f"write_{slug}_v{version}")
    defaults_name = module.fresh(f"defaults_{slug}_v{version}")

    read = module.function(f"def {read_name}(buf, pos):")
    read.line(f'"""{where} v{version}{" (flexible)" if flexible else ""}: (body, position after it)."""')
    read.line("buf_len = len(buf)")
    body = generator.read_struct(read, fields, where, "", "buf", "buf_len")
    read.line(f"return {body}, pos")

    write = module.function(f"def {write_name}(d, out):")
    write.line(f'"""{where} v{version}{" (flexible)" if flexible else ""}: appends the body `d` to `out`."""')
    write.line("cur = out.cur")
    generator.write_struct(write, fields, where, "d", "out", "")

    defaults = module.function(f"def {defaults_name}():")
    defaults.line(f"return {generator.struct_defaults(fields)}")

    source = module.source()
    filename = f"<roost codegen {where} v{version}{' flexible' if flexible else ''}>"
    # Registered so tracebacks and debuggers show the generated lines; an mtime of None keeps
    # linecache.checkcache from dropping the entry.
    linecache.cache[filename] = (len(source), None, source.splitlines(keepends=True), filename)
    namespace = module.namespace
    exec(compile(source, filename, "exec"), namespace)  # our own source, made from our schemas
    for name, writer, value in module.default_encodings:
        scratch = Out()
        namespace[writer](value, scratch)
        namespace[name] = scratch.getvalue()
    return StructCodec(namespace[read_name], namespace[write_name], namespace[defaults_name], source)
