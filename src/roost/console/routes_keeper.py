"""The keeper: members and roles, and a znode browser (children, data, stat, ACL) with create, set
and delete (set and delete name the version they saw: a change in between is refused), and a
server-sent event stream that says when a watched znode's data or children change."""

from __future__ import annotations

import asyncio
import contextlib
import threading
from typing import Any

from aiohttp import web

from roost.console.context import console_of, json_body
from roost.console.errors import bad_request
from roost.console.params import int_param, payload

routes = web.RouteTableDef()
WATCH_KEEPALIVE_S = 15.0
MAX_WATCH_S = 3600.0  # a watch stream ends after this; the page opens another


def _znode_path(body: dict[str, Any]) -> str:
    path = body.get("path")
    if not isinstance(path, str):
        raise bad_request("path is required")
    return path


def _znode_data(body: dict[str, Any]) -> bytes:
    return payload(body.get("data") or "", body.get("encoding", "text"), "data") or b""


@routes.get("/keeper")
async def keeper_page(request: web.Request) -> web.Response:
    return console_of(request).page("keeper.html", "Keeper")


@routes.get("/api/keeper/members")
async def members_api(request: web.Request) -> web.Response:
    console = console_of(request)
    keeper = console.need_keeper()
    return web.json_response({"members": await console.run(keeper.members)})


@routes.get("/api/keeper/node")
async def node_api(request: web.Request) -> web.Response:
    console = console_of(request)
    keeper = console.need_keeper()
    return web.json_response(await console.run(keeper.node, request.query.get("path", "/")))


@routes.post("/api/keeper/node")
async def create_api(request: web.Request) -> web.Response:
    console = console_of(request)
    keeper = console.need_keeper()
    body = await json_body(request)
    path, data = _znode_path(body), _znode_data(body)
    created = await console.run(keeper.create, path, data, bool(body.get("ephemeral")), bool(body.get("sequential")))
    return web.json_response({"created": created}, status=201)


@routes.put("/api/keeper/node")
async def set_api(request: web.Request) -> web.Response:
    console = console_of(request)
    keeper = console.need_keeper()
    body = await json_body(request)
    path, data = _znode_path(body), _znode_data(body)
    version = int_param(body.get("version"), "version", None, -1)
    return web.json_response({"stat": await console.run(keeper.set, path, data, version)})


@routes.delete("/api/keeper/node")
async def delete_api(request: web.Request) -> web.Response:
    console = console_of(request)
    keeper = console.need_keeper()
    body = await json_body(request)
    path = _znode_path(body)
    if body.get("confirm") is not True:
        raise bad_request(f"deleting {path} needs \"confirm\": true")
    version = int_param(body.get("version"), "version", None, -1)
    await console.run(keeper.delete, path, version)
    return web.json_response({"deleted": path})


@routes.get("/api/keeper/watch")
async def watch_api(request: web.Request) -> web.StreamResponse:
    """Server-sent events: `change` with `data` or `children` whenever the znode changes."""
    console = console_of(request)
    keeper = console.need_keeper()
    path = request.query.get("path", "/")
    changes: asyncio.Queue[str] = asyncio.Queue(maxsize=100)
    stopped = threading.Event()

    def notify(kind: str) -> None:
        with contextlib.suppress(asyncio.QueueFull):  # the page reloads the znode whole anyway
            changes.put_nowait(kind)

    await console.run(keeper.watch, path, asyncio.get_running_loop(), notify, stopped)
    response = web.StreamResponse(headers={"Content-Type": "text/event-stream", "Cache-Control": "no-cache"})
    await response.prepare(request)
    loop = asyncio.get_running_loop()
    ends = loop.time() + MAX_WATCH_S
    try:
        while loop.time() < ends:
            try:
                kind = await asyncio.wait_for(changes.get(), WATCH_KEEPALIVE_S)
                await response.write(f"event: change\ndata: {kind}\n\n".encode())
            except TimeoutError:
                await response.write(b": keepalive\n\n")
    except ConnectionResetError:  # the page went away
        pass
    finally:
        stopped.set()
    return response
