"""The registry's operations over its replayed state: what each endpoint answers, and for writes
the records to produce. Reads come from the local replica of `_schemas`; writes are produced
through the `Log` door and count once read back into the state (`Log.write` returns after the
local replay has applied them), so a write that raced another writer and lost is noticed here and
retried with fresh numbers: ids stay unique even if two nodes believed themselves the writer.

Confluent's rules kept (facts/schema-registry.md): the same schema in the same subject answers its
existing version; the same schema elsewhere in the context reuses its id; a new version is 1 + the
highest including soft-deleted ones; a new id is 1 + the highest ever seen; compatibility is
checked against undeleted versions under the subject's level (else the global one, else BACKWARD);
READONLY refuses writes (42205); IMPORT takes explicit ids and skips checks.
"""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any, Protocol

from roost.registry import compatibility, errors, schemas
from roost.registry.schemas import AVRO, ParsedSchema, Reference, ResolvedReference
from roost.registry.store import (
    DEFAULT_CONTEXT,
    RegistryState,
    SchemaEntry,
    VersionRecord,
    context_of,
    schema_key,
    subject_key,
)

MODES = ("READWRITE", "READONLY", "READONLY_OVERRIDE", "IMPORT", "FORWARD")
WRITE_ATTEMPTS = 5
MAX_SUBJECT_CHARS = 255
MAX_VERSION = 2**31 - 1


class Log(Protocol):
    """The `_schemas` topic as the registry uses it."""

    async def write(self, records: list[tuple[bytes, bytes | None]]) -> None:
        """Produce `records` (acks=all) and return once the local replay has applied them."""

    async def sync(self) -> None:
        """Return once the local replay has applied everything written before the call."""


@dataclass
class RegisterRequest:
    schema: str
    schema_type: str
    references: list[Reference]
    metadata: Any
    rule_set: Any
    explicit_id: int | None = None
    explicit_version: int | None = None


def parse_register_body(body: Any) -> RegisterRequest:
    if not isinstance(body, dict):
        raise errors.unprocessable("the body must be a JSON object")
    schema = body.get("schema")
    if not isinstance(schema, str):
        raise errors.invalid_schema("the field 'schema' (a string) is missing")
    references = []
    raw_references = body.get("references") or []
    if not isinstance(raw_references, list):
        raise errors.unprocessable("'references' must be a list")
    for raw in raw_references:
        if not isinstance(raw, dict) or not isinstance(raw.get("name"), str) or not isinstance(raw.get("subject"), str):
            raise errors.invalid_schema("a reference needs a name, a subject and a version")
        version = raw.get("version", -1)
        if not isinstance(version, int) or isinstance(version, bool):
            raise errors.invalid_schema("a reference's version must be an integer")
        references.append(Reference(raw["name"], raw["subject"], version))
    metadata, rule_set = body.get("metadata"), body.get("ruleSet")
    if metadata is not None and not isinstance(metadata, dict):
        raise errors.unprocessable("'metadata' must be an object")
    if rule_set is not None and not isinstance(rule_set, dict):
        raise errors.RegistryError(422, 42210, "Invalid ruleSet: it must be an object")
    explicit_id = body.get("id")
    explicit_version = body.get("version")
    for name, value in (("id", explicit_id), ("version", explicit_version)):
        if value is not None and (not isinstance(value, int) or isinstance(value, bool) or not 0 < value <= MAX_VERSION):
            raise errors.unprocessable(f"'{name}' must be a positive integer")
    return RegisterRequest(schema, schemas.schema_type_of(body.get("schemaType")), references, metadata, rule_set,
                           explicit_id if explicit_id and explicit_id > 0 else None, explicit_version)


def parse_version(value: str | int) -> int:
    """A version path segment: a positive int, or "latest"/-1 (answered as -1); 42202 otherwise."""
    if isinstance(value, str) and value.lower() == "latest":
        return -1
    try:
        version = int(value)
    except (TypeError, ValueError):
        raise errors.invalid_version(value) from None
    if version == -1:
        return -1
    if not 0 < version <= MAX_VERSION:
        raise errors.invalid_version(value)
    return version


def check_subject(subject: str) -> str:
    if not subject or len(subject) > MAX_SUBJECT_CHARS or any(ord(c) < 32 for c in subject):
        raise errors.invalid_subject(subject)
    return subject


def version_body(record: VersionRecord, entry: SchemaEntry | None = None) -> dict[str, Any]:
    """A version as GET /subjects/{s}/versions/{v} answers it (schemaType only when not AVRO)."""
    body: dict[str, Any] = {"subject": record.subject, "version": record.version, "id": record.id}
    if record.md5:
        body["guid"] = schemas.guid_of(record.md5)
    if record.schema_type != AVRO:
        body["schemaType"] = record.schema_type
    if record.references:
        body["references"] = [r.to_json() for r in record.references]
    if record.metadata is not None:
        body["metadata"] = record.metadata
    if record.rule_set is not None:
        body["ruleSet"] = record.rule_set
    body["schema"] = record.schema
    if record.deleted:
        body["deleted"] = True
    return body


def entry_body(entry: SchemaEntry) -> dict[str, Any]:
    body: dict[str, Any] = {"id": entry.id}
    if entry.md5:
        body["guid"] = schemas.guid_of(entry.md5)
    if entry.schema_type != AVRO:
        body["schemaType"] = entry.schema_type
    body["references"] = [r.to_json() for r in entry.references]
    if entry.metadata is not None:
        body["metadata"] = entry.metadata
    if entry.rule_set is not None:
        body["ruleSet"] = entry.rule_set
    body["schema"] = entry.schema
    return body


class Registry:
    """The operations; `log` is the topic, `state` its local replay (fed by the log's reader)."""

    def __init__(self, state: RegistryState, log: Log) -> None:
        self.state = state
        self.log = log
        self._parsed: dict[tuple[str, str, int], ParsedSchema] = {}  # (context, type, id) -> parsed

    # ---- helpers ----

    def resolve_references(self, references: list[Reference], depth: int = 0) -> tuple[ResolvedReference, ...]:
        if depth > schemas.MAX_REFERENCE_DEPTH:
            raise errors.invalid_schema("references nested too deep")
        resolved = []
        for reference in references:
            versions = self.state.live(reference.subject, deleted=True)
            chosen = next((r for r in versions if r.version == reference.version), None) if reference.version != -1 \
                else (self.state.live(reference.subject) or [None])[-1]
            if chosen is None:
                raise errors.invalid_schema(f"reference {reference.name!r}: {reference.subject} version "
                                            f"{reference.version} not found")
            resolved.append(ResolvedReference(reference.name, chosen.schema_type, chosen.schema,
                                              self.resolve_references(chosen.references, depth + 1)))
        return tuple(resolved)

    def parse_request(self, request: RegisterRequest, normalize: bool) -> ParsedSchema:
        return schemas.parse(request.schema_type, request.schema, self.resolve_references(request.references),
                             normalize)

    def parsed_of(self, record: VersionRecord) -> ParsedSchema:
        key = (context_of(record.subject), record.schema_type, record.id)
        parsed = self._parsed.get(key)
        if parsed is None or (parsed.canonical != record.schema and parsed.schema_type != "PROTOBUF"):
            parsed = schemas.parse(record.schema_type, record.schema, self.resolve_references(record.references))
            if len(self._parsed) > 10_000:
                self._parsed.clear()
            self._parsed[key] = parsed
        return parsed

    def level(self, subject: str | None) -> str:
        for scope in ((subject, None) if subject else (None,)):
            config = self.state.config(scope)
            if config and config.get("compatibilityLevel"):
                return str(config["compatibilityLevel"])
        return compatibility.DEFAULT_LEVEL

    def normalize_default(self, subject: str) -> bool:
        for scope in (subject, None):
            config = self.state.config(scope)
            if config and "normalize" in config:
                return bool(config["normalize"])
        return False

    def mode(self, subject: str | None) -> str:
        for scope in ((subject, None) if subject else (None,)):
            mode = self.state.mode(scope)
            if mode:
                return mode
        return "READWRITE"

    def versions_or_404(self, subject: str, deleted: bool) -> list[VersionRecord]:
        records = self.state.live(subject, deleted)
        if not records:
            raise errors.subject_not_found(subject)
        return records

    def version_or_404(self, subject: str, version: int, deleted: bool) -> VersionRecord:
        records = self.versions_or_404(subject, deleted)
        if version == -1:
            return records[-1]
        found = next((r for r in records if r.version == version), None)
        if found is None:
            raise errors.version_not_found(version)
        return found

    # ---- reads ----

    def get_by_id(self, schema_id: int, subject: str | None) -> SchemaEntry:
        context = context_of(subject) if subject else DEFAULT_CONTEXT
        entry = self.state.entry(context, schema_id) or self.state.entry(DEFAULT_CONTEXT, schema_id)
        if entry is None:
            raise errors.schema_not_found(f"{schema_id}")
        return entry

    def get_by_guid(self, guid: str) -> SchemaEntry:
        for entry in self.state.ids.values():
            if entry.md5 and schemas.guid_of(entry.md5) == guid:
                return entry
        raise errors.schema_not_found(guid)

    def lookup(self, subject: str, request: RegisterRequest, normalize: bool, deleted: bool) -> VersionRecord:
        parsed = self.parse_request(request, normalize or self.normalize_default(subject))
        records = self.state.live(subject, deleted)
        if not records:
            raise errors.subject_not_found(subject)
        for record in reversed(records):
            same = record.schema_type == parsed.schema_type and record.references == request.references and \
                (record.schema == parsed.canonical or self._equivalent(record, parsed))
            if same and (request.metadata is None or request.metadata == record.metadata) and \
                    (request.rule_set is None or request.rule_set == record.rule_set):
                return record
        raise errors.schema_not_found("")

    def _equivalent(self, record: VersionRecord, parsed: ParsedSchema) -> bool:
        """The stored string and the asked one differ only in key order or whitespace."""
        if record.schema_type == "PROTOBUF":
            return False
        try:
            return json.loads(record.schema) == json.loads(parsed.canonical)
        except ValueError:
            return False

    # ---- writes ----

    def check_writable(self, subject: str | None) -> str:
        mode = self.mode(subject)
        if mode == "READONLY":
            raise errors.not_permitted(f"Subject {subject} is in read-only mode")
        return mode

    async def register(self, subject: str, request: RegisterRequest, normalize: bool) -> VersionRecord:
        check_subject(subject)
        for _ in range(WRITE_ATTEMPTS):
            await self.log.sync()
            mode = self.check_writable(subject)
            planned = self.plan_register(subject, request, normalize or self.normalize_default(subject), mode)
            if isinstance(planned, VersionRecord) and planned.subject == subject and \
                    planned.version in self.state.versions.get(subject, {}):
                return planned  # already registered: idempotent
            await self.log.write([(schema_key(subject, planned.version), _value(planned))])
            landed = self.state.versions.get(subject, {}).get(planned.version)
            if landed is not None and landed.id == planned.id and landed.md5 == planned.md5 and not landed.deleted:
                return landed
            # another writer won this version or id: plan again from the state as it now is
        raise errors.store_error(f"could not register under {subject} after {WRITE_ATTEMPTS} attempts")

    def plan_register(self, subject: str, request: RegisterRequest, normalize: bool, mode: str) -> VersionRecord:
        parsed = self.parse_request(request, normalize)
        records = self.state.live(subject)
        metadata, rule_set = request.metadata, request.rule_set
        if records and metadata is None:
            metadata = records[-1].metadata  # inherited from the latest version, as Confluent does
        if records and rule_set is None:
            rule_set = records[-1].rule_set
        md5 = schemas.fingerprint(parsed.canonical, parsed.schema_type, request.references, metadata, rule_set)
        for record in records:
            if record.md5 == md5 and (request.explicit_id is None or record.id == request.explicit_id):
                return record
        context = context_of(subject)
        if mode == "IMPORT":
            if request.explicit_id is None:
                raise errors.not_permitted("Subject is in import mode: a schema id must be given")
            bound = self.state.entry(context, request.explicit_id)
            if bound is not None and bound.md5 != md5:
                raise errors.id_mismatch(f"Overwrite new schema with id {request.explicit_id} is not permitted.")
            schema_id = request.explicit_id
        else:
            if request.explicit_id is not None:
                raise errors.not_permitted("A schema id may be given only in IMPORT mode")
            level = self.level(subject)
            earlier = [self.parsed_of(r) for r in records]
            found = compatibility.check(level, parsed, earlier)
            if found:
                raise errors.incompatible(subject, found)
            schema_id = self.state.by_md5.get((context, md5)) or self.state.next_id(context)
        version = request.explicit_version or self.state.next_version(subject)
        if request.explicit_version is not None and version in self.state.versions.get(subject, {}):
            raise errors.not_permitted(f"Version {version} of {subject} already exists")
        return VersionRecord(subject, version, schema_id, parsed.canonical, parsed.schema_type,
                             list(request.references), metadata, rule_set, md5)

    async def delete_subject(self, subject: str, permanent: bool) -> list[int]:
        await self.log.sync()
        self.check_writable(subject)
        everything = self.state.live(subject, deleted=True)
        if not everything:
            raise errors.subject_not_found(subject)
        live = [r for r in everything if not r.deleted]
        if permanent:
            if live:
                raise errors.subject_not_soft_deleted(subject)
            self._refuse_referenced(everything)
            records = [(schema_key(subject, r.version), None) for r in everything]
            records += [(subject_key("CONFIG", subject), None), (subject_key("MODE", subject), None)]
            await self.log.write(records)
            return [r.version for r in everything]
        if not live:
            raise errors.subject_soft_deleted(subject)
        self._refuse_referenced(live)
        highest = everything[-1].version
        await self.log.write([(subject_key("DELETE_SUBJECT", subject),
                               json.dumps({"subject": subject, "version": highest}).encode())])
        return [r.version for r in live]

    async def delete_version(self, subject: str, version: int, permanent: bool) -> int:
        await self.log.sync()
        self.check_writable(subject)
        record = self.version_or_404(subject, version, deleted=True) if version != -1 \
            else self.version_or_404(subject, -1, deleted=False)
        if permanent and not record.deleted:
            raise errors.version_not_soft_deleted(subject, record.version)
        if not permanent and record.deleted:
            raise errors.version_soft_deleted(subject, record.version)
        self._refuse_referenced([record])
        if permanent:
            await self.log.write([(schema_key(subject, record.version), None)])
        else:
            soft = VersionRecord(**{**record.__dict__, "deleted": True})
            await self.log.write([(schema_key(subject, record.version), _value(soft))])
        return record.version

    def _refuse_referenced(self, records: list[VersionRecord]) -> None:
        for record in records:
            users = self.state.referenced_by(record.subject, record.version)
            if users:
                raise errors.reference_exists(f"{record.subject} version {record.version} (referenced by ids {users})")

    async def set_config(self, subject: str | None, body: Any) -> dict[str, Any]:
        if not isinstance(body, dict):
            raise errors.unprocessable("the body must be a JSON object")
        level = body.get("compatibility", body.get("compatibilityLevel"))
        value: dict[str, Any] = {}
        if level is not None:
            value["compatibilityLevel"] = compatibility.level_of(level)
        for name in ("normalize", "validateFields"):
            if name in body and body[name] is not None:
                if not isinstance(body[name], bool):
                    raise errors.unprocessable(f"'{name}' must be a boolean")
                value[name] = body[name]
        for name in ("compatibilityGroup", "defaultMetadata", "overrideMetadata", "defaultRuleSet", "overrideRuleSet",
                     "alias"):
            if body.get(name) is not None:
                value[name] = body[name]
        if not value:
            raise errors.invalid_compatibility(level)
        await self.log.sync()
        merged = {**(self.state.config(subject) or {}), **value}
        await self.log.write([(subject_key("CONFIG", subject), json.dumps(
            {**merged, **({"subject": subject} if subject else {})}).encode())])
        echo = {("compatibility" if k == "compatibilityLevel" else k): v for k, v in value.items()}
        return echo

    def get_config(self, subject: str | None, default_to_global: bool) -> dict[str, Any]:
        config = self.state.config(subject) if subject else self.state.config(None)
        if config is None and subject and not default_to_global:
            raise errors.subject_config_not_found(subject)
        if config is None and subject:
            config = self.state.config(None)
        config = dict(config or {})
        config.setdefault("compatibilityLevel", compatibility.DEFAULT_LEVEL)
        return config

    async def delete_config(self, subject: str | None) -> dict[str, Any]:
        await self.log.sync()
        previous = self.state.config(subject)
        if subject and previous is None:
            raise errors.subject_config_not_found(subject)
        await self.log.write([(subject_key("CONFIG", subject), None)])
        return dict(previous or {"compatibilityLevel": compatibility.DEFAULT_LEVEL})

    async def set_mode(self, subject: str | None, body: Any, force: bool) -> dict[str, Any]:
        if not isinstance(body, dict) or not isinstance(body.get("mode"), str):
            raise errors.invalid_mode(body.get("mode") if isinstance(body, dict) else body)
        mode = body["mode"].upper()
        if mode not in MODES:
            raise errors.invalid_mode(body["mode"])
        await self.log.sync()
        if mode == "IMPORT" and not force:
            has_schemas = bool(self.state.live(subject)) if subject else bool(self.state.subjects())
            if has_schemas:
                raise errors.not_permitted("Cannot import since found existing subjects")
        await self.log.write([(subject_key("MODE", subject), json.dumps(
            {**({"subject": subject} if subject else {}), "mode": mode}).encode())])
        return {"mode": mode}

    def get_mode(self, subject: str | None, default_to_global: bool) -> dict[str, Any]:
        mode = self.state.mode(subject)
        if mode is None and subject and not default_to_global:
            raise errors.subject_mode_not_found(subject)
        return {"mode": mode or self.state.mode(None) or "READWRITE"}

    async def delete_mode(self, subject: str) -> dict[str, Any]:
        await self.log.sync()
        previous = self.state.mode(subject)
        if previous is None:
            raise errors.subject_mode_not_found(subject)
        await self.log.write([(subject_key("MODE", subject), None)])
        return {"mode": previous}

    def test_compatibility(self, subject: str, version: str | None, request: RegisterRequest,
                           normalize: bool) -> list[str]:
        parsed = self.parse_request(request, normalize or self.normalize_default(subject))
        level = self.level(subject)
        records = self.state.live(subject)
        if version is None:
            earlier = records
            level = level if level == "NONE" else level.split("_")[0] + "_TRANSITIVE"
        else:
            number = parse_version(version)
            if number == -1:
                earlier = records[-1:]
            else:
                found = next((r for r in records if r.version == number), None)
                if found is None:
                    if not records:
                        raise errors.subject_not_found(subject)
                    raise errors.version_not_found(number)
                earlier = [found]
        return compatibility.check(level, parsed, [self.parsed_of(r) for r in earlier])


def _value(record: VersionRecord) -> bytes:
    return json.dumps(record.value(), separators=(",", ":")).encode()


Forwarder = Callable[..., Awaitable[Any]]
