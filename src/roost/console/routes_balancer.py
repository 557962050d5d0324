"""The balancer: its mode and last decision, the load model per broker, the last execution's
plan (each proposal with its goals and its progress) and the reassignments in progress
(roost.console.balance_view); and a dry run (`roost balance plan`) on request. Reads only:
shown in read-only mode too. Starting or stopping an execution stays `roost balance`'s."""

from __future__ import annotations

from aiohttp import web

from roost.console.context import console_of

routes = web.RouteTableDef()


@routes.get("/balancer")
async def balancer_page(request: web.Request) -> web.Response:
    return console_of(request).page("balancer.html", "Balancer")


@routes.get("/api/balancer")
async def balancer_api(request: web.Request) -> web.Response:
    console = console_of(request)
    return web.json_response(await console.run(console.balancer.status))


@routes.get("/api/balancer/plan")
async def dry_run_api(request: web.Request) -> web.Response:
    console = console_of(request)
    return web.json_response(await console.run(console.balancer.dry_run))
