r"""The format-string language of `roost consume -f` / `roost produce -f`, and the JSON envelope:
printing, reading, errors, and the round trip (what is printed reads back as the same record)."""

from __future__ import annotations

import io

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from roost.cli.records.record_format import (
    FormatError,
    Record,
    RecordFormat,
    format_timestamp,
    parse_timestamp,
)
from roost.cli.records.record_json import record_from_json, record_to_json

SAMPLE = Record(topic="orders", partition=2, offset=41, timestamp_ms=1_795_428_000_123, key=b"user-7",
                value=b"hello world", headers=[("source", b"cli"), ("trace", None)])


def read_all(fmt: str, data: bytes, null_marker: bytes | None = None) -> list[Record]:
    return list(RecordFormat(fmt).read(io.BytesIO(data), null_marker))


def test_every_field_prints() -> None:
    fmt = r"%t|%p|%o|%T|%d|%d{%Y-%m-%d %H}|%k|%v|%h|%k{hex}|%v{base64}|%%\t\\\n"
    assert RecordFormat(fmt).render(SAMPLE) == (
        "orders|2|41|1795428000123|2026-11-23T10:00:00.123Z|2026-11-23 10|user-7|hello world|"
        "source=cli,trace|757365722d37|aGVsbG8gd29ybGQ=|%\t\\\n")


def test_non_utf8_bytes_print_escaped_and_null_prints_the_marker() -> None:
    record = Record(key=None, value=b"ok \xff\xfe end")
    assert RecordFormat(r"%k:%v\n").render(record) == ":ok \\xff\\xfe end\n"
    assert RecordFormat(r"%k:%v\n").render(record, null_marker="NULL") == "NULL:ok \\xff\\xfe end\n"


def test_default_format_reads_lines_and_the_last_line_may_lack_its_newline() -> None:
    records = read_all(r"%v\n", b"one\ntwo words\n\nlast")
    assert [r.value for r in records] == [b"one", b"two words", b"", b"last"]
    assert all(r.key is None for r in records)


def test_key_space_value_reads_up_to_the_first_space() -> None:
    records = read_all(r"%k %v\n", b"a 1\nb 2 3\n")
    assert [(r.key, r.value) for r in records] == [(b"a", b"1"), (b"b", b"2 3")]


def test_reads_every_field_back() -> None:
    fmt = r"%t %p %o %T %k{hex} %v{base64} %h\n"
    text = RecordFormat(fmt).render(SAMPLE)
    assert read_all(fmt, text.encode() * 3) == [SAMPLE] * 3


def test_iso_and_strftime_timestamps_read_back() -> None:
    assert read_all(r"%d %v\n", b"2026-11-23T10:00:00.123Z x\n")[0].timestamp_ms == 1_795_428_000_123
    assert read_all(r"%d{%Y-%m-%d %H:%M}|%v\n", b"2026-11-23 10:00|x\n")[0].timestamp_ms == 1_795_428_000_000
    assert parse_timestamp(format_timestamp(0)) == 0
    assert format_timestamp(None) == ""


def test_null_marker_makes_null_keys_and_values() -> None:
    records = read_all(r"%k %v\n", b"a NULL\nNULL b\n", null_marker=b"NULL")
    assert [(r.key, r.value) for r in records] == [(b"a", None), (None, b"b")]


def test_a_trailing_field_reads_to_the_end_of_input() -> None:
    assert [r.value for r in read_all("key=%k value=%v", b"key=a value=line1\nline2\n")] == [b"line1\nline2\n"]


def test_input_read_in_small_pieces_splits_the_same() -> None:
    """A terminal or pipe delivers input in pieces; a delimiter split across pieces still counts."""

    class Trickle(io.RawIOBase):
        def __init__(self, data: bytes) -> None:
            self.data = data

        def readable(self) -> bool:
            return True

        def read1(self, size: int = -1) -> bytes:
            piece, self.data = self.data[:3], self.data[3:]
            return piece

    fmt = RecordFormat(r"%k<->%v\r\n")
    data = b"".join(b"key%d<->value %d\r\n" % (i, i) for i in range(200))
    records = list(fmt.read(Trickle(data)))  # type: ignore[arg-type]
    assert [(r.key, r.value) for r in records] == [(b"key%d" % i, b"value %d" % i) for i in range(200)]


@pytest.mark.parametrize(("fmt", "message"), [
    ("%q", "unknown field %q"),
    ("%", "at the end of the format"),
    (r"%v\x", "unknown escape"),
    ("%v{rot13}", "unknown modifier"),
    ("%p{hex}", "takes no"),
    ("%v{hex", "unclosed"),
    ("%d{}", "strftime pattern"),
])
def test_bad_formats_are_refused_with_a_reason(fmt: str, message: str) -> None:
    with pytest.raises(FormatError, match=message.replace("{", r"\{")):
        RecordFormat(fmt)


def test_adjacent_fields_cannot_be_read() -> None:
    RecordFormat("%k%v").render(SAMPLE)  # printing is fine
    with pytest.raises(FormatError, match="put a delimiter"):
        RecordFormat("%k%v").check_readable()


@pytest.mark.parametrize(("fmt", "data", "message"), [
    (r"%p %v\n", b"x a\n", r"input record 1: %p: expected a whole number"),
    (r"%k %v\n", b"a 1\nb\n", "input record 2: no ' ' after %k"),
    (r"[%v]\n", b"[a]\nb]\n", r"input record 2: expected '\['"),
    (r"%v{hex}\n", b"zz\n", "bad hex"),
    (r"%v{base64}\n", b"!!\n", "bad base64"),
    (r"%d %v\n", b"yesterday x\n", "bad timestamp"),
])
def test_input_that_does_not_fit_names_the_record(fmt: str, data: bytes, message: str) -> None:
    with pytest.raises(FormatError, match=message):
        read_all(fmt, data)


def test_json_envelope_round_trips_text_binary_and_null() -> None:
    record = Record(topic="t", partition=0, offset=5, timestamp_ms=1_000, key=b"\x00\xff", value=None,
                    headers=[("a", b"\xfe"), ("b", b"text"), ("c", None)])
    line = record_to_json(record, "create")
    assert '"key_encoding": "base64"' in line and '"encoding": "base64"' in line
    assert '"timestamp": "1970-01-01T00:00:01.000Z"' in line
    assert record_from_json(line) == record


@pytest.mark.parametrize(("line", "message"), [
    ("[1]", "JSON object"), ("{", "not JSON"), ('{"partition": "x"}', "whole number"),
    ('{"value": "x", "value_encoding": "rot13"}', "unknown value_encoding"),
    ('{"value": "!", "value_encoding": "base64"}', "bad base64"), ('{"headers": [{"value": "x"}]}', "string 'key'"),
])
def test_bad_json_lines_are_refused(line: str, message: str) -> None:
    with pytest.raises(FormatError, match=message):
        record_from_json(line)


# The round-trip property: for any format whose fields are separated by delimiters that cannot
# occur inside them, reading what was printed gives back the printed fields.
DELIMITERS = [" ", "\t", "|", ";", " :: "]
SAFE_TEXT = st.text(st.characters(codec="utf-8", exclude_characters=" \t|;:,=\n\r\\%"), max_size=12)
FIELD_CHOICES = ["%t", "%p", "%o", "%T", "%d", "%k", "%v", "%k{hex}", "%v{base64}", "%k{base64}", "%v{hex}", "%h"]


@st.composite
def formats_and_records(draw: st.DrawFn) -> tuple[str, list[Record]]:
    chosen = draw(st.lists(st.sampled_from(FIELD_CHOICES), min_size=1, max_size=6, unique_by=lambda f: f[:2]))
    parts = []
    for spec in chosen:
        parts += [spec, draw(st.sampled_from(DELIMITERS)).replace("\t", "\\t")]
    fmt = "".join(parts[:-1]) + "\\n"
    raw_fields = {spec for spec in chosen if spec in ("%k", "%v")}

    def payload(spec: str) -> st.SearchStrategy[bytes]:
        if spec in raw_fields:
            return SAFE_TEXT.map(str.encode)
        return st.binary(max_size=20)

    key_spec = next((s for s in chosen if s.startswith("%k")), "%k")
    value_spec = next((s for s in chosen if s.startswith("%v")), "%v")
    record = st.builds(
        Record,
        topic=st.from_regex(r"[a-zA-Z0-9._-]{1,20}", fullmatch=True),
        partition=st.integers(0, 10_000),
        offset=st.integers(0, 2**62),
        timestamp_ms=st.integers(0, 4_102_444_800_000),
        key=payload(key_spec),
        value=payload(value_spec),
        headers=st.lists(st.tuples(SAFE_TEXT.filter(bool), st.one_of(st.none(), SAFE_TEXT.map(str.encode))),
                         max_size=3),
    )
    return fmt, draw(st.lists(record, min_size=1, max_size=5))


def projected(record: Record, fields: set[str]) -> Record:
    """The parts of `record` a format with `fields` carries."""
    return Record(
        topic=record.topic if "t" in fields else "",
        partition=record.partition if "p" in fields else None,
        offset=record.offset if "o" in fields else None,
        timestamp_ms=record.timestamp_ms if fields & {"T", "d"} else None,
        key=record.key if "k" in fields else None,
        value=record.value if "v" in fields else None,
        headers=record.headers if "h" in fields else [],
    )


@settings(max_examples=300, deadline=None)
@given(formats_and_records())
def test_what_is_printed_reads_back_as_the_same_record(case: tuple[str, list[Record]]) -> None:
    fmt, records = case
    record_format = RecordFormat(fmt)
    printed = "".join(record_format.render(record) for record in records).encode()
    assert read_all(fmt, printed) == [projected(record, record_format.fields) for record in records]


@settings(max_examples=200, deadline=None)
@given(st.builds(Record, topic=st.text(max_size=10), partition=st.integers(0, 100), offset=st.integers(0, 2**40),
                 timestamp_ms=st.integers(0, 4_102_444_800_000), key=st.one_of(st.none(), st.binary(max_size=20)),
                 value=st.one_of(st.none(), st.binary(max_size=40)),
                 headers=st.lists(st.tuples(st.text(max_size=5), st.one_of(st.none(), st.binary(max_size=8))),
                                  max_size=3)))
def test_json_envelope_round_trips_any_record(record: Record) -> None:
    assert record_from_json(record_to_json(record)) == record
