"""The registry's HTTP API on aiohttp: Confluent's paths, content types, status and error codes,
as confluent-kafka's SchemaRegistryClient and serializers call them (facts/schema-registry.md §1).

Reads are answered from this node's replay of `_schemas`. Writes are done here when this node is
the elected writer, and forwarded to the writer otherwise (50004 when none is known, 50003 when
forwarding fails). Bodies are parsed as JSON whatever their content type (the client sends
`application/vnd.schemaregistry.v1+json` without Accept); query booleans take true/false/True/1.
Subjects are matched on the raw path, so `%2F` in a subject stays part of it.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
from collections.abc import Awaitable, Callable
from typing import Any, Protocol

from aiohttp import ClientConnectorError, ClientError, ClientSession, ClientTimeout, web

from roost.registry import errors, schemas
from roost.registry.security import GLOBAL, READ, WRITE, Security
from roost.registry.service import (
    Registry,
    check_subject,
    entry_body,
    parse_register_body,
    parse_version,
    version_body,
)
from roost.registry.store import context_of

log = logging.getLogger("roost.registry")

CONTENT_TYPE = "application/vnd.schemaregistry.v1+json"
MAX_BODY_BYTES = 4 << 20
WRITE_TIMEOUT_S = 30.0  # kafkastore.timeout.ms's default here: a write's whole budget, forwarding included
FORWARD_GRACE_S = 2.0  # the writer answers 5000x at its deadline; the forwarder waits this much longer
FORWARDED_HEADER = "X-Roost-Forwarded"
DEADLINE_HEADER = "X-Roost-Deadline-Ms"
ELECTION_POLL_S = 0.1
FORWARD_RETRY_S = 0.3

Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]


class Leadership(Protocol):
    def is_writer(self) -> bool: ...

    def writer_url(self) -> str | None: ...


class AlwaysWriter:
    """A registry that is its own writer (one node, or tests of the API alone)."""

    def is_writer(self) -> bool:
        return True

    def writer_url(self) -> str | None:
        return None


def answer(body: Any, status: int = 200) -> web.Response:
    return web.Response(text=json.dumps(body), status=status, content_type=CONTENT_TYPE.split(";")[0])


def flag(request: web.Request, *names: str, default: bool = False) -> bool:
    for name in names:
        value = request.query.get(name)
        if value is not None:
            return value.strip().lower() in ("true", "1")
    return default


def integer(request: web.Request, name: str, default: int) -> int:
    value = request.query.get(name)
    if value is None or value == "":
        return default
    try:
        return int(value)
    except ValueError:
        raise errors.unprocessable(f"query parameter {name} must be an integer") from None


def page(items: list[Any], request: web.Request) -> list[Any]:
    offset = max(0, integer(request, "offset", 0))
    limit = integer(request, "limit", -1)
    return items[offset:] if limit < 0 else items[offset:offset + limit]


async def body_of(request: web.Request) -> Any:
    raw = await request.read()
    if not raw:
        return {}
    try:
        return json.loads(raw)
    except (ValueError, RecursionError):
        raise errors.RegistryError(422, 50005, "the request body is not JSON") from None


def _subject(request: web.Request) -> str:
    return request.match_info["subject"]


class RegistryApi:
    def __init__(self, registry: Registry, leadership: Leadership, security: Security,
                 client_ssl: Any = None, write_timeout_s: float = WRITE_TIMEOUT_S) -> None:
        self.registry = registry
        self.write_timeout_s = write_timeout_s
        self.leadership = leadership
        self.security = security
        self.client_ssl = client_ssl
        self._session: ClientSession | None = None

    # ---- middleware: errors, authentication ----

    @web.middleware
    async def middleware(self, request: web.Request, handler: Handler) -> web.StreamResponse:
        try:
            principal = self.security.authenticate(request.headers.get("Authorization"))
            if principal is None:
                return web.Response(status=401, text=json.dumps({"error_code": 401, "message": "Unauthorized"}),
                                    content_type="application/json",
                                    headers={"WWW-Authenticate": 'Basic realm="roost-schema-registry"'})
            request["principal"] = principal
            try:
                return await handler(request)
            except errors.RegistryError as error:
                if error.status != 404 or request.method not in ("GET", "POST"):
                    raise
            # A miss may be a write this node has not replayed yet (made through another node a
            # moment ago): catch up to the topic's end once and ask again.
            await self.registry.log.sync()
            return await handler(request)
        except errors.RegistryError as error:
            return answer(error.body(), error.status)
        except web.HTTPException as error:
            if error.status >= 400:
                return web.Response(status=error.status, content_type="application/json",
                                    text=json.dumps({"error_code": error.status, "message": error.reason}))
            raise
        except TimeoutError:
            return answer(errors.store_timeout("the store did not answer in time").body(), 500)
        except Exception as error:  # a store client's failure (a KafkaException): Confluent's code, not a bare 500
            log.warning("%s %s: %s: %s", request.method, request.path, type(error).__name__, error)
            return answer(errors.store_error(f"{type(error).__name__}: {error}").body(), 500)

    def authorize(self, request: web.Request, operation: str, subject: str) -> None:
        principal = request["principal"]
        if not self.security.allowed(principal, operation, subject):
            raise errors.RegistryError(403, 40301, f"{principal} may not {operation.lower()} subject {subject!r}")

    # ---- forwarding of writes ----

    async def write_or_forward(self, request: web.Request, work: Callable[[], Awaitable[Any]]) -> web.Response:
        """Do the write here when this node is the writer, else forward it to the writer: either
        way within one budget (`write_timeout_s`, passed on to the writer in a header so that a
        forwarded write does not start a budget of its own). While an election runs (at start,
        after the writer died) the write waits for its outcome within that budget. Past it the
        answer is Confluent's: 50004 no writer known, 50003 the writer did not answer, 50002 the
        store did not take the write in time."""
        loop = asyncio.get_running_loop()
        budget = self.write_timeout_s
        given = request.headers.get(DEADLINE_HEADER)
        if given is not None:
            with contextlib.suppress(ValueError):
                budget = min(budget, max(0.0, int(given) / 1000))
        deadline = loop.time() + budget
        while True:
            while not self.leadership.is_writer() and not self.leadership.writer_url() and loop.time() < deadline:
                await asyncio.sleep(ELECTION_POLL_S)
            if self.leadership.is_writer():
                try:
                    return answer(await asyncio.wait_for(work(), max(0.1, deadline - loop.time())))
                except TimeoutError:
                    raise errors.store_timeout(f"the write was not read back within {budget:.0f} s") from None
            url = self.leadership.writer_url()
            if not url or request.headers.get(FORWARDED_HEADER):
                raise errors.unknown_leader()
            try:
                return await self._forward(request, url, deadline)
            except ClientConnectorError as error:
                # Nothing was sent: the writer is gone (killed a moment ago) and the group has not
                # yet handed its place on. Ask again for the writer, within the budget.
                if loop.time() + ELECTION_POLL_S >= deadline:
                    raise errors.forward_failed(f"{url}: {type(error).__name__}") from None
                await asyncio.sleep(FORWARD_RETRY_S)

    async def _forward(self, request: web.Request, url: str, deadline: float) -> web.Response:
        if self._session is None:
            self._session = ClientSession()
        headers = {k: v for k, v in request.headers.items() if k.lower() in ("authorization", "content-type")}
        headers[FORWARDED_HEADER] = "1"
        left = max(0.1, deadline - asyncio.get_running_loop().time())
        headers[DEADLINE_HEADER] = str(int(left * 1000))
        target = url.rstrip("/") + request.rel_url.raw_path_qs
        try:
            async with self._session.request(request.method, target, data=await request.read(), headers=headers,
                                             ssl=self.client_ssl,
                                             timeout=ClientTimeout(total=left + FORWARD_GRACE_S)) as reply:
                text = await reply.text()
                if reply.status < 300:
                    await self.registry.log.sync()  # read-your-writes on this node too
                return web.Response(text=text, status=reply.status, content_type=CONTENT_TYPE)
        except ClientConnectorError:
            raise
        except (TimeoutError, ClientError) as error:
            raise errors.forward_failed(f"{url}: {type(error).__name__}") from None

    async def close(self) -> None:
        if self._session is not None:
            await self._session.close()

    # ---- root, types, contexts, associations ----

    async def root(self, request: web.Request) -> web.Response:
        return answer({})

    async def schema_types(self, request: web.Request) -> web.Response:
        return answer(list(schemas.SCHEMA_TYPES))

    async def contexts(self, request: web.Request) -> web.Response:
        return answer(page(self.registry.state.contexts(), request))

    async def writer(self, request: web.Request) -> web.Response:
        """Roost's own: which node writes (for operators and tests)."""
        return answer({"is_writer": self.leadership.is_writer(), "writer": self.leadership.writer_url(),
                       "applied_offset": self.registry.state.applied_offset})

    async def associations(self, request: web.Request) -> web.Response:
        # Roost keeps no associations: [] sends the serializers to their fallback naming strategy
        return answer([])

    async def association_write(self, request: web.Request) -> web.Response:
        raise errors.RegistryError(422, 42212, "Invalid association: this registry keeps no associations")

    # ---- schemas by id ----

    def _schema_id(self, request: web.Request) -> int:
        try:
            return int(request.match_info["id"])
        except ValueError:
            raise errors.schema_not_found(request.match_info["id"]) from None

    async def schema_by_id(self, request: web.Request) -> web.Response:
        entry = self.registry.get_by_id(self._schema_id(request), request.query.get("subject"))
        body = entry_body(entry)
        body.pop("id")
        return answer(body)

    async def raw_schema_by_id(self, request: web.Request) -> web.Response:
        entry = self.registry.get_by_id(self._schema_id(request), request.query.get("subject"))
        return answer(json.loads(entry.schema) if entry.schema_type != "PROTOBUF" else entry.schema)

    async def schema_by_guid(self, request: web.Request) -> web.Response:
        entry = self.registry.get_by_guid(request.match_info["guid"])
        return answer(entry_body(entry))

    def _holders(self, request: web.Request) -> list[tuple[str, int]]:
        subject = request.query.get("subject")
        entry = self.registry.get_by_id(self._schema_id(request), subject)
        deleted = flag(request, "deleted")
        holders = []
        for name, version in sorted(entry.holders):
            record = self.registry.state.versions.get(name, {}).get(version)
            if record is not None and (deleted or not record.deleted) and self.security.allowed(
                    request["principal"], READ, name):
                holders.append((name, version))
        return holders

    async def subjects_of_id(self, request: web.Request) -> web.Response:
        return answer(page(sorted({s for s, _ in self._holders(request)}), request))

    async def versions_of_id(self, request: web.Request) -> web.Response:
        return answer(page([{"subject": s, "version": v} for s, v in self._holders(request)], request))

    async def list_schemas(self, request: web.Request) -> web.Response:
        prefix = request.query.get("subjectPrefix", "")
        deleted = flag(request, "deleted")
        latest_only = flag(request, "latestOnly")
        found = []
        for subject in self.registry.state.subjects(deleted=deleted, prefix=prefix):
            if not self.security.allowed(request["principal"], READ, subject):
                continue
            records = self.registry.state.live(subject, deleted)
            found += [version_body(r) for r in (records[-1:] if latest_only else records)]
        return answer(page(found, request))

    # ---- subjects ----

    async def list_subjects(self, request: web.Request) -> web.Response:
        names = self.registry.state.subjects(
            deleted=flag(request, "deleted"), deleted_only=flag(request, "deletedOnly", "deleted_only"),
            prefix=request.query.get("subjectPrefix", request.query.get("subject", "")))
        names = [n for n in names if self.security.allowed(request["principal"], READ, n)]
        return answer(page(names, request))

    async def list_versions(self, request: web.Request) -> web.Response:
        subject = _subject(request)
        self.authorize(request, READ, subject)
        deleted_only = flag(request, "deletedOnly", "deleted_only")
        records = self.registry.state.live(subject, deleted=flag(request, "deleted") or deleted_only)
        if deleted_only:
            records = [r for r in records if r.deleted]
        if not records and not deleted_only:
            raise errors.subject_not_found(subject)
        return answer(page([r.version for r in records], request))

    async def get_version(self, request: web.Request) -> web.Response:
        subject = _subject(request)
        self.authorize(request, READ, subject)
        version = parse_version(request.match_info["version"])
        record = self.registry.version_or_404(subject, version, flag(request, "deleted"))
        return answer(version_body(record))

    async def get_raw_version(self, request: web.Request) -> web.Response:
        subject = _subject(request)
        self.authorize(request, READ, subject)
        record = self.registry.version_or_404(subject, parse_version(request.match_info["version"]),
                                              flag(request, "deleted"))
        return answer(json.loads(record.schema) if record.schema_type != "PROTOBUF" else record.schema)

    async def referenced_by(self, request: web.Request) -> web.Response:
        subject = _subject(request)
        self.authorize(request, READ, subject)
        record = self.registry.version_or_404(subject, parse_version(request.match_info["version"]), True)
        return answer(page(self.registry.state.referenced_by(subject, record.version), request))

    async def latest_with_metadata(self, request: web.Request) -> web.Response:
        subject = _subject(request)
        self.authorize(request, READ, subject)
        keys, values = request.query.getall("key", []), request.query.getall("value", [])
        wanted = dict(zip(keys, values, strict=False))
        records = self.registry.versions_or_404(subject, flag(request, "deleted"))
        for record in reversed(records):
            properties = (record.metadata or {}).get("properties") or {}
            if all(properties.get(k) == v for k, v in wanted.items()):
                return answer(version_body(record))
        raise errors.version_not_found(f"with metadata {wanted}")

    async def lookup(self, request: web.Request) -> web.Response:
        subject = _subject(request)
        self.authorize(request, READ, subject)
        registered = parse_register_body(await body_of(request))
        record = self.registry.lookup(subject, registered, flag(request, "normalize"), flag(request, "deleted"))
        return answer(version_body(record))

    async def register(self, request: web.Request) -> web.Response:
        subject = check_subject(_subject(request))
        self.authorize(request, WRITE, subject)
        registered = parse_register_body(await body_of(request))
        normalize = flag(request, "normalize")

        async def work() -> Any:
            record = await self.registry.register(subject, registered, normalize)
            return version_body(record)

        return await self.write_or_forward(request, work)

    async def delete_subject(self, request: web.Request) -> web.Response:
        subject = _subject(request)
        self.authorize(request, WRITE, subject)
        permanent = flag(request, "permanent")
        return await self.write_or_forward(request, lambda: self.registry.delete_subject(subject, permanent))

    async def delete_version(self, request: web.Request) -> web.Response:
        subject = _subject(request)
        self.authorize(request, WRITE, subject)
        version = parse_version(request.match_info["version"])
        permanent = flag(request, "permanent")
        return await self.write_or_forward(request, lambda: self.registry.delete_version(subject, version, permanent))

    # ---- compatibility ----

    async def compatibility(self, request: web.Request) -> web.Response:
        subject = _subject(request)
        self.authorize(request, READ, subject)
        registered = parse_register_body(await body_of(request))
        found = self.registry.test_compatibility(subject, request.match_info.get("version"), registered,
                                                 flag(request, "normalize"))
        body: dict[str, Any] = {"is_compatible": not found}
        if flag(request, "verbose"):
            body["messages"] = found
        return answer(body)

    # ---- config and mode ----

    def _scope(self, request: web.Request, operation: str) -> str | None:
        subject = request.match_info.get("subject")
        self.authorize(request, operation, subject or GLOBAL)
        return subject

    async def get_config(self, request: web.Request) -> web.Response:
        subject = self._scope(request, READ)
        return answer(self.registry.get_config(subject, flag(request, "defaultToGlobal")))

    async def put_config(self, request: web.Request) -> web.Response:
        subject = self._scope(request, WRITE)
        body = await body_of(request)
        return await self.write_or_forward(request, lambda: self.registry.set_config(subject, body))

    async def delete_config(self, request: web.Request) -> web.Response:
        subject = self._scope(request, WRITE)
        return await self.write_or_forward(request, lambda: self.registry.delete_config(subject))

    async def get_mode(self, request: web.Request) -> web.Response:
        subject = self._scope(request, READ)
        return answer(self.registry.get_mode(subject, flag(request, "defaultToGlobal")))

    async def put_mode(self, request: web.Request) -> web.Response:
        subject = self._scope(request, WRITE)
        body = await body_of(request)
        force = flag(request, "force")
        return await self.write_or_forward(request, lambda: self.registry.set_mode(subject, body, force))

    async def delete_mode(self, request: web.Request) -> web.Response:
        subject = self._scope(request, WRITE)
        if subject is None:
            raise errors.RegistryError(405, 405, "the global mode cannot be deleted")
        return await self.write_or_forward(request, lambda: self.registry.delete_mode(subject))

    # ---- the app ----

    def routes(self) -> list[web.RouteDef]:
        return [
            web.get("/", self.root), web.post("/", self.root),
            web.get("/schemas/types", self.schema_types),
            web.get("/schemas", self.list_schemas),
            web.get("/schemas/ids/{id}", self.schema_by_id),
            web.get("/schemas/ids/{id}/schema", self.raw_schema_by_id),
            web.get("/schemas/ids/{id}/subjects", self.subjects_of_id),
            web.get("/schemas/ids/{id}/versions", self.versions_of_id),
            web.get("/schemas/guids/{guid}", self.schema_by_guid),
            web.get("/subjects", self.list_subjects),
            web.post("/subjects/{subject}", self.lookup),
            web.delete("/subjects/{subject}", self.delete_subject),
            web.get("/subjects/{subject}/versions", self.list_versions),
            web.post("/subjects/{subject}/versions", self.register),
            web.get("/subjects/{subject}/versions/{version}", self.get_version),
            web.get("/subjects/{subject}/versions/{version}/schema", self.get_raw_version),
            web.get("/subjects/{subject}/versions/{version}/referencedby", self.referenced_by),
            web.delete("/subjects/{subject}/versions/{version}", self.delete_version),
            web.get("/subjects/{subject}/metadata", self.latest_with_metadata),
            web.post("/compatibility/subjects/{subject}/versions", self.compatibility),
            web.post("/compatibility/subjects/{subject}/versions/{version}", self.compatibility),
            web.get("/config", self.get_config), web.put("/config", self.put_config),
            web.delete("/config", self.delete_config),
            web.get("/config/{subject}", self.get_config), web.put("/config/{subject}", self.put_config),
            web.delete("/config/{subject}", self.delete_config),
            web.get("/mode", self.get_mode), web.put("/mode", self.put_mode),
            web.get("/mode/{subject}", self.get_mode), web.put("/mode/{subject}", self.put_mode),
            web.delete("/mode/{subject}", self.delete_mode),
            web.get("/contexts", self.contexts),
            web.get("/roost/writer", self.writer),
            web.get("/associations/resources/{namespace}/{resource}", self.associations),
            web.post("/associations", self.association_write),
        ]


def make_app(api: RegistryApi, extra_routes: list[web.RouteDef] | None = None) -> web.Application:
    from roost.registry.openapi import document

    app = web.Application(middlewares=[api.middleware], client_max_size=MAX_BODY_BYTES)
    app.add_routes(api.routes())
    spec = document(with_proxy=bool(extra_routes))

    async def openapi(request: web.Request) -> web.Response:
        return web.json_response(spec)

    app.add_routes([web.get("/openapi.json", openapi)])
    if extra_routes:
        app.add_routes(extra_routes)
    app.on_cleanup.append(lambda _app: api.close())
    return app


__all__ = ["AlwaysWriter", "RegistryApi", "context_of", "make_app"]
