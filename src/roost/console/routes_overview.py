"""The overview: brokers (up or down, partitions led), the controller, keeper members and roles,
under-replicated and offline partitions, the cluster's size on disk and its message and byte
rates."""

from __future__ import annotations

import asyncio
from typing import Any

from aiohttp import web

from roost.console.context import Console, console_of
from roost.console.sampling import sample_cluster

routes = web.RouteTableDef()


def overview(console: Console) -> dict[str, Any]:
    found = console.kafka.overview()
    sampled = sample_cluster(console, console.kafka.metadata(stale_ok=True))
    messages, sizes = console.history.messages_per_second(), console.history.bytes_per_second()
    found["messages_per_second"] = messages["v"][-1] if messages["v"] else None
    found["bytes_per_second"] = sizes["v"][-1] if sizes["v"] else None
    found["rate_history"] = messages
    found["bytes_history"] = sizes
    found["rate_sampled"] = sampled
    # False when no broker answers DescribeLogDirs (a non-Roost cluster without it): sizes are "—".
    found["sizes_known"] = console.topic_rates.sizes_known is not False
    found["size"] = console.history.last_size
    return found


async def overview_answer(console: Console) -> dict[str, Any]:
    kafka = console.run(overview, console)
    if console.keeper is not None:
        found, members = await asyncio.gather(kafka, console.run(console.keeper.members))
    else:
        found, members = await kafka, []
    found["keepers"] = members
    found["read_only"] = console.settings.read_only
    return found


@routes.get("/")
async def overview_page(request: web.Request) -> web.Response:
    console = console_of(request)
    first = await console.first_answer("/api/overview", overview_answer(console))
    return console.page("overview.html", "Overview", first)


@routes.get("/api/overview")
async def overview_api(request: web.Request) -> web.Response:
    return web.json_response(await overview_answer(console_of(request)))


@routes.get("/api/config")
async def config_api(request: web.Request) -> web.Response:
    settings = console_of(request).settings
    bounds = settings.bounds
    return web.json_response({"read_only": settings.read_only, "bootstrap": settings.bootstrap,
                              "zookeeper": settings.zookeeper,
                              "bounds": {"max_messages": bounds.max_messages, "max_scan_bytes": bounds.max_scan_bytes,
                                         "max_scan_messages": bounds.max_scan_messages,
                                         "max_seconds": bounds.max_seconds, "display_bytes": bounds.display_bytes}})

