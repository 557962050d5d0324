"""The console's view of a Confluent-compatible schema registry (Roost's own, or any other): the
few GETs its pages need, over plain HTTP(S) with urllib, each bounded by the console's request
timeout and its answer's size. (confluent-kafka's SchemaRegistryClient would serve too, but the
pages need only reads, and its caching and exception types would hide from the page the
registry's own error code and message, which it shows as they are.)

A schema by id never changes, so those are kept (up to MAX_CACHED_SCHEMAS): the message browser
asks for each id it meets once."""

from __future__ import annotations

import json
import threading
import urllib.error
import urllib.parse
import urllib.request
from typing import Any

from roost.console.errors import ConsoleError
from roost.console.schema_view import RegisteredSchema, pretty_schema, version_diff

MAX_ANSWER_BYTES = 8 * 1024 * 1024
MAX_CACHED_SCHEMAS = 10_000
MAX_SUBJECTS_LISTED = 500  # the list page shows this many (each is one request for its latest version)
ACCEPT = "application/vnd.schemaregistry.v1+json, application/json"


def quoted(subject: str) -> str:
    return urllib.parse.quote(subject, safe="")


class RegistrySide:
    def __init__(self, url: str | None, timeout_s: float) -> None:
        self.url = url.rstrip("/") if url else None
        self.timeout = timeout_s
        self._lock = threading.Lock()
        self._schemas: dict[int, RegisteredSchema] = {}

    def get(self, path: str) -> Any:
        if self.url is None:
            raise ConsoleError(404, "no schema registry configured: start the console with --schema-registry URL")
        request = urllib.request.Request(self.url + path, headers={"Accept": ACCEPT})
        try:
            with urllib.request.urlopen(request, timeout=self.timeout) as answer:
                return json.loads(answer.read(MAX_ANSWER_BYTES))
        except urllib.error.HTTPError as error:
            try:
                body = json.loads(error.read(64 * 1024))
                message = f"{body.get('message')} (error {body.get('error_code')})"
            except (ValueError, AttributeError):
                message = f"HTTP {error.code}"
            raise ConsoleError(404 if error.code == 404 else 502, f"schema registry: {message}") from None
        except (urllib.error.URLError, OSError) as error:
            raise ConsoleError(503, f"cannot reach the schema registry at {self.url}: "
                                    f"{getattr(error, 'reason', error)}") from None
        except ValueError:
            raise ConsoleError(502, f"the schema registry at {self.url} answered something that is not JSON") from None

    def compatibility(self, subject: str | None = None) -> dict[str, Any]:
        """The compatibility level in force: the subject's own, else the global one."""
        if subject is not None:
            try:
                own = self.get(f"/config/{quoted(subject)}")
                return {"level": own.get("compatibilityLevel") or own.get("compatibility"), "source": "subject"}
            except ConsoleError as error:
                if error.status != 404:
                    raise
        found = self.get("/config")
        return {"level": found.get("compatibilityLevel") or found.get("compatibility"), "source": "global"}

    def subjects(self) -> dict[str, Any]:
        names = sorted(str(s) for s in self.get("/subjects"))
        rows = []
        for name in names[:MAX_SUBJECTS_LISTED]:
            try:
                latest = self.get(f"/subjects/{quoted(name)}/versions/latest")
            except ConsoleError as error:
                if error.status == 404:
                    continue  # deleted between the two questions
                raise
            rows.append({"subject": name, "version": latest.get("version"), "id": latest.get("id"),
                         "schema_type": latest.get("schemaType") or "AVRO"})
        return {"subjects": rows, "total": len(names), "compatibility": self.compatibility()}

    def subject(self, subject: str, version: int | None, against: int | None) -> dict[str, Any]:
        versions = sorted(int(v) for v in self.get(f"/subjects/{quoted(subject)}/versions"))
        if not versions:
            raise ConsoleError(404, f"not found: subject {subject}")
        chosen = versions[-1] if version is None else version
        if chosen not in versions:
            raise ConsoleError(404, f"not found: version {chosen} of subject {subject}")
        shown = self.version(subject, chosen)
        earlier = [v for v in versions if v < chosen]
        base = against if against is not None else (earlier[-1] if earlier else None)
        diff = None
        if base is not None:
            if base not in versions:
                raise ConsoleError(404, f"not found: version {base} of subject {subject}")
            old = self.version(subject, base)
            diff = {"from": base, "to": chosen,
                    **version_diff(old["schema"], shown["schema"], f"{subject} v{base}", f"{subject} v{chosen}")}
        return {"subject": subject, "versions": versions, "version": shown, "diff": diff,
                "compatibility": self.compatibility(subject)}

    def version(self, subject: str, version: int) -> dict[str, Any]:
        found = self.get(f"/subjects/{quoted(subject)}/versions/{version}")
        schema_type = found.get("schemaType") or "AVRO"
        text = str(found.get("schema", ""))
        return {"version": found.get("version"), "id": found.get("id"), "schema_type": schema_type,
                "schema": pretty_schema(schema_type, text),
                "references": [{"name": r.get("name"), "subject": r.get("subject"), "version": r.get("version")}
                               for r in found.get("references") or []]}

    def schema(self, schema_id: int) -> RegisteredSchema:
        with self._lock:
            kept = self._schemas.get(schema_id)
        if kept is not None:
            return kept
        found = self.get(f"/schemas/ids/{schema_id}")
        schema = RegisteredSchema(schema_id, found.get("schemaType") or "AVRO", str(found.get("schema", "")))
        with self._lock:
            if len(self._schemas) < MAX_CACHED_SCHEMAS:
                self._schemas[schema_id] = schema
        return schema
