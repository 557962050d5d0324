"""The registry's state, replayed from the `_schemas` topic in Confluent's layout: a pure state
machine fed (offset, key, value) in offset order. Every registry node replays the same records
into the same state; the writer's writes count only once read back (read-your-writes), so a write
that lost a race to another is seen to have lost, on every node alike.

Keys and values are UTF-8 JSON, as Confluent's KafkaStore writes them (facts/schema-registry.md §4):

    SCHEMA          {"keytype":"SCHEMA","subject":s,"version":n,"magic":1}
                    {"subject","version","id","md5","schemaType","references","metadata","ruleSet",
                     "schema","deleted"}
    CONFIG / MODE   {"keytype":"CONFIG","subject":s,"magic":0} (global: no subject)
                    {"compatibilityLevel", "normalize"?, ...} / {"mode"}
    DELETE_SUBJECT  {"subject","version": highest deleted}: versions 1..version soft-deleted
    CLEAR_SUBJECT   {"subject"}: drop that subject's soft-deleted versions
    NOOP            value null: a marker the writer produces to learn the end of the topic
    a null value    a tombstone: the key's record is gone (permanent delete, config/mode delete)

What a record may not do, refused on replay (Confluent's KafkaStoreMessageHandler.validateUpdate,
and one more): bind an id already bound to another schema in the same context, or rebind a
subject's version already bound to another id. Unknown key types are skipped.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

from roost.registry.schemas import AVRO, Reference

DEFAULT_CONTEXT = "."
MAX_RECORD_BYTES = 2 << 20


def context_of(subject: str) -> str:
    """The context of a qualified subject `:.ctx:name` (the default context "." otherwise)."""
    if subject.startswith(":.") and subject.count(":") >= 2:
        return subject[1:subject.index(":", 1)]
    return DEFAULT_CONTEXT


@dataclass
class VersionRecord:
    subject: str
    version: int
    id: int
    schema: str
    schema_type: str
    references: list[Reference]
    metadata: Any
    rule_set: Any
    md5: str
    deleted: bool = False

    def value(self) -> dict[str, Any]:
        body: dict[str, Any] = {"subject": self.subject, "version": self.version, "id": self.id, "md5": self.md5}
        if self.schema_type != AVRO:
            body["schemaType"] = self.schema_type
        body["references"] = [r.to_json() for r in self.references]
        if self.metadata is not None:
            body["metadata"] = self.metadata
        if self.rule_set is not None:
            body["ruleSet"] = self.rule_set
        body["schema"] = self.schema
        body["deleted"] = self.deleted
        return body


@dataclass
class SchemaEntry:
    """What an id stands for in its context."""

    id: int
    schema: str
    schema_type: str
    references: list[Reference]
    metadata: Any
    rule_set: Any
    md5: str
    holders: set[tuple[str, int]] = field(default_factory=set)  # (subject, version) naming it


def schema_key(subject: str, version: int) -> bytes:
    return _encode({"keytype": "SCHEMA", "subject": subject, "version": version, "magic": 1})


def subject_key(keytype: str, subject: str | None) -> bytes:
    body: dict[str, Any] = {"keytype": keytype}
    if subject:
        body["subject"] = subject
    body["magic"] = 0
    return _encode(body)


NOOP_KEY = b'{"keytype":"NOOP","magic":0}'


def _same_schema(bound: SchemaEntry, record: VersionRecord) -> bool:
    if bound.md5 and record.md5:
        return bound.md5 == record.md5
    return (bound.schema, bound.schema_type, bound.references) == (record.schema, record.schema_type, record.references)


def _encode(body: dict[str, Any]) -> bytes:
    return json.dumps(body, separators=(",", ":")).encode()


class RegistryState:
    """Everything a registry serves, built by `apply` from the topic's records."""

    def __init__(self) -> None:
        self.versions: dict[str, dict[int, VersionRecord]] = {}
        self.ids: dict[tuple[str, int], SchemaEntry] = {}
        self.by_md5: dict[tuple[str, str], int] = {}
        self.max_id: dict[str, int] = {}
        self.configs: dict[str | None, dict[str, Any]] = {}
        self.modes: dict[str | None, str] = {}
        self.applied_offset = -1
        self.rejected: dict[int, str] = {}  # offset -> why, the last few (for the writer's read-back)

    # ---- replay ----

    def apply(self, offset: int, key: bytes | None, value: bytes | None) -> str | None:
        """Apply the record at `offset`; the reason when it is refused (None when applied)."""
        assert offset > self.applied_offset, f"replay went back: {offset} after {self.applied_offset}"
        self.applied_offset = offset
        try:
            key_body = json.loads(key) if key else None
            value_body = json.loads(value) if value else None
        except ValueError:
            return self._reject(offset, "not JSON")
        if not isinstance(key_body, dict) or (value_body is not None and not isinstance(value_body, dict)):
            return self._reject(offset, "not a JSON object")
        keytype = key_body.get("keytype")
        subject = key_body.get("subject") or None
        try:
            if keytype == "SCHEMA":
                return self._apply_schema(offset, str(subject), int(key_body["version"]), value_body)
            if keytype == "CONFIG":
                if value_body is None:
                    self.configs.pop(subject, None)
                else:
                    self.configs[subject] = {k: v for k, v in value_body.items() if k != "subject"}
            elif keytype == "MODE":
                if value_body is None:
                    self.modes.pop(subject, None)
                else:
                    self.modes[subject] = str(value_body["mode"])
            elif keytype == "DELETE_SUBJECT" and value_body is not None:
                highest = int(value_body["version"])
                for version, record in self.versions.get(str(subject), {}).items():
                    if version <= highest:
                        record.deleted = True
            elif keytype == "CLEAR_SUBJECT" and value_body is not None:
                for record in list(self.versions.get(str(subject), {}).values()):
                    if record.deleted:
                        self._drop(record)
        except (KeyError, TypeError, ValueError) as error:
            return self._reject(offset, f"malformed {keytype} record: {error!r}")
        return None

    def _reject(self, offset: int, why: str) -> str:
        self.rejected[offset] = why
        while len(self.rejected) > 1024:
            self.rejected.pop(next(iter(self.rejected)))
        return why

    def _apply_schema(self, offset: int, subject: str, version: int, body: dict[str, Any] | None) -> str | None:
        existing = self.versions.get(subject, {}).get(version)
        if body is None:
            if existing is not None:
                self._drop(existing)
            return None
        context = context_of(subject)
        record = VersionRecord(
            subject=subject, version=version, id=int(body["id"]), schema=str(body["schema"]),
            schema_type=str(body.get("schemaType") or AVRO),
            references=[Reference(str(r["name"]), str(r["subject"]), int(r["version"]))
                        for r in body.get("references") or []],
            metadata=body.get("metadata"), rule_set=body.get("ruleSet"), md5=str(body.get("md5") or ""),
            deleted=bool(body.get("deleted", False)))
        if record.id <= 0:
            return self._reject(offset, f"id {record.id} is not positive")
        bound = self.ids.get((context, record.id))
        if bound is not None and not _same_schema(bound, record):
            return self._reject(offset, f"id {record.id} is bound to another schema")
        if existing is not None and existing.id != record.id:
            return self._reject(offset, f"{subject} version {version} is bound to id {existing.id}")
        if existing is not None:
            existing.deleted = record.deleted
            return None
        self.versions.setdefault(subject, {})[version] = record
        if bound is None:
            bound = SchemaEntry(record.id, record.schema, record.schema_type, record.references, record.metadata,
                                record.rule_set, record.md5)
            self.ids[(context, record.id)] = bound
            self.by_md5.setdefault((context, record.md5), record.id)
            self.max_id[context] = max(self.max_id.get(context, 0), record.id)
        bound.holders.add((subject, version))
        return None

    def _drop(self, record: VersionRecord) -> None:
        versions = self.versions.get(record.subject, {})
        versions.pop(record.version, None)
        if not versions:
            self.versions.pop(record.subject, None)
        context = context_of(record.subject)
        entry = self.ids.get((context, record.id))
        if entry is not None:
            entry.holders.discard((record.subject, record.version))
            if not entry.holders:
                del self.ids[(context, record.id)]
                if self.by_md5.get((context, entry.md5)) == record.id:
                    del self.by_md5[(context, entry.md5)]
        # max_id stays: an id once given is never given again (clients cache ids for life)

    # ---- reads ----

    def live(self, subject: str, deleted: bool = False) -> list[VersionRecord]:
        """The subject's versions, oldest first; soft-deleted ones only with `deleted`."""
        versions = self.versions.get(subject, {})
        return [versions[v] for v in sorted(versions) if deleted or not versions[v].deleted]

    def subjects(self, deleted: bool = False, deleted_only: bool = False, prefix: str = "") -> list[str]:
        names = []
        for subject in sorted(self.versions):
            if not subject.startswith(prefix):
                continue
            records = self.versions[subject].values()
            has_live = any(not r.deleted for r in records)
            has_deleted = any(r.deleted for r in records)
            if (deleted_only and has_deleted) or (not deleted_only and (has_live or (deleted and has_deleted))):
                names.append(subject)
        return names

    def entry(self, context: str, schema_id: int) -> SchemaEntry | None:
        return self.ids.get((context, schema_id))

    def next_id(self, context: str) -> int:
        candidate = self.max_id.get(context, 0) + 1
        while (context, candidate) in self.ids:
            candidate += 1
        return candidate

    def next_version(self, subject: str) -> int:
        return max(self.versions.get(subject, {}), default=0) + 1

    def referenced_by(self, subject: str, version: int) -> list[int]:
        found = set()
        for versions in self.versions.values():
            for record in versions.values():
                if any(r.subject == subject and r.version == version for r in record.references):
                    found.add(record.id)
        return sorted(found)

    def config(self, subject: str | None) -> dict[str, Any] | None:
        return self.configs.get(subject)

    def mode(self, subject: str | None) -> str | None:
        return self.modes.get(subject)

    def contexts(self) -> list[str]:
        return sorted({DEFAULT_CONTEXT} | {context_of(s) for s in self.versions})
