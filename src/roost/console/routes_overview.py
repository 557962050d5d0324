"""The overview: brokers (up or down, partitions led), the controller, keeper members and roles,
under-replicated and offline partitions, and the cluster's message rate."""

from __future__ import annotations

import asyncio
from typing import Any

from aiohttp import web
from confluent_kafka.admin import OffsetSpec

from roost.console.app import Console, console_of

routes = web.RouteTableDef()

MAX_RATE_PARTITIONS = 20_000  # past this, sampling every end offset costs more than the figure is worth


def sample_end_offsets(console: Console, partitions: list[tuple[str, int]]) -> None:
    if not console.history.due() or len(partitions) > MAX_RATE_PARTITIONS:
        return
    ends = console.kafka.offsets(partitions, OffsetSpec.latest())
    if all(end is not None for end in ends.values()):  # a gap would read as a drop in the rate
        console.history.record_offsets(sum(end for end in ends.values() if end is not None))


def overview(console: Console) -> dict[str, Any]:
    found = console.kafka.overview()
    metadata = console.kafka.metadata()
    partitions = [(name, index) for name, topic in metadata.topics.items() for index in topic.partitions]
    sample_end_offsets(console, partitions)
    rates = console.history.messages_per_second()
    found["messages_per_second"] = rates["v"][-1] if rates["v"] else None
    found["rate_history"] = rates
    found["rate_sampled"] = len(partitions) <= MAX_RATE_PARTITIONS
    return found


@routes.get("/")
async def overview_page(request: web.Request) -> web.Response:
    return console_of(request).page("overview.html", "Overview")


@routes.get("/api/overview")
async def overview_api(request: web.Request) -> web.Response:
    console = console_of(request)
    kafka = console.run(overview, console)
    if console.keeper is not None:
        found, members = await asyncio.gather(kafka, console.run(console.keeper.members))
    else:
        found, members = await kafka, []
    found["keepers"] = members
    found["read_only"] = console.settings.read_only
    return web.json_response(found)


@routes.get("/api/config")
async def config_api(request: web.Request) -> web.Response:
    settings = console_of(request).settings
    bounds = settings.bounds
    return web.json_response({"read_only": settings.read_only, "bootstrap": settings.bootstrap,
                              "zookeeper": settings.zookeeper,
                              "bounds": {"max_messages": bounds.max_messages, "max_scan_bytes": bounds.max_scan_bytes,
                                         "max_scan_messages": bounds.max_scan_messages,
                                         "max_seconds": bounds.max_seconds, "display_bytes": bounds.display_bytes}})

