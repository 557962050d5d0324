"""Can an Avro reader schema read data written with a writer schema? The rules of Apache Avro's
`SchemaCompatibility.checkReaderWriterCompatibility(reader, writer)`, which Confluent's registry
uses, over fastavro's parsed form (named types by full name, the references' included).

Written here rather than calling the `avro` package's checker: that one parses schemas itself and
cannot take the named types of a schema's references from another subject, and its answers are
types, not the paths a 409 should name. tests/registry/test_compat_avro.py checks this one
against `avro.compatibility` case by case.

Pure. Returns the incompatibilities found, empty when compatible; each says where (a path).
"""

from __future__ import annotations

from typing import Any

PRIMITIVES = frozenset({"null", "boolean", "int", "long", "float", "double", "bytes", "string"})
# writer type -> the reader types it is promoted to (Avro specification, "Schema Resolution")
PROMOTIONS: dict[str, frozenset[str]] = {
    "int": frozenset({"long", "float", "double"}),
    "long": frozenset({"float", "double"}),
    "float": frozenset({"double"}),
    "string": frozenset({"bytes"}),
    "bytes": frozenset({"string"}),
}
MAX_DEPTH = 200


class _Checker:
    def __init__(self, reader_named: dict[str, Any], writer_named: dict[str, Any]) -> None:
        self.reader_named = reader_named
        self.writer_named = writer_named
        self.assumed: set[tuple[str, str]] = set()  # named pairs under check: recursion is compatible
        self.found: list[str] = []

    def resolve(self, schema: Any, named: dict[str, Any]) -> Any:
        if isinstance(schema, str) and schema not in PRIMITIVES:
            return named.get(schema, schema)
        if isinstance(schema, dict) and schema.get("type") in PRIMITIVES:
            return schema["type"]  # a logical type or custom properties on a primitive
        if isinstance(schema, dict) and isinstance(schema.get("type"), str | list | dict) \
                and schema.get("type") not in ("record", "error", "enum", "fixed", "array", "map"):
            return self.resolve(schema["type"], named)
        return schema

    def type_of(self, schema: Any) -> str:
        if isinstance(schema, str):
            return schema
        if isinstance(schema, list):
            return "union"
        kind = schema.get("type")
        return "record" if kind == "error" else str(kind)

    def fail(self, path: str, message: str) -> bool:
        self.found.append(f"{message} at {path or '/'}")
        return False

    def check(self, reader: Any, writer: Any, path: str, depth: int = 0) -> bool:
        if depth > MAX_DEPTH:
            return self.fail(path, "SCHEMA_TOO_DEEP")
        reader = self.resolve(reader, self.reader_named)
        writer = self.resolve(writer, self.writer_named)
        r_type, w_type = self.type_of(reader), self.type_of(writer)
        if w_type == "union":
            ok = True
            for index, branch in enumerate(writer):
                ok = self.check(reader, branch, f"{path}/{index}", depth + 1) and ok
            return ok
        if r_type == "union":
            for branch in reader:
                probe = _Checker(self.reader_named, self.writer_named)
                probe.assumed = set(self.assumed)
                if probe.check(branch, writer, path, depth + 1):
                    return True
            return self.fail(path, f"MISSING_UNION_BRANCH: reader union lacks writer type {w_type}")
        if r_type != w_type:
            if w_type in PROMOTIONS and r_type in PROMOTIONS[w_type]:
                return True
            return self.fail(path, f"TYPE_MISMATCH: reader type {r_type} not compatible with writer type {w_type}")
        if r_type in PRIMITIVES:
            return True
        if r_type == "array":
            return self.check(reader["items"], writer["items"], f"{path}/items", depth + 1)
        if r_type == "map":
            return self.check(reader["values"], writer["values"], f"{path}/values", depth + 1)
        if not self.names_match(reader, writer):
            return self.fail(path, f"NAME_MISMATCH: expected {writer['name']}, found {reader['name']}")
        if r_type == "fixed":
            if reader["size"] != writer["size"]:
                return self.fail(f"{path}/size", f"FIXED_SIZE_MISMATCH: expected {writer['size']}, "
                                                 f"found {reader['size']}")
            return True
        if r_type == "enum":
            missing = [s for s in writer.get("symbols", []) if s not in set(reader.get("symbols", []))]
            if missing and "default" not in reader:
                return self.fail(f"{path}/symbols", f"MISSING_ENUM_SYMBOLS: {missing}")
            return True
        return self.check_record(reader, writer, path, depth)

    def names_match(self, reader: dict[str, Any], writer: dict[str, Any]) -> bool:
        r_full, w_full = str(reader["name"]), str(writer["name"])
        if r_full.rsplit(".", 1)[-1] == w_full.rsplit(".", 1)[-1]:
            return True
        namespace = r_full.rsplit(".", 1)[0] if "." in r_full else ""
        aliases = {a if "." in a or not namespace else f"{namespace}.{a}" for a in reader.get("aliases", [])}
        return w_full in aliases or w_full.rsplit(".", 1)[-1] in {a.rsplit(".", 1)[-1] for a in aliases}

    def check_record(self, reader: dict[str, Any], writer: dict[str, Any], path: str, depth: int) -> bool:
        pair = (str(reader["name"]), str(writer["name"]))
        if pair in self.assumed:
            return True
        self.assumed.add(pair)
        writer_fields = {f["name"]: f for f in writer.get("fields", [])}
        ok = True
        for index, r_field in enumerate(reader.get("fields", [])):
            w_field = writer_fields.get(r_field["name"])
            if w_field is None:
                w_field = next((writer_fields[a] for a in r_field.get("aliases", []) if a in writer_fields), None)
            if w_field is None:
                if "default" not in r_field:
                    ok = self.fail(f"{path}/fields/{index}",
                                   f"READER_FIELD_MISSING_DEFAULT_VALUE: {r_field['name']}") and ok
                continue
            ok = self.check(r_field["type"], w_field["type"], f"{path}/fields/{index}/type", depth + 1) and ok
        return ok


def incompatibilities(reader: Any, reader_named: dict[str, Any], writer: Any, writer_named: dict[str, Any]) -> list[str]:
    """Why `reader` cannot read what `writer` wrote ([] when it can)."""
    checker = _Checker(reader_named, writer_named)
    checker.check(reader, writer, "")
    return checker.found
