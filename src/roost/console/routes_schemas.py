"""The schema registry's pages: the subjects (latest version, id, type) with the global
compatibility level; a subject's versions, one version's schema text, the compatibility level in
force for it, and the diff of two versions (the one before, unless another is asked); and a
schema id (as the message browser shows it) sent on to the subject and version registered with
it. Reads only (registering is the serializers' and `roost schema register`'s): shown in
read-only mode too. roost.console.registry_side asks the registry."""

from __future__ import annotations

from aiohttp import web

from roost.console.context import console_of
from roost.console.errors import bad_request
from roost.console.registry_side import quoted

routes = web.RouteTableDef()


def version_param(request: web.Request, name: str) -> int | None:
    text = request.query.get(name, "").strip()
    if not text:
        return None
    if not text.isdigit() or not 0 < int(text) < 2**31:
        raise bad_request(f"{name} must be a version number")
    return int(text)


@routes.get("/schemas")
async def schemas_page(request: web.Request) -> web.Response:
    return console_of(request).page("schemas.html", "Schema registry")


@routes.get("/schemas/id/{schema_id:[0-9]{1,10}}")
async def schema_id_page(request: web.Request) -> web.Response:
    """The subject and version a schema id is registered under (the first, when several are)."""
    console = console_of(request)
    schema_id = int(request.match_info["schema_id"])
    found = await console.run(console.registry.get, f"/schemas/ids/{schema_id}/versions")
    if not found:
        raise web.HTTPNotFound(text=f"schema id {schema_id} is registered under no subject")
    first = sorted(found, key=lambda f: (str(f.get("subject")), int(f.get("version", 0))))[0]
    raise web.HTTPFound(f"/schemas/subjects/{quoted(str(first['subject']))}?version={int(first['version'])}")


@routes.get("/schemas/subjects/{subject}")
async def subject_page(request: web.Request) -> web.Response:
    subject = request.match_info["subject"]
    return console_of(request).page("schema.html", f"Subject {subject}", subject=subject)


@routes.get("/api/schemas")
async def schemas_api(request: web.Request) -> web.Response:
    console = console_of(request)
    return web.json_response(await console.run(console.registry.subjects))


@routes.get("/api/schemas/subjects/{subject}")
async def subject_api(request: web.Request) -> web.Response:
    console = console_of(request)
    version, against = version_param(request, "version"), version_param(request, "against")
    return web.json_response(await console.run(console.registry.subject, request.match_info["subject"], version,
                                               against))
