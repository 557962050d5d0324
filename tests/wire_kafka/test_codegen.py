"""The generated codec (codegen.py) against the closure codec (closure_codec.py, the oracle): for every message and
version of the API table, requests and responses, and the embedded structs, the same frames from
the same bodies (the same buffers attached, uncopied), the same decoded bodies from the same
bytes (keys in the same order, values of the same types, views of the same frame), and the same
exception with the same message wherever one of them refuses, on valid bodies, on bodies with
wrong values or unknown keys, on arbitrary bytes and on mutated valid frames."""

from __future__ import annotations

import os
import random
import struct
import traceback
import uuid
from collections.abc import Callable
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from roost.wire.kafka import KafkaCodecError, RequestHeader
from roost.wire.kafka.apis import APIS, DEFAULT_CODECS, GENERATED_CODECS, CodecTable
from roost.wire.kafka.codegen import generate_struct, generated_source
from roost.wire.kafka.framing import KafkaFraming
from roost.wire.kafka.schema import Field, Message
from roost.wire.kafka.schemas import EMBEDDED_STRUCTS
from tests.wire_kafka.closure_codec import compile_struct
from tests.wire_kafka.samples import (
    INT_RANGES,
    client_id_for,
    every_api_version,
    message_of,
    nondefault_body,
    sample_body,
)

GENERIC_CODECS = CodecTable("generic", compile_struct)
GENERIC = KafkaFraming(GENERIC_CODECS)
GENERATED = KafkaFraming(GENERATED_CODECS)
PAIRS = every_api_version()
SIDES = [(key, is_request) for key in sorted(APIS) for is_request in (True, False)]
STRUCTS = [(name, version) for name, message in sorted(EMBEDDED_STRUCTS.items())
           for version in range(message.versions.low, message.versions.high + 1)]
# Per API side and property: 40 in the suite (its most expensive module at 120: three minutes of
# CPU over ~1,100 cases); ROOST_CODEGEN_EXAMPLES=1000 for a long run after a change to codegen.
PROPERTY = settings(max_examples=int(os.environ.get("ROOST_CODEGEN_EXAMPLES", "40")), deadline=None,
                    suppress_health_check=list(HealthCheck), derandomize=True)


def _versions(api_key: int) -> list[int]:
    versions = APIS[api_key].request.versions
    return list(range(versions.low, versions.high + 1))


def _side_id(side: tuple[int, bool]) -> str:
    api_key, is_request = side
    return f"{APIS[api_key].name}-{'request' if is_request else 'response'}"


# ---------------------------------------------------------------- comparing the two codecs' results

Outcome = tuple[str, Any]


def _outcome(action: Callable[[], Any]) -> Outcome:
    """("ok", result) or ("error", (exception type, message))."""
    try:
        return "ok", action()
    except Exception as exc:  # any exception: it must be the same on both sides
        return "error", (type(exc), str(exc))


def assert_same_value(generic: Any, generated: Any, path: str = "body") -> None:
    """Equal, of the same types, dict keys in the same order, buffers viewing the same object."""
    assert type(generic) is type(generated), f"{path}: {type(generic)} != {type(generated)}"
    if isinstance(generic, dict):
        assert list(generic) == list(generated), f"{path}: keys {list(generic)} != {list(generated)}"
        for key in generic:
            assert_same_value(generic[key], generated[key], f"{path}.{key}")
    elif isinstance(generic, list | tuple):
        assert len(generic) == len(generated), f"{path}: lengths differ"
        for index, (left, right) in enumerate(zip(generic, generated, strict=True)):
            assert_same_value(left, right, f"{path}[{index}]")
    elif isinstance(generic, memoryview):
        assert generic.obj is generated.obj, f"{path}: views of different objects"
        assert generic.tobytes() == generated.tobytes(), f"{path}: different bytes"
    elif isinstance(generic, uuid.UUID):
        assert (generic.int, generic.is_safe) == (generated.int, generated.is_safe), f"{path}: {generic!r}"
    elif isinstance(generic, float):
        assert struct.pack(">d", generic) == struct.pack(">d", generated), f"{path}: {generic} != {generated}"
    else:
        assert generic == generated, f"{path}: {generic!r} != {generated!r}"


def _buffers_in(value: Any) -> list[Any]:
    """The caller's buffers inside a body (what an encoder may attach instead of copying)."""
    if isinstance(value, dict):
        return [buffer for item in value.values() for buffer in _buffers_in(item)]
    if isinstance(value, list | tuple):
        return [buffer for item in value for buffer in _buffers_in(item)]
    if isinstance(value, bytes | bytearray | memoryview):
        return [value]
    return []


def assert_same_frames(generic: list[Any], generated: list[Any], body: Any) -> None:
    """The same output buffers: our own pieces equal, the caller's attached as the same objects."""
    callers = _buffers_in(body)
    assert len(generic) == len(generated), "different numbers of output buffers"
    for index, (left, right) in enumerate(zip(generic, generated, strict=True)):
        assert type(left) is type(right), f"part {index}: {type(left)} != {type(right)}"
        assert bytes(left) == bytes(right), f"part {index}: different bytes"
        if isinstance(left, memoryview):  # a caller's buffer (a bytearray is viewed, never copied)
            assert left is right or left.obj is right.obj, f"part {index}: not the same buffer"
        elif any(left is buffer for buffer in callers):
            assert right is left, f"part {index}: the generated codec copied a caller's buffer"


def assert_same_outcome(generic: Outcome, generated: Outcome, compare: Callable[[Any, Any], None]) -> None:
    assert generic[0] == generated[0], f"generic {generic}, generated {generated}"
    if generic[0] == "error":
        assert generic[1] == generated[1]
    else:
        compare(generic[1], generated[1])


# ---------------------------------------------------------------- one message through both codecs

def _encode(framing: KafkaFraming, api_key: int, version: int, is_request: bool,
            body: dict[str, Any]) -> list[Any]:
    if is_request:
        header = RequestHeader(api_key, version, 77, client_id_for(api_key, version, "c"))
        return framing.encode_request(header, body)
    return framing.encode_response(RequestHeader(api_key, version, 77, "c"), body)


def _decode(framing: KafkaFraming, api_key: int, version: int, is_request: bool, frame: Any) -> Any:
    if is_request:
        return framing.decode_request(frame, strict=True)
    return framing.decode_response(api_key, version, frame)


def check_encode(api_key: int, version: int, is_request: bool, body: dict[str, Any]) -> bytes | None:
    """Both codecs encode `body` alike; both decode the frame alike. The frame (if any)."""
    generic = _outcome(lambda: _encode(GENERIC, api_key, version, is_request, body))
    generated = _outcome(lambda: _encode(GENERATED, api_key, version, is_request, body))
    assert_same_outcome(generic, generated, lambda left, right: assert_same_frames(left, right, body))
    if generic[0] == "error":
        return None
    frame = b"".join(bytes(part) for part in generic[1])[4:]
    check_decode(api_key, version, is_request, frame)
    return frame


def check_decode(api_key: int, version: int, is_request: bool, frame: Any) -> None:
    generic = _outcome(lambda: _decode(GENERIC, api_key, version, is_request, frame))
    generated = _outcome(lambda: _decode(GENERATED, api_key, version, is_request, frame))
    assert_same_outcome(generic, generated, assert_same_value)


def check_struct(name: str, version: int, body: dict[str, Any]) -> None:
    generic = _outcome(lambda: GENERIC.encode_struct(name, version, body))
    generated = _outcome(lambda: GENERATED.encode_struct(name, version, body))
    assert_same_outcome(generic, generated, assert_same_value)
    if generic[0] == "ok":
        check_struct_decode(name, version, generic[1])


def check_struct_decode(name: str, version: int, data: bytes) -> None:
    versioned = struct.pack(">h", version) + data  # one object, so both decoders view the same bytes
    for decode in (lambda framing: framing.decode_struct(name, version, data),
                   lambda framing: framing.decode_versioned_struct(name, versioned)):
        generic = _outcome(lambda decode=decode: decode(GENERIC))
        generated = _outcome(lambda decode=decode: decode(GENERATED))
        assert_same_outcome(generic, generated, assert_same_value)


# ---------------------------------------------------------------- strategies from the schema

def _buffers(min_size: int, max_size: int) -> st.SearchStrategy[Any]:
    """Bytes as a caller may hand them over: bytes, bytearray or memoryview."""
    return st.tuples(st.binary(min_size=min_size, max_size=max_size),
                     st.sampled_from((bytes, bytearray, memoryview))).map(lambda pair: pair[1](pair[0]))


# Around the size from which a single records buffer is attached rather than copied (512).
_ATTACH_EDGE = st.sampled_from((511, 512, 513)).flatmap(lambda size: _buffers(size, size))
RECORDS = st.one_of(
    _buffers(0, 40),
    _buffers(512, 700),  # attached, not copied
    _ATTACH_EDGE,
    st.lists(st.one_of(_buffers(0, 40), _buffers(512, 600)), max_size=3),  # segment slices
    st.lists(_buffers(0, 40), max_size=2).map(tuple),
)
# Values a field of another version may carry in a body: the encoders skip them whatever they are.
OTHER_VERSION_VALUE = st.one_of(st.none(), st.integers(-3, 3), st.text(max_size=3))


def _element(field: Field, version: int, depth: int) -> st.SearchStrategy[Any]:
    kind = field.element_type
    if field.is_struct:
        return struct_bodies(field.fields, version, depth + 1)
    if kind == "bool":
        return st.booleans()
    if kind in INT_RANGES:
        low, high = INT_RANGES[kind]
        return st.integers(low, high)
    if kind == "float64":
        return st.floats()
    if kind == "string":
        return st.text(max_size=12)
    if kind == "bytes":
        return _buffers(0, 40)
    if kind == "uuid":
        return st.uuids()
    assert kind == "records", kind
    return RECORDS


def _value(field: Field, version: int, depth: int) -> st.SearchStrategy[Any]:
    if field.is_array:
        elements = _element(field, version, depth)
        size = 3 if depth < 2 else 1
        strategy = st.one_of(st.lists(elements, max_size=size), st.lists(elements, max_size=size).map(tuple))
        if field.element_type in INT_RANGES:  # long fixed-width arrays take another path (16 and up)
            strategy = st.one_of(strategy, st.lists(elements, min_size=15, max_size=17))
    else:
        strategy = _element(field, version, depth)
    if version in field.nullable:
        strategy = st.one_of(st.none(), strategy)
    return strategy


_struct_strategies: dict[tuple[tuple[Field, ...], int], st.SearchStrategy[dict[str, Any]]] = {}


def struct_bodies(fields: tuple[Field, ...], version: int, depth: int = 0) -> st.SearchStrategy[dict[str, Any]]:
    """Valid bodies: any subset of the version's fields (the rest take defaults), and sometimes
    fields of other versions (skipped)."""
    key = (fields, version)
    if key not in _struct_strategies:
        optional = {field.key: (_value(field, version, depth) if version in field.versions else OTHER_VERSION_VALUE)
                    for field in fields}
        _struct_strategies[key] = st.fixed_dictionaries({}, optional=optional)
    return _struct_strategies[key]


def message_bodies(message: Message, version: int) -> st.SearchStrategy[dict[str, Any]]:
    return struct_bodies(message.fields, version)


WRONG_VALUES = st.sampled_from((None, "text", 2**70, -(2**70), 1.5, b"\x01\x02", [], [1], {}, {"x": 1},
                                object(), uuid.UUID(int=5), True))


def _leaf_paths(value: Any, path: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    """Every place in a body where a value could be swapped for a wrong one."""
    paths = [path] if path else []
    if isinstance(value, dict):
        for key, item in value.items():
            paths.extend(_leaf_paths(item, (*path, key)))
    elif isinstance(value, list):
        for index, item in enumerate(value):
            paths.extend(_leaf_paths(item, (*path, index)))
    return paths


def _replaced(value: Any, path: tuple[Any, ...], new: Any) -> Any:
    if not path:
        return new
    head, rest = path[0], path[1:]
    if isinstance(value, dict):
        return {**value, head: _replaced(value[head], rest, new)}
    copy = list(value)
    copy[head] = _replaced(copy[head], rest, new)
    return copy


MUTATIONS = st.lists(st.tuples(st.sampled_from(("flip", "cut", "insert", "set")), st.integers(0, 10_000),
                               st.binary(min_size=1, max_size=4)), min_size=1, max_size=4)


def _mutated(frame: bytes, edits: list[tuple[str, int, bytes]]) -> bytes:
    data = bytearray(frame)
    for kind, where, payload in edits:
        where %= max(len(data), 1)
        if kind == "flip" and data:
            data[where] ^= payload[0] or 0x80
        elif kind == "cut":
            del data[where:]
        elif kind == "insert":
            data[where:where] = payload
        elif kind == "set" and data:
            data[where] = (0xFF, 0x7F, 0x00, 0x80)[payload[0] % 4]  # huge, null and varint-continuing
    return bytes(data)


# ---------------------------------------------------------------- every message, every version

@pytest.mark.parametrize(("api_key", "version"), PAIRS, ids=lambda value: str(value))
def test_schema_samples_encode_and_decode_alike(api_key: int, version: int) -> None:
    """Deterministic coverage of every (api, version): realistic, all-non-default and all-null bodies."""
    for is_request in (True, False):
        message = message_of(api_key, is_request)
        rng = random.Random(f"{api_key}-{version}-{is_request}")
        bodies = [sample_body(message, version, rng) for _ in range(3)]
        bodies += [nondefault_body(message, version, rng), nondefault_body(message, version, rng, nulls=True), {}]
        for body in bodies:
            frame = check_encode(api_key, version, is_request, body)
            assert frame is not None, "a valid body was refused"
            for cut in range(0, len(frame), max(1, len(frame) // 40)):  # every truncation point, sampled
                check_decode(api_key, version, is_request, frame[:cut])


@pytest.mark.parametrize(("api_key", "version"), PAIRS, ids=lambda value: str(value))
def test_defaults_alike(api_key: int, version: int) -> None:
    """What an absent struct decodes to: every field's default, fresh each time."""
    for is_request in (True, False):
        generic, _ = GENERIC_CODECS.message_codec(api_key, version, is_request)
        generated, _ = GENERATED_CODECS.message_codec(api_key, version, is_request)
        assert_same_value(generic.defaults(), generated.defaults())
        assert generated.defaults() is not generated.defaults()


@pytest.mark.parametrize(("name", "version"), STRUCTS, ids=lambda value: str(value))
def test_embedded_struct_samples_encode_and_decode_alike(name: str, version: int) -> None:
    message = EMBEDDED_STRUCTS[name]
    rng = random.Random(f"{name}-{version}")
    for body in [sample_body(message, version, rng) for _ in range(3)] + [nondefault_body(message, version, rng)]:
        check_struct(name, version, body)


@pytest.mark.parametrize("side", SIDES, ids=_side_id)
@PROPERTY
@given(data=st.data())
def test_arbitrary_valid_bodies_encode_and_decode_alike(side: tuple[int, bool], data: st.DataObject) -> None:
    api_key, is_request = side
    version = data.draw(st.sampled_from(_versions(api_key)), label="version")
    body = data.draw(message_bodies(message_of(api_key, is_request), version), label="body")
    check_encode(api_key, version, is_request, body)


@pytest.mark.parametrize("side", SIDES, ids=_side_id)
@PROPERTY
@given(data=st.data())
def test_wrong_values_and_unknown_keys_fail_alike(side: tuple[int, bool], data: st.DataObject) -> None:
    api_key, is_request = side
    version = data.draw(st.sampled_from(_versions(api_key)), label="version")
    body = data.draw(message_bodies(message_of(api_key, is_request), version), label="body")
    paths = _leaf_paths(body)
    if data.draw(st.booleans(), label="unknown key") or not paths:
        dicts = [path for path in paths if isinstance(_at(body, path), dict)]
        where = data.draw(st.sampled_from([(), *dicts]), label="where")
        body = _replaced(body, where, {**_at(body, where), "no_such_field": 1})
    else:
        path = data.draw(st.sampled_from(paths), label="path")
        body = _replaced(body, path, data.draw(WRONG_VALUES, label="wrong value"))
    check_encode(api_key, version, is_request, body)


def _at(value: Any, path: tuple[Any, ...]) -> Any:
    for step in path:
        value = value[step]
    return value


@pytest.mark.parametrize("side", SIDES, ids=_side_id)
@PROPERTY
@given(data=st.data())
def test_mutated_valid_frames_decode_alike(side: tuple[int, bool], data: st.DataObject) -> None:
    api_key, is_request = side
    version = data.draw(st.sampled_from(_versions(api_key)), label="version")
    body = data.draw(message_bodies(message_of(api_key, is_request), version), label="body")
    frame = b"".join(bytes(part) for part in _encode(GENERIC, api_key, version, is_request, body))[4:]
    check_decode(api_key, version, is_request, _mutated(frame, data.draw(MUTATIONS, label="edits")))


def _request_header(api_key: int, version: int, flexible_header: bool) -> bytes:
    header = struct.pack(">hhih", api_key, version, 7, 1) + b"c"
    return header + (b"\x00" if flexible_header else b"")


@pytest.mark.parametrize("side", SIDES, ids=_side_id)
@PROPERTY
@given(data=st.data())
def test_arbitrary_bytes_decode_alike(side: tuple[int, bool], data: st.DataObject) -> None:
    api_key, is_request = side
    version = data.draw(st.sampled_from(_versions(api_key)), label="version")
    body = data.draw(st.binary(max_size=200), label="bytes")
    if is_request:
        for flexible_header in (True, False):
            check_decode(api_key, version, True, _request_header(api_key, version, flexible_header) + body)
    else:
        check_decode(api_key, version, False, body)
        check_decode(api_key, version, False, b"\x00\x00\x00\x01" + body)


@pytest.mark.parametrize(("name", "version"), STRUCTS, ids=lambda value: str(value))
@PROPERTY
@given(data=st.data())
def test_embedded_structs_alike(name: str, version: int, data: st.DataObject) -> None:
    body = data.draw(struct_bodies(EMBEDDED_STRUCTS[name].fields, version), label="body")
    check_struct(name, version, body)
    encoded = _outcome(lambda: GENERIC.encode_struct(name, version, body))
    if encoded[0] == "ok":
        check_struct_decode(name, version, _mutated(encoded[1], data.draw(MUTATIONS, label="edits")))
    check_struct_decode(name, version, data.draw(st.binary(max_size=80), label="bytes"))


# ---------------------------------------------------------------- the generated source itself

def test_generated_source_is_readable_and_shows_in_tracebacks() -> None:
    codec, _ = GENERATED_CODECS.message_codec(0, 9, True)
    source = generated_source(codec)
    assert "def read_ProduceRequest_v9(buf, pos):" in source
    assert "partition_data_records = buf[pos:end]" in source  # locals named after the fields
    # A null where none is allowed raises inside the generated reader: the traceback shows its line.
    frame = _request_header(0, 9, True) + b"\x00" + struct.pack(">hi", -1, 1000) + b"\x00"
    with pytest.raises(KafkaCodecError, match="TopicData: null in a non-nullable array") as caught:
        GENERATED.decode_request(frame)
    generated_frames = [entry for entry in traceback.extract_tb(caught.value.__traceback__)
                        if entry.filename.startswith("<roost codegen ProduceRequest v9")]
    assert generated_frames, "no frame of the generated code in the traceback"
    assert generated_frames[-1].line == \
        "raise _KafkaCodecError('ProduceRequest.TopicData: null in a non-nullable array')"


def test_generation_is_cached_per_struct_and_version() -> None:
    message = APIS[1].response
    assert generate_struct(message.name, message.fields, 12, True) is \
        generate_struct(message.name, message.fields, 12, True)
    assert generate_struct(message.name, message.fields, 12, True) is not \
        generate_struct(message.name, message.fields, 13, True)


def test_codecs_can_be_prepared_before_the_first_request() -> None:
    table = CodecTable("fresh", generate_struct)
    assert table.prepare({0: (9, 10), 18: (3, 3)}) == 6
    assert set(table._codecs) == {(0, 9, True), (0, 9, False), (0, 10, True), (0, 10, False),
                                  (18, 3, True), (18, 3, False)}


def test_the_framing_uses_the_generated_codecs() -> None:
    from roost.wire.kafka import framing

    assert framing.DEFAULT_FRAMING.codecs is DEFAULT_CODECS is GENERATED_CODECS
