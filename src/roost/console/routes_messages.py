"""Messages of a topic: browse and search (bounded), tail (the page polls with the positions the
last answer gave), and produce one (key, value, headers, partition)."""

from __future__ import annotations

import json
import urllib.parse

from aiohttp import web

from roost.console.browse import SEARCH_FIELDS, BrowseRequest
from roost.console.context import console_of, json_body
from roost.console.errors import bad_request
from roost.console.params import int_param, payload

routes = web.RouteTableDef()
TAIL_LIMIT = 200
DEFAULT_LIMIT = 50  # messages a browse returns unless asked otherwise; the page's form starts with it


@routes.get("/topics/{name}/messages")
async def messages_page(request: web.Request) -> web.Response:
    console = console_of(request)
    name = request.match_info["name"]
    # The browse pages/messages.js asks first, as its form starts: the newest, all partitions.
    path = (f"/api/topics/{urllib.parse.quote(name, safe='')}/messages?"
            + urllib.parse.urlencode({"partition": "all", "start": "newest", "limit": DEFAULT_LIMIT, "search": ""}))
    browse = BrowseRequest(topic=name, partition=None, start="newest", limit=DEFAULT_LIMIT)
    first = await console.first_answer(path, console.run(console.browser.browse, browse))
    return console.page("messages.html", f"Messages of {name}", first, topic=name, limit=DEFAULT_LIMIT)


def optional_partition(value: str | None) -> int | None:
    return None if value in (None, "", "all") else int_param(value, "partition", None, 0)


@routes.get("/api/topics/{name}/messages")
async def browse_api(request: web.Request) -> web.Response:
    console = console_of(request)
    query = request.query
    bounds = console.settings.bounds
    fields = tuple(f for f in query.get("search_in", ",".join(SEARCH_FIELDS)).split(",") if f)
    browse = BrowseRequest(
        topic=request.match_info["name"], partition=optional_partition(query.get("partition")),
        start=query.get("start", "newest"), position=int_param(query.get("position"), "position", 0),
        limit=int_param(query.get("limit"), "limit", DEFAULT_LIMIT, 1, bounds.max_messages),
        search=query.get("search", ""), search_in=fields or SEARCH_FIELDS)
    return web.json_response(await console.run(console.browser.browse, browse))


@routes.get("/api/topics/{name}/tail")
async def tail_api(request: web.Request) -> web.Response:
    console = console_of(request)
    after_text = request.query.get("after")
    after: dict[int, int] | None = None
    if after_text:
        try:
            parsed = json.loads(after_text)
            after = {int(k): int(v) for k, v in parsed.items()}
        except (ValueError, TypeError, AttributeError):
            raise bad_request("after must be a JSON object of partition to offset") from None
    answer = await console.run(console.browser.tail, request.match_info["name"],
                               optional_partition(request.query.get("partition")), after, TAIL_LIMIT)
    return web.json_response(answer)


@routes.post("/api/topics/{name}/messages")
async def produce_api(request: web.Request) -> web.Response:
    console = console_of(request)
    body = await json_body(request)
    encoding = body.get("encoding", "text")
    key = payload(body.get("key"), encoding, "key")
    value = payload(body.get("value"), encoding, "value")
    if value is not None and len(value) > console.settings.bounds.produce_bytes:
        raise bad_request(f"value is {len(value)} bytes; the console produces at most "
                          f"{console.settings.bounds.produce_bytes}")
    headers = []
    for header in body.get("headers") or []:
        if not isinstance(header, dict) or not isinstance(header.get("key"), str) or not header["key"]:
            raise bad_request("each header needs a key (a non-empty string) and a value")
        headers.append((header["key"], payload(header.get("value"), encoding, f"header {header['key']}") or b""))
    partition = optional_partition(None if body.get("partition") is None else str(body.get("partition")))
    answer = await console.run(console.kafka.produce, request.match_info["name"], partition, key, value, headers)
    return web.json_response(answer, status=201)
