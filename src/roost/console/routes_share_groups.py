"""Share groups (KIP-932 queues): the list, and one group's members, their partitions, and per
share-partition the figures only its leader holds (in-flight and acquired records, the start
offset and its lag, the delivery-count distribution), with the group's dead-letter topic
(roost.console.share_view says where each figure comes from). A read: shown in read-only mode too."""

from __future__ import annotations

from aiohttp import web

from roost.console.context import console_of

routes = web.RouteTableDef()


@routes.get("/share-groups")
async def share_groups_page(request: web.Request) -> web.Response:
    return console_of(request).page("share_groups.html", "Share groups")


@routes.get("/share-groups/{name}")
async def share_group_page(request: web.Request) -> web.Response:
    name = request.match_info["name"]
    return console_of(request).page("share_group.html", f"Share group {name}", group=name)


@routes.get("/api/share-groups")
async def share_groups_api(request: web.Request) -> web.Response:
    console = console_of(request)
    return web.json_response({"groups": await console.run(console.kafka.share_groups)})


@routes.get("/api/share-groups/{name}")
async def share_group_api(request: web.Request) -> web.Response:
    console = console_of(request)
    return web.json_response(await console.run(console.kafka.share_group, request.match_info["name"]))
