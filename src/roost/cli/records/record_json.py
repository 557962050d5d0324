"""The JSON form of a record, one object per line (`roost consume --json`, `roost produce -f json`):

    {"topic": "t", "partition": 0, "offset": 42,
     "timestamp": "2026-11-24T10:00:00.123Z", "timestamp_ms": 1795514400123, "timestamp_type": "create",
     "key": "k", "value": "v", "headers": [{"key": "h", "value": "1"}]}

Bytes that are UTF-8 are JSON strings. Other bytes are base64, marked by a sibling field:
"key_encoding": "base64", "value_encoding": "base64", or "encoding": "base64" inside a header
object; without the marker the text is the bytes' UTF-8. A null key, value or header value is
JSON null. "timestamp_type" is "create" or "log_append" (the broker's time).
"""

from __future__ import annotations

import base64
import binascii
import json
from typing import Any

from roost.cli.records.record_format import FormatError, Record, format_timestamp


def _text_or_base64(data: bytes) -> tuple[str, bool]:
    try:
        return data.decode("utf-8"), False
    except UnicodeDecodeError:
        return base64.b64encode(data).decode("ascii"), True


def record_to_json(record: Record, timestamp_type: str | None = None) -> str:
    document: dict[str, Any] = {
        "topic": record.topic,
        "partition": record.partition,
        "offset": record.offset,
        "timestamp": format_timestamp(record.timestamp_ms) or None,
        "timestamp_ms": record.timestamp_ms,
    }
    if timestamp_type is not None:
        document["timestamp_type"] = timestamp_type
    for name, data in (("key", record.key), ("value", record.value)):
        if data is None:
            document[name] = None
            continue
        document[name], encoded = _text_or_base64(data)
        if encoded:
            document[f"{name}_encoding"] = "base64"
    headers = []
    for header_key, header_value in record.headers:
        entry: dict[str, Any] = {"key": header_key, "value": None}
        if header_value is not None:
            entry["value"], encoded = _text_or_base64(header_value)
            if encoded:
                entry["encoding"] = "base64"
        headers.append(entry)
    document["headers"] = headers
    return json.dumps(document, ensure_ascii=False)


def _bytes_field(document: dict[str, Any], name: str, encoding_field: str) -> bytes | None:
    value = document.get(name)
    if value is None:
        return None
    if not isinstance(value, str):
        raise FormatError(f"{name!r} must be a string or null")
    encoding = document.get(encoding_field)
    if encoding is None:
        return value.encode("utf-8")
    if encoding != "base64":
        raise FormatError(f"unknown {encoding_field} {encoding!r} (known: base64)")
    try:
        return base64.b64decode(value, validate=True)
    except binascii.Error as error:
        raise FormatError(f"{name!r}: bad base64: {error}") from None


def record_from_json(line: str) -> Record:
    """A record from one JSON line; fields absent are None (offset is read and ignored by
    produce). Raises FormatError on anything that is not such an object."""
    try:
        document = json.loads(line)
    except json.JSONDecodeError as error:
        raise FormatError(f"not JSON: {error}") from None
    if not isinstance(document, dict):
        raise FormatError("expected a JSON object per line")
    record = Record(topic=str(document.get("topic") or ""))
    for name in ("partition", "offset", "timestamp_ms"):
        number = document.get(name)
        if number is not None and (not isinstance(number, int) or isinstance(number, bool)):
            raise FormatError(f"{name!r} must be a whole number")
    record.partition = document.get("partition")
    record.offset = document.get("offset")
    record.timestamp_ms = document.get("timestamp_ms")
    record.key = _bytes_field(document, "key", "key_encoding")
    record.value = _bytes_field(document, "value", "value_encoding")
    headers = document.get("headers") or []
    if not isinstance(headers, list):
        raise FormatError("'headers' must be a list of {\"key\": ..., \"value\": ...}")
    for entry in headers:
        if not isinstance(entry, dict) or not isinstance(entry.get("key"), str):
            raise FormatError("each header must be an object with a string 'key'")
        record.headers.append((entry["key"], _bytes_field(entry, "value", "encoding")))
    return record
