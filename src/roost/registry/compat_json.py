"""Can data valid against a JSON Schema `writer` be read by one written against `reader`? The
rules of Confluent's JSON Schema diff (json-schema-provider's SchemaDiff/ObjectSchemaDiff, STRICT
policy), which diffs an original (the writer) against an update (the reader): everything the
writer allowed must still be allowed.

Written here: no PyPI package checks JSON Schema compatibility (Karapace carries its own).

Content models of an object: open (`additionalProperties` absent or true), closed (`false`),
partially open (a schema-valued `additionalProperties`). Each rule is tested in both directions
in tests/registry/test_compat_json.py. Pure.
"""

from __future__ import annotations

from typing import Any

MAX_DEPTH = 100
NUMBER_TYPES = {"integer": {"integer", "number"}, "number": {"number"}}
# constraints that may only grow (or vanish): a smaller one, or a new one, refuses old data
GROWING = ("maxLength", "maximum", "exclusiveMaximum", "maxItems", "maxProperties")
SHRINKING = ("minLength", "minimum", "exclusiveMinimum", "minItems", "minProperties")


def _types(schema: dict[str, Any]) -> set[str] | None:
    kind = schema.get("type")
    if kind is None:
        return None
    return {kind} if isinstance(kind, str) else {str(k) for k in kind}


def _open(schema: dict[str, Any]) -> bool:
    return schema.get("additionalProperties", True) is True


class _Diff:
    def __init__(self) -> None:
        self.found: list[str] = []

    def fail(self, path: str, message: str) -> None:
        self.found.append(f"{message} at {path or '#'}")

    def compare(self, original: Any, update: Any, path: str, depth: int = 0) -> None:
        if depth > MAX_DEPTH:
            self.fail(path, "SCHEMA_TOO_DEEP")
            return
        if original is False or update is True or original == update:
            return
        if update is False:
            self.fail(path, "SCHEMA_NARROWED: the new schema accepts nothing")
            return
        if original is True:
            original = {}
        if not isinstance(original, dict) or not isinstance(update, dict):
            return
        if original.get("$ref") != update.get("$ref"):
            self.fail(path, "REF_CHANGED")
        self.compare_types(original, update, path)
        self.compare_enum(original, update, path)
        self.compare_bounds(original, update, path)
        for key in ("pattern", "multipleOf", "format"):
            if key in update and update[key] != original.get(key):
                self.fail(f"{path}/{key}", f"{key.upper()}_ADDED_OR_CHANGED")
        if update.get("uniqueItems") and not original.get("uniqueItems"):
            self.fail(f"{path}/uniqueItems", "UNIQUE_ITEMS_ADDED")
        if "items" in original or "items" in update:
            self.compare(original.get("items", True), update.get("items", True), f"{path}/items", depth + 1)
        self.compare_object(original, update, path, depth)
        self.compare_combined(original, update, path, depth)

    def compare_types(self, original: dict[str, Any], update: dict[str, Any], path: str) -> None:
        before, after = _types(original), _types(update)
        if after is None:
            return
        if before is None:
            self.fail(f"{path}/type", "TYPE_NARROWED: a type was added")
            return
        for kind in before:
            if not NUMBER_TYPES.get(kind, {kind}) & after:
                self.fail(f"{path}/type", f"TYPE_NARROWED: {kind} no longer allowed")

    def compare_enum(self, original: dict[str, Any], update: dict[str, Any], path: str) -> None:
        for key in ("enum", "const"):
            if key not in update:
                continue
            if key not in original:
                self.fail(f"{path}/{key}", f"{key.upper()}_ADDED")
                continue
            before = original[key] if key == "enum" else [original[key]]
            after = update[key] if key == "enum" else [update[key]]
            if any(value not in after for value in before):
                self.fail(f"{path}/{key}", f"{key.upper()}_NARROWED")

    def compare_bounds(self, original: dict[str, Any], update: dict[str, Any], path: str) -> None:
        for key in GROWING:
            if key in update and (key not in original or _num(update[key]) < _num(original[key])):
                self.fail(f"{path}/{key}", f"{key.upper()}_ADDED_OR_DECREASED")
        for key in SHRINKING:
            if key in update and (key not in original or _num(update[key]) > _num(original[key])):
                self.fail(f"{path}/{key}", f"{key.upper()}_ADDED_OR_INCREASED")

    def compare_object(self, original: dict[str, Any], update: dict[str, Any], path: str, depth: int) -> None:
        before = original.get("properties", {}) or {}
        after = update.get("properties", {}) or {}
        if not isinstance(before, dict) or not isinstance(after, dict):
            return
        before_extra = original.get("additionalProperties", True)
        after_extra = update.get("additionalProperties", True)
        for name in before.keys() & after.keys():
            self.compare(before[name], after[name], f"{path}/properties/{name}", depth + 1)
        for name in after.keys() - before.keys():
            where = f"{path}/properties/{name}"
            if before_extra is False:
                continue  # the writer never wrote it
            if before_extra is True:
                if after[name] not in ({}, True):
                    self.fail(where, "PROPERTY_ADDED_TO_OPEN_CONTENT_MODEL")
            else:
                self.compare(before_extra, after[name], where, depth + 1)
        for name in before.keys() - after.keys():
            where = f"{path}/properties/{name}"
            if after_extra is True or before[name] is False:
                continue
            if after_extra is False:
                self.fail(where, "PROPERTY_REMOVED_FROM_CLOSED_CONTENT_MODEL")
            else:
                self.compare(before[name], after_extra, where, depth + 1)
        if after_extra is not True and before_extra is True:
            self.fail(f"{path}/additionalProperties", "ADDITIONAL_PROPERTIES_NARROWED")
        elif isinstance(after_extra, dict) and isinstance(before_extra, dict):
            self.compare(before_extra, after_extra, f"{path}/additionalProperties", depth + 1)
        elif after_extra is False and before_extra is not False:
            self.fail(f"{path}/additionalProperties", "ADDITIONAL_PROPERTIES_NARROWED")
        required_before = set(original.get("required", []) or [])
        for name in set(update.get("required", []) or []) - required_before:
            prop = after.get(name)
            if not (isinstance(prop, dict) and "default" in prop):
                self.fail(f"{path}/required", f"REQUIRED_PROPERTY_ADDED: {name}")

    def compare_combined(self, original: dict[str, Any], update: dict[str, Any], path: str, depth: int) -> None:
        for key in ("oneOf", "anyOf"):
            before, after = original.get(key), update.get(key)
            if after is None:
                continue
            if before is None:
                self.fail(f"{path}/{key}", f"{key.upper()}_ADDED")
                continue
            for index, branch in enumerate(before):
                if not any(_compatible(branch, candidate, depth + 1) for candidate in after):
                    self.fail(f"{path}/{key}/{index}", f"{key.upper()}_NARROWED: a branch was removed or narrowed")
        before_all, after_all = original.get("allOf"), update.get("allOf")
        if after_all is not None:
            for index, branch in enumerate(after_all):
                if not any(_compatible(candidate, branch, depth + 1) for candidate in (before_all or [])):
                    self.fail(f"{path}/allOf/{index}", "ALL_OF_EXTENDED: a constraint was added")


def _num(value: Any) -> float:
    return float(value) if isinstance(value, int | float) and not isinstance(value, bool) else 0.0


def _compatible(original: Any, update: Any, depth: int) -> bool:
    diff = _Diff()
    diff.compare(original, update, "", depth)
    return not diff.found


def incompatibilities(reader: Any, writer: Any) -> list[str]:
    """Why data valid against `writer` may be refused by `reader` ([] when it cannot)."""
    diff = _Diff()
    diff.compare(writer, reader, "#")
    return diff.found
