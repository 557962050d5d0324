"""Topics: the list (search, server-side paging; each shown topic's size and rates), one topic's partitions and configs; create,
add partitions, edit configs, delete (the API, like the page, wants the name typed again)."""

from __future__ import annotations

from typing import Any

from aiohttp import web

from roost.console.context import Console, console_of, json_body
from roost.console.errors import ConsoleError, bad_request
from roost.console.params import int_param
from roost.console.sampling import leader_sizes, sample_topics

routes = web.RouteTableDef()
DEFAULT_PAGE_SIZE = 50


def string_map(value: Any, name: str) -> dict[str, str]:
    if value is None:
        return {}
    if not isinstance(value, dict) or not all(isinstance(k, str) and isinstance(v, str | int | float | bool)
                                              for k, v in value.items()):
        raise bad_request(f"{name} must be an object of names to values")
    return {k: str(v).lower() if isinstance(v, bool) else str(v) for k, v in value.items()}


def topic_list_page(console: Console, search: str, page: int, size: int, internal: bool) -> dict[str, Any]:
    """The page first (from the cached Metadata), then sizes and rates for its topics only."""
    found = console.kafka.topic_page(search, page, size, internal)
    sample_topics(console, [row["name"] for row in found["topics"]])
    for row in found["topics"]:
        row.update(console.topic_rates.figures(row["name"]))
    found["sizes_known"] = console.topic_rates.sizes_known is not False
    return found


def topic_with_sizes(console: Console, name: str) -> dict[str, Any]:
    """One topic, each partition with its leader replica's size (one DescribeLogDirs per leader)."""
    found = console.kafka.topic(name)
    sizes = leader_sizes(console.kafka.metadata(), [name], console.settings.request_timeout_s)
    for partition in found["partitions"]:
        partition["size"] = None if sizes is None else sizes.get((name, partition["partition"]))
    return found


@routes.get("/topics")
async def topics_page(request: web.Request) -> web.Response:
    console = console_of(request)
    # The query pages/topics.js asks first: the first page, no search, no internal topics.
    path = f"/api/topics?search=&page=1&size={DEFAULT_PAGE_SIZE}&internal=false"
    first = await console.first_answer(path, console.run(topic_list_page, console, "", 1, DEFAULT_PAGE_SIZE, False))
    return console.page("topics.html", "Topics", first, replication=await console.run(default_replication, console))


def default_replication(console: Console) -> int:
    """The create form's replication factor: min(3, live brokers), what `roost up --brokers N`
    makes default.replication.factor (1 when the brokers cannot be asked now)."""
    try:
        return max(1, min(3, len(console.kafka.metadata(stale_ok=True).brokers)))
    except ConsoleError:
        return 1


@routes.get("/topics/{name}")
async def topic_page(request: web.Request) -> web.Response:
    name = request.match_info["name"]
    return console_of(request).page("topic.html", f"Topic {name}", topic=name)


@routes.get("/api/topics")
async def topics_api(request: web.Request) -> web.Response:
    console = console_of(request)
    query = request.query
    size = int_param(query.get("size"), "size", DEFAULT_PAGE_SIZE, 1, console.settings.bounds.page_size_limit)
    page = int_param(query.get("page"), "page", 1, 1)
    internal = query.get("internal", "false").lower() in ("1", "true", "yes")
    return web.json_response(await console.run(topic_list_page, console, query.get("search", ""), page, size, internal))


@routes.post("/api/topics")
async def create_topic_api(request: web.Request) -> web.Response:
    console = console_of(request)
    body = await json_body(request)
    name = body.get("name")
    if not isinstance(name, str) or not name:
        raise bad_request("name is required")
    partitions = int_param(body.get("partitions"), "partitions", 1, 1, 10_000)
    replication = int_param(body.get("replication"), "replication", 0, 0, 100) or None
    configs = string_map(body.get("configs"), "configs")
    await console.run(console.kafka.create_topic, name, partitions, replication, configs)
    return web.json_response({"created": name}, status=201)


@routes.get("/api/topics/{name}")
async def topic_api(request: web.Request) -> web.Response:
    console = console_of(request)
    return web.json_response(await console.run(topic_with_sizes, console, request.match_info["name"]))


@routes.post("/api/topics/{name}/partitions")
async def add_partitions_api(request: web.Request) -> web.Response:
    console = console_of(request)
    body = await json_body(request)
    total = int_param(body.get("total"), "total", None, 1, 100_000)
    await console.run(console.kafka.add_partitions, request.match_info["name"], total)
    return web.json_response({"partitions": total})


@routes.put("/api/topics/{name}/configs")
async def alter_configs_api(request: web.Request) -> web.Response:
    console = console_of(request)
    body = await json_body(request)
    to_delete = body.get("delete") or []
    if not isinstance(to_delete, list) or not all(isinstance(n, str) for n in to_delete):
        raise bad_request("delete must be a list of config names")
    await console.run(console.kafka.alter_configs, request.match_info["name"], string_map(body.get("set"), "set"),
                      to_delete)
    return web.json_response({"changed": True})


@routes.delete("/api/topics/{name}")
async def delete_topic_api(request: web.Request) -> web.Response:
    console = console_of(request)
    name = request.match_info["name"]
    body = await json_body(request)
    if body.get("confirm") != name:
        raise bad_request(f"to delete topic {name}, send {{\"confirm\": \"{name}\"}}: its name typed again")
    await console.run(console.kafka.delete_topic, name)
    return web.json_response({"deleted": name})
