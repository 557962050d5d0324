"""Cluster links: the list (source, state, mirror partitions), and one link's source, state,
errors, mirror topics and per-partition lag in records and milliseconds, as the destination's
brokers publish them (roost.console.link_view). A read: shown in read-only mode too."""

from __future__ import annotations

from aiohttp import web

from roost.console.context import console_of

routes = web.RouteTableDef()


@routes.get("/links")
async def links_page(request: web.Request) -> web.Response:
    return console_of(request).page("links.html", "Cluster links")


@routes.get("/links/{name}")
async def link_page(request: web.Request) -> web.Response:
    name = request.match_info["name"]
    return console_of(request).page("link.html", f"Link {name}", link=name)


@routes.get("/api/links")
async def links_api(request: web.Request) -> web.Response:
    console = console_of(request)
    return web.json_response({"links": await console.run(console.links.links)})


@routes.get("/api/links/{name}")
async def link_api(request: web.Request) -> web.Response:
    console = console_of(request)
    return web.json_response(await console.run(console.links.link, request.match_info["name"]))
